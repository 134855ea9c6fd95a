//! The QNN EP for real, without a Snapdragon: the aarch64 harness under qemu-user with the
//! onnxruntime-qnn 2.7.0 plugin. What a machine without a Hexagon DSP can prove: the plugin
//! partitioner (through the Saver backend), the dead HTP backend tripwire, `--strict`, where QNN
//! profiling goes, and that a context cache cannot be made without HTP/GPU.

use std::path::Path;
use std::process::Command;

use npugate_e2e::qnn::{aarch64_harness, qemu_run, qemu_teardown_crash, qnn_file, qnn_harness, AARCH64_ORT};
use npugate_e2e::{bin, describe, model, run};
use npugate_profile::report::PlacementReport;
use npugate_result::{RunResult, RunStatus};

fn preflight(model_name: &str, out: &Path) -> (std::process::Output, Option<PlacementReport>) {
    let output = run(Command::new(bin("npugate"))
        .args(["preflight", "--backend", "saver", "--model"])
        .arg(model(model_name))
        .arg("--out")
        .arg(out)
        .arg("--harness")
        .arg(aarch64_harness()));
    let report = std::fs::read(out.join("placement.json"))
        .ok()
        .map(|bytes| serde_json::from_slice(&bytes).expect("placement.json parses"));
    (output, report)
}

/// Exit status of a harness that failed on purpose: 2, or qemu's teardown SIGSEGV after writing.
fn failed_on_purpose(output: &std::process::Output) -> bool {
    output.status.code() == Some(2) || qemu_teardown_crash(output.status)
}

/// Exit status of a harness whose accelerator did not start: 3 (infrastructure, retried by a rack),
/// or qemu's teardown SIGSEGV after writing.
fn did_not_start(output: &std::process::Output) -> bool {
    output.status.code() == Some(3) || qemu_teardown_crash(output.status)
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
    assert!(
        det.reason.as_deref().unwrap_or("").contains("Operators of type `Det` are not supported by QNN EP"),
        "{det:?}"
    );
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
    assert!(did_not_start(&output), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("QNN backend did not start: No Snapdragon SOC detected"), "{stderr}");
    assert!(stderr.contains("; 100% of nodes would run on CPU"), "{stderr}");
    let result = RunResult::read(dir.path()).expect("result.json is written before teardown");
    assert_eq!(result.status, RunStatus::Incomplete);
    let backend = result.backend.clone().expect("backend health recorded");
    assert!(!backend.started);
    assert!(backend.reason.as_deref().unwrap().contains("QNN SetupBackend failed"), "{backend:?}");
    assert!(backend.evidence.iter().any(|e| e.contains("No Snapdragon SOC detected")), "{backend:?}");
    // What was measured is kept: the (CPU) latencies and an assignment with no QNN node.
    assert_eq!(result.timings.latencies_ns.len(), npugate_e2e::runs_taken(&result, 2));
    assert!(result.assignment.subgraphs.iter().all(|s| s.ep == "CPUExecutionProvider"));
    assert_eq!(result.execution.ep_options.get("backend_type").map(String::as_str), Some("htp"));
    assert_eq!(result.execution.ep_options.get("enable_htp_fp16_precision").map(String::as_str), Some("1"));
}

#[test]
fn strict_turns_the_dead_backend_into_a_session_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = qnn_harness(&model("smallcnn_qdq.onnx"), dir.path(), &["--qnn-backend", "htp", "--strict"]);
    assert!(did_not_start(&output), "{}", describe(&output));
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
        // At INFO the timed session traces its options (at the default WARNING it logs none).
        &[
            "--qnn-backend",
            "htp",
            "--ep-option",
            &saver,
            "--ep-option",
            "skip_backend_op_validation=1",
            "--qnn-profiling",
            "basic",
            "--ort-log-level",
            "info",
        ],
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
    assert!(
        options_of("profiled").contains("ep.qnnexecutionprovider.profiling_level: basic"),
        "{}",
        options_of("profiled")
    );
}

#[test]
fn a_context_cache_needs_a_backend_that_makes_context_binaries() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let output = qnn_harness(
        &model("smallcnn.onnx"),
        dir.path(),
        &["--qnn-backend", "saver", "--context-cache", cache.to_str().unwrap()],
    );
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
    assert_eq!(result.timings.latencies_ns.len(), npugate_e2e::runs_taken(&result, 3));
    assert!(result.assignment.subgraphs.iter().all(|s| s.ep == "CPUExecutionProvider"));
}

