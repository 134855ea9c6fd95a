//! Preflight for an EP that runs on this machine (OpenVINO on an Intel CPU/GPU/NPU, XNNPACK, CUDA,
//! …): the host harness creates the session on the EP and reads ONNX Runtime's node assignment —
//! what the EP claims and what it leaves to the CPU — with one inference and one profiled
//! inference (for the partitions and boundaries), no timing statistics and no latency rules.
//! Exit codes as the gate's: 0 every node claimed, 1 some node falls back, 2 could not judge —
//! an EP whose device is absent did not start, which is 2, never a verdict.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use npugate_profile::report::PlacementReport;
use npugate_result::report::{json_of, Report};
use npugate_result::{contract, files};
use npugate_settings::{HarnessSettings, SessionSettings};

use crate::progress::Progress;
use crate::run::{run_on, RunSpec};
use crate::targets::host::HostTarget;
use crate::targets::{Cancel, Job};
use npugate_host::runtime::RuntimeManifest;

/// A preflight of `model` on the host EP `ep` of `runtime`.
#[derive(Debug, Clone)]
pub struct HostPreflight<'a> {
    /// This machine's harness.
    pub harness: &'a Path,
    /// A host runtime that contains the EP.
    pub runtime: &'a RuntimeManifest,
    /// The model.
    pub model: &'a crate::model::GivenModel,
    /// The session as the user's flags make it: the EP, its options (`device_type=NPU` …), the
    /// shapes and inputs, the session config.
    pub session: &'a SessionSettings,
    /// The longest it may take ([`Timeouts::tool`](crate::timeouts::Timeouts::tool)).
    pub timeout: Duration,
}

/// A host preflight's placement as `npugate preflight --ep <ep>` reports it: the placement text
/// on a terminal, exit 1 when a node falls back against the model's wishes.
pub struct Claimed<'a>(pub &'a PlacementReport);

impl Report for Claimed<'_> {
    fn schema(&self) -> &str {
        &self.0.schema
    }
    fn exit_code(&self) -> u8 {
        self.0.preflight_exit_code()
    }
    fn text(&self, color: bool) -> String {
        npugate_gate::export::placement_text(self.0, &npugate_gate::Rules::default(), color)
    }
    fn json(&self) -> String {
        json_of(self.0)
    }
}

impl HostPreflight<'_> {
    /// Creates the session on the EP into `out` and returns where the result is and the placement
    /// (also saved as `placement.json` there).
    pub fn run(&self, out: &Path, cancel: &Cancel) -> Result<(PathBuf, PlacementReport)> {
        let settings =
            HarnessSettings { warmup: 0, runs: 1, profile_runs: 1, ..HarnessSettings::from(self.session.clone()) };
        let job = Job {
            given: Some(self.model),
            ..Job::new(self.harness, self.runtime, &self.model.path, &settings, self.timeout, cancel)
        };
        let report =
            run_on(&HostTarget::new(), &RunSpec { job, gate: None, reference: None }, out, &Progress::silent())?;
        if !report.execution.succeeded() {
            anyhow::bail!("the harness failed ({}): {}", report.execution.status(), report.execution.last_message());
        }
        let dir = report.placed.dir().to_path_buf();
        let placement = npugate_profile::analyze_run(&dir, &report.result)
            .with_context(|| format!("cannot analyze the preflight of {}", self.model.path.display()))?;
        contract::write_json(&dir.join(files::PLACEMENT), &placement)?;
        Ok((dir, placement))
    }
}
