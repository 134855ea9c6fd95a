//! The latency rules (`min_runs`, `cv_pct`, `median_ms`, `p95_ms`, `p99_ms`) and the latency
//! warnings, judged on what the model did: the runs a busy CPU slowed are set aside first, and a
//! cause is named only where it was measured (see [`crate::machine`]).

use npugate_result::RunResult;

use crate::check::{check, pass_or_fail, unjudged, Check, CheckStatus};
use crate::machine::Machine;
use crate::rules::limit;
use crate::rules::{RuleName, Rules};
use crate::stats::{self, LatencyStats};
use crate::units::{fmt_limit, fmt_ms, fmt_pct, Unit};

/// A first inference this many times the median is reported as a slow cold start.
const SLOW_FIRST_RUN_FACTOR: f64 = 2.0;

/// `68% of runs at 8.10 ms, 32% at 24.6 ms` for a bimodal series.
pub fn cluster_sentence(stats: &LatencyStats) -> Option<String> {
    stats.bimodal_split().map(|s| {
        format!(
            "bimodal: {:.0}% of runs at {}, {:.0}% at {}",
            s.fast.share_pct,
            fmt_ms(s.fast.median_ns),
            s.slow.share_pct,
            fmt_ms(s.slow.median_ns)
        )
    })
}

/// The latency rules on `judged`, the statistics of the runs not set aside. `min_runs` counts
/// the runs asked for (not those the harness added to replace contended ones); a rule the whole run had enough runs for but its clean runs do not is judged
/// on `all` the runs when they pass it (the set-aside runs were only slowed: they cannot have
/// hidden a failure) and is not judged otherwise (the machine); one the whole run had too few runs
/// for fails (the settings).
pub(crate) fn latency_checks(
    judged: Option<&LatencyStats>,
    all: Option<&LatencyStats>,
    machine: &Machine<'_>,
    rules: &Rules,
) -> Vec<Check> {
    let ms_rules = [
        (RuleName::MedianMs, rules.median_ms, 50u8),
        (RuleName::P95Ms, rules.p95_ms, 95),
        (RuleName::P99Ms, rules.p99_ms, 99),
    ];
    let mut out = Vec::new();
    if let Some(min) = limit(rules, RuleName::MinRuns, rules.min_runs) {
        let n = machine.asked_runs();
        let message = if n >= min {
            format!("{n} runs >= {min}")
        } else {
            format!("min_runs: {n} runs < {min}; rerun with {}", machine.more_runs(min))
        };
        out.push(check(RuleName::MinRuns, pass_or_fail(n >= min), Some(n as f64), min as f64, Unit::Runs, message));
    }
    if let Some(max) = limit(rules, RuleName::CvPct, rules.cv_pct) {
        out.push(match judged {
            None => unjudged(RuleName::CvPct, max, Unit::Percent, "cv_pct: the run has no timed runs".into()),
            Some(s) => with_cause(cv_check(s, all, max, machine), s, machine),
        });
    }
    for (rule, value, percentile) in ms_rules {
        let Some(max) = limit(rules, rule, value) else { continue };
        out.push(match judged {
            None => unjudged(rule, max, Unit::Ms, format!("{rule}: the run has no timed runs")),
            Some(s) => with_cause(percentile_check(s, all, rule, percentile, max, machine), s, machine),
        });
    }
    out
}

/// `3 outlier run(s) (2%) near 1.65 ms` when a small, cleanly separated slow cluster exists but is
/// too small to call the series bimodal.
fn outlier_sentence(stats: &LatencyStats) -> Option<String> {
    let m = stats.modality.as_ref().filter(|m| !m.bimodal)?;
    let slow = &m.split.slow;
    (m.split.ashman_d > stats::MIN_ASHMAN_D && slow.share_pct < stats::MIN_CLUSTER_SHARE_PCT)
        .then(|| format!("{} outlier run(s) ({:.0}%) near {}", slow.runs, slow.share_pct, fmt_ms(slow.median_ns)))
}

/// Explains a failing latency check: the two clusters of a bimodal series, or its outliers.
pub(crate) fn with_clusters(mut check: Check, stats: &LatencyStats) -> Check {
    if check.status != CheckStatus::Fail {
        return check;
    }
    if let (Some(split), Some(sentence)) = (stats.bimodal_split(), cluster_sentence(stats)) {
        check.message = format!("{}; {sentence}", check.message);
        check.clusters = Some(split.clone());
    } else if let Some(sentence) = outlier_sentence(stats) {
        check.message = format!("{}; {sentence}", check.message);
    }
    check
}

