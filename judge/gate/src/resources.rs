//! What a run cost besides time, as the gate judges it: the harness's peak memory and its growth
//! over session re-creations (`result.json` `memory`, the `max_peak_memory_mb` and
//! `max_memory_growth_mb` rules), and the energy per inference measured on a device from its
//! battery gauge (`energy.json`, `npugate.energy/1`, the `max_energy_mj` rule).

use npugate_result::energy::EnergyRecord;
use npugate_result::resources::MB;
use npugate_result::{MemoryRecord, RunResult};

use crate::check::{Check, CheckStatus};
use crate::rules::{RuleName, Rules};
use crate::units::{fmt_limit, Unit};

/// The memory and energy checks of a run: each rule that is set, judged on `run.memory` and
/// `energy`; unjudged without its figure (with what to pass to get it). On an emulated run they
/// are `not_applicable`: the figures are the emulator process's, not a device's.
pub fn checks(run: &RunResult, energy: Option<&EnergyRecord>, rules: &Rules) -> Vec<Check> {
    let memory = run.memory.as_ref();
    let mut out = Vec::new();
    if let Some(max) = rules.max_peak_memory_mb.filter(|_| rules.enabled(RuleName::MaxPeakMemoryMb)) {
        out.push(peak_check(memory, max));
    }
    if let Some(max) = rules.max_memory_growth_mb.filter(|_| rules.enabled(RuleName::MaxMemoryGrowthMb)) {
        out.push(growth_check(memory, max));
    }
    if let Some(max) = rules.max_energy_mj.filter(|_| rules.enabled(RuleName::MaxEnergyMj)) {
        out.push(energy_check(energy, max));
    }
    out
}

fn check(rule: RuleName, status: CheckStatus, measured: Option<f64>, limit: f64, unit: Unit, message: String) -> Check {
    Check { rule, status, measured, limit: Some(limit), unit, message, nodes: Vec::new(), clusters: None }
}

fn judged(ok: bool) -> CheckStatus {
    if ok {
        CheckStatus::Pass
    } else {
        CheckStatus::Fail
    }
}

fn peak_check(memory: Option<&MemoryRecord>, max: f64) -> Check {
    let rule = RuleName::MaxPeakMemoryMb;
    let Some(peak) = memory.and_then(|m| m.peak_bytes) else {
        let why = "the run recorded no peak memory (a harness before memory records, or /proc unreadable)";
        return check(rule, CheckStatus::Unjudged, None, max, Unit::Mb, format!("{rule}: {why}"));
    };
    let mb = peak as f64 / MB;
    let op = if mb <= max { "<=" } else { ">" };
    let dmabuf = memory
        .and_then(|m| m.dmabuf.as_ref())
        .filter(|d| d.buffers > 0)
        .map(|d| format!("; DMA-BUF {:.1} MiB in {} buffer(s) besides", d.after_runs_bytes as f64 / MB, d.buffers))
        .unwrap_or_default();
    let message = format!(
        "{rule}: peak resident memory {mb:.1} MiB {op} {} MiB (VmHWM of the harness process over session creation and the timed runs{dmabuf})",
        fmt_limit(max)
    );
    check(rule, judged(mb <= max), Some(mb), max, Unit::Mb, message)
}

fn growth_check(memory: Option<&MemoryRecord>, max: f64) -> Check {
    let rule = RuleName::MaxMemoryGrowthMb;
    let Some(leak) = memory.and_then(|m| m.leak_check.as_ref()) else {
        let message = format!("{rule}: needs a leak check of this run; pass --leak-check N (e.g. 5)");
        return check(rule, CheckStatus::Unjudged, None, max, Unit::Mb, message);
    };
    let mb = leak.growth_bytes as f64 / MB;
    let op = if mb <= max { "<=" } else { ">" };
    let message = format!(
        "{rule}: resident memory grew {mb:+.1} MiB {op} {} MiB over {} session re-creations (after the first drop → after the last)",
        fmt_limit(max),
        leak.recreations
    );
    check(rule, judged(mb <= max), Some(mb), max, Unit::Mb, message)
}

