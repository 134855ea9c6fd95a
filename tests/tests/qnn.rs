//! The QNN EP for real, without a Snapdragon: the aarch64 harness under qemu-user with the
//! onnxruntime-qnn 2.7.0 plugin. What a machine without a Hexagon DSP can prove: the plugin
//! partitioner (through the Saver backend), the dead HTP backend tripwire, `--strict`, where QNN
//! profiling goes, and that a context cache cannot be made without HTP/GPU.

use std::path::Path;
use std::process::Command;

use npugate_e2e::qnn::{aarch64_harness, qemu_run, qemu_teardown_crash, qnn_file, qnn_harness, AARCH64_ORT};
use npugate_e2e::{bin, describe, model, run};
use npugate_result::{RunResult, RunStatus};
use profile_parser::report::PlacementReport;

fn preflight(model_name: &str, out: &Path) -> (std::process::Output, Option<PlacementReport>) {
    let output = run(Command::new(bin("npugate"))
        .args(["preflight", "--model"])
        .arg(model(model_name))
        .arg("--out")
        .arg(out)
        .arg("--harness")
        .arg(aarch64_harness()));
    let report = std::fs::read(out.join("placement.json")).ok().map(|bytes| serde_json::from_slice(&bytes).expect("placement.json parses"));
    (output, report)
}

/// Exit status of a harness that failed on purpose: 2, or qemu's teardown SIGSEGV after writing.
fn failed_on_purpose(output: &std::process::Output) -> bool {
    output.status.code() == Some(2) || qemu_teardown_crash(output.status)
}

#[test]
fn preflight_names_the_unsupported_det_node_with_the_eps_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (output, report) = preflight("mixed.onnx", &dir.path().join("out"));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("would fall back to CPU: det (Det)"), "{stdout}");
    assert!(stdout.contains("predicted: HTP backend validation not run"), "{stdout}");
    let report = report.expect("placement.json written");
    assert_eq!(report.predicted.as_deref(), Some("predicted: HTP backend validation not run"));
    let det = report.fallback.iter().find(|f| f.name == "det").expect("det in the fallback list");
    assert_eq!(det.ep, "CPUExecutionProvider");
    assert!(!det.expected);
    assert!(det.reason.as_deref().unwrap_or("").contains("Operators of type `Det` are not supported by QNN EP"), "{det:?}");
    assert_eq!(report.fallback.iter().filter(|f| !f.expected).count(), 1, "{:?}", report.fallback);
}

#[test]
fn preflight_of_a_supported_float_model_predicts_every_node_on_qnn() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (output, report) = preflight("smallcnn.onnx", &out);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let report = report.expect("placement.json written");
    assert_eq!(report.preferred_ep, "QNNExecutionProvider");
    assert_eq!(report.preferred_nodes_pct, 100.0, "{:?}", report.fallback);
    assert!(report.fallback.is_empty(), "{:?}", report.fallback);
    // The Saver recorded the graph into the result directory (the harness's working directory).
    assert!(out.join("saver_output.c").is_file());
}

#[test]
fn htp_without_a_snapdragon_is_a_dead_backend_not_a_silent_cpu_run() {
    let dir = tempfile::tempdir().unwrap();
    let output = qnn_harness(&model("smallcnn_qdq.onnx"), dir.path(), &["--qnn-backend", "htp"]);
    assert!(failed_on_purpose(&output), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("QNN backend did not start: No Snapdragon SOC detected"), "{stderr}");
    assert!(stderr.contains("; 100% of nodes would run on CPU"), "{stderr}");
    let result = RunResult::read(dir.path()).expect("result.json is written before teardown");
    assert_eq!(result.status, RunStatus::Incomplete);
    let backend = result.backend.expect("backend health recorded");
    assert!(!backend.started);
    assert!(backend.reason.as_deref().unwrap().contains("QNN SetupBackend failed"), "{backend:?}");
    assert!(backend.evidence.iter().any(|e| e.contains("No Snapdragon SOC detected")), "{backend:?}");
    // What was measured is kept: the (CPU) latencies and an assignment with no QNN node.
    assert_eq!(result.timings.latencies_ns.len(), 2);
    assert!(result.assignment.subgraphs.iter().all(|s| s.ep == "CPUExecutionProvider"));
    assert_eq!(result.execution.ep_options.get("backend_type").map(String::as_str), Some("htp"));
    assert_eq!(result.execution.ep_options.get("enable_htp_fp16_precision").map(String::as_str), Some("1"));
}

