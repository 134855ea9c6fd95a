//! `npugate choose` on Qualcomm's host HTP backend under wine: a float convnet and two QDQ copies
//! judged per SoC (compile, emulated outputs against the float model on the CPU, estimate), the
//! choice per SoC, the deployment manifest, the cache, an accuracy threshold that moves one SoC,
//! and the baseline rule.

use std::path::Path;

use npugate_e2e::htp::npugate;
use npugate_e2e::{describe, model};
use serde_json::Value;

/// `npugate choose --json` of the variants in `variants` for SM8350 and SM8650 into `out`, with
/// `extra` flags: the exit code and the report.
fn choose(variants: &Path, out: &Path, extra: &[&str]) -> (Option<i32>, Value) {
    let mut args = vec!["choose", "--json", "--soc", "SM8350", "--soc", "SM8650"];
    args.extend(extra);
    let output = npugate(&args, &[Path::new("--variants"), variants, Path::new("--out"), out]);
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("choose --json prints JSON ({e}):\n{}", describe(&output)));
    (output.status.code(), report)
}

fn cell<'a>(report: &'a Value, soc: &str, variant: &str) -> &'a Value {
    report["cells"].as_array().unwrap().iter().find(|c| c["soc"] == soc && c["variant"] == variant).unwrap()
}

fn chosen<'a>(report: &'a Value, soc: &str) -> Option<&'a str> {
    report["choices"].as_array().unwrap().iter().find(|c| c["soc"] == soc).unwrap()["variant"].as_str()
}

fn sqnr(report: &Value, soc: &str, variant: &str) -> f64 {
    cell(report, soc, variant)["accuracy"]["outputs"][0]["sqnr_db"].as_f64().unwrap()
}

#[test]
fn each_soc_gets_the_variant_that_runs_whole_and_keeps_the_float_models_accuracy_and_the_manifest_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let variants = dir.path().join("variants");
    std::fs::create_dir(&variants).unwrap();
    for name in ["normcnn.onnx", "normcnn_qdq.onnx"] {
        std::fs::copy(model(name), variants.join(name)).unwrap();
    }
    let out = dir.path().join("out");
    let (code, report) = choose(&variants, &out, &[]);
    assert_eq!(report["schema"], "npugate.choose/1");
    assert_eq!(report["float"], "normcnn");
    assert!(report["inputs"].as_str().unwrap().starts_with("seeded random inputs"), "{report:#}");
    // The v68 part cannot compile the float graph (no fp16 there), and says why in QNN's words.
    let float_v68 = cell(&report, "SM8350", "normcnn");
    assert_eq!(float_v68["compiled"], false, "{float_v68:#}");
    assert!(float_v68["error"].as_str().unwrap().contains("cannot compile for SM8350 (v68)"), "{float_v68:#}");
    // The QDQ copy runs whole on both, close to the float model, and is chosen on both.
    for soc in ["SM8350", "SM8650"] {
        let qdq = cell(&report, soc, "normcnn_qdq");
        assert_eq!((qdq["whole"].as_bool(), qdq["accuracy"]["meets"].as_bool()), (Some(true), Some(true)), "{qdq:#}");
        assert_eq!(chosen(&report, soc), Some("normcnn_qdq"), "{report:#}");
    }
    assert_eq!(code, Some(0));
    // The float model on the v75 part keeps more of itself than the 8-bit copy.
    assert!(sqnr(&report, "SM8650", "normcnn") > sqnr(&report, "SM8650", "normcnn_qdq") + 3.0, "{report:#}");

    // The manifest names a file per SoC with its digest, copied beside it, and the float fallback.
    let manifest: Value = serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["schema"], "npugate.deploy-manifest/1");
    let entries = manifest["socs"].as_array().unwrap();
    assert_eq!(entries.iter().map(|e| e["soc_model"].as_str().unwrap()).collect::<Vec<_>>(), ["SM8350", "SM8650"]);
    assert_eq!(entries[0]["htp_arch"], "v68");
    for entry in entries.iter().chain([&manifest["fallback"]]) {
        let file = out.join(entry["file"].as_str().unwrap());
        let (sha256, _) = npugate_result::digest::sha256_file(&file).unwrap();
        assert_eq!(entry["sha256"].as_str(), Some(sha256.as_str()), "{entry:#}");
    }
    assert_eq!(manifest["fallback"]["variant"], "normcnn");
    for page in ["choose.md", "choose.html"] {
        let text = std::fs::read_to_string(out.join(page)).unwrap();
        assert!(text.contains("* ") && text.contains("normcnn_qdq"), "{page}: {text}");
    }

    // A threshold between the 8-bit copy's SQNR on the two SoCs moves the SoC where it misses to
    // the float model, and keeps the other; every cell comes from the cache.
    let (low, high) = (sqnr(&report, "SM8650", "normcnn_qdq"), sqnr(&report, "SM8350", "normcnn_qdq"));
    let (moves, keeps) = if low < high { ("SM8650", "SM8350") } else { ("SM8350", "SM8650") };
    assert!((high - low).abs() > 0.5, "the emulator's arithmetic differs per SoC: {low} vs {high} dB");
    let threshold = format!("{}", (low + high) / 2.0);
    let strict = dir.path().join("strict");
    let baseline = out.join("choose.json").display().to_string();
    let key = dir.path().join("key");
    assert_eq!(npugate(&["keygen"], &[Path::new("--out"), &key]).status.code(), Some(0));
    let (key, evidence) = (key.display().to_string(), dir.path().join("evidence").display().to_string());
    let (code, stricter) = choose(
        &variants,
        &strict,
        &["--min-sqnr", &threshold, "--baseline", &baseline, "--evidence", &evidence, "--signing-key", &key],
    );
    assert!(stricter["cells"].as_array().unwrap().iter().all(|c| c["cached"] == true), "{stricter:#}");
    assert!(!strict.join("runs").exists(), "nothing ran");
    assert_eq!(chosen(&stricter, keeps), Some("normcnn_qdq"));
    let moved = chosen(&stricter, moves);
    let why = stricter["choices"].as_array().unwrap().iter().find(|c| c["soc"] == moves).unwrap()["why"].clone();
    if moves == "SM8650" {
        assert_eq!(moved, Some("normcnn"), "{why}");
    } else {
        // The v68 part has no other variant: none, with each variant's reason.
        assert_eq!(moved, None, "{why}");
    }
    // The evidence bundle carries the report, the deployment manifest and every variant, signed.
    let bundle: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("evidence/manifest.json")).unwrap()).unwrap();
    let files: Vec<&str> = bundle["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    for path in [
        "choose/choose.json",
        "choose/manifest.json",
        "variants/normcnn/normcnn.onnx",
        "variants/normcnn_qdq/normcnn_qdq.onnx",
    ] {
        assert!(files.contains(&path), "{path} not in {files:?}");
    }
    let verified =
        npugate(&["verify"], &[Path::new("--pubkey"), &dir.path().join("key.pub"), &dir.path().join("evidence")]);
    assert_eq!(verified.status.code(), Some(0), "{}", describe(&verified));
    // The chosen variant changed since the baseline: exit 1, named.
    let change = stricter["changes"][0].as_str().unwrap();
    assert!(change.starts_with(moves), "{change}");
    assert_eq!(code, Some(1), "{stricter:#}");
}
