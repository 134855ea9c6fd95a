//! The real Hexagon backend without a device: Qualcomm's x86_64 host build of the QNN HTP backend
//! (onnxruntime-qnn 2.7.0, QNN 2.51) with the Windows x64 ONNX Runtime under wine — per-SoC op
//! validation and compile (`npugate preflight`), context binaries (`npugate compile`), the HTP
//! emulator (`npugate run --local --ep qnn`), and the device-side check of a compiled model.

use std::path::Path;
use std::process::Command;

use npugate_e2e::devices::{Device, Rig};
use npugate_e2e::htp::{npugate, preflight, soc};
use npugate_e2e::{bin, describe, model, python, run};
use npugate_onnx::Model;
use npugate_result::RunResult;
use serde_json::Value;

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .expect("valid JSON")
}

/// The fallback entry named `name` of a SoC verdict.
fn fallback<'a>(verdict: &'a Value, name: &str) -> &'a Value {
    verdict["fallback"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("{name} not left to CPU: {verdict:#}"))
}

#[test]
fn an_op_the_eps_builder_takes_and_the_htp_rejects_is_named_with_the_htps_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (output, report) = preflight(&model("htp_reject.onnx"), &["SM8650"], &dir.path().join("out"));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    assert_eq!(report["schema"], "npugate.htp-preflight/2");
    assert!(report["label"].as_str().unwrap().contains("the device did not run"), "{report:#}");
    let verdict = soc(&report, "SM8650");
    assert_eq!(
        (verdict["outcome"].as_str(), verdict["compiled"].as_bool(), verdict["htp_arch"].as_str()),
        (Some("fail"), Some(true), Some("v75"))
    );
    let matmul = fallback(verdict, "matmul_int32");
    assert_eq!(matmul["op_type"], "MatMul");
    let reason = matmul["reason"].as_str().unwrap();
    // The EP's builder turned the node into a QNN op; the backend's own validation refused it.
    assert!(
        reason.starts_with("QNN backend: Unsupported input/output datatypes requested for the HTP Op 'MatMul'"),
        "{reason}"
    );
    assert!(reason.contains("requested in[0] INT_32, in[1] INT_32, out[0] INT_32"), "{reason}");
    assert!(reason.contains("supported configurations: BF16, FP16, INT16, INT8"), "{reason}");
    assert!(reason.ends_with("(EP: Failed to add fused Matmul node.)"), "{reason}");
    assert!(fallback(verdict, "neg_int32")["reason"].as_str().unwrap().contains("'ElementWiseNeg'"), "{verdict:#}");
    // Nodes left to the CPU: the quiet session was dropped and created again at VERBOSE for these reasons.
    let rerun =
        RunResult::read(&dir.path().join("out/SM8650")).unwrap().execution.session_log.and_then(|l| l.verbose_rerun);
    assert!(
        rerun.as_deref().is_some_and(|r| r.contains("left off QNNExecutionProvider") && r.contains("matmul_int32")),
        "{rerun:?}"
    );
    let nodes_pct = verdict["nodes_pct"].as_f64().unwrap();
    assert!(nodes_pct > 0.0 && nodes_pct < 100.0, "the Conv/Relu branch runs on the HTP: {nodes_pct}");
    assert!(verdict["flops_pct"].as_f64().unwrap() > 90.0, "the Conv holds the FLOPs: {verdict:#}");
    // The terminal report and the saved files say the same.
    let placement = read_json(&dir.path().join("out/SM8650/placement.json"));
    assert_eq!(placement["schema"], "npugate.placement/1");
    assert!(placement["predicted"].as_str().unwrap().contains("Qualcomm's host backend"), "{placement:#}");
    assert_eq!(read_json(&dir.path().join("out/preflight.json")), report);
    let text = npugate(
        &["preflight", "--soc", "SM8650"],
        &[Path::new("--model"), &model("htp_reject.onnx"), Path::new("--out"), &dir.path().join("text")],
    );
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("SM8650  v75   FAIL"), "{stdout}");
    assert!(stdout.contains("left to CPU: matmul_int32 (MatMul): QNN backend: Unsupported"), "{stdout}");
    // Compiled anyway: exit 1 names the nodes left on the CPU, and the file is written with them as plain nodes.
    let ctx = dir.path().join("reject_ctx.onnx");
    let compile = npugate(
        &["compile", "--soc", "SM8650"],
        &[Path::new("--model"), &model("htp_reject.onnx"), Path::new("--out"), &ctx],
    );
    assert_eq!(compile.status.code(), Some(1), "{}", describe(&compile));
    let stdout = String::from_utf8_lossy(&compile.stdout);
    assert!(
        stdout.contains("left on the CPU: matmul_int32 (MatMul): QNN backend:") && stdout.contains("neg_int32 (Neg)"),
        "{stdout}"
    );
    let compiled = Model::read(&ctx).unwrap();
    let ops: Vec<&str> = compiled.index().nodes().iter().map(|n| n.op_type()).collect();
    assert!(ops.contains(&"EPContext") && ops.contains(&"MatMul") && ops.contains(&"Neg"), "{ops:?}");
    // Its run composes no graph and logs no rejection: the reason compile showed travels with the model.
    let out = dir.path().join("compiled-run");
    let run = npugate(
        &["run", "--local", "--ep", "qnn", "--soc", "SM8650", "--runs", "3", "--warmup", "0", "--profile-runs", "1"],
        &[Path::new("--model"), &ctx, Path::new("--out"), &out],
    );
    assert!(run.status.code().is_some_and(|c| c < 2), "{}", describe(&run));
    let placement = &read_json(&out.join("verdict.json"))["placement"];
    let reason = fallback(placement, "matmul_int32")["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("QNN backend: Unsupported input/output datatypes requested for the HTP Op 'MatMul'")
            && reason.ends_with("(recorded when the model was compiled)"),
        "{reason}"
    );
}

