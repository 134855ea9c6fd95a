//! The harness against real ONNX Runtime 1.31.1 on real models: what result.json holds, and how
//! every kind of bad input is refused (exit 2, one clear line, no result presented as complete).

use std::path::{Path, PathBuf};
use std::process::Command;

use npugate_e2e::{bin, describe, harness, model, python, run};
use npugate_result::{files, RunResult, RunStatus};

/// Node names of the model's graph, read with the `onnx` Python package.
fn graph_node_names(model: &Path) -> Vec<String> {
    let output = run(Command::new(python())
        .args(["-c", "import json, sys, onnx; print(json.dumps([n.name for n in onnx.load(sys.argv[1]).graph.node]))"])
        .arg(model));
    assert!(output.status.success(), "{}", describe(&output));
    serde_json::from_slice(&output.stdout).expect("node names JSON")
}

fn check_real_run(model_name: &str, runs: u32) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let model = model(model_name);
    let output = harness(&model, &out, &["--runs", &runs.to_string(), "--warmup", "2", "--profile-runs", "3"]);
    assert!(output.status.success(), "{}", describe(&output));

    let result = RunResult::read(&out).expect("result.json");
    assert_eq!(result.status, RunStatus::Complete);
    let taken = npugate_e2e::runs_taken(&result, runs as usize);
    assert_eq!(result.timings.latencies_ns.len(), taken, "exactly one latency per timed run");
    assert!(result.timings.latencies_ns.iter().all(|&ns| ns > 0), "all latencies positive");
    assert!(result.timings.session_create_ns > 0 && result.timings.first_inference_ns > 0);
    assert!(result.timings.loop_wall_ns >= result.timings.latencies_ns.iter().sum::<u64>());
    assert_eq!(result.histogram.as_ref().map(|h| h.count), Some(taken as u64));
    assert_eq!(result.runtime.ort_version, "1.31.1");
    let ort = &result.runtime.libraries[0];
    assert_eq!(ort.role, "ort");
    assert_eq!(ort.sha256.len(), 64);
    assert_eq!(result.model.sha256.len(), 64);
    assert!(!result.fingerprint.arch.is_empty() && result.fingerprint.logical_cores > 0);
    assert_eq!(result.inputs.len(), result.model.inputs.len());

    // The assignment lists every node of the session's graph, each on the CPU EP here.
    assert_eq!(result.assignment.source, "Session_GetEpGraphAssignmentInfo", "{:?}", result.assignment.error);
    let mut assigned: Vec<String> =
        result.assignment.subgraphs.iter().flat_map(|s| s.nodes.iter().map(|n| n.name.clone())).collect();
    assert!(result.assignment.subgraphs.iter().all(|s| s.ep == "CPUExecutionProvider"));
    let mut graph = graph_node_names(&model);
    assigned.sort();
    graph.sort();
    assert_eq!(assigned, graph, "assignment covers exactly the graph's nodes");

    for artifact in [files::PROFILE, files::REFERENCE_PROFILE, files::ORT_LOG] {
        let path = out.join(artifact);
        assert!(path.metadata().map(|m| m.len() > 0).unwrap_or(false), "{} written", path.display());
    }
    // The timed session logged at an app's level; the log holds the VERBOSE profiled session, and
    // no line of the timed one below WARNING.
    // Nothing per inference: a line the session's creation logged may reach the file after the
    // loop started (seen once in a clean-clone CI run), never one per run.
    let timed_log = result.execution.timed_log.as_ref().expect("timed_log");
    assert_eq!(timed_log.level, "warning", "{timed_log:?}");
    assert!(timed_log.lines_during_runs < u64::from(runs / 2), "{timed_log:?}");
    let log = std::fs::read_to_string(out.join(files::ORT_LOG)).unwrap();
    assert!(log.contains("[V:onnxruntime:profiled"), "the profiled session logs VERBOSE");
    assert!(
        !log.contains("[V:onnxruntime:timed") && !log.contains("[I:onnxruntime:timed"),
        "the timed session logs WARNING and above only"
    );
}

#[test]
fn float_model_result_holds_exactly_n_positive_latencies_and_every_node() {
    check_real_run("smallcnn.onnx", 25);
}

#[test]
fn qdq_quantized_model_result_holds_exactly_n_positive_latencies_and_every_node() {
    check_real_run("smallcnn_qdq.onnx", 12);
}