#[test]
fn strict_turns_the_dead_backend_into_a_session_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = qnn_harness(&model("smallcnn_qdq.onnx"), dir.path(), &["--qnn-backend", "htp", "--strict"]);
    assert!(failed_on_purpose(&output), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("QNN backend did not start: No Snapdragon SOC detected"), "{stderr}");
    assert!(stderr.contains("fallback to CPU EP has been explicitly disabled"), "{stderr}");
    assert!(!dir.path().join("result.json").exists(), "nothing was measured, so no result");
}

#[test]
fn qnn_profiling_goes_to_the_profiled_session_only() {
    let dir = tempfile::tempdir().unwrap();
    let saver = format!("qnn_saver_path={}", qnn_file("libQnnSaver.so").display());
    let output = qnn_harness(
        &model("smallcnn.onnx"),
        dir.path(),
        &["--qnn-backend", "htp", "--ep-option", &saver, "--ep-option", "skip_backend_op_validation=1", "--qnn-profiling", "basic"],
    );
    let result = RunResult::read(dir.path()).unwrap_or_else(|e| panic!("{e}\n{}", describe(&output)));
    assert!(!result.execution.ep_options.contains_key("profiling_level"), "{:?}", result.execution.ep_options);
    assert_eq!(result.execution.profiled_pass_ep_options.get("profiling_level").map(String::as_str), Some("basic"));
    let csv = dir.path().join("qnn_profile.csv").display().to_string();
    assert_eq!(result.execution.profiled_pass_ep_options.get("profiling_file_path"), Some(&csv));
    // ORT's own trace of each session's options proves which session got QNN profiling.
    let log = std::fs::read_to_string(dir.path().join("ort.log")).unwrap();
    let options_of = |session: &str| {
        log.lines()
            .find(|l| l.contains(&format!(":{session}, ")) && l.contains("TraceSessionOptions"))
            .unwrap_or_else(|| panic!("no session options traced for {session}"))
            .to_string()
    };
    assert!(!options_of("timed").contains("profiling_level"), "{}", options_of("timed"));
    assert!(options_of("profiled").contains("ep.qnnexecutionprovider.profiling_level: basic"), "{}", options_of("profiled"));
}

#[test]
fn a_context_cache_needs_a_backend_that_makes_context_binaries() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let output = qnn_harness(&model("smallcnn.onnx"), dir.path(), &["--qnn-backend", "saver", "--context-cache", cache.to_str().unwrap()]);
    assert!(failed_on_purpose(&output), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--context-cache") && stderr.contains("only the QNN HTP"), "{stderr}");
    let cached: Vec<_> = std::fs::read_dir(&cache).map(|d| d.flatten().collect()).unwrap_or_default();
    assert!(cached.is_empty(), "no unusable context model may stay in the cache: {cached:?}");
}

#[test]
fn the_aarch64_harness_runs_a_model_on_cpu_under_qemu() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(Command::new(qemu_run())
        .arg(aarch64_harness())
        .arg("--ort-lib")
        .arg(qnn_file(AARCH64_ORT))
        .arg("--model")
        .arg(model("smallcnn_qdq.onnx"))
        .arg("--out")
        .arg(dir.path())
        .args(["--warmup", "1", "--runs", "3", "--profile-runs", "1"]));
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let result = RunResult::read(dir.path()).unwrap();
    assert_eq!(result.status, RunStatus::Complete);
    assert_eq!(result.fingerprint.arch, "aarch64");
    assert_eq!(result.timings.latencies_ns.len(), 3);
    assert!(result.assignment.subgraphs.iter().all(|s| s.ep == "CPUExecutionProvider"));
}
