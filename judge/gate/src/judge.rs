//! Turns the evidence of a run — the run, its placement report, its outputs against the reference
//! and an optional baseline — and the rules into a [`Verdict`], in one pure function: [`judge`].

use npugate_profile::report::{FallbackNode, NodePlacement, PlacementReport};
use npugate_result::background::BackgroundLoad;
use npugate_result::energy::EnergyRecord;
use npugate_result::estimate::SocEstimate;
use npugate_result::{RunResult, RunStatus};

use crate::background;
use crate::baseline::Baseline;
use crate::check::{check, pass_or_fail, unjudged, Check, CheckStatus, Culprit};
use crate::decode::ContextGrowth;
use crate::fingerprint::Fingerprint;
use crate::latency::{latency_checks, latency_warnings, with_clusters};
use crate::machine::Machine;
use crate::outputs::{fmt_metric, worst, OutputComparison, OutputMetrics, OutputsReport, TokenComparison};
use crate::resources;
use crate::rules::{limit, RuleName, Rules, ROUNDING_ABS_ERR};
use crate::stats::{self, LatencyStats};
use crate::units::{fmt_limit, fmt_ms, fmt_ms_from_us, fmt_pct, Unit};
use crate::verdict::{
    BaselineComparison, GenerationSummary, Outcome, Subject, Verdict, MEASURED_SCHEMA, VERDICT_SCHEMA,
};

/// How many blamed nodes a check message names before "and N more".
const NAMED_NODES: usize = 3;

/// A baseline to compare against, and whether a fingerprint mismatch is overridden.
#[derive(Debug, Clone, Copy)]
pub struct Comparison<'a> {
    /// The saved baseline.
    pub baseline: &'a Baseline,
    /// Compare even when the fingerprints differ (`--force`).
    pub force: bool,
}

/// What the output rules (`min_cosine`, `min_sqnr_db`, `max_abs_err`) read.
#[derive(Debug, Clone)]
pub enum OutputsEvidence<'a> {
    /// The outputs were not compared (no `--check-outputs`): the output rules are unjudged.
    NotChecked,
    /// The run's outputs against the reference outputs.
    Compared(&'a OutputsReport),
    /// Why the comparison could not be read: an error, and the output rules are unjudged.
    Failed(String),
}

impl<'a> OutputsEvidence<'a> {
    /// From reading an optional comparison file: absent is [`OutputsEvidence::NotChecked`], a read
    /// error [`OutputsEvidence::Failed`] with its message.
    pub fn from_read<E: std::fmt::Display>(read: &'a Result<Option<OutputsReport>, E>) -> OutputsEvidence<'a> {
        match read {
            Ok(None) => OutputsEvidence::NotChecked,
            Ok(Some(report)) => OutputsEvidence::Compared(report),
            Err(error) => OutputsEvidence::Failed(error.to_string()),
        }
    }
}

/// Everything a run is judged on.
#[derive(Debug, Clone)]
pub struct Evidence<'a> {
    /// The run (`result.json`).
    pub run: &'a RunResult,
    /// Where the model ran, or why that could not be computed (an error; placement rules unjudged).
    pub placement: Result<&'a PlacementReport, String>,
    /// The run's outputs against the reference.
    pub outputs: OutputsEvidence<'a>,
    /// The baseline to compare against, if any.
    pub baseline: Option<Comparison<'a>>,
    /// What else kept the device busy during the run and how its state changed: recorded
    /// (`Some`: device and local runs), not recorded (`None`, e.g. an emulated run), or unreadable
    /// (an error).
    pub background: Result<Option<&'a BackgroundLoad>, String>,
    /// Energy per inference from the device's battery gauge (`energy.json`): recorded (`Some`, a
    /// measurement or why there is none), not asked for (`None`), or unreadable (an error).
    pub energy: Result<Option<&'a EnergyRecord>, String>,
    /// The ESTIMATED latency on the run's SoC (`max_estimated_ms`), or why there is none; `None`
    /// when not computed (the rule is off).
    pub estimate: Option<Result<&'a SocEstimate, String>>,
    /// The `npugate numerics` command line of this run's model, reference and target, which a
    /// failed output rule names as the next step (`None`: a generic one with placeholders).
    pub numerics_command: Option<&'a str>,
}

impl<'a> Evidence<'a> {
    /// A run and its placement, with outputs not checked and no baseline.
    pub fn new(run: &'a RunResult, placement: Result<&'a PlacementReport, String>) -> Evidence<'a> {
        Evidence {
            run,
            placement,
            outputs: OutputsEvidence::NotChecked,
            baseline: None,
            background: Ok(None),
            energy: Ok(None),
            estimate: None,
            numerics_command: None,
        }
    }
}

