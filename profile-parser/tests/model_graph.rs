//! Placement on the model's own nodes (`result.json` `graph`): nodes ONNX Runtime fused at load
//! keep their FLOPs and take the EP of the node that stands for them, nodes folded away or in a
//! branch not taken are in no share, an unattributed node is counted apart, graph-I/O Q/DQ are on
//! the CPU by design by their tensor names (the model's and the ones ONNX Runtime inserts), and an
//! `EPContext` node gets the FLOPs of the source nodes it is given.

use npugate_profile::ort_log::parse_rejections;
use npugate_profile::placement::{build_report, GraphIo, PlacementInputs};
use npugate_profile::profile::parse_profile;
use npugate_profile::report::NotPlaced;
use npugate_result::{AssignedNode, AssignedSubgraph, Assignment, FusionGroup, Fusions, GraphNode, ModelGraph};

const QNN: &str = "QNNExecutionProvider";
const CPU: &str = "CPUExecutionProvider";

fn node(name: &str, op: &str) -> GraphNode {
    GraphNode { name: name.into(), op_type: op.into(), ..GraphNode::default() }
}

fn group(kernels: &[&str], nodes: &[&str]) -> FusionGroup {
    FusionGroup {
        kernels: kernels.iter().map(|s| s.to_string()).collect(),
        nodes: nodes.iter().map(|s| s.to_string()).collect(),
    }
}

fn subgraph(ep: &str, nodes: &[(&str, &str)]) -> AssignedSubgraph {
    AssignedSubgraph {
        ep: ep.into(),
        nodes: nodes
            .iter()
            .map(|(n, op)| AssignedNode { name: n.to_string(), op_type: op.to_string(), domain: String::new() })
            .collect(),
    }
}

/// A session on the QNN EP with `assignment`, the model's `graph` and the EP's op `trace`; no
/// profile, no log.
fn on_qnn<'a>(
    assignment: &'a Assignment,
    graph: &'a ModelGraph,
    trace: Option<&'a npugate_result::QnnTrace>,
    io_offload: bool,
) -> PlacementInputs<'a> {
    PlacementInputs {
        model_sha256: "m",
        preferred_ep: QNN,
        assignment,
        graph: Some(graph),
        profile: None,
        reference: None,
        rejections: None,
        qnn: None,
        trace,
        emulated: None,
        graph_io: GraphIo::default(),
        io_offload,
        predicted: None,
        fusions: None,
    }
}

/// The reference pass (optimizations off): every model node that ran, with its shapes.
const REFERENCE: &str = r#"[
{"cat":"Session","name":"model_run","ts":0,"dur":100,"args":{}},
{"cat":"Node","name":"q_in_kernel_time","ts":1,"dur":1,"args":{"provider":"CPUExecutionProvider","op_name":"QuantizeLinear","input_type_shape":[{"float":[1,64]}],"output_type_shape":[{"uint8":[1,64]}]}},
{"cat":"Node","name":"mm_kernel_time","ts":2,"dur":1,"args":{"provider":"CPUExecutionProvider","op_name":"MatMul","input_type_shape":[{"float":[1,64]},{"float":[64,32]}],"output_type_shape":[{"float":[1,32]}]}},
{"cat":"Node","name":"add_kernel_time","ts":3,"dur":1,"args":{"provider":"CPUExecutionProvider","op_name":"Add","input_type_shape":[{"float":[1,32]},{"float":[32]}],"output_type_shape":[{"float":[1,32]}]}},
{"cat":"Node","name":"erf_kernel_time","ts":4,"dur":1,"args":{"provider":"CPUExecutionProvider","op_name":"Erf","input_type_shape":[{"float":[1,32]}],"output_type_shape":[{"float":[1,32]}]}},
{"cat":"Node","name":"shape_kernel_time","ts":5,"dur":1,"args":{"provider":"CPUExecutionProvider","op_name":"Shape","input_type_shape":[{"float":[1,32]}],"output_type_shape":[{"int64":[2]}]}},
{"cat":"Node","name":"then_relu_kernel_time","ts":6,"dur":1,"args":{"provider":"CPUExecutionProvider","op_name":"Relu","input_type_shape":[{"float":[1,32]}],"output_type_shape":[{"float":[1,32]}]}},
{"cat":"Node","name":"lost_kernel_time","ts":7,"dur":1,"args":{"provider":"CPUExecutionProvider","op_name":"Mul","input_type_shape":[{"float":[1,32]}],"output_type_shape":[{"float":[1,32]}]}},
{"cat":"Node","name":"src_a_kernel_time","ts":8,"dur":1,"args":{"provider":"CPUExecutionProvider","op_name":"MatMul","input_type_shape":[{"float":[1,32]},{"float":[32,8]}],"output_type_shape":[{"float":[1,8]}]}},
{"cat":"Node","name":"src_b_kernel_time","ts":9,"dur":1,"args":{"provider":"CPUExecutionProvider","op_name":"Relu","input_type_shape":[{"float":[1,8]}],"output_type_shape":[{"float":[1,8]}]}},
{"cat":"Node","name":"dq_out_kernel_time","ts":10,"dur":1,"args":{"provider":"CPUExecutionProvider","op_name":"DequantizeLinear","input_type_shape":[{"uint8":[1,8]}],"output_type_shape":[{"float":[1,8]}]}}
]"#;

