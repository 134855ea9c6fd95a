//! Comparing two models measured interleaved on the same device in one session (`npugate
//! compare`): the baseline A and the candidate B ran in rounds, one after the other, so a device
//! that heats up, changes clocks or picks up background load moves both alike and the drift
//! cancels in each round's ratio. [`judge_compare`] turns the rounds, both placements and the
//! [`CompareRules`] into a [`CompareVerdict`] (`npugate.compare/1`) in one pure function.

use std::collections::BTreeMap;
use std::path::Path;

use npugate_profile::report::PlacementReport;
use npugate_result::contract::{self, Document, Schema};
use npugate_result::{ReadError, RunResult, RunStatus};
use serde::{Deserialize, Serialize};

use crate::check::{unjudged, CheckStatus};
use crate::confirm::Confirmation;
use crate::fingerprint::Fingerprint;
use crate::judge::{moved_culprit, nodes_check, outcome_of};
use crate::rules::{self, RuleName, RulesError};
use crate::slowdown::{paired_clean, slowdown_check, Decision, Sequential};
use crate::stats::{self, Drift, LatencyStats, PairedRatio};
use crate::units::{fmt_ms, Unit};
use crate::verdict::{Check, Culprit, Outcome, Subject};

/// Schema identifier of a serialized [`CompareVerdict`].
pub const COMPARE_SCHEMA: &str = "npugate.compare/1";
/// Rounds below which the first look's sign-test interval (at 97.5%) does not exist: the session
/// then measures more rounds before it can decide (said in a warning).
pub const FEW_ROUNDS: usize = 7;

/// The rules of a comparison (`compare.toml`, `--rule`); unknown keys are an error.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CompareRules {
    /// The candidate may be at most this many percent slower than the baseline, judged on the
    /// paired interval: passes when its upper bound lies below 1 + limit, fails when its lower
    /// bound lies above, and is undecided otherwise (more rounds, then not judged).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_slowdown_pct: Option<f64>,
    /// Every node of both models runs on the same EP in both, and no node only the candidate has
    /// runs off the preferred EP (graph-input/output Q/DQ put on the CPU by design excepted).
    pub placement_must_match: bool,
    /// Rules switched off, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disable: Vec<RuleName>,
}

impl Default for CompareRules {
    /// At most 5% slower, placements equal.
    fn default() -> Self {
        CompareRules { max_slowdown_pct: Some(5.0), placement_must_match: true, disable: Vec::new() }
    }
}

impl CompareRules {
    /// Defaults, then the TOML file (if any), then each `key=value` override in order.
    pub fn load(file: Option<&Path>, overrides: &[String]) -> Result<CompareRules, RulesError> {
        rules::load(file, overrides)
    }

    /// True when the rule is switched on (not in `disable`).
    pub fn enabled(&self, rule: RuleName) -> bool {
        !self.disable.contains(&rule)
    }
}

/// Which model ran first in a round.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum First {
    /// The baseline ran first (an AB round).
    Baseline,
    /// The candidate ran first (a BA round).
    Candidate,
}

impl First {
    /// The order of round `index` (0-based) of an ABBA session: AB, BA, AB, BA, … so that neither
    /// model always runs first, or right after the other one heated the device.
    pub fn of_round(index: usize) -> First {
        if index.is_multiple_of(2) {
            First::Baseline
        } else {
            First::Candidate
        }
    }

    /// `AB` or `BA`.
    pub fn label(self) -> &'static str {
        match self {
            First::Baseline => "AB",
            First::Candidate => "BA",
        }
    }
}

/// One model's side of the evidence.
#[derive(Debug, Clone)]
pub struct SideEvidence<'a> {
    /// The model as the user gave it.
    pub model: &'a str,
    /// The run that recorded its placement (profiled and reference passes), before the rounds.
    pub placement_run: &'a RunResult,
    /// Its placement, or why it could not be computed.
    pub placement: Result<&'a PlacementReport, String>,
    /// Where the placement run is, relative to the comparison's directory.
    pub placement_dir: &'a str,
}

/// One round: both models' timed runs.
#[derive(Debug, Clone)]
pub struct RoundEvidence<'a> {
    /// Which ran first.
    pub first: First,
    /// The baseline's run.
    pub baseline: &'a RunResult,
    /// The candidate's run.
    pub candidate: &'a RunResult,
    /// Where the baseline's run is, relative to the comparison's directory.
    pub baseline_dir: String,
    /// Where the candidate's run is, relative to the comparison's directory.
    pub candidate_dir: String,
}

