//! One cell of a sweep (device × runtime × model): where it lives, and its completion marker
//! `cell.json` (`npugate.sweep-cell/1`), written atomically only after the result, the verdict and
//! the report are on disk. A cell with a marker is finished; anything else is redone.

use std::path::{Path, PathBuf};

use anyhow::Context;
use npugate_gate::outputs::{non_finite, OutputsReport};
use npugate_gate::stats::ConfidenceInterval;
use npugate_gate::{Outcome, Verdict};
use npugate_profile::report::PlacementReport;
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

/// What the device of a host-HTP cell names as its build (`fingerprint`): Qualcomm's HTP emulator
/// under wine. Cells recorded before [`CellRecord::emulated`] existed are known as emulated by it.
pub const HOST_HTP_FINGERPRINT: &str = "host HTP emulator (wine)";

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
    /// Peak resident memory of the harness, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_mb: Option<f64>,
    /// Energy per inference above idle, mJ (a device run with `--energy-window`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_mj: Option<f64>,
    /// The ESTIMATED latency on the cell's SoC (ms) when its gate had `max_estimated_ms`: from the
    /// graph, never measured (a host-HTP cell's only latency figure that speaks of a device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_ms: Option<f64>,
    /// Set when the cell ran on an emulator, not a device (Qualcomm's HTP emulator under wine): what
    /// ran where, as the run's `result.json` says (`execution.emulated`). Its latency is host time,
    /// which says nothing about a device: the history, the matrix and device health never read it
    /// as a device's latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated: Option<String>,
    /// What the cell found besides its latency: compile, placement, outputs.
    #[serde(flatten)]
    pub findings: Findings,
    /// When the cell finished (RFC 3339, UTC).
    pub finished_at: String,
    /// Wall time of the cell (deploy, run, pull, judge), seconds.
    pub seconds: f64,
}

/// What a cell found besides its latency — all an emulated cell is judged on beside the gate's
/// outcome: whether the accelerator's backend compiled the graph, where its nodes ran, how its
/// outputs agree with the fp32 CPU reference.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Findings {
    /// Why the accelerator's backend did not compile the graph (ONNX Runtime refused the session, as
    /// a `--session-only` run of the cell recorded it); absent when it compiled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_error: Option<String>,
    /// Share of the model's nodes on the preferred EP (%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub npu_nodes_pct: Option<f64>,
    /// The unexpected fallback nodes: each node off the preferred EP, and the EP it ran on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<Fallback>,
    /// The output furthest from the fp32 CPU reference, when the outputs were checked
    /// (`check_outputs = true` in the plan's settings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<OutputAgreement>,
}

/// The columns of [`Findings::columns`], in every table of emulated cells: the findings, and the
/// host time labelled so it is never read as a device's latency.
pub const EMULATED_COLUMNS: [&str; 6] = [
    "compiled",
    "NPU nodes %",
    "NPU FLOPs %",
    "fallback",
    "worst output SQNR dB",
    "host time ms (not a device latency)",
];

/// A table header of emulated cells: `lead`, the [`EMULATED_COLUMNS`], `last`.
pub fn emulated_header<'a>(lead: [&'a str; 3], last: &'a str) -> Vec<&'a str> {
    lead.into_iter().chain(EMULATED_COLUMNS).chain([last]).collect()
}

impl Findings {
    /// The findings of a verdict: placement shares and fallback nodes, the worst output.
    pub fn of(verdict: &Verdict) -> Findings {
        Findings {
            compile_error: None,
            npu_nodes_pct: verdict.placement.as_ref().map(|p| p.preferred_nodes_pct),
            fallback: verdict.placement.as_ref().map(Fallback::of).unwrap_or_default(),
            outputs: verdict.outputs.as_ref().and_then(OutputAgreement::worst),
        }
    }

    /// `compiled`, or `not compiled: <the backend's error>`.
    pub fn compile_label(&self) -> String {
        match &self.compile_error {
            None => "compiled".into(),
            Some(error) => format!("not compiled: {error}"),
        }
    }

    /// The fallback count, with the nodes where they are known: `1: lppool (LpPool)`, `0`, `–`.
    pub fn fallback_label(&self, fallback_nodes: Option<usize>) -> String {
        let names: Vec<String> = self.fallback.iter().map(Fallback::label).collect();
        match (fallback_nodes, names.is_empty()) {
            (None, _) => "–".into(),
            (Some(count), true) => count.to_string(),
            (Some(count), false) => format!("{count}: {}", names.join(", ")),
        }
    }

    /// The [`EMULATED_COLUMNS`], with the FLOP share, fallback count and host time recorded beside
    /// the findings: `compiled`, `100.0`, `99.8`, `1: lppool (LpPool)`, `y 48.1`, `84.0`.
    pub fn columns(
        &self,
        npu_flops_pct: Option<f64>,
        fallback_nodes: Option<usize>,
        host_median_ns: Option<f64>,
    ) -> Vec<String> {
        let pct = |value: Option<f64>| value.map_or_else(|| "–".into(), |v| format!("{v:.1}"));
        let host_time = host_median_ns.map(|ns| npugate_gate::units::ms_number(ns / 1e6));
        let outputs =
            self.outputs.as_ref().map(|o| format!("{} {}", o.output, npugate_gate::outputs::fmt_metric(o.sqnr_db, 1)));
        vec![
            self.compile_label(),
            pct(self.npu_nodes_pct),
            pct(npu_flops_pct),
            self.fallback_label(fallback_nodes),
            outputs.unwrap_or_else(|| "not checked".into()),
            host_time.unwrap_or_else(|| "–".into()),
        ]
    }
}

