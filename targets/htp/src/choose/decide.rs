//! The decision of `npugate choose`, free of I/O: each SoC × variant's samples merged into one
//! [`Cell`] (the worst accuracy over the samples), then per SoC the fastest variant that runs whole
//! on the HTP and meets the [`AccuracyRule`], or none and why.

use std::path::Path;

use npugate_gate::outputs::{OutputComparison, OutputsReport};
use npugate_result::contract::{EXIT_ERROR, EXIT_FAIL, EXIT_PASS};
use npugate_result::hexagon::Soc;

use super::report::{Accuracy, AccuracyRule, Cell, ChooseReport, OutputAccuracy, SampleCell, SocChoice, Variant};

/// Merges each SoC × variant's samples into one cell: whole only when whole on every sample, the
/// accuracy the worst over them. `out` makes the result directories relative.
pub fn merge_samples(
    socs: &[Soc],
    variants: &[Variant],
    per_sample: &[Vec<SampleCell>],
    rule: &AccuracyRule,
    out: &Path,
) -> Vec<Cell> {
    let mut cells = Vec::new();
    for soc in socs {
        for variant in variants {
            let samples: Vec<&SampleCell> = per_sample
                .iter()
                .filter_map(|cells| cells.iter().find(|c| c.soc == soc.model && c.variant == variant.name))
                .collect();
            cells.push(merge_cell(soc, variant, &samples, rule, out));
        }
    }
    cells
}

/// One SoC × variant over its samples.
fn merge_cell(soc: &Soc, variant: &Variant, samples: &[&SampleCell], rule: &AccuracyRule, out: &Path) -> Cell {
    let first = samples.first().map(|s| &s.verdict);
    let off_htp: Vec<String> = first
        .map(|v| v.fallback.iter().filter(|f| !f.expected))
        .into_iter()
        .flatten()
        .map(|f| format!("{} ({}): {}", f.name, f.op_type, f.reason.as_deref().unwrap_or("no reason in the log")))
        .collect();
    let error = samples.iter().find_map(|s| {
        s.verdict.error.clone().or_else(|| match &s.outputs {
            Some(Err(why)) => Some(format!("outputs not compared: {why}")),
            _ => None,
        })
    });
    let compiled = samples.iter().all(|s| s.verdict.compiled) && !samples.is_empty();
    let ran = samples.iter().all(|s| s.verdict.executed == Some(true));
    let reports: Vec<&OutputsReport> = samples.iter().filter_map(|s| s.outputs.as_ref()?.as_ref().ok()).collect();
    let accuracy = (!reports.is_empty() && reports.len() == samples.len()).then(|| accuracy(&reports, rule));
    let estimate = first.and_then(|v| v.estimate.as_ref());
    let whole = compiled && ran && off_htp.is_empty() && error.is_none();
    Cell {
        soc: soc.model.into(),
        variant: variant.name.clone(),
        compiled,
        whole,
        off_htp,
        error,
        not_judged: samples.is_empty() || samples.iter().any(|s| s.not_judged),
        accuracy,
        estimate_ms: estimate.and_then(|e| e.estimate_ms).filter(|_| whole),
        estimate_note: estimate.map(|e| match (&e.error, &e.no_estimate) {
            (Some(error), _) => format!("ESTIMATE ±{:.0}% p90", 100.0 * error.p90_rel),
            (None, Some(why)) => format!("no estimate: {why}"),
            (None, None) => "no estimate".into(),
        }),
        result_dirs: samples
            .iter()
            .filter_map(|s| s.verdict.result_dir.as_ref())
            .map(|dir| dir.strip_prefix(out).unwrap_or(dir).display().to_string())
            .collect(),
        cached: !samples.is_empty() && samples.iter().all(|s| s.cached),
    }
}