/// Everything a comparison is judged on.
#[derive(Debug, Clone)]
pub struct CompareEvidence<'a> {
    /// The device serial, or `local`.
    pub target: &'a str,
    /// The baseline A.
    pub baseline: SideEvidence<'a>,
    /// The candidate B.
    pub candidate: SideEvidence<'a>,
    /// The rounds, in session order.
    pub rounds: &'a [RoundEvidence<'a>],
    /// What went wrong in the session (a harness that failed), one sentence each.
    pub errors: Vec<String>,
    /// Which look at the rounds this judgement is (1, 2, …: see [`crate::stats::look_alpha`]).
    pub look: usize,
    /// Why the session will measure no more rounds, when it stopped before deciding (its budget).
    pub stopped: Option<String>,
}

/// The judgement of a comparison.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CompareVerdict {
    /// Always [`COMPARE_SCHEMA`].
    pub schema: String,
    /// `fail` if a check failed, else `error` if anything could not be judged, else `pass`.
    pub outcome: Outcome,
    /// The device serial, or `local`.
    pub target: String,
    /// The rules as applied.
    pub rules: CompareRules,
    /// One entry per enabled rule.
    pub checks: Vec<Check>,
    /// The baseline A.
    pub baseline: Side,
    /// The candidate B.
    pub candidate: Side,
    /// B / A paired over the rounds' clean runs (LLM folders: of the decode steps, i.e. of 1 /
    /// decode tok/s), its interval at the look's level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired: Option<PairedRatio>,
    /// The sequential decision of `max_slowdown_pct`: the look, its α, where the interval lies
    /// against the limit, what was set aside, the rounds it would need and why it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequential: Option<Sequential>,
    /// LLM folders: B / A of the time to first token, paired over the rounds (reported, not a rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired_ttft: Option<PairedRatio>,
    /// Every round: order, both medians and their ratio.
    pub rounds: Vec<Round>,
    /// Every node whose EP differs between the two (the candidate's node, `baseline_ep` its EP in
    /// the baseline, absent for a node only the candidate has).
    pub placement_differences: Vec<Culprit>,
    /// Why (part of) the comparison could not be judged.
    pub errors: Vec<String>,
    /// Observations that do not fail it (the session's drift, few rounds, the harness's warnings).
    pub warnings: Vec<String>,
    /// Every attempt when a slowdown was rerun (`--confirm K`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Confirmation>,
}

/// One model of a comparison.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Side {
    /// The model as the user gave it.
    pub model: String,
    /// What ran: model, device, runtime (from the placement run).
    pub subject: Subject,
    /// Statistics of the clean timed runs of every round together (those that waited for a CPU
    /// long enough to explain their slowness set aside, as `npugate run` does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyStats>,
    /// Every timed run, round after round (ns), the set-aside ones included.
    pub latencies_ns: Vec<u64>,
    /// Timed runs set aside for their CPU wait.
    #[serde(default)]
    pub set_aside: usize,
    /// The cold first inference of each round, kept out of the statistics (ns).
    pub first_inference_ns: Vec<u64>,
    /// Its round medians, first third against last third of the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_drift: Option<Drift>,
    /// Where it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementReport>,
    /// The placement run's directory, relative to the comparison's.
    pub placement_dir: String,
}

/// One round of a comparison.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Round {
    /// 1-based.
    pub round: usize,
    /// Which model ran first.
    pub first: First,
    /// The baseline's median in this round, of its clean runs (ns).
    pub baseline_median_ns: f64,
    /// The candidate's median in this round, of its clean runs (ns).
    pub candidate_median_ns: f64,
    /// candidate / baseline.
    pub ratio: f64,
    /// The baseline's result directory, relative to the comparison's.
    pub baseline_dir: String,
    /// The candidate's result directory, relative to the comparison's.
    pub candidate_dir: String,
}

impl Document for CompareVerdict {
    const SCHEMA: Schema = Schema::new(COMPARE_SCHEMA);
}

impl CompareVerdict {
    /// Reads a comparison file, refusing any schema but [`COMPARE_SCHEMA`]'s major version.
    pub fn read(path: &Path) -> Result<CompareVerdict, ReadError> {
        contract::read(path)
    }

