//! `npugate preflight` on the host HTP: for each chosen Snapdragon and QNN version, a session on
//! Qualcomm's x86_64 HTP backend of that version configured as that SoC, with the backend's own op
//! validation on and the graph finalized (compiled), then one emulated inference (unless
//! `execute` is off), so a graph that compiles and fails at run time fails too. Per SoC and
//! version it reports the nodes and FLOPs the HTP claims, every node left to the CPU with the
//! backend's own reason, "cannot compile" when finalize fails and QNN's error when the inference
//! fails; across versions, what changed ([`VersionChange`]).
//!
//! Every job (SoC × QNN version) and one CPU reference job (the model's node shapes, for FLOPs; it
//! also proves that ONNX Runtime loads the model at all) run in parallel, one wine process each;
//! the reference's shapes are kept in the cache, so the next preflight of the same model runs the
//! SoCs only. A session that ONNX Runtime or QNN refuses to create is a verdict for that SoC — the
//! device would fail the same way; a crash, a dead backend, an EP plugin ONNX Runtime refuses or
//! missing wine is "could not judge". Every job keeps its result directory, failed or not.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use npugate_profile::ort_log::{RefusedNode, RejectionReasons};
use npugate_profile::placement::{build_report, PlacementInputs};
use npugate_profile::profile::Profile;
use npugate_profile::report::PlacementReport;
use npugate_profile::result_dir::{read_profile, read_rejections, reference_profile_in};
use npugate_result::contract::{self, EXIT_ERROR, EXIT_FAIL, EXIT_PASS};
use npugate_result::report::{json_of, Report};
use npugate_result::{files, RunResult};
use npugate_settings::qnn::QnnBackend;
use npugate_settings::{EpKind, HarnessSettings, InputFile, QnnArgs, SessionSettings, ShapeSpec};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::HostHtp;
use npugate_engine::layout::{Ownership, Staging};
use npugate_engine::model::GivenModel;
use npugate_engine::progress::Progress;
use npugate_engine::rack::{self, Attempted, DeviceOutcome, RackPolicy};
use npugate_engine::targets::wine::WineTarget;
use npugate_engine::targets::{Execution, Job, Target};
use npugate_estimate::{Estimator, GraphFeatures, Reference, SocEstimate};
use npugate_host::hash_cache::HashCache;
use npugate_host::runtime::RuntimeManifest;
use npugate_result::hexagon::Soc;

/// Schema of `preflight.json`.
pub const HTP_PREFLIGHT_SCHEMA: &str = "npugate.htp-preflight/2";
/// The file the report is saved as in the preflight directory.
pub const REPORT_FILE: &str = "preflight.json";

/// A preflight's directory: its [`REPORT_FILE`] and one result directory per SoC.
const PREFLIGHT_DIR: Ownership = Ownership { marker: REPORT_FILE, what: "npugate preflight", own_names: &[] };
/// The name of the CPU reference job (its directory is in the cache: see `reference_cache`).
const REFERENCE_DIR: &str = "reference";
/// What every report says it is.
pub const LABEL: &str =
    "HTP validation and compile by Qualcomm's host backend (QNN's x86_64 build, under wine); the device did not run";

/// What a host-HTP preflight needs.
#[derive(Debug, Clone)]
pub struct HtpPreflightRequest<'a> {
    /// The Windows harness and runtime of each QNN version to judge the model with, oldest first.
    pub hosts: &'a [HostHtp],
    /// The model.
    pub model: &'a GivenModel,
    /// The user's session flags every SoC job keeps (EP options, session config, QNN flags); its shapes and inputs are
    /// `shapes` and `inputs`.
    pub session: &'a SessionSettings,
    /// Shapes of dynamic inputs.
    pub shapes: &'a [ShapeSpec],
    /// Input data (`--input`) of the emulated inference and the CPU reference job.
    pub inputs: &'a [InputFile],
    /// The SoCs to judge the model for, in report order.
    pub socs: &'a [Soc],
    /// Run float graphs in fp16 on HTP, as the device run would.
    pub fp16: bool,
    /// Run one emulated inference per SoC after the compile (`--no-execute` turns it off).
    pub execute: bool,
    /// Save that inference's outputs in each SoC's result directory (`outputs/`, as
    /// `--check-outputs` does) for a comparison with a reference (`npugate choose`).
    pub keep_outputs: bool,
    /// The longest one SoC's validation, compile and inference may take (npugate_engine's `Timeouts::tool`).
    pub timeout: Duration,
}

/// `preflight.json`: the verdict per SoC and QNN version, and what changed between versions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HtpPreflightReport {
    /// Always [`HTP_PREFLIGHT_SCHEMA`].
    pub schema: String,
    /// What this is: [`LABEL`].
    pub label: String,
    /// The model as given.
    pub model: String,
    /// sha256 of the model as given.
    pub model_sha256: String,
    /// The QNN versions that judged it, oldest first.
    pub qnn: Vec<QnnRuntime>,
    /// True when each SoC also ran one emulated inference after the compile.
    pub executed: bool,
    /// One verdict per QNN version and SoC (versions in `qnn` order, SoCs in the order asked).
    pub socs: Vec<SocVerdict>,
    /// What changed from each QNN version to the next, per SoC where anything did.
    #[serde(default)]
    pub changes: Vec<VersionChange>,
    /// Problems of the whole preflight that spare the verdicts (e.g. FLOPs unknown, and why).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// 0 every SoC passes, 1 a SoC fails, 2 a SoC could not be judged.
    pub exit_code: u8,
}

impl contract::Document for HtpPreflightReport {
    const SCHEMA: contract::Schema = contract::Schema::new(HTP_PREFLIGHT_SCHEMA);
}

