//! The real QNN plugin-EP profile (ORT 1.31.1, QNN Saver backend with HTP rules, aarch64 under qemu):
//! partitions, the `Det` fallback with the EP's reason, boundaries, shares.
//!
//! The fixture has no result.json: the assignment is written here from the verbose log's
//! `Validation PASSED/FAILED` lines (first GetCapability pass, original node names and order) and the
//! fused nodes' I/O in the profile: conv1…gram form the first partition, `det` stays on CPU,
//! `mul_after_det` forms the second. Shapes come from a real reference pass of `mixed.onnx`
//! (scripts/make-test-models), which is the fixture's graph (same names, order and partition I/O).

mod common;

use npugate_profile::placement::{build_report, GraphIo, PlacementInputs};
use npugate_profile::report::PlacementReport;
use npugate_profile::result_dir::read_rejections;
use npugate_result::{AssignedNode, AssignedSubgraph, Assignment};

const QNN: &str = "QNNExecutionProvider";

fn subgraph(ep: &str, nodes: &[(&str, &str)]) -> AssignedSubgraph {
    AssignedSubgraph {
        ep: ep.to_string(),
        nodes: nodes
            .iter()
            .map(|(name, op)| AssignedNode { name: name.to_string(), op_type: op.to_string(), domain: String::new() })
            .collect(),
    }
}

fn fixture_assignment() -> Assignment {
    Assignment {
        source: "written from a64_qemu_mixed_qnn_saver_verbose.log".into(),
        error: None,
        subgraphs: vec![
            subgraph(
                QNN,
                &[
                    ("conv1", "Conv"),
                    ("relu1", "Relu"),
                    ("pool1", "MaxPool"),
                    ("conv2", "Conv"),
                    ("relu2", "Relu"),
                    ("pool2", "MaxPool"),
                    ("conv3", "Conv"),
                    ("relu3", "Relu"),
                    ("gap", "GlobalAveragePool"),
                    ("flatten", "Flatten"),
                    ("fc", "Gemm"),
                    ("softmax", "Softmax"),
                    ("to_square", "Reshape"),
                    ("tr", "Transpose"),
                    ("gram", "MatMul"),
                ],
            ),
            subgraph("CPUExecutionProvider", &[("det", "Det")]),
            subgraph(QNN, &[("mul_after_det", "Mul")]),
        ],
    }
}

fn report() -> PlacementReport {
    let profile = common::profile("ort-1.31.1/a64_qemu_mixed_qnn_saver.json");
    let reference = common::profile("ort-1.31.1-python/mixed.reference_profile.json");
    let rejections = read_rejections(&common::fixture("ort-1.31.1/a64_qemu_mixed_qnn_saver_verbose.log")).unwrap();
    let assignment = fixture_assignment();
    build_report(&PlacementInputs {
        model_sha256: "fixture",
        preferred_ep: QNN,
        assignment: &assignment,
        profile: Some(&profile),
        reference: Some(&reference),
        rejections: Some(&rejections),
        qnn: None,
        trace: None,
        emulated: None,
        graph_io: GraphIo { inputs: vec![vec![Some(1), Some(3), Some(64), Some(64)]], outputs: vec![] },
        graph: None,
        io_offload: true,
        predicted: None,
        fusions: None,
    })
}

#[test]
fn two_fused_events_are_two_partitions_matched_by_fused_id() {
    let r = report();
    assert_eq!(r.runs_profiled, 1);
    assert_eq!(r.partitions.len(), 2, "the profile has 2 fused QNN events in its run");
    assert_eq!(r.partitions[0].fused_name, "QNNExecutionProvider_QNNExecutionProvider_7793224880709265489_2_0");
    assert_eq!(r.partitions[0].nodes.len(), 15);
    assert_eq!(r.partitions[1].nodes, ["mul_after_det"]);
    assert_eq!(r.partitions[0].time.as_ref().unwrap().median_us, 27318.0);
    // Conv FLOPs of the first partition: 2 × (64²·16·27 + 32²·32·144 + 16²·64·288).
    let conv = 2 * (64 * 64 * 16 * 27 + 32 * 32 * 32 * 144 + 16 * 16 * 64 * 288);
    assert!(r.partitions[0].flops > conv, "{} vs conv-only {conv}", r.partitions[0].flops);
    assert!(r.warnings.iter().all(|w| !w.contains("fused partition")), "{:?}", r.warnings);
}

#[test]
fn det_falls_back_with_the_logged_reason_and_a_hint() {
    let r = report();
    assert_eq!(r.fallback.len(), 1);
    let det = &r.fallback[0];
    assert_eq!((det.name.as_str(), det.op_type.as_str(), det.ep.as_str()), ("det", "Det", "CPUExecutionProvider"));
    assert_eq!(
        det.reason.as_deref(),
        Some("Operators of type `Det` are not supported by QNN EP.Det node `det` will not be assigned to QNN EP.")
    );
    assert!(det.hint.as_deref().unwrap().contains("not supported by QNN"));
    assert_eq!(det.input_shapes, ["[1,2,2]"]);
    assert_eq!(det.flops, Some(6));
    assert_eq!(det.time_us_per_run, Some(3342.0));
    assert!(!det.expected);
}

