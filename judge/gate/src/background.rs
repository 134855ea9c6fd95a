//! Background load: whether something else kept the device busy while a run was timed. The host
//! records the device's busiest processes over the harness run (`device_state.json`); this turns
//! them into the `max_background_cpu_pct` check when the rule is set, and into a warning otherwise.
//! Other npugate harnesses seen on the device are always a warning. A device whose shell sees only
//! its own user's processes (Android's `/proc` is mounted `hidepid`; a shell outside the readproc
//! group) cannot pass the check: it is `not_applicable` with why, unless a process it did see was
//! over the limit.

use npugate_result::background::BackgroundLoad;

use crate::check::{Check, CheckStatus};
use crate::rules::{RuleName, Rules};
use crate::units::{fmt_limit, Unit};

/// Without the rule, a process busier than this (percent of one core) is a warning.
pub const WARN_BACKGROUND_CPU_PCT: f64 = 25.0;

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
    use npugate_result::background::ProcessCpu;

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