/// Judges a run on all its evidence. Never fails: whatever cannot be judged becomes an `unjudged`
/// check or an entry in `errors`. The latency rules judge the runs the machine did not slow (see
/// [`crate::machine`]). The outcome is computed once, at the end: `fail` if any check failed (even
/// when evidence is missing), else `error` if evidence is missing, else `not_judged` if the machine
/// dominated a latency rule, else `pass`; with no rule at all ([`Rules::none`]) `measured`.
pub fn judge(evidence: &Evidence<'_>, rules: &Rules) -> Verdict {
    let run = evidence.run;
    let placement = evidence.placement.as_ref().ok().copied();
    let mut errors = Vec::new();
    if run.status == RunStatus::Incomplete {
        errors
            .push(format!("the run is incomplete: {}", run.error.as_deref().unwrap_or("the harness did not say why")));
    }
    let load = evidence.background.as_ref().unwrap_or_else(|why| {
        errors.push(format!("the background load is unknown: {why}"));
        &None
    });
    let machine = Machine::new(run, placement, *load);
    // An LLM folder's latencies are its decode steps: judged with their growth with the context
    // out, the steps that waited for a CPU set aside as a model's runs are.
    let growth = run.generation.as_ref().and_then(ContextGrowth::fit);
    let steps = growth.as_ref().zip(run.generation.as_ref()).map(|(growth, g)| growth.steps_at_mean_context(g));
    let judged_latencies = match &steps {
        Some(steps) => machine.clean_of(steps),
        None => machine.judged_latencies(),
    };
    let latency = LatencyStats::from_ns(&judged_latencies);
    let all = LatencyStats::from_ns(steps.as_deref().unwrap_or(&run.timings.latencies_ns));
    let mut checks = latency_checks(latency.as_ref(), all.as_ref(), &machine, rules);
    checks.extend(generation_checks(run, latency.as_ref(), &machine, rules));
    let view = placement.map(|report| PlacementView::new(report, rules));
    checks.extend(placement_checks(view.as_ref(), rules));
    if let Some(layers) = run.aihub.as_ref().map(|aihub| &aihub.layers).filter(|layers| !layers.enough()) {
        too_few_layers_matched(&mut checks, layers);
    }
    let baseline =
        evidence.baseline.map(|c| compare(run, &judged_latencies, view.as_ref(), rules, c, &mut checks, &mut errors));
    let outputs = match &evidence.outputs {
        OutputsEvidence::Compared(report) => Some(*report),
        OutputsEvidence::NotChecked => None,
        OutputsEvidence::Failed(why) => {
            errors.push(why.clone());
            None
        }
    };
    let unreadable = matches!(evidence.outputs, OutputsEvidence::Failed(_));
    checks.extend(output_checks(outputs, unreadable, rules, evidence.numerics_command));
    checks.extend(token_checks(outputs.and_then(|r| r.tokens.as_ref()), unreadable, rules));
    let energy = evidence.energy.as_ref().unwrap_or_else(|why| {
        errors.push(format!("the energy record is unreadable: {why}"));
        &None
    });
    checks.extend(resources::checks(run, *energy, rules));
    if let Err(why) = &evidence.placement {
        errors.push(format!("placement could not be computed: {why}"));
    }
    if let Some(what) = &run.execution.emulated {
        not_applicable_on_an_emulator(&mut checks, what);
    }
    checks.extend(estimate_check(evidence.estimate.as_ref(), rules));
    let (background_check, background_warnings) = background::assess(rules, *load);
    checks.extend(background_check);
    let mut warnings = latency_warnings(run, all.as_ref(), latency.as_ref(), &machine);
    warnings.extend(warnings_of_the_run(run, placement));
    warnings.extend(growth.map(|g| g.describe()));
    warnings.extend(background_warnings);
    // No rule asked for: measured, whatever could not be computed listed but judging nothing.
    let (schema, outcome) = match *rules == Rules::none() {
        true => (MEASURED_SCHEMA, Outcome::Measured),
        false => (VERDICT_SCHEMA, outcome_of(&checks, &errors)),
    };
    Verdict {
        schema: schema.to_string(),
        outcome,
        subject: Subject::of(run),
        rules: rules.clone(),
        checks,
        warnings,
        latency,
        contention: machine.summary(),
        latencies_ns: run.timings.latencies_ns.clone(),
        first_inference_ns: run.timings.first_inference_ns,
        session_create_ns: run.timings.session_create_ns,
        placement: placement.cloned(),
        generation: run.generation.as_ref().map(GenerationSummary::of),
        baseline,
        outputs: outputs.cloned(),
        memory: run.memory.clone(),
        energy: energy.cloned(),
        errors,
        confirmation: None,
    }
}

/// `max_estimated_ms`: the ESTIMATED latency on the run's SoC — from the graph, never a
/// measurement, so an emulated run is judged by it — against its limit; its own check line.
fn estimate_check(estimate: Option<&Result<&SocEstimate, String>>, rules: &Rules) -> Option<Check> {
    let max = limit(rules, RuleName::MaxEstimatedMs, rules.max_estimated_ms)?;
    let rule = RuleName::MaxEstimatedMs;
    let not_estimated = |why: &str| unjudged(rule, max, Unit::Ms, format!("max_estimated_ms: not estimated: {why}"));
    Some(match estimate {
        None => not_estimated("no estimate was computed for this run"),
        Some(Err(why)) => not_estimated(why),
        Some(Ok(soc)) => match (soc.estimate_ms, &soc.error) {
            (Some(ms), Some(error)) => {
                let ok = ms <= max;
                let message = format!(
                    "max_estimated_ms: ESTIMATE {ms:.3} ms on {} {} {max} ms (from the graph, not a measurement; its leave-one-model-out error on AI Hub's device runs: median {:.0}%, p90 {:.0}%)",
                    soc.soc,
                    if ok { "<=" } else { ">" },
                    100.0 * error.median_rel,
                    100.0 * error.p90_rel
                );
                check(rule, pass_or_fail(ok), Some(ms), max, Unit::Ms, message)
            }
            _ => not_estimated(&format!("{}: {}", soc.soc, soc.no_estimate.as_deref().unwrap_or("no estimate"))),
        },
    })
}

/// On an AI Hub run whose layers named too few of the model's nodes, `npu_flops_pct` is not
/// judged: the FLOPs of the nodes no layer placed are in no share.
fn too_few_layers_matched(checks: &mut [Check], layers: &npugate_result::aihub::LayerMatch) {
    for check in checks.iter_mut().filter(|c| c.rule == RuleName::NpuFlopsPct) {
        check.status = CheckStatus::Unjudged;
        check.message = format!("{}: not judged: {}", check.rule, layers.describe());
        check.nodes.clear();
    }
}

