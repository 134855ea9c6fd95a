//! Output-consistency rules: `min_cosine`, `min_sqnr_db` and `max_abs_err` judge the worst output
//! against the reference, fail on their threshold naming the output, and are unjudged without a
//! comparison; by default `min_cosine` 0.95 and `min_sqnr_db` 10 judge a compared single model.

mod common;

use common::{detector_nodes, normal_series, placement, run, QNN};
use npugate_gate::outputs::{compare_tensors, OutputsReport, ReferenceSource, TokenComparison, OUTPUTS_SCHEMA};
use npugate_gate::rules::RuleName;
use npugate_gate::verdict::{CheckStatus, Outcome};
use npugate_gate::{judge, Evidence, OutputsEvidence, Rules, Verdict};
use npugate_result::report::{self, Format};

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
            model_digest: "0".repeat(64),
            ep: "CPUExecutionProvider".into(),
            result_dir: "output-reference".into(),
        },
        outputs: vec![
            compare_tensors("boxes", (&[4, 10], &reference), (&[4, 10], &reference)).unwrap(),
            compare_tensors("scores", (&[4, 10], &reference), (&[4, 10], &scores)).unwrap(),
        ],
        tokens: None,
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
fn default_output_rules_judge_compared_outputs_only() {
    let is_output_rule =
        |rule: RuleName| matches!(rule, RuleName::MinCosine | RuleName::MinSqnrDb | RuleName::MaxAbsErr);
    // Not compared: the default output rules are not checked (not unjudged either).
    let unchecked = judged(Rules::default(), None);
    assert_eq!(unchecked.outcome, Outcome::Pass);
    assert!(unchecked.checks.iter().all(|c| !is_output_rule(c.rule)));
    // Compared and close (SQNR ≈ 76 dB): both defaults judged, and passed.
    let close = judged(Rules::default(), Some(&report(1e-4)));
    assert_eq!(close.outcome, Outcome::Pass, "{:?}", close.checks);
    let judged_rules: Vec<_> = close.checks.iter().filter(|c| is_output_rule(c.rule)).map(|c| c.rule).collect();
    assert_eq!(judged_rules, [RuleName::MinCosine, RuleName::MinSqnrDb]);
    assert!(close.checks.iter().all(|c| !is_output_rule(c.rule) || c.message.contains("the default limit")));
}

