//! QNN versions as an axis, on Qualcomm's host HTP backend under wine with two real QNN versions
//! (onnxruntime-qnn 2.3.0 = QNN 2.47.0 on ONNX Runtime 1.27.0, and 2.7.0 = QNN 2.51.0 on 1.31.1): the preflight matrix SoC × QNN
//! version and what changed between them, the measured context compatibility matrix and the run
//! check built on it, numerics across versions, sweeps and history keyed by QNN build; and
//! preflight that executes (issue 24 item 6): an op that compiles and fails at run time, failed
//! jobs that keep their directories, the CPU reference job's real error, `--input`, and one
//! default folder per preflight backend.

use std::path::Path;
use std::process::Command;

use npugate_e2e::htp::{harness_under_wine, npugate, preflight, second_qnn_version, soc, HTP_RUNTIME, HTP_RUNTIME_OLD};
use npugate_e2e::{bin, describe, model, python, run};
use npugate_onnx::Model;
use npugate_result::RunResult;
use serde_json::Value;

const OLD: &str = "2.47.0";
const NEW: &str = "2.51.0";

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .expect("valid JSON")
}

/// The verdict of `soc` under QNN `qnn` in a preflight report.
fn verdict<'a>(report: &'a Value, soc: &str, qnn: &str) -> &'a Value {
    report["socs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["soc"] == soc && s["qnn_sdk"] == qnn)
        .unwrap_or_else(|| panic!("no {soc} × QNN {qnn} in {report:#}"))
}

