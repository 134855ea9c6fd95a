//! End to end: `npugate numerics` with the real harness and ONNX Runtime on models whose truth the
//! tests know — a QDQ net with one layer's weight scale broken (found at that layer although its
//! final output passes a 30 dB check; a failed output rule names the command that finds it), the same net quantized cleanly (no divergence), a float
//! model against itself (identical at every layer), tensor names the harness must rename, bad
//! input, and a rack of simulated devices over adb.

use std::path::Path;
use std::process::{Command, Output};

use npugate_e2e::devices::Rig;
use npugate_e2e::{bin, describe, model, python, run};
use serde_json::Value;

fn text(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

/// `npugate numerics --local --json` of `model` against `reference` into `out`, with extra arguments.
fn numerics(model_file: &Path, reference: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut command = Command::new(bin("npugate"));
    command.args([
        "numerics",
        "--local",
        "--json",
        "--model",
        text(model_file),
        "--reference-model",
        text(reference),
        "--out",
        text(out),
    ]);
    run(command.args(extra))
}

/// The JSON report printed on stdout, checked against the one written in `out`.
fn report(output: &Output, out: &Path) -> Value {
    let printed: Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", describe(output)));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(out.join("numerics.json")).unwrap()).unwrap();
    assert_eq!(printed, written);
    assert_eq!(printed["schema"], "npugate.numerics/1");
    assert!(out.join("numerics.html").is_file());
    printed
}

/// Per layer: (tensor, SQNR on the first target; `inf` as infinity).
fn sqnr_by_layer(report: &Value) -> Vec<(String, f64)> {
    let value = |v: &Value| v.as_f64().unwrap_or_else(|| if v == "inf" { f64::INFINITY } else { panic!("SQNR {v}") });
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["tensor"].as_str().unwrap().to_string(), value(&l["results"][0]["sqnr_db"])))
        .collect()
}

