//! `max_estimated_ms`: the ESTIMATED latency on the run's SoC, judged on its own check line — on an
//! emulated run too, where the measured-latency rules are not applicable — and unjudged, with the
//! reason, when there is no estimate.

mod common;

use common::{detector_nodes, normal_series, placement, run, QNN};
use npugate_estimate::{HeldOutError, SocEstimate};
use npugate_gate::rules::RuleName;
use npugate_gate::verdict::{Check, CheckStatus};
use npugate_gate::{judge, Evidence, Rules, Verdict};

fn estimated(ms: f64) -> SocEstimate {
    SocEstimate {
        soc: "SM8650".into(),
        estimate_ms: Some(ms),
        no_estimate: None,
        error: Some(HeldOutError { median_rel: 0.12, p90_rel: 0.3, rows: 40, models: 21 }),
        devices: vec!["Samsung Galaxy S24".into()],
    }
}

fn judged(estimate: Option<Result<&SocEstimate, String>>, rules: &[&str]) -> Verdict {
    let mut run = run(normal_series(30, 800.0, 5.0, 1));
    run.execution.emulated = Some("Qualcomm's HTP emulator".into());
    let report = placement(QNN, &detector_nodes());
    let rules: Vec<String> = rules.iter().map(|r| r.to_string()).collect();
    judge(&Evidence { estimate, ..Evidence::new(&run, Ok(&report)) }, &Rules::load(None, &rules).unwrap())
}

fn check(verdict: &Verdict, rule: RuleName) -> &Check {
    verdict.checks.iter().find(|c| c.rule == rule).unwrap_or_else(|| panic!("no {rule} check"))
}

#[test]
fn the_estimate_is_judged_on_its_own_line_while_measured_latency_rules_stay_not_applicable() {
    let fast = estimated(1.52);
    let verdict = judged(Some(Ok(&fast)), &["max_estimated_ms=2", "median_ms=5"]);
    let estimate = check(&verdict, RuleName::MaxEstimatedMs);
    assert_eq!(estimate.status, CheckStatus::Pass);
    assert!(
        estimate.message.starts_with("max_estimated_ms: ESTIMATE 1.520 ms on SM8650 <= 2 ms"),
        "{}",
        estimate.message
    );
    assert!(
        estimate.message.contains("not a measurement") && estimate.message.contains("p90 30%"),
        "{}",
        estimate.message
    );
    assert_eq!(check(&verdict, RuleName::MedianMs).status, CheckStatus::NotApplicable);

    let slow = estimated(3.0);
    let verdict = judged(Some(Ok(&slow)), &["max_estimated_ms=2"]);
    assert_eq!(check(&verdict, RuleName::MaxEstimatedMs).status, CheckStatus::Fail);
    assert_eq!(verdict.outcome, npugate_gate::verdict::Outcome::Fail);
}

#[test]
fn without_an_estimate_the_rule_is_unjudged_with_the_reason_and_off_by_default() {
    let none = SocEstimate::none("SM8350", "AI Hub published no onnx runs on a SM8350 device".into());
    let verdict = judged(Some(Ok(&none)), &["max_estimated_ms=2"]);
    let unjudged = check(&verdict, RuleName::MaxEstimatedMs);
    assert_eq!(unjudged.status, CheckStatus::Unjudged);
    assert!(unjudged.message.contains("SM8350: AI Hub published no onnx runs"), "{}", unjudged.message);
    let verdict = judged(Some(Err("the run's SoC is unknown".into())), &["max_estimated_ms=2"]);
    assert!(check(&verdict, RuleName::MaxEstimatedMs).message.contains("the run's SoC is unknown"));
    let verdict = judged(None, &[]);
    assert!(verdict.checks.iter().all(|c| c.rule != RuleName::MaxEstimatedMs));
}
