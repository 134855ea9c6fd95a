//! Background load: whether something else kept the device busy while a run was timed. The host
//! records the device's busiest processes over the harness run (`device_state.json`); this turns
//! them into the `max_background_cpu_pct` check when the rule is set, and into a warning otherwise.
//! Other npugate harnesses seen on the device are always a warning. A device whose shell sees only
//! its own user's processes (Android's `/proc` is mounted `hidepid`; a shell outside the readproc
//! group) cannot pass the check: it is `not_applicable` with why, unless a process it did see was
//! over the limit.

use serde::{Deserialize, Serialize};

use crate::check::{Check, CheckStatus};
use crate::rules::{RuleName, Rules};
use crate::units::{fmt_limit, Unit};

/// Without the rule, a process busier than this (percent of one core) is a warning.
pub const WARN_BACKGROUND_CPU_PCT: f64 = 25.0;

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

/// What `load` says, as the verdict takes it: the `max_background_cpu_pct` check when the rule is
/// set (unjudged without a load record), and warnings — a busy process when the rule is not set,
/// each other harness always.
pub fn assess(rules: &Rules, load: Option<&BackgroundLoad>) -> (Option<Check>, Vec<String>) {
    let rule = RuleName::MaxBackgroundCpuPct;
    let mut warnings = Vec::new();
    if let Some(load) = load {
        for harness in &load.other_harnesses {
            warnings.push(format!(
                "another npugate harness ran on the device around this run: {}; its work may have slowed this one",
                harness.describe()
            ));
        }
    }
    let busiest = load.and_then(|l| l.busiest.iter().max_by(|a, b| a.cpu_pct.total_cmp(&b.cpu_pct)));
    let blind = load.and_then(|l| l.blind.as_deref());
    let Some(limit) = rules.max_background_cpu_pct.filter(|_| rules.enabled(rule)) else {
        if let (Some(load), Some(process)) = (load, busiest.filter(|p| p.cpu_pct >= WARN_BACKGROUND_CPU_PCT)) {
            warnings.push(format!(
                "background load: {} {}; the latencies may be inflated (the rule {rule} fails such runs)",
                process.describe(),
                load.window
            ));
        }
        if let Some(why) = blind {
            warnings.push(format!("background load unknown: {why}"));
        }
        return (None, warnings);
    };
    let (status, measured, message) = match (load, busiest) {
        (None, _) => (
            CheckStatus::Unjudged,
            None,
            format!("{rule}: no background load recorded for this run (device runs record it in device_state.json)"),
        ),
        (Some(load), Some(process)) if process.cpu_pct > limit => {
            let seen = if blind.is_some() { " (of the processes the device's shell could see)" } else { "" };
            let message = format!(
                "{rule}: busiest other process{seen} {} {} (> {}%)",
                process.describe(),
                load.window,
                fmt_limit(limit)
            );
            (CheckStatus::Fail, Some(process.cpu_pct), message)
        }
        (Some(_), _) if blind.is_some() => {
            let why = blind.unwrap_or_default();
            (CheckStatus::NotApplicable, None, format!("{rule}: not applicable: {why}"))
        }
        (Some(load), None) => (
            CheckStatus::Pass,
            Some(0.0),
            format!("{rule}: no other process was busy {} (0% <= {}%)", load.window, fmt_limit(limit)),
        ),
        (Some(load), Some(process)) => {
            let message = format!(
                "{rule}: busiest other process {} {} (<= {}%)",
                process.describe(),
                load.window,
                fmt_limit(limit)
            );
            (CheckStatus::Pass, Some(process.cpu_pct), message)
        }
    };
    let check = Check {
        rule,
        status,
        measured,
        limit: Some(limit),
        unit: Unit::Percent,
        message,
        nodes: Vec::new(),
        clusters: None,
    };
    (Some(check), warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(overrides: &[&str]) -> Rules {
        Rules::load(None, &overrides.iter().map(|r| r.to_string()).collect::<Vec<_>>()).unwrap()
    }

    fn busy(cpu_pct: f64) -> BackgroundLoad {
        BackgroundLoad {
            window: "during the 3.0 s harness run".into(),
            busiest: vec![ProcessCpu::single(7, "kswapd0", 3.0), ProcessCpu::single(812, "cc1plus", cpu_pct)],
            other_harnesses: vec![],
            blind: None,
            state_changes: vec![],
        }
    }

    #[test]
    fn a_busy_process_is_a_warning_without_the_rule_and_a_failure_with_it() {
        let (check, warnings) = assess(&rules(&[]), Some(&busy(97.0)));
        assert!(check.is_none());
        assert!(
            warnings[0].contains("cc1plus (pid 812) at 97% of a core during the 3.0 s harness run"),
            "{warnings:?}"
        );
        assert!(assess(&rules(&[]), Some(&busy(10.0))).1.is_empty());

        let (check, _) = assess(&rules(&["max_background_cpu_pct=20"]), Some(&busy(97.0)));
        let check = check.unwrap();
        assert_eq!((check.status, check.measured), (CheckStatus::Fail, Some(97.0)));
        assert!(
            check.message.contains("cc1plus (pid 812) at 97% of a core during the 3.0 s harness run (> 20%)"),
            "{}",
            check.message
        );
        let (calm, _) = assess(&rules(&["max_background_cpu_pct=20"]), Some(&busy(10.0)));
        assert_eq!(calm.unwrap().status, CheckStatus::Pass);
    }

    #[test]
    fn without_a_load_record_the_rule_is_unjudged_and_other_harnesses_are_warned_about() {
        let (unknown, _) = assess(&rules(&["max_background_cpu_pct=20"]), None);
        assert_eq!(unknown.unwrap().status, CheckStatus::Unjudged);
        let load =
            BackgroundLoad { other_harnesses: vec![ProcessCpu::single(99, "npugate-harness", 180.0)], ..busy(1.0) };
        let (_, warnings) = assess(&rules(&[]), Some(&load));
        assert!(warnings[0].contains("another npugate harness") && warnings[0].contains("pid 99"), "{warnings:?}");
        let (disabled, _) =
            assess(&rules(&["max_background_cpu_pct=20", "disable=[\"max_background_cpu_pct\"]"]), None);
        assert!(disabled.is_none());
    }

    #[test]
    fn a_sample_blind_to_other_users_never_passes_silently() {
        let why = "the device's shell sees only its own processes";
        let blind = |cpu_pct: f64| BackgroundLoad { blind: Some(why.into()), ..busy(cpu_pct) };
        let (check, warnings) = assess(&rules(&["max_background_cpu_pct=20"]), Some(&blind(10.0)));
        let check = check.unwrap();
        assert_eq!((check.status, check.measured), (CheckStatus::NotApplicable, None));
        assert!(check.message.contains(why), "{}", check.message);
        assert!(warnings.is_empty(), "{warnings:?}");
        let (check, _) = assess(&rules(&["max_background_cpu_pct=20"]), Some(&blind(97.0)));
        let check = check.unwrap();
        assert_eq!(check.status, CheckStatus::Fail, "what it did see was too busy");
        assert!(check.message.contains("of the processes the device's shell could see"), "{}", check.message);
        let (check, warnings) = assess(&rules(&[]), Some(&BackgroundLoad { busiest: vec![], ..blind(0.0) }));
        assert!(check.is_none());
        assert_eq!(warnings, [format!("background load unknown: {why}")]);
    }
}