/// Judged on the interval: fails only when the whole interval (energy ± error) is above the limit.
fn energy_check(energy: Option<&EnergyRecord>, max: f64) -> Check {
    let rule = RuleName::MaxEnergyMj;
    let unjudged = |why: String| check(rule, CheckStatus::Unjudged, None, max, Unit::Mj, format!("{rule}: {why}"));
    let record =
        match energy {
            None => return unjudged(
                "no energy measured: energy per inference is measured on devices over adb with --energy-window SECONDS"
                    .into(),
            ),
            Some(record) => record,
        };
    let Some(m) = &record.measured else {
        return unjudged(format!("not measured: {}", record.not_measured.as_deref().unwrap_or("no reason given")));
    };
    let lower = m.energy_mj - m.error_mj;
    let ok = lower <= max;
    let op = if ok { "<=" } else { ">" };
    let message = format!(
        "{rule}: {:.3} mJ ± {:.3} per inference {op} {} mJ (judged on the interval's lower end; {})",
        m.energy_mj,
        m.error_mj,
        fmt_limit(max),
        m.method
    );
    check(rule, judged(ok), Some(m.energy_mj), max, Unit::Mj, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use npugate_result::energy::{EnergyMeasurement, GaugeResolution};
    use npugate_result::LeakCheck;

    fn measurement(energy_mj: f64, error_mj: f64) -> EnergyMeasurement {
        EnergyMeasurement {
            energy_mj,
            error_mj,
            method: "battery gauge".into(),
            gauge: "/sys/class/power_supply/battery".into(),
            busy_mw: 900.0,
            idle_mw: 100.0,
            window_s: 10.0,
            inferences: 100,
            idle_s: 10.0,
            samples: [100, 100],
            resolution: GaugeResolution::default(),
        }
    }

    #[test]
    fn memory_rules_read_the_peak_and_the_growth() {
        let memory = MemoryRecord {
            peak_bytes: Some(300 << 20),
            leak_check: Some(LeakCheck { recreations: 5, growth_bytes: 12 << 20, ..LeakCheck::default() }),
            ..MemoryRecord::default()
        };
        let peak = peak_check(Some(&memory), 256.0);
        assert_eq!((peak.status, peak.measured), (CheckStatus::Fail, Some(300.0)));
        assert!(peak.message.contains("peak resident memory 300.0 MiB > 256 MiB"), "{}", peak.message);
        assert_eq!(peak_check(Some(&memory), 512.0).status, CheckStatus::Pass);
        assert_eq!(peak_check(None, 1.0).status, CheckStatus::Unjudged);
        let growth = growth_check(Some(&memory), 10.0);
        assert_eq!(growth.status, CheckStatus::Fail);
        assert!(growth.message.contains("grew +12.0 MiB > 10 MiB over 5 session re-creations"), "{}", growth.message);
        let no_leak_check = growth_check(Some(&MemoryRecord::default()), 10.0);
        assert!(no_leak_check.message.contains("pass --leak-check N"), "{}", no_leak_check.message);
    }

    #[test]
    fn energy_is_judged_on_its_interval_and_unmeasured_energy_says_why() {
        let record = EnergyRecord::measured(measurement(8.0, 1.0));
        assert_eq!(energy_check(Some(&record), 7.5).status, CheckStatus::Pass, "7.0 mJ is possible");
        assert_eq!(energy_check(Some(&record), 6.5).status, CheckStatus::Fail);
        let charging = EnergyRecord::not_measured("the device was charging");
        let check = energy_check(Some(&charging), 6.5);
        assert_eq!(check.status, CheckStatus::Unjudged);
        assert!(check.message.contains("not measured: the device was charging"), "{}", check.message);
        assert!(energy_check(None, 1.0).message.contains("--energy-window"));
        assert!(
            record.describe().starts_with("8.000 mJ ± 1.000 per inference (800 mW over idle"),
            "{}",
            record.describe()
        );
    }
}