/// `npugate preflight`'s report on the host HTP backend: [`summary`] on a terminal.
impl Report for HtpPreflightReport {
    fn schema(&self) -> &str {
        &self.schema
    }
    fn exit_code(&self) -> u8 {
        self.exit_code
    }
    fn text(&self, _color: bool) -> String {
        summary(self)
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// One QNN version of a preflight: its runtime and the build of its HTP backend.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct QnnRuntime {
    /// QNN SDK version, e.g. `2.51.0`.
    pub sdk: String,
    /// The HTP backend's build (`v2.51.0.260929181845`), read from the library.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// The runtime.
    pub runtime: String,
    /// Its ONNX Runtime version.
    pub ort_version: String,
}

impl QnnRuntime {
    /// The version of `host`.
    pub fn of(host: &HostHtp) -> QnnRuntime {
        QnnRuntime {
            sdk: host.qnn_sdk(),
            build: host.runtime.qnn_build(),
            runtime: host.runtime.name.clone(),
            ort_version: host.runtime.ort_version.clone(),
        }
    }
}

/// The verdict for one SoC with one QNN version.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SocVerdict {
    /// SoC model, e.g. `SM8650`.
    pub soc: String,
    /// Its Hexagon arch, e.g. `v75`.
    pub htp_arch: String,
    /// Its QNN `soc_model` id.
    pub qnn_soc_model: u32,
    /// The QNN version that judged it (`2.51.0`).
    pub qnn_sdk: String,
    /// The runtime of that version.
    pub runtime: String,
    /// `pass` (every node claimed, graph compiled and — when executed — run), `fail` (a node left
    /// to the CPU, the session refused, the graph not compiled or its inference failed) or `error`
    /// (could not judge).
    pub outcome: SocOutcome,
    /// True when the backend finalized (compiled) the graph for this SoC.
    pub compiled: bool,
    /// Whether the one emulated inference ran (`None` when it was not attempted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executed: Option<bool>,
    /// Why the session was refused, the inference failed or the SoC could not be judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every node left to the CPU, with the backend's and the EP's reasons.
    pub fallback: Vec<FallbackEntry>,
    /// Share of nodes the HTP claims (percent); `None` without a session.
    pub nodes_pct: Option<f64>,
    /// Share of FLOPs the HTP claims (percent); `None` without a session or node shapes.
    pub flops_pct: Option<f64>,
    /// Wall time of this SoC's job, seconds.
    pub seconds: f64,
    /// Its result directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_dir: Option<PathBuf>,
    /// The full placement report (`npugate.placement/1`), when the session was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementReport>,
    /// The ESTIMATED device latency (`npugate estimate`'s latency model on the graph), or why there
    /// is none; never a measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<SocEstimate>,
}

impl SocVerdict {
    /// The nodes left to the CPU that count (not the graph I/O quantization left there by design).
    fn rejected(&self) -> impl Iterator<Item = &FallbackEntry> {
        self.fallback.iter().filter(|node| !node.expected)
    }
}

/// The outcome for one SoC.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SocOutcome {
    /// Every node claimed and the graph compiled.
    Pass,
    /// A node is left to the CPU, or the model cannot be compiled / the session is refused.
    Fail,
    /// Could not judge (a crash, a dead backend, wine or the runtime missing).
    Error,
}

impl SocOutcome {
    /// The exit code this outcome stands for.
    pub fn exit_code(self) -> u8 {
        match self {
            SocOutcome::Pass => EXIT_PASS,
            SocOutcome::Fail => EXIT_FAIL,
            SocOutcome::Error => EXIT_ERROR,
        }
    }

    /// `PASS`, `FAIL`, `NOT JUDGED`.
    pub fn label(self) -> &'static str {
        match self {
            SocOutcome::Pass => "PASS",
            SocOutcome::Fail => "FAIL",
            SocOutcome::Error => "NOT JUDGED",
        }
    }
}

/// A node left to the CPU.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FallbackEntry {
    /// Node name (as the EP saw it; layout-transformed nodes carry a `_token_N` suffix).
    pub name: String,
    /// Operator type.
    pub op_type: String,
    /// The backend's and the EP's own reason, when the log has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Graph-input quantization / output dequantization on the CPU by design (never fails a SoC).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expected: bool,
    /// The fix, when one is known (the placement's hint for the node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The control-flow node (`Loop`, `If`, `Scan`) of the main graph whose body holds this node,
    /// when a body does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inside: Option<String>,
}

/// What changed for one SoC from one QNN version to the next.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VersionChange {
    /// SoC model.
    pub soc: String,
    /// The earlier QNN version.
    pub from_qnn: String,
    /// The later QNN version.
    pub to_qnn: String,
    /// `pass → fail` when the outcome flipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// `compiled → not compiled` (or back) when the compile flipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiled: Option<String>,
    /// `ran → failed` (or back) when the emulated inference flipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executed: Option<String>,
    /// Nodes the later version rejects and the earlier took, with the later version's reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub newly_rejected: Vec<FallbackEntry>,
    /// Nodes the later version takes and the earlier rejected, with the earlier version's reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub newly_accepted: Vec<FallbackEntry>,
}

/// One job's output directory and how its harness ended.
pub(super) struct Launched {
    /// Where the job's result directory ended up.
    pub(super) dir: PathBuf,
    /// How its harness ended.
    pub(super) execution: Execution,
}

impl Attempted for Launched {
    fn result_dir(&self) -> PathBuf {
        self.dir.clone()
    }

    fn exit_code(&self) -> u8 {
        if self.execution.succeeded() {
            EXIT_PASS
        } else {
            EXIT_ERROR
        }
    }
}

/// A job of the preflight: the CPU reference, or one SoC with one QNN version.
struct PlannedJob<'h> {
    target: WineTarget,
    host: &'h HostHtp,
    soc: Option<Soc>,
    dir: PathBuf,
}