#[test]
fn garbage_outputs_fail_the_default_rules_naming_the_command_that_finds_the_first_divergence() {
    // Every 4th element off by 3 on a unit-scale signal: noise above the signal's power.
    let verdict = judged(Rules::default(), Some(&report(3.0)));
    assert_eq!(verdict.outcome, Outcome::Fail);
    for rule in [RuleName::MinCosine, RuleName::MinSqnrDb] {
        let check = verdict.checks.iter().find(|c| c.rule == rule).unwrap();
        assert_eq!(check.status, CheckStatus::Fail, "{}", check.message);
        assert!(
            check.message.contains("output scores") && check.message.contains("top-1 agreement"),
            "{}",
            check.message
        );
    }
    // The command that finds the first diverging layer, once.
    let command = "npugate numerics --model MODEL --reference-model float.onnx";
    assert_eq!(verdict.checks.iter().filter(|c| c.message.contains(command)).count(), 1, "{:?}", verdict.checks);
    // The caller's own command line for this model and target, as given.
    let (measured, placed) = (run(normal_series(100, 8.0, 3.0, 1)), placement(QNN, &detector_nodes()));
    let line = "npugate numerics --local --model 'my model.onnx' --reference-model float.onnx";
    let garbage = report(3.0);
    let evidence = Evidence {
        outputs: OutputsEvidence::Compared(&garbage),
        numerics_command: Some(line),
        ..Evidence::new(&measured, Ok(&placed))
    };
    let named = judge(&evidence, &Rules::default());
    let hinted: Vec<_> = named.checks.iter().filter(|c| c.message.contains(line)).collect();
    assert_eq!(hinted.len(), 1, "{:?}", named.checks);
    assert!(hinted[0].message.ends_with(&format!("; the first diverging layer: {line}")), "{}", hinted[0].message);
    // --rule sets the limit: overridden, the same outputs pass, and disable switches it off.
    let relaxed = judged(rules(&["min_cosine=0.1", "min_sqnr_db=-20"]), Some(&report(3.0)));
    assert_eq!(relaxed.outcome, Outcome::Pass, "{:?}", relaxed.checks);
    let off = judged(rules(&["disable=[\"min_cosine\",\"min_sqnr_db\"]"]), Some(&report(3.0)));
    assert!(off.checks.iter().all(|c| !matches!(c.rule, RuleName::MinCosine | RuleName::MinSqnrDb)));
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
    let markdown = report::render(&verdict, Format::Markdown, false).unwrap();
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

/// A generation's report: the run's tokens against the reference's.
fn tokens_report(reference: &[i64], tokens: &[i64]) -> OutputsReport {
    OutputsReport { outputs: Vec::new(), tokens: Some(TokenComparison::compare(reference, tokens)), ..report(0.0) }
}

fn token_check(verdict: &Verdict, rule: RuleName) -> Option<&npugate_gate::verdict::Check> {
    verdict.checks.iter().find(|c| c.rule == rule)
}

#[test]
fn the_first_token_must_agree_by_default_and_only_generations_are_judged_on_tokens() {
    let agree = judged(Rules::default(), Some(&tokens_report(&[7, 8, 9], &[7, 8, 1])));
    let check = token_check(&agree, RuleName::MinFirstDivergence).unwrap();
    assert_eq!((check.status, check.measured), (CheckStatus::Pass, Some(2.0)), "{}", check.message);
    assert!(check.message.contains("first divergence at position 2 >= 1"), "{}", check.message);
    // A generation is judged by its tokens: the default float rules leave its step logits alone.
    assert!(agree.checks.iter().all(|c| !matches!(c.rule, RuleName::MinCosine | RuleName::MinSqnrDb)));
    let differ = judged(Rules::default(), Some(&tokens_report(&[7, 8, 9], &[3, 8, 9])));
    let check = token_check(&differ, RuleName::MinFirstDivergence).unwrap();
    assert_eq!((check.status, differ.outcome), (CheckStatus::Fail, Outcome::Fail), "{}", check.message);
    assert!(check.message.contains("first token differs"), "{}", check.message);
    // A single model's comparison, or none: the default is not checked; a limit the user set is unjudged.
    assert!(token_check(&judged(Rules::default(), Some(&report(0.1))), RuleName::MinFirstDivergence).is_none());
    assert!(token_check(&judged(Rules::default(), None), RuleName::MinFirstDivergence).is_none());
    let asked = judged(rules(&["min_first_divergence=4", "min_token_agreement_pct=90"]), None);
    for rule in [RuleName::MinFirstDivergence, RuleName::MinTokenAgreementPct] {
        let check = token_check(&asked, rule).unwrap();
        assert_eq!(check.status, CheckStatus::Unjudged, "{}", check.message);
        assert!(check.message.contains("--check-outputs"), "{}", check.message);
    }
}

#[test]
fn token_agreement_and_the_divergence_position_are_judged_on_their_limits() {
    // 6 of 8 positions agree (75%), the first divergence at position 3.
    let report = tokens_report(&[1, 2, 3, 4, 5, 6, 7, 8], &[1, 2, 3, 0, 5, 6, 0, 8]);
    let verdict = judged(rules(&["min_token_agreement_pct=75", "min_first_divergence=3"]), Some(&report));
    assert_eq!(verdict.outcome, Outcome::Pass, "{:?}", verdict.checks);
    assert_eq!(token_check(&verdict, RuleName::MinTokenAgreementPct).unwrap().measured, Some(75.0));
    let verdict = judged(rules(&["min_token_agreement_pct=80", "min_first_divergence=4"]), Some(&report));
    for rule in [RuleName::MinFirstDivergence, RuleName::MinTokenAgreementPct] {
        assert_eq!(token_check(&verdict, rule).unwrap().status, CheckStatus::Fail);
    }
    let same = judged(rules(&["min_first_divergence=100"]), Some(&tokens_report(&[1, 2], &[1, 2])));
    let check = token_check(&same, RuleName::MinFirstDivergence).unwrap();
    assert_eq!(check.status, CheckStatus::Pass, "no divergence passes any position: {}", check.message);
}

/// A report of one single-element output: a wake-word score `output` against the reference's `reference`.
fn score_report(reference: f64, output: f64) -> OutputsReport {
    OutputsReport {
        outputs: vec![compare_tensors("score", (&[1, 1], &[reference]), (&[1, 1], &[output])).unwrap()],
        ..report(0.0)
    }
}

#[test]
fn a_score_within_rounding_of_zero_is_not_failed_by_the_relative_rules_but_a_wrong_one_is() {
    // The HTP computes a 3.1e-5 score as 0: cosine 0 and SQNR 0 dB measure the rounding.
    let rounded = judged(Rules::default(), Some(&score_report(3.1e-5, 0.0)));
    assert_eq!(rounded.outcome, Outcome::Pass, "{:?}", rounded.checks);
    for rule in [RuleName::MinCosine, RuleName::MinSqnrDb] {
        let check = rounded.checks.iter().find(|c| c.rule == rule).unwrap();
        assert_eq!(check.status, CheckStatus::Pass);
        assert!(check.message.contains("within 1e-4") && check.message.contains("rounding"), "{}", check.message);
    }
    // The same near-zero reference with a wrong score (0.5): failed, by both rules.
    let wrong = judged(Rules::default(), Some(&score_report(3.1e-5, 0.5)));
    assert_eq!(wrong.outcome, Outcome::Fail, "{:?}", wrong.checks);
    // max_abs_err still judges the rounded score when the user sets it.
    let strict = judged(rules(&["max_abs_err=1e-5"]), Some(&score_report(3.1e-5, 0.0)));
    let check = strict.checks.iter().find(|c| c.rule == RuleName::MaxAbsErr).unwrap();
    assert_eq!(check.status, CheckStatus::Fail, "{}", check.message);
}