#[test]
fn same_seed_gives_same_inputs_and_npy_input_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let model = model("smallcnn.onnx");
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    for out in [&a, &b] {
        let output = harness(&model, out, &["--runs", "1", "--profile-runs", "0", "--no-reference-pass"]);
        assert!(output.status.success(), "{}", describe(&output));
    }
    let (ra, rb) = (RunResult::read(&a).unwrap(), RunResult::read(&b).unwrap());
    assert_eq!(ra.inputs[0].sha256, rb.inputs[0].sha256, "fixed seed, same inputs");
    assert!(ra.artifacts.profile.is_none() && !a.join(files::PROFILE).exists());

    let npy = write_npy(dir.path(), "float32", "(1, 3, 64, 64)");
    let c = dir.path().join("c");
    let input = format!("{}={}", ra.inputs[0].name, npy.display());
    let output = harness(&model, &c, &["--runs", "1", "--profile-runs", "0", "--no-reference-pass", "--input", &input]);
    assert!(output.status.success(), "{}", describe(&output));
    let rc = RunResult::read(&c).unwrap();
    assert!(rc.inputs[0].source.starts_with("npy:"), "{:?}", rc.inputs[0].source);
    assert_ne!(rc.inputs[0].sha256, ra.inputs[0].sha256);
}

#[test]
fn dynamic_input_needs_shape_and_runs_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = model("dynamic.onnx");
    let refused = harness(&model, &dir.path().join("a"), &["--runs", "1"]);
    expect_refusal(&refused, &dir.path().join("a"), "--shape x=");
    let out = dir.path().join("b");
    let output = harness(&model, &out, &["--runs", "2", "--shape", "x=2x3x32x48", "--profile-runs", "1"]);
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(RunResult::read(&out).unwrap().inputs[0].shape, vec![2, 3, 32, 48]);
}

/// Writes a seeded array of `dtype` and `shape` (Python tuple syntax) to an .npy file.
fn write_npy(dir: &Path, dtype: &str, shape: &str) -> PathBuf {
    let path = dir.join(format!("input-{dtype}-{}.npy", shape.replace([' ', '(', ')', ','], "_")));
    let script = format!(
        "import numpy as np; np.save({:?}, np.random.default_rng(1).random({shape}).astype({dtype:?}))",
        path.display().to_string()
    );
    let output = run(Command::new(python()).args(["-c", &script]));
    assert!(output.status.success(), "{}", describe(&output));
    path
}

/// Exit code 2, one error line naming what is wrong, and no result.json.
fn expect_refusal(output: &std::process::Output, out: &Path, needle: &str) {
    assert_eq!(output.status.code(), Some(2), "{}", describe(output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(needle), "stderr should mention {needle:?}: {}", describe(output));
    assert!(!stderr.contains("panicked"), "{}", describe(output));
    assert!(!out.join(files::RESULT).exists(), "no result.json after a refused run");
}

#[test]
fn bad_models_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let missing = dir.path().join("missing.onnx");
    expect_refusal(&harness(&missing, &out, &[]), &out, "missing.onnx");

    expect_refusal(&harness(dir.path(), &out, &[]), &out, "is a directory");

    let empty = dir.path().join("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    expect_refusal(&harness(&empty, &out, &[]), &out, "is empty");

    let corrupt = dir.path().join("corrupt.onnx");
    std::fs::write(&corrupt, b"this is not a protobuf \x00\x01\x02 model at all").unwrap();
    expect_refusal(&harness(&corrupt, &out, &[]), &out, "corrupt.onnx");

    let real = std::fs::read(model("smallcnn.onnx")).unwrap();
    let truncated = dir.path().join("truncated.onnx");
    std::fs::write(&truncated, &real[..real.len() / 2]).unwrap();
    expect_refusal(&harness(&truncated, &out, &[]), &out, "truncated.onnx");
}

#[test]
fn bad_runtime_libraries_are_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let model = model("smallcnn.onnx");
    let with_lib = |lib: &Path| {
        run(Command::new(bin("npugate-harness"))
            .arg("--ort-lib")
            .arg(lib)
            .arg("--model")
            .arg(&model)
            .arg("--out")
            .arg(&out))
    };
    expect_refusal(&with_lib(&dir.path().join("libonnxruntime.so")), &out, "does not exist");

    let aarch64 = npugate_e2e::runtime_file("ort-1.31.1-linux-aarch64", "libonnxruntime.so.1.31.1");
    expect_refusal(&with_lib(&aarch64), &out, "built for x86_64");

    let not_ort = dir.path().join("libnotort.so");
    std::fs::copy(python_lib_without_ort_api(), &not_ort).unwrap();
    expect_refusal(&with_lib(&not_ort), &out, "not an ONNX Runtime library");

    let old = npugate_e2e::old_ort_lib();
    expect_refusal(&with_lib(&old), &out, "too old");
}

