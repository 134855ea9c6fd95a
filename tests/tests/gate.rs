//! End to end: the real harness measures a real model with the real ONNX Runtime, then `npugate gate`
//! and `npugate baseline save` judge the result directory; exit codes 0 pass, 1 fail, 2 error. And
//! `npugate run --local` on a machine kept busy by a CPU burner per core: the contention measured
//! per run, named, and never a failure on its account.

use std::path::Path;
use std::process::{Command, Output};

use npugate_e2e::{bin, describe, harness, model, run, sample, CpuBurner};
use npugate_result::RunResult;
use serde_json::Value;

/// Measures smallcnn on the CPU EP into `dir` with `runs` timed runs.
fn measure(dir: &Path, runs: u32) {
    let out = harness(&model("smallcnn.onnx"), dir, &["--runs", &runs.to_string()]);
    assert!(out.status.success(), "harness failed: {}", describe(&out));
}

fn npugate(args: &[&str]) -> Output {
    run(Command::new(bin("npugate")).args(args))
}

fn text(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

/// The CV of a sub-millisecond CPU run on a shared machine is whatever the machine makes it, so the
/// passing cases switch the CV rule off; the failing cases set limits no real run can meet.
const NO_CV: &str = "disable=[\"cv_pct\"]";

#[test]
fn gate_passes_fails_and_reports_on_a_real_run() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("result");
    measure(&dir, 60);

    let pass = npugate(&["gate", text(&dir), "--rule", NO_CV]);
    assert_eq!(pass.status.code(), Some(0), "{}", describe(&pass));
    assert!(String::from_utf8_lossy(&pass.stdout).contains("npu_flops_pct 100.0% >= 98%"), "{}", describe(&pass));

    let fail = npugate(&["gate", text(&dir), "--rule", "median_ms=0.000001", "--format", "github"]);
    assert_eq!(fail.status.code(), Some(1), "{}", describe(&fail));
    assert!(String::from_utf8_lossy(&fail.stdout).contains("::error title=npugate median_ms::"), "{}", describe(&fail));

    let reports = work.path().join("reports");
    let all = npugate(&[
        "gate",
        text(&dir),
        "--rule",
        NO_CV,
        "--format",
        "json",
        "--format",
        "junit",
        "--format",
        "html",
        "--report",
        text(&reports),
    ]);
    assert_eq!(all.status.code(), Some(0), "{}", describe(&all));
    let verdict: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reports.join("verdict.json")).unwrap()).unwrap();
    assert_eq!(verdict["schema"], "npugate.verdict/1.1");
    assert_eq!(verdict["outcome"], "pass");
    // The statistics judge the runs the machine did not slow: all the harness timed (60, or more
    // to replace runs that waited for a CPU) but those set aside.
    let set_aside = verdict["contention"]["runs"]["contended"].as_array().map_or(0, Vec::len);
    let taken = verdict["latencies_ns"].as_array().unwrap().len();
    assert!(taken >= 60, "{verdict}");
    assert_eq!(verdict["latency"]["n"].as_u64(), Some((taken - set_aside) as u64), "{verdict}");
    assert_eq!(verdict["placement"]["preferred_ep"], "CPUExecutionProvider");
    assert!(std::fs::read_to_string(reports.join("verdict.junit.xml")).unwrap().contains("<testcase "));
    assert!(std::fs::read_to_string(reports.join("verdict.html")).unwrap().contains("<svg"));
}

#[test]
fn cv_rule_on_too_few_runs_fails_with_the_count_needed() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("result");
    measure(&dir, 10);
    // Ten runs asked fail the count rule even when the harness timed more to replace runs that
    // waited for a CPU: the settings were too few, whatever the machine did.
    let taken = npugate_e2e::runs_taken(&RunResult::read(&dir).unwrap(), 10);
    let out = npugate(&["gate", text(&dir)]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let has = match taken {
        10 => "this run has 10".to_string(),
        _ => format!("this run asked for 10 ({taken} timed"),
    };
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("needs at least 20 runs, {has}")),
        "{}",
        describe(&out)
    );
}