/// The worst of each output over `reports`, judged by `rule`.
fn accuracy(reports: &[&OutputsReport], rule: &AccuracyRule) -> Accuracy {
    let names: Vec<&str> = reports[0].outputs.iter().map(|o| o.name.as_str()).collect();
    let outputs: Vec<OutputAccuracy> = names
        .iter()
        .map(|name| {
            let all: Vec<&OutputComparison> =
                reports.iter().filter_map(|r| r.outputs.iter().find(|o| o.name == *name)).collect();
            let sqnr = all.iter().map(|o| o.metrics.sqnr_db).fold(f64::INFINITY, f64::min);
            let cosine = all.iter().map(|o| o.metrics.cosine).fold(f64::INFINITY, f64::min);
            // Rows weigh equally: each sample's agreement weighted by its rows.
            let rows: Vec<(f64, f64)> = all
                .iter()
                .filter_map(|o| {
                    let pct = o.metrics.top1_agreement_pct?;
                    let per_row = o.shape.last().copied().unwrap_or(1).max(1) as f64;
                    Some((pct, o.metrics.elements as f64 / per_row))
                })
                .collect();
            let total: f64 = rows.iter().map(|(_, n)| n).sum();
            let top1 = (rows.len() == all.len() && total > 0.0)
                .then(|| rows.iter().map(|(pct, n)| pct * n).sum::<f64>() / total);
            OutputAccuracy { name: name.to_string(), sqnr_db: sqnr.is_finite().then_some(sqnr), cosine, top1_pct: top1 }
        })
        .collect();
    let miss = outputs.iter().find_map(|o| match (o.top1_pct, o.sqnr_db) {
        (_, Some(sqnr)) if sqnr < rule.min_sqnr_db => {
            Some(format!("{}: SQNR {sqnr:.1} dB < {} dB", o.name, rule.min_sqnr_db))
        }
        (Some(top1), _) if top1 < rule.min_top1_pct => {
            Some(format!("{}: top-1 agreement {top1:.1}% < {}%", o.name, rule.min_top1_pct))
        }
        _ => None,
    });
    Accuracy { meets: miss.is_none(), outputs, miss }
}

/// Estimates closer than this (relative to the faster) count as equally fast: the latency model's
/// inputs barely tell such variants apart, so the smaller file wins.
pub const SAME_SPEED: f64 = 0.05;

/// Per SoC, the fastest variant by ESTIMATED latency that runs whole and meets the rule; among
/// variants within [`SAME_SPEED`] of the fastest — or when none has an estimate — the smallest file.
pub fn choose(socs: &[Soc], variants: &[Variant], cells: &[Cell]) -> Vec<SocChoice> {
    socs.iter()
        .map(|soc| {
            let row: Vec<&Cell> = cells.iter().filter(|c| c.soc == soc.model).collect();
            let size = |cell: &Cell| variants.iter().find(|v| v.name == cell.variant).map_or(u64::MAX, |v| v.bytes);
            let mut fit: Vec<&Cell> =
                row.iter().copied().filter(|c| c.whole && c.accuracy.as_ref().is_some_and(|a| a.meets)).collect();
            let fastest = fit.iter().filter_map(|c| c.estimate_ms).min_by(f64::total_cmp);
            // 0: as fast as the fastest (or no estimate anywhere), 1: slower, 2: no estimate.
            let tier = |c: &Cell| match (c.estimate_ms, fastest) {
                (Some(ms), Some(best)) if ms <= best * (1.0 + SAME_SPEED) => 0,
                (Some(_), _) => 1,
                (None, None) => 0,
                (None, Some(_)) => 2,
            };
            fit.sort_by(|a, b| {
                let speed = |c: &Cell| if tier(c) == 0 { 0.0 } else { c.estimate_ms.unwrap_or(f64::MAX) };
                tier(a).cmp(&tier(b)).then(speed(a).total_cmp(&speed(b))).then(size(a).cmp(&size(b)))
            });
            let (variant, why) = match fit.as_slice() {
                [] => (None, format!("no variant runs whole and meets the rule: {}", reasons(&row))),
                [best, rest @ ..] => {
                    let ties = rest.iter().filter(|c| tier(c) == 0).count();
                    (Some(best.variant.clone()), chosen_why(best, rest, ties))
                }
            };
            SocChoice { soc: soc.model.into(), htp_arch: soc.arch.into(), variant, why }
        })
        .collect()
}

