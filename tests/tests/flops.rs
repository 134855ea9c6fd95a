//! The headline number on real graphs (issue 24): FLOPs counted on the model's own nodes through
//! every fusion ONNX Runtime performs, checked against an independent count (`scripts/count-macs`:
//! 2 × the MACs of every Conv/MatMul/Gemm, with onnx's own shape inference); unnamed nodes named as
//! ONNX Runtime shows them; outputs whose shape is not the declared one. Runs the real `npugate`
//! with the real ONNX Runtime on models made by `scripts/make-test-models`.

use std::path::Path;
use std::process::{Command, Output};

use npugate_e2e::{bin, describe, independent_count, model, python, run};
use npugate_profile::report::{NodePlacement, PlacementReport};
use npugate_result::{files, RunResult};
use serde_json::Value;

/// Share rules only: the CV of a 2-core machine shared with other builds says nothing here.
const NO_CV: &str = "disable=[\"cv_pct\"]";

/// `npugate run --local` of `model` into `out` with `extra` flags.
fn run_local(model: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut command = Command::new(bin("npugate"));
    command.args(["run", "--local", "--runs", "20", "--warmup", "2", "--profile-runs", "2", "--rule", NO_CV]);
    command.arg("--model").arg(model).arg("--out").arg(out).args(extra);
    run(&mut command)
}