impl HtpPreflightRequest<'_> {
    /// Judges the model for every SoC and QNN version into `out` (`<SOC>/` result dirs, or
    /// `<SOC>-qnn-<version>/` with several versions; `preflight.json`; the CPU reference job's node
    /// shapes are kept in the cache for the next preflight of the model) and returns the report.
    /// Fails only when nothing can be judged: no runtime, the model cannot be read or fixed, or
    /// ONNX Runtime cannot load it even on its CPU EP.
    pub fn run(&self, out: &Path, policy: &RackPolicy) -> Result<HtpPreflightReport> {
        let cancel = &policy.cancel;
        PREFLIGHT_DIR.check(out, "--out")?;
        let first = self.hosts.first().context("a preflight needs at least one host-HTP runtime")?;
        let model_sha256 = self.model.files.sha256.clone();
        let prepared = crate::prepare_here(self.model, self.shapes, self.inputs)?;
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;

        let (reference_settings, soc_settings) = self.job_settings();
        // The node shapes depend on the model, its inputs and ONNX Runtime only: computed once, then reused.
        let reference_dir = reference_cache(&prepared.files.digest, self.inputs, &first.runtime, &self.model.hashes);
        let cached = cached_reference(&reference_dir);
        let jobs = self.plan_jobs(out, first, cached.is_none().then_some(reference_dir));
        let targets: Vec<&WineTarget> = jobs.iter().map(|job| &job.target).collect();
        let policy = RackPolicy { retries: 0, retry_pause: Duration::ZERO, ..policy.clone() };
        let rack = rack::run_rack(&targets, &policy, |target, progress| {
            let planned =
                jobs.iter().find(|job| std::ptr::eq(&job.target, target)).context("a job of this preflight")?;
            let settings = if planned.soc.is_some() { &soc_settings } else { &reference_settings };
            let job = Job {
                prepared: Some(&prepared),
                ..Job::new(&planned.host.harness, &planned.host.runtime, &prepared.path, settings, self.timeout, cancel)
            };
            launch(target, &job, &planned.dir, progress)
        });
        let mut warnings = Vec::new();
        let mut outcomes = jobs.iter().zip(rack.report.devices.iter().zip(rack.results));
        let reference_profile = match cached {
            Some(profile) => Ok(profile),
            None => {
                let (_, (outcome, reference)) = outcomes.next().context("the reference job is in the rack")?;
                reference_shapes(reference.as_ref(), outcome.infrastructure_error.as_deref(), &self.model.path)?
            }
        };
        let reference_profile = match reference_profile {
            Ok(profile) => Some(profile),
            Err(why) => {
                warnings.push(format!("FLOPs are unknown: {why}"));
                None
            }
        };
        let socs = self.judge_socs(outcomes, reference_profile.as_ref())?;
        let exit_code = socs.iter().map(|s| s.outcome.exit_code()).max().unwrap_or(EXIT_PASS);
        let qnn: Vec<QnnRuntime> = self.hosts.iter().map(QnnRuntime::of).collect();
        let report = HtpPreflightReport {
            schema: HTP_PREFLIGHT_SCHEMA.into(),
            label: LABEL.into(),
            model: self.model.path.display().to_string(),
            model_sha256,
            changes: version_changes(&qnn, &socs),
            qnn,
            executed: self.execute,
            socs,
            warnings,
            exit_code,
        };
        contract::write_json(&out.join(REPORT_FILE), &report)?;
        Ok(report)
    }

    /// The harness settings of the CPU reference job (session only) and of the SoC jobs.
    fn job_settings(&self) -> (HarnessSettings, HarnessSettings) {
        let reference_session = SessionSettings {
            shapes: self.shapes.to_vec(),
            inputs: self.inputs.to_vec(),
            ..SessionSettings::default()
        };
        let reference_settings = HarnessSettings { session_only: true, ..HarnessSettings::from(reference_session) };
        let mut soc_settings = HarnessSettings {
            execute_once: self.execute,
            check_outputs: self.execute && self.keep_outputs,
            ..soc_settings(self.session, self.shapes, self.fp16)
        };
        soc_settings.session.inputs = self.inputs.to_vec();
        (reference_settings, soc_settings)
    }

    /// The jobs: the CPU reference into `reference_dir` (when its shapes are not cached), then one
    /// per QNN version and SoC into `out`.
    fn plan_jobs<'h>(&'h self, out: &Path, first: &'h HostHtp, reference_dir: Option<PathBuf>) -> Vec<PlannedJob<'h>> {
        let mut jobs: Vec<PlannedJob> = Vec::new();
        if let Some(dir) = reference_dir {
            jobs.push(PlannedJob { target: WineTarget::new().named(REFERENCE_DIR), host: first, soc: None, dir });
        }
        let several = self.hosts.len() > 1;
        for host in self.hosts {
            for soc in self.socs {
                let name =
                    if several { format!("{}-qnn-{}", soc.model, host.qnn_sdk()) } else { soc.model.to_string() };
                jobs.push(PlannedJob {
                    target: WineTarget::for_soc(*soc).named(&name),
                    host,
                    soc: Some(*soc),
                    dir: out.join(&name),
                });
            }
        }
        jobs
    }

    /// Judges each SoC job's outcome, attaches the estimates and saves each judged placement.
    fn judge_socs<'j>(
        &self,
        outcomes: impl Iterator<Item = (&'j PlannedJob<'j>, (&'j DeviceOutcome, Option<Launched>))>,
        reference_profile: Option<&Profile>,
    ) -> Result<Vec<SocVerdict>> {
        let mut socs: Vec<SocVerdict> = outcomes
            .map(|(planned, (outcome, launched))| {
                let attempt = match (launched, &outcome.infrastructure_error) {
                    (Some(launched), _) => Ok(launched),
                    (None, error) => Err(error.clone().unwrap_or_else(|| "the job did not finish".into())),
                };
                let soc = planned.soc.expect("every job after the reference is a SoC's");
                let mut verdict = judge_soc(soc, &planned.host.runtime, attempt, reference_profile, self.execute);
                verdict.qnn_sdk = planned.host.qnn_sdk();
                verdict.seconds = outcome.seconds;
                verdict
            })
            .collect();
        attach_estimates(&mut socs, &self.model.path);
        locate_in_bodies(&mut socs, &self.model.path);
        for verdict in &socs {
            if let (Some(dir), Some(placement)) = (&verdict.result_dir, &verdict.placement) {
                contract::write_json(&dir.join(files::PLACEMENT), placement)?;
            }
        }
        Ok(socs)
    }
}

/// Names, on every fallback entry inside a control-flow body, the main graph's control-flow node
/// that holds it (the report prints a body's nodes under it); nothing when the model cannot be read.
fn locate_in_bodies(socs: &mut [SocVerdict], model: &Path) {
    locate_entries_in_bodies(socs.iter_mut().flat_map(|soc| soc.fallback.iter_mut()), model);
}

/// Sets [`FallbackEntry::inside`] on each of `entries` inside a control-flow body of `model`.
pub fn locate_entries_in_bodies<'e>(entries: impl Iterator<Item = &'e mut FallbackEntry>, model: &Path) {
    let Ok(model) = npugate_onnx::Model::read(model) else { return };
    let index = model.index();
    let holder = |name: &str| {
        let node = index.node(name)?;
        let step = index.graph(node.graph)?.path.steps.first()?;
        Some(step.node.clone())
    };
    for entry in entries {
        entry.inside = holder(&entry.name);
    }
}

/// Each SoC's ESTIMATED latency (`npugate estimate`'s latency model on the graph it compiled), or
/// why there is none: only a graph that runs whole on the HTP is estimated.
fn attach_estimates(socs: &mut [SocVerdict], model: &Path) {
    let model = npugate_onnx::Model::read(model).map_err(|error| error.to_string());
    let estimator = Reference::embedded().map(Estimator::new).map_err(|error| error.to_string());
    for verdict in socs {
        let why_not = match (&verdict.placement, &model, &estimator) {
            _ if verdict.outcome != SocOutcome::Pass => {
                "the graph does not run whole on the HTP; the estimate covers graphs that do".to_string()
            }
            (Some(placement), Ok(model), Ok(estimator)) => {
                verdict.estimate = Some(estimator.estimate(&verdict.soc, &GraphFeatures::of_report(placement, model)));
                continue;
            }
            (None, _, _) => "no placement".to_string(),
            (_, Err(why), _) | (_, _, Err(why)) => why.clone(),
        };
        verdict.estimate = Some(SocEstimate::none(&verdict.soc, why_not));
    }
}