/// Any real shared library that is not ONNX Runtime (libstdc++ is always present where ORT runs).
fn python_lib_without_ort_api() -> PathBuf {
    let output = run(Command::new("gcc").arg("-print-file-name=libstdc++.so.6"));
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

#[test]
fn bad_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let model = model("smallcnn.onnx");
    expect_refusal(&harness(&model, &out, &["--runs", "0"]), &out, "--runs");
    expect_refusal(&harness(&model, &out, &["--ep", "tpu"]), &out, "--ep");
    expect_refusal(&harness(&model, &out, &["--ep-option", "novalue"]), &out, "KEY=VALUE");
    expect_refusal(&harness(&model, &out, &["--shape", "nosuchinput=1x2"]), &out, "no input named");
    expect_refusal(&harness(&model, &out, &["--session-config", "=1"]), &out, "KEY=VALUE");
    // Every EP choice that cannot attach is one line naming the fix.
    expect_refusal(&harness(&model, &out, &["--ep", "plugin"]), &out, "--ep plugin needs --ep-name NAME");
    expect_refusal(
        &harness(&model, &out, &["--ep", "plugin", "--ep-name", "FooExecutionProvider"]),
        &out,
        "needs --ep-library PATH",
    );
    expect_refusal(
        &harness(&model, &out, &["--ep", "openvino", "--ep-device", "npu"]),
        &out,
        "--ep-device chooses the device of a plugin EP",
    );
    expect_refusal(
        &harness(&model, &out, &["--ep", "openvino", "--qnn-backend", "htp"]),
        &out,
        "--qnn-backend applies to --ep qnn only",
    );
    expect_refusal(&harness(&model, &out, &["--strict"]), &out, "--strict applies to an accelerator EP");
    expect_refusal(
        &harness(&model, &out, &["--ep", "xnnpack"]),
        &out,
        "XnnpackExecutionProvider is not in this ONNX Runtime",
    );
    let no_such_plugin = dir.path().join("libnosuch.so");
    expect_refusal(
        &harness(
            &model,
            &out,
            &["--ep", "plugin", "--ep-name", "Foo", "--ep-library", no_such_plugin.to_str().unwrap()],
        ),
        &out,
        "EP plugin library",
    );
}

#[test]
fn npy_of_wrong_dtype_or_shape_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let model = model("smallcnn.onnx");
    let name = RunResult::read(&{
        let probe = dir.path().join("probe");
        let output = harness(&model, &probe, &["--runs", "1", "--profile-runs", "0", "--no-reference-pass"]);
        assert!(output.status.success(), "{}", describe(&output));
        probe
    })
    .unwrap()
    .inputs[0]
        .name
        .clone();
    let float64 = write_npy(dir.path(), "float64", "(1, 3, 64, 64)");
    expect_refusal(&harness(&model, &out, &["--input", &format!("{name}={}", float64.display())]), &out, "dtype <f8");
    let wrong_shape = write_npy(dir.path(), "float32", "(1, 3, 32, 32)");
    expect_refusal(
        &harness(&model, &out, &["--input", &format!("{name}={}", wrong_shape.display())]),
        &out,
        "shape [1, 3, 32, 32]",
    );
    let not_npy = dir.path().join("bad.npy");
    std::fs::write(&not_npy, b"not numpy").unwrap();
    expect_refusal(
        &harness(&model, &out, &["--input", &format!("{name}={}", not_npy.display())]),
        &out,
        "not a valid .npy",
    );
}

#[test]
fn npugate_run_local_measures_judges_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = run(Command::new(bin("npugate"))
        .args(["run", "--local", "--runs", "20", "--profile-runs", "3", "--json", "--model"])
        .arg(model("smallcnn.onnx"))
        .arg("--out")
        .arg(&out)
        // CPU noise on a shared CI machine must not decide this test: the CV limit is lifted.
        .args(["--rule", "cv_pct=1000"]));
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let verdict: serde_json::Value = serde_json::from_slice(&output.stdout).expect("verdict JSON on stdout");
    assert_eq!(verdict["schema"], "npugate.verdict/1.1");
    assert_eq!(verdict["outcome"], "pass");
    // Every timed run is kept; the statistics are of those the machine did not slow (set aside).
    let set_aside = verdict["contention"]["runs"]["contended"].as_array().map_or(0, Vec::len);
    let taken = npugate_e2e::runs_taken(&RunResult::read(&out).unwrap(), 20);
    assert_eq!(verdict["latencies_ns"].as_array().unwrap().len(), taken);
    assert_eq!(verdict["latency"]["n"].as_u64().unwrap() as usize + set_aside, taken, "{verdict:#}");
    for file in [files::RESULT, "verdict.json", "report.html"] {
        assert!(out.join(file).is_file(), "{file} in the result directory");
    }

    let refused = run(Command::new(bin("npugate"))
        .args(["run", "--local", "--model"])
        .arg(dir.path().join("nope.onnx"))
        .arg("--out")
        .arg(dir.path().join("x")));
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("nope.onnx"), "{}", describe(&refused));
}