#[test]
fn baseline_save_compare_and_fingerprint_guard() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("result");
    measure(&dir, 40);
    let baseline = work.path().join("baseline.json");
    let save = npugate(&["baseline", "save", text(&dir), "--out", text(&baseline)]);
    assert_eq!(save.status.code(), Some(0), "{}", describe(&save));
    let again = work.path().join("again.json");
    let saved = npugate(&["baseline", "save", text(&dir), "--out", text(&again), "--json"]);
    let document: serde_json::Value = serde_json::from_slice(&saved.stdout).unwrap();
    assert_eq!(document["schema"], "npugate.baseline-saved/1", "{document}");
    // The 40 timed runs, less those a busy CPU slowed (set aside by their measured wait).
    let runs = document["runs"].as_u64().unwrap();
    assert!((1..=40).contains(&runs), "{document}");
    let said = format!("{runs} runs");
    assert!(save.stdout.is_empty() && String::from_utf8_lossy(&save.stderr).contains(&said), "{}", describe(&save));

    let same = npugate(&["gate", text(&dir), "--rule", NO_CV, "--baseline", text(&baseline)]);
    assert_eq!(same.status.code(), Some(0), "{}", describe(&same));
    assert!(
        String::from_utf8_lossy(&same.stdout).contains("no node moved off CPUExecutionProvider"),
        "{}",
        describe(&same)
    );

    // The same run against a baseline of another model: refused (2) unless forced.
    let mut other: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&baseline).unwrap()).unwrap();
    other["fingerprint"]["model_digest"] = "0".repeat(64).into();
    let other_path = work.path().join("other.json");
    std::fs::write(&other_path, other.to_string()).unwrap();
    let refused = npugate(&["gate", text(&dir), "--rule", NO_CV, "--baseline", text(&other_path)]);
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    let stdout = String::from_utf8_lossy(&refused.stdout);
    assert!(stdout.contains("model digest") && stdout.contains("--force"), "{}", describe(&refused));
    let forced = npugate(&["gate", text(&dir), "--rule", NO_CV, "--baseline", text(&other_path), "--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", describe(&forced));
}

#[test]
fn bad_input_exits_2_naming_the_file() {
    let work = tempfile::tempdir().unwrap();
    let missing = npugate(&["gate", text(&work.path().join("nothing-here"))]);
    assert_eq!(missing.status.code(), Some(2), "{}", describe(&missing));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("nothing-here"), "{}", describe(&missing));

    let dir = work.path().join("result");
    measure(&dir, 20);
    let gate_file = work.path().join("gate.toml");
    std::fs::write(&gate_file, "cv_pct = 8\nnpu_flop_pct = 98\n").unwrap();
    let unknown = npugate(&["gate", text(&dir), "--gate", text(&gate_file)]);
    assert_eq!(unknown.status.code(), Some(2), "{}", describe(&unknown));
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(stderr.contains("npu_flop_pct") && stderr.contains("gate.toml"), "{}", describe(&unknown));
}

