//! A saved baseline (`npugate baseline save`): the latencies, the node placement and the fingerprint
//! of one run, written as versioned JSON (`npugate.baseline/1`).

use std::collections::BTreeMap;
use std::path::Path;

use npugate_result::RunResult;
use profile_parser::report::PlacementReport;
use serde::{Deserialize, Serialize};

use crate::fingerprint::Fingerprint;

/// Schema identifier of a baseline file.
pub const BASELINE_SCHEMA: &str = "npugate.baseline/1";

/// What a later run is compared against.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Baseline {
    /// Always [`BASELINE_SCHEMA`].
    pub schema: String,
    /// Where the baseline came from (the result directory as given).
    pub source: String,
    /// Identity of the device, runtime and model.
    pub fingerprint: Fingerprint,
    /// Every timed run, in run order (the median ratio is bootstrapped from these).
    pub latencies_ns: Vec<u64>,
    /// Node placement, when a placement report was available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<BaselinePlacement>,
}

/// Where each node ran in the baseline.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BaselinePlacement {
    /// The preferred EP of the baseline run.
    pub preferred_ep: String,
    /// Node name → EP it ran on.
    pub nodes: BTreeMap<String, String>,
}

/// Errors reading or writing a baseline.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// File path.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The file is not a valid baseline.
    #[error("{path} is not a valid npugate baseline: {message}")]
    Invalid {
        /// File path.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The run has no latencies to save.
    #[error("{dir} has no timed runs; a baseline needs latencies (rerun with --runs > 0)")]
    Empty {
        /// The result directory.
        dir: String,
    },
}

impl Baseline {
    /// Builds a baseline from a run and its placement report.
    pub fn from_run(run: &RunResult, placement: Option<&PlacementReport>, source: &str) -> Result<Baseline, BaselineError> {
        if run.timings.latencies_ns.is_empty() {
            return Err(BaselineError::Empty { dir: source.to_string() });
        }
        Ok(Baseline {
            schema: BASELINE_SCHEMA.to_string(),
            source: source.to_string(),
            fingerprint: Fingerprint::of(run),
            latencies_ns: run.timings.latencies_ns.clone(),
            placement: placement.map(|report| BaselinePlacement {
                preferred_ep: report.preferred_ep.clone(),
                nodes: report.nodes.iter().map(|n| (n.name.clone(), n.ep.clone())).collect(),
            }),
        })
    }

    /// Reads and validates a baseline file.
    pub fn read(path: &Path) -> Result<Baseline, BaselineError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| BaselineError::Io { path: shown.clone(), source })?;
        let invalid = |message: String| BaselineError::Invalid { path: shown.clone(), message };
        let probe: serde_json::Value = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        let found = probe.get("schema").and_then(|s| s.as_str()).unwrap_or("<missing>");
        if found != BASELINE_SCHEMA {
            return Err(invalid(format!(
                "schema {found:?}, this npugate reads {BASELINE_SCHEMA:?} (save it again with `npugate baseline save`)"
            )));
        }
        serde_json::from_value(probe).map_err(|e| invalid(e.to_string()))
    }

    /// Writes the baseline as pretty JSON.
    pub fn write(&self, path: &Path) -> Result<(), BaselineError> {
        let io = |source| BaselineError::Io { path: path.display().to_string(), source };
        let json = serde_json::to_vec_pretty(self).map_err(|e| io(std::io::Error::other(e)))?;
        std::fs::write(path, json).map_err(io)
    }
}