/// Rules that read speed, which an emulator's runs say nothing about.
const SPEED_RULES: &[RuleName] = &[
    RuleName::CvPct,
    RuleName::MedianMs,
    RuleName::P95Ms,
    RuleName::P99Ms,
    RuleName::BaselineMedianPct,
    RuleName::BaselineTtftPct,
    RuleName::MaxTtftMs,
    RuleName::MinDecodeTokS,
    RuleName::MinPrefillTokS,
    RuleName::DecodeCvPct,
    // The emulator process's memory and a host's power are no device's either.
    RuleName::MaxPeakMemoryMb,
    RuleName::MaxMemoryGrowthMb,
    RuleName::MaxEnergyMj,
];

/// On an emulated run the speed (and memory, energy) rules become `not applicable`, each with the
/// reason; placement and output rules stay judged.
fn not_applicable_on_an_emulator(checks: &mut [Check], what: &str) {
    for check in checks.iter_mut().filter(|c| SPEED_RULES.contains(&c.rule)) {
        check.status = CheckStatus::NotApplicable;
        check.message = format!("{}: not judged: the run was emulated ({what})", check.rule);
        check.nodes.clear();
        check.clusters = None;
    }
}

/// `fail` if any check failed, else `error` if evidence was missing, else `not_judged` if the
/// machine dominated a rule, else `pass`.
pub(crate) fn outcome_of(checks: &[Check], errors: &[String]) -> Outcome {
    if checks.iter().any(|c| c.status == CheckStatus::Fail) {
        Outcome::Fail
    } else if !errors.is_empty() || checks.iter().any(|c| c.status == CheckStatus::Unjudged) {
        Outcome::Error
    } else if checks.iter().any(|c| c.status == CheckStatus::NotJudged) {
        Outcome::NotJudged
    } else {
        Outcome::Pass
    }
}

/// The output-consistency checks (`min_cosine`, `min_sqnr_db`, `max_abs_err`), each judged on the
/// worst output of `report` (the run's outputs against the reference); unjudged without a report
/// (`unreadable`: there is one, but it could not be read). A rule at its default
/// ([`crate::rules::DEFAULT_MIN_SQNR_DB`], …) is judged only when the outputs of a single model
/// were compared: without `--check-outputs` it is not checked, and an LLM folder's generation is
/// judged by its tokens. A failed rule names the command that finds the first diverging layer
/// (`numerics`, when the caller knows it).
fn output_checks(
    report: Option<&OutputsReport>,
    unreadable: bool,
    rules: &Rules,
    numerics: Option<&str>,
) -> Vec<Check> {
    /// One output rule: its limit and default, the metric it reads, which way is better, unit
    /// and decimals shown.
    struct OutputRule {
        rule: RuleName,
        value: Option<f64>,
        default: Option<f64>,
        metric: fn(&OutputMetrics) -> f64,
        higher_is_better: bool,
        /// A relative measure (cosine, SQNR): not read on an output within rounding of its reference.
        relative: bool,
        unit: Unit,
        digits: usize,
    }
    let defaults = Rules::default();
    let specs = [
        OutputRule {
            rule: RuleName::MinCosine,
            value: rules.min_cosine,
            default: defaults.min_cosine,
            metric: |m| m.cosine,
            higher_is_better: true,
            relative: true,
            unit: Unit::Cosine,
            digits: 6,
        },
        OutputRule {
            rule: RuleName::MinSqnrDb,
            value: rules.min_sqnr_db,
            default: defaults.min_sqnr_db,
            metric: |m| m.sqnr_db,
            higher_is_better: true,
            relative: true,
            unit: Unit::Db,
            digits: 1,
        },
        OutputRule {
            rule: RuleName::MaxAbsErr,
            value: rules.max_abs_err,
            default: defaults.max_abs_err,
            metric: |m| m.max_abs_err,
            higher_is_better: false,
            relative: false,
            unit: Unit::Abs,
            digits: 6,
        },
    ];
    let generation = report.is_some_and(|r| r.tokens.is_some());
    let mut hinted = false;
    let mut out = Vec::new();
    for OutputRule { rule, value, default, metric, higher_is_better, relative, unit, digits } in specs {
        let Some(bound) = limit(rules, rule, value) else { continue };
        let at_default = value == default;
        if at_default && (generation || (report.is_none() && !unreadable)) {
            continue;
        }
        let passes = |measured: f64| if higher_is_better { measured >= bound } else { measured <= bound };
        // A relative rule failed by an output within rounding of its reference measures the rounding.
        let rounding_only = |o: &&OutputComparison| {
            relative && o.metrics.max_abs_err <= ROUNDING_ABS_ERR && !passes(metric(&o.metrics))
        };
        let worst_output =
            report.and_then(|r| worst(r.outputs.iter().filter(|o| !rounding_only(o)), metric, higher_is_better));
        out.push(match worst_output {
            None if unreadable => unjudged(rule, bound, unit, format!("{rule}: the output comparison could not be read (see errors)")),
            None if report.is_some_and(|r| !r.outputs.is_empty()) => {
                let count = report.map_or(0, |r| r.outputs.len());
                let message = format!(
                    "{rule}: not read on the {count} output(s) that agree with the reference within {ROUNDING_ABS_ERR:e} (max_abs_err): a relative measure of values within rounding of zero measures the rounding"
                );
                check(rule, pass_or_fail(true), None, bound, unit, message)
            }
            None => unjudged(rule, bound, unit, format!("{rule}: no output comparison for this run; run with --check-outputs")),
            Some((name, measured)) => {
                let ok = passes(measured);
                let op = match (higher_is_better, ok) {
                    (true, true) => ">=",
                    (true, false) => "<",
                    (false, true) => "<=",
                    (false, false) => ">",
                };
                let count = report.map_or(0, |r| r.outputs.len());
                let suffix = if unit == Unit::Db { " dB" } else { "" };
                let stated = if at_default { ", the default limit" } else { "" };
                let mut message = format!(
                    "{rule}: output {name} {}{suffix} {op} {}{suffix} (worst of {count} output(s) against the reference{stated})",
                    fmt_metric(measured, digits),
                    fmt_limit(bound)
                );
                if !ok {
                    message.push_str(&divergence_hint(report, name, (!hinted).then_some(numerics)));
                    hinted = true;
                }
                check(rule, pass_or_fail(ok), measured.is_finite().then_some(measured), bound, unit, message)
            }
        });
    }
    out
}