/// A log where QNN's validation names the fused Gemm and the Erf.
const LOG: &str = "\
[V:onnxruntime:, qnn_execution_provider.cc:1713 LogNodeSupport] Validation FAILED for 1 nodes in OrtNodeUnit (Erf) :
\tOperator type: Erf Node name: erf Node index: 4
\tREASON : Operators of type `Erf` are not supported by QNN EP.Erf node `erf` will not be assigned to QNN EP.
[V:onnxruntime:, qnn_execution_provider.cc:1713 LogNodeSupport] Validation FAILED for 1 nodes in OrtNodeUnit (DequantizeLinear) :
\tOperator type: DequantizeLinear Node name: DequantizeLinear_token_9 Node index: 12
\tREASON : QNN EP is configured to not take DQ nodes that generate a graph output.
";

#[test]
fn model_nodes_carry_their_flops_through_fusions_partitions_and_an_epcontext_node() {
    let graph = ModelGraph {
        nodes: vec![
            node("q_in", "QuantizeLinear"),
            node("mm", "MatMul"),
            node("add", "Add"),
            node("erf", "Erf"),
            node("shape", "Shape"),
            GraphNode { subgraph: true, ..node("then_relu", "Relu") },
            GraphNode { subgraph: true, ..node("else_neg", "Neg") },
            node("lost", "Mul"),
            node("src_a", "MatMul"),
            node("src_b", "Relu"),
            node("dq_out", "DequantizeLinear"),
        ],
        named: 0,
        partitioned: Some(Fusions {
            groups: vec![
                group(&["gemm_input_reshape", "mm/MatMulAddFusion", "gemm_output_reshape_token_5"], &["mm", "add"]),
                group(&[], &["shape"]),
                // The generic entry point: an EPContext node given the source nodes it covers.
                group(&["QNNExecutionProvider_QNN_ctx_0"], &["src_a", "src_b"]),
            ],
        }),
        io_quantization: vec!["q_in".into(), "dq_out".into()],
        compiled: Some(npugate_result::CompiledGraph {
            attribution: npugate_result::Attribution::CompileRecord,
            source_model: Some("m.onnx".into()),
            ..Default::default()
        }),
    };
    let assignment = Assignment {
        source: "Session_GetEpGraphAssignmentInfo".into(),
        error: None,
        subgraphs: vec![
            subgraph(
                QNN,
                &[
                    ("gemm_input_reshape", "Reshape"),
                    ("mm/MatMulAddFusion", "Gemm"),
                    ("gemm_output_reshape_token_5", "Reshape"),
                    ("then_relu", "Relu"),
                    ("else_neg", "Neg"),
                ],
            ),
            subgraph(QNN, &[("QNNExecutionProvider_QNN_ctx_0", "EPContext")]),
            subgraph(CPU, &[("q_in", "QuantizeLinear")]),
            subgraph(CPU, &[("erf", "Erf")]),
            subgraph(CPU, &[("dq_out", "DequantizeLinear")]),
            subgraph(CPU, &[("DequantizeLinear_token_9", "DequantizeLinear")]),
        ],
    };
    let reference = parse_profile(REFERENCE.as_bytes()).unwrap();
    let rejections = parse_rejections(LOG.as_bytes()).unwrap();
    let report = build_report(&PlacementInputs {
        model_sha256: "m",
        preferred_ep: QNN,
        assignment: &assignment,
        graph: Some(&graph),
        profile: None,
        reference: Some(&reference),
        rejections: Some(&rejections),
        qnn: None,
        trace: None,
        emulated: None,
        graph_io: GraphIo::default(),
        io_offload: true,
        predicted: None,
        fusions: None,
    });
    let compiled = report.compiled.as_ref().expect("the graph's attribution is in the placement");
    assert_eq!(
        (compiled.attribution, compiled.source_model.as_deref()),
        (npugate_result::Attribution::CompileRecord, Some("m.onnx"))
    );
    let on = |name: &str| report.nodes.iter().find(|n| n.name == name).unwrap();
    assert_eq!(
        (on("mm").ep.as_str(), on("mm").flops),
        (QNN, Some(2 * 64 * 32)),
        "the fused Gemm's EP, the MatMul's own FLOPs"
    );
    assert_eq!((on("add").ep.as_str(), on("add").flops), (QNN, Some(32)));
    assert_eq!((on("src_a").ep.as_str(), on("src_a").flops), (QNN, Some(2 * 32 * 8)), "the EPContext node's source");
    assert_eq!(on("shape").not_placed, Some(NotPlaced::FoldedAtLoad));
    assert_eq!(
        (on("then_relu").ep.as_str(), on("else_neg").not_placed),
        (QNN, Some(NotPlaced::NotRun)),
        "the else branch did not run"
    );
    assert_eq!(on("lost").not_placed, Some(NotPlaced::Unattributed));
    let t = &report.totals;
    assert_eq!((t.model_nodes, t.nodes, t.folded_nodes, t.not_run_nodes, t.unattributed_nodes), (Some(11), 8, 1, 1, 1));
    let placed_flops = 2 * 64 * 32 + 32 + 32 + 32 + 2 * 32 * 8 + 8;
    assert_eq!((t.flops, t.unattributed_flops, t.model_flops), (placed_flops, 32, placed_flops + 32));
    assert!((t.flops_covered_pct - 100.0 * placed_flops as f64 / (placed_flops + 32) as f64).abs() < 1e-9);
    // The share: everything but the Erf (32 FLOPs) and the graph-I/O Q/DQ (0) is on QNN.
    assert!((report.preferred_flops_pct - 100.0 * (placed_flops - 32) as f64 / placed_flops as f64).abs() < 1e-9);
    let off: Vec<(&str, bool)> = report.fallback.iter().map(|f| (f.name.as_str(), f.expected)).collect();
    assert_eq!(off, [("erf", false), ("dq_out", true), ("q_in", true)], "by tensor names, not shapes");
    assert_eq!(report.rejections.len(), 1);
    assert_eq!(
        report.rejections[0].reason,
        "Operators of type `Erf` are not supported by QNN EP.Erf node `…` will not be assigned to QNN EP."
    );
    let all = report.warnings.join("\n");
    assert!(
        all.contains("inserted 1 graph-I/O QuantizeLinear/DequantizeLinear node(s) that run on the CPU by design")
            && all.contains("DequantizeLinear_token_9"),
        "{all}"
    );
    assert!(all.contains("1 node(s) with 32 FLOPs could not be traced"), "{all}");
}