/// Explains a failing latency rule with its clusters and their measured cause (or the drift's),
/// and leaves it not judged when the device's state changed with every node on the preferred EP.
fn with_cause(check: Check, stats: &LatencyStats, machine: &Machine<'_>) -> Check {
    if check.status != CheckStatus::Fail {
        return check;
    }
    let mut check = with_clusters(check, stats);
    if let Some(split) = stats.bimodal_split() {
        check.message = format!("{}: {}", check.message, machine.bimodal_cause(split));
    } else if let Some(drift) = stats.drift.as_ref().filter(|d| d.is_notable()) {
        check.message = format!("{}; drifted {:+.1}%: {}", check.message, drift.change_pct, machine.drift_cause(drift));
    }
    machine.dominated(check)
}

/// A rule the runs asked for were too few for: it fails, with the runs needed.
fn too_few_runs(rule: RuleName, machine: &Machine<'_>, needed: usize, limit: f64, unit: Unit, what: &str) -> Check {
    let n = machine.asked_runs();
    let has = match machine.all_runs() {
        all if all > n => {
            format!("this run asked for {n} ({all} timed, the extra ones replacing runs that waited for a CPU)")
        }
        _ => format!("this run has {n}"),
    };
    let message =
        format!("{rule}: {what} needs at least {needed} runs, {has}; rerun with {}", machine.more_runs(needed));
    check(rule, CheckStatus::Fail, None, limit, unit, message)
}

/// What a rule is judged on: the clean runs, every run (the clean runs were too few, but every run
/// passes), or nothing (`Err`: the check that says why).
enum Judged<'a> {
    /// The runs not set aside.
    Clean(&'a LatencyStats),
    /// Every run, the set-aside ones included: the clean runs were too few for the rule.
    Every(&'a LatencyStats),
}

impl<'a> Judged<'a> {
    /// The statistics the rule reads.
    fn stats(&self) -> &'a LatencyStats {
        match self {
            Judged::Clean(s) | Judged::Every(s) => s,
        }
    }

    /// The note after `N=…`: the runs set aside, or that every run was judged.
    fn note(&self, machine: &Machine<'_>) -> String {
        match self {
            Judged::Clean(_) => machine.set_aside_note(),
            Judged::Every(_) => format!(
                "; every run, the {} slowed by waiting for a CPU included: too few clean runs to judge alone, \
                 and a pass with the slowed runs is a pass without them",
                machine.set_aside()
            ),
        }
    }
}

/// What to judge a rule on when `judged` has fewer than `needed` runs: a failure when the runs
/// asked for were too few (whatever the harness added to replace contended ones); every run when the set-aside runs took it below and every run `passes`; else not
/// judged.
#[allow(clippy::too_many_arguments)]
fn judged_on<'a>(
    s: &'a LatencyStats,
    all: Option<&'a LatencyStats>,
    needed: usize,
    rule: RuleName,
    limit: f64,
    unit: Unit,
    what: &str,
    machine: &Machine<'_>,
    passes: impl Fn(&LatencyStats) -> bool,
) -> Result<Judged<'a>, Box<Check>> {
    match (machine.asked_runs() < needed, s.n < needed) {
        (true, _) => Err(Box::new(too_few_runs(rule, machine, needed, limit, unit, what))),
        (false, true) => match all.filter(|all| all.n >= needed && passes(all)) {
            Some(all) => Ok(Judged::Every(all)),
            None => Err(Box::new(machine.too_few_clean(rule, needed, limit, unit, what))),
        },
        (false, false) => Ok(Judged::Clean(s)),
    }
}

