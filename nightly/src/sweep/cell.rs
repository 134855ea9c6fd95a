//! One cell of a sweep (device × runtime × model): where it lives, and its completion marker
//! `cell.json` (`npugate.sweep-cell/1`), written atomically only after the result, the verdict and
//! the report are on disk. A cell with a marker is finished; anything else is redone.

use std::path::{Path, PathBuf};

use anyhow::Context;
use npugate_gate::stats::ConfidenceInterval;
use npugate_gate::{Outcome, Verdict};
use serde::{Deserialize, Serialize};

use npugate_result::{contract, files};

/// Schema of `cell.json`.
pub const CELL_SCHEMA: &str = "npugate.sweep-cell/1";

/// Names a cell; also its path below the sweep dir: `<device>/<runtime>/<model>/`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct CellKey {
    /// Device directory name (the serial, made safe for a file name).
    pub device: String,
    /// Runtime name.
    pub runtime: String,
    /// Model name from the plan.
    pub model: String,
}

impl CellKey {
    /// The cell's result directory below `sweep_dir`.
    pub fn dir(&self, sweep_dir: &Path) -> PathBuf {
        sweep_dir.join(&self.device).join(&self.runtime).join(&self.model)
    }

    /// `device / runtime / model`, for log lines.
    pub fn label(&self) -> String {
        format!("{} / {} / {}", self.device, self.runtime, self.model)
    }
}

/// The device a cell ran on, as probed for that run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CellDevice {
    /// adb serial.
    pub serial: String,
    /// Device class for trends: the SoC (`SM8650`), else the SoC the run's fingerprint names, else `unknown`.
    pub soc: String,
    /// Product or board model, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The device's build (`ro.build.fingerprint`), else what the run's fingerprint names it
    /// (`host HTP emulator …`, a CPU model): a change of it between nights is a new firmware.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

/// `cell.json`: what a finished cell measured and how it was judged (the numbers of the matrix).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CellRecord {
    /// Always [`CELL_SCHEMA`].
    pub schema: String,
    /// Which cell.
    pub key: CellKey,
    /// The device it ran on.
    pub device: CellDevice,
    /// ONNX Runtime version the harness loaded.
    pub ort_version: String,
    /// The QNN build of the runtime's HTP backend (`v2.51.0.260929181845`), for QNN runtimes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qnn_build: Option<String>,
    /// The model's digest (over the `.onnx` and every file it refers to).
    #[serde(alias = "model_sha256")]
    pub model_digest: String,
    /// The gate's outcome.
    pub outcome: Outcome,
    /// 0 pass, 1 a gate rule failed, 2 not judged or the harness failed.
    pub exit_code: u8,
    /// Rules that failed, by name.
    pub failed_rules: Vec<String>,
    /// Timed runs.
    pub runs: usize,
    /// Median latency (ns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_ns: Option<f64>,
    /// 95% bootstrap interval of the median (ns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_ci: Option<ConfidenceInterval>,
    /// Coefficient of variation (%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv_pct: Option<f64>,
    /// Share of FLOPs on the preferred EP (%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub npu_flops_pct: Option<f64>,
    /// Nodes off the preferred EP, not counting expected I/O quantization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_nodes: Option<usize>,
    /// The ESTIMATED latency on the cell's SoC (ms) when its gate had `max_estimated_ms`: from the
    /// graph, never measured (a host-HTP cell's only latency figure that speaks of a device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_ms: Option<f64>,
    /// When the cell finished (RFC 3339, UTC).
    pub finished_at: String,
    /// Wall time of the cell (deploy, run, pull, judge), seconds.
    pub seconds: f64,
}

impl contract::Document for CellRecord {
    const SCHEMA: contract::Schema = contract::Schema::new(CELL_SCHEMA);
}

impl CellRecord {
    /// The record of a judged cell whose runtime's HTP backend is QNN build `qnn_build`.
    pub fn new(
        key: CellKey,
        device: CellDevice,
        verdict: &Verdict,
        qnn_build: Option<String>,
        exit_code: u8,
        seconds: f64,
    ) -> CellRecord {
        let latency = verdict.latency.as_ref();
        let placement = verdict.placement.as_ref();
        CellRecord {
            schema: CELL_SCHEMA.into(),
            key,
            device,
            ort_version: verdict.subject.fingerprint.ort_version.clone(),
            qnn_build,
            model_digest: verdict.subject.fingerprint.model_digest.clone(),
            outcome: verdict.outcome,
            exit_code,
            failed_rules: verdict.failures().map(|check| check.rule.to_string()).collect(),
            runs: verdict.latencies_ns.len(),
            median_ns: latency.map(|l| l.median_ns),
            median_ci: latency.map(|l| l.median_ci.clone()),
            cv_pct: latency.map(|l| l.cv_pct),
            npu_flops_pct: placement.map(|p| p.preferred_flops_pct),
            fallback_nodes: placement.map(|p| p.fallback.iter().filter(|node| !node.expected).count()),
            estimated_ms: verdict
                .checks
                .iter()
                .find(|check| check.rule == npugate_gate::rules::RuleName::MaxEstimatedMs)
                .and_then(|check| check.measured),
            finished_at: super::night::now_rfc3339(),
            seconds,
        }
    }

    /// Marks the cell in `dir` finished: checks that result, verdict and report are there, then
    /// writes `cell.json` atomically (temp file + rename).
    pub fn write_marker(&self, dir: &Path) -> anyhow::Result<()> {
        for file in [files::RESULT, files::VERDICT, files::REPORT_HTML] {
            anyhow::ensure!(
                dir.join(file).is_file(),
                "cell {}: {file} is missing; not marking it finished",
                self.key.label()
            );
        }
        contract::write_json(&dir.join(files::CELL), self)
            .with_context(|| format!("cannot write {}", dir.join(files::CELL).display()))
    }

    /// The record of a finished cell in `dir`; `None` when the cell has no (readable) marker.
    pub fn read_finished(dir: &Path) -> Option<CellRecord> {
        contract::read::<CellRecord>(&dir.join(files::CELL)).ok()
    }

    /// The verdict next to the marker.
    pub fn read_verdict(dir: &Path) -> anyhow::Result<Verdict> {
        Ok(Verdict::read(&dir.join(files::VERDICT))?)
    }
}