#[test]
fn graph_io_quantization_is_a_fallback_when_the_ep_was_told_to_take_it() {
    let graph = ModelGraph {
        nodes: vec![node("q_in", "QuantizeLinear"), node("mm", "MatMul")],
        io_quantization: vec!["q_in".into()],
        ..ModelGraph::default()
    };
    let assignment = Assignment {
        source: String::new(),
        error: None,
        subgraphs: vec![subgraph(CPU, &[("q_in", "QuantizeLinear")]), subgraph(QNN, &[("mm", "MatMul")])],
    };
    let inputs = |io_offload| on_qnn(&assignment, &graph, None, io_offload);
    assert!(build_report(&inputs(true)).fallback[0].expected);
    assert!(!build_report(&inputs(false)).fallback[0].expected, "offload_graph_io_quantization=0");
    // The same judgement without a placement (a session the SoC refused: preflight's fallback list).
    assert!(inputs(true).on_cpu_by_design("q_in") && !inputs(true).on_cpu_by_design("mm"));
    assert!(!inputs(false).on_cpu_by_design("q_in"));
}

/// MTCNN's onet, quantized by `quantize_static`: a float NHWC input, a layout `Transpose`, then the
/// input's Q/DQ. ONNX Runtime moves the Q/DQ in front of the `Transpose` (`input_q`, `input_dq`,
/// kernels of the group standing for it), the QNN EP absorbs the transposition into the HTP graph,
/// and leaves the inserted graph-input Q to the CPU by design: the `Transpose` is on the CPU by
/// design, by the same rule the quiet-first rerun decision uses ([`off_preferred_ep`]).
#[test]
fn a_float_input_transpose_stood_for_by_the_graph_input_q_is_on_the_cpu_by_design() {
    use npugate_profile::placement::off_preferred_ep;
    let graph = ModelGraph {
        nodes: vec![node("Transpose9", "Transpose"), node("conv", "Conv")],
        partitioned: Some(Fusions { groups: vec![group(&["input_q", "input_dq", "Transpose9"], &["Transpose9"])] }),
        io_quantization: vec!["input_q".into()],
        ..ModelGraph::default()
    };
    let assignment = |own_on_cpu: bool| Assignment {
        source: String::new(),
        error: None,
        subgraphs: [subgraph(QNN, &[("conv", "Conv")]), subgraph(CPU, &[("input_q", "QuantizeLinear")])]
            .into_iter()
            .chain(own_on_cpu.then(|| subgraph(CPU, &[("Transpose9", "Transpose")])))
            .collect(),
    };
    let (by_design, own_on_cpu) = (assignment(false), assignment(true));
    let inputs = |assignment| on_qnn(assignment, &graph, None, true);
    let report = build_report(&inputs(&by_design));
    let off: Vec<(&str, &str, bool)> =
        report.fallback.iter().map(|f| (f.name.as_str(), f.ep.as_str(), f.expected)).collect();
    assert_eq!(off, [("Transpose9", CPU, true)]);
    assert!(
        off_preferred_ep(&inputs(&by_design)).is_empty(),
        "the rerun rule agrees: nothing off the EP needs a reason"
    );
    // The Transpose itself left to the CPU is a fallback, whatever else stands for it.
    let report = build_report(&inputs(&own_on_cpu));
    assert!(!report.fallback.iter().find(|f| f.name == "Transpose9").unwrap().expected);
    assert_eq!(off_preferred_ep(&inputs(&own_on_cpu)).len(), 1);
}

