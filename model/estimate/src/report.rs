//! `npugate estimate`'s two finished results as reports of the one report stream
//! ([`npugate_result::report`]): a model's [`EstimateReport`], and without a model the fitted
//! latency models with their errors ([`CalibrationReport`]).

use npugate_result::contract::{EXIT_FAIL, EXIT_PASS};
use npugate_result::report::{json_of, Report};
use serde::Serialize;

use crate::{EstimateReport, Estimator, ReferenceSource, SocCalibration, LABEL, TERMS};

/// Schema of `npugate estimate --json` without a model: [`CalibrationReport`].
pub const CALIBRATION_SCHEMA: &str = "npugate.estimate-calibration/1";

/// `npugate estimate` of a model: what was read of the graph, then one line per SoC; exit 1 when
/// no SoC could be estimated.
impl Report for EstimateReport {
    fn schema(&self) -> &str {
        &self.schema
    }
    fn exit_code(&self) -> u8 {
        match self.socs.iter().any(|s| s.estimate_ms.is_some()) {
            true => EXIT_PASS,
            false => EXIT_FAIL,
        }
    }
    fn text(&self, _color: bool) -> String {
        let f = &self.features;
        let giga = |flops: u64| flops as f64 / 1e9;
        let unknown = match f.unknown_flops_nodes {
            0 => String::new(),
            n => format!(", {n} nodes of unknown FLOPs"),
        };
        let mut out = format!(
            "{}\nmodel {} ({}; {} layers; GFLOPs: conv {:.3}, matmul {:.3}, other {:.3}{unknown}; weights {:.1} MB, activations {:.1} MB)\nreference: {} ({})\n\n",
            self.label,
            self.model,
            f.precision.0,
            f.layers,
            giga(f.conv_flops),
            giga(f.matmul_flops),
            giga(f.other_flops),
            f.weight_bytes as f64 / 1e6,
            f.activation_bytes as f64 / 1e6,
            self.reference.release,
            self.reference.location,
        );
        for soc in &self.socs {
            out.push_str(&format!("{}\n", soc.line()));
        }
        out.push_str(
            "\nThe estimate assumes the whole graph runs on the SoC's NPU: `npugate preflight --soc S` checks that.\n",
        );
        out
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// `npugate estimate` without a model (`npugate.estimate-calibration/1`): each SoC's latency
/// model, its coefficients and its leave-one-model-out error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrationReport {
    /// Always [`CALIBRATION_SCHEMA`].
    pub schema: &'static str,
    /// What an estimate is: [`LABEL`].
    pub label: &'static str,
    /// The names of the latency model's terms, in the order of its coefficients.
    pub terms: [&'static str; TERMS.len()],
    /// The reference the latency models were fitted on.
    pub reference: ReferenceSource,
    /// One per SoC asked for.
    pub socs: Vec<CalibratedSoc>,
}

/// One SoC of a [`CalibrationReport`]: its fit, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibratedSoc {
    /// The SoC.
    pub soc: String,
    /// Its fitted latency model and error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<SocCalibration>,
    /// Why it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_estimate: Option<String>,
}

impl CalibrationReport {
    /// The latency models `estimator` fits for `socs`.
    pub fn of(estimator: &Estimator, socs: &[String]) -> CalibrationReport {
        let socs = socs
            .iter()
            .map(|soc| {
                let (calibration, no_estimate) = match estimator.calibrate(soc) {
                    Ok(calibration) => (Some(calibration), None),
                    Err(why) => (None, Some(why)),
                };
                CalibratedSoc { soc: soc.clone(), calibration, no_estimate }
            })
            .collect();
        CalibrationReport {
            schema: CALIBRATION_SCHEMA,
            label: LABEL,
            terms: TERMS,
            reference: estimator.reference.source.clone(),
            socs,
        }
    }
}

/// The table of fits (rows, models, median and p90 error, devices), each SoC's latency model, and
/// how the errors were measured; exit 1 when no SoC could be fitted.
impl Report for CalibrationReport {
    fn schema(&self) -> &str {
        self.schema
    }
    fn exit_code(&self) -> u8 {
        match self.socs.iter().any(|s| s.calibration.is_some()) {
            true => EXIT_PASS,
            false => EXIT_FAIL,
        }
    }
    fn text(&self, _color: bool) -> String {
        let mut out =
            format!("{}\nreference: {} ({})\n\n", self.label, self.reference.release, self.reference.location);
        out.push_str(&format!(
            "{:<8} {:>5} {:>7} {:>9} {:>6}  FITTED ON\n",
            "SOC", "ROWS", "MODELS", "MEDIAN ERR", "P90 ERR"
        ));
        for CalibratedSoc { soc, calibration, no_estimate } in &self.socs {
            match (calibration, no_estimate) {
                (Some(c), _) => out.push_str(&format!(
                    "{soc:<8} {:>5} {:>7} {:>9.0}% {:>6.0}%  {}\n",
                    c.error.rows,
                    c.error.models,
                    100.0 * c.error.median_rel,
                    100.0 * c.error.p90_rel,
                    c.devices.join(", ")
                )),
                (None, why) => out.push_str(&format!("{soc:<8} no estimate: {}\n", why.as_deref().unwrap_or_default())),
            }
        }
        for CalibratedSoc { soc, calibration, .. } in &self.socs {
            if let Some(c) = calibration {
                let terms: Vec<String> = TERMS
                    .iter()
                    .zip(&c.model.coefficients)
                    .filter(|(_, v)| **v > 0.0)
                    .map(|(term, v)| format!("{v:.4} {term}"))
                    .collect();
                out.push_str(&format!("\n{soc} latency model: {}\n", terms.join(" + ")));
            }
        }
        out.push_str(
            "\nErrors are leave-one-model-out: each AI Hub row predicted by a fit without any row of its model.\n",
        );
        out
    }
    fn json(&self) -> String {
        json_of(self)
    }
}
