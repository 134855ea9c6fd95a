//! Preflight with the Saver backend (`npugate preflight --backend saver`): which nodes the QNN EP
//! would claim on a Snapdragon, predicted from the EP's builder rules alone, for hosts where
//! Qualcomm's host HTP backend cannot run (see [`crate::preflight`] for the default). Runs the
//! real QNN EP partitioner: the aarch64 harness (under qemu-user on an x86_64 host) with the `onnxruntime-qnn` plugin, the HTP backend as the intended
//! backend, the QNN Saver recording instead of executing, and the HTP backend's own op validation
//! skipped (it needs a DSP). Exit codes as the gate's: 0 every node claimed (graph I/O
//! quantization on CPU by design counts as claimed), 1 some node would fall back to CPU, 2 could
//! not judge.
//!
//! Under qemu a harness whose HTP setup failed can die with signal 11 in library teardown *after*
//! writing `result.json` (rc 139); a readable `result.json` then decides, never the signal.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use npugate_profile::report::PlacementReport;
use npugate_result::report::{json_of, Report};
use npugate_result::{contract, files, RunStatus};
use npugate_settings::qnn::QnnBackend;
use npugate_settings::{EpKind, HarnessSettings, KeyValue, QnnArgs, SessionSettings};

use npugate_engine::layout::Staging;
use npugate_engine::model::GivenModel;
use npugate_engine::progress::Progress;
use npugate_engine::targets::qemu::{self, QemuTarget};
use npugate_engine::targets::{Cancel, Job, Target};
use npugate_host::runtime::RuntimeManifest;

/// The runtime used when none is given: aarch64 ORT + the onnxruntime-qnn plugin from PyPI.
pub const DEFAULT_RUNTIME: &str = "qnn-2.7.0-ort-1.31.1-linux-aarch64";
/// Label of every preflight placement report.
pub const PREDICTED: &str = "predicted: HTP backend validation not run";
/// Exit status of a process killed by SIGSEGV, as a shell reports it.
const SIGSEGV_STATUS: i32 = 139;

/// What a preflight needs: the aarch64 harness and the QNN plugin runtime, the model and its shapes.
#[derive(Debug, Clone)]
pub struct PreflightRequest<'a> {
    /// The aarch64 Linux harness.
    pub harness: &'a Path,
    /// A runtime with the QNN plugin EP, built for aarch64 Linux.
    pub runtime: &'a RuntimeManifest,
    /// The model.
    pub model: &'a GivenModel,
    /// The user's session flags (EP options, session config, QNN flags, `--shape`) the session keeps.
    pub session: &'a SessionSettings,
    /// Run float graphs in fp16 on HTP, as the device run would.
    pub fp16: bool,
    /// The longest the preflight may take (npugate_engine's `Timeouts::tool`).
    pub timeout: Duration,
}

/// What a preflight found.
#[derive(Debug, Clone)]
pub struct Preflight {
    /// Where its result directory is.
    pub dir: PathBuf,
    /// The predicted placement (labelled [`PREDICTED`]).
    pub report: PlacementReport,
    /// A crash of the harness after it wrote its result (it decides, never the signal).
    pub crashed_after_result: Option<String>,
}