/// What a failed output rule adds: the output's top-1 agreement when it has one and, on the first
/// failed output rule (`command` is `Some`), the command that names the first layer where the run
/// leaves the reference: `Some(Some(line))` as given, `Some(None)` with placeholders.
fn divergence_hint(report: Option<&OutputsReport>, output: &str, command: Option<Option<&str>>) -> String {
    let top1 = report
        .and_then(|r| r.outputs.iter().find(|o| o.name == output))
        .and_then(|o| o.metrics.top1_agreement_pct)
        .map(|pct| format!("; top-1 agreement {pct:.1}%"))
        .unwrap_or_default();
    let Some(command) = command else { return top1 };
    if let Some(line) = command {
        return format!("{top1}; the first diverging layer: {line}");
    }
    let reference = report.map_or("FLOAT.onnx", |r| r.reference.model.as_str());
    format!(
        "{top1}; the first diverging layer: npugate numerics --model MODEL --reference-model {reference} on this run's target (--local, --device S or --ep qnn --soc S)"
    )
}

/// The token rules of an LLM folder's `--check-outputs` against a reference folder
/// (`min_token_agreement_pct`, `min_first_divergence`), judged on the token comparison. Without
/// one the default `min_first_divergence` is not checked (a single model, or no `--check-outputs`);
/// a limit the user set is unjudged.
fn token_checks(tokens: Option<&TokenComparison>, unreadable: bool, rules: &Rules) -> Vec<Check> {
    let missing = |rule: RuleName| {
        match unreadable {
        true => format!("{rule}: the output comparison could not be read (see errors)"),
        false => format!(
            "{rule}: no token comparison for this run; run an LLM model folder with --check-outputs (and --reference-model DIR)"
        ),
    }
    };
    let mut out = Vec::new();
    if let Some(min) = limit(rules, RuleName::MinTokenAgreementPct, rules.min_token_agreement_pct) {
        let rule = RuleName::MinTokenAgreementPct;
        out.push(match tokens {
            None => unjudged(rule, min, Unit::Percent, missing(rule)),
            Some(t) => {
                let ok = t.agreement_pct >= min;
                let op = if ok { ">=" } else { "<" };
                let message = format!("{rule}: {:.1}% {op} {}% ({})", t.agreement_pct, fmt_limit(min), t.summary());
                check(rule, pass_or_fail(ok), Some(t.agreement_pct), min, Unit::Percent, message)
            }
        });
    }
    let default = Rules::default().min_first_divergence;
    if let Some(min) = limit(rules, RuleName::MinFirstDivergence, rules.min_first_divergence) {
        let rule = RuleName::MinFirstDivergence;
        match tokens {
            None if rules.min_first_divergence == default && !unreadable => {}
            None => out.push(unjudged(rule, min as f64, Unit::Tokens, missing(rule))),
            Some(t) => {
                let prefix = t.agreeing_prefix();
                let ok = t.first_divergence.is_none() || prefix >= min;
                let message = match t.first_divergence {
                    None => format!("{rule}: no divergence in {} compared tokens ({})", t.compared, t.summary()),
                    Some(d) => format!(
                        "{rule}: first divergence at position {} {} {min} ({})",
                        d.position,
                        if ok { ">=" } else { "<" },
                        t.summary()
                    ),
                };
                out.push(check(rule, pass_or_fail(ok), Some(prefix as f64), min as f64, Unit::Tokens, message));
            }
        }
    }
    out
}