/// PP-OCR's classifier, unchanged, three times on a machine with a CPU burner per core. What can
/// be asserted of a busy machine whatever its load: every run's wait is recorded beside its
/// latency (and on this machine, with every core taken, the threads waited); the machine's load
/// is sampled around the run; the rules judge exactly the runs not set aside; set-aside runs are
/// named; a rule left without enough clean runs says how to fix it; and a latency failure counts
/// only after the bounded rerun confirmed it.
#[test]
fn a_busy_machine_is_measured_per_run_named_and_never_failed_on_its_account() {
    let burners = CpuBurner::every_core(120);
    let work = tempfile::tempdir().unwrap();
    let cls = sample("ppocr-cls");
    let json = |path: &Path| -> Value { serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap() };
    let mut waited = 0u64;
    for attempt in 0..3 {
        let out = work.path().join(format!("run-{attempt}"));
        let args = ["run", "--local", "--model", text(&cls), "--shape", "x=1x3x48x192", "--out", text(&out)];
        let output = npugate(&args);
        assert!(out.join("verdict.json").is_file(), "{}", describe(&output));
        let (verdict, state) = (json(&out.join("verdict.json")), json(&out.join("device_state.json")));
        let result = RunResult::read(&out).unwrap();
        let delays = result.timings.run_queue_delays().expect("the run-queue delay of every run");
        let taken = npugate_e2e::runs_taken(&result, 30);
        assert_eq!(delays.len(), taken);
        waited += delays.iter().sum::<u64>();
        assert!(result.timings.cpu_wait.as_ref().is_some_and(|w| w.threads >= 2), "{:?}", result.timings.cpu_wait);
        assert!(state["during"]["seconds"].as_f64().is_some_and(|s| s > 0.0), "{state}");

        let set_aside = verdict["contention"]["runs"]["contended"].as_array().map_or(0, Vec::len);
        assert_eq!(
            verdict["latency"]["n"].as_u64(),
            Some((taken - set_aside) as u64),
            "the rules judge the clean runs"
        );
        let warnings = verdict["warnings"].to_string();
        if set_aside > 0 {
            assert!(
                warnings.contains(&format!("CPU contention: {set_aside} of {taken} runs set aside (run ")),
                "{warnings}"
            );
        }
        let cv = verdict["checks"].as_array().unwrap().iter().find(|c| c["rule"] == "cv_pct").unwrap();
        let message = cv["message"].as_str().unwrap();
        match verdict["outcome"].as_str().unwrap() {
            "pass" => assert!(message.contains("a stability check"), "{message}"),
            "not_judged" => {
                assert_eq!((cv["status"].as_str(), output.status.code()), (Some("not_judged"), Some(2)));
                assert!(message.contains("rerun when the machine is quieter"), "{message}");
            }
            "fail" => {
                let attempts = verdict["confirmation"]["attempts"].as_array().map_or(0, Vec::len);
                assert_eq!(attempts, 3, "a latency failure on a busy machine counts once confirmed: {verdict}");
            }
            _ => panic!("{}", describe(&output)),
        }
    }
    drop(burners);
    assert!(waited > 0, "with a burner on every core the harness's threads waited for a CPU");
}

#[test]
fn run_no_gate_reports_the_measurement_in_every_format_that_applies_and_exits_0() {
    let work = tempfile::tempdir().unwrap();
    let smallcnn = model("smallcnn.onnx");
    let measure_only = |extra: &[&str]| {
        let out = work.path().join("result");
        npugate(
            &[&["run", "--local", "--no-gate", "--runs", "5", "--model", text(&smallcnn), "--out", text(&out)], extra]
                .concat(),
        )
    };
    let shown = measure_only(&[]);
    assert_eq!(shown.status.code(), Some(0), "{}", describe(&shown));
    let stdout = String::from_utf8_lossy(&shown.stdout);
    assert!(
        stdout.starts_with("npugate run: MEASURED — smallcnn.onnx on CPUExecutionProvider"),
        "{}",
        describe(&shown)
    );
    for section in
        ["\nLatency\n", "  median ", "\nMemory and energy\n", "\nPlacement preferred EP CPUExecutionProvider"]
    {
        assert!(stdout.contains(section), "{section:?} missing: {}", describe(&shown));
    }
    assert!(stdout.contains("\nRules\n  none: a measurement only") && !stdout.contains("PASS"), "{}", describe(&shown));

    let json = measure_only(&["--json"]);
    assert_eq!(json.status.code(), Some(0), "{}", describe(&json));
    let verdict: Value = serde_json::from_slice(&json.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&json)));
    assert_eq!(
        (verdict["schema"].as_str(), verdict["outcome"].as_str()),
        (Some("npugate.verdict/1.2"), Some("measured"))
    );
    assert_eq!(verdict["checks"], Value::Array(Vec::new()), "no rule is judged");
    assert!(verdict["latency"]["n"].as_u64().is_some_and(|n| n >= 1), "{verdict}");
    assert_eq!(verdict["placement"]["preferred_ep"], "CPUExecutionProvider");
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(work.path().join("result/verdict.json")).unwrap()).unwrap();
    assert_eq!(saved["outcome"], "measured", "the result directory holds the same verdict");

    let junit = measure_only(&["--format", "junit"]);
    assert_eq!(junit.status.code(), Some(2), "{}", describe(&junit));
    let said = String::from_utf8_lossy(&junit.stderr);
    assert!(said.contains("the junit format does not apply to a npugate.verdict/1.2 report"), "{said}");
}
