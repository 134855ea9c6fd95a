//! The `max_slowdown_pct` rule of a comparison, decided or said undecided: the paired ratio B/A of
//! each round's clean runs (the runs that waited for a CPU set aside, as `npugate run` sets them
//! aside), its sign-test interval at the current look's level ([`stats::look_alpha`]), and the
//! three outcomes — PASS when the interval lies wholly below the limit, FAIL when wholly above,
//! else undecided: the session measures more rounds, and only when its budget ends is the rule
//! NOT JUDGED, naming the interval, the rounds it would need and the measured cause.

use npugate_result::RunResult;
use serde::{Deserialize, Serialize};

use crate::check::{check, unjudged, Check, CheckStatus};
use crate::rules::RuleName;
use crate::stats::{self, PairedRatio};
use crate::units::Unit;

/// A side of a round needs this many runs left after the set-aside ones for its median to count;
/// a round with fewer on either side is set aside whole.
pub const MIN_CLEAN_RUNS_PER_ROUND: usize = 3;

/// Where a sequential comparison stands after a look.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The interval lies wholly below the limit: PASS.
    Below,
    /// The interval lies wholly above the limit: FAIL.
    Above,
    /// The interval reaches the limit, or too few rounds for the look's level: measure more.
    Undecided,
}

/// The sequential record of a comparison's slowdown rule (`sequential` in `npugate.compare/1`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Sequential {
    /// The look this verdict is (1, 2, …): how often the interval was computed in the session.
    pub look: usize,
    /// This look's error, α/(look(look+1)) of α = 5%: the interval's level is at least 1 − alpha.
    pub alpha: f64,
    /// The limit as a ratio, 1 + max_slowdown_pct/100.
    pub limit_ratio: f64,
    /// Where the interval lies against the limit.
    pub decision: Decision,
    /// Rounds paired (both sides with enough clean runs).
    pub rounds_paired: usize,
    /// Rounds set aside whole: a side had fewer than [`MIN_CLEAN_RUNS_PER_ROUND`] clean runs.
    pub rounds_set_aside: usize,
    /// Timed runs set aside for their CPU wait, baseline's and candidate's.
    pub runs_set_aside: [usize; 2],
    /// Timed runs in all, baseline's and candidate's.
    pub runs: [usize; 2],
    /// About how many rounds in all would decide it, when undecided and the estimate is off the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds_needed: Option<usize>,
    /// Why no more rounds were measured, when the session stopped undecided (its time budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

impl Sequential {
    /// `6 of 400 baseline runs and 9 of 400 candidate runs set aside (CPU wait)`, or nothing.
    pub fn set_aside_phrase(&self) -> Option<String> {
        let [a, b] = self.runs_set_aside;
        let rounds = match self.rounds_set_aside {
            0 => String::new(),
            n => format!(", {n} round(s) set aside whole (under {MIN_CLEAN_RUNS_PER_ROUND} clean runs on a side)"),
        };
        (a + b > 0 || self.rounds_set_aside > 0).then(|| {
            format!(
                "{a} of {} baseline runs and {b} of {} candidate runs waited for a CPU long enough to explain why \
                 they were slow and were set aside{rounds}",
                self.runs[0], self.runs[1]
            )
        })
    }
}

/// One round's clean latencies of both sides, or `None` when a side has too few.
fn clean_round(baseline: &RunResult, candidate: &RunResult) -> Option<(f64, f64)> {
    let median = |run: &RunResult| {
        let clean = run.timings.clean_latencies();
        (clean.len() >= MIN_CLEAN_RUNS_PER_ROUND.min(run.timings.latencies_ns.len()).max(1))
            .then(|| stats::median(&clean.iter().map(|&ns| ns as f64).collect::<Vec<_>>()))
            .flatten()
    };
    Some((median(baseline)?, median(candidate)?))
}