/// What an emulated cell's numbers are, under every table of them.
pub const EMULATED_NOTE: &str =
    "Emulated: Qualcomm's HTP emulator (its x86_64 backend under wine) ran these cells. They \
    are judged on the gate's outcome, the compile, where the nodes ran and how the outputs agree with the fp32 CPU \
    reference (with check_outputs); their time is the host's, which says nothing about a device: it is never charted, \
    trended or compared.";

/// A node that ran off the preferred EP, not by design.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Fallback {
    /// Node name.
    pub node: String,
    /// Operator type.
    pub op_type: String,
    /// The EP it ran on.
    pub ep: String,
}

impl Fallback {
    /// The unexpected fallback nodes of a placement, in its order.
    pub fn of(placement: &PlacementReport) -> Vec<Fallback> {
        let unexpected = placement.fallback.iter().filter(|node| !node.expected);
        unexpected.map(|n| Fallback { node: n.name.clone(), op_type: n.op_type.clone(), ep: n.ep.clone() }).collect()
    }

    /// `lppool (LpPool)`.
    pub fn label(&self) -> String {
        format!("{} ({})", self.node, self.op_type)
    }
}

/// How far the outputs are from the fp32 CPU reference: the output with the lowest SQNR.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OutputAgreement {
    /// The output's name.
    pub output: String,
    /// Its SQNR against the reference, dB (`"inf"` when identical, `"nan"` when not a number).
    #[serde(with = "non_finite")]
    pub sqnr_db: f64,
    /// Its cosine similarity with the reference.
    #[serde(with = "non_finite")]
    pub cosine: f64,
}

impl OutputAgreement {
    /// The output with the lowest SQNR (NaN lowest of all); `None` when nothing was compared.
    pub fn worst(report: &OutputsReport) -> Option<OutputAgreement> {
        let key = |sqnr: f64| if sqnr.is_nan() { f64::NEG_INFINITY } else { sqnr };
        let worst = report.outputs.iter().min_by(|a, b| key(a.metrics.sqnr_db).total_cmp(&key(b.metrics.sqnr_db)))?;
        Some(OutputAgreement {
            output: worst.name.clone(),
            sqnr_db: worst.metrics.sqnr_db,
            cosine: worst.metrics.cosine,
        })
    }

    /// `out 48.1 dB` (`∞` when identical).
    pub fn label(&self) -> String {
        format!("{} {} dB", self.output, npugate_gate::outputs::fmt_metric(self.sqnr_db, 1))
    }
}

impl contract::Document for CellRecord {
    const SCHEMA: contract::Schema = contract::Schema::new(CELL_SCHEMA);
}

impl CellRecord {
    /// The record of a judged cell whose runtime's HTP backend is QNN build `qnn_build`; `emulated`
    /// when it ran on an emulator (see [`CellRecord::emulated`]).
    pub fn new(
        key: CellKey,
        device: CellDevice,
        verdict: &Verdict,
        qnn_build: Option<String>,
        emulated: Option<String>,
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
            peak_memory_mb: verdict
                .memory
                .as_ref()
                .and_then(|m| m.peak_bytes)
                .map(|b| b as f64 / npugate_result::resources::MB),
            energy_mj: verdict.energy.as_ref().and_then(|e| e.measured.as_ref()).map(|m| m.energy_mj),
            estimated_ms: verdict
                .checks
                .iter()
                .find(|check| check.rule == npugate_gate::rules::RuleName::MaxEstimatedMs)
                .and_then(|check| check.measured),
            emulated,
            findings: Findings::of(verdict),
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

    /// The record of a finished cell in `dir`; `None` when the cell has no (readable) marker. A
    /// host-HTP cell recorded before [`CellRecord::emulated`] existed reads as emulated.
    pub fn read_finished(dir: &Path) -> Option<CellRecord> {
        let mut record = contract::read::<CellRecord>(&dir.join(files::CELL)).ok()?;
        if record.emulated.is_none() && record.device.fingerprint.as_deref() == Some(HOST_HTP_FINGERPRINT) {
            record.emulated = Some(format!("Qualcomm's HTP emulator ({HOST_HTP_FINGERPRINT})"));
        }
        Some(record)
    }

    /// True when the cell ran on an emulator: its latency is host time.
    pub fn is_emulated(&self) -> bool {
        self.emulated.is_some()
    }

    /// The verdict next to the marker.
    pub fn read_verdict(dir: &Path) -> anyhow::Result<Verdict> {
        Ok(Verdict::read(&dir.join(files::VERDICT))?)
    }
}
