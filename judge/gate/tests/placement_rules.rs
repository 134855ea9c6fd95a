//! Placement rules: a CPU fallback fails `npu_*` rules and is named; expected I/O quantization and
//! allow-listed nodes or op types never fail a rule; a CPU-EP run passes at 100%.

mod common;

use common::{detector_nodes, move_to_cpu, normal_series, placement, run, CPU, NORM, QNN};
use npugate_gate::rules::RuleName;
use npugate_gate::verdict::{Check, CheckStatus, Outcome};
use npugate_gate::{judge, Evidence, Rules, Verdict};

fn find(verdict: &Verdict, rule: RuleName) -> &Check {
    verdict.checks.iter().find(|c| c.rule == rule).unwrap_or_else(|| panic!("no {rule} check"))
}

fn fallback_run() -> (npugate_result::RunResult, npugate_profile::report::PlacementReport) {
    let mut nodes = detector_nodes();
    move_to_cpu(&mut nodes, NORM, 1800.0);
    (run(normal_series(100, 8.0, 3.0, 1)), placement(QNN, &nodes))
}

#[test]
fn cpu_fallback_fails_npu_flops_and_names_the_node() {
    let (run, report) = fallback_run();
    let verdict = judge(&Evidence::new(&run, Ok(&report)), &Rules::default());
    let check = find(&verdict, RuleName::NpuFlopsPct);
    assert_eq!(check.status, CheckStatus::Fail);
    assert!(
        check.message.contains(
            "LayerNormalization node /model.10/m.0/norm (12.3% of FLOPs, 1.80 ms/run) runs on CPUExecutionProvider"
        ),
        "{}",
        check.message
    );
    assert!(check.message.starts_with("npu_flops_pct 87.7% < 98%"), "{}", check.message);
    assert_eq!(check.nodes.len(), 1, "expected I/O quantize nodes are not blamed");
    assert_eq!(
        check.nodes[0].reason.as_deref(),
        Some("Validation FAILED for node /model.10/m.0/norm: unsupported axis")
    );
    assert_eq!(verdict.outcome, Outcome::Fail);
}

#[test]
fn allow_listed_node_or_op_type_does_not_fail() {
    let (run, report) = fallback_run();
    for allow in ["allow_nodes=[\"/model.10/m.0/norm\"]", "allow_op_types=[\"LayerNormalization\"]"] {
        let rules =
            Rules::load(None, &[allow.into(), "max_fallback_nodes=0".into(), "npu_time_pct=100".into()]).unwrap();
        let verdict = judge(&Evidence::new(&run, Ok(&report)), &rules);
        for rule in [RuleName::NpuFlopsPct, RuleName::MaxFallbackNodes, RuleName::NpuTimePct] {
            let check = find(&verdict, rule);
            assert_eq!(check.status, CheckStatus::Pass, "{allow}: {}", check.message);
        }
        assert_eq!(verdict.outcome, Outcome::Pass, "{allow}");
    }
}

#[test]
fn expected_io_quantize_nodes_never_fail() {
    let report = placement(QNN, &detector_nodes());
    assert_eq!(report.fallback.len(), 2);
    assert!(report.preferred_flops_pct < 100.0 && report.preferred_nodes_pct < 100.0);
    let rules = Rules::load(
        None,
        &[
            "npu_flops_pct=100".into(),
            "npu_nodes_pct=100".into(),
            "npu_time_pct=100".into(),
            "max_fallback_nodes=0".into(),
        ],
    )
    .unwrap();
    let verdict = judge(&Evidence::new(&run(normal_series(100, 8.0, 3.0, 1)), Ok(&report)), &rules);
    for check in &verdict.checks {
        assert_eq!(check.status, CheckStatus::Pass, "{}", check.message);
    }
}

