//! Baselines: saving and reading, the placement diff (a node that moved from QNN to the CPU), the
//! median ratio judged on its interval, and the fingerprint guard.

mod common;

use common::{detector_nodes, move_to_cpu, normal_series, placement, run, NORM, QNN};
use npugate_gate::rules::RuleName;
use npugate_gate::verdict::{CheckStatus, Outcome};
use npugate_gate::{judge, Baseline, Comparison, Evidence, Rules, Verdict};
use npugate_profile::report::PlacementReport;
use npugate_result::RunResult;

/// Judges a run and its placement against a baseline (`force`: across different fingerprints).
fn against(run: &RunResult, report: &PlacementReport, baseline: &Baseline, force: bool, rules: &Rules) -> Verdict {
    judge(&Evidence { baseline: Some(Comparison { baseline, force }), ..Evidence::new(run, Ok(report)) }, rules)
}

fn saved_baseline() -> Baseline {
    let run = run(normal_series(200, 8.0, 3.0, 21));
    Baseline::from_run(&run, Some(&placement(QNN, &detector_nodes())), "results/main").unwrap()
}

#[test]
fn baseline_round_trips_through_a_file() {
    let baseline = saved_baseline();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baseline.json");
    baseline.write(&path).unwrap();
    assert_eq!(Baseline::read(&path).unwrap(), baseline);

    std::fs::write(&path, r#"{"schema":"npugate.baseline/0"}"#).unwrap();
    let err = Baseline::read(&path).unwrap_err().to_string();
    assert!(err.contains("baseline.json") && err.contains("npugate.baseline/0"), "{err}");
}

#[test]
fn flags_a_node_that_moved_from_qnn_to_cpu() {
    let baseline = saved_baseline();
    let mut nodes = detector_nodes();
    move_to_cpu(&mut nodes, NORM, 1800.0);
    // Allow the FLOP share to drop so that only the placement diff can fail.
    let rules = Rules::load(None, &["npu_flops_pct=80".into()]).unwrap();
    let verdict = against(&run(normal_series(200, 8.0, 3.0, 22)), &placement(QNN, &nodes), &baseline, false, &rules);
    let check = verdict.checks.iter().find(|c| c.rule == RuleName::BaselinePlacement).unwrap();
    assert_eq!(check.status, CheckStatus::Fail);
    assert!(
        check.message.contains("LayerNormalization node /model.10/m.0/norm (12.3% of FLOPs, 1.80 ms/run) moved from QNNExecutionProvider to CPUExecutionProvider"),
        "{}",
        check.message
    );
    assert_eq!(verdict.baseline.as_ref().unwrap().moved_off_preferred.len(), 1);
    let median = verdict.checks.iter().find(|c| c.rule == RuleName::BaselineMedianPct).unwrap();
    assert_eq!(median.status, CheckStatus::Pass, "{}", median.message);
    assert_eq!(verdict.outcome, Outcome::Fail);
}

#[test]
fn median_regression_is_judged_on_the_interval() {
    let baseline = saved_baseline();
    let report = placement(QNN, &detector_nodes());
    let compare = |series: Vec<u64>| {
        let verdict = against(&run(series), &report, &baseline, false, &Rules::default());
        verdict.checks.into_iter().find(|c| c.rule == RuleName::BaselineMedianPct).unwrap()
    };
    let slower = compare(normal_series(200, 10.0, 3.0, 23));
    assert_eq!(slower.status, CheckStatus::Fail, "{}", slower.message);
    assert!(slower.message.contains("1.25"), "{}", slower.message);
    // 11% slower with few noisy runs: the interval straddles 1.10, so noise cannot fail the gate.
    let noisy = compare(normal_series(20, 8.88, 6.0, 24));
    assert_eq!(noisy.status, CheckStatus::Pass, "{}", noisy.message);
    assert!(noisy.message.contains("within noise"), "{}", noisy.message);
}

#[test]
fn refuses_a_mismatched_fingerprint_unless_forced() {
    let baseline = saved_baseline();
    let mut other = run(normal_series(200, 8.0, 3.0, 25));
    other.model.sha256 = "ffff".into();
    other.model.digest = "ffff".into();
    other.fingerprint.android_properties.insert("ro.soc.model".into(), "SM8550".into());
    let report = placement(QNN, &detector_nodes());

    let refused = against(&other, &report, &baseline, false, &Rules::default());
    assert_eq!(refused.outcome, Outcome::Error);
    assert_eq!(refused.exit_code(), 2);
    let error = refused.errors.join("\n");
    assert!(error.contains("SoC is \"SM8550\", baseline has \"SM8650\""), "{error}");
    assert!(error.contains("model digest") && error.contains("--force"), "{error}");

    let forced = against(&other, &report, &baseline, true, &Rules::default());
    assert_eq!(forced.outcome, Outcome::Pass, "{:#?} {:?}", forced.checks, forced.errors);
    assert!(forced.baseline.as_ref().unwrap().forced);
}