#[test]
fn a_qdq_model_with_a_float_input_transpose_names_its_reason() {
    // As quantize_static writes MTCNN's onet: float NHWC input, a layout Transpose, then the Q/DQ.
    // ONNX Runtime moves the graph input's Q in front of the Transpose, which stands for it; the
    // QNN EP leaves that Q to the CPU by design. One rule for the rerun decision and the verdict.
    let dir = tempfile::tempdir().unwrap();
    let (output, report) = preflight(&model("input_transpose_qdq.onnx"), &["SM8650"], &dir.path().join("out"));
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let verdict = soc(&report, "SM8650");
    assert_eq!(verdict["outcome"], "pass", "{verdict:#}");
    let transpose = fallback(verdict, "input_layout");
    assert_eq!(transpose["expected"], true, "{transpose:#}");
    let reason = transpose["reason"].as_str().unwrap();
    assert!(
        reason.contains("graph-I/O quantization ONNX Runtime put in its place")
            && reason.contains("QNN EP is configured to not take Q nodes that consume a graph input"),
        "{reason}"
    );
    let every_reason = verdict["fallback"].as_array().unwrap().iter().all(|f| f["reason"].as_str().is_some());
    assert!(every_reason, "every node left to the CPU names its reason: {verdict:#}");
    let rerun = RunResult::read(&dir.path().join("out/SM8650")).unwrap().execution.session_log;
    assert_eq!(rerun.and_then(|l| l.verbose_rerun), None, "nothing off the EP needed the VERBOSE account");
}

