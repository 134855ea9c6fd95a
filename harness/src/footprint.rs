//! The harness process's own memory, read between the stages of a run and never inside the timed
//! loop: its peak and current resident set, and the DMA-BUF buffers it holds (on Android the HTP's
//! buffers: ION / DMA-BUF heaps, shared with the DSP).
//!
//! On Linux and Android the figures are `VmHWM` and `VmRSS` of `/proc/self/status`. On Windows
//! (the harness under wine, the host HTP emulator) they come from `GetProcessMemoryInfo`: wine
//! answers it from its own process's `/proc/self/status`, while a file read of `/proc/self/status`
//! from a Windows program is served by wineserver and would describe wineserver.

use std::collections::BTreeSet;

use npugate_result::{DmaBufRecord, LeakCheck, MemoryRecord};

/// Peak and current resident memory of this process, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resident {
    /// Peak resident set since the process started.
    pub peak: u64,
    /// Resident set now.
    pub now: u64,
}

/// Where [`resident`] reads from.
pub const SOURCE: &str = if cfg!(windows) { "process_memory_info" } else { "proc_status" };

/// Reads this process's resident memory.
#[cfg(not(windows))]
pub fn resident() -> Result<Resident, String> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| format!("/proc/self/status: {e}"))?;
    let field = |name: &str| {
        let line =
            status.lines().find(|l| l.starts_with(name)).ok_or_else(|| format!("/proc/self/status has no {name}"))?;
        let kb: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .map_err(|_| format!("/proc/self/status: unreadable {line:?}"))?;
        Ok::<u64, String>(kb * 1024)
    };
    Ok(Resident { peak: field("VmHWM:")?, now: field("VmRSS:")? })
}

/// Reads this process's resident memory.
#[cfg(windows)]
pub fn resident() -> Result<Resident, String> {
    use windows_sys::Win32::System::ProcessStatus::{GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS};
    use windows_sys::Win32::System::Threading::GetCurrentProcess;
    let size = std::mem::size_of::<PROCESS_MEMORY_COUNTERS>() as u32;
    // SAFETY: the counters are plain integers; the struct is as large as `size` says.
    let mut counters: PROCESS_MEMORY_COUNTERS = unsafe { std::mem::zeroed() };
    counters.cb = size;
    // SAFETY: the pseudo-handle of the current process needs no closing; `counters` outlives the call.
    let ok = unsafe { GetProcessMemoryInfo(GetCurrentProcess(), &mut counters, size) };
    if ok == 0 {
        return Err(format!("GetProcessMemoryInfo failed: {}", std::io::Error::last_os_error()));
    }
    Ok(Resident { peak: counters.PeakWorkingSetSize as u64, now: counters.WorkingSetSize as u64 })
}

/// The DMA-BUF buffers this process holds through its file descriptors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DmaBufs {
    /// Their total size, bytes (each buffer once, however many descriptors refer to it).
    pub bytes: u64,
    /// How many.
    pub buffers: usize,
    /// Their exporters (`system`, `qcom,system`, …).
    pub exporters: BTreeSet<String>,
}

/// Reads the DMA-BUF buffers of this process from `/proc/self/fdinfo`: each DMA-BUF descriptor's
/// entry has `size:` and `exp_name:` (Linux ≥ 5.4; Android's ION buffers are DMA-BUFs too).
/// `Err` says why they cannot be known.
pub fn dmabufs() -> Result<DmaBufs, String> {
    if cfg!(windows) {
        return Err("DMA-BUF buffers are a Linux/Android notion; not read on Windows".into());
    }
    let entries = std::fs::read_dir("/proc/self/fdinfo").map_err(|e| format!("/proc/self/fdinfo: {e}"))?;
    let mut held = DmaBufs::default();
    let mut seen = BTreeSet::new();
    for entry in entries.flatten() {
        let fd = entry.file_name();
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.to_string_lossy())).unwrap_or_default();
        let link = link.to_string_lossy();
        if !(link.starts_with("/dmabuf") || link.contains("anon_inode:dmabuf")) {
            continue;
        }
        // A descriptor closed meanwhile has no entry any more: nothing held.
        let Ok(info) = std::fs::read_to_string(entry.path()) else { continue };
        let value = |key: &str| info.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_string());
        let Some(size) = value("size:").and_then(|v| v.parse::<u64>().ok()) else {
            return Err(format!(
                "the kernel does not show DMA-BUF sizes in /proc/self/fdinfo ({link} has no size: line; Linux ≥ 5.4 does)"
            ));
        };
        let id = value("ino:").unwrap_or_else(|| link.to_string());
        if seen.insert(id) {
            held.bytes += size;
            held.buffers += 1;
            held.exporters.extend(value("exp_name:"));
        }
    }
    Ok(held)
}