    /// Writes it as pretty JSON, atomically.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        contract::write_json(path, self)
    }

    /// The process exit code: 0 pass, 1 fail, 2 error.
    pub fn exit_code(&self) -> u8 {
        self.outcome.exit_code()
    }

    /// `baseline.onnx → candidate.onnx on <device> (<EP>)`.
    pub fn summary(&self) -> String {
        let fp = &self.candidate.subject.fingerprint;
        let file = |model: &str| model.rsplit(['/', '\\']).next().unwrap_or(model).to_string();
        format!(
            "{} → {} on {} ({}, {}), {} round(s)",
            file(&self.baseline.model),
            file(&self.candidate.model),
            self.target,
            fp.device,
            fp.preferred_ep,
            self.rounds.len()
        )
    }

    /// `B/A 1.104× (97.9% CI 1.081–1.127×) paired over 10 rounds`, or why there is none; `,
    /// undecided against 1.05×` when the interval reaches both sides of the limit.
    pub fn paired_sentence(&self) -> String {
        match &self.paired {
            Some(p) => format!(
                "B/A {:.3}× ({:.1}% CI {:.3}–{:.3}×) paired over {} rounds{}",
                p.ratio,
                p.ci.level * 100.0,
                p.ci.lower,
                p.ci.upper,
                p.round_ratios.len(),
                match self.sequential.as_ref().filter(|s| s.decision == Decision::Undecided) {
                    Some(s) => format!(", undecided against {:.2}×", s.limit_ratio),
                    None => String::new(),
                }
            ),
            None => "no paired ratio (no round with clean latencies on both sides)".into(),
        }
    }

    /// True when the slowdown rule could not yet tell a pass from a fail and the session did not
    /// stop: more rounds may decide it.
    pub fn undecided(&self) -> bool {
        self.sequential.as_ref().is_some_and(|s| s.decision == Decision::Undecided && s.stopped.is_none())
            && self.checks.iter().all(|c| c.status != CheckStatus::Fail && c.status != CheckStatus::Unjudged)
            && self.errors.is_empty()
    }

    /// LLM folders: `time to first token B/A 0.982× (95% CI 0.95–1.01×) paired over 10 rounds`.
    pub fn ttft_sentence(&self) -> Option<String> {
        self.paired_ttft.as_ref().map(|p| {
            format!(
                "time to first token B/A {:.3}× ({:.0}% CI {:.3}–{:.3}×) paired over {} rounds",
                p.ratio,
                p.ci.level * 100.0,
                p.ci.lower,
                p.ci.upper,
                p.round_ratios.len()
            )
        })
    }
}

/// Judges a comparison. Never fails: what cannot be judged becomes an `unjudged` check or an error.
pub fn judge_compare(evidence: &CompareEvidence<'_>, rules: &CompareRules) -> CompareVerdict {
    let rounds: Vec<Round> = evidence.rounds.iter().enumerate().filter_map(|(i, r)| round(i, r)).collect();
    let (paired, sequential, paired_ttft) = paired_ratios(evidence, rules);
    let baseline =
        side(&evidence.baseline, evidence.rounds.iter().map(|r| r.baseline), &rounds, |r| r.baseline_median_ns);
    let candidate =
        side(&evidence.candidate, evidence.rounds.iter().map(|r| r.candidate), &rounds, |r| r.candidate_median_ns);

    let mut findings = Findings { errors: evidence.errors.clone(), warnings: Vec::new() };
    findings.check_same_device(evidence, &baseline);
    findings.check_runs(evidence);
    findings.warn_of_session(&baseline, rounds.len());
    let both_placed = match (&evidence.baseline.placement, &evidence.candidate.placement) {
        (Ok(a), Ok(b)) => Some((*a, *b)),
        _ => None,
    };
    let placement_differences = both_placed.map_or_else(Vec::new, |(a, b)| differences_of(a, b));
    findings.check_placements(evidence);

    let checks: Vec<Check> = [
        rules
            .max_slowdown_pct
            .filter(|_| rules.enabled(RuleName::MaxSlowdownPct))
            .map(|pct| slowdown_check(pct, paired.as_ref(), &sequential)),
        placement_rule_check(rules, both_placed.map(|(_, b)| b), &placement_differences),
    ]
    .into_iter()
    .flatten()
    .collect();
    let Findings { errors, warnings } = findings;
    CompareVerdict {
        schema: COMPARE_SCHEMA.into(),
        outcome: outcome_of(&checks, &errors),
        target: evidence.target.to_string(),
        rules: rules.clone(),
        checks,
        baseline,
        candidate,
        paired,
        sequential: Some(sequential),
        paired_ttft,
        rounds,
        placement_differences,
        errors,
        warnings,
        confirmation: None,
    }
}

