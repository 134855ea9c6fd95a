//! What a run cost besides time: the memory the harness process held (`memory`) and, on a device
//! measured for energy, the window of back-to-back inferences the battery gauge was read over
//! (`energy_window`; the host turns the gauge's samples into energy per inference).

use serde::{Deserialize, Serialize};

/// The harness process's memory, read outside every timed interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MemoryRecord {
    /// Where the figures come from: `proc_status` (`VmHWM`/`VmRSS` of `/proc/self/status`) or
    /// `process_memory_info` (Windows' `GetProcessMemoryInfo`; under wine the harness's own process).
    pub source: String,
    /// Peak resident memory right after the timed session was created, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_after_create_bytes: Option<u64>,
    /// Peak resident memory of the whole run up to the end of the timed runs, bytes (read after the
    /// loop): what the `max_peak_memory_mb` rule reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<u64>,
    /// Resident memory after the timed runs, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident_bytes: Option<u64>,
    /// DMA-BUF memory the process held (on Android: ION/DMA-BUF heaps, where the HTP's buffers
    /// live), when the kernel shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dmabuf: Option<DmaBufRecord>,
    /// Why `dmabuf` is absent (the kernel does not show the sizes of a process's DMA-BUFs, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dmabuf_absent: Option<String>,
    /// `--leak-check N`: the session created and dropped N more times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leak_check: Option<LeakCheck>,
    /// Why a figure could not be read, one sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// DMA-BUF buffers held through the process's file descriptors (`/proc/self/fdinfo`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DmaBufRecord {
    /// Bytes held right after the timed session was created.
    pub after_create_bytes: u64,
    /// Bytes held after the timed runs.
    pub after_runs_bytes: u64,
    /// Buffers held after the timed runs.
    pub buffers: usize,
    /// Their exporters (`system`, `qcom,system`, …), each once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exporters: Vec<String>,
}

/// Memory across session re-creations: after each, the session is dropped and the memory still
/// held is read. A session that gives back what it took leaves the figures flat.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LeakCheck {
    /// Sessions created and dropped.
    pub recreations: u32,
    /// Resident memory after each drop, bytes.
    pub resident_bytes: Vec<u64>,
    /// DMA-BUF bytes held after each drop (empty where the kernel does not show them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dmabuf_bytes: Vec<u64>,
    /// Resident growth from the first drop to the last, bytes (negative: memory was given back):
    /// what the `max_memory_growth_mb` rule reads. The first re-creation is the base, so one-time
    /// allocations (caches, the EP's libraries) are not counted as a leak.
    pub growth_bytes: i64,
}

/// The back-to-back inferences run for the energy measurement, timed on the clock of the
/// device's `/proc/uptime` (the gauge sampler's clock).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EnergyWindow {
    /// Seconds requested (`--energy-window`).
    pub requested_s: f64,
    /// `/proc/uptime` when the first inference of the window started, seconds.
    pub start_uptime_s: f64,
    /// `/proc/uptime` when the last one ended, seconds.
    pub end_uptime_s: f64,
    /// Inferences run in the window.
    pub inferences: u64,
}

impl EnergyWindow {
    /// Seconds the window lasted.
    pub fn seconds(&self) -> f64 {
        self.end_uptime_s - self.start_uptime_s
    }
}

/// One megabyte as the memory figures are shown and judged (MiB).
pub const MB: f64 = 1024.0 * 1024.0;
