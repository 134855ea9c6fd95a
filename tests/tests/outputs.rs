//! End to end: `npugate run --local --check-outputs` saves the outputs of the real harness run,
//! computes the fp32 CPU reference with the real harness, compares them (`outputs.json`), gates on
//! the output rules, and `npugate outputs compare` lays result dirs side by side.

use std::path::Path;
use std::process::{Command, Output};

use npugate_e2e::{bin, describe, model, python, run};

/// The CV of a sub-millisecond CPU run on a shared machine is whatever the machine makes it.
const NO_CV: &str = "disable=[\"cv_pct\"]";

fn text(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

/// `npugate run --local --check-outputs` of `model` into `out`, with extra arguments.
fn check_outputs(model_file: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut command = Command::new(bin("npugate"));
    command.args(["run", "--local", "--check-outputs", "--runs", "5", "--model", text(model_file), "--out", text(out)]);
    command.args(["--rule", NO_CV]).args(extra);
    run(&mut command)
}

fn outputs_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("outputs.json")).expect("outputs.json written")).unwrap()
}

#[test]
fn qdq_model_against_its_float_model_has_finite_sqnr_and_the_rules_judge_it() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("qdq");
    let float = model("smallcnn.onnx");
    let out = check_outputs(
        &model("smallcnn_qdq.onnx"),
        &dir,
        &["--reference-model", text(&float), "--rule", "min_sqnr_db=10"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let report = outputs_json(&dir);
    assert_eq!(report["schema"], "npugate.outputs/1.1");
    assert_eq!(report["reference"]["ep"], "CPUExecutionProvider");
    assert_eq!(report["reference"]["result_dir"], "output-reference");
    let probs = &report["outputs"][0];
    assert_eq!(probs["name"], "probs");
    let metrics = &probs["metrics"];
    let sqnr = metrics["sqnr_db"].as_f64().expect("a QDQ model differs from its float model: finite SQNR");
    let cosine = metrics["cosine"].as_f64().unwrap();
    assert!(sqnr > 10.0 && sqnr < 80.0, "SQNR {sqnr} dB");
    assert!(cosine > 0.99 && cosine < 1.0, "cosine {cosine}");
    assert!(metrics["max_abs_err"].as_f64().unwrap() > 0.0);
    assert!(metrics["top1_agreement_pct"].is_number(), "probs is a class score: {metrics}");
    let run_result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("result.json")).unwrap()).unwrap();
    assert_eq!(run_result["artifacts"]["outputs"][0], "outputs/probs.npy");
    let taken = npugate_e2e::runs_taken(&npugate_result::RunResult::read(&dir).unwrap(), 5);
    assert_eq!(run_result["timings"]["latencies_ns"].as_array().unwrap().len(), taken, "the extra run is not timed");

    // The same result, judged again with a threshold the QDQ model cannot meet.
    let fail =
        run(Command::new(bin("npugate")).args(["gate", text(&dir), "--rule", NO_CV, "--rule", "min_sqnr_db=90"]));
    assert_eq!(fail.status.code(), Some(1), "{}", describe(&fail));
    let stdout = String::from_utf8_lossy(&fail.stdout);
    assert!(stdout.contains("min_sqnr_db: output probs") && stdout.contains("< 90 dB"), "{}", describe(&fail));
}

#[test]
fn garbage_outputs_fail_the_default_output_rules_and_name_the_command_that_finds_the_layer() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("garbage");
    // Another model of the same inputs and outputs as the reference: the outputs are garbage.
    let other = model("normcnn.onnx");
    let out = check_outputs(&model("smallcnn_qdq.onnx"), &dir, &["--reference-model", text(&other)]);
    assert_eq!(out.status.code(), Some(1), "asked for the check, judged by the default rules: {}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The run names the numerics command of its own model, reference and target.
    let command = format!(
        "the first diverging layer: npugate numerics --local --model {} --reference-model {}",
        text(&model("smallcnn_qdq.onnx")),
        text(&other)
    );
    for rule in ["FAIL    min_cosine", "FAIL    min_sqnr_db", "the default limit", &command] {
        assert!(stdout.contains(rule), "{rule}: {}", describe(&out));
    }
    // Judged again from its directory, where the command line is unknown: the command's form.
    let again = run(Command::new(bin("npugate")).args(["gate", text(&dir), "--rule", NO_CV]));
    assert_eq!(again.status.code(), Some(1), "{}", describe(&again));
    assert!(String::from_utf8_lossy(&again.stdout).contains("npugate numerics --model MODEL"), "{}", describe(&again));
    // --rule overrides the default limits.
    let relaxed = run(Command::new(bin("npugate")).args(["gate", text(&dir), "--rule", NO_CV]).args([
        "--rule",
        "min_sqnr_db=-100",
        "--rule",
        "min_cosine=-1",
    ]));
    assert_eq!(relaxed.status.code(), Some(0), "{}", describe(&relaxed));
}