#[test]
fn a_broken_weight_scale_is_found_at_its_layer_though_the_output_passes_30_db() {
    let work = tempfile::tempdir().unwrap();
    let (broken, float) = (model("normcnn_qdq_broken.onnx"), model("normcnn.onnx"));
    let out = work.path().join("numerics");
    let output = numerics(&broken, &float, &out, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let report = report(&output, &out);
    let first = &report["first_divergence"];
    assert_eq!(
        (first["node"].as_str(), first["tensor"].as_str(), first["op_type"].as_str()),
        (Some("conv2"), Some("r2"), Some("Conv")),
        "{first}"
    );
    let sqnr = first["sqnr_db"].as_f64().unwrap();
    assert!((4.0..9.0).contains(&sqnr), "halved weights: 20·log10(2) ≈ 6 dB, got {sqnr}");
    assert_eq!(first["inputs"][0]["tensor"], "p1");
    let layers = sqnr_by_layer(&report);
    let names: Vec<&str> = layers.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(names, ["r1", "p1", "r2", "n2", "p2", "r3", "g", "feat", "logits", "probs"]);
    assert!(layers[..2].iter().all(|(_, s)| *s > 30.0), "{layers:?}");
    assert!(layers[3..].iter().all(|(_, s)| *s > 20.0), "InstanceNormalization undoes the scale: {layers:?}");
    let r2 = &report["layers"][2];
    assert_eq!(
        (r2["rule"].as_str(), r2["exposed"].as_str(), r2["dequantized_with"].as_str()),
        (Some("quantize_dequantize"), Some("r2_QuantizeLinear_Output"), Some("r2_DequantizeLinear"))
    );
    assert_eq!(r2["results"][0]["divergence_origin"], true);
    assert_eq!(report["layers"][3]["results"][0]["divergence_origin"], false, "n2 follows r2: not an origin");
    assert_eq!(report["outcome"], "fail");
    assert_eq!(report["targets"][0]["placement"]["source"], "Session_GetEpGraphAssignmentInfo");

    // The output check alone sees nothing wrong.
    let checked = work.path().join("output-check");
    let check = run(Command::new(bin("npugate"))
        .args(["run", "--local", "--check-outputs", "--runs", "3", "--model", text(&broken)])
        .args([
            "--reference-model",
            text(&float),
            "--rule",
            "disable=[\"cv_pct\"]",
            "--rule",
            "min_sqnr_db=30",
            "--out",
            text(&checked),
        ]));
    assert_eq!(check.status.code(), Some(0), "the broken model passes a 30 dB output check: {}", describe(&check));
    let outputs: Value = serde_json::from_str(&std::fs::read_to_string(checked.join("outputs.json")).unwrap()).unwrap();
    assert!(outputs["outputs"][0]["metrics"]["sqnr_db"].as_f64().unwrap() > 30.0);

    // A stricter output rule fails, and names the numerics command of this model, reference and
    // target — which, pasted as it is, finds conv2.
    let failed = run(Command::new(bin("npugate"))
        .args(["run", "--local", "--check-outputs", "--runs", "3", "--model", text(&broken)])
        .args(["--reference-model", text(&float), "--rule", "disable=[\"cv_pct\"]", "--rule", "min_sqnr_db=40"])
        .args(["--out", text(&work.path().join("strict"))]));
    assert_eq!(failed.status.code(), Some(1), "{}", describe(&failed));
    let stdout = String::from_utf8_lossy(&failed.stdout);
    let command = stdout
        .lines()
        .find_map(|line| line.split_once("the first diverging layer: ").map(|(_, command)| command.trim_end()))
        .unwrap_or_else(|| panic!("no command: {stdout}"));
    let expected = format!("npugate numerics --local --model {} --reference-model {}", text(&broken), text(&float));
    assert_eq!(command, expected);
    let words: Vec<&str> = command.split_whitespace().collect();
    let found = run(Command::new(bin("npugate")).args(&words[1..]).arg("--json").current_dir(work.path()));
    assert_eq!(found.status.code(), Some(1), "{}", describe(&found));
    let found: Value = serde_json::from_slice(&found.stdout).unwrap();
    assert_eq!(found["first_divergence"]["node"], "conv2");
}

#[test]
fn a_clean_quantization_has_no_divergence_and_lists_what_it_did_not_compare() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("numerics");
    let output = numerics(&model("normcnn_qdq.onnx"), &model("normcnn.onnx"), &out, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let report = report(&output, &out);
    assert!(report["first_divergence"].is_null());
    assert_eq!(report["outcome"], "pass");
    let layers = sqnr_by_layer(&report);
    assert_eq!(layers.len(), 10);
    assert!(layers.iter().all(|(_, s)| *s > 20.0 && s.is_finite()), "{layers:?}");
    // r1 holds the raw Conv output (the Relu folded into the QuantizeLinear); compared as the float
    // r1 it would be far below 20 dB. The match reads the QuantizeLinear output instead.
    assert_eq!(report["layers"][0]["exposed"], "r1_QuantizeLinear_Output");
    let unmatched = report["unmatched"].as_array().unwrap();
    let reasons = |reason: &str| {
        unmatched.iter().filter(|u| u["reason"] == reason).map(|u| u["tensor"].as_str().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(reasons("not_in_model"), ["c1", "c2", "c3"], "the Conv outputs the quantizer fused away");
    assert!(reasons("dequantized_constant").contains(&"conv2.w_DequantizeLinear_Output"));
    assert_eq!(reasons("quantized_input"), ["input_QuantizeLinear_Output", "input_DequantizeLinear_Output"]);
    assert_eq!(report["instrumentation"]["exposed_in_model"], 9, "probs is a graph output already");

    let table = run(Command::new(bin("npugate"))
        .args(["numerics", "--local", "--model", text(&model("normcnn_qdq.onnx"))])
        .args(["--reference-model", text(&model("normcnn.onnx")), "--out", text(&out)]));
    assert_eq!(table.status.code(), Some(0), "an earlier report's directory is reused: {}", describe(&table));
    let stdout = String::from_utf8_lossy(&table.stdout);
    assert!(stdout.contains("PASS no divergence") && stdout.contains("r2      conv2 (Conv)"), "{stdout}");
    assert!(
        stdout.contains("3 float tensors with no counterpart in the model (fused away or renamed): c1, c2, c3"),
        "{stdout}"
    );
}

#[test]
fn a_float_model_against_itself_is_identical_at_every_layer() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("numerics");
    let float = model("smallcnn.onnx");
    let output = numerics(&float, &float, &out, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let report = report(&output, &out);
    let layers = sqnr_by_layer(&report);
    assert_eq!(layers.len(), 12, "every node output of smallcnn: {layers:?}");
    assert!(layers.iter().all(|(_, s)| *s == f64::INFINITY), "{layers:?}");
    assert!(report["unmatched"].as_array().unwrap().is_empty());
    assert_eq!(report["instrumentation"]["model"], report["instrumentation"]["reference"], "one instrumented copy");
    let probs = &report["layers"][11]["results"][0];
    assert_eq!(probs["top1_agreement_pct"], 100.0, "class scores keep top-1");
    assert!(report["layers"][0]["results"][0].get("top1_agreement_pct").is_none(), "feature maps do not");
}

/// A model whose tensor names the harness renames alike (`a/b:0` and `a_b_0` both become
/// `a_b_0.npy`): `x → Relu → a/b:0 → Neg → a_b_0 → Mul(k) → y`, written to `path`.
fn model_with_colliding_names(path: &Path, k: f32) {
    let script = "import sys, numpy as np, onnx\n\
        from onnx import helper, numpy_helper, TensorProto as T\n\
        k = numpy_helper.from_array(np.array(float(sys.argv[2]), np.float32), 'k')\n\
        nodes = [helper.make_node('Relu', ['x'], ['a/b:0'], name='relu/0'), helper.make_node('Neg', ['a/b:0'], ['a_b_0'], name='neg'),\n\
                 helper.make_node('Mul', ['a_b_0', 'k'], ['y'], name='scale')]\n\
        g = helper.make_graph(nodes, 'g', [helper.make_tensor_value_info('x', T.FLOAT, [2, 8])],\n\
                              [helper.make_tensor_value_info('y', T.FLOAT, [2, 8])], [k])\n\
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)], ir_version=8), sys.argv[1])";
    let made = run(Command::new(python()).args(["-c", script]).arg(path).arg(k.to_string()));
    assert!(made.status.success(), "{}", describe(&made));
}

#[test]
fn tensors_are_found_by_position_not_by_their_renamed_files() {
    let work = tempfile::tempdir().unwrap();
    let (m, r) = (work.path().join("m.onnx"), work.path().join("r.onnx"));
    model_with_colliding_names(&m, 1.5);
    model_with_colliding_names(&r, 1.0);
    let out = work.path().join("numerics");
    let output = numerics(&m, &r, &out, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let report = report(&output, &out);
    let layers = sqnr_by_layer(&report);
    assert_eq!(layers[0], ("a/b:0".to_string(), f64::INFINITY));
    assert_eq!(layers[1], ("a_b_0".to_string(), f64::INFINITY), "a mix-up of the two files would compare x with -x");
    assert!(
        (layers[2].1 - 20.0 * 2f64.log10()).abs() < 0.01,
        "y = 1.5·a_b_0 against 1·a_b_0: 6.02 dB, got {}",
        layers[2].1
    );
    assert_eq!(report["first_divergence"]["node"], "scale");

    // Tensors named on the command line, in either model's terms.
    let only = work.path().join("only");
    let output = numerics(&m, &r, &only, &["--tensors", "a/b:0", "y"]);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let report = self::report(&output, &only);
    let names: Vec<&str> = report["layers"].as_array().unwrap().iter().map(|l| l["tensor"].as_str().unwrap()).collect();
    assert_eq!(names, ["a/b:0", "y"]);
    assert_eq!(report["layers"][1]["inputs"], serde_json::json!(["a/b:0"]), "the nearest compared layer upstream");
    assert_eq!(report["tensors"], "names");
}

#[test]
fn bad_input_is_one_line_naming_the_fix() {
    let work = tempfile::tempdir().unwrap();
    let float = model("smallcnn.onnx");
    let cases: [(&[&str], &str); 4] = [
        (&["--tensors", "nope"], "no tensor [\"nope\"] in either model"),
        (&["--tensors", "boundaries"], "no tensor crosses a partition boundary"),
        (&["--min-sqnr-db", "NaN"], "--min-sqnr-db"),
        (&["--reference-model", "/nonexistent/float.onnx"], "/nonexistent/float.onnx not found"),
    ];
    for (extra, needle) in cases {
        let out = work.path().join(format!("out-{}", extra[0].trim_start_matches('-')));
        let mut command = Command::new(bin("npugate"));
        command.args(["numerics", "--local", "--model", text(&float), "--out", text(&out)]).args(extra);
        let output = run(&mut command);
        assert_eq!(output.status.code(), Some(2), "{extra:?}: {}", describe(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{extra:?}: {}", describe(&output));
        assert_eq!(stderr.lines().filter(|l| l.contains("error")).count(), 1, "{extra:?}: {}", describe(&output));
    }
    let foreign = work.path().join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), "mine").unwrap();
    let refused = run(Command::new(bin("npugate")).args([
        "numerics",
        "--local",
        "--model",
        text(&float),
        "--out",
        text(&foreign),
    ]));
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("choose another --out"));
    assert_eq!(std::fs::read_to_string(foreign.join("notes.txt")).unwrap(), "mine");
}

#[test]
fn a_rack_of_devices_gets_one_table_of_layers_by_device() {
    let rig = Rig::up(&[6311, 6312]);
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("rack");
    let (broken, float) = (model("normcnn_qdq_broken.onnx"), model("normcnn.onnx"));
    let output = run(rig
        .command(bin("npugate"))
        .args(["numerics", "--device", "all", "--runtime", "ort-1.31.1-linux-x86_64"])
        .args(["--model", text(&broken), "--reference-model", text(&float), "--out", text(&out)]));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let header = stdout.lines().find(|l| l.trim_start().starts_with('#')).unwrap_or_else(|| panic!("{stdout}"));
    assert!(header.contains("127.0.0.1:6311") && header.contains("127.0.0.1:6312"), "{stdout}");
    let r2 = stdout.lines().find(|l| l.contains("conv2 (Conv)")).unwrap();
    assert_eq!(r2.matches('◀').count(), 2, "both devices diverge at conv2: {stdout}");
    assert_eq!(stdout.matches("FAIL first divergence on 127.0.0.1:").count(), 2, "{stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("numerics.json")).unwrap()).unwrap();
    assert_eq!(report["targets"].as_array().unwrap().len(), 2);
    assert_eq!(report["first_divergence"]["targets"], serde_json::json!(["127.0.0.1:6311", "127.0.0.1:6312"]));
    for dir in ["127.0.0.1_6311", "127.0.0.1_6312"] {
        assert!(
            out.join(dir).join("result.json").is_file() && out.join(dir).join("device_run.json").is_file(),
            "{dir}"
        );
    }
    assert!(out.join("reference/result.json").is_file(), "one reference run on the host for every device");
}

/// Per layer of a `numerics.json`, the SQNR recomputed in Python with onnxruntime: both models
/// run on `x.npy` with the layer's tensors as outputs — for a QDQ layer the output of the
/// `DequantizeLinear` named in the report — and SQNR = 10·log10(Σref² / Σ(ref−out)²).
const PYTHON_SQNR: &str = r#"
import json, sys, numpy as np, onnx, onnxruntime as ort
from onnx import helper
report, model, reference, x = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], np.load(sys.argv[4])
def run(path, names):
    m = onnx.load(path)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names if n not in have)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(names, s.run(names, {s.get_inputs()[0].name: x})))
dq_out = {n.name: n.output[0] for n in onnx.load(model).graph.node if n.op_type == "DequantizeLinear"}
layers = report["layers"]
probes = [dq_out[l["dequantized_with"]] if l.get("dequantized_with") else l["exposed"] for l in layers]
out, ref = run(model, probes), run(reference, [l["tensor"] for l in layers])
for l, p in zip(layers, probes):
    r, o = ref[l["tensor"]].astype(np.float64), out[p].astype(np.float64)
    noise = ((r - o) ** 2).sum()
    print(l["tensor"], "inf" if noise == 0 else 10 * np.log10((r ** 2).sum() / noise))
"#;

#[test]
fn every_layer_agrees_with_an_independent_computation_in_python() {
    let work = tempfile::tempdir().unwrap();
    let x = work.path().join("x.npy");
    let made = run(Command::new(python()).args(["-c", "import sys, numpy as np; np.save(sys.argv[1], np.random.default_rng(3).random((1, 3, 64, 64), dtype=np.float32))"]).arg(&x));
    assert!(made.status.success(), "{}", describe(&made));
    let (broken, float) = (model("normcnn_qdq_broken.onnx"), model("normcnn.onnx"));
    let out = work.path().join("numerics");
    let input = format!("input={}", text(&x));
    let output = numerics(&broken, &float, &out, &["--input", &input]);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let ours = sqnr_by_layer(&report(&output, &out));
    let python = run(Command::new(python())
        .args(["-c", PYTHON_SQNR])
        .arg(out.join("numerics.json"))
        .arg(&broken)
        .arg(&float)
        .arg(&x));
    assert!(python.status.success(), "{}", describe(&python));
    let theirs: Vec<(String, f64)> = String::from_utf8_lossy(&python.stdout)
        .lines()
        .map(|line| {
            let (tensor, value) = line.rsplit_once(' ').unwrap();
            (tensor.to_string(), value.parse().unwrap())
        })
        .collect();
    assert_eq!(ours.len(), theirs.len());
    for ((tensor, a), (other, b)) in ours.iter().zip(&theirs) {
        assert_eq!(tensor, other);
        assert!((a - b).abs() < 1e-3, "{tensor}: npugate {a} dB, Python {b} dB");
    }
}

#[test]
fn the_host_htp_emulator_of_two_chipsets_finds_the_broken_layer_on_each() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("htp");
    let (broken, float) = (model("normcnn_qdq_broken.onnx"), model("normcnn.onnx"));
    let output = run(Command::new(bin("npugate"))
        .args(["numerics", "--ep", "qnn", "--soc", "SM8650", "--soc", "SM8350", "--json"])
        .args(["--model", text(&broken), "--reference-model", text(&float), "--out", text(&out)]));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let report = report(&output, &out);
    assert_eq!(
        report["first_divergence"]["targets"],
        serde_json::json!(["SM8650", "SM8350"]),
        "{}",
        report["first_divergence"]
    );
    assert_eq!(report["first_divergence"]["node"], "conv2");
    for target in report["targets"].as_array().unwrap() {
        // The instrumented model really ran on Qualcomm's HTP (emulated), not on the CPU EP.
        assert!(target["placement"]["nodes_by_ep"]["QNNExecutionProvider"].as_u64().unwrap_or(0) > 40, "{target:#}");
    }
    // The clean first layer carries the quantization's error, not a divergence.
    let r1 = report["layers"][0]["results"][0]["sqnr_db"].as_f64().unwrap();
    assert!((30.0..80.0).contains(&r1), "{r1}");

    let refused = run(Command::new(bin("npugate")).args(["numerics", "--soc", "SM8650", "--model", text(&broken)]));
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("need --ep qnn"), "{}", describe(&refused));
}