/// What is read right after the timed session is created, kept until the record is written.
#[derive(Debug, Clone, Default)]
pub struct AfterCreate {
    resident: Option<Resident>,
    dmabuf: Option<DmaBufs>,
}

/// Reads the memory right after the timed session was created.
pub fn after_create() -> AfterCreate {
    AfterCreate { resident: resident().ok(), dmabuf: dmabufs().ok() }
}

/// The record of a run: `created` read after session creation, the rest now (after the timed
/// runs). What cannot be read is a note.
pub fn record(created: &AfterCreate) -> MemoryRecord {
    let mut notes = Vec::new();
    let now = resident().map_err(|e| notes.push(format!("resident memory unknown: {e}"))).ok();
    let (dmabuf, dmabuf_absent) = match (dmabufs(), &created.dmabuf) {
        (Ok(runs), Some(create)) => (
            Some(DmaBufRecord {
                after_create_bytes: create.bytes,
                after_runs_bytes: runs.bytes,
                buffers: runs.buffers,
                exporters: runs.exporters.into_iter().collect(),
            }),
            None,
        ),
        (Ok(_), None) => (None, Some("DMA-BUF buffers could not be read after session creation".to_string())),
        (Err(why), _) => (None, Some(why)),
    };
    MemoryRecord {
        source: SOURCE.into(),
        peak_after_create_bytes: created.resident.map(|r| r.peak),
        peak_bytes: now.map(|r| r.peak),
        resident_bytes: now.map(|r| r.now),
        dmabuf,
        dmabuf_absent,
        leak_check: None,
        notes,
    }
}

/// Creates and drops a session `recreations` times with `create`, reading the memory still held
/// after each drop; the growth is from the first drop to the last.
pub fn leak_check<S>(recreations: u32, mut create: impl FnMut() -> anyhow::Result<S>) -> anyhow::Result<LeakCheck> {
    let mut check = LeakCheck { recreations, ..LeakCheck::default() };
    for attempt in 1..=recreations {
        drop(create().map_err(|e| e.context(format!("--leak-check: session re-creation {attempt}")))?);
        let held = resident().map_err(|e| anyhow::anyhow!("--leak-check: {e}"))?;
        check.resident_bytes.push(held.now);
        if let Ok(bufs) = dmabufs() {
            check.dmabuf_bytes.push(bufs.bytes);
        }
    }
    if let (Some(first), Some(last)) = (check.resident_bytes.first(), check.resident_bytes.last()) {
        check.growth_bytes = *last as i64 - *first as i64;
    }
    Ok(check)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_peak_at_least_its_resident_set() {
        let now = resident().unwrap();
        assert!(now.now > 1 << 20 && now.peak >= now.now, "{now:?}");
        // A test process holds no DMA-BUF: the read works and finds none.
        assert_eq!(dmabufs().unwrap(), DmaBufs::default());
    }

    #[test]
    fn a_leak_check_sees_memory_that_is_never_given_back() {
        let mut kept: Vec<Vec<u8>> = Vec::new();
        // Each "session" leaves 8 MiB behind, touched so that it is resident.
        let check = leak_check(4, || {
            kept.push(vec![1u8; 8 << 20]);
            Ok(())
        })
        .unwrap();
        assert_eq!(check.resident_bytes.len(), 4);
        assert!(check.growth_bytes >= 3 * (8 << 20) - (2 << 20), "{check:?}");
        let flat = leak_check(3, || Ok(vec![1u8; 8 << 20])).unwrap();
        assert!(flat.growth_bytes < 4 << 20, "{flat:?}");
    }
}
