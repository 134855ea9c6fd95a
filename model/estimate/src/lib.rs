//! A per-SoC latency ESTIMATE — never a measurement — of a model that runs whole on a Snapdragon's
//! NPU, from its graph, with the error the estimate makes on real devices.
//!
//! The reference ([`reference`]) is Qualcomm AI Hub's published `onnx` runs (ONNX Runtime with the
//! QNN EP on real phones and boards) and the graph features ([`features`]) of the same
//! architectures rebuilt locally. Per SoC a small latency model ([`fit`]) is fitted on the rows that
//! ran whole on the NPU, and its error is measured by leaving one model out at a time. Both are
//! computed when asked (a few milliseconds), from the reference built in or one given. A graph
//! outside the [`domain`] of those rows gets no estimate, and says why.

#![warn(missing_docs)]

pub mod domain;
pub mod features;
pub mod fit;
pub mod reference;
pub mod report;

use serde::{Deserialize, Serialize};

pub use features::{GraphFeatures, MacClass, Precision};
pub use fit::{HeldOutError, HeldOutPrediction, LatencyModel, TERMS};
pub use npugate_result::estimate::SocEstimate;
pub use reference::{chip, Reference, ReferenceError, ReferenceSource};
pub use report::{CalibratedSoc, CalibrationReport, CALIBRATION_SCHEMA};

/// Schema of `npugate estimate --json`.
pub const ESTIMATE_SCHEMA: &str = "npugate.estimate/1";
/// What every estimate says it is.
pub const LABEL: &str = "ESTIMATE of the device latency from the graph (a model fitted on Qualcomm AI Hub's published device runs), not a measurement";

/// One SoC's fitted latency model with its error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SocCalibration {
    /// The SoC, in npugate's names (`SM8650`, `QCM6490`).
    pub soc: String,
    /// The latency model fitted on every reference row of the SoC.
    pub model: LatencyModel,
    /// Its error, each row predicted with its model left out.
    pub error: HeldOutError,
    /// Those predictions.
    pub held_out: Vec<HeldOutPrediction>,
    /// The devices whose rows it was fitted on.
    pub devices: Vec<String>,
}

/// The latency models of every SoC with reference rows.
#[derive(Debug, Clone)]
pub struct Estimator {
    /// The reference fitted on.
    pub reference: Reference,
}

impl Estimator {
    /// An estimator on `reference`.
    pub fn new(reference: Reference) -> Estimator {
        Estimator { reference }
    }

    /// The SoC's latency model and its error, or why it has none (no published rows, too few
    /// models that ran whole on the NPU).
    pub fn calibrate(&self, soc: &str) -> Result<SocCalibration, String> {
        let name = chip(soc);
        let published = self.reference.rows_of(&name).count();
        if published == 0 {
            return Err(format!(
                "AI Hub published no onnx runs on a {name} device in {}: nothing to fit a latency model on (SoCs with runs: {})",
                self.reference.source.release,
                self.reference.socs().join(", ")
            ));
        }
        let rows = self.reference.fit_rows(&name);
        let models: std::collections::BTreeSet<&str> = rows.iter().map(|(r, _)| r.model.as_str()).collect();
        if models.len() < fit::MIN_MODELS {
            let whole = self.reference.rows_of(&name).filter(|r| r.whole_on_npu()).count();
            return Err(format!(
                "of AI Hub's {published} onnx runs on {name}, {whole} ran whole on the NPU and {} of them are reference models npugate rebuilt ({} models; a fit needs {})",
                rows.len(),
                models.len(),
                fit::MIN_MODELS
            ));
        }
        let labelled: Vec<(&str, &str, &str, &GraphFeatures, f64)> = rows
            .iter()
            .map(|(r, f)| {
                (r.model.as_str(), r.precision.as_str(), r.device.as_str(), *f, r.inference_time_ms.unwrap_or(0.0))
            })
            .collect();
        let held_out = fit::leave_one_model_out(&labelled);
        let error = fit::held_out_error(&held_out).ok_or("no reference rows")?;
        let fitted: Vec<(&GraphFeatures, f64)> = labelled.iter().map(|r| (r.3, r.4)).collect();
        let mut devices: Vec<String> = rows.iter().map(|(r, _)| r.device.clone()).collect();
        devices.sort();
        devices.dedup();
        Ok(SocCalibration { soc: name, model: LatencyModel::fit(&fitted), error, held_out, devices })
    }

    /// The estimate of a graph on `soc`, or why there is none.
    pub fn estimate(&self, soc: &str, features: &GraphFeatures) -> SocEstimate {
        let calibration = match self.calibrate(soc) {
            Ok(calibration) => calibration,
            Err(why) => return SocEstimate::none(&chip(soc), why),
        };
        if !self.reference.precisions().contains(&features.precision) {
            let known: Vec<String> = self.reference.precisions().into_iter().map(|p| p.0).collect();
            return SocEstimate::none(
                &calibration.soc,
                format!(
                    "the model is {}, and the reference has no {} models to fit on (it has {})",
                    features.precision.0,
                    features.precision.0,
                    known.join(", ")
                ),
            );
        }
        let fitted: Vec<&GraphFeatures> = self.reference.fit_rows(soc).into_iter().map(|(_, f)| f).collect();
        if let Some(why) = domain::Domain::of(&fitted).outside(features) {
            return SocEstimate::none(&calibration.soc, why);
        }
        SocEstimate {
            soc: calibration.soc,
            estimate_ms: Some(calibration.model.predict(features)),
            no_estimate: None,
            error: Some(calibration.error),
            devices: calibration.devices,
        }
    }
}

/// `npugate estimate --json`: the graph's features and the estimate per SoC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EstimateReport {
    /// Always [`ESTIMATE_SCHEMA`].
    pub schema: String,
    /// What this is: [`LABEL`].
    pub label: String,
    /// The model as given.
    pub model: String,
    /// Its sha256.
    pub model_sha256: String,
    /// What the estimate read of it.
    pub features: GraphFeatures,
    /// The reference the latency models were fitted on.
    pub reference: ReferenceSource,
    /// One per SoC asked for.
    pub socs: Vec<SocEstimate>,
}