/// The rules of an LLM folder's generation: median TTFT, prefill and decode tokens per second,
/// the decode steps' CV (of `steps`: the steps not set aside, with their growth with the context
/// taken out). Unjudged for a run of a single model.
fn generation_checks(
    run: &RunResult,
    steps: Option<&LatencyStats>,
    machine: &Machine<'_>,
    rules: &Rules,
) -> Vec<Check> {
    let generation = run.generation.as_ref();
    let mut out = Vec::new();
    let not_llm = |rule: RuleName| {
        format!("{rule}: applies to an LLM model folder run (--model DIR with genai_config.json); this run is of a single model")
    };
    if let Some(max) = limit(rules, RuleName::MaxTtftMs, rules.max_ttft_ms) {
        out.push(match generation.and_then(|g| g.ttft.as_ref()) {
            None => unjudged(RuleName::MaxTtftMs, max, Unit::Ms, not_llm(RuleName::MaxTtftMs)),
            Some(ttft) => {
                let ms = ttft.median_ns / 1e6;
                let (ok, op) = if ms <= max { (true, "<=") } else { (false, ">") };
                let message = format!(
                    "max_ttft_ms: median time to first token {} {op} {} ms (95% CI {}–{}, N={} generations)",
                    fmt_ms(ttft.median_ns),
                    fmt_limit(max),
                    fmt_ms(ttft.median_ci.lower),
                    fmt_ms(ttft.median_ci.upper),
                    ttft.n
                );
                with_clusters(check(RuleName::MaxTtftMs, pass_or_fail(ok), Some(ms), max, Unit::Ms, message), ttft)
            }
        });
    }
    let rates = [
        (
            RuleName::MinDecodeTokS,
            rules.min_decode_tok_s,
            generation.map(|g| (g.decode_tok_s, g.decode.as_ref())),
            "decode",
        ),
        (
            RuleName::MinPrefillTokS,
            rules.min_prefill_tok_s,
            generation.map(|g| (g.prefill_tok_s, g.ttft.as_ref())),
            "prefill",
        ),
    ];
    for (rule, value, measured, what) in rates {
        let Some(min) = limit(rules, rule, value) else { continue };
        out.push(match measured {
            None | Some((_, None)) => unjudged(rule, min, Unit::TokensPerSecond, not_llm(rule)),
            Some((rate, Some(series))) => {
                let (ok, op) = if rate >= min { (true, ">=") } else { (false, "<") };
                let message = format!(
                    "{rule}: {what} {rate:.1} tok/s {op} {} tok/s (median {} per {}, N={})",
                    fmt_limit(min),
                    fmt_ms(series.median_ns),
                    if what == "decode" { "token" } else { "prompt" },
                    series.n
                );
                with_clusters(check(rule, pass_or_fail(ok), Some(rate), min, Unit::TokensPerSecond, message), series)
            }
        });
    }
    if let Some(max) = limit(rules, RuleName::DecodeCvPct, rules.decode_cv_pct) {
        out.push(match generation.and(steps) {
            None => unjudged(RuleName::DecodeCvPct, max, Unit::Percent, not_llm(RuleName::DecodeCvPct)),
            Some(decode) if decode.n < stats::MIN_RUNS_FOR_CV && machine.asked_runs() >= stats::MIN_RUNS_FOR_CV => {
                machine.too_few_clean(RuleName::DecodeCvPct, stats::MIN_RUNS_FOR_CV, max, Unit::Percent, "a CV limit")
            }
            Some(decode) if decode.n < stats::MIN_RUNS_FOR_CV => {
                let message = format!("decode_cv_pct: a CV limit needs at least {} decode steps, this run has {}; pass more --gen-tokens or --generations", stats::MIN_RUNS_FOR_CV, machine.asked_runs());
                check(RuleName::DecodeCvPct, CheckStatus::Fail, None, max, Unit::Percent, message)
            }
            Some(decode) => {
                let (ok, op) = if decode.cv_pct <= max { (true, "<=") } else { (false, ">") };
                let message = format!("decode_cv_pct {} {op} {}% (per-token stdev {}, mean {}, N={} steps, growth with the context taken out)", fmt_pct(decode.cv_pct), fmt_limit(max), fmt_ms(decode.stdev_ns), fmt_ms(decode.mean_ns), decode.n);
                with_clusters(check(RuleName::DecodeCvPct, pass_or_fail(ok), Some(decode.cv_pct), max, Unit::Percent, message), decode)
            }
        });
    }
    out
}

/// A placement report with the fallback nodes split into blamed ones and excused ones
/// (`expected: true` or allow-listed).
struct PlacementView<'a> {
    report: &'a PlacementReport,
    blamed: Vec<&'a FallbackNode>,
    excused: Vec<&'a FallbackNode>,
}

