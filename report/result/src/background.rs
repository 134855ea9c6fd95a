//! What else ran on a device around a run: the busiest processes the host sampled over the
//! harness run (`device_state.json`) and the load as the gate's `max_background_cpu_pct` check reads it.

use serde::{Deserialize, Serialize};

/// Pids named one by one in [`ProcessCpu::describe`] before "…".
const NAMED_PIDS: usize = 3;

/// A process — or the processes of one name together — and the CPU used over a window, in
/// percent of one core (200 = two cores busy).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessCpu {
    /// Its process id on the device (of several of one name: the busiest one's).
    pub pid: u32,
    /// Its name (the kernel's `comm`, at most 15 characters).
    pub name: String,
    /// Its CPU share over the window, percent of one core (of several: their sum).
    pub cpu_pct: f64,
    /// The other processes of this name whose shares `cpu_pct` includes, busiest first (two CPU
    /// burners `sh` are one entry `sh ×2`); empty for a single process.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub same_name: Vec<u32>,
}

impl ProcessCpu {
    /// One process's share.
    pub fn single(pid: u32, name: &str, cpu_pct: f64) -> ProcessCpu {
        ProcessCpu { pid, name: name.into(), cpu_pct, same_name: Vec::new() }
    }

    /// Processes of this name summed into this entry.
    pub fn processes(&self) -> usize {
        1 + self.same_name.len()
    }

    /// `cc1plus (pid 812) at 97% of a core`; `sh ×2 (pid 41, 42) at 180% of a core`.
    pub fn describe(&self) -> String {
        if self.same_name.is_empty() {
            return format!("{} (pid {}) at {:.0}% of a core", self.name, self.pid, self.cpu_pct);
        }
        let pids: Vec<String> =
            std::iter::once(&self.pid).chain(&self.same_name).take(NAMED_PIDS).map(u32::to_string).collect();
        let more = if self.processes() > NAMED_PIDS { ", …" } else { "" };
        format!("{} ×{} (pid {}{more}) at {:.0}% of a core", self.name, self.processes(), pids.join(", "), self.cpu_pct)
    }
}

/// What else ran on the device around a run, as the gate reads it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BackgroundLoad {
    /// The window the shares were measured over, as a phrase (`during the 12.3 s harness run`).
    pub window: String,
    /// Other processes, busiest first.
    pub busiest: Vec<ProcessCpu>,
    /// Other npugate harnesses seen on the device just before or just after the run.
    pub other_harnesses: Vec<ProcessCpu>,
    /// Why other users' processes were invisible to the sample, when they were (then `busiest`
    /// holds only the shell user's own processes).
    pub blind: Option<String>,
    /// How the device's state changed during the run, one sentence each (the hottest sensor rose,
    /// a CPU's clock dropped or changed, a governor changed); empty when steady or unknown.
    pub state_changes: Vec<String>,
}