/// What changed for each SoC from each QNN version to the next (in `qnn` order); SoCs where
/// nothing changed (same outcome, compile, inference and rejected nodes) are left out.
pub fn version_changes(qnn: &[QnnRuntime], socs: &[SocVerdict]) -> Vec<VersionChange> {
    let mut changes = Vec::new();
    for pair in qnn.windows(2) {
        let (from, to) = (&pair[0].sdk, &pair[1].sdk);
        for before in socs.iter().filter(|s| &s.qnn_sdk == from) {
            let Some(after) = socs.iter().find(|s| &s.qnn_sdk == to && s.soc == before.soc) else { continue };
            let flip = |a: &str, b: &str| (a != b).then(|| format!("{a} → {b}"));
            let compiled = |v: &SocVerdict| if v.compiled { "compiled" } else { "not compiled" };
            let executed = |v: &SocVerdict| match v.executed {
                Some(true) => "ran",
                Some(false) => "failed",
                None => "not run",
            };
            let missing_in = |from: &SocVerdict, to: &SocVerdict| -> Vec<FallbackEntry> {
                to.rejected().filter(|node| !from.rejected().any(|n| n.name == node.name)).cloned().collect()
            };
            let change = VersionChange {
                soc: before.soc.clone(),
                from_qnn: from.clone(),
                to_qnn: to.clone(),
                outcome: flip(before.outcome.label(), after.outcome.label()),
                compiled: flip(compiled(before), compiled(after)),
                executed: flip(executed(before), executed(after)),
                newly_rejected: missing_in(before, after),
                newly_accepted: missing_in(after, before),
            };
            let changed = change.outcome.is_some()
                || change.compiled.is_some()
                || change.executed.is_some()
                || !change.newly_rejected.is_empty()
                || !change.newly_accepted.is_empty();
            if changed {
                changes.push(change);
            }
        }
    }
    changes
}

/// The settings of every SoC job (and of a compile): the user's session flags (`--ep-option`,
/// `--session-config`, the QNN flags, `--optimization`, …) with QNN on the HTP backend, these
/// shapes and fp16, session only (the target sets each SoC's `soc_model`).
pub(super) fn soc_settings(user: &SessionSettings, shapes: &[ShapeSpec], fp16: bool) -> HarnessSettings {
    let session = SessionSettings {
        ep: EpKind::Qnn,
        shapes: shapes.to_vec(),
        qnn: QnnArgs {
            qnn_backend: Some(QnnBackend::Type("htp")),
            enable_htp_fp16_precision: Some(fp16),
            ..user.qnn.clone()
        },
        ..user.clone()
    };
    HarnessSettings { session_only: true, no_reference_pass: true, ..HarnessSettings::from(session) }
}

/// Runs one job into `dir` (replaced), keeping whatever the harness wrote.
pub(super) fn launch(target: &WineTarget, job: &Job<'_>, dir: &Path, progress: &Progress<'_>) -> Result<Launched> {
    let staging = Staging::next_to(dir)?;
    let execution = target.execute(job, staging.path(), progress)?;
    let placed = staging.commit(true)?;
    Ok(Launched { dir: placed.dir().to_path_buf(), execution })
}

/// Where the CPU reference job of a model (its digest) with `inputs` (hashed with the command's
/// `hashes`) on `runtime` keeps its node shapes: `<cache>/htp-reference/<sha256 of the model
/// digest, the input files and the runtime>`.
fn reference_cache(model_digest: &str, inputs: &[InputFile], runtime: &RuntimeManifest, hashes: &HashCache) -> PathBuf {
    let mut key = Sha256::new();
    key.update(format!("{model_digest}\n{}\n{}\n", runtime.name, runtime.ort_version));
    for input in inputs {
        // A given input file is part of the key by content: the same name with other data is another job.
        let content = hashes.sha256(&input.path).map(|(sha, _)| sha).unwrap_or_default();
        key.update(format!("{}={content}\n", input.input));
    }
    npugate_host::paths::cache_dir().join("htp-reference").join(format!("{:x}", key.finalize()))
}

/// The node shapes a reference job left in `dir`, when it finished there (a model ONNX Runtime
/// could not load is never taken from the cache).
fn cached_reference(dir: &Path) -> Option<Profile> {
    let result = RunResult::read(dir)
        .ok()
        .filter(|r| r.session_error.is_none() && r.status == npugate_result::RunStatus::Complete)?;
    result.artifacts.reference_profile.as_ref()?;
    read_profile(&reference_profile_in(dir)?).ok()
}

/// The reference pass's profile in a reference job's directory (compressed, or plain as older
/// harnesses wrote it); a missing one is named as the compressed file.
fn read_reference_shapes(dir: &Path) -> Result<Profile, npugate_profile::AnalyzeError> {
    read_profile(&reference_profile_in(dir).unwrap_or_else(|| dir.join(files::REFERENCE_PROFILE)))
}

/// The reference job's node shapes. `Err(Err)`: ONNX Runtime cannot load the model at all, so no
/// SoC can be judged; `Ok(Err(why))`: the shapes are missing — why, in the job's own words, and
/// where its result directory is — and the verdicts stand without FLOPs.
fn reference_shapes(
    reference: Option<&Launched>,
    infrastructure: Option<&str>,
    model: &Path,
) -> Result<Result<Profile, String>> {
    let Some(launched) = reference else {
        return Ok(Err(format!("the CPU reference job did not run: {}", infrastructure.unwrap_or("no reason given"))));
    };
    let kept = format!("its result directory: {}", launched.dir.display());
    match RunResult::read(&launched.dir) {
        Ok(result) if result.session_error.is_some() => bail!(
            "ONNX Runtime cannot load model {} even on its CPU EP: {} ({kept})",
            model.display(),
            result.session_error.unwrap_or_default()
        ),
        Ok(result) => match (&result.error, read_reference_shapes(&launched.dir)) {
            (_, Ok(profile)) => Ok(Ok(profile)),
            (Some(error), Err(_)) => Ok(Err(format!("the CPU reference job failed: {} ({kept})", error.trim()))),
            (None, Err(missing)) => Ok(Err(format!("the CPU reference job left no node shapes: {missing} ({kept})"))),
        },
        Err(_) if launched.execution.succeeded() => Ok(Err(format!("the CPU reference job wrote no result ({kept})"))),
        Err(_) => bail!(
            "ONNX Runtime (Windows x64, under wine) could not run model {} on its CPU EP ({}): {} ({kept})",
            model.display(),
            launched.execution.status(),
            launched.execution.last_message()
        ),
    }
}