impl<'a> PlacementView<'a> {
    fn new(report: &'a PlacementReport, rules: &Rules) -> PlacementView<'a> {
        let (excused, blamed) = report.fallback.iter().partition(|n| n.expected || rules.allows(&n.name, &n.op_type));
        PlacementView { report, blamed, excused }
    }

    fn excused_note(&self) -> String {
        match self.excused.len() {
            0 => String::new(),
            n => format!(" (counting {n} expected or allow-listed node(s) as on {})", self.report.preferred_ep),
        }
    }

    /// True when no FLOPs are known (nothing but data movement, or a compiled model without its
    /// source): the placement's FLOP shares are then its node shares.
    fn flops_counted_by_nodes(&self) -> bool {
        self.report.totals.flops == 0
    }

    /// Share of FLOPs on the preferred EP, excused nodes counted as on it — by nodes, as the share
    /// itself is, when no FLOPs are known.
    fn flops_pct(&self) -> f64 {
        if self.flops_counted_by_nodes() {
            return self.nodes_pct();
        }
        (self.report.preferred_flops_pct + self.excused.iter().map(|n| n.flops_pct).sum::<f64>()).min(100.0)
    }

    /// Share of nodes on the preferred EP, excused nodes counted as on it.
    fn nodes_pct(&self) -> f64 {
        let total = self.report.totals.nodes.max(1) as f64;
        (self.report.preferred_nodes_pct + self.excused.len() as f64 / total * 100.0).min(100.0)
    }

    /// Share of kernel time on the preferred EP, excused nodes counted as on it; `None` without a profile.
    fn time_pct(&self) -> Option<f64> {
        let preferred = self.report.preferred_time_pct?;
        let total = self.report.totals.time_us_per_run.filter(|t| *t > 0.0);
        let excused: f64 = self.excused.iter().filter_map(|n| n.time_us_per_run).sum();
        Some((preferred + total.map_or(0.0, |t| excused / t * 100.0)).min(100.0))
    }

    /// Blamed nodes ordered by a cost, most expensive first.
    fn blamed_by(&self, cost: impl Fn(&FallbackNode) -> f64) -> Vec<Culprit> {
        let mut nodes = self.blamed.clone();
        nodes.sort_by(|a, b| cost(b).total_cmp(&cost(a)));
        nodes.into_iter().map(Culprit::from_fallback).collect()
    }
}

/// `: A node … runs on CPU; B node …; and 4 more` naming the first few culprits.
pub(crate) fn name_nodes(nodes: &[Culprit]) -> String {
    if nodes.is_empty() {
        return String::new();
    }
    let named: Vec<String> = nodes.iter().take(NAMED_NODES).map(Culprit::describe).collect();
    let more = nodes.len().saturating_sub(NAMED_NODES);
    let tail = if more > 0 { format!("; and {more} more") } else { String::new() };
    format!(": {}{tail}", named.join("; "))
}

/// `; by cause: 330 nodes: Cannot get shape (e.g. …) → …; 2 nodes: …` — the EP's reasons by
/// cause (see [`PlacementReport::rejections`]), and a preferred EP that claimed nothing said so.
fn causes_note(report: &PlacementReport) -> String {
    const NAMED_CAUSES: usize = 3;
    let mut note = String::new();
    let claimed = report.per_ep.iter().any(|e| e.ep == report.preferred_ep && e.nodes > 0);
    if !claimed && report.totals.nodes > 0 {
        note.push_str(&format!("; {} started but claimed no node", report.preferred_ep));
    }
    if !report.rejections.is_empty() {
        let causes: Vec<String> = report.rejections.iter().take(NAMED_CAUSES).map(|c| c.describe()).collect();
        let more = report.rejections.len().saturating_sub(NAMED_CAUSES);
        let tail = if more > 0 { format!("; and {more} more cause(s)") } else { String::new() };
        note.push_str(&format!("; by cause: {}{tail}", causes.join("; ")));
    }
    note
}

fn share_check(rule: RuleName, measured: f64, min: f64, culprits: Vec<Culprit>, note: &str, causes: &str) -> Check {
    let ok = measured >= min;
    let op = if ok { ">=" } else { "<" };
    let (nodes, causes) = if ok { (Vec::new(), "") } else { (culprits, causes) };
    let message = format!("{rule} {} {op} {}%{note}{}{causes}", fmt_pct(measured), fmt_limit(min), name_nodes(&nodes));
    Check { nodes, ..check(rule, pass_or_fail(ok), Some(measured), min, Unit::Percent, message) }
}

fn count_check(
    rule: RuleName,
    measured: usize,
    max: usize,
    unit: Unit,
    detail: String,
    nodes: Vec<Culprit>,
    causes: &str,
) -> Check {
    let ok = measured <= max;
    let op = if ok { "<=" } else { ">" };
    let (nodes, causes) = if ok { (Vec::new(), "") } else { (nodes, causes) };
    let message = format!("{rule}: {measured} {unit} {op} {max}{detail}{}{causes}", name_nodes(&nodes));
    Check { nodes, ..check(rule, pass_or_fail(ok), Some(measured as f64), max as f64, unit, message) }
}

fn placement_checks(view: Option<&PlacementView<'_>>, rules: &Rules) -> Vec<Check> {
    let shares = [
        (RuleName::NpuFlopsPct, rules.npu_flops_pct),
        (RuleName::NpuNodesPct, rules.npu_nodes_pct),
        (RuleName::NpuTimePct, rules.npu_time_pct),
    ];
    let counts = [
        (RuleName::MaxFallbackNodes, rules.max_fallback_nodes, Unit::Nodes),
        (RuleName::MaxPartitions, rules.max_partitions, Unit::Partitions),
        (RuleName::MaxBoundaries, rules.max_boundaries, Unit::Switches),
    ];
    let missing = |rule: RuleName| {
        format!("{rule}: no placement report for this run (it needs the EP assignment and the ORT profile)")
    };
    let mut out = Vec::new();
    for (rule, value) in shares {
        let Some(min) = limit(rules, rule, value) else { continue };
        let Some(v) = view else {
            out.push(unjudged(rule, min, Unit::Percent, missing(rule)));
            continue;
        };
        let (note, causes) = (v.excused_note(), causes_note(v.report));
        out.push(match rule {
            RuleName::NpuFlopsPct if v.flops_counted_by_nodes() => {
                let note = format!(" (no FLOPs known: counted by nodes){note}");
                share_check(rule, v.flops_pct(), min, v.blamed_by(|n| n.flops_pct), &note, &causes)
            }
            RuleName::NpuFlopsPct => {
                share_check(rule, v.flops_pct(), min, v.blamed_by(|n| n.flops_pct), &note, &causes)
            }
            RuleName::NpuNodesPct => {
                share_check(rule, v.nodes_pct(), min, v.blamed_by(|n| n.flops_pct), &note, &causes)
            }
            _ => match v.time_pct() {
                Some(pct) => {
                    share_check(rule, pct, min, v.blamed_by(|n| n.time_us_per_run.unwrap_or(0.0)), &note, &causes)
                }
                None => unjudged(
                    rule,
                    min,
                    Unit::Percent,
                    format!("{rule}: the placement report has no kernel times (no profiled runs)"),
                ),
            },
        });
    }
    for (rule, value, unit) in counts {
        let Some(max) = limit(rules, rule, value) else { continue };
        let Some(v) = view else {
            out.push(unjudged(rule, max as f64, unit, missing(rule)));
            continue;
        };
        out.push(match rule {
            RuleName::MaxFallbackNodes => {
                let detail = format!(" off {}{}", v.report.preferred_ep, v.excused_note());
                count_check(
                    rule,
                    v.blamed.len(),
                    max,
                    unit,
                    detail,
                    v.blamed_by(|n| n.flops_pct),
                    &causes_note(v.report),
                )
            }
            RuleName::MaxPartitions => {
                let sizes: Vec<String> = v.report.partitions.iter().map(|p| p.nodes.len().to_string()).collect();
                let detail = if sizes.is_empty() {
                    String::new()
                } else {
                    format!(" (nodes per partition: {})", sizes.join(", "))
                };
                count_check(rule, v.report.partitions.len(), max, unit, detail, Vec::new(), "")
            }
            _ => {
                let b = &v.report.boundaries;
                let measured = b.per_run.iter().copied().max().unwrap_or(b.transitions.len());
                let cost = b
                    .gap_us_per_run
                    .map(|us| format!("; {} idle at the switches per run", fmt_ms_from_us(us)))
                    .unwrap_or_default();
                let detail = b
                    .transitions
                    .first()
                    .map(|t| format!(" per run (first: {} → {} after {}{cost})", t.from_ep, t.to_ep, t.after))
                    .unwrap_or_default();
                count_check(rule, measured, max, unit, detail, Vec::new(), "")
            }
        });
    }
    out
}

/// Which baseline rules are on for this run, with their limits (stage 1 of [`compare`]).
struct BaselineLimits<'a> {
    /// `baseline_median_pct`, when enabled.
    median: Option<f64>,
    /// The run's TTFTs, when both this run and the baseline are LLM generations with TTFTs.
    ttft: Option<&'a [u64]>,
    /// `baseline_ttft_pct`, when enabled and there are TTFTs to compare.
    ttft_limit: Option<f64>,
    /// Whether `baseline_placement` is judged.
    placement: bool,
}

