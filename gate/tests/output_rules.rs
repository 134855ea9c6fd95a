//! Output-consistency rules: `min_cosine`, `min_sqnr_db` and `max_abs_err` judge the worst output
//! against the reference, fail on their threshold naming the output, and are unjudged without a
//! comparison; they are off by default.

mod common;

use common::{detector_nodes, normal_series, placement, run, QNN};
use npugate_gate::export::Format;
use npugate_gate::outputs::{compare_tensors, OutputsReport, ReferenceSource, OUTPUTS_SCHEMA};
use npugate_gate::rules::RuleName;
use npugate_gate::verdict::{CheckStatus, Outcome};
use npugate_gate::{judge, Evidence, OutputsEvidence, Rules, Verdict};

/// A report of two outputs: `boxes` equal to the reference, `scores` off by a known step.
fn report(scores_error: f64) -> OutputsReport {
    let reference: Vec<f64> = (0..40).map(|i| (i as f64 * 0.37).sin()).collect();
    let scores: Vec<f64> =
        reference.iter().enumerate().map(|(i, r)| if i % 4 == 0 { r + scores_error } else { *r }).collect();
    OutputsReport {
        schema: OUTPUTS_SCHEMA.into(),
        reference: ReferenceSource {
            model: "float.onnx".into(),
            model_sha256: "0".repeat(64),
            ep: "CPUExecutionProvider".into(),
            result_dir: "output-reference".into(),
        },
        outputs: vec![
            compare_tensors("boxes", (&[4, 10], &reference), (&[4, 10], &reference)).unwrap(),
            compare_tensors("scores", (&[4, 10], &reference), (&[4, 10], &scores)).unwrap(),
        ],
    }
}

fn judged(rules: Rules, outputs: Option<&OutputsReport>) -> Verdict {
    let (run, report) = (run(normal_series(100, 8.0, 3.0, 1)), placement(QNN, &detector_nodes()));
    let outputs = outputs.map_or(OutputsEvidence::NotChecked, OutputsEvidence::Compared);
    judge(&Evidence { outputs, ..Evidence::new(&run, Ok(&report)) }, &rules)
}

fn rules(overrides: &[&str]) -> Rules {
    Rules::load(None, &overrides.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
}

#[test]
fn output_rules_are_off_by_default() {
    let verdict = judged(Rules::default(), Some(&report(0.5)));
    assert_eq!(verdict.outcome, Outcome::Pass);
    assert!(verdict
        .checks
        .iter()
        .all(|c| !matches!(c.rule, RuleName::MinCosine | RuleName::MinSqnrDb | RuleName::MaxAbsErr)));
}

#[test]
fn each_threshold_fails_on_the_worst_output_and_names_it() {
    let verdict = judged(rules(&["min_cosine=0.9999", "min_sqnr_db=30", "max_abs_err=0.01"]), Some(&report(0.1)));
    assert_eq!(verdict.outcome, Outcome::Fail);
    for rule in [RuleName::MinCosine, RuleName::MinSqnrDb, RuleName::MaxAbsErr] {
        let check = verdict.checks.iter().find(|c| c.rule == rule).unwrap();
        assert_eq!(check.status, CheckStatus::Fail, "{}", check.message);
        assert!(check.message.contains("output scores"), "{}", check.message);
    }
    let abs = verdict.checks.iter().find(|c| c.rule == RuleName::MaxAbsErr).unwrap();
    assert!((abs.measured.unwrap() - 0.1).abs() < 1e-12);
}

#[test]
fn thresholds_the_outputs_meet_pass() {
    // Noise 1e-4 on every 4th element of a unit-scale signal: SQNR ≈ 76 dB, cosine ≈ 1 - 1e-9.
    let verdict = judged(rules(&["min_cosine=0.9999", "min_sqnr_db=30", "max_abs_err=0.01"]), Some(&report(1e-4)));
    assert_eq!(verdict.outcome, Outcome::Pass, "{:?}", verdict.checks);
    let markdown = Format::Markdown.exporter(false).render(&verdict);
    assert!(markdown.contains("`min_sqnr_db`"), "{markdown}");
}

#[test]
fn identical_outputs_pass_an_sqnr_rule_with_infinite_sqnr() {
    let verdict = judged(rules(&["min_sqnr_db=200"]), Some(&report(0.0)));
    let check = verdict.checks.iter().find(|c| c.rule == RuleName::MinSqnrDb).unwrap();
    assert_eq!(check.status, CheckStatus::Pass, "{}", check.message);
    assert!(check.message.contains('∞'), "{}", check.message);
}

#[test]
fn without_a_comparison_the_rule_is_unjudged_and_says_how_to_get_one() {
    let verdict = judged(rules(&["min_cosine=0.99"]), None);
    assert_eq!(verdict.outcome, Outcome::Error);
    let check = verdict.checks.iter().find(|c| c.rule == RuleName::MinCosine).unwrap();
    assert_eq!(check.status, CheckStatus::Unjudged);
    assert!(check.message.contains("--check-outputs"), "{}", check.message);
}

#[test]
fn an_unreadable_comparison_is_an_error_and_leaves_the_rules_unjudged() {
    let (run, report) = (run(normal_series(100, 8.0, 3.0, 1)), placement(QNN, &detector_nodes()));
    let outputs = OutputsEvidence::Failed("outputs.json has schema \"npugate.outputs/2\"".into());
    let verdict = judge(&Evidence { outputs, ..Evidence::new(&run, Ok(&report)) }, &rules(&["min_sqnr_db=30"]));
    assert_eq!(verdict.outcome, Outcome::Error);
    assert_eq!(verdict.errors, ["outputs.json has schema \"npugate.outputs/2\""]);
    let check = verdict.checks.iter().find(|c| c.rule == RuleName::MinSqnrDb).unwrap();
    assert_eq!(check.status, CheckStatus::Unjudged, "{}", check.message);
    assert!(verdict.outputs.is_none());
}