/// Why `best` won over the other fitting cells, `ties` of which are as fast by the estimate.
fn chosen_why(best: &Cell, rest: &[&Cell], ties: usize) -> String {
    let speed = match (best.estimate_ms, ties) {
        (Some(ms), 0) => format!("fastest by ESTIMATE (~{ms:.2} ms)"),
        (Some(ms), _) => format!(
            "~{ms:.2} ms by ESTIMATE, within {:.0}% of the fastest with {ties} other(s): the smallest file of those",
            100.0 * SAME_SPEED
        ),
        (None, _) => "no fitting variant has an estimate: the smallest file".into(),
    };
    match rest {
        [] => format!("the only variant that runs whole and meets the rule; {speed}"),
        _ => format!(
            "{speed}; {} variants run whole and meet the rule (also {})",
            rest.len() + 1,
            rest.iter().map(|c| c.variant.as_str()).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Why each variant of a SoC's row does not fit, `; `-joined.
fn reasons(row: &[&Cell]) -> String {
    let why = |cell: &Cell| -> String {
        if cell.not_judged {
            return format!("not judged ({})", cell.error.as_deref().unwrap_or("no result"));
        }
        if !cell.compiled {
            return format!("does not compile ({})", cell.error.as_deref().unwrap_or("no reason given"));
        }
        if !cell.off_htp.is_empty() {
            let first = &cell.off_htp[0];
            return format!("{} node(s) off the HTP, e.g. {first}", cell.off_htp.len());
        }
        if let Some(error) = &cell.error {
            return error.clone();
        }
        match &cell.accuracy {
            Some(accuracy) => accuracy.miss.clone().unwrap_or_default(),
            None => "no outputs to compare".into(),
        }
    };
    row.iter().map(|cell| format!("{}: {}", cell.variant, why(cell))).collect::<Vec<_>>().join("; ")
}

/// What changed from `earlier`'s choices to `choices`: a SoC that lost its variant, or whose
/// chosen variant changed; one sentence each.
pub fn changes_since(earlier: &ChooseReport, choices: &[SocChoice]) -> Vec<String> {
    let mut changes = Vec::new();
    for before in &earlier.choices {
        let Some(was) = &before.variant else { continue };
        match choices.iter().find(|c| c.soc == before.soc).and_then(|c| c.variant.as_ref()) {
            None => changes.push(format!("{} lost its variant: {was} was chosen in the baseline", before.soc)),
            Some(now) if now != was => {
                changes.push(format!("{}: the chosen variant changed from {was} to {now}", before.soc))
            }
            Some(_) => {}
        }
    }
    changes
}

/// 2 when a cell could not be judged, else 1 when a SoC has no variant or something changed since
/// the baseline, else 0.
pub fn exit_code(cells: &[Cell], choices: &[SocChoice], changes: &[String]) -> u8 {
    if cells.iter().any(|c| c.not_judged) {
        EXIT_ERROR
    } else if choices.iter().any(|c| c.variant.is_none()) || !changes.is_empty() {
        EXIT_FAIL
    } else {
        EXIT_PASS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preflight::{FallbackEntry, SocOutcome, SocVerdict};
    use npugate_gate::outputs::{OutputMetrics, ReferenceSource};
    use std::path::PathBuf;

    fn soc(model: &str) -> Soc {
        npugate_result::hexagon::find(model).unwrap()
    }

    fn variant(name: &str, bytes: u64) -> Variant {
        Variant {
            name: name.into(),
            path: PathBuf::from(format!("{name}.onnx")),
            sha256: name.into(),
            bytes,
            kind: "qdq".into(),
        }
    }

    /// Logits (1×10) that agree with the reference's argmax or not, with this SQNR.
    fn outputs(agree: bool, sqnr_db: f64) -> OutputsReport {
        let reference: Vec<f64> = (0..10).map(f64::from).collect();
        let mut output = reference.clone();
        if !agree {
            output.swap(0, 9);
        }
        let metrics = OutputMetrics { sqnr_db, ..OutputMetrics::compare(&reference, &output, &[1, 10]) };
        OutputsReport {
            schema: npugate_gate::outputs::OUTPUTS_SCHEMA.into(),
            reference: ReferenceSource {
                model: "float.onnx".into(),
                model_sha256: String::new(),
                model_digest: String::new(),
                ep: "CPUExecutionProvider".into(),
                result_dir: String::new(),
            },
            outputs: vec![OutputComparison { name: "logits".into(), shape: vec![1, 10], metrics, non_binary_bools: 0 }],
            tokens: None,
        }
    }

    /// A SoC × variant on one sample: compiled and run whole unless `off` names a node left to
    /// the CPU; `estimate_ms` as the preflight's estimate.
    fn sample(soc: &str, variant: &str, off: Option<&str>, agree: bool, estimate_ms: Option<f64>) -> SampleCell {
        let outcome = if off.is_some() { SocOutcome::Fail } else { SocOutcome::Pass };
        let estimate = npugate_estimate::SocEstimate {
            estimate_ms,
            ..npugate_estimate::SocEstimate::none(soc, "no graph like it".into())
        };
        SampleCell {
            soc: soc.into(),
            variant: variant.into(),
            verdict: SocVerdict {
                soc: soc.into(),
                htp_arch: "v75".into(),
                qnn_soc_model: 57,
                qnn_sdk: "2.51.0".into(),
                runtime: "qnn".into(),
                outcome,
                compiled: true,
                executed: Some(true),
                error: None,
                fallback: off
                    .map(|name| FallbackEntry {
                        name: name.into(),
                        op_type: "Conv".into(),
                        reason: Some("float Conv is not supported on v68".into()),
                        expected: false,
                        hint: None,
                        inside: None,
                    })
                    .into_iter()
                    .collect(),
                nodes_pct: None,
                flops_pct: None,
                seconds: 1.0,
                result_dir: None,
                placement: None,
                estimate: Some(estimate),
            },
            outputs: Some(Ok(outputs(agree, if agree { 40.0 } else { 25.0 }))),
            cached: false,
            not_judged: false,
        }
    }

    fn decided(samples: Vec<Vec<SampleCell>>, rule: &AccuracyRule) -> (Vec<Cell>, Vec<SocChoice>) {
        let socs = [soc("SM8350"), soc("SM8650")];
        let variants = [variant("float", 400), variant("w8a8", 100), variant("w8a16", 200)];
        let cells = merge_samples(&socs, &variants, &samples, rule, std::path::Path::new("out"));
        let choices = choose(&socs, &variants, &cells);
        (cells, choices)
    }

    /// The v68 part cannot take the float model; w8a8 is the fastest where it keeps the top-1.
    fn grid(w8a8_agrees_on_8650: bool) -> Vec<SampleCell> {
        vec![
            sample("SM8350", "float", Some("Conv_0"), true, None),
            sample("SM8350", "w8a8", None, true, Some(1.0)),
            sample("SM8350", "w8a16", None, true, Some(2.0)),
            sample("SM8650", "float", None, true, Some(3.0)),
            sample("SM8650", "w8a8", None, w8a8_agrees_on_8650, Some(0.5)),
            sample("SM8650", "w8a16", None, true, Some(0.8)),
        ]
    }

    #[test]
    fn each_soc_gets_the_fastest_variant_that_runs_whole_and_keeps_its_accuracy() {
        let (cells, choices) = decided(vec![grid(true)], &AccuracyRule::default());
        let chosen: Vec<Option<&str>> = choices.iter().map(|c| c.variant.as_deref()).collect();
        assert_eq!(chosen, [Some("w8a8"), Some("w8a8")]);
        let float_v68 = cells.iter().find(|c| c.soc == "SM8350" && c.variant == "float").unwrap();
        assert!(!float_v68.whole && float_v68.off_htp[0].contains("not supported on v68"), "{float_v68:?}");
        assert_eq!(
            choices[0].why,
            "fastest by ESTIMATE (~1.00 ms); 2 variants run whole and meet the rule (also w8a16)"
        );
        assert_eq!(exit_code(&cells, &choices, &[]), EXIT_PASS);
    }

    #[test]
    fn a_variant_that_misses_the_rule_on_one_soc_moves_that_soc_to_the_next_fastest() {
        let (cells, choices) = decided(vec![grid(true), grid(false)], &AccuracyRule::default());
        assert_eq!(choices[0].variant.as_deref(), Some("w8a8"));
        assert_eq!(choices[1].variant.as_deref(), Some("w8a16"), "{:?}", choices[1]);
        let missed = cells.iter().find(|c| c.soc == "SM8650" && c.variant == "w8a8").unwrap();
        // One of two samples disagrees: 50% top-1, the worst SQNR of both.
        let accuracy = missed.accuracy.as_ref().unwrap();
        assert_eq!((accuracy.outputs[0].top1_pct, accuracy.outputs[0].sqnr_db), (Some(50.0), Some(25.0)));
        assert_eq!(accuracy.miss.as_deref(), Some("logits: top-1 agreement 50.0% < 99%"));
    }

    #[test]
    fn a_soc_with_no_fitting_variant_gets_none_with_each_variants_reason() {
        let rule = AccuracyRule { min_top1_pct: 99.0, min_sqnr_db: 20.0 };
        let samples = vec![
            sample("SM8350", "float", Some("Conv_0"), true, None),
            sample("SM8350", "w8a8", None, false, Some(1.0)),
            sample("SM8350", "w8a16", None, false, Some(2.0)),
            sample("SM8650", "float", None, true, Some(3.0)),
            sample("SM8650", "w8a8", None, true, Some(0.5)),
            sample("SM8650", "w8a16", None, true, Some(0.8)),
        ];
        let (cells, choices) = decided(vec![samples], &rule);
        assert_eq!(choices[0].variant, None);
        assert_eq!(
            choices[0].why,
            "no variant runs whole and meets the rule: float: 1 node(s) off the HTP, e.g. Conv_0 (Conv): float Conv is \
             not supported on v68; w8a8: logits: top-1 agreement 0.0% < 99%; w8a16: logits: top-1 agreement 0.0% < 99%"
        );
        assert_eq!(exit_code(&cells, &choices, &[]), EXIT_FAIL);
    }

    #[test]
    fn a_class_score_output_below_the_sqnr_floor_misses_even_when_its_top1_agrees() {
        let mut samples = grid(true);
        for sample in samples.iter_mut().filter(|s| s.variant == "w8a8") {
            sample.outputs = Some(Ok(outputs(true, 3.0)));
        }
        let (cells, choices) = decided(vec![samples], &AccuracyRule::default());
        let w8a8 = cells.iter().find(|c| c.soc == "SM8650" && c.variant == "w8a8").unwrap();
        assert_eq!(w8a8.accuracy.as_ref().unwrap().miss.as_deref(), Some("logits: SQNR 3.0 dB < 20 dB"));
        assert_eq!(choices[1].variant.as_deref(), Some("w8a16"));
    }

    #[test]
    fn estimates_within_five_percent_are_equally_fast_and_the_smaller_file_wins() {
        let mut samples = grid(true);
        for sample in samples.iter_mut().filter(|s| s.soc == "SM8650") {
            let ms = match sample.variant.as_str() {
                "w8a8" => 0.68,
                "w8a16" => 0.67,
                _ => 0.75,
            };
            sample.verdict.estimate.as_mut().unwrap().estimate_ms = Some(ms);
        }
        let (_, choices) = decided(vec![samples], &AccuracyRule::default());
        assert_eq!(choices[1].variant.as_deref(), Some("w8a8"), "{:?}", choices[1]);
        assert!(
            choices[1].why.contains("~0.68 ms by ESTIMATE, within 5% of the fastest with 1 other(s)"),
            "{}",
            choices[1].why
        );
    }

    #[test]
    fn without_estimates_the_smallest_fitting_file_wins_and_says_so() {
        let samples: Vec<SampleCell> = grid(true)
            .into_iter()
            .map(|mut s| {
                s.verdict.estimate = None;
                s
            })
            .collect();
        let (_, choices) = decided(vec![samples], &AccuracyRule::default());
        assert_eq!(choices[1].variant.as_deref(), Some("w8a8"));
        assert!(choices[1].why.contains("the smallest file"), "{}", choices[1].why);
    }
}