/// The verdict for `soc` from its job on `runtime`: the result the harness wrote, the log's
/// rejections and the reference's node shapes; `executed` when the job ran one inference after
/// the compile.
fn judge_soc(
    soc: Soc,
    runtime: &RuntimeManifest,
    attempt: Result<Launched, String>,
    reference: Option<&Profile>,
    executed: bool,
) -> SocVerdict {
    let mut verdict = unjudged_verdict(soc, runtime);
    let launched = match attempt {
        Ok(launched) => launched,
        Err(error) => {
            verdict.error = Some(format!("could not judge: {error}"));
            return verdict;
        }
    };
    verdict.result_dir = Some(launched.dir.clone());
    let result = match RunResult::read(&launched.dir) {
        Ok(result) => result,
        Err(_) => {
            let execution = &launched.execution;
            verdict.error = Some(format!(
                "could not judge: the harness ended ({}) without a result: {} (see {})",
                execution.status(),
                execution.last_message(),
                launched.dir.join(files::HARNESS_STDERR).display()
            ));
            return verdict;
        }
    };
    let rejections = read_rejections(&launched.dir.join(files::ORT_LOG)).unwrap_or_default();
    let backend_started = result.backend.as_ref().is_none_or(|b| b.started);
    let validated = !rejections.by_node.is_empty() || !rejections.backend.is_empty();
    if let Some(refused) = &result.session_error {
        if let Some(abi) = npugate_engine::ep_plugin::refusal(refused, runtime) {
            verdict.error = Some(format!("could not judge: {abi}"));
            return verdict;
        }
        if !backend_started && !validated {
            verdict.error =
                Some(format!("could not judge: the HTP backend did not start: {}", backend_reason(&result)));
            return verdict;
        }
        judge_refused_session(&mut verdict, soc, refused, &result, &rejections);
        return verdict;
    }
    if !backend_started && !validated {
        verdict.error = Some(format!("could not judge: the HTP backend did not start: {}", backend_reason(&result)));
        return verdict;
    }
    judge_compiled(&mut verdict, soc, &result, &rejections, reference, executed);
    verdict
}

/// The verdict for `soc` on `runtime` before anything is judged: an error with no reason yet.
fn unjudged_verdict(soc: Soc, runtime: &RuntimeManifest) -> SocVerdict {
    SocVerdict {
        soc: soc.model.into(),
        htp_arch: soc.arch.into(),
        qnn_soc_model: soc.qnn_soc_model,
        qnn_sdk: String::new(),
        runtime: runtime.name.clone(),
        outcome: SocOutcome::Error,
        compiled: false,
        executed: None,
        error: None,
        fallback: Vec::new(),
        nodes_pct: None,
        flops_pct: None,
        seconds: 0.0,
        result_dir: None,
        placement: None,
        estimate: None,
    }
}

/// A session the backend refused (`refused`, its error): a failure, with the refused nodes as fallback.
fn judge_refused_session(
    verdict: &mut SocVerdict,
    soc: Soc,
    refused: &str,
    result: &RunResult,
    rejections: &RejectionReasons,
) {
    verdict.outcome = SocOutcome::Fail;
    verdict.error = Some(refusal(soc, refused, rejections));
    // The model nodes the backend refused itself first: the rest are their node units' Q/DQ
    // companions. Without the model's graph (an older harness), the names the log uses.
    let mut refused = match &result.graph {
        Some(graph) => rejections.model_nodes(graph),
        None => rejections
            .nodes()
            .map(|name| RefusedNode {
                name: name.into(),
                op_type: rejections.op_types.get(name).cloned().unwrap_or_default(),
                reason: rejections.reason(name),
            })
            .collect(),
    };
    refused.sort_by_key(|node| !node.reason.as_deref().is_some_and(|r| r.starts_with("QNN backend")));
    // Graph-I/O Q/DQ are on the CPU by design here too, as when the SoC compiles (one rule).
    let inputs = npugate_profile::placement::PlacementInputs::of_run(result);
    verdict.fallback = refused
        .into_iter()
        .map(|node| {
            let expected = inputs.on_cpu_by_design(&node.name);
            let hint = npugate_profile::hints::fallback_hint(
                &node.op_type,
                node.reason.as_deref(),
                &[],
                expected,
                EpKind::Qnn.ort_name().unwrap_or_default(),
            );
            FallbackEntry {
                expected,
                name: node.name,
                op_type: node.op_type,
                reason: node.reason.map(|r| arch_hint(&r, soc)),
                hint,
                inside: None,
            }
        })
        .collect();
}

/// A model the SoC compiled: its placement and fallback, and (when `executed`) the first
/// emulated inference's outcome.
fn judge_compiled(
    verdict: &mut SocVerdict,
    soc: Soc,
    result: &RunResult,
    rejections: &RejectionReasons,
    reference: Option<&Profile>,
    executed: bool,
) {
    let placement = placement_of(result, rejections, reference, soc);
    verdict.compiled = true;
    verdict.nodes_pct = Some(placement.preferred_nodes_pct);
    verdict.flops_pct = reference.map(|_| placement.preferred_flops_pct);
    verdict.fallback = fallback_entries(&placement);
    verdict.outcome = if verdict.fallback.iter().any(|f| !f.expected) { SocOutcome::Fail } else { SocOutcome::Pass };
    verdict.placement = Some(placement);
    if !executed {
        return;
    }
    verdict.executed = Some(result.inference_error.is_none());
    if let Some(failed) = &result.inference_error {
        verdict.outcome = SocOutcome::Fail;
        let failed = failed.trim().trim_start_matches("inference failed: ");
        verdict.error = Some(format!(
            "compiled for {} ({}), but the first emulated inference failed: {failed}",
            soc.model, soc.arch
        ));
    }
}

/// The placement of a session created on the host HTP as `soc` (labelled [`LABEL`]): the
/// assignment, the log's reasons (with the arch a node needs spelled out) and, when given, the
/// reference's node shapes for FLOPs.
pub(super) fn placement_of(
    result: &RunResult,
    rejections: &RejectionReasons,
    reference: Option<&Profile>,
    soc: Soc,
) -> PlacementReport {
    let label = format!("{LABEL}; SoC {} ({})", soc.model, soc.arch);
    let mut placement = build_report(&PlacementInputs {
        reference,
        rejections: Some(rejections),
        predicted: Some(&label),
        ..PlacementInputs::of_run(result)
    });
    for node in &mut placement.fallback {
        node.reason = node.reason.take().map(|r| arch_hint(&r, soc));
    }
    placement
}

/// Every node of `placement` left to the CPU.
pub(super) fn fallback_entries(placement: &PlacementReport) -> Vec<FallbackEntry> {
    placement
        .fallback
        .iter()
        .map(|node| FallbackEntry {
            name: node.name.clone(),
            op_type: node.op_type.clone(),
            reason: node.reason.clone(),
            expected: node.expected,
            hint: node.hint.clone(),
            inside: None,
        })
        .collect()
}

/// Why the backend did not start, from the result.
fn backend_reason(result: &RunResult) -> String {
    result.backend.as_ref().and_then(|b| b.reason.clone()).unwrap_or_else(|| "no reason in the log".into())
}

/// "cannot compile for SM8350 (v68): …" when finalize failed, else the session's refusal.
fn refusal(soc: Soc, error: &str, rejections: &RejectionReasons) -> String {
    let error = error.trim();
    if rejections.finalize_errors.is_empty() {
        format!("ONNX Runtime refused the session for {} ({}): {error}", soc.model, soc.arch)
    } else {
        format!(
            "cannot compile for {} ({}): {error}; QNN: {}",
            soc.model,
            soc.arch,
            rejections.finalize_errors.join("; ")
        )
    }
}