impl PreflightRequest<'_> {
    /// Runs the QNN EP's partitioner under qemu into `out` and predicts the placement; the
    /// placement is also saved as `placement.json` in the result directory.
    pub fn run(&self, out: &Path, cancel: &Cancel) -> Result<Preflight> {
        check_runtime(self.runtime)?;
        let saver = self.runtime.dir.join("libQnnSaver.so");
        let mut ep_options = self.session.ep_options.clone();
        ep_options.extend([
            KeyValue { key: "qnn_saver_path".into(), value: saver.display().to_string() },
            KeyValue { key: "skip_backend_op_validation".into(), value: "1".into() },
        ]);
        let session = SessionSettings {
            ep: EpKind::Qnn,
            ep_options,
            qnn: QnnArgs {
                qnn_backend: Some(QnnBackend::Type("htp")),
                enable_htp_fp16_precision: Some(self.fp16),
                ..self.session.qnn.clone()
            },
            ..self.session.clone()
        };
        let settings = HarnessSettings { warmup: 0, runs: 1, profile_runs: 1, ..HarnessSettings::from(session) };
        // Without a Snapdragon the QNN plugin offers a device only when its CPU backend is enabled.
        let env = [("ORT_QNN_ENABLE_CPU_BACKEND", "1")];
        let model = crate::prepare_here(self.model, &self.session.shapes, &[])?;
        let job = Job {
            prepared: Some(&model),
            env: &env,
            ..Job::new(self.harness, self.runtime, &model.path, &settings, self.timeout, cancel)
        };
        let staging = Staging::next_to(out)?;
        let execution = QemuTarget.execute(&job, staging.path(), &Progress::silent())?;
        let result = npugate_engine::run::harness_result(&execution, staging.path(), &model)?;
        let crashed_after_result =
            (execution.exit_code == Some(SIGSEGV_STATUS) || execution.exit_code.is_none()).then(|| execution.status());
        if let Some(backend) = result.backend.as_ref().filter(|b| !b.started) {
            bail!(
                "the QNN backend did not start under preflight, so nothing can be predicted: {}",
                backend.reason.as_deref().unwrap_or("no reason in the log")
            );
        }
        let mut report = npugate_profile::analyze_result_dir(staging.path())
            .with_context(|| format!("cannot analyze the preflight of {}", self.model.path.display()))?;
        report.predicted = Some(PREDICTED.to_string());
        contract::write_json(&staging.path().join(files::PLACEMENT), &report)?;
        let dir = staging.commit(result.status == RunStatus::Complete)?.dir().to_path_buf();
        Ok(Preflight { dir, report, crashed_after_result })
    }
}

/// Refuses a runtime that is not a QNN plugin runtime built for aarch64 Linux with the Saver.
fn check_runtime(runtime: &RuntimeManifest) -> Result<()> {
    let fix = format!("pass --runtime {DEFAULT_RUNTIME} (npugate runtime fetch {DEFAULT_RUNTIME})");
    if runtime.target != qemu::TRIPLE {
        bail!(
            "runtime {} is built for {}, but preflight runs the {} harness; {fix}",
            runtime.name,
            runtime.target,
            qemu::TRIPLE
        );
    }
    let plugin = runtime.ep.as_ref().is_some_and(|ep| ep.name == "QNNExecutionProvider" && ep.attach == "plugin");
    if !plugin || runtime.ep_library_path().is_none() {
        bail!("runtime {} has no QNN plugin EP; {fix}", runtime.name);
    }
    for needed in ["libQnnHtp.so", "libQnnSaver.so"] {
        if !runtime.dir.join(needed).is_file() {
            bail!("runtime {} has no {needed}, which preflight needs; {fix}", runtime.name);
        }
    }
    Ok(())
}

/// A Saver preflight's placement as `npugate preflight --backend saver` reports it: [`summary`]
/// on a terminal, exit 1 when a node would fall back against the model's wishes.
pub struct Predicted<'a>(pub &'a PlacementReport);

impl Report for Predicted<'_> {
    fn schema(&self) -> &str {
        &self.0.schema
    }
    fn exit_code(&self) -> u8 {
        self.0.preflight_exit_code()
    }
    fn text(&self, _color: bool) -> String {
        summary(self.0)
    }
    fn json(&self) -> String {
        json_of(self.0)
    }
}

/// The terminal summary: the label, the share on QNN, every fallback with the EP's own reason.
pub fn summary(report: &PlacementReport) -> String {
    let mut text = format!(
        "preflight ({}): {:.1}% of {} nodes on {}, {:.1}% of FLOPs\n",
        PREDICTED, report.preferred_nodes_pct, report.totals.nodes, report.preferred_ep, report.preferred_flops_pct
    );
    for node in &report.fallback {
        let kind = if node.expected { "on CPU by design" } else { "would fall back to CPU" };
        let reason = node.reason.as_deref().unwrap_or("no reason in the log");
        text.push_str(&format!("  {kind}: {} ({}): {reason}\n", node.name, node.op_type));
        if let Some(hint) = node.hint.as_deref().filter(|_| !node.expected) {
            text.push_str(&format!("    hint: {hint}\n"));
        }
    }
    if report.unexpected_fallbacks().next().is_none() {
        text.push_str("  every node would be claimed by QNN\n");
    }
    text
}