/// The candidate's latency over the baseline's, paired round by round: of the clean timed runs at
/// the look's level (with its sequential record), and of the time to first token (none unless
/// every round has it on both sides).
fn paired_ratios(
    evidence: &CompareEvidence<'_>,
    rules: &CompareRules,
) -> (Option<PairedRatio>, Sequential, Option<PairedRatio>) {
    let pairs: Vec<(&RunResult, &RunResult)> = evidence.rounds.iter().map(|r| (r.baseline, r.candidate)).collect();
    let limit_ratio = 1.0 + rules.max_slowdown_pct.unwrap_or(0.0) / 100.0;
    let (paired, mut sequential) = paired_clean(&pairs, evidence.look.max(1), limit_ratio);
    sequential.stopped = evidence.stopped.clone().filter(|_| sequential.decision == Decision::Undecided);
    let ttft_pairs: Option<Vec<(&[u64], &[u64])>> =
        evidence.rounds.iter().map(|r| Some((ttft_ns(r.baseline)?, ttft_ns(r.candidate)?))).collect();
    let paired_ttft = ttft_pairs.filter(|pairs| !pairs.is_empty()).and_then(|pairs| stats::paired_ratio(&pairs));
    (paired, sequential, paired_ttft)
}

/// A comparison's errors and warnings, gathered stage by stage in the order the verdict lists them.
struct Findings {
    /// One sentence each; any error fails the comparison.
    errors: Vec<String>,
    /// One sentence each, without repeats.
    warnings: Vec<String>,
}

impl Findings {
    /// An error when the candidate's placement run differs from the baseline's in anything but the
    /// model (device, runtime, settings).
    fn check_same_device(&mut self, evidence: &CompareEvidence<'_>, baseline: &Side) {
        let mut same_model = Fingerprint::of(evidence.candidate.placement_run);
        same_model.model_digest = baseline.subject.fingerprint.model_digest.clone();
        let differences = same_model.differences(&baseline.subject.fingerprint);
        if !differences.is_empty() {
            self.errors
                .push(format!("the two models did not run on the same device and runtime: {}", differences.join("; ")));
        }
    }

    /// An error for every incomplete run (placement runs and rounds); each run's warnings, once.
    fn check_runs(&mut self, evidence: &CompareEvidence<'_>) {
        let runs = std::iter::once(evidence.baseline.placement_run)
            .chain(std::iter::once(evidence.candidate.placement_run))
            .chain(evidence.rounds.iter().flat_map(|r| [r.baseline, r.candidate]));
        for run in runs {
            if run.status == RunStatus::Incomplete {
                self.errors.push(format!(
                    "a run of {} is incomplete: {}",
                    run.model.path,
                    run.error.as_deref().unwrap_or("the harness did not say why")
                ));
            }
            for warning in &run.warnings {
                if !self.warnings.contains(warning) {
                    self.warnings.push(warning.clone());
                }
            }
        }
    }

    /// Warnings about the session: a notable drift of the baseline's round medians (first), too few
    /// rounds for the interval to mean much (last).
    fn warn_of_session(&mut self, baseline: &Side, rounds: usize) {
        if let Some(drift) = baseline.session_drift.as_ref().filter(|d| d.is_notable()) {
            self.warnings.insert(
                0,
                format!(
                    "the device drifted {:+.1}% across the session (the baseline's round medians, first third {} → last third {}); \
                     both models ran in every round, so the paired ratio cancels drift that moves them alike",
                    drift.change_pct,
                    fmt_ms(drift.first_third_median_ns),
                    fmt_ms(drift.last_third_median_ns)
                ),
            );
        }
        if (1..FEW_ROUNDS).contains(&rounds) {
            self.warnings.push(format!(
                "only {rounds} round(s): fewer than {FEW_ROUNDS} give no interval at the first look's level, so the \
                 comparison needs more rounds to decide; use --rounds 10 or more"
            ));
        }
    }

    /// An error for each side whose placement could not be computed.
    fn check_placements(&mut self, evidence: &CompareEvidence<'_>) {
        for (label, placement) in
            [("baseline", &evidence.baseline.placement), ("candidate", &evidence.candidate.placement)]
        {
            if let Err(why) = placement {
                self.errors.push(format!("the {label}'s placement could not be computed: {why}"));
            }
        }
    }
}