impl<'a> BaselineLimits<'a> {
    /// Resolves the baseline rules from `rules` for `run` against `baseline`.
    fn resolve(run: &'a RunResult, baseline: &Baseline, rules: &Rules) -> Self {
        let median = limit(rules, RuleName::BaselineMedianPct, rules.baseline_median_pct);
        // TTFT is compared when both are LLM generations (the baseline saved one's TTFTs).
        let ttft = run
            .generation
            .as_ref()
            .map(|g| g.ttft_ns.as_slice())
            .filter(|t| !t.is_empty() && !baseline.ttft_ns.is_empty());
        let ttft_limit = ttft.and(limit(rules, RuleName::BaselineTtftPct, rules.baseline_ttft_pct));
        let placement = rules.baseline_placement && rules.enabled(RuleName::BaselinePlacement);
        BaselineLimits { median, ttft, ttft_limit, placement }
    }
}

/// The baseline checks; `latencies` are the run's judged latencies.
fn compare(
    run: &RunResult,
    latencies: &[u64],
    view: Option<&PlacementView<'_>>,
    rules: &Rules,
    comparison: Comparison<'_>,
    checks: &mut Vec<Check>,
    errors: &mut Vec<String>,
) -> BaselineComparison {
    let baseline = comparison.baseline;
    let differences = Fingerprint::of(run).differences(&baseline.fingerprint);
    let refused = !differences.is_empty() && !comparison.force;
    let mut result = BaselineComparison {
        source: baseline.source.clone(),
        fingerprint: baseline.fingerprint.clone(),
        fingerprint_differences: differences.clone(),
        forced: comparison.force && !differences.is_empty(),
        median_ratio: None,
        ttft_ratio: None,
        moved_off_preferred: Vec::new(),
    };
    let limits = BaselineLimits::resolve(run, baseline, rules);
    if refused {
        refuse_baseline(baseline, &differences, &limits, checks, errors);
        return result;
    }
    if let Some(pct) = limits.median {
        result.median_ratio = stats::median_ratio(latencies, &baseline.latencies_ns);
        checks.push(baseline_median_check(&result.median_ratio, pct));
    }
    if let (Some(pct), Some(ttft)) = (limits.ttft_limit, limits.ttft) {
        result.ttft_ratio = stats::median_ratio(ttft, &baseline.ttft_ns);
        checks.push(baseline_ttft_check(&result.ttft_ratio, pct));
    }
    if limits.placement {
        checks.push(baseline_placement_check(view, baseline, rules, &mut result.moved_off_preferred));
    }
    result
}

/// The error and the unjudged checks when the fingerprints differ and `--force` was not given.
fn refuse_baseline(
    baseline: &Baseline,
    differences: &[String],
    limits: &BaselineLimits<'_>,
    checks: &mut Vec<Check>,
    errors: &mut Vec<String>,
) {
    errors.push(format!(
        "refusing to compare with baseline {}: {}; compare like with like, or pass --force",
        baseline.source,
        differences.join("; ")
    ));
    let why = "not compared: the fingerprints differ (see errors)".to_string();
    if let Some(pct) = limits.median {
        checks.push(unjudged(RuleName::BaselineMedianPct, pct, Unit::Percent, format!("baseline_median_pct: {why}")));
    }
    if let Some(pct) = limits.ttft_limit {
        checks.push(unjudged(RuleName::BaselineTtftPct, pct, Unit::Percent, format!("baseline_ttft_pct: {why}")));
    }
    if limits.placement {
        checks.push(unjudged(RuleName::BaselinePlacement, 0.0, Unit::Nodes, format!("baseline_placement: {why}")));
    }
}

/// `baseline_median_pct` on the median ratio (unjudged when there were no latencies).
fn baseline_median_check(ratio: &Option<stats::MedianRatio>, pct: f64) -> Check {
    match ratio {
        None => unjudged(
            RuleName::BaselineMedianPct,
            pct,
            Unit::Percent,
            "baseline_median_pct: no latencies to compare".into(),
        ),
        Some(r) => median_ratio_check(r, pct),
    }
}

/// `baseline_ttft_pct` on the TTFT median ratio (unjudged when there were too few generations).
fn baseline_ttft_check(ratio: &Option<stats::MedianRatio>, pct: f64) -> Check {
    match ratio {
        None => unjudged(
            RuleName::BaselineTtftPct,
            pct,
            Unit::Percent,
            "baseline_ttft_pct: too few generations to compare".into(),
        ),
        Some(r) => ratio_check(
            RuleName::BaselineTtftPct,
            &format!("median time to first token is {:.3}× the baseline's", r.ratio),
            r.ratio,
            &r.ci,
            pct,
        ),
    }
}

/// `baseline_placement`: nodes moved off the preferred EP; fills `moved` when both placements exist.
fn baseline_placement_check(
    view: Option<&PlacementView<'_>>,
    baseline: &Baseline,
    rules: &Rules,
    moved: &mut Vec<Culprit>,
) -> Check {
    match (view, &baseline.placement) {
        (Some(v), Some(before)) => {
            *moved = moved_nodes(v, before, rules);
            placement_diff_check(moved, &before.preferred_ep)
        }
        (None, _) => unjudged(
            RuleName::BaselinePlacement,
            0.0,
            Unit::Nodes,
            "baseline_placement: this run has no placement report".into(),
        ),
        (_, None) => unjudged(
            RuleName::BaselinePlacement,
            0.0,
            Unit::Nodes,
            "baseline_placement: the baseline has no placement (save it from a profiled run)".into(),
        ),
    }
}