#[test]
fn with_no_flops_known_expected_nodes_count_by_nodes_as_the_share_does() {
    // A compiled model without its source: its EPContext node on QNN, the graph-I/O Q/DQ on the
    // CPU by design, no FLOPs known anywhere — the share is 1 node of 3.
    let mut nodes = vec![detector_nodes()[0].clone(), detector_nodes()[0].clone(), detector_nodes()[0].clone()];
    for (n, (name, op_type, ep)) in nodes.iter_mut().zip([
        ("x_QuantizeLinear", "QuantizeLinear", CPU),
        ("ctx", "EPContext", QNN),
        ("y_DequantizeLinear", "DequantizeLinear", CPU),
    ]) {
        (n.name, n.op_type, n.ep, n.flops, n.expected) = (name.into(), op_type.into(), ep.into(), 0, ep == CPU);
    }
    let report = placement(QNN, &nodes);
    assert!((report.preferred_flops_pct - 100.0 / 3.0).abs() < 1e-9, "{}", report.preferred_flops_pct);
    let verdict = judge(&Evidence::new(&run(normal_series(100, 8.0, 3.0, 1)), Ok(&report)), &Rules::default());
    let check = find(&verdict, RuleName::NpuFlopsPct);
    assert_eq!(check.status, CheckStatus::Pass, "{}", check.message);
    assert!(
        check.message.starts_with("npu_flops_pct 100.0% >= 98% (no FLOPs known: counted by nodes)"),
        "{}",
        check.message
    );

    // A real CPU node among them still fails it, counted by nodes too.
    nodes[2].expected = false;
    let check = find(
        &judge(&Evidence::new(&run(normal_series(100, 8.0, 3.0, 1)), Ok(&placement(QNN, &nodes))), &Rules::default()),
        RuleName::NpuFlopsPct,
    )
    .clone();
    assert_eq!(check.status, CheckStatus::Fail, "{}", check.message);
    assert!(check.message.contains("66.7%") && check.message.contains("y_DequantizeLinear"), "{}", check.message);
}

/// The detector's nodes, every one on the CPU EP.
fn cpu_nodes() -> Vec<common::Node> {
    let mut nodes = detector_nodes();
    for n in &mut nodes {
        n.ep = CPU.into();
        n.expected = false;
    }
    nodes
}

#[test]
fn cpu_ep_run_passes_at_100pct() {
    let report = placement(CPU, &cpu_nodes());
    let verdict = judge(&Evidence::new(&run(normal_series(100, 8.0, 3.0, 1)), Ok(&report)), &Rules::default());
    let check = find(&verdict, RuleName::NpuFlopsPct);
    assert_eq!(check.status, CheckStatus::Pass);
    assert_eq!(check.measured, Some(100.0));
}

#[test]
fn on_the_cpu_ep_the_cv_rule_is_a_stability_check_that_never_blames_a_fallback() {
    let report = placement(CPU, &cpu_nodes());
    let mut cpu_run = run((0..40u64).map(|i| if i % 4 == 0 { 16_000_000 } else { 8_000_000 }).collect());
    cpu_run.execution.preferred_ep = CPU.into();
    let verdict = judge(&Evidence::new(&cpu_run, Ok(&report)), &Rules::default());
    let cv = find(&verdict, RuleName::CvPct);
    assert_eq!(cv.status, CheckStatus::Fail);
    assert!(
        cv.message.starts_with("cv_pct (a stability check: nothing can fall back on the CPU EP)"),
        "{}",
        cv.message
    );
    assert!(
        cv.message.contains("cause not measured: no CPU wait was recorded, on the CPU EP nothing can fall back"),
        "{}",
        cv.message
    );
    assert!(verdict.warnings.iter().all(|w| !w.contains("partial fallback")), "{:?}", verdict.warnings);
}

#[test]
fn partitions_and_boundaries_are_counted() {
    let (run, report) = fallback_run();
    let rules = Rules::load(None, &["max_partitions=1".into(), "max_boundaries=2".into()]).unwrap();
    let verdict = judge(&Evidence::new(&run, Ok(&report)), &rules);
    let partitions = find(&verdict, RuleName::MaxPartitions);
    assert_eq!((partitions.status, partitions.measured), (CheckStatus::Fail, Some(2.0)), "{}", partitions.message);
    let boundaries = find(&verdict, RuleName::MaxBoundaries);
    assert_eq!((boundaries.status, boundaries.measured), (CheckStatus::Fail, Some(4.0)), "{}", boundaries.message);
}

#[test]
fn missing_placement_report_is_unjudged_not_passed() {
    let run = run(normal_series(100, 8.0, 3.0, 1));
    let verdict = judge(&Evidence::new(&run, Err("profile.json is truncated".into())), &Rules::default());
    let check = find(&verdict, RuleName::NpuFlopsPct);
    assert_eq!(check.status, CheckStatus::Unjudged);
    assert!(check.message.contains("no placement report"), "{}", check.message);
    assert_eq!(verdict.exit_code(), 2);
}