#[test]
fn no_ops_onnx_runtime_eliminated_at_load_are_not_reported_left_to_the_cpu() {
    // melspectrogram's tail: `x - 0` and a Cast to float run nowhere (ONNX Runtime rewires their
    // consumers, on the HTP and on the CPU, to their inputs); only the Clip with a computed min is
    // left to the CPU, as the compiled model shows.
    let dir = tempfile::tempdir().unwrap();
    let (output, report) = preflight(&model("clip_computed_min.onnx"), &["SM8650"], &dir.path().join("out"));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let verdict = soc(&report, "SM8650");
    let left: Vec<&str> = verdict["fallback"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(left, ["clip_to_floor"], "{verdict:#}");
    assert!(fallback(verdict, "clip_to_floor")["reason"].as_str().unwrap().contains("dynamic min/max"), "{verdict:#}");
}

#[test]
fn an_a16w16_conv_net_is_refused_on_v68_and_taken_on_v75() {
    let dir = tempfile::tempdir().unwrap();
    let (output, report) = preflight(&model("smallcnn_a16w16.onnx"), &["SM8350", "SM8650"], &dir.path().join("out"));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let v68 = soc(&report, "SM8350");
    assert_eq!((v68["outcome"].as_str(), v68["compiled"].as_bool()), (Some("fail"), Some(false)), "{v68:#}");
    assert!(v68["error"].as_str().unwrap().contains("ONNX Runtime refused the session for SM8350 (v68)"), "{v68:#}");
    // The model's node, not the name the layout transformation gave it (`conv1_token_1`).
    let conv = fallback(v68, "conv1");
    assert_eq!(conv["op_type"], "Conv");
    let reason = conv["reason"].as_str().unwrap();
    assert!(
        reason.contains("has incorrect Value 68, expected >= 73.")
            && reason.contains("[needs Hexagon v73 or newer; SM8350 is v68]"),
        "{reason}"
    );
    let v75 = soc(&report, "SM8650");
    assert_eq!((v75["outcome"].as_str(), v75["compiled"].as_bool()), (Some("pass"), Some(true)), "{v75:#}");
    assert!(
        v75["fallback"].as_array().unwrap().iter().all(|f| f["expected"] == true),
        "only graph I/O (de)quantization on CPU: {v75:#}"
    );
    // Quiet first, VERBOSE only where needed: the passing SoC's session (graph I/O Q/DQ on the CPU by
    // design) was kept at warning, its assignment the whole account; the refused one was created
    // again at VERBOSE, whose log gave the reasons above.
    let passed = RunResult::read(&dir.path().join("out/SM8650")).unwrap();
    let logged = passed.execution.session_log.as_ref().expect("a session-only run on the HTP records how it logged");
    assert_eq!((logged.level.as_str(), logged.verbose_rerun.as_deref()), ("warning", None), "{logged:?}");
    assert!(passed.backend.as_ref().is_some_and(|b| b.started), "started, by the assignment: {:?}", passed.backend);
    let refused = RunResult::read(&dir.path().join("out/SM8350")).unwrap();
    let logged = refused.execution.session_log.expect("a session-only run on the HTP records how it logged");
    assert_eq!(logged.verbose_rerun.as_deref(), Some("ONNX Runtime refused the session"), "{logged:?}");
}

#[test]
fn a_float_model_fails_to_compile_for_v68_and_compiles_for_v75() {
    let dir = tempfile::tempdir().unwrap();
    let float = model("hardswish640.onnx");
    let (output, report) = preflight(&float, &["SM8350", "SM8650"], &dir.path().join("out"));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let v68 = soc(&report, "SM8350");
    assert_eq!((v68["outcome"].as_str(), v68["compiled"].as_bool()), (Some("fail"), Some(false)));
    let error = v68["error"].as_str().unwrap();
    assert!(
        error.starts_with("cannot compile for SM8350 (v68): ") && error.contains("Failed to finalize QNN graph"),
        "{error}"
    );
    assert!(error.contains("QNN: ") && error.contains("graph prepare failed"), "QNN's own finalize errors: {error}");
    let v75 = soc(&report, "SM8650");
    assert_eq!(
        (v75["outcome"].as_str(), v75["compiled"].as_bool(), v75["nodes_pct"].as_f64()),
        (Some("pass"), Some(true), Some(100.0)),
        "{v75:#}"
    );
    // npugate compile says the same: nothing written for v68.
    let out = dir.path().join("hs_ctx.onnx");
    let compile = npugate(&["compile", "--soc", "SM8350"], &[Path::new("--model"), &float, Path::new("--out"), &out]);
    assert_eq!(compile.status.code(), Some(2), "{}", describe(&compile));
    assert!(
        stderr(&compile).contains("cannot compile") && stderr(&compile).contains("for SM8350 (v68)"),
        "{}",
        describe(&compile)
    );
    assert!(!out.exists());
}

/// The scale of the DequantizeLinear that produces graph output `output`: one output quantization step.
fn output_step(path: &Path, output: &str) -> f64 {
    let model = Model::read(path).unwrap();
    let graph = model.proto().graph.as_ref().unwrap();
    let dq = graph
        .node
        .iter()
        .find(|n| n.op_type.as_deref() == Some("DequantizeLinear") && n.output.iter().any(|o| o == output))
        .expect("output DQ");
    let scale =
        graph.initializer.iter().find(|t| t.name.as_deref() == Some(dq.input[1].as_str())).expect("scale initializer");
    let raw = scale.raw_data.as_deref().unwrap_or_default();
    let value = if raw.len() == 4 { f32::from_le_bytes(raw.try_into().unwrap()) } else { scale.float_data[0] };
    f64::from(value)
}

#[test]
fn a_uint8_qdq_model_on_the_emulator_is_within_one_output_step_of_the_cpu_ep() {
    let dir = tempfile::tempdir().unwrap();
    let qdq = model("smallcnn_qdq.onnx");
    let step = output_step(&qdq, "probs");
    let out = dir.path().join("emulated");
    let output = npugate(
        &[
            "run",
            "--local",
            "--ep",
            "qnn",
            "--soc",
            "SM8650",
            "--runs",
            "3",
            "--warmup",
            "0",
            "--profile-runs",
            "1",
            "--check-outputs",
            "--json",
        ],
        &[
            Path::new("--model"),
            &qdq,
            Path::new("--reference-model"),
            &qdq,
            Path::new("--out"),
            &out,
            Path::new("--rule"),
            Path::new(&format!("max_abs_err={step}")),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let result = RunResult::read(&out).unwrap();
    assert!(result.execution.emulated.as_deref().unwrap().contains("HTP emulator"), "{:?}", result.execution);
    assert_eq!(result.execution.ep_options.get("soc_model").map(String::as_str), Some("57"));
    let outputs = read_json(&out.join("outputs.json"));
    let max_abs_err = outputs["outputs"][0]["metrics"]["max_abs_err"].as_f64().unwrap();
    assert!(max_abs_err <= step * 1.0001, "emulator vs CPU EP: {max_abs_err} > one step {step}");
    let verdict: Value = serde_json::from_slice(&output.stdout).unwrap();
    let check = |rule: &str| verdict["checks"].as_array().unwrap().iter().find(|c| c["rule"] == rule).cloned().unwrap();
    assert_eq!(check("cv_pct")["status"], "not_applicable", "an emulator's speed says nothing about a phone");
    assert!(check("cv_pct")["message"].as_str().unwrap().contains("the run was emulated"));
    assert_eq!(check("npu_flops_pct")["status"], "pass");
    assert_eq!(check("max_abs_err")["status"], "pass");
    // Its latency is the host's time: no cause is claimed for its shape.
    let warnings = verdict["warnings"].to_string();
    for claim in ["fallback", "thermal", "bimodal", "drifted", "CPU contention"] {
        assert!(!warnings.contains(claim), "{claim}: {warnings}");
    }
}

/// How many times the HTP emulator executed a graph, by its own `QnnGraph_execute started` lines
/// in `ort.log` (an independent count of what the harness reports).
fn graph_executions(log: &Path) -> usize {
    std::fs::read_to_string(log).unwrap().lines().filter(|l| l.contains("<I> QnnGraph_execute started")).count()
}

#[test]
fn the_timed_session_on_the_emulator_logs_nothing_per_inference_and_the_account_proves_the_power_mode() {
    let dir = tempfile::tempdir().unwrap();
    let qdq = model("smallcnn_qdq.onnx");
    let emulate = |out: &Path, extra: &[&str]| {
        let args = [
            &[
                "run",
                "--local",
                "--ep",
                "qnn",
                "--soc",
                "SM8650",
                "--runs",
                "20",
                "--warmup",
                "2",
                "--profile-runs",
                "1",
                "--no-reference-pass",
            ][..],
            extra,
        ]
        .concat();
        let output = npugate(&args, &[Path::new("--model"), &qdq, Path::new("--out"), out]);
        assert!(output.status.code().is_some_and(|c| c < 2), "{}", describe(&output));
        (output, RunResult::read(out).unwrap())
    };
    let inferences = 1 + 2 + 20;

    // The default: an app's WARNING. Nothing logged from the first inference to the last timed
    // run; the one graph execution in the log is the profiled pass's, which logs VERBOSE.
    let quiet = dir.path().join("warning");
    let (output, result) = emulate(&quiet, &["--progress", "lines"]);
    // Each emulated inference is shown as it ends, with the time left; none stays in the
    // harness's stderr, whose own account is kept.
    let lines: Vec<String> =
        stderr(&output).lines().filter(|l| l.starts_with("npugate: SM8650: ")).map(String::from).collect();
    let shown = |phase: &str| lines.iter().filter(|l| l.contains(&format!(": {phase} "))).count();
    assert_eq!((shown("first"), shown("warmup"), shown("timed"), shown("profiled")), (1, 2, 20, 1), "{lines:#?}");
    assert!(
        lines.iter().any(|l| l.starts_with("npugate: SM8650: timed 20/20, about ") && l.ends_with(" left")),
        "{lines:#?}"
    );
    let kept = std::fs::read_to_string(quiet.join("harness.stderr")).unwrap_or_default();
    assert!(!kept.contains("npugate-harness progress"), "{kept}");
    let timed_log = result.execution.timed_log.as_ref().expect("the timed session's log is recorded");
    assert_eq!((timed_log.level.as_str(), timed_log.lines_during_runs), ("warning", 0), "{timed_log:?}");
    assert_eq!(graph_executions(&quiet.join("ort.log")), 1, "only the profiled run logged its execution");
    // The account (the profiled session's set-up, VERBOSE): the backend started, and the power
    // configuration burst asks for — which Qualcomm's host build says it cannot apply.
    let backend = result.backend.as_ref().unwrap();
    assert!(backend.started && backend.evidence.iter().any(|e| e.contains("QNN SetupBackend succeed")), "{backend:?}");
    let power = backend.htp_power.as_ref().expect("the HTP power configuration is recorded");
    assert_eq!(
        (power.performance_mode.as_deref(), power.rpc_polling_time_us),
        (Some("burst"), Some(9999)),
        "{power:?}"
    );
    assert!(
        !power.applied
            && power.not_applied.as_deref() == Some("QNN HTP backend: No perf settings support on this platform"),
        "{power:?}"
    );
    let said = stderr(&output) + &String::from_utf8_lossy(&output.stdout);
    assert!(
        said.contains(
            "htp_performance_mode=burst was requested, but not applied: QNN HTP backend: No perf settings support"
        ),
        "{said}"
    );

    // VERBOSE, as the harness did before: every inference logs (the QNN EP and the backend). With
    // --check-outputs too: the outputs saved are the last timed run's, no extra emulated inference.
    let loud = dir.path().join("verbose");
    let (_, result) = emulate(&loud, &["--ort-log-level", "verbose", "--check-outputs"]);
    let timed_log = result.execution.timed_log.as_ref().unwrap();
    assert_eq!(
        graph_executions(&loud.join("ort.log")),
        inferences + 1,
        "every timed-session inference logged its execution, and none more for the outputs"
    );
    assert!(!result.artifacts.outputs.is_empty() && loud.join("outputs.json").is_file(), "{:?}", result.artifacts);
    assert!(timed_log.lines_during_runs >= 10 * inferences as u64, "{timed_log:?}");
    eprintln!("log lines per inference at verbose: {:.1}", timed_log.lines_during_runs as f64 / inferences as f64);
    // ERROR: nothing either.
    let (_, result) = emulate(&dir.path().join("error"), &["--ort-log-level", "error"]);
    assert_eq!(result.execution.timed_log.as_ref().map(|t| t.lines_during_runs), Some(0));
}

#[test]
fn a_compiled_model_is_deterministic_loads_back_under_wine_with_the_same_outputs_and_refuses_another_chip() {
    let dir = tempfile::tempdir().unwrap();
    let qdq = model("smallcnn_qdq.onnx");
    let ctx = dir.path().join("smallcnn_qdq_ctx.onnx");
    let compile =
        |out: &Path| npugate(&["compile", "--soc", "SM8650"], &[Path::new("--model"), &qdq, Path::new("--out"), out]);
    let output = compile(&ctx);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let again = dir.path().join("again_ctx.onnx");
    assert_eq!(compile(&again).status.code(), Some(0));
    assert!(
        std::fs::read(&ctx).unwrap() == std::fs::read(&again).unwrap(),
        "the same model, SoC and runtime give the same bytes"
    );
    let compiled = Model::read(&ctx).unwrap();
    let meta = |key: &str| compiled.metadata(&format!("npugate.compiled_for.{key}")).map(str::to_string);
    assert_eq!(meta("soc").as_deref(), Some("SM8650"));
    assert_eq!(meta("htp_arch").as_deref(), Some("v75"));
    assert_eq!(meta("qnn_sdk").as_deref(), Some("2.51.0"));
    assert!(meta("qnn_backend_build").unwrap().starts_with("v2.51.0."));
    assert_eq!(meta("ort_version").as_deref(), Some("1.31.1"));
    assert_eq!(meta("source_model_sha256").unwrap(), npugate_result::digest::sha256_file(&qdq).unwrap().0);
    assert!(
        compiled.index().nodes().iter().any(|n| n.op_type() == "EPContext"),
        "the context binary is embedded in an EPContext node"
    );

    let emulate = |model: &Path, out: &Path, soc: &str| {
        npugate(
            &[
                "run",
                "--local",
                "--ep",
                "qnn",
                "--soc",
                soc,
                "--runs",
                "2",
                "--warmup",
                "0",
                "--profile-runs",
                "0",
                "--no-reference-pass",
                "--check-outputs",
                "--no-gate",
            ],
            &[Path::new("--model"), model, Path::new("--reference-model"), &qdq, Path::new("--out"), out],
        )
    };
    let (from_source, from_context) = (dir.path().join("source"), dir.path().join("context"));
    for (model, out) in [(&qdq, &from_source), (&ctx, &from_context)] {
        let output = emulate(model, out, "SM8650");
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    }
    let context_result = RunResult::read(&from_context).unwrap();
    assert!(context_result
        .assignment
        .subgraphs
        .iter()
        .any(|s| s.ep == "QNNExecutionProvider" && s.nodes.iter().any(|n| n.op_type == "EPContext")));
    for name in &RunResult::read(&from_source).unwrap().artifacts.outputs {
        assert_eq!(
            std::fs::read(from_source.join(name)).unwrap(),
            std::fs::read(from_context.join(name)).unwrap(),
            "{name} differs"
        );
    }
    // The emulator configured as another chip refuses the context binary, naming both sides.
    let refused = emulate(&ctx, &dir.path().join("v68"), "SM8350");
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(
        stderr(&refused).contains("compiled for SM8650 (v75) with QNN 2.51.0")
            && stderr(&refused).contains("is SM8350 (v68)"),
        "{}",
        describe(&refused)
    );

    // A board whose kernel reads SM8350 (chip id 439) refuses it before anything is pushed.
    let port = 6201;
    let rig = Rig::up_with(&[Device::new(port).soc_id(439)]);
    let devices = run(rig.command(bin("npugate")).args(["devices", "--json"]));
    assert!(String::from_utf8_lossy(&devices.stdout).contains("\"soc\": \"SM8350\""), "{}", describe(&devices));
    let on_device = run(rig
        .command(bin("npugate"))
        .args(["run", "--device", &Rig::serial(port), "--runtime", "ort-1.31.1-linux-x86_64", "--ep", "qnn", "--model"])
        .arg(&ctx)
        .arg("--out")
        .arg(dir.path().join("device")));
    assert_eq!(on_device.status.code(), Some(2), "{}", describe(&on_device));
    let message = stderr(&on_device);
    assert!(message.contains("was compiled for SM8650 (v75) with QNN 2.51.0"), "{message}");
    assert!(message.contains(&format!("device {} is SM8350 (v68)", Rig::serial(port))), "{message}");
    assert!(!rig.device_data(port).join("local/tmp/npugate").exists(), "nothing was pushed");
}

#[test]
fn bad_input_is_one_line_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let unknown = npugate(&["preflight", "--soc", "SM9999"], &[Path::new("--model"), &model("smallcnn.onnx")]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("unknown SoC \"SM9999\"; known: SM8350, QCM6490, SA8295"),
        "{}",
        describe(&unknown)
    );
    let dynamic = npugate(
        &["preflight"],
        &[Path::new("--model"), &model("dynamic.onnx"), Path::new("--out"), &dir.path().join("d")],
    );
    assert_eq!(dynamic.status.code(), Some(2));
    assert!(stderr(&dynamic).contains("pass --shape x=Nx3xNxN"), "{}", describe(&dynamic));
    // A model ONNX Runtime cannot load even on its CPU EP is no SoC's verdict.
    let bad = dir.path().join("unknown_op.onnx");
    let script = "import onnx, sys\nfrom onnx import helper, TensorProto as T\n\
        g = helper.make_graph([helper.make_node('NoSuchOp', ['x'], ['y'], name='n')], 'g', \
        [helper.make_tensor_value_info('x', T.FLOAT, [1, 4])], [helper.make_tensor_value_info('y', T.FLOAT, [1, 4])])\n\
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)], ir_version=8), sys.argv[1])";
    assert!(run(Command::new(python()).args(["-c", script]).arg(&bad)).status.success());
    let refused = npugate(
        &["preflight", "--soc", "SM8650"],
        &[Path::new("--model"), &bad, Path::new("--out"), &dir.path().join("bad")],
    );
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(
        stderr(&refused).contains("cannot load model") && stderr(&refused).contains("unknown_op.onnx"),
        "{}",
        describe(&refused)
    );
    // Without wine on PATH: one line with the setup command, exit 2.
    let no_wine = run(Command::new(bin("npugate"))
        .env("PATH", "/nonexistent")
        .args(["preflight", "--soc", "SM8650", "--model"])
        .arg(model("smallcnn.onnx"))
        .arg("--out")
        .arg(dir.path().join("nowine")));
    assert_eq!(no_wine.status.code(), Some(2), "{}", describe(&no_wine));
    assert!(stderr(&no_wine).contains("wine is not installed; run scripts/setup"), "{}", describe(&no_wine));
}

#[test]
fn a_broken_wine_prefix_is_rebuilt_not_fatal() {
    // A private cache (so the shared prefix is never broken) that sees the fetched runtimes.
    let cache = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(npugate_e2e::cache_dir().join("runtimes"), cache.path().join("runtimes")).unwrap();
    let preflight = |out: &str| {
        npugate_e2e::htp::windows_harness();
        run(Command::new(bin("npugate"))
            .env("NPUGATE_CACHE", cache.path())
            .args(["preflight", "--soc", "SM8650", "--model"])
            .arg(model("smallcnn_qdq.onnx"))
            .arg("--out")
            .arg(cache.path().join(out)))
    };
    let first = preflight("first");
    assert_eq!(first.status.code(), Some(0), "a fresh prefix is created: {}", describe(&first));
    // The first run's wineserver outlives it by seconds and writes the registry back when it exits:
    // damaged before that, the file would be whole again by the second run.
    let server = run(Command::new("wineserver").arg("-w").env("WINEPREFIX", cache.path().join("wine/prefix")));
    assert!(server.status.success(), "{}", describe(&server));
    std::fs::write(cache.path().join("wine/prefix/system.reg"), "damaged").unwrap();
    let second = preflight("second");
    assert_eq!(second.status.code(), Some(0), "{}", describe(&second));
    assert!(stderr(&second).contains("system.reg is missing or damaged); rebuilding it"), "{}", describe(&second));
}

#[test]
fn an_emulated_sweep_over_two_nights_is_judged_on_placement_compile_and_outputs_never_on_host_time() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("sweep.toml");
    let probe = dir.path().join("probe.onnx");
    std::fs::write(
        &plan,
        format!(
            "name = \"htp\"\nsocs = [\"SM8350\", \"SM8650\"]\n[settings]\nruns = 2\nwarmup = 0\nprofile_runs = 1\ncheck_outputs = true\n\
             [[model]]\npath = {:?}\nrules = {{ cv_pct = 8, npu_flops_pct = 98 }}\n\
             [[model]]\npath = \"probe.onnx\"\nrules = {{ npu_flops_pct = 98 }}\n",
            model("smallcnn_qdq.onnx").display().to_string()
        ),
    )
    .unwrap();
    let history = dir.path().join("history.sqlite");
    let sweep = |night: &str| {
        npugate(
            &["sweep", "--night", night],
            &[
                Path::new("--plan"),
                &plan,
                Path::new("--out"),
                &dir.path().join(night),
                Path::new("--history"),
                &history,
            ],
        )
    };
    // Night 1 on a busy host: the probe is a model QNN 2.51 takes whole on v75 and cannot compile for v68.
    std::fs::copy(model("qnn_version_ops.onnx"), &probe).unwrap();
    let busy = npugate_e2e::CpuBurner::start(600);
    let night1 = sweep("2026-11-26");
    drop(busy);
    assert_eq!(night1.status.code(), Some(2), "SM8350 does not compile the probe: {}", describe(&night1));
    let out = dir.path().join("2026-11-26");
    let summary = read_json(&out.join("sweep.json"));
    assert_eq!(summary["runtimes"], serde_json::json!(["qnn-2.7.0-ort-1.31.1-windows-x86_64"]));
    for soc in ["SM8350", "SM8650"] {
        let cell = out.join(format!("htp-{soc}/qnn-2.7.0-ort-1.31.1-windows-x86_64/smallcnn_qdq"));
        let marker = read_json(&cell.join("cell.json"));
        assert_eq!(marker["device"]["soc"], soc, "{marker:#}");
        assert!(marker["emulated"].as_str().is_some_and(|e| e.starts_with("Qualcomm's HTP emulator")), "{marker:#}");
        assert!(marker["outputs"]["sqnr_db"].as_f64().is_none_or(|db| db > 20.0), "{marker:#}");
        let result = RunResult::read(&cell).unwrap();
        assert!(
            result.execution.emulated.is_some() && result.execution.requested_ep == "qnn",
            "{:?}",
            result.execution
        );
        let verdict = read_json(&cell.join("verdict.json"));
        let cv = verdict["checks"].as_array().unwrap().iter().find(|c| c["rule"] == "cv_pct").unwrap();
        assert_eq!(cv["status"], "not_applicable", "{cv:#}");
    }
    let refused = read_json(&out.join("htp-SM8350/qnn-2.7.0-ort-1.31.1-windows-x86_64/probe/cell.json"));
    assert!(
        refused["compile_error"].as_str().is_some_and(|e| e.contains("Failed to finalize QNN graph")),
        "{refused:#}"
    );

    // Night 2 on an idle host: the probe is now a model whose int32 MatMul and Neg the HTP leaves to the CPU.
    std::fs::copy(model("htp_reject.onnx"), &probe).unwrap();
    let night2 = sweep("2026-11-27");
    assert_eq!(night2.status.code(), Some(0), "{}", describe(&night2));

    let history_of = |args: &[&str]| {
        let output = run(Command::new(bin("npugate")).arg("history").arg("--history").arg(&history).args(args));
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        output
    };
    let all: Value = serde_json::from_slice(&history_of(&["--json"]).stdout).unwrap();
    for series in all["series"].as_array().unwrap() {
        assert_eq!(
            (series["emulated"].as_bool(), series["change"]["latency"].as_str()),
            (Some(true), Some("emulated")),
            "{series:#}"
        );
        assert!(
            series["change"].get("median_ratio").is_none() && series["points"][1].get("median_ns").is_none(),
            "{series:#}"
        );
        let host = |night: usize| series["points"][night]["host_median_ns"].as_f64();
        eprintln!(
            "{} on {}: host time {:?} → {:?} ms",
            series["model"],
            series["device"],
            host(0).map(|ns| ns / 1e6),
            host(1).map(|ns| ns / 1e6)
        );
    }
    assert!(all.get("devices").is_none(), "an emulator is no device with a noise floor: {all:#}");
    let report: Value = serde_json::from_slice(&history_of(&["--changed", "--json"]).stdout).unwrap();
    let changed = report["series"].as_array().unwrap();
    assert!(
        changed.iter().all(|s| s["model"] == "probe"),
        "nothing but the probe changed, whatever the host's load: {report:#}"
    );
    let on = |device: &str| {
        &changed.iter().find(|s| s["device"] == device).unwrap_or_else(|| panic!("{device}: {report:#}"))["change"]
    };
    let placement: Vec<&str> =
        on("htp-SM8650")["placement"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert!(placement.contains(&"matmul_int32 (MatMul) moved to CPUExecutionProvider"), "{placement:?}");
    assert_eq!(on("htp-SM8350")["compile"], "not compiled → compiled");
    let text = String::from_utf8_lossy(&history_of(&["--changed"]).stdout).into_owned();
    assert!(
        text.contains("matmul_int32 (MatMul) moved to CPUExecutionProvider") && !text.contains("smallcnn_qdq"),
        "{text}"
    );
    assert!(!text.contains("slower") && !text.contains("faster"), "{text}");

    // The pages, as a browser renders them: no latency chart, the cells by placement, compile and outputs.
    let page = dir.path().join("history.html");
    history_of(&["--html", page.to_str().unwrap()]);
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("htp-sweep");
    for (page, name) in [(dir.path().join("2026-11-27/matrix.html"), "matrix"), (page, "history")] {
        let Some(dom) = npugate_e2e::rendered_dom(&page) else { return };
        assert!(!dom.contains("<svg") && !dom.contains("median latency"), "{name}: a chart of host time: {dom}");
        for label in ["host time ms (not a device latency)", "compiled", "matmul_int32 (MatMul)", "probs "] {
            assert!(dom.contains(label), "{name} lacks {label:?}: {dom}");
        }
        npugate_e2e::screenshot(&page, &keep, name);
    }
}

#[test]
fn a_loop_holding_an_if_gets_one_control_flow_remedy_and_the_node_after_it_no_control_flow_one() {
    // slanet-plus's kind: an If inside a Loop's body, a node after the Loop whose shape the EP
    // cannot know. The Loop said "unroll it", the If "fold the branch", the shape hint a third.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("preflight");
    let output = npugate(
        &["preflight", "--soc", "SM8650"],
        &[Path::new("--model"), &model("loop_with_if.onnx"), Path::new("--out"), &out],
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    let fixes: Vec<&str> = text.lines().filter(|line| line.trim_start().starts_with("fix:")).collect();
    let control_flow: Vec<&&str> = fixes.iter().filter(|fix| fix.contains("unroll") || fix.contains("fold")).collect();
    assert_eq!(control_flow.len(), 1, "one control-flow remedy: {fixes:#?}");
    assert!(control_flow[0].contains(npugate_profile::hints::CONTROL_FLOW_HINT), "{fixes:#?}");
    assert!(text.contains("in the body of decode_loop (6 node(s)):"), "{text}");
    let report = read_json(&out.join("preflight.json"));
    let soc = &report["socs"][0];
    for node in ["decode_loop", "tanh_after_first"] {
        assert_eq!(fallback(soc, node)["hint"], npugate_profile::hints::CONTROL_FLOW_HINT, "{node}");
    }
    assert!(!fallback(soc, "residual")["hint"].as_str().unwrap().contains("control flow is left"), "{soc}");
}

#[test]
fn a_loop_bodys_nodes_are_reported_once_under_the_loop_and_what_every_soc_shares_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("preflight");
    let output = npugate(
        &["preflight", "--soc", "SM8650", "--soc", "SM8350"],
        &[Path::new("--model"), &model("loop_folds_constant.onnx"), Path::new("--out"), &out],
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(text.matches("all SoCs (SM8650 (v75), SM8350 (v68)):").count(), 1, "{text}");
    assert_eq!(text.matches("in the body of steps_loop (4 node(s)):").count(), 1, "{text}");
    assert_eq!(text.matches("step (MatMul)").count(), 1, "each body node once: {text}");
    assert_eq!(text.matches("left to CPU: steps_loop (Loop)").count(), 1, "{text}");
    assert!(!text.contains("\nSM8650 (v75):"), "nothing differs between the SoCs: {text}");
    let report = read_json(&out.join("preflight.json"));
    for soc in report["socs"].as_array().unwrap() {
        let step = fallback(soc, "step");
        assert_eq!(step["inside"], "steps_loop", "{step}");
        assert!(fallback(soc, "steps_loop").get("inside").is_none());
    }
}