/// Fails only when the whole interval of the median ratio lies above 1 + limit, so noise cannot flip it.
fn median_ratio_check(r: &stats::MedianRatio, pct: f64) -> Check {
    ratio_check(RuleName::BaselineMedianPct, &format!("median is {:.3}× the baseline", r.ratio), r.ratio, &r.ci, pct)
}

/// A ratio rule judged on its interval: fails only when the whole interval lies above 1 + `pct`%.
/// `what` states the estimate (`median is 1.104× the baseline`); the interval and the judgement follow.
pub(crate) fn ratio_check(rule: RuleName, what: &str, ratio: f64, ci: &stats::ConfidenceInterval, pct: f64) -> Check {
    let max_ratio = 1.0 + pct / 100.0;
    let ok = ci.lower <= max_ratio;
    let verdict = if !ok {
        format!("> {max_ratio:.2}× even at the interval's lower bound")
    } else if ci.upper > max_ratio {
        format!("interval reaches above {max_ratio:.2}× but its lower bound does not: within noise")
    } else {
        format!("<= {max_ratio:.2}×")
    };
    let message = format!("{rule}: {what} ({:.0}% CI {:.3}–{:.3}×), {verdict}", ci.level * 100.0, ci.lower, ci.upper);
    Check { measured: Some((ratio - 1.0) * 100.0), ..check(rule, pass_or_fail(ok), None, pct, Unit::Percent, message) }
}

/// Nodes on the baseline's preferred EP that now run elsewhere, unless excused.
fn moved_nodes(view: &PlacementView<'_>, before: &crate::baseline::BaselinePlacement, rules: &Rules) -> Vec<Culprit> {
    view.report
        .nodes
        .iter()
        .filter(|n| {
            n.not_placed.is_none()
                && n.ep != before.preferred_ep
                && before.nodes.get(&n.name) == Some(&before.preferred_ep)
        })
        .filter(|n| !rules.allows(&n.name, &n.op_type))
        .filter(|n| !view.excused.iter().any(|e| e.name == n.name))
        .map(|n| moved_culprit(view.report, n, Some(&before.preferred_ep)))
        .collect()
}

/// A node of `report` that ran elsewhere before (`before`: its EP then, `None` when it is new),
/// with its costs, reason and hint when it is a fallback node.
pub(crate) fn moved_culprit(report: &PlacementReport, node: &NodePlacement, before: Option<&str>) -> Culprit {
    let fallback = report.fallback.iter().find(|f| f.name == node.name);
    Culprit {
        baseline_ep: before.map(str::to_string),
        ..fallback.map(Culprit::from_fallback).unwrap_or_else(|| Culprit {
            name: node.name.clone(),
            op_type: node.op_type.clone(),
            ep: node.ep.clone(),
            baseline_ep: None,
            flops_pct: None,
            time_us_per_run: None,
            reason: None,
            hint: None,
        })
    }
}

fn placement_diff_check(moved: &[Culprit], preferred: &str) -> Check {
    let passed = format!("no node moved off {preferred}");
    nodes_check(RuleName::BaselinePlacement, moved, &passed, &format!("node(s) moved off {preferred}"))
}

/// A rule that fails when any node is listed: `<rule>: <passed>`, or `<rule>: N <failed>: A node …`.
pub(crate) fn nodes_check(rule: RuleName, nodes: &[Culprit], passed: &str, failed: &str) -> Check {
    let ok = nodes.is_empty();
    let message =
        if ok { format!("{rule}: {passed}") } else { format!("{rule}: {} {failed}{}", nodes.len(), name_nodes(nodes)) };
    Check {
        nodes: nodes.to_vec(),
        ..check(rule, pass_or_fail(ok), Some(nodes.len() as f64), 0.0, Unit::Nodes, message)
    }
}

/// The warnings that are not about latency: a predicted placement, the HTP power configuration,
/// the harness's own.
fn warnings_of_the_run(run: &RunResult, placement: Option<&PlacementReport>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(predicted) = placement.and_then(|p| p.predicted.as_ref()) {
        out.push(format!("placement is a prediction: {predicted}"));
    }
    out.extend(htp_performance_mode_warning(run));
    out.extend(run.warnings.iter().cloned());
    out
}

/// A warning when the QNN HTP backend did not apply the `htp_performance_mode` the run asked for
/// (the timed runs then ran in the backend's default power state), or left no record of it.
fn htp_performance_mode_warning(run: &RunResult) -> Option<String> {
    let options = &run.execution.ep_options;
    let requested = options.get("htp_performance_mode").filter(|mode| *mode != "default")?;
    let htp = options.get("backend_type").is_some_and(|t| t == "htp")
        || options.get("backend_path").is_some_and(|p| p.to_ascii_lowercase().contains("htp"));
    let backend = run.backend.as_ref().filter(|b| htp && b.started)?;
    let said = match &backend.htp_power {
        None => "the log holds no account of the HTP backend's power configuration (a harness older than the account, or a log below VERBOSE)".to_string(),
        Some(power) if !power.applied => format!("not applied: {}", power.not_applied.as_deref().unwrap_or("the backend did not set it")),
        Some(power) => match power.performance_mode.as_deref() {
            Some(mode) if mode != requested => format!("the EP set {mode} instead"),
            _ => return None,
        },
    };
    Some(format!("htp_performance_mode={requested} was requested, but {said}; the timed runs ran in whatever power state the HTP was in"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_evidence_from_reading_the_comparison() {
        assert!(matches!(OutputsEvidence::from_read::<String>(&Ok(None)), OutputsEvidence::NotChecked));
        let unreadable: Result<Option<OutputsReport>, String> = Err("outputs.json is not valid JSON".into());
        assert!(
            matches!(OutputsEvidence::from_read(&unreadable), OutputsEvidence::Failed(why) if why == "outputs.json is not valid JSON")
        );
    }
}