#[test]
fn missing_placement_is_an_error_but_a_failed_rule_still_fails() {
    let run = run(normal_series(100, 8.0, 3.0, 1));
    let missing = || Evidence::new(&run, Err("profile.json is truncated".into()));
    let error = judge(&missing(), &Rules::default());
    assert_eq!(error.outcome, Outcome::Error);
    assert_eq!(error.errors, ["placement could not be computed: profile.json is truncated"]);
    assert!(error.placement.is_none());

    let failed = judge(&missing(), &Rules::load(None, &["median_ms=1".into()]).unwrap());
    assert_eq!(failed.outcome, Outcome::Fail, "a rule that failed keeps the verdict at fail: {:#?}", failed.checks);
    assert_eq!(failed.exit_code(), 1);
    assert_eq!(failed.errors.len(), 1);
}

#[test]
fn an_ep_that_rejected_every_node_is_a_verdict_naming_the_causes() {
    let mut nodes = detector_nodes();
    for node in nodes.iter_mut().filter(|n| !n.expected) {
        node.ep = CPU.into();
    }
    let mut report = placement(QNN, &nodes);
    for fallback in report.fallback.iter_mut().filter(|f| !f.expected) {
        fallback.reason = Some("Cannot get shape".into());
    }
    report.rejections = npugate_profile::causes::aggregate(
        &report.fallback,
        QNN,
        Some(&npugate_profile::causes::shape_fix_hint("--shape images=1x3x640x640")),
    );
    let run = run(normal_series(100, 8.0, 3.0, 1));
    let rules = Rules::load(None, &["max_fallback_nodes=0".into()]).unwrap();
    let verdict = judge(&Evidence::new(&run, Ok(&report)), &rules);
    assert_eq!(verdict.outcome, Outcome::Fail, "a verdict (exit 1), not an error");
    let share = find(&verdict, RuleName::NpuFlopsPct);
    assert!(share.message.contains("QNNExecutionProvider started but claimed no node"), "{}", share.message);
    assert!(share.message.contains("by cause: 28 nodes: Cannot get shape (e.g. "), "{}", share.message);
    assert!(
        share.message.contains(", …) → the model has dynamic input dims; pass --shape images=1x3x640x640"),
        "{}",
        share.message
    );
    let count = find(&verdict, RuleName::MaxFallbackNodes);
    assert!(count.message.starts_with("max_fallback_nodes: 28 nodes > 0"), "{}", count.message);
    assert!(count.message.contains("by cause: 28 nodes: Cannot get shape"), "{}", count.message);
}

#[test]
fn an_emulated_run_leaves_speed_rules_not_applicable_and_still_judges_placement() {
    let (mut run, report) = fallback_run();
    run.execution.emulated = Some("Qualcomm's HTP emulator".into());
    let rules = Rules { cv_pct: Some(0.001), median_ms: Some(0.000_001), ..Rules::default() };
    let verdict = judge(&Evidence::new(&run, Ok(&report)), &rules);
    for rule in [RuleName::CvPct, RuleName::MedianMs] {
        let check = find(&verdict, rule);
        assert_eq!(check.status, CheckStatus::NotApplicable, "{check:?}");
        assert!(
            check.message.contains("not judged: the run was emulated (Qualcomm's HTP emulator)"),
            "{}",
            check.message
        );
    }
    assert_eq!(find(&verdict, RuleName::NpuFlopsPct).status, CheckStatus::Fail, "placement is still judged");
    assert_eq!(verdict.outcome, Outcome::Fail);
    let (mut clean, report) = (run.clone(), placement(QNN, &detector_nodes()));
    clean.execution.emulated = Some("emulator".into());
    let verdict = judge(&Evidence::new(&clean, Ok(&report)), &rules);
    assert_eq!(
        verdict.outcome,
        Outcome::Pass,
        "not-applicable checks never make the outcome an error: {:?}",
        verdict.checks
    );
}

#[test]
fn an_emulated_runs_latency_shape_is_not_given_a_cause() {
    // Two clusters and a drift: on a device they would be warned about with their cause.
    let latencies: Vec<u64> = (0..40u64).map(|i| if i % 3 == 0 { 9_000_000 } else { 5_000_000 } + i * 40_000).collect();
    let (mut run, report) = (common::run(latencies), placement(QNN, &detector_nodes()));
    let device = judge(&Evidence::new(&run, Ok(&report)), &Rules::default());
    assert!(device.warnings.iter().any(|w| w.starts_with("latency is bimodal")), "{:?}", device.warnings);
    run.execution.emulated = Some("Qualcomm's HTP emulator".into());
    let emulated = judge(&Evidence::new(&run, Ok(&report)), &Rules::default());
    let claims = ["bimodal", "drifted", "fallback", "thermal"];
    assert!(emulated.warnings.iter().all(|w| claims.iter().all(|c| !w.contains(c))), "{:?}", emulated.warnings);
}

