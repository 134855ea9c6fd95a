//! `npugate estimate`: an ESTIMATE of a model's device latency from its graph, fitted on AI Hub's
//! published runs (the reference built into npugate), on a ResNet-50 npugate's reference never saw
//! (the onnx wheel's light_resnet50: another exporter, BatchNormalization unfused).

use std::process::Command;

use npugate_e2e::{bin, describe, model, run};
use serde_json::Value;

#[test]
fn a_resnet50_is_estimated_per_soc_with_its_error_and_a_soc_without_runs_says_why() {
    let out = tempfile::tempdir().unwrap();
    let output = run(Command::new(bin("npugate"))
        .args(["estimate", "--soc", "SM8650", "--soc", "SM8350", "--json"])
        .arg("--model")
        .arg(model("resnet50.onnx"))
        .arg("--out")
        .arg(out.path().join("estimate")));
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["schema"], "npugate.estimate/1");
    assert!(report["label"].as_str().unwrap().contains("not a measurement"), "{report:#}");
    assert_eq!(report["features"]["precision"], "float");
    // 4.1 GMACs of convolutions: npugate's FLOPs counter on the reference run's shapes.
    let conv = report["features"]["conv_flops"].as_u64().unwrap();
    assert!((8.0e9..8.4e9).contains(&(conv as f64)), "{report:#}");
    let s24 = &report["socs"][0];
    assert_eq!(s24["soc"], "SM8650");
    let (ms, p90) = (s24["estimate_ms"].as_f64().unwrap(), s24["error"]["p90_rel"].as_f64().unwrap());
    // AI Hub's float ResNet-50 on a Galaxy S24: 1.487 ms (data/aihub/perf.csv).
    let off = (ms - 1.487).abs() / 1.487;
    assert!(
        off <= p90,
        "estimate {ms:.3} ms is {:.0}% off 1.487 ms, beyond its stated p90 {:.0}%",
        100.0 * off,
        100.0 * p90
    );
    let sm8350 = &report["socs"][1];
    assert!(sm8350["estimate_ms"].is_null());
    assert!(
        sm8350["no_estimate"].as_str().unwrap().contains("AI Hub published no onnx runs on a SM8350 device"),
        "{report:#}"
    );

    let unknown = run(Command::new(bin("npugate")).args(["estimate", "--soc", "SM9999"]));
    assert_eq!(unknown.status.code(), Some(2), "{}", describe(&unknown));
    let line = String::from_utf8_lossy(&unknown.stderr);
    assert!(line.contains("--soc SM9999: unknown SoC") && line.contains("AI Hub measured: "), "{line}");
}

#[test]
fn a_model_unlike_the_reference_gets_no_estimate_naming_what_lies_outside_and_exits_1() {
    // convstack: 10 convolutions over a large feature map with few weights — its activations
    // outweigh its weights 141 to 1, where the reference's graphs span 0.3–31 (as SegFormer-b0 at
    // 512×512, 66 to 1, whose AI Hub latency is 22× what the first fit said).
    let output = run(Command::new(bin("npugate"))
        .args(["estimate", "--soc", "SM8650", "--model"])
        .arg(model("convstack.onnx"))
        .arg("--out")
        .arg(tempfile::tempdir().unwrap().path().join("estimate")));
    assert_eq!(output.status.code(), Some(1), "no estimate for any SoC asked: {}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("SM8650: no estimate: the model is unlike the 53 reference graphs")
            && stdout.contains("activation bytes per weight byte 141 (fitted on 0.292–30.9)"),
        "{stdout}"
    );
}