/// Adds what QNN's "has incorrect Value 68, expected >= 73" means when 68 is this SoC's arch.
pub(super) fn arch_hint(reason: &str, soc: Soc) -> String {
    let arch = soc.arch.trim_start_matches('v');
    let marker = format!("incorrect Value {arch}, expected >= ");
    match reason.find(&marker) {
        Some(at) => {
            let needed: String = reason[at + marker.len()..].chars().take_while(char::is_ascii_digit).collect();
            format!("{reason} [needs Hexagon v{needed} or newer; {} is {}]", soc.model, soc.arch)
        }
        None => reason.to_string(),
    }
}

/// The terminal report: the label, the matrix SoC × QNN version, every SoC's fallback nodes and
/// errors, then what changed between QNN versions.
pub fn summary(report: &HtpPreflightReport) -> String {
    let versions: Vec<String> = report.qnn.iter().map(|q| format!("QNN {} ({})", q.sdk, q.runtime)).collect();
    let mut text = format!("preflight: {}\nmodel {}\n{}\n\n", report.label, report.model, versions.join(", "));
    text.push_str(&matrix(report));
    if report.qnn.len() <= 1 && report.socs.iter().any(|s| s.estimate.as_ref().is_some_and(|e| e.estimate_ms.is_some()))
    {
        text.push_str(
            "* ESTIMATE of the device latency from the graph, not a measurement (npugate estimate: ±p90 error)\n",
        );
    }
    let coverage = report
        .socs
        .iter()
        .filter_map(|s| s.placement.as_ref())
        .map(|p| &p.totals)
        .find(|t| t.flops_covered_pct < 100.0);
    if let Some(totals) = coverage {
        let unknown = match totals.flops_unknown_nodes {
            0 => String::new(),
            n => format!(" (FLOPs unknown for {n} node(s), estimated at the model's rate in the CPU reference pass)"),
        };
        text.push_str(&format!(
            "FLOPS ON HTP is a share of the counted FLOPs, {:.1}% of the model's{unknown}\n",
            totals.flops_covered_pct
        ));
    }
    let several = report.qnn.len() > 1;
    text.push_str(&fallback_text(report));
    if several {
        text.push_str(&changes_text(report));
    }
    for warning in &report.warnings {
        text.push_str(&format!("\nwarning: {warning}\n"));
    }
    text
}

/// Every SoC's errors, nodes left to CPU and fixes: what is the same for every SoC (and QNN
/// version) once, under `all SoCs (…)`, then what differs, per SoC; the nodes of a control-flow
/// body once, under their control-flow node.
fn fallback_text(report: &HtpPreflightReport) -> String {
    let several = report.qnn.len() > 1;
    let blocks: Vec<(String, Vec<String>)> = report
        .socs
        .iter()
        .map(|soc| {
            let version = if several { format!(", QNN {}", soc.qnn_sdk) } else { String::new() };
            (format!("{} ({}{version})", soc.soc, soc.htp_arch), soc_lines(soc))
        })
        .collect();
    let common: Vec<&String> = match blocks.split_first() {
        Some(((_, first), rest)) if !rest.is_empty() => {
            first.iter().filter(|line| rest.iter().all(|(_, lines)| lines.contains(line))).collect()
        }
        _ => Vec::new(),
    };
    let mut text = String::new();
    if !common.is_empty() {
        let names: Vec<&str> = blocks.iter().map(|(header, _)| header.as_str()).collect();
        let every = if several { "every SoC and QNN version" } else { "all SoCs" };
        text.push_str(&format!("\n{every} ({}):\n", names.join(", ")));
        common.iter().for_each(|line| text.push_str(&format!("{line}\n")));
    }
    for (header, lines) in &blocks {
        let own: Vec<&String> = lines.iter().filter(|line| !common.contains(line)).collect();
        if !own.is_empty() {
            text.push_str(&format!("\n{header}:\n"));
            own.iter().for_each(|line| text.push_str(&format!("{line}\n")));
        }
    }
    text
}

/// One SoC's lines of [`fallback_text`]: its error, the rule that failed, its nodes left to CPU
/// (a control-flow body's after its control-flow node, grouped by reason) and the fixes.
fn soc_lines(soc: &SocVerdict) -> Vec<String> {
    let mut lines: Vec<String> = soc.error.iter().map(|error| format!("  {error}")).collect();
    let left = soc.rejected().count();
    if soc.compiled && soc.error.is_none() && left > 0 {
        lines.push(format!(
            "  {} by preflight's rule: every model node on the HTP ({left} left to CPU{}); `run` judges npu_flops_pct >= 98% instead, and passes a placement that meets it",
            soc.outcome.label(),
            soc.flops_pct.map(|pct| format!(", {pct:.1}% of FLOPs on the HTP")).unwrap_or_default()
        ));
    }
    let kind = |node: &FallbackEntry| if node.expected { "on CPU by design" } else { "left to CPU" };
    lines.extend(node_lines(&soc.fallback, &kind));
    let mut fixes: Vec<&str> = Vec::new();
    for hint in soc.rejected().filter_map(|node| node.hint.as_deref()) {
        if !fixes.contains(&hint) {
            fixes.push(hint);
        }
    }
    lines.extend(fixes.iter().map(|fix| format!("  fix: {fix}")));
    lines
}

/// `  {kind}: name (Op): reason` per node, with the nodes of a control-flow body once, after
/// their control-flow node (`    in the body of L (N node(s)):`), grouped by reason.
pub fn node_lines(nodes: &[FallbackEntry], kind: &dyn Fn(&FallbackEntry) -> &'static str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut holders: Vec<&str> = Vec::new();
    for node in nodes {
        match &node.inside {
            None => lines.push(format!("  {}: {}", kind(node), node_line(node))),
            Some(holder) if !holders.contains(&holder.as_str()) => holders.push(holder),
            Some(_) => {}
        }
    }
    for holder in holders {
        let body: Vec<&FallbackEntry> = nodes.iter().filter(|n| n.inside.as_deref() == Some(holder)).collect();
        let mut groups: Vec<(String, Vec<&FallbackEntry>)> = Vec::new();
        for node in body {
            let key = format!("{}: {}", kind(node), node_reason(node));
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, nodes)) => nodes.push(node),
                None => groups.push((key, vec![node])),
            }
        }
        let at = lines.iter().position(|line| line.contains(&format!(": {holder} ("))).map_or(lines.len(), |i| i + 1);
        let header =
            format!("    in the body of {holder} ({} node(s)):", groups.iter().map(|(_, n)| n.len()).sum::<usize>());
        let grouped = groups.into_iter().map(|(key, nodes)| {
            let (kind, reason) = key.split_once(": ").unwrap_or((&key, ""));
            format!("      {kind}: {}: {reason}", names_of(&nodes))
        });
        lines.splice(at..at, std::iter::once(header).chain(grouped));
    }
    lines
}