/// The DequantizeLinear the QNN EP's layout transformation inserts before a graph output has no
/// name of ours: its op trace's reason tells it is graph-I/O quantization on the CPU by design — to
/// the quiet-first rerun decision ([`off_preferred_ep`], which has no log yet) as to the placement.
#[test]
fn an_inserted_graph_output_dq_is_by_design_by_the_eps_traced_reason_for_the_rerun_rule_too() {
    use npugate_profile::placement::off_preferred_ep;
    use npugate_result::{QnnTrace, UnsupportedNode};
    let graph = ModelGraph { nodes: vec![node("conv", "Conv")], ..ModelGraph::default() };
    let assignment = Assignment {
        source: String::new(),
        error: None,
        subgraphs: vec![
            subgraph(QNN, &[("conv", "Conv")]),
            subgraph(CPU, &[("DequantizeLinear_token_11", "DequantizeLinear")]),
        ],
    };
    let trace = |reason: &str| QnnTrace {
        unsupported: vec![UnsupportedNode {
            node: "DequantizeLinear_token_11".into(),
            op_type: "DequantizeLinear".into(),
            reason: reason.into(),
        }],
        ..QnnTrace::default()
    };
    let (offload, other) = (
        trace("QNN EP is configured to not take DQ nodes that generate a graph output."),
        trace("Failed to add node."),
    );
    let inputs = |trace| on_qnn(&assignment, &graph, trace, true);
    assert!(off_preferred_ep(&inputs(Some(&offload))).is_empty());
    let warnings = build_report(&inputs(Some(&offload))).warnings.join("\n");
    assert!(
        warnings.contains("1 graph-I/O QuantizeLinear/DequantizeLinear node(s) that run on the CPU by design"),
        "{warnings}"
    );
    assert_eq!(off_preferred_ep(&inputs(Some(&other))).len(), 1, "another reason is no design");
    assert_eq!(off_preferred_ep(&inputs(None)).len(), 1, "no reason, no design");
}

/// hey_jarvis's `Cast` of a comparison into an `If`'s condition: ONNX Runtime's optimizations fold
/// it into the `If` before partitioning, so the log has no reason for it — it runs inside the `If`.
#[test]
fn a_node_fused_into_a_fallback_node_says_where_it_runs_instead_of_no_reason() {
    let graph = ModelGraph {
        nodes: vec![node("conv", "Conv"), node("ge", "GreaterOrEqual"), node("cast", "Cast"), node("if", "If")],
        partitioned: Some(Fusions { groups: vec![group(&["if"], &["cast", "if"])] }),
        ..ModelGraph::default()
    };
    let assignment = Assignment {
        source: String::new(),
        error: None,
        subgraphs: vec![subgraph(QNN, &[("conv", "Conv")]), subgraph(CPU, &[("ge", "GreaterOrEqual"), ("if", "If")])],
    };
    let report = build_report(&on_qnn(&assignment, &graph, None, true));
    let reason = |name: &str| report.fallback.iter().find(|f| f.name == name).unwrap().reason.clone();
    assert_eq!(
        reason("cast").as_deref(),
        Some("fused into if by ONNX Runtime's graph optimizations: it runs inside it"),
        "{:?}",
        report.fallback
    );
    assert_eq!(reason("ge"), None, "a node of its own with no logged reason keeps none");
}