#[test]
fn a_model_against_itself_has_cosine_one_and_infinite_sqnr() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("float");
    let out = check_outputs(&model("smallcnn.onnx"), &dir, &["--rule", "min_cosine=1", "--rule", "max_abs_err=0"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let metrics = &outputs_json(&dir)["outputs"][0]["metrics"];
    assert_eq!(metrics["sqnr_db"], "inf");
    assert_eq!(metrics["cosine"], 1.0);
    assert_eq!(metrics["max_abs_err"], 0.0);
    assert_eq!(metrics["top1_agreement_pct"], 100.0);
}

#[test]
fn a_reference_fed_other_inputs_is_refused_naming_the_input() {
    let work = tempfile::tempdir().unwrap();
    // Same input name and shape as smallcnn, but float64: the seeded inputs differ byte for byte.
    let other = work.path().join("identity_f64.onnx");
    let script = "import onnx, sys\n\
        from onnx import helper, TensorProto as T\n\
        x = helper.make_tensor_value_info('input', T.DOUBLE, [1, 3, 64, 64])\n\
        y = helper.make_tensor_value_info('probs', T.DOUBLE, [1, 3, 64, 64])\n\
        g = helper.make_graph([helper.make_node('Identity', ['input'], ['probs'])], 'g', [x], [y])\n\
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)], ir_version=8), sys.argv[1])";
    let made = run(Command::new(python()).args(["-c", script]).arg(&other));
    assert!(made.status.success(), "{}", describe(&made));
    let dir = work.path().join("run");
    let out = check_outputs(&model("smallcnn.onnx"), &dir, &["--reference-model", text(&other)]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("input \"input\" differs between the run") && stderr.contains("same --seed"),
        "{}",
        describe(&out)
    );
    assert!(
        dir.join("result.json").is_file() && dir.join("verdict.json").is_file(),
        "the measured run is kept and judged"
    );
    assert!(!dir.join("outputs.json").exists());
}

#[test]
fn outputs_compare_puts_runs_side_by_side_and_marks_the_outlier() {
    let work = tempfile::tempdir().unwrap();
    let qdq = model("smallcnn_qdq.onnx");
    let (close, far) = (work.path().join("close"), work.path().join("far"));
    let same = check_outputs(&qdq, &close, &[]);
    assert_eq!(same.status.code(), Some(0), "{}", describe(&same));
    let float = model("smallcnn.onnx");
    let drifted = check_outputs(&qdq, &far, &["--reference-model", text(&float)]);
    assert_eq!(drifted.status.code(), Some(0), "{}", describe(&drifted));

    let table = run(Command::new(bin("npugate")).args([
        "outputs",
        "compare",
        text(&close),
        text(&far),
        "--format",
        "markdown",
    ]));
    assert_eq!(table.status.code(), Some(0), "{}", describe(&table));
    let markdown = String::from_utf8_lossy(&table.stdout);
    let rows: Vec<&str> = markdown.lines().filter(|l| l.contains("| probs") || l.contains("**probs**")).collect();
    assert_eq!(rows.len(), 2, "{markdown}");
    assert!(rows[0].contains("| ∞ |") && !rows[0].contains("outlier"), "{markdown}");
    assert!(rows[1].contains("◀ outlier") && rows[1].contains("**"), "{markdown}");
    let json = run(Command::new(bin("npugate")).args(["outputs", "compare", text(&close), text(&far), "--json"]));
    assert_eq!(json.status.code(), Some(0), "{}", describe(&json));
    let document: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(document["schema"], "npugate.outputs-compare/1");
    let runs = document["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{document}");
    assert!(runs.iter().all(|run| run["outputs"]["outputs"][0]["name"] == "probs"), "{document}");

    let other_model = work.path().join("other");
    let other = check_outputs(&float, &other_model, &[]);
    assert_eq!(other.status.code(), Some(0), "{}", describe(&other));
    let refused = run(Command::new(bin("npugate")).args(["outputs", "compare", text(&close), text(&other_model)]));
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("ran another model"), "{}", describe(&refused));
}