/// `a (Add), b (Mul)`, the first 6 and how many more.
fn names_of(nodes: &[&FallbackEntry]) -> String {
    const SHOWN: usize = 6;
    let mut text =
        nodes.iter().take(SHOWN).map(|n| format!("{} ({})", n.name, n.op_type)).collect::<Vec<_>>().join(", ");
    if nodes.len() > SHOWN {
        text.push_str(&format!(" and {} more", nodes.len() - SHOWN));
    }
    text
}

/// One row per SoC: with one QNN version its outcome, compile, inference, shares, nodes left and
/// time; with several, one column per version holding the outcome, compile and shares.
fn matrix(report: &HtpPreflightReport) -> String {
    let pct = |value: Option<f64>| value.map_or_else(|| "-".to_string(), |v| format!("{v:.1}%"));
    let ran = |s: &SocVerdict| match s.executed {
        Some(true) => "yes",
        Some(false) => "FAILED",
        None => "-",
    };
    if report.qnn.len() <= 1 {
        let rows = report.socs.iter().map(|s| {
            vec![
                s.soc.clone(),
                s.htp_arch.clone(),
                s.outcome.label().to_string(),
                if s.compiled { "yes" } else { "no" }.to_string(),
                ran(s).to_string(),
                pct(s.nodes_pct),
                pct(s.flops_pct),
                s.rejected().count().to_string(),
                s.estimate.as_ref().map_or_else(|| "-".to_string(), SocEstimate::cell),
                format!("{:.1} s", s.seconds),
            ]
        });
        let header = [
            "SOC",
            "ARCH",
            "OUTCOME",
            "COMPILED",
            "RAN",
            "NODES ON HTP",
            "FLOPS ON HTP",
            "LEFT TO CPU",
            "ESTIMATE*",
            "TIME",
        ];
        return npugate_result::table::plain(&header, rows);
    }
    let mut socs: Vec<(&str, &str)> = Vec::new();
    for s in &report.socs {
        if !socs.iter().any(|(name, _)| *name == s.soc) {
            socs.push((&s.soc, &s.htp_arch));
        }
    }
    let rows = socs.iter().map(|(soc, arch)| {
        let mut row = vec![soc.to_string(), arch.to_string()];
        for version in &report.qnn {
            let cell = report.socs.iter().find(|s| s.soc == *soc && s.qnn_sdk == version.sdk).map(|s| {
                let compiled = if s.compiled { "compiled" } else { "not compiled" };
                let ran = if s.executed == Some(false) { ", run failed" } else { "" };
                format!("{} {compiled}{ran} {} / {}", s.outcome.label(), pct(s.nodes_pct), pct(s.flops_pct))
            });
            row.push(cell.unwrap_or_else(|| "-".into()));
        }
        row
    });
    let titles: Vec<String> =
        report.qnn.iter().map(|q| format!("QNN {}: OUTCOME NODES / FLOPS ON HTP", q.sdk)).collect();
    let mut header = vec!["SOC", "ARCH"];
    header.extend(titles.iter().map(String::as_str));
    npugate_result::table::plain(&header, rows)
}

/// `name (Op): reason` — the backend's, else why there is none.
fn node_line(node: &FallbackEntry) -> String {
    format!("{} ({}): {}", node.name, node.op_type, node_reason(node))
}

/// The backend's reason for a node, else why there is none.
fn node_reason(node: &FallbackEntry) -> &str {
    match (&node.reason, node.expected) {
        (Some(reason), _) => reason.as_str(),
        (None, true) => "graph-I/O quantization, left to the CPU by design (offload_graph_io_quantization=1); the log names no reason",
        (None, false) => "no reason in the log",
    }
}