#[test]
fn a_preflight_matrix_over_two_qnn_versions_on_two_socs_names_what_changed() {
    second_qnn_version();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let ops = model("qnn_version_ops.onnx");
    let output = npugate(
        &["preflight", "--json", "--qnn", OLD, "--qnn", NEW, "--soc", "SM8350", "--soc", "SM8650"],
        &[Path::new("--model"), &ops, Path::new("--out"), &out],
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["schema"], "npugate.htp-preflight/2");
    // Each version's build is read from its own QnnHtp.dll.
    let versions: Vec<(&str, &str, &str)> = report["qnn"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| (q["sdk"].as_str().unwrap(), q["build"].as_str().unwrap(), q["runtime"].as_str().unwrap()))
        .collect();
    assert_eq!(versions.len(), 2, "{report:#}");
    assert_eq!((versions[0].0, versions[0].2), (OLD, HTP_RUNTIME_OLD));
    assert_eq!((versions[1].0, versions[1].2), (NEW, HTP_RUNTIME));
    assert!(versions[0].1.starts_with("v2.47.0.") && versions[1].1.starts_with("v2.51.0."), "{versions:?}");
    assert_eq!(report["socs"].as_array().unwrap().len(), 4, "SoC × QNN version");
    // QNN 2.47.0's EP leaves LpPool to the CPU on both chips; the HTP compiles GridSample for v68 there.
    for soc in ["SM8350", "SM8650"] {
        let old = verdict(&report, soc, OLD);
        assert_eq!(
            (old["outcome"].as_str(), old["compiled"].as_bool(), old["executed"].as_bool()),
            (Some("fail"), Some(true), Some(true)),
            "{old:#}"
        );
        let lppool = &old["fallback"].as_array().unwrap()[0];
        assert_eq!((lppool["name"].as_str(), lppool["op_type"].as_str()), (Some("lppool"), Some("LpPool")), "{old:#}");
        // One result directory per SoC and version, each with the harness's result for that version.
        let result = RunResult::read(Path::new(old["result_dir"].as_str().unwrap())).unwrap();
        assert_eq!(
            (result.runtime.name.as_deref(), result.runtime.ort_version.as_str()),
            (Some(HTP_RUNTIME_OLD), "1.27.0")
        );
    }
    // QNN 2.51.0 takes LpPool; it compiles the whole graph for v75 and no longer compiles GridSample for v68.
    let v75 = verdict(&report, "SM8650", NEW);
    assert_eq!(
        (v75["outcome"].as_str(), v75["nodes_pct"].as_f64(), v75["executed"].as_bool()),
        (Some("pass"), Some(100.0), Some(true)),
        "{v75:#}"
    );
    let v68 = verdict(&report, "SM8350", NEW);
    assert_eq!((v68["outcome"].as_str(), v68["compiled"].as_bool()), (Some("fail"), Some(false)), "{v68:#}");
    assert!(
        v68["error"].as_str().unwrap().contains("cannot compile for SM8350 (v68)")
            && v68["error"].as_str().unwrap().contains("GridSample"),
        "{v68:#}"
    );
    assert!(
        out.join(format!("SM8650-qnn-{OLD}/result.json")).is_file()
            && out.join(format!("SM8350-qnn-{NEW}/ort.log")).is_file()
    );
    // What changed between the versions, per SoC, with the earlier version's reason for what the later one took.
    let change = |soc: &str| {
        report["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["soc"] == soc)
            .cloned()
            .unwrap_or_else(|| panic!("{soc}: {report:#}"))
    };
    let v75 = change("SM8650");
    assert_eq!(
        (v75["from_qnn"].as_str(), v75["to_qnn"].as_str(), v75["outcome"].as_str()),
        (Some(OLD), Some(NEW), Some("FAIL → PASS")),
        "{v75:#}"
    );
    assert_eq!(v75["newly_accepted"][0]["name"], "lppool");
    assert!(
        v75["newly_accepted"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("Operators of type `LpPool` are not supported by QNN EP"),
        "{v75:#}"
    );
    let v68 = change("SM8350");
    assert_eq!((v68["compiled"].as_str(), v68["outcome"].as_str()), (Some("compiled → not compiled"), None), "{v68:#}");
    // The terminal report: one row per SoC, one column per version, and what changed below it.
    let text = npugate(
        &["preflight", "--qnn", OLD, "--qnn", NEW, "--soc", "SM8350", "--soc", "SM8650"],
        &[Path::new("--model"), &ops, Path::new("--out"), &dir.path().join("text")],
    );
    let printed = stdout(&text);
    assert!(
        printed.contains(&format!("QNN {OLD}: OUTCOME NODES / FLOPS ON HTP  QNN {NEW}: OUTCOME NODES / FLOPS ON HTP")),
        "{printed}"
    );
    // Two model nodes, LpPool left to the CPU: half of the nodes (the layout Transposes ONNX Runtime
    // inserts for the HTP are not the model's and are not counted).
    assert!(printed.contains("SM8350  v68   FAIL compiled 50.0% / "), "{printed}");
    // GridSample has no FLOPs formula: the shares say what they are of.
    assert!(
        printed.contains("FLOPS ON HTP is a share of the counted FLOPs, ")
            && printed.contains("% of the model's (FLOPs unknown for 1 node(s)"),
        "{printed}"
    );
    assert!(printed.contains(&format!("what changed from QNN {OLD} to QNN {NEW}:\n")), "{printed}");
    assert!(printed.contains("  SM8350: compile compiled → not compiled"), "{printed}");
    assert!(printed.contains(&format!("    newly accepted by {NEW} (rejected by {OLD}): lppool (LpPool): Operators of type `LpPool` are not supported")), "{printed}");
}

#[test]
fn an_unknown_qnn_version_lists_the_available_ones() {
    second_qnn_version();
    for command in [
        &["preflight"][..],
        &["compile", "--soc", "SM8650"],
        &["run", "--local", "--ep", "qnn"],
        &["numerics", "--ep", "qnn", "--soc", "SM8650"],
    ] {
        let mut args = command.to_vec();
        args.extend(["--qnn", "2.99"]);
        let output = npugate(&args, &[Path::new("--model"), &model("smallcnn_qdq.onnx")]);
        assert_eq!(output.status.code(), Some(2), "{command:?}: {}", describe(&output));
        let error = stderr(&output);
        assert!(
            error.contains("--qnn 2.99: no runtime with QNN 2.99 is fetched for x86_64-pc-windows-gnu: "),
            "{command:?}: {error}"
        );
        // The versions there are: the fetched ones (the two the tests use at least), then the catalog's others with their fetch command.
        let listed = error.split_once("x86_64-pc-windows-gnu: ").map(|(_, rest)| rest).unwrap_or_default();
        assert!(listed.contains(OLD) && listed.contains(NEW), "{error}");
        let known = ["2.47.0", "2.48.40", "2.49.40", "2.50.40", "2.51.0"];
        assert!(
            known.iter().all(|v| listed.contains(v)),
            "every catalog version is named, fetched or with its fetch command: {error}"
        );
        assert_eq!(error.lines().filter(|l| !l.trim().is_empty()).count(), 1, "one line: {error}");
    }
}

#[test]
fn context_compatibility_is_measured_matches_a_direct_load_and_guards_runs() {
    second_qnn_version();
    let dir = tempfile::tempdir().unwrap();
    let qdq = model("smallcnn_qdq.onnx");
    let compile = npugate(
        &["compile", "--soc", "SM8650", "--qnn", OLD, "--qnn", NEW],
        &[Path::new("--model"), &qdq, Path::new("--out"), dir.path()],
    );
    assert_eq!(compile.status.code(), Some(0), "{}", describe(&compile));
    let (old_ctx, new_ctx) = (
        dir.path().join(format!("smallcnn_qdq_qnn{OLD}_ctx.onnx")),
        dir.path().join(format!("smallcnn_qdq_qnn{NEW}_ctx.onnx")),
    );
    for (ctx, qnn) in [(&old_ctx, OLD), (&new_ctx, NEW)] {
        let compiled = Model::read(ctx).unwrap();
        assert_eq!(compiled.metadata("npugate.compiled_for.qnn_sdk"), Some(qnn));
        // The record item 1 needs: which source nodes the EPContext node stands for, and the source's digest.
        let covers: Value =
            serde_json::from_str(compiled.metadata("npugate.compiled_for.ep_context_nodes").unwrap()).unwrap();
        let context_node =
            compiled.index().nodes().iter().find(|n| n.op_type() == "EPContext").map(|n| n.name().to_string()).unwrap();
        assert_eq!(covers[0]["ep_context"], context_node.as_str(), "{covers:#}");
        let covered: Vec<&str> =
            covers[0]["source_nodes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        assert!(covered.contains(&"conv1") && covered.contains(&"fc") && covered.contains(&"softmax"), "{covered:?}");
        let source = Model::read(&qdq).unwrap();
        let source_names: Vec<&str> = source.index().nodes().iter().map(|n| n.name()).collect();
        assert!(
            covered.iter().all(|n| source_names.contains(n)),
            "only the source model's own nodes, none ORT inserted: {covered:?}"
        );
        assert!(
            !covered.contains(&"input_QuantizeLinear"),
            "the graph input's quantization stays on the CPU: {covered:?}"
        );
        assert_eq!(
            compiled.metadata("npugate.compiled_for.source_model_digest").unwrap(),
            npugate_result::digest::sha256_file(&qdq).unwrap().0
        );
    }
    let matrix = read_json(&dir.path().join("smallcnn_qdq.context-compat/context_compat.json"));
    assert_eq!(matrix["schema"], "npugate.context-compat/1");
    assert!(
        matrix["measured_by"][0]
            .as_str()
            .unwrap()
            .starts_with(&format!("npugate compile --soc SM8650 --qnn {OLD} --qnn {NEW}")),
        "{matrix:#}"
    );
    let pair = |compiled: &str, loaded: &str| {
        matrix["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["compiled_with"] == compiled && p["loaded_with"] == loaded)
            .cloned()
            .unwrap()
    };
    assert_eq!(pair(OLD, OLD)["outcome"], "runs");
    assert_eq!(pair(NEW, NEW)["outcome"], "runs");
    assert_eq!(pair(OLD, NEW)["outcome"], "runs", "a newer QNN loads an older context: {matrix:#}");
    let refused = pair(NEW, OLD);
    assert_eq!(refused["outcome"], "refused", "{matrix:#}");
    let error = refused["error"].as_str().unwrap();
    assert!(
        error.contains("QNN_CONTEXT_ERROR_INVALID_ARGUMENT")
            && error.contains("QNN: Using newer context binary on old SDK"),
        "{error}"
    );
    assert!(
        stdout(&compile).contains(&format!("SM8650: COMPILED WITH ↓ LOADED WITH →  QNN {OLD}")),
        "{}",
        stdout(&compile)
    );

    // A direct load, without npugate's checks, does the same.
    let direct = harness_under_wine(
        HTP_RUNTIME_OLD,
        &new_ctx,
        &dir.path().join("direct-refused"),
        &["--soc-model", "57", "--session-only"],
    );
    assert_eq!(direct.status.code(), Some(2), "{}", describe(&direct));
    assert!(stderr(&direct).contains("QNN_CONTEXT_ERROR_INVALID_ARGUMENT"), "{}", describe(&direct));
    let direct = harness_under_wine(
        HTP_RUNTIME,
        &old_ctx,
        &dir.path().join("direct-loads"),
        &["--soc-model", "57", "--session-only", "--execute-once"],
    );
    assert_eq!(direct.status.code(), Some(0), "{}", describe(&direct));

    // npugate run applies the measured rule: the refused pair is refused before anything runs, naming both versions and the fix ...
    let emulate = |ctx: &Path, qnn: &str, out: &Path| {
        npugate(
            &[
                "run",
                "--local",
                "--ep",
                "qnn",
                "--soc",
                "SM8650",
                "--qnn",
                qnn,
                "--runs",
                "2",
                "--warmup",
                "0",
                "--profile-runs",
                "0",
                "--no-reference-pass",
                "--no-gate",
            ],
            &[Path::new("--model"), ctx, Path::new("--out"), out],
        )
    };
    let out = dir.path().join("refused-run");
    let refused = emulate(&new_ctx, OLD, &out);
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    let message = stderr(&refused);
    assert!(
        message.contains("compiled for SM8650 (v75) with QNN 2.51.0")
            && message.contains(&format!("runtime {HTP_RUNTIME_OLD} has QNN {OLD}")),
        "{message}"
    );
    assert!(
        message.contains(&format!("is refused on QNN {OLD}")) && message.contains("QNN_CONTEXT_ERROR_INVALID_ARGUMENT"),
        "{message}"
    );
    assert!(
        message.contains("--qnn 2.51.0") && message.contains(&format!("npugate compile --qnn {OLD} --soc SM8650")),
        "{message}"
    );
    assert!(
        !out.exists()
            && std::fs::read_dir(dir.path()).unwrap().all(|e| !e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".refused-run")),
        "nothing ran"
    );
    // ... and the pair measured to load runs, without a warning.
    let loads = emulate(&old_ctx, NEW, &dir.path().join("loads-run"));
    assert_eq!(loads.status.code(), Some(0), "{}", describe(&loads));
    assert!(!stderr(&loads).contains("warning"), "{}", describe(&loads));
}

#[test]
fn numerics_names_where_two_qnn_versions_outputs_first_differ() {
    second_qnn_version();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("numerics");
    let output = npugate(
        &["numerics", "--ep", "qnn", "--soc", "SM8650", "--qnn", OLD, "--qnn", NEW, "--json"],
        &[Path::new("--model"), &model("smallcnn.onnx"), Path::new("--out"), &out],
    );
    assert!(matches!(output.status.code(), Some(0 | 1)), "{}", describe(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = report["targets"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, [format!("SM8650-qnn-{OLD}"), format!("SM8650-qnn-{NEW}")]);
    let pairs = report["between_targets"].as_array().unwrap();
    assert_eq!(pairs.len(), 1, "{report:#}");
    let pair = &pairs[0];
    assert_eq!((pair["from"].as_str(), pair["to"].as_str()), (Some(names[0]), Some(names[1])));
    let compared = pair["compared_layers"].as_u64().unwrap();
    assert_eq!(compared as usize, report["layers"].as_array().unwrap().len(), "every layer compared: {pair:#}");
    // Independently: the two runs' saved tensors, byte for byte.
    let saved = |target: &str| {
        let dir = out.join(target);
        let result = RunResult::read(&dir).unwrap();
        result.artifacts.outputs.iter().map(|file| std::fs::read(dir.join(file)).unwrap()).collect::<Vec<_>>()
    };
    let (old_tensors, new_tensors) = (saved(names[0]), saved(names[1]));
    assert_eq!(old_tensors.len(), new_tensors.len());
    let all_identical = old_tensors == new_tensors;
    assert_eq!(pair["first_difference"].is_null(), all_identical, "{pair:#}");
    assert_eq!(pair["identical_layers"].as_u64() == Some(compared), all_identical, "{pair:#}");
    if let Some(first) = pair["first_difference"].as_object() {
        let tensor = first["tensor"].as_str().unwrap();
        let position = report["layers"].as_array().unwrap().iter().position(|l| l["tensor"] == tensor).unwrap();
        assert!(position < compared as usize);
    }
    let text = npugate(
        &["numerics", "--ep", "qnn", "--soc", "SM8650", "--qnn", OLD, "--qnn", NEW],
        &[Path::new("--model"), &model("smallcnn.onnx"), Path::new("--out"), &dir.path().join("text")],
    );
    assert!(
        stdout(&text).contains(&format!("between targets: SM8650-qnn-{NEW} against SM8650-qnn-{OLD}: ")),
        "{}",
        describe(&text)
    );
}

#[test]
fn an_op_that_compiles_and_fails_at_run_time_fails_preflight_with_qnns_error_and_keeps_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let nonzero = model("htp_nonzero.onnx");
    let (output, report) = preflight(&nonzero, &["SM8650"], &dir.path().join("out"));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let v75 = soc(&report, "SM8650");
    assert_eq!(
        (v75["outcome"].as_str(), v75["compiled"].as_bool(), v75["executed"].as_bool()),
        (Some("fail"), Some(true), Some(false)),
        "{v75:#}"
    );
    assert_eq!(v75["nodes_pct"].as_f64(), Some(100.0), "the HTP took every node");
    let error = v75["error"].as_str().unwrap();
    assert!(error.starts_with("compiled for SM8650 (v75), but the first emulated inference failed: "), "{error}");
    assert!(error.contains("ORT Tensor data size does not match QNN tensor data size"), "QNN's own words: {error}");
    // The failed job keeps its directory: the result with the error, ORT's log and the harness's stderr.
    let job = Path::new(v75["result_dir"].as_str().unwrap());
    let result = RunResult::read(job).unwrap();
    assert!(
        result.inference_error.as_deref().unwrap().contains("ORT Tensor data size does not match QNN tensor data size"),
        "{result:?}"
    );
    assert!(result.error.is_some() && result.session_error.is_none());
    assert!(std::fs::read_to_string(job.join("ort.log"))
        .unwrap()
        .contains("ORT Tensor data size does not match QNN tensor data size"));
    assert!(std::fs::read_to_string(job.join("harness.stderr")).unwrap().contains("its first inference failed"));
    let text = npugate(
        &["preflight", "--soc", "SM8650"],
        &[Path::new("--model"), &nonzero, Path::new("--out"), &dir.path().join("text")],
    );
    assert!(stdout(&text).contains("SM8650  v75   FAIL     yes       FAILED"), "{}", describe(&text));
    // Validation and compile alone pass it: what the preflight without execution used to say.
    let compiled_only = npugate(
        &["preflight", "--soc", "SM8650", "--no-execute"],
        &[Path::new("--model"), &nonzero, Path::new("--out"), &dir.path().join("noexec")],
    );
    assert_eq!(compiled_only.status.code(), Some(0), "{}", describe(&compiled_only));
}

#[test]
fn a_failed_cpu_reference_job_says_why_and_input_feeds_the_preflight() {
    let dir = tempfile::tempdir().unwrap();
    let cumsum = model("cumsum_axis_input.onnx");
    let (output, report) = preflight(&cumsum, &["SM8650"], &dir.path().join("random"));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let warning = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .find(|w| w.starts_with("FLOPs are unknown"))
        .unwrap();
    assert!(
        warning.contains("the CPU reference job failed: ") && warning.contains("axis 1 is not in valid range"),
        "ONNX Runtime's words: {warning}"
    );
    let kept = warning.rsplit_once("its result directory: ").map(|(_, dir)| dir.trim_end_matches(')')).unwrap();
    assert!(
        RunResult::read(Path::new(kept)).unwrap().error.unwrap().contains("axis 1 is not in valid range"),
        "the failed job kept its result"
    );
    assert!(soc(&report, "SM8650")["error"].as_str().unwrap().contains("axis 1 is not in valid range"), "{report:#}");
    // The same model with a real axis: the inputs reach both the CPU reference job and the HTP's inference.
    let axis = dir.path().join("axis.npy");
    let script = "import numpy, sys\nnumpy.save(sys.argv[1], numpy.array(0, dtype=numpy.int32))";
    assert!(run(Command::new(python()).args(["-c", script]).arg(&axis)).status.success());
    let given = npugate(
        &["preflight", "--json", "--soc", "SM8650"],
        &[
            Path::new("--model"),
            &cumsum,
            Path::new("--out"),
            &dir.path().join("given"),
            Path::new("--input"),
            Path::new(&format!("axis={}", axis.display())),
        ],
    );
    let report: Value = serde_json::from_slice(&given.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&given)));
    assert!(report["warnings"].as_array().unwrap().is_empty(), "FLOPs known: {report:#}");
    let v75 = soc(&report, "SM8650");
    assert_eq!(v75["executed"].as_bool(), Some(true), "{v75:#}");
    // CumSum's axis is an input, not a constant: the HTP leaves it to the CPU with its reason.
    assert!(
        v75["fallback"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"] == "cumsum" && f["reason"].as_str().unwrap().contains("must be a constant")),
        "{v75:#}"
    );
    assert!(v75["flops_pct"].as_f64().is_some());
}

#[test]
fn each_preflight_backend_has_its_own_default_folder() {
    let work = tempfile::tempdir().unwrap();
    let smallcnn = model("smallcnn.onnx");
    npugate_e2e::htp::windows_harness();
    let htp = run(Command::new(bin("npugate"))
        .current_dir(work.path())
        .args(["preflight", "--soc", "SM8650", "--model"])
        .arg(&smallcnn));
    assert_eq!(htp.status.code(), Some(0), "{}", describe(&htp));
    let openvino = run(Command::new(bin("npugate"))
        .current_dir(work.path())
        .args(["preflight", "--ep", "openvino", "--model"])
        .arg(&smallcnn));
    assert_eq!(
        openvino.status.code(),
        Some(0),
        "no collision with the HTP preflight's folder: {}",
        describe(&openvino)
    );
    let results = work.path().join("npugate-results/smallcnn");
    assert!(
        results.join("preflight/preflight.json").is_file() && results.join("preflight/SM8650/result.json").is_file()
    );
    assert!(results.join("preflight-openvino/placement.json").is_file());
}

/// A runtime directory named `name` holding `runtime`'s files (hard links) and its manifest renamed:
/// the same runtime name with another QNN inside, as when a lab re-imports its device runtime.
fn runtime_as(runtime: &str, name: &str, dir: &Path) {
    let source = npugate_e2e::cache_dir().join("runtimes").join(runtime);
    if dir.exists() {
        std::fs::remove_dir_all(dir).unwrap();
    }
    std::fs::create_dir_all(dir).unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "runtime.json" {
            std::fs::hard_link(entry.path(), dir.join(entry.file_name())).unwrap();
        }
    }
    let mut manifest = read_json(&source.join("runtime.json"));
    manifest["name"] = name.into();
    std::fs::write(dir.join("runtime.json"), serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
}

#[test]
fn a_sweep_with_two_qnn_versions_keys_cells_by_qnn_build_and_the_history_names_the_axis_that_changed() {
    second_qnn_version();
    let work = tempfile::tempdir().unwrap();
    let history = work.path().join("history.sqlite");
    let qdq = model("smallcnn_qdq.onnx");
    let settings = "[settings]\nruns = 2\nwarmup = 0\nprofile_runs = 1\n";
    let model_entry =
        format!("[[model]]\npath = {:?}\nrules = {{ cv_pct = 8, npu_flops_pct = 98 }}\n", qdq.display().to_string());
    let sweep = |plan: &Path, out: &Path, night: &str| {
        npugate(
            &["sweep", "--night", night],
            &[Path::new("--plan"), plan, Path::new("--out"), out, Path::new("--history"), &history],
        )
    };
    // One night, two QNN versions: one runtime column per version.
    let plan = work.path().join("versions.toml");
    std::fs::write(
        &plan,
        format!("name = \"versions\"\nsocs = [\"SM8650\"]\nqnn = [\"{OLD}\", \"{NEW}\"]\n{settings}{model_entry}"),
    )
    .unwrap();
    let out = work.path().join("versions");
    let output = sweep(&plan, &out, "2026-11-20");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let summary = read_json(&out.join("sweep.json"));
    assert_eq!(
        summary["runtimes"],
        serde_json::json!([HTP_RUNTIME_OLD, HTP_RUNTIME]),
        "one runtime column per QNN version, in the plan's order"
    );
    for (runtime, build) in [(HTP_RUNTIME_OLD, "v2.47.0."), (HTP_RUNTIME, "v2.51.0.")] {
        let cell = read_json(&out.join(format!("htp-SM8650/{runtime}/smallcnn_qdq/cell.json")));
        assert!(cell["qnn_build"].as_str().unwrap().starts_with(build), "{cell:#}");
        assert_eq!(cell["device"]["soc"], "SM8650");
    }
    // Two nights of one cell whose runtime got another QNN inside: the history names the axis.
    let runtime = work.path().join("qnn-lab");
    let plan = work.path().join("lab.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"lab\"\nsocs = [\"SM8650\"]\nhtp_runtime = {:?}\n{settings}{model_entry}",
            runtime.display().to_string()
        ),
    )
    .unwrap();
    for (night, with) in [("2026-11-21", HTP_RUNTIME_OLD), ("2026-11-22", HTP_RUNTIME)] {
        runtime_as(with, "qnn-lab", &runtime);
        let output = sweep(&plan, &work.path().join(night), night);
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    }
    let trends = run(Command::new(bin("npugate"))
        .args(["history", "--json", "--model", "smallcnn_qdq", "--runtime", "qnn-lab", "--history"])
        .arg(&history));
    let report: Value = serde_json::from_slice(&trends.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&trends)));
    let series = &report["series"][0];
    let builds: Vec<&str> =
        series["points"].as_array().unwrap().iter().map(|p| p["axes"]["qnn_build"].as_str().unwrap()).collect();
    assert!(builds.len() == 2 && builds[0].starts_with("v2.47.0.") && builds[1].starts_with("v2.51.0."), "{series:#}");
    // The runtime's QNN came with another ONNX Runtime core (2.3.0's plugin needs 1.27.0): both axes are named, nothing else.
    let axes: Vec<&str> = series["change"]["axes"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(axes.len(), 2, "{axes:?}");
    assert!(axes[0].starts_with("QNN build v2.47.0.") && axes[0].contains(" → v2.51.0."), "{axes:?}");
    assert_eq!(axes[1], "ONNX Runtime 1.27.0 → 1.31.1");
    let text = run(Command::new(bin("npugate"))
        .args(["history", "--model", "smallcnn_qdq", "--runtime", "qnn-lab", "--history"])
        .arg(&history));
    assert!(stdout(&text).contains("changed: QNN build v2.47.0."), "{}", describe(&text));
    let matrix = std::fs::read_to_string(work.path().join("2026-11-22/matrix.md")).unwrap();
    assert!(matrix.contains("changed: QNN build v2.47.0."), "the matrix's trend names it too: {matrix}");
}

#[test]
fn an_ep_plugin_that_onnx_runtime_refuses_is_named_as_such_never_as_a_dead_backend() {
    second_qnn_version();
    let dir = tempfile::tempdir().unwrap();
    // onnxruntime-qnn 2.3.0's plugin with ONNX Runtime 1.31.1, which refuses it (the catalog pairs it with 1.27.0).
    let runtime = dir.path().join("qnn-2.3.0-ort-1.31.1");
    runtime_as(HTP_RUNTIME_OLD, "qnn-2.3.0-ort-1.31.1", &runtime);
    for core in ["onnxruntime.dll", "onnxruntime_providers_shared.dll"] {
        std::fs::remove_file(runtime.join(core)).unwrap();
        std::fs::hard_link(npugate_e2e::runtime_file(HTP_RUNTIME, core), runtime.join(core)).unwrap();
    }
    let mut manifest = read_json(&runtime.join("runtime.json"));
    manifest["ort_version"] = "1.31.1".into();
    std::fs::write(runtime.join("runtime.json"), serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    let qdq = model("smallcnn_qdq.onnx");
    let output = npugate(
        &["preflight", "--json", "--soc", "SM8650", "--runtime", runtime.to_str().unwrap()],
        &[Path::new("--model"), &qdq, Path::new("--out"), &dir.path().join("preflight")],
    );
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&output)));
    let error = soc(&report, "SM8650")["error"].as_str().unwrap();
    assert!(error.starts_with("could not judge: ONNX Runtime 1.31.1 refused the EP plugin onnxruntime_providers_qnn.dll of runtime qnn-2.3.0-ort-1.31.1"), "{error}");
    assert!(
        error.contains("OrtEp has invalid ort_version_supported=0 (expected at least 22)")
            && error.contains(&format!("use runtime {HTP_RUNTIME_OLD}")),
        "{error}"
    );
    assert!(!error.contains("did not start"), "{error}");
    let compile = npugate(
        &["compile", "--soc", "SM8650", "--runtime", runtime.to_str().unwrap()],
        &[Path::new("--model"), &qdq, Path::new("--out"), &dir.path().join("ctx.onnx")],
    );
    assert_eq!(compile.status.code(), Some(2), "{}", describe(&compile));
    assert!(
        stderr(&compile).contains("nothing was compiled: ONNX Runtime 1.31.1 refused the EP plugin"),
        "{}",
        describe(&compile)
    );
}