/// Writes `members` (name → content) into a zip at `path` with the venv's Python `zipfile`.
fn zip_with(path: &Path, members: &[(&str, &str)]) {
    let script = "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1], 'w')\nfor m in sys.argv[2:]:\n    n, c = m.split('=', 1)\n    z.writestr(n, c)\nz.close()\n";
    let output = run(Command::new(npugate_e2e::python())
        .args(["-c", script])
        .arg(path)
        .args(members.iter().map(|(n, c)| format!("{n}={c}"))));
    assert!(output.status.success(), "{}", describe(&output));
}

fn npugate_in(cache: &Path, args: &[&str]) -> std::process::Output {
    run(Command::new(bin("npugate")).env("NPUGATE_CACHE", cache).args(args))
}

fn manifest(cache: &Path, name: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(cache.join("runtimes").join(name).join("runtime.json")).unwrap()).unwrap()
}

fn file_names(manifest: &serde_json::Value) -> Vec<String> {
    manifest["files"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn android_aar_and_qairt_sdk_become_runtimes_with_only_the_matching_hexagon_libraries() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    // Qualcomm's plugin AAR layout: Java classes, headers, native libraries per ABI.
    let aar = dir.path().join("onnxruntime-android-qnn-2.6.0.aar");
    zip_with(
        &aar,
        &[
            ("AndroidManifest.xml", "<manifest/>"),
            ("classes.jar", "jar"),
            ("headers/onnxruntime_c_api.h", "h"),
            ("jni/arm64-v8a/libonnxruntime.so", "ort-arm64"),
            ("jni/arm64-v8a/libonnxruntime4j_jni.so", "jni"),
            ("jni/arm64-v8a/libonnxruntime_providers_qnn.so", "plugin"),
            ("jni/arm64-v8a/libQnnHtp.so", "htp-from-aar"),
            ("jni/armeabi-v7a/libonnxruntime.so", "ort-arm32"),
        ],
    );
    let output = npugate_in(
        &cache,
        &["runtime", "import-aar", aar.to_str().unwrap(), "--name", "aar-rt", "--ort-version", "1.31.1"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let aar_rt = manifest(&cache, "aar-rt");
    assert_eq!(aar_rt["target"], "aarch64-linux-android");
    assert_eq!(aar_rt["ep"]["attach"], "plugin");
    assert_eq!(file_names(&aar_rt), ["libQnnHtp.so", "libonnxruntime.so", "libonnxruntime_providers_qnn.so"]);
    let ort = std::fs::read_to_string(cache.join("runtimes/aar-rt/libonnxruntime.so")).unwrap();
    assert_eq!(ort, "ort-arm64", "the arm64-v8a library, not another ABI's");

    // Microsoft's AAR: QNN EP built into libonnxruntime.so, no plugin.
    let microsoft = dir.path().join("onnxruntime-android-qnn-1.29.0.aar");
    zip_with(
        &microsoft,
        &[("jni/arm64-v8a/libonnxruntime.so", "ort"), ("jni/arm64-v8a/libonnxruntime4j_jni.so", "jni")],
    );
    let output = npugate_in(&cache, &["runtime", "import-aar", microsoft.to_str().unwrap(), "--name", "ms-rt"]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert_eq!(manifest(&cache, "ms-rt")["ep"]["attach"], "builtin");

    // A QAIRT SDK folder: Android host libraries, one unsigned Skel folder per Hexagon arch.
    let sdk = dir.path().join("qairt/2.42.0.251225");
    let write = |rel: &str, content: &str| {
        let path = sdk.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    };
    for (rel, content) in [
        ("lib/aarch64-android/libQnnHtp.so", "htp-from-sdk"),
        ("lib/aarch64-android/libQnnSystem.so", "system"),
        ("lib/aarch64-android/libQnnHtpPrepare.so", "prepare"),
        ("lib/aarch64-android/libQnnHtpV75Stub.so", "stub75"),
        ("lib/aarch64-android/libQnnHtpV73Stub.so", "stub73"),
        ("lib/hexagon-v75/unsigned/libQnnHtpV75Skel.so", "skel75"),
        ("lib/hexagon-v73/unsigned/libQnnHtpV73Skel.so", "skel73"),
        ("lib/x86_64-linux-clang/libQnnHtp.so", "x86"),
    ] {
        write(rel, content);
    }
    let sdk_arg = sdk.to_str().unwrap();
    let output = npugate_in(
        &cache,
        &["runtime", "import-qairt", sdk_arg, "--name", "v75-rt", "--base", "aar-rt", "--arch", "v75"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let v75 = manifest(&cache, "v75-rt");
    let names = file_names(&v75);
    for wanted in [
        "libQnnHtpV75Stub.so",
        "libQnnHtpV75Skel.so",
        "libQnnSystem.so",
        "libQnnHtpPrepare.so",
        "libonnxruntime_providers_qnn.so",
    ] {
        assert!(names.iter().any(|n| n == wanted), "{wanted} missing from {names:?}");
    }
    assert!(!names.iter().any(|n| n.contains("V73")), "{names:?}");
    let skel = v75["files"].as_array().unwrap().iter().find(|f| f["name"] == "libQnnHtpV75Skel.so").unwrap();
    assert_eq!((skel["role"].as_str(), skel["hexagon_arch"].as_str()), (Some("qnn_skel"), Some("v75")));
    let htp = std::fs::read_to_string(cache.join("runtimes/v75-rt/libQnnHtp.so")).unwrap();
    assert_eq!(htp, "htp-from-sdk", "the SDK's Android library replaces the base's");

    let output = npugate_in(
        &cache,
        &["runtime", "import-qairt", sdk_arg, "--name", "v79-rt", "--base", "aar-rt", "--arch", "v79"],
    );
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no Skel for v79"), "{}", describe(&output));
    assert!(!cache.join("runtimes/v79-rt").exists());
}

#[test]
fn an_imported_runtime_is_reported_as_a_line_or_the_runtimes_cached_document() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let aar = dir.path().join("onnxruntime-android-1.29.0.aar");
    zip_with(&aar, &[("jni/arm64-v8a/libonnxruntime.so", "ort")]);
    let line = npugate_in(&cache, &["runtime", "import-aar", aar.to_str().unwrap(), "--name", "line-rt"]);
    assert_eq!(line.status.code(), Some(0), "{}", describe(&line));
    let runtime_dir = cache.join("runtimes/line-rt");
    let said = format!("line-rt: imported 1 files into {}\n", runtime_dir.display());
    assert_eq!(String::from_utf8_lossy(&line.stdout), said);

    let json = npugate_in(&cache, &["runtime", "import-aar", aar.to_str().unwrap(), "--name", "json-rt", "--json"]);
    assert_eq!(json.status.code(), Some(0), "{}", describe(&json));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["schema"], "npugate.runtimes-cached/1");
    let imported = &report["runtimes"][0];
    assert_eq!((imported["name"].as_str(), imported["how"].as_str()), (Some("json-rt"), Some("imported")));
    assert_eq!(
        (imported["files"].as_u64(), imported["dir"].as_str()),
        (Some(1), cache.join("runtimes/json-rt").to_str())
    );
}

#[test]
fn a_backend_that_started_and_rejected_every_node_is_a_verdict_naming_the_cause() {
    // dynamic.onnx as it is (x: [batch, 3, height, width]): the harness does not fix the model,
    // `--shape` only shapes its inputs, so QNN (set up with the Saver) sees dynamic dims everywhere.
    let dir = tempfile::tempdir().unwrap();
    let saver = format!("qnn_saver_path={}", qnn_file("libQnnSaver.so").display());
    let output = qnn_harness(
        &model("dynamic.onnx"),
        dir.path(),
        &[
            "--qnn-backend",
            "htp",
            "--ep-option",
            &saver,
            "--ep-option",
            "skip_backend_op_validation=1",
            "--shape",
            "x=1x3x32x32",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "a started backend is no harness failure: {}", describe(&output));
    let result = RunResult::read(dir.path()).unwrap();
    assert_eq!(result.status, RunStatus::Complete);
    let backend = result.backend.as_ref().expect("backend health recorded");
    assert!(backend.started, "{backend:?}");
    assert!(backend.evidence.iter().any(|e| e.contains("QNN SetupBackend succeed")), "{backend:?}");
    assert!(result.assignment.subgraphs.iter().all(|s| s.ep == "CPUExecutionProvider"), "every node rejected");

    let gate = run(Command::new(bin("npugate")).args(["gate"]).arg(dir.path()).args([
        "--rule",
        "disable=[\"cv_pct\"]",
        "--rule",
        "max_fallback_nodes=0",
    ]));
    assert_eq!(gate.status.code(), Some(1), "a verdict, not 'did not start': {}", describe(&gate));
    let report = String::from_utf8_lossy(&gate.stdout);
    assert!(report.contains("QNNExecutionProvider started but claimed no node"), "{report}");
    assert!(report.contains("5 nodes: Cannot get shape (e.g. conv, gap, relu, …) → the model has dynamic input dims; pass --shape x=1x3x32x32"), "{report}");
    assert!(report.contains("conv"), "the nodes are named: {report}");
    assert!(!report.contains("did not start"), "{report}");
}