/// "What changed between QNN versions": one block per pair of consecutive versions where
/// anything did, or one line saying nothing did.
fn changes_text(report: &HtpPreflightReport) -> String {
    if report.changes.is_empty() {
        let versions: Vec<&str> = report.qnn.iter().map(|q| q.sdk.as_str()).collect();
        return format!(
            "\nwhat changed between QNN {}: nothing; every SoC has the same outcome, compile, inference and nodes left to the CPU\n",
            versions.join(", ")
        );
    }
    let mut text = String::new();
    for pair in report.qnn.windows(2) {
        let (from, to) = (&pair[0].sdk, &pair[1].sdk);
        let changes: Vec<&VersionChange> =
            report.changes.iter().filter(|c| &c.from_qnn == from && &c.to_qnn == to).collect();
        text.push_str(&format!(
            "\nwhat changed from QNN {from} to QNN {to}:{}\n",
            if changes.is_empty() { " nothing" } else { "" }
        ));
        for change in changes {
            let flips: Vec<String> =
                [("outcome", &change.outcome), ("compile", &change.compiled), ("inference", &change.executed)]
                    .into_iter()
                    .filter_map(|(what, flip)| flip.as_ref().map(|flip| format!("{what} {flip}")))
                    .collect();
            text.push_str(&format!(
                "  {}:{}\n",
                change.soc,
                if flips.is_empty() { String::new() } else { format!(" {}", flips.join(", ")) }
            ));
            for node in &change.newly_rejected {
                text.push_str(&format!("    newly rejected by {to}: {}\n", node_line(node)));
            }
            for node in &change.newly_accepted {
                text.push_str(&format!("    newly accepted by {to} (rejected by {from}): {}\n", node_line(node)));
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use npugate_result::hexagon::find;

    fn launched(dir: &Path, code: i32, result: Option<&str>, log: &str) -> Launched {
        std::fs::create_dir_all(dir).unwrap();
        if let Some(json) = result {
            std::fs::write(dir.join(files::RESULT), json).unwrap();
        }
        std::fs::write(dir.join(files::ORT_LOG), log).unwrap();
        Launched {
            dir: dir.to_path_buf(),
            execution: Execution {
                exit_code: Some(code),
                signal: None,
                stderr: "npugate-harness: error: boom".into(),
                seconds: 1.0,
                warnings: Vec::new(),
            },
        }
    }

    #[test]
    fn a_crash_or_a_failed_launch_is_not_judged_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let soc = find("SM8650").unwrap();
        let runtime = RuntimeManifest::for_tests(dir.path());
        let crashed = judge_soc(soc, &runtime, Ok(launched(&dir.path().join("a"), 3, None, "")), None, true);
        assert_eq!(crashed.outcome, SocOutcome::Error);
        let error = crashed.error.unwrap();
        assert!(
            error.contains("without a result: npugate-harness: error: boom") && error.contains("harness.stderr"),
            "{error}"
        );
        let failed = judge_soc(soc, &runtime, Err("wine is not installed; run scripts/setup".into()), None, true);
        assert_eq!((failed.outcome, failed.compiled), (SocOutcome::Error, false));
        assert!(failed.error.unwrap().contains("wine is not installed"));
    }

    fn verdict(soc: &str, qnn: &str, outcome: SocOutcome, compiled: bool, rejected: &[(&str, &str)]) -> SocVerdict {
        SocVerdict {
            soc: soc.into(),
            htp_arch: "v75".into(),
            qnn_soc_model: 57,
            qnn_sdk: qnn.into(),
            runtime: format!("rt-{qnn}"),
            outcome,
            compiled,
            executed: None,
            error: None,
            fallback: rejected
                .iter()
                .map(|(name, reason)| FallbackEntry {
                    name: (*name).into(),
                    op_type: "Op".into(),
                    reason: Some((*reason).into()),
                    expected: false,
                    hint: None,
                    inside: None,
                })
                .chain(std::iter::once(FallbackEntry {
                    name: "output_DQ".into(),
                    op_type: "DequantizeLinear".into(),
                    reason: None,
                    expected: true,
                    hint: None,
                    inside: None,
                }))
                .collect(),
            nodes_pct: None,
            flops_pct: None,
            seconds: 0.0,
            result_dir: None,
            placement: None,
            estimate: None,
        }
    }

    #[test]
    fn what_changed_between_versions_names_flips_and_nodes_with_each_versions_reason() {
        let qnn = |sdk: &str| QnnRuntime {
            sdk: sdk.into(),
            build: None,
            runtime: format!("rt-{sdk}"),
            ort_version: "1.31.1".into(),
        };
        let versions = [qnn("2.49.40"), qnn("2.51.0")];
        let socs = [
            verdict("SM8350", "2.49.40", SocOutcome::Fail, false, &[]),
            verdict("SM8650", "2.49.40", SocOutcome::Fail, true, &[("a", "old reason for a")]),
            verdict("SM8350", "2.51.0", SocOutcome::Pass, true, &[]),
            verdict("SM8650", "2.51.0", SocOutcome::Fail, true, &[("b", "new reason for b")]),
        ];
        let changes = version_changes(&versions, &socs);
        assert_eq!(changes.len(), 2, "{changes:#?}");
        let v68 = &changes[0];
        assert_eq!(
            (v68.soc.as_str(), v68.outcome.as_deref(), v68.compiled.as_deref()),
            ("SM8350", Some("FAIL → PASS"), Some("not compiled → compiled"))
        );
        let v75 = &changes[1];
        assert_eq!(v75.outcome, None);
        assert_eq!(
            v75.newly_rejected.iter().map(|n| (n.name.as_str(), n.reason.as_deref())).collect::<Vec<_>>(),
            [("b", Some("new reason for b"))]
        );
        assert_eq!(
            v75.newly_accepted.iter().map(|n| (n.name.as_str(), n.reason.as_deref())).collect::<Vec<_>>(),
            [("a", Some("old reason for a"))]
        );
        let report = HtpPreflightReport {
            schema: HTP_PREFLIGHT_SCHEMA.into(),
            label: LABEL.into(),
            model: "m.onnx".into(),
            model_sha256: String::new(),
            qnn: versions.to_vec(),
            executed: false,
            socs: socs.to_vec(),
            changes,
            warnings: Vec::new(),
            exit_code: 1,
        };
        let text = summary(&report);
        assert!(text.contains("QNN 2.49.40: OUTCOME NODES / FLOPS ON HTP"), "{text}");
        assert!(text.contains("what changed from QNN 2.49.40 to QNN 2.51.0:\n  SM8350: outcome FAIL → PASS, compile not compiled → compiled"), "{text}");
        assert!(text.contains("    newly rejected by 2.51.0: b (Op): new reason for b"), "{text}");
        assert!(
            text.contains("  FAIL by preflight's rule: every model node on the HTP (1 left to CPU"),
            "a FAIL names the rule that failed: {text}"
        );
        assert!(
            text.contains("    newly accepted by 2.51.0 (rejected by 2.49.40): a (Op): old reason for a"),
            "{text}"
        );
    }

    #[test]
    fn a_loop_bodys_nodes_are_shown_once_under_the_loop_and_what_every_soc_shares_once() {
        let in_body = |name: &str| FallbackEntry {
            name: name.into(),
            op_type: "Mul".into(),
            reason: None,
            expected: false,
            hint: None,
            inside: Some("steps_loop".into()),
        };
        let soc = |name: &str, own: &str| {
            let mut soc =
                verdict(name, "2.51.0", SocOutcome::Fail, true, &[("steps_loop", "Loop is not supported"), (own, "r")]);
            soc.fallback.extend((0..8).map(|i| in_body(&format!("mul{i}"))));
            soc
        };
        let report = HtpPreflightReport {
            schema: HTP_PREFLIGHT_SCHEMA.into(),
            label: LABEL.into(),
            model: "m.onnx".into(),
            model_sha256: String::new(),
            qnn: Vec::new(),
            executed: false,
            socs: vec![soc("SM8650", "a"), soc("SM8350", "b")],
            changes: Vec::new(),
            warnings: Vec::new(),
            exit_code: 1,
        };
        let text = fallback_text(&report);
        let expected = "\nall SoCs (SM8650 (v75), SM8350 (v75)):\n\
                        \x20 FAIL by preflight's rule: every model node on the HTP (10 left to CPU); `run` judges npu_flops_pct >= 98% instead, and passes a placement that meets it\n\
                        \x20 left to CPU: steps_loop (Op): Loop is not supported\n\
                        \x20   in the body of steps_loop (8 node(s)):\n\
                        \x20     left to CPU: mul0 (Mul), mul1 (Mul), mul2 (Mul), mul3 (Mul), mul4 (Mul), mul5 (Mul) and 2 more: no reason in the log\n\
                        \x20 on CPU by design: output_DQ (DequantizeLinear): graph-I/O quantization, left to the CPU by design (offload_graph_io_quantization=1); the log names no reason\n\
                        \nSM8650 (v75):\n  left to CPU: a (Op): r\n\
                        \nSM8350 (v75):\n  left to CPU: b (Op): r\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn the_arch_a_node_needs_is_spelled_out_for_this_socs_arch_only() {
        let v68 = find("SM8350").unwrap();
        let reason = "QNN backend: [4294967295] has incorrect Value 68, expected >= 73.";
        assert!(arch_hint(reason, v68).ends_with("[needs Hexagon v73 or newer; SM8350 is v68]"));
        assert_eq!(arch_hint(reason, find("SM8650").unwrap()), reason);
    }

    #[test]
    fn a_compile_failure_names_the_soc_and_qnns_errors() {
        let rejections = RejectionReasons {
            finalize_errors: vec!["RouterX86 graph prepare failed 12".into()],
            ..Default::default()
        };
        let text = refusal(find("SM8350").unwrap(), "Failed to finalize QNN graph. Code: 1002", &rejections);
        assert_eq!(text, "cannot compile for SM8350 (v68): Failed to finalize QNN graph. Code: 1002; QNN: RouterX86 graph prepare failed 12");
        let other = refusal(find("SM8350").unwrap(), "Node 'c' was not selected", &RejectionReasons::default());
        assert!(other.starts_with("ONNX Runtime refused the session for SM8350 (v68)"), "{other}");
    }
}