#[test]
fn boundaries_and_shares_add_up() {
    let r = report();
    assert_eq!(r.boundaries.per_run, [2], "QNN → CPU (det) → QNN");
    let t = &r.boundaries.transitions;
    assert_eq!(
        (t[0].from_ep.as_str(), t[0].to_ep.as_str(), t[0].before.as_str()),
        (QNN, "CPUExecutionProvider", "det")
    );
    assert_eq!((t[1].after.as_str(), t[1].to_ep.as_str()), ("det", QNN));
    // The hand-over costs, from the kernels' own timestamps: partition 1 ends at 1,384,704 µs, det
    // starts at 1,385,669; det ends at 1,389,011, partition 2 starts at 1,390,350.
    assert_eq!((t[0].gap_us, t[1].gap_us), (Some(965.0), Some(1339.0)));
    assert_eq!(r.boundaries.gap_us_per_run, Some(965.0 + 1339.0));
    assert_eq!(r.boundaries.same_ep_gap_us, None, "no two consecutive kernels of one EP");
    let flops: f64 = r.per_ep.iter().map(|e| e.flops_pct).sum();
    let time: f64 = r.per_ep.iter().filter_map(|e| e.time_pct).sum();
    let nodes: f64 = r.per_ep.iter().map(|e| e.nodes_pct).sum();
    for total in [flops, time, nodes] {
        assert!((total - 100.0).abs() < 1e-9, "{total}");
    }
    assert_eq!(r.totals.flops_unknown_nodes, 0, "{:?}", r.warnings);
    assert!(r.preferred_flops_pct > 99.99 && r.preferred_flops_pct < 100.0, "{}", r.preferred_flops_pct);
    assert!((r.preferred_nodes_pct - 16.0 / 17.0 * 100.0).abs() < 1e-9);
    let qnn_time = 27318.0 + 2252.0;
    assert!((r.preferred_time_pct.unwrap() - 100.0 * qnn_time / (qnn_time + 3342.0)).abs() < 1e-9);
    // The profile witnesses the assignment for every node: partitions and the same-named det kernel.
    assert!(r.nodes.iter().all(|n| n.profile_ep.as_deref() == Some(n.ep.as_str())), "{:?}", r.nodes);
}

#[test]
fn qnn_csv_ops_attach_to_the_partition_holding_their_node() {
    let csv =
        npugate_profile::result_dir::read_qnn_csv(&common::fixture("synthetic/qnn_profile_detailed.csv")).unwrap();
    assert_eq!(csv.executes, 4, "2 runs × 2 partitions");
    let profile = common::profile("ort-1.31.1/a64_qemu_mixed_qnn_saver.json");
    let assignment = fixture_assignment();
    let r = build_report(&PlacementInputs {
        model_sha256: "fixture",
        preferred_ep: QNN,
        assignment: &assignment,
        profile: Some(&profile),
        reference: None,
        rejections: None,
        qnn: Some(&csv),
        trace: None,
        emulated: None,
        graph_io: GraphIo::default(),
        graph: None,
        io_offload: true,
        predicted: None,
        fusions: None,
    });
    assert_eq!(r.partitions[0].backend_ops.len(), 15);
    let conv1 = &r.partitions[0].backend_ops[0];
    assert_eq!(
        (conv1.name.as_str(), conv1.value, conv1.unit.as_str()),
        ("conv1", Some((41210.0 + 40988.0) / 2.0), "CYCLES")
    );
    assert_eq!(r.partitions[1].backend_ops.len(), 1);
    assert!(r.warnings.iter().any(|w| w.contains("no reference profile")), "{:?}", r.warnings);
}

/// A real harness result directory of a QNN Saver run (aarch64 under qemu): the assignment is the
/// real `Session_GetEpGraphAssignmentInfo` answer, taken after the layout transformation.
#[test]
fn real_qnn_result_directory_agrees_node_for_node() {
    let r = npugate_profile::analyze_result_dir(&common::fixture("harness-qnn-saver-mixed")).unwrap();
    assert_eq!(r.preferred_ep, QNN);
    assert_eq!(r.runs_profiled, 2);
    assert!(r.predicted.as_deref().unwrap().contains("Saver"), "{:?}", r.predicted);
    assert_eq!(r.partitions.len(), 2);
    assert_eq!(r.partitions[0].nodes.len(), 17, "layout-transformed QNN subgraph incl. 2 inserted Transposes");
    assert_eq!(r.partitions[1].nodes, ["mul_after_det"]);
    // Every node is witnessed by the profile (its partition's or its own kernel event) on the
    // EP the assignment names.
    for node in &r.nodes {
        assert_eq!(node.profile_ep.as_deref(), Some(node.ep.as_str()), "{node:?}");
    }
    assert_eq!(r.boundaries.per_run, [2, 2]);
    let det = &r.fallback[0];
    assert_eq!((r.fallback.len(), det.name.as_str()), (1, "det"));
    assert!(det.reason.as_deref().unwrap().starts_with("Operators of type `Det` are not supported by QNN EP"));
    // `_token_<n>` names join the reference pass; inserted Transposes count 0 without shapes.
    assert_eq!(r.totals.flops_unknown_nodes, 0, "{:?}", r.warnings);
    let conv1 = r.nodes.iter().find(|n| n.name == "conv1_token_1").unwrap();
    assert_eq!(conv1.flops, Some(2 * 64 * 64 * 16 * 27));
    // The 2 Transposes the layout transformation inserted are not in the reference pass: they
    // count 0 FLOPs (a known-zero op) and need no warning.
    let inserted: Vec<_> = r.nodes.iter().filter(|n| n.input_shapes.is_empty() && n.op_type == "Transpose").collect();
    assert_eq!(inserted.len(), 2, "{:?}", r.nodes);
    assert!(inserted.iter().all(|n| n.flops == Some(0)));
    assert!(!r.warnings.iter().any(|w| w.contains("reference profile")), "{:?}", r.warnings);
    let shares: f64 = r.per_ep.iter().map(|e| e.flops_pct).sum();
    assert!((shares - 100.0).abs() < 1e-9);
}
