//! Energy per inference measured on a device from its battery gauge, as recorded in `energy.json`
//! (`npugate.energy/1`): the measurement or why there is none. Judged by the `max_energy_mj` rule
//! (npugate-gate's `resources`).

use crate::contract::{Document, Schema};
use serde::{Deserialize, Serialize};

/// Schema identifier of `energy.json`.
pub const ENERGY_SCHEMA: &str = "npugate.energy/1";

/// Energy per inference of a device run, or why it was not measured (`energy.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EnergyRecord {
    /// Always [`ENERGY_SCHEMA`].
    pub schema: String,
    /// The measurement, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<EnergyMeasurement>,
    /// Why there is none: no battery gauge the shell can read, a charging device, a window too
    /// short for the gauge, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_measured: Option<String>,
}

impl Document for EnergyRecord {
    const SCHEMA: Schema = Schema::new(ENERGY_SCHEMA);
}

impl EnergyRecord {
    /// A record of a measurement.
    pub fn measured(measurement: EnergyMeasurement) -> EnergyRecord {
        EnergyRecord { schema: ENERGY_SCHEMA.into(), measured: Some(measurement), not_measured: None }
    }

    /// A record of why nothing was measured.
    pub fn not_measured(why: impl Into<String>) -> EnergyRecord {
        EnergyRecord { schema: ENERGY_SCHEMA.into(), measured: None, not_measured: Some(why.into()) }
    }

    /// `1.23 mJ ± 0.08 per inference (…)`, or why it was not measured.
    pub fn describe(&self) -> String {
        match (&self.measured, &self.not_measured) {
            (Some(m), _) => format!(
                "{:.3} mJ ± {:.3} per inference ({:.0} mW over idle, {} inferences in {:.1} s)",
                m.energy_mj,
                m.error_mj,
                m.busy_mw - m.idle_mw,
                m.inferences,
                m.window_s
            ),
            (None, Some(why)) => format!("not measured: {why}"),
            (None, None) => "not measured".into(),
        }
    }
}

/// Energy per inference from the battery gauge: the draw over a window of back-to-back inferences
/// less the idle draw, times the window, over the inferences.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EnergyMeasurement {
    /// Energy per inference above idle, millijoules.
    pub energy_mj: f64,
    /// Its stated error (±, millijoules): twice the standard error of the busy and idle means
    /// (each over the gauge's distinct readings) plus one gauge step.
    pub error_mj: f64,
    /// How it was measured, one sentence.
    pub method: String,
    /// The gauge read (`/sys/class/power_supply/battery`).
    pub gauge: String,
    /// Mean draw over the inference window, milliwatts.
    pub busy_mw: f64,
    /// Mean draw over the idle window before the run, milliwatts.
    pub idle_mw: f64,
    /// Seconds of the inference window.
    pub window_s: f64,
    /// Inferences in it.
    pub inferences: u64,
    /// Seconds of the idle window.
    pub idle_s: f64,
    /// Gauge samples in the inference and the idle window.
    pub samples: [usize; 2],
    /// The gauge's resolution as seen in the samples.
    pub resolution: GaugeResolution,
}

/// How finely and how often the gauge reports, as seen in the samples.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GaugeResolution {
    /// The smallest change of the current reading, µA (`None`: it never changed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step_ua: Option<f64>,
    /// The median time between changes of the reading, seconds (`None`: fewer than two changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_interval_s: Option<f64>,
    /// Seconds between samples.
    pub sample_interval_s: f64,
}
