//! A saved baseline (`npugate baseline save`): the latencies, the node placement and the fingerprint
//! of one run, written as versioned JSON (`npugate.baseline/1`).

use std::collections::BTreeMap;
use std::path::Path;

use npugate_profile::report::PlacementReport;
use npugate_result::contract::{self, Document, Schema};
use npugate_result::{ReadError, RunResult};
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
    /// Every timed run not set aside as contended (see [`crate::machine`]), in run order (the
    /// median ratio is bootstrapped from these); an LLM folder's decode steps.
    pub latencies_ns: Vec<u64>,
    /// An LLM folder's time to first token per timed generation (absent for single models).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_ns: Vec<u64>,
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
    /// The file is missing, unreadable, not a baseline or of another schema version.
    #[error("{0}{hint}", hint = resave_hint(.0))]
    Read(#[from] ReadError),
    /// The file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// File path.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The run has no latencies to save.
    #[error("{dir} has no timed runs; a baseline needs latencies (rerun with --runs > 0)")]
    Empty {
        /// The result directory.
        dir: String,
    },
}

/// How to replace a baseline of another schema version.
fn resave_hint(error: &ReadError) -> &'static str {
    match error {
        ReadError::Schema { .. } => " (save it again with `npugate baseline save`)",
        _ => "",
    }
}

impl Document for Baseline {
    const SCHEMA: Schema = Schema::new(BASELINE_SCHEMA);
}

impl Baseline {
    /// Builds a baseline from a run and its placement report.
    pub fn from_run(
        run: &RunResult,
        placement: Option<&PlacementReport>,
        source: &str,
    ) -> Result<Baseline, BaselineError> {
        if run.timings.latencies_ns.is_empty() {
            return Err(BaselineError::Empty { dir: source.to_string() });
        }
        Ok(Baseline {
            schema: BASELINE_SCHEMA.to_string(),
            source: source.to_string(),
            fingerprint: Fingerprint::of(run),
            latencies_ns: run.timings.clean_latencies(),
            ttft_ns: run.generation.as_ref().map(|g| g.ttft_ns.clone()).unwrap_or_default(),
            placement: placement.map(|report| BaselinePlacement {
                preferred_ep: report.preferred_ep.clone(),
                nodes: report.nodes.iter().map(|n| (n.name.clone(), n.ep.clone())).collect(),
            }),
        })
    }

    /// Reads a baseline file, refusing any schema but [`BASELINE_SCHEMA`]'s major version.
    pub fn read(path: &Path) -> Result<Baseline, BaselineError> {
        Ok(contract::read(path)?)
    }

    /// Writes the baseline as pretty JSON, atomically.
    pub fn write(&self, path: &Path) -> Result<(), BaselineError> {
        contract::write_json(path, self)
            .map_err(|source| BaselineError::Write { path: path.display().to_string(), source })
    }
}