/// The `placement_must_match` check on the nodes that moved, when the rule is set and enabled;
/// unjudged unless both placements were computed (`candidate` is then the candidate's).
fn placement_rule_check(
    rules: &CompareRules,
    candidate: Option<&PlacementReport>,
    differences: &[Culprit],
) -> Option<Check> {
    if !(rules.placement_must_match && rules.enabled(RuleName::PlacementMustMatch)) {
        return None;
    }
    Some(match candidate {
        Some(b) => placement_check(differences, &b.preferred_ep),
        None => unjudged(
            RuleName::PlacementMustMatch,
            0.0,
            Unit::Nodes,
            "placement_must_match: a placement is missing (see errors)".into(),
        ),
    })
}

/// An LLM generation's time to first token per timed generation.
fn ttft_ns(run: &RunResult) -> Option<&[u64]> {
    run.generation.as_ref().map(|g| g.ttft_ns.as_slice())
}

/// A run's clean latencies (its contended runs set aside), or every one when none is left.
fn judged_latencies(run: &RunResult) -> Vec<u64> {
    let clean = run.timings.clean_latencies();
    if clean.is_empty() {
        run.timings.latencies_ns.clone()
    } else {
        clean
    }
}

/// Round `index` when both sides have latencies.
fn round(index: usize, r: &RoundEvidence<'_>) -> Option<Round> {
    let median = |run: &RunResult| LatencyStats::from_ns(&judged_latencies(run)).map(|s| s.median_ns);
    let (a, b) = (median(r.baseline)?, median(r.candidate)?);
    Some(Round {
        round: index + 1,
        first: r.first,
        baseline_median_ns: a,
        candidate_median_ns: b,
        ratio: if a > 0.0 { b / a } else { f64::NAN },
        baseline_dir: r.baseline_dir.clone(),
        candidate_dir: r.candidate_dir.clone(),
    })
}

/// One model's side: its timed runs of every round pooled, its placement and its session drift.
fn side<'a>(
    evidence: &SideEvidence<'_>,
    runs: impl Iterator<Item = &'a RunResult>,
    rounds: &[Round],
    median: impl Fn(&Round) -> f64,
) -> Side {
    let (mut latencies_ns, mut clean_ns, mut first_inference_ns) = (Vec::new(), Vec::new(), Vec::new());
    for run in runs {
        latencies_ns.extend_from_slice(&run.timings.latencies_ns);
        clean_ns.extend(judged_latencies(run));
        first_inference_ns.push(run.timings.first_inference_ns);
    }
    let medians: Vec<f64> = rounds.iter().map(median).collect();
    Side {
        model: evidence.model.to_string(),
        subject: Subject::of(evidence.placement_run),
        latency: LatencyStats::from_ns(&clean_ns),
        set_aside: latencies_ns.len() - clean_ns.len(),
        latencies_ns,
        first_inference_ns,
        session_drift: stats::drift(&medians),
        placement: evidence.placement.as_ref().ok().map(|p| (*p).clone()),
        placement_dir: evidence.placement_dir.to_string(),
    }
}

/// Every candidate node whose EP differs from the baseline's, and every node only the candidate has
/// that runs off its preferred EP (unless put there by design, `expected`).
pub fn differences_of(baseline: &PlacementReport, candidate: &PlacementReport) -> Vec<Culprit> {
    let before: BTreeMap<&str, &str> = baseline.nodes.iter().map(|n| (n.name.as_str(), n.ep.as_str())).collect();
    let expected = |name: &str| candidate.fallback.iter().any(|f| f.name == name && f.expected);
    candidate
        .nodes
        .iter()
        .filter_map(|node| match before.get(node.name.as_str()) {
            Some(ep) if *ep != node.ep => Some(moved_culprit(candidate, node, Some(ep))),
            None if node.ep != candidate.preferred_ep && !expected(&node.name) => {
                Some(moved_culprit(candidate, node, None))
            }
            _ => None,
        })
        .collect()
}

fn placement_check(differences: &[Culprit], preferred: &str) -> Check {
    let passed = format!("every node runs where it ran in the baseline (preferred EP {preferred})");
    nodes_check(RuleName::PlacementMustMatch, differences, &passed, "node(s) run elsewhere in the candidate")
}
