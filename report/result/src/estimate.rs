//! What a per-SoC latency ESTIMATE says (npugate-estimate computes it from the graph; the gate's
//! `max_estimated_ms` rule judges it): the data, below both.

use serde::{Deserialize, Serialize};

/// The error of a SoC's latency model on its reference rows, each row predicted by a model
/// fitted without any row of the same model (leave one model out).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldOutError {
    /// Median of |predicted − published| / published.
    pub median_rel: f64,
    /// 90th percentile of the same.
    pub p90_rel: f64,
    /// Reference rows predicted.
    pub rows: usize,
    /// Distinct models among them.
    pub models: usize,
}

/// The estimate for one SoC, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SocEstimate {
    /// The SoC.
    pub soc: String,
    /// Estimated latency of one inference on the SoC's NPU, ms; `None` with `no_estimate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_ms: Option<f64>,
    /// Why there is no estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_estimate: Option<String>,
    /// The leave-one-model-out error of the SoC's latency model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<HeldOutError>,
    /// The devices the SoC's latency model was fitted on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
}

impl SocEstimate {
    /// No estimate for `soc`, and why.
    pub fn none(soc: &str, why: String) -> SocEstimate {
        SocEstimate { soc: soc.into(), estimate_ms: None, no_estimate: Some(why), error: None, devices: Vec::new() }
    }

    /// `1.52 ms (ESTIMATE; ±28% p90, 12% median)` or `-`: one cell of a table.
    pub fn cell(&self) -> String {
        match (self.estimate_ms, &self.error) {
            (Some(ms), Some(error)) => format!("~{ms:.2} ms ±{:.0}%", 100.0 * error.p90_rel),
            _ => "-".into(),
        }
    }

    /// One line for a terminal: the estimate with its error, or why there is none.
    pub fn line(&self) -> String {
        match (self.estimate_ms, &self.error) {
            (Some(ms), Some(e)) => format!(
                "{}: ESTIMATE {ms:.3} ms (not a measurement; leave-one-model-out error on {} AI Hub rows of {} models: median {:.0}%, p90 {:.0}%; fitted on {})",
                self.soc,
                e.rows,
                e.models,
                100.0 * e.median_rel,
                100.0 * e.p90_rel,
                self.devices.join(", ")
            ),
            _ => format!("{}: no estimate: {}", self.soc, self.no_estimate.as_deref().unwrap_or("unknown")),
        }
    }
}
