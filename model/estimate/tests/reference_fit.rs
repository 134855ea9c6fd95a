//! The estimator on the committed reference (data/aihub/: AI Hub's published runs and the features
//! of the locally rebuilt architectures), offline.

use npugate_estimate::{Estimator, Reference};

fn estimator() -> Estimator {
    Estimator::new(Reference::embedded().expect("the built-in reference reads"))
}

#[test]
fn the_socs_ai_hub_measured_get_a_latency_model_with_its_held_out_error() {
    let estimator = estimator();
    for soc in ["SM8650", "SM8750", "SM8850"] {
        let calibration = estimator.calibrate(soc).unwrap();
        let error = &calibration.error;
        assert!(error.models >= 10 && error.rows >= error.models, "{soc}: {error:?}");
        assert_eq!(error.rows, calibration.held_out.len());
        assert!(error.median_rel <= error.p90_rel, "{soc}: {error:?}");
        // The goal is a median ≤ 30%; a latency model that cannot reach half of that budget
        // doubled would be a broken fit, not a noisy one.
        assert!(error.median_rel < 0.6, "{soc}: {error:?}");
        assert!(calibration.model.coefficients.iter().all(|c| *c >= 0.0), "{:?}", calibration.model);
        assert!(calibration.devices.iter().all(|d| !d.is_empty()));
    }
}

/// The estimate on `soc` of a held-out model's committed features, and AI Hub's published latency
/// on `device`.
fn held_out(estimator: &Estimator, model: &str, soc: &str, device: &str) -> (npugate_estimate::SocEstimate, f64) {
    let reference = &estimator.reference;
    assert!(reference.source.held_out.contains(&model.to_string()), "{model}");
    assert!(reference.features_of(model, "float").is_none(), "{model} held out of the fit");
    let features = &reference
        .features
        .held_out_models
        .iter()
        .find(|m| m.model == model && m.precision == "float")
        .expect("the held-out model's features are committed")
        .features;
    let published = reference
        .rows_of(soc)
        .find(|r| r.model == model && r.precision == "float" && r.device == device)
        .and_then(|r| r.inference_time_ms)
        .unwrap();
    (estimator.estimate(soc, features), published)
}

/// Asserts the estimate lies within the p90 error it states of `published`.
fn within_stated_error(estimate: &npugate_estimate::SocEstimate, published: f64) {
    let (ms, error) = (estimate.estimate_ms.unwrap(), estimate.error.clone().unwrap());
    let off = (ms - published).abs() / published;
    assert!(
        off <= error.p90_rel,
        "estimate {ms:.3} ms is {:.0}% off {published} ms; stated p90 {:.0}%",
        100.0 * off,
        100.0 * error.p90_rel
    );
}

#[test]
fn the_held_out_float_resnet50_on_the_galaxy_s24_lands_within_the_error_the_estimate_states() {
    let estimator = estimator();
    let (estimate, published) = held_out(&estimator, "resnet50", "SM8650", "Samsung Galaxy S24");
    assert_eq!(published, 1.487);
    within_stated_error(&estimate, published);
    assert!(
        estimate.line().contains("ESTIMATE") && estimate.line().contains("not a measurement"),
        "{}",
        estimate.line()
    );
}

#[test]
fn the_held_out_yolov8n_lands_within_the_stated_error_and_segformer_b0_gets_none() {
    let estimator = estimator();
    // A detector at 640×640 (the fit has YOLO11n and its segmenter, never YOLOv8n): 3.606 ms on the S24.
    let (yolo, published) = held_out(&estimator, "yolov8_det", "SM8650", "Samsung Galaxy S24");
    assert_eq!(published, 3.606);
    within_stated_error(&yolo, published);
    // SegFormer-b0 at 512×512: feature maps 66× its weights, past every fitted graph: no estimate.
    let (segformer, published) = held_out(&estimator, "segformer_base", "SM8650", "Samsung Galaxy S24");
    assert_eq!(published, 82.391);
    assert!(segformer.estimate_ms.is_none());
    let why = segformer.no_estimate.unwrap();
    assert!(why.contains("activation bytes per weight byte 66.2"), "{why}");
}

#[test]
fn a_soc_without_reference_rows_gets_no_estimate_and_says_why() {
    let estimator = estimator();
    let features = &estimator.reference.features.models[0].features;
    let none = estimator.estimate("SM8350", features);
    assert!(none.estimate_ms.is_none());
    assert!(
        none.no_estimate.as_deref().unwrap().contains("AI Hub published no onnx runs on a SM8350 device"),
        "{none:?}"
    );
    // RB3 Gen 2 (QCS6490 = npugate's QCM6490): AI Hub ran every onnx row there on the CPU.
    let rb3 = estimator.estimate("QCS6490", features);
    assert_eq!(rb3.soc, "QCM6490");
    assert!(rb3.no_estimate.as_deref().unwrap().contains("0 ran whole on the NPU"), "{rb3:?}");
    let mut unknown = features.clone();
    unknown.precision = npugate_estimate::Precision("w4a16".into());
    let none = estimator.estimate("SM8650", &unknown);
    assert!(none.no_estimate.as_deref().unwrap().contains("no w4a16 models"), "{none:?}");
}

#[test]
fn the_calibration_report_has_a_row_per_soc_and_names_a_soc_without_runs() {
    use npugate_result::report::Report;
    let estimator = estimator();
    let socs = ["SM8650".to_string(), "SM0000".to_string()];
    let report = npugate_estimate::CalibrationReport::of(&estimator, &socs);
    assert_eq!(report.exit_code(), 0, "SM8650 is fitted");
    let text = report.text(false);
    let fitted = estimator.calibrate("SM8650").unwrap();
    let row = text.lines().find(|line| line.starts_with("SM8650 ")).expect("a row for SM8650");
    assert!(row.contains(&format!(" {} ", fitted.error.rows)), "{row}");
    let why = estimator.calibrate("SM0000").unwrap_err();
    assert!(text.contains(&format!("SM0000   no estimate: {why}")), "{text}");
    let json: serde_json::Value = serde_json::from_str(&report.json()).unwrap();
    assert_eq!(json["schema"], npugate_estimate::CALIBRATION_SCHEMA);
    assert_eq!(json["socs"][0]["calibration"]["error"]["rows"], fitted.error.rows);
    assert_eq!(json["socs"][1]["no_estimate"], why.as_str());
    assert!(json["socs"][1].get("calibration").is_none());
    let nothing = npugate_estimate::CalibrationReport::of(&estimator, &socs[1..]);
    assert_eq!(nothing.exit_code(), 1, "no SoC fitted");
}