fn placement(dir: &Path) -> PlacementReport {
    npugate_profile::analyze_result_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

/// npugate's FLOPs of the model's Conv/MatMul/Gemm nodes: what the independent count counts.
fn mac_op_flops(report: &PlacementReport) -> u64 {
    let mac_ops = report.nodes.iter().filter(|n| matches!(n.op_type.as_str(), "Conv" | "MatMul" | "Gemm"));
    mac_ops.map(|n| n.flops.unwrap_or_else(|| panic!("no FLOPs for {n:?}"))).sum()
}

fn relative_error(measured: u64, truth: u64) -> f64 {
    (measured as f64 - truth as f64).abs() / truth as f64
}

/// Checks a CPU run's FLOPs against the independent count: the Conv/MatMul/Gemm nodes' FLOPs and
/// the model's total (which adds the element-wise ops, norms and softmax) within 1%, every node
/// placed and its FLOPs known, the share covering all of them.
fn assert_matches_the_independent_count(name: &str, report: &PlacementReport, truth: &Value) {
    let truth = truth["flops"].as_u64().expect("flops");
    let mac = mac_op_flops(report);
    assert!(relative_error(mac, truth) < 0.01, "{name}: Conv/MatMul/Gemm {mac} FLOPs, independent {truth}");
    let total = report.totals.flops;
    assert!(relative_error(total, truth) < 0.01, "{name}: total {total} FLOPs, independent {truth}");
    assert_eq!(report.totals.model_nodes, Some(report.nodes.len()), "{name}");
    assert_eq!(
        (report.totals.nodes, report.totals.unattributed_nodes, report.totals.flops_unknown_nodes),
        (report.nodes.len(), 0, 0),
        "{name}: {:?}",
        report.warnings
    );
    assert_eq!(report.totals.flops_covered_pct, 100.0, "{name}");
    assert_eq!(report.preferred_flops_pct, 100.0, "{name}");
    assert!(
        report.warnings.iter().all(|w| !w.contains("did not run") && !w.contains("could not be traced")),
        "{name}: {:?}",
        report.warnings
    );
}

#[test]
fn a_transformers_flops_survive_onnx_runtimes_fusions_and_match_an_independent_count() {
    let dir = tempfile::tempdir().unwrap();
    let vit = model("vitblock.onnx");
    let output = run_local(&vit, dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let result = RunResult::read(dir.path()).unwrap();
    // ONNX Runtime fused MatMul+Add into Gemm (and the GELU, and the LayerNorm's residual adds) at load:
    // the assignment names the fused nodes, not the model's.
    let assigned: Vec<&str> =
        result.assignment.subgraphs.iter().flat_map(|s| &s.nodes).map(|n| n.name.as_str()).collect();
    assert_eq!(assigned.iter().filter(|n| n.ends_with("/MatMulAddFusion")).count(), 9, "{assigned:?}");
    assert!(!assigned.contains(&"/blocks.0.attn.qkv/MatMul"), "{assigned:?}");
    let report = placement(dir.path());
    assert_eq!(report.nodes.len(), 69);
    assert_matches_the_independent_count("vitblock", &report, &independent_count(&vit, &[]));
    let qkv: &NodePlacement = report.nodes.iter().find(|n| n.name == "/blocks.0.attn.qkv/MatMul").unwrap();
    assert_eq!((qkv.ep.as_str(), qkv.flops), ("CPUExecutionProvider", Some(2 * 65 * 192 * 576)), "{qkv:?}");
    assert!(
        qkv.time_us_per_run.is_some_and(|t| t > 0.0),
        "the fused Gemm's kernel time is shared with its sources: {qkv:?}"
    );
}

#[test]
fn a_cnns_flops_survive_conv_batchnorm_fusion_and_match_an_independent_count() {
    let dir = tempfile::tempdir().unwrap();
    let resnet = model("resnet50.onnx");
    let output = run_local(&resnet, dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let result = RunResult::read(dir.path()).unwrap();
    let folded = result
        .graph
        .as_ref()
        .unwrap()
        .partitioned
        .as_ref()
        .unwrap()
        .groups
        .iter()
        .filter(|g| g.nodes.len() > g.kernels.len())
        .count();
    assert!(folded >= 50, "ONNX Runtime fuses each BatchNormalization into its Conv at load: {folded} groups");
    assert_matches_the_independent_count("resnet50", &placement(dir.path()), &independent_count(&resnet, &[]));
}

#[test]
fn unnamed_nodes_get_onnx_runtimes_names_and_a_cpu_run_passes_at_100_percent() {
    let dir = tempfile::tempdir().unwrap();
    let axis = dir.path().join("axis.npy");
    let write_axis = run(Command::new(python())
        .args(["-c", "import numpy, sys; numpy.save(sys.argv[1], numpy.array(0, numpy.int32))"])
        .arg(&axis));
    assert!(write_axis.status.success(), "{}", describe(&write_axis));
    let axis_input = format!("axis={}", axis.display());
    for (file, extra, names) in [
        ("unnamed_einsum.onnx", vec![], vec!["Einsum_0"]),
        ("unnamed_cumsum.onnx", vec!["--input", axis_input.as_str()], vec!["CumSum_0"]),
        ("unnamed_topk.onnx", vec![], vec!["TopK_0"]),
        (
            "unnamed_cnn.onnx",
            vec![],
            vec![
                "Conv_0",
                "Relu_1",
                "MaxPool_2",
                "Conv_3",
                "Relu_4",
                "MaxPool_5",
                "Conv_6",
                "Relu_7",
                "GlobalAveragePool_8",
                "Flatten_9",
                "Gemm_10",
                "Softmax_11",
            ],
        ),
    ] {
        let out = dir.path().join(file);
        let output = run_local(&model(file), &out, &extra);
        assert_eq!(output.status.code(), Some(0), "{file}: {}", describe(&output));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("PASS    npu_flops_pct    100.0%"), "{file}: {stdout}");
        let result = RunResult::read(&out).unwrap();
        let graph = result.graph.as_ref().unwrap();
        assert_eq!(graph.named, names.len(), "{file}");
        // ONNX Runtime's own assignment and profiles know the nodes by the same names.
        let assigned: Vec<&str> =
            result.assignment.subgraphs.iter().flat_map(|s| &s.nodes).map(|n| n.name.as_str()).collect();
        assert!(names.iter().all(|n| assigned.contains(n)), "{file}: {assigned:?}");
        let reference = npugate_profile::result_dir::read_profile(&out.join(files::REFERENCE_PROFILE)).unwrap();
        assert!(names.iter().all(|n| reference.find(n).is_some()), "{file}");
        let report = placement(&out);
        let reported: Vec<&str> = report.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(reported, names, "{file}");
        assert_eq!(report.preferred_flops_pct, 100.0, "{file}");
        assert!(report.nodes.iter().all(|n| n.flops.is_some()), "{file}: {:?}", report.nodes);
        assert!(report.warnings.iter().all(|w| !w.contains("another model")), "{file}: {:?}", report.warnings);
    }
}

#[test]
fn outputs_of_another_rank_than_declared_and_of_data_dependent_size_run() {
    for (file, extra, output_name) in
        [("wrong_rank_output.onnx", &["--shape", "x=2x4x8"][..], "y"), ("nonzero.onnx", &[][..], "indices")]
    {
        let dir = tempfile::tempdir().unwrap();
        let mut flags = vec!["--check-outputs"];
        flags.extend_from_slice(extra);
        let output = run_local(&model(file), dir.path(), &flags);
        assert_eq!(output.status.code(), Some(0), "{file}: {}", describe(&output));
        let result = RunResult::read(dir.path()).unwrap();
        assert_eq!(result.timings.latencies_ns.len(), npugate_e2e::runs_taken(&result, 20), "{file}");
        assert!(
            result
                .warnings
                .iter()
                .any(|w| w.contains(&format!("output(s) {output_name} have no static declared shape"))
                    && w.contains("allocates them on every run")),
            "{file}: {:?}",
            result.warnings
        );
        // The saved output has its real shape, not the declared one.
        let saved = dir.path().join(format!("outputs/{output_name}.npy"));
        let shape = run(Command::new(python())
            .args(["-c", "import numpy, sys; print(list(numpy.load(sys.argv[1]).shape))"])
            .arg(&saved));
        let shape = String::from_utf8_lossy(&shape.stdout).trim().to_string();
        match file {
            "wrong_rank_output.onnx" => assert_eq!(shape, "[2, 4, 8]"),
            _ => assert!(
                shape.starts_with("[2, ") && shape != "[2, 16]",
                "NonZero of uniform [0, 1) data > 0.5 has about 16 of 32: {shape}"
            ),
        }
    }
    // A model whose outputs have their declared static shape keeps them preallocated.
    let dir = tempfile::tempdir().unwrap();
    let output = run_local(&model("smallcnn.onnx"), dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let result = RunResult::read(dir.path()).unwrap();
    assert!(result.warnings.iter().all(|w| !w.contains("allocates them on every run")), "{:?}", result.warnings);
}

/// Qualcomm's x86_64 HTP backend under wine (`npugate_e2e::htp`): preflight, compile and emulated runs.
mod host_htp {
    use super::*;
    use npugate_e2e::htp::{npugate, preflight, soc};

    /// An emulated `npugate run --local --ep qnn --soc SM8650` of `model` into `out`.
    fn emulated_run(model: &Path, out: &Path) -> Output {
        let args =
            ["run", "--local", "--ep", "qnn", "--soc", "SM8650", "--runs", "3", "--warmup", "1", "--profile-runs", "1"];
        npugate(&args, &[Path::new("--model"), model, Path::new("--out"), out])
    }

    #[test]
    fn every_flop_of_a_transformer_is_counted_and_unnamed_nodes_keep_the_htps_reason() {
        let dir = tempfile::tempdir().unwrap();
        let vit = model("vitblock.onnx");
        let output = emulated_run(&vit, &dir.path().join("vit"));
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        let result = RunResult::read(&dir.path().join("vit")).unwrap();
        let on_qnn: Vec<&str> = result
            .assignment
            .subgraphs
            .iter()
            .filter(|s| s.ep == "QNNExecutionProvider")
            .flat_map(|s| &s.nodes)
            .map(|n| n.name.as_str())
            .collect();
        assert!(on_qnn.iter().any(|n| n.ends_with("/MatMulAddFusion")), "QNN was given the fused Gemms: {on_qnn:?}");
        let report = placement(&dir.path().join("vit"));
        let truth = independent_count(&vit, &[])["flops"].as_u64().unwrap();
        assert!(
            relative_error(report.totals.flops, truth) < 0.01,
            "{} FLOPs on the HTP run, independent {truth}",
            report.totals.flops
        );
        assert_eq!(mac_op_flops(&report), truth, "every Conv/MatMul of the model counted");
        assert_eq!(
            (report.preferred_flops_pct, report.totals.flops_covered_pct, report.totals.unattributed_flops),
            (100.0, 100.0, 0)
        );
        assert_eq!(report.partitions.len(), 1);
        assert_eq!(report.partitions[0].flops, report.totals.flops, "the partition stands for every model node it ran");
        assert!(
            report.totals.nodes <= 69 && report.warnings.iter().all(|w| !w.contains("did not run")),
            "{:?}",
            report.warnings
        );

        let output = emulated_run(&model("unnamed_cnn.onnx"), &dir.path().join("unnamed"));
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        let report = placement(&dir.path().join("unnamed"));
        assert_eq!((report.preferred_flops_pct, report.preferred_nodes_pct), (100.0, 100.0), "{:?}", report.warnings);
        assert_eq!(report.partitions[0].nodes.first().map(String::as_str), Some("Conv_0"));

        let (output, preflight) = preflight(&model("unnamed_einsum.onnx"), &["SM8650"], &dir.path().join("einsum"));
        assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
        let verdict = soc(&preflight, "SM8650");
        let left = verdict["fallback"].as_array().unwrap();
        assert_eq!(left.len(), 1, "{verdict:#}");
        assert_eq!((left[0]["name"].as_str(), left[0]["op_type"].as_str()), (Some("Einsum_0"), Some("Einsum")));
        let reason = left[0]["reason"].as_str().unwrap();
        assert!(reason.starts_with("QNN backend: Unsupported input/output datatypes requested for the HTP Op 'MatMul' in the node 'Einsum_0"), "{reason}");
        assert!(reason.contains("FLOAT_64"), "{reason}");
    }

    #[test]
    fn graph_io_quantization_is_on_the_cpu_by_design_in_preflight_run_and_compile() {
        let dir = tempfile::tempdir().unwrap();
        let qdq = model("io_qdq.onnx");
        let socs = ["SM8550", "SM8650", "SM8750", "SM8850"];
        let (output, report) = preflight(&qdq, &socs, &dir.path().join("preflight"));
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        for name in socs {
            let verdict = soc(&report, name);
            assert_eq!(
                (verdict["outcome"].as_str(), verdict["flops_pct"].as_f64()),
                (Some("pass"), Some(100.0)),
                "{verdict:#}"
            );
            let by_design: Vec<(&str, bool)> = verdict["fallback"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| (f["name"].as_str().unwrap(), f["expected"] == true))
                .collect();
            assert_eq!(by_design, [("input_a_QuantizeLinear", true), ("input_b_QuantizeLinear", true)], "{name}");
        }
        let text = String::from_utf8_lossy(
            &npugate(
                &["preflight", "--soc", "SM8650"],
                &[Path::new("--model"), &qdq, Path::new("--out"), &dir.path().join("text")],
            )
            .stdout,
        )
        .into_owned();
        assert!(text.contains("on CPU by design: input_a_QuantizeLinear (QuantizeLinear)"), "{text}");
        // The session flags reach every SoC job: with the offload off, the HTP takes the graph-input Qs.
        let kept = npugate(
            &["preflight", "--soc", "SM8650", "--no-execute", "--offload-graph-io-quantization", "0"],
            &[Path::new("--model"), &qdq, Path::new("--out"), &dir.path().join("kept")],
        );
        let kept_text = String::from_utf8_lossy(&kept.stdout);
        assert_eq!(kept.status.code(), Some(0), "{}", describe(&kept));
        assert!(!kept_text.contains("by design") && !kept_text.contains("left to CPU"), "{kept_text}");

        let output = emulated_run(&qdq, &dir.path().join("run"));
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        let run = placement(&dir.path().join("run"));
        assert!(run.fallback.iter().all(|f| f.expected) && run.fallback.len() == 2, "{:?}", run.fallback);
        assert_eq!(run.preferred_flops_pct, 100.0);
        // The QNN EP's layout transformation inserts Q/DQ pairs before the graph outputs; their DQ stays on the CPU by design.
        assert!(run.warnings.iter().any(|w| w.contains("inserted") && w.contains("by design")), "{:?}", run.warnings);
        assert!(run.totals.nodes <= 18, "only model nodes are counted: {:?}", run.totals);

        let compiled = dir.path().join("io_qdq_ctx.onnx");
        let output =
            npugate(&["compile", "--soc", "SM8650"], &[Path::new("--model"), &qdq, Path::new("--out"), &compiled]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "nothing is left on the CPU but graph-I/O Q/DQ: {}",
            describe(&output)
        );
    }

    #[test]
    fn only_the_models_own_nodes_are_listed_and_equal_reasons_are_one_cause() {
        let dir = tempfile::tempdir().unwrap();
        let vit = model("vitblock.onnx");
        let names: Vec<String> = {
            let graph = npugate_onnx::Model::read(&vit).unwrap();
            let index = graph.index();
            index.nodes().iter().map(|n| n.name().to_string()).collect()
        };
        // QCM6490 refuses the session for this float model: the log's QNN op names (`…/MatMulAddFusion_2`)
        // are traced to the model's nodes.
        let (_, report) = preflight(&vit, &["QCM6490"], &dir.path().join("preflight"));
        let verdict = soc(&report, "QCM6490");
        let left: Vec<&str> =
            verdict["fallback"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
        assert!(!left.is_empty() && left.len() <= names.len(), "{verdict:#}");
        assert!(left.iter().all(|name| names.iter().any(|n| n == name)), "only model nodes: {left:?}");

        let output = emulated_run(&model("htp_reject_blocks.onnx"), &dir.path().join("run"));
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        let run = placement(&dir.path().join("run"));
        let causes: Vec<(usize, &str)> = run.rejections.iter().map(|c| (c.nodes, c.op_types[0].as_str())).collect();
        assert_eq!(causes, [(3, "Neg"), (3, "MatMul")], "{:#?}", run.rejections);
        for cause in &run.rejections {
            assert!(
                cause.reason.contains("in the node '…'"),
                "the node's name is taken out of the reason: {}",
                cause.reason
            );
            assert!(
                cause.describe().starts_with("3 nodes: QNN backend: Unsupported input/output datatypes"),
                "{}",
                cause.describe()
            );
            assert!(cause.describe().contains("(e.g. /blocks."), "{}", cause.describe());
        }
    }

    /// An emulated run with QNN's per-op profiling of `model` into `out`.
    fn profiled_run(model: &Path, out: &Path) -> PlacementReport {
        let args = ["run", "--local", "--ep", "qnn", "--soc", "SM8650", "--runs", "2", "--warmup", "1"];
        let extra = ["--profile-runs", "1", "--qnn-profiling", "detailed"];
        let args: Vec<&str> = args.iter().chain(&extra).copied().collect();
        let output = npugate(&args, &[Path::new("--model"), model, Path::new("--out"), out]);
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("tied to model nodes by the QNN EP's op trace"), "{stdout}");
        assert!(stdout.contains("emulated, never a device estimate"), "{stdout}");
        assert!(out.join("qnn_op_trace.json").is_file(), "the EP's trace is kept with the result");
        placement(out)
    }

    /// Every QNN op the EP built is tied to model nodes (the QDQ CNN's layout Transposes by QNN's
    /// graph); the only ops without are QNN's graph I/O and ops the HTP compiler added, which have
    /// no name (`OpId_19`). Every op has its emulated cycles (a layout-only op may take none).
    fn assert_every_op_reaches_model_nodes(report: &PlacementReport, model_nodes: &[String]) {
        let ops: Vec<_> = report.partitions.iter().flat_map(|p| &p.backend_ops).collect();
        let summary = report.qnn_ops.as_ref().unwrap();
        assert_eq!((summary.sources.as_str(), summary.ops, summary.executes), ("trace", ops.len(), 1));
        for op in &ops {
            use npugate_profile::report::OpAttribution::*;
            match op.attribution {
                Traced | Adjacent => {
                    assert!(!op.model_nodes.is_empty(), "{op:?}");
                    for node in &op.model_nodes {
                        assert!(model_nodes.contains(node), "{node} of {} is no model node", op.name);
                    }
                }
                GraphIo | Unattributed => assert!(
                    op.name.starts_with("Input OpId_")
                        || op.name.starts_with("Output OpId_")
                        || op.name.starts_with("OpId_"),
                    "{op:?}"
                ),
                Named => panic!("a trace was recorded, yet {op:?} was tied by its name"),
            }
            // A layout-only op (a Reshape) may take 0 cycles; the graph's ops together take some.
            assert!(op.value.is_some_and(|v| v >= 0.0) && op.unit == "CYCLES", "{op:?}");
        }
        assert!(ops.iter().filter_map(|op| op.value).sum::<f64>() > 0.0, "the graph took no cycles: {ops:?}");
    }

    #[test]
    fn every_qnn_op_is_tied_to_model_nodes_by_the_eps_trace_and_its_reasons_fill_the_fallback() {
        let dir = tempfile::tempdir().unwrap();
        let names = |path: &Path| -> Vec<String> {
            npugate_onnx::Model::read(path).unwrap().index().nodes().iter().map(|n| n.name().to_string()).collect()
        };
        let cnn = profiled_run(&model("smallcnn_qdq.onnx"), &dir.path().join("cnn"));
        assert_every_op_reaches_model_nodes(&cnn, &names(&model("smallcnn_qdq.onnx")));
        let conv = cnn.partitions[0].backend_ops.iter().find(|o| o.name == "conv1_token_1").unwrap();
        assert!(conv.model_nodes.contains(&"conv1".to_string()), "{conv:?}");
        let conv1 = cnn.nodes.iter().find(|n| n.name == "conv1").unwrap();
        assert!(conv1.backend_time.as_ref().is_some_and(|t| t.value > 0.0), "{conv1:?}");

        // The transformer block with every node name removed: ONNX Runtime names them (`MatMul_6`).
        let unnamed = dir.path().join("vit_unnamed.onnx");
        let strip = "import onnx, sys\nm = onnx.load(sys.argv[1])\nfor n in m.graph.node: n.name = ''\nonnx.save(m, sys.argv[2])";
        let made = run(Command::new(python()).args(["-c", strip]).arg(model("vitblock.onnx")).arg(&unnamed));
        assert!(made.status.success(), "{}", describe(&made));
        let vit = profiled_run(&unnamed, &dir.path().join("vit"));
        let vit_nodes: Vec<String> = vit.nodes.iter().map(|n| n.name.clone()).collect();
        assert_every_op_reaches_model_nodes(&vit, &vit_nodes);
        let gelu = vit.partitions[0].backend_ops.iter().find(|o| o.qnn_type == "Gelu").unwrap();
        assert!(gelu.model_nodes.len() >= 5 && gelu.model_nodes.iter().any(|n| n.starts_with("Erf_")), "{gelu:?}");

        // A node the EP refused: the trace's reason, in the result and the placement.
        let out = dir.path().join("topk");
        let output = emulated_run(&model("unnamed_topk.onnx"), &out);
        assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
        let trace = RunResult::read(&out).unwrap().qnn_trace.unwrap();
        let refused = &trace.unsupported[0];
        assert_eq!((refused.node.as_str(), refused.op_type.as_str()), ("TopK_0", "TopK"));
        assert!(refused.reason.contains("must be specified as constant input"), "{refused:?}");
        let left = &placement(&out).fallback[0];
        assert!(left.reason.as_deref().is_some_and(|r| r.contains(&refused.reason)), "{left:?}");
    }
}

/// A node whose FLOPs have no formula (GridSample) is counted in the coverage at the model's own
/// rate in the CPU reference pass: the coverage is the known nodes' share of that pass's kernel
/// time, never 100%.
#[test]
fn nodes_of_unknown_flops_lower_the_coverage_by_their_share_of_the_reference_time() {
    let dir = tempfile::tempdir().unwrap();
    let output = run_local(&model("qnn_version_ops.onnx"), dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let report = placement(dir.path());
    assert_eq!(report.totals.flops_unknown_nodes, 1, "{:?}", report.warnings);
    let reference = npugate_profile::result_dir::read_profile(&dir.path().join(files::REFERENCE_PROFILE)).unwrap();
    let time_of = |name: &str| -> f64 {
        let node = reference.find(name).unwrap_or_else(|| panic!("{name} in the reference pass"));
        reference.node_time_per_run(node).iter().sum()
    };
    let (known, unknown) = (time_of("lppool"), time_of("gridsample"));
    // Kernel times are whole µs: a pass that timed the LpPool at 0 has no rate, and the unknown
    // node lowers the coverage by its share of the nodes instead (1 of 2).
    let expected = if known > 0.0 { 100.0 * known / (known + unknown) } else { 50.0 };
    let covered = report.totals.flops_covered_pct;
    assert!(
        covered < 100.0 && (covered - expected).abs() < 0.1,
        "coverage {covered}%, reference time share {expected}%"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("FLOPs unknown for 1 node(s) (about "), "{stdout}");
}