/// The paired ratio of `rounds` (baseline, candidate) at `look` and the record of what was set aside;
/// the ratio is `None` when no round has clean runs on both sides.
pub fn paired_clean(
    rounds: &[(&RunResult, &RunResult)],
    look: usize,
    limit_ratio: f64,
) -> (Option<PairedRatio>, Sequential) {
    let alpha = stats::look_alpha(look);
    let mut ratios = Vec::new();
    let (mut runs, mut set_aside, mut rounds_set_aside) = ([0, 0], [0, 0], 0);
    for (a, b) in rounds {
        for (side, run) in [a, b].into_iter().enumerate() {
            runs[side] += run.timings.latencies_ns.len();
            set_aside[side] += run.timings.contention().map_or(0, |c| c.contended.len());
        }
        match clean_round(a, b) {
            Some((a, b)) if a > 0.0 => ratios.push(b / a),
            _ => rounds_set_aside += 1,
        }
    }
    let paired = PairedRatio::of(ratios, alpha);
    let decision = match &paired {
        Some(p) if p.holds_at(alpha) && p.ci.upper < limit_ratio => Decision::Below,
        Some(p) if p.holds_at(alpha) && p.ci.lower > limit_ratio => Decision::Above,
        _ => Decision::Undecided,
    };
    let rounds_needed = match (&paired, decision) {
        (Some(p), Decision::Undecided) if p.holds_at(alpha) => p.rounds_needed(limit_ratio),
        (Some(p), Decision::Undecided) => Some(fewest_rounds(alpha).max(p.round_ratios.len() + 1)),
        _ => None,
    };
    let record = Sequential {
        look,
        alpha,
        limit_ratio,
        decision,
        rounds_paired: paired.as_ref().map_or(0, |p| p.round_ratios.len()),
        rounds_set_aside,
        runs_set_aside: set_aside,
        runs,
        rounds_needed,
        stopped: None,
    };
    (paired, record)
}

/// The fewest rounds whose sign-test interval reaches the level 1 − `alpha`.
fn fewest_rounds(alpha: f64) -> usize {
    (2..).find(|&n| stats::sign_test_rank(n, alpha).is_some()).unwrap_or(usize::MAX)
}

/// The `max_slowdown_pct` check from the paired ratio and its sequential record.
pub fn slowdown_check(pct: f64, paired: Option<&PairedRatio>, record: &Sequential) -> Check {
    let rule = RuleName::MaxSlowdownPct;
    let Some(p) = paired else {
        return unjudged(
            rule,
            pct,
            Unit::Percent,
            "max_slowdown_pct: no round has clean latencies on both sides".into(),
        );
    };
    let limit = record.limit_ratio;
    let interval = format!(
        "the candidate's median is {:.3}× the baseline's, paired over {} rounds ({:.1}% CI {:.3}–{:.3}×, look {} at α {:.2}%)",
        p.ratio,
        p.round_ratios.len(),
        p.ci.level * 100.0,
        p.ci.lower,
        p.ci.upper,
        record.look,
        record.alpha * 100.0
    );
    let set_aside = record.set_aside_phrase().map(|s| format!("; {s}")).unwrap_or_default();
    let (status, verdict) = match record.decision {
        Decision::Below => (CheckStatus::Pass, format!("the whole interval is below {limit:.2}×")),
        Decision::Above => (CheckStatus::Fail, format!("> {limit:.2}× even at the interval's lower bound")),
        Decision::Undecided => (CheckStatus::NotJudged, undecided_sentence(p, record)),
    };
    let message = format!("max_slowdown_pct: {interval}, {verdict}{set_aside}");
    Check { measured: Some((p.ratio - 1.0) * 100.0), ..check(rule, status, None, pct, Unit::Percent, message) }
}

/// Why an undecided comparison is not judged: the interval against the limit, the rounds it would
/// need, the measured spread of the rounds, and why the session stopped.
fn undecided_sentence(p: &PairedRatio, record: &Sequential) -> String {
    let limit = record.limit_ratio;
    let (low, high) = p.round_ratios.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    let what = if p.holds_at(record.alpha) {
        format!("not judged: the interval reaches both sides of {limit:.2}×, so it cannot tell a pass from a fail")
    } else {
        format!(
            "not judged: {} rounds are too few for an interval at {:.1}%",
            p.round_ratios.len(),
            (1.0 - record.alpha) * 100.0
        )
    };
    let needed = match record.rounds_needed {
        Some(n) => format!("about {n} rounds in all would decide it"),
        None => "the estimate sits on the limit: no number of rounds is sure to decide it".to_string(),
    };
    let stopped = record.stopped.as_deref().map(|s| format!("; {s}")).unwrap_or_default();
    format!("{what}; {needed}; measured cause: the round ratios spread from {low:.2}× to {high:.2}×{stopped}")
}