#[test]
fn a_requested_htp_performance_mode_the_backend_did_not_apply_is_a_warning() {
    use npugate_result::HtpPowerReport;
    let (mut run, report) = (common::run(vec![1_000_000; 30]), placement(QNN, &detector_nodes()));
    run.execution.ep_options.insert("htp_performance_mode".into(), "burst".into());
    let warnings =
        |run: &npugate_result::RunResult| judge(&Evidence::new(run, Ok(&report)), &Rules::default()).warnings;
    let backend = run.backend.as_mut().unwrap();
    backend.htp_power = Some(HtpPowerReport {
        performance_mode: Some("burst".into()),
        status: Some("0x0".into()),
        applied: false,
        not_applied: Some("QNN HTP backend: No perf settings support on this platform".into()),
        ..HtpPowerReport::default()
    });
    let said = warnings(&run);
    assert!(
        said.iter().any(|w| w.starts_with(
            "htp_performance_mode=burst was requested, but not applied: QNN HTP backend: No perf settings support"
        )),
        "{said:?}"
    );
    let applied =
        HtpPowerReport { applied: true, not_applied: None, ..run.backend.as_ref().unwrap().htp_power.clone().unwrap() };
    run.backend.as_mut().unwrap().htp_power = Some(applied);
    assert!(!warnings(&run).iter().any(|w| w.contains("htp_performance_mode")), "applied: no warning");
    run.backend.as_mut().unwrap().htp_power = None;
    assert!(warnings(&run).iter().any(|w| w.contains("holds no account of the HTP backend's power configuration")));
    run.execution.ep_options.insert("backend_path".into(), "libQnnSaver.so".into());
    assert!(
        !warnings(&run).iter().any(|w| w.contains("htp_performance_mode")),
        "not the HTP backend: nothing to apply"
    );
}

/// An AI Hub run's record with `placed` of the model's `nodes` named by a layer.
fn aihub_layers(placed: usize, nodes: usize) -> npugate_result::aihub::AiHubRecord {
    use npugate_result::aihub::*;
    AiHubRecord {
        api_url: "http://127.0.0.1:1".into(),
        qualcomm: false,
        service: "a stand-in".into(),
        device: AiHubDevice::default(),
        job: AiHubJob::default(),
        model: AiHubModel::default(),
        figures: AiHubFigures::default(),
        layers: LayerMatch {
            layers: placed + 1,
            matched: placed,
            unmatched: vec!["graph_output_cast".into()],
            nodes,
            nodes_placed: placed,
            nodes_without_layer: Vec::new(),
            nodes_placed_pct: 100.0 * placed as f64 / nodes as f64,
            min_nodes_placed_pct: MIN_LAYER_MATCH_PCT,
        },
        segments: Vec::new(),
        tool_versions: Default::default(),
        local: String::new(),
        cannot_tell: Vec::new(),
    }
}

#[test]
fn an_aihub_run_whose_layers_place_too_few_model_nodes_leaves_npu_flops_pct_unjudged() {
    let (mut run, report) = fallback_run();
    run.aihub = Some(aihub_layers(30, 30));
    let judged = judge(&Evidence::new(&run, Ok(&report)), &Rules::default());
    assert_eq!(find(&judged, RuleName::NpuFlopsPct).status, CheckStatus::Fail, "every node placed: judged");
    run.aihub = Some(aihub_layers(20, 30));
    let verdict = judge(&Evidence::new(&run, Ok(&report)), &Rules::default());
    let check = find(&verdict, RuleName::NpuFlopsPct);
    assert_eq!(check.status, CheckStatus::Unjudged);
    assert!(
        check.message.contains("placing 20 of the model's 30 nodes (67%; npu_flops_pct needs 90%)")
            && check.message.contains("layers matching no node: graph_output_cast"),
        "{}",
        check.message
    );
    assert!(check.nodes.is_empty());
    assert_eq!(verdict.outcome, Outcome::Error);
}