fn cv_check(clean: &LatencyStats, all: Option<&LatencyStats>, max: f64, machine: &Machine<'_>) -> Check {
    let rule = RuleName::CvPct;
    let what = "a CV limit";
    let passes = |s: &LatencyStats| stats::model_cv_pct(s) <= max;
    let judged = match judged_on(clean, all, stats::MIN_RUNS_FOR_CV, rule, max, Unit::Percent, what, machine, passes) {
        Ok(judged) => judged,
        Err(check) => return *check,
    };
    let s = judged.stats();
    let cv = stats::model_cv_pct(s);
    let ok = cv <= max;
    let op = if ok { "<=" } else { ">" };
    let floor = if s.cv_pct - cv >= 0.05 {
        format!(
            "; {} measured, less the clock's and scheduler's floor of {} stdev",
            fmt_pct(s.cv_pct),
            fmt_ms(stats::TIMER_JITTER_FLOOR_NS)
        )
    } else {
        String::new()
    };
    let message = format!(
        "cv_pct{} {} {op} {}% (stdev {}, mean {}, N={}{}{floor})",
        machine.cv_label(),
        fmt_pct(cv),
        fmt_limit(max),
        fmt_ms(s.stdev_ns),
        fmt_ms(s.mean_ns),
        s.n,
        judged.note(machine)
    );
    check(rule, pass_or_fail(ok), Some(cv), max, Unit::Percent, message)
}

fn percentile_check(
    clean: &LatencyStats,
    all: Option<&LatencyStats>,
    rule: RuleName,
    percentile: u8,
    max_ms: f64,
    machine: &Machine<'_>,
) -> Check {
    let needed = if percentile == 50 { 1 } else { stats::min_runs_for_percentile(f64::from(percentile)) };
    let what = format!("a p{percentile} limit");
    let value = |s: &LatencyStats| s.percentile_ns(percentile).unwrap_or(s.max_ns);
    let passes = |s: &LatencyStats| value(s) / 1e6 <= max_ms;
    let judged = match judged_on(clean, all, needed, rule, max_ms, Unit::Ms, &what, machine, passes) {
        Ok(judged) => judged,
        Err(check) => return *check,
    };
    let s = judged.stats();
    let value_ns = value(s);
    let value_ms = value_ns / 1e6;
    let ok = value_ms <= max_ms;
    let op = if ok { "<=" } else { ">" };
    let name = if percentile == 50 { "median".to_string() } else { format!("p{percentile}") };
    let ci = if percentile == 50 {
        format!(" (95% CI {}–{})", fmt_ms(s.median_ci.lower), fmt_ms(s.median_ci.upper))
    } else {
        String::new()
    };
    let message = format!(
        "{rule}: {name} {}{ci} {op} {} ms (N={}{})",
        fmt_ms(value_ns),
        fmt_limit(max_ms),
        s.n,
        judged.note(machine)
    );
    check(rule, pass_or_fail(ok), Some(value_ms), max_ms, Unit::Ms, message)
}

/// The latency warnings: the contention and the runs set aside, drift and bimodality with their
/// measured cause, a slow cold start. An emulated run's latency is the host's time: nothing is said
/// of its causes.
pub(crate) fn latency_warnings(
    run: &RunResult,
    all: Option<&LatencyStats>,
    judged: Option<&LatencyStats>,
    machine: &Machine<'_>,
) -> Vec<String> {
    let mut out = Vec::new();
    let Some(s) = judged else { return out };
    let emulated = run.execution.emulated.is_some();
    if !emulated {
        out.extend(machine.contention_warning());
        out.extend(run.timings.extension.as_ref().map(|e| format!("CPU contention: the harness {}", e.sentence())));
        let judged_bimodal = s.bimodal_split().is_some();
        if let Some(sentence) = all.filter(|_| machine.set_aside() > 0 && !judged_bimodal).and_then(cluster_sentence) {
            out.push(format!("latency was {sentence}: the slow runs waited for a CPU and were set aside"));
        }
        if let Some(d) = s.drift.as_ref().filter(|d| d.is_notable()) {
            out.push(format!(
                "latency drifted {:+.1}% within the run (first third median {}, last third {}): {}",
                d.change_pct,
                fmt_ms(d.first_third_median_ns),
                fmt_ms(d.last_third_median_ns),
                machine.drift_cause(d)
            ));
        }
        if let (Some(split), Some(sentence)) = (s.bimodal_split(), cluster_sentence(s)) {
            out.push(format!("latency is {sentence}: {}", machine.bimodal_cause(split)));
        }
    }
    let first = run.timings.first_inference_ns as f64;
    if s.median_ns > 0.0 && first >= SLOW_FIRST_RUN_FACTOR * s.median_ns {
        out.push(format!(
            "the first inference took {} ({:.1}× the median): cold start, excluded from the statistics",
            fmt_ms(first),
            first / s.median_ns
        ));
    }
    out
}
