//! `npugate preflight` on the host HTP: for each chosen Snapdragon, a session on Qualcomm's x86_64
//! HTP backend configured as that SoC, with the backend's own op validation on and the graph
//! finalized (compiled), nothing run. Per SoC it reports the nodes and FLOPs the HTP claims, every
//! node left to the CPU with the backend's own reason, and "cannot compile" when finalize fails.
//!
//! All SoCs and one CPU reference job (the model's node shapes, for FLOPs; it also proves that
//! ONNX Runtime loads the model at all) run in parallel, one wine process each; the reference's
//! shapes are kept in the cache, so the next preflight of the same model runs the SoCs only. A session that
//! ONNX Runtime or QNN refuses to create is a verdict for that SoC — the device would fail the same
//! way; a crash, a dead backend or missing wine is "could not judge".

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use npugate_settings::qnn::QnnBackend;
use npugate_settings::{EpKind, HarnessSettings, QnnArgs, SessionSettings, ShapeSpec};
use npugate_result::contract::{self, EXIT_ERROR, EXIT_FAIL, EXIT_PASS};
use npugate_result::{files, RunResult};
use npugate_profile::ort_log::{RefusedNode, RejectionReasons};
use npugate_profile::placement::{build_report, PlacementInputs};
use npugate_profile::profile::Profile;
use npugate_profile::report::PlacementReport;
use npugate_profile::result_dir::{read_profile, read_rejections};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::HostHtp;
use crate::hexagon::Soc;
use crate::layout::Staging;
use crate::rack::{self, Attempted, RackPolicy};
use crate::runtime::RuntimeManifest;
use crate::targets::wine::WineTarget;
use crate::targets::{Cancel, Execution, Job, Progress, Target};

/// Schema of `preflight.json`.
pub const HTP_PREFLIGHT_SCHEMA: &str = "npugate.htp-preflight/1";
/// The file the report is saved as in the preflight directory.
pub const REPORT_FILE: &str = "preflight.json";
/// The name of the CPU reference job (its directory is in the cache: see `reference_cache`).
const REFERENCE_DIR: &str = "reference";
/// The longest one SoC's validation and compile may take.
const TIMEOUT: Duration = Duration::from_secs(3600);
/// What every report says it is.
pub const LABEL: &str = "HTP validation and compile by Qualcomm's host backend (QNN's x86_64 build, under wine); the device did not run";

/// What a host-HTP preflight needs.
#[derive(Debug, Clone)]
pub struct HtpPreflightRequest<'a> {
    /// The Windows harness and runtime.
    pub host: &'a HostHtp,
    /// The model.
    pub model: &'a Path,
    /// Shapes of dynamic inputs.
    pub shapes: &'a [ShapeSpec],
    /// The SoCs to judge the model for, in report order.
    pub socs: &'a [Soc],
    /// Run float graphs in fp16 on HTP, as the device run would.
    pub fp16: bool,
}

/// `preflight.json`: the verdict per SoC.
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
    /// The runtime that judged it.
    pub runtime: String,
    /// The QNN build of its HTP backend (`v2.51.0.260929181845`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qnn_build: Option<String>,
    /// One verdict per SoC, in the order asked.
    pub socs: Vec<SocVerdict>,
    /// Problems of the whole preflight that spare the verdicts (e.g. FLOPs unknown).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// 0 every SoC passes, 1 a SoC fails, 2 a SoC could not be judged.
    pub exit_code: u8,
}

impl contract::Document for HtpPreflightReport {
    const SCHEMA: contract::Schema = contract::Schema::new(HTP_PREFLIGHT_SCHEMA);
}

/// The verdict for one SoC.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SocVerdict {
    /// SoC model, e.g. `SM8650`.
    pub soc: String,
    /// Its Hexagon arch, e.g. `v75`.
    pub htp_arch: String,
    /// Its QNN `soc_model` id.
    pub qnn_soc_model: u32,
    /// `pass` (every node claimed, graph compiled), `fail` (a node left to the CPU, or the session
    /// refused / the graph not compiled) or `error` (could not judge).
    pub outcome: SocOutcome,
    /// True when the backend finalized (compiled) the graph for this SoC.
    pub compiled: bool,
    /// Why the session was refused or could not be judged.
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
}

/// One job's output directory and how its harness ended.
struct Launched {
    dir: PathBuf,
    execution: Execution,
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

impl HtpPreflightRequest<'_> {
    /// Judges the model for every SoC into `out` (`<SOC>/` result dirs, `preflight.json`; the
    /// CPU reference job's node shapes are kept in the cache for the next preflight of the model) and returns the report. Fails only when nothing can be judged: the model
    /// cannot be read or fixed, or ONNX Runtime cannot load it even on its CPU EP.
    pub fn run(&self, out: &Path, cancel: &Cancel) -> Result<HtpPreflightReport> {
        let (model_sha256, _) = npugate_result::digest::sha256_file(self.model)
            .with_context(|| format!("model {} cannot be read; pass --model with an .onnx file", self.model.display()))?;
        let prepared = crate::model::prepare(self.model, self.shapes, &[], &crate::model::default_cache())?;
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;

        let reference_settings =
            HarnessSettings { session_only: true, ..HarnessSettings::from(SessionSettings { shapes: self.shapes.to_vec(), ..SessionSettings::default() }) };
        let soc_settings = soc_settings(self.shapes, self.fp16);
        // The node shapes depend on the model and ONNX Runtime only: computed once, then reused.
        let reference_dir = reference_cache(&prepared.files.digest, &self.host.runtime);
        let cached = cached_reference(&reference_dir);
        let mut targets: Vec<WineTarget> = Vec::new();
        if cached.is_none() {
            targets.push(WineTarget::new().named(REFERENCE_DIR));
        }
        targets.extend(self.socs.iter().map(|soc| WineTarget::for_soc(*soc)));
        let refs: Vec<&WineTarget> = targets.iter().collect();
        let policy = RackPolicy { retries: 0, retry_pause: Duration::ZERO, cancel: cancel.clone() };
        let rack = rack::run_rack(&refs, &policy, |target, progress| {
            let (settings, dir) = match target.soc() {
                Some(_) => (&soc_settings, out.join(target.name())),
                None => (&reference_settings, reference_dir.clone()),
            };
            let job = Job {
                harness: &self.host.harness,
                runtime: &self.host.runtime,
                model: &prepared.path,
                prepared: Some(&prepared),
                settings,
                env: &[],
                timeout: TIMEOUT,
                cancel,
            };
            launch(target, &job, &dir, progress)
        });
        let mut warnings = Vec::new();
        let mut outcomes = rack.report.devices.iter().zip(rack.results);
        let reference_profile = match cached {
            Some(profile) => Ok(profile),
            None => {
                let (_, reference) = outcomes.next().context("the reference job is in the rack")?;
                reference_shapes(reference.as_ref(), self.model)?
            }
        };
        let reference_profile = match reference_profile {
            Ok(profile) => Some(profile),
            Err(why) => {
                warnings.push(format!("FLOPs are unknown: {why}"));
                None
            }
        };
        let socs: Vec<SocVerdict> = self
            .socs
            .iter()
            .zip(outcomes)
            .map(|(soc, (outcome, launched))| {
                let attempt = match (launched, &outcome.infrastructure_error) {
                    (Some(launched), _) => Ok(launched),
                    (None, error) => Err(error.clone().unwrap_or_else(|| "the job did not finish".into())),
                };
                let mut verdict = judge_soc(*soc, attempt, reference_profile.as_ref());
                verdict.seconds = outcome.seconds;
                verdict
            })
            .collect();
        for verdict in &socs {
            if let (Some(dir), Some(placement)) = (&verdict.result_dir, &verdict.placement) {
                contract::write_json(&dir.join(files::PLACEMENT), placement)?;
            }
        }
        let exit_code = socs.iter().map(|s| s.outcome.exit_code()).max().unwrap_or(EXIT_PASS);
        let report = HtpPreflightReport {
            schema: HTP_PREFLIGHT_SCHEMA.into(),
            label: LABEL.into(),
            model: self.model.display().to_string(),
            model_sha256,
            runtime: self.host.runtime.name.clone(),
            qnn_build: self.host.runtime.qnn_build(),
            socs,
            warnings,
            exit_code,
        };
        contract::write_json(&out.join(REPORT_FILE), &report)?;
        Ok(report)
    }
}

/// The settings of every SoC job (and of a compile): QNN on the HTP backend, validation on,
/// session only.
pub(super) fn soc_settings(shapes: &[ShapeSpec], fp16: bool) -> HarnessSettings {
    let session = SessionSettings {
        ep: EpKind::Qnn,
        shapes: shapes.to_vec(),
        qnn: QnnArgs { qnn_backend: Some(QnnBackend::Type("htp")), enable_htp_fp16_precision: Some(fp16), ..QnnArgs::default() },
        ..SessionSettings::default()
    };
    HarnessSettings { session_only: true, no_reference_pass: true, ..HarnessSettings::from(session) }
}

/// Runs one job into `dir` (replaced), keeping whatever the harness wrote.
fn launch(target: &WineTarget, job: &Job<'_>, dir: &Path, progress: &dyn Progress) -> Result<Launched> {
    let staging = Staging::next_to(dir)?;
    let execution = target.execute(job, staging.path(), progress)?;
    let placed = staging.commit(true)?;
    Ok(Launched { dir: placed.dir().to_path_buf(), execution })
}

/// Where the CPU reference job of a model (its digest) on `runtime` keeps its node shapes:
/// `<cache>/htp-reference/<sha256 of the model digest and the runtime>`.
fn reference_cache(model_digest: &str, runtime: &RuntimeManifest) -> PathBuf {
    let mut key = Sha256::new();
    key.update(format!("{model_digest}\n{}\n{}\n", runtime.name, runtime.ort_version));
    crate::paths::cache_dir().join("htp-reference").join(format!("{:x}", key.finalize()))
}

/// The node shapes a reference job left in `dir`, when it finished there (a model ONNX Runtime
/// could not load is never taken from the cache).
fn cached_reference(dir: &Path) -> Option<Profile> {
    let result = RunResult::read(dir).ok().filter(|r| r.session_error.is_none() && r.status == npugate_result::RunStatus::Complete)?;
    result.artifacts.reference_profile.as_ref()?;
    read_profile(&dir.join(files::REFERENCE_PROFILE)).ok()
}

/// The reference job's node shapes. `Err(Err)`: ONNX Runtime cannot load the model at all, so no
/// SoC can be judged; `Ok(Err(why))`: the shapes are missing, the verdicts stand without FLOPs.
fn reference_shapes(reference: Option<&Launched>, model: &Path) -> Result<Result<Profile, String>> {
    let Some(launched) = reference else {
        return Ok(Err("the CPU reference job did not run".into()));
    };
    match RunResult::read(&launched.dir) {
        Ok(result) if result.session_error.is_some() => bail!(
            "ONNX Runtime cannot load model {} even on its CPU EP: {}",
            model.display(),
            result.session_error.unwrap_or_default()
        ),
        Ok(_) => Ok(read_profile(&launched.dir.join(files::REFERENCE_PROFILE)).map_err(|e| e.to_string())),
        Err(_) if launched.execution.succeeded() => Ok(Err(format!("the CPU reference job wrote no result in {}", launched.dir.display()))),
        Err(_) => bail!(
            "ONNX Runtime (Windows x64, under wine) could not run model {} on its CPU EP ({}): {}",
            model.display(),
            launched.execution.status(),
            launched.execution.last_message()
        ),
    }
}

/// The verdict for `soc` from its job: the result the harness wrote, the log's rejections and the
/// reference's node shapes.
fn judge_soc(soc: Soc, attempt: Result<Launched, String>, reference: Option<&Profile>) -> SocVerdict {
    let mut verdict = SocVerdict {
        soc: soc.model.into(),
        htp_arch: soc.arch.into(),
        qnn_soc_model: soc.qnn_soc_model,
        outcome: SocOutcome::Error,
        compiled: false,
        error: None,
        fallback: Vec::new(),
        nodes_pct: None,
        flops_pct: None,
        seconds: 0.0,
        result_dir: None,
        placement: None,
    };
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
            verdict.error = Some(format!("could not judge: the harness ended ({}) without a result: {}", execution.status(), execution.last_message()));
            return verdict;
        }
    };
    let rejections = read_rejections(&launched.dir.join(files::ORT_LOG)).unwrap_or_default();
    let backend_started = result.backend.as_ref().is_none_or(|b| b.started);
    let validated = !rejections.by_node.is_empty() || !rejections.backend.is_empty();
    if let Some(refused) = &result.session_error {
        if !backend_started && !validated {
            verdict.error = Some(format!("could not judge: the HTP backend did not start: {}", backend_reason(&result)));
            return verdict;
        }
        verdict.outcome = SocOutcome::Fail;
        verdict.error = Some(refusal(soc, refused, &rejections));
        // The model nodes the backend refused itself first: the rest are their node units' Q/DQ
        // companions. Without the model's graph (an older harness), the names the log uses.
        let mut refused = match &result.graph {
            Some(graph) => rejections.model_nodes(graph),
            None => rejections
                .nodes()
                .map(|name| RefusedNode { name: name.into(), op_type: rejections.op_types.get(name).cloned().unwrap_or_default(), reason: rejections.reason(name) })
                .collect(),
        };
        refused.sort_by_key(|node| !node.reason.as_deref().is_some_and(|r| r.starts_with("QNN backend")));
        verdict.fallback = refused
            .into_iter()
            .map(|node| FallbackEntry { name: node.name, op_type: node.op_type, reason: node.reason.map(|r| arch_hint(&r, soc)), expected: false })
            .collect();
        return verdict;
    }
    if !backend_started && !validated {
        verdict.error = Some(format!("could not judge: the HTP backend did not start: {}", backend_reason(&result)));
        return verdict;
    }
    let placement = placement_of(&result, &rejections, reference, soc);
    verdict.compiled = true;
    verdict.nodes_pct = Some(placement.preferred_nodes_pct);
    verdict.flops_pct = reference.map(|_| placement.preferred_flops_pct);
    verdict.fallback = fallback_entries(&placement);
    verdict.outcome = if verdict.fallback.iter().any(|f| !f.expected) { SocOutcome::Fail } else { SocOutcome::Pass };
    verdict.placement = Some(placement);
    verdict
}

/// The placement of a session created on the host HTP as `soc` (labelled [`LABEL`]): the
/// assignment, the log's reasons (with the arch a node needs spelled out) and, when given, the
/// reference's node shapes for FLOPs.
pub(super) fn placement_of(result: &RunResult, rejections: &RejectionReasons, reference: Option<&Profile>, soc: Soc) -> PlacementReport {
    let label = format!("{LABEL}; SoC {} ({})", soc.model, soc.arch);
    let mut placement =
        build_report(&PlacementInputs { reference, rejections: Some(rejections), predicted: Some(&label), ..PlacementInputs::of_run(result) });
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
        .map(|node| FallbackEntry { name: node.name.clone(), op_type: node.op_type.clone(), reason: node.reason.clone(), expected: node.expected })
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
        format!("cannot compile for {} ({}): {error}; QNN: {}", soc.model, soc.arch, rejections.finalize_errors.join("; "))
    }
}

/// Adds what QNN's "has incorrect Value 68, expected >= 73" means when 68 is this SoC's arch.
fn arch_hint(reason: &str, soc: Soc) -> String {
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

/// The terminal report: the label, a table SoC × outcome, then every SoC's fallback nodes and errors.
pub fn summary(report: &HtpPreflightReport) -> String {
    let mut text = format!("preflight: {}\nmodel {}\n\n", report.label, report.model);
    let pct = |value: Option<f64>| value.map_or_else(|| "-".to_string(), |v| format!("{v:.1}%"));
    let rows = report.socs.iter().map(|s| {
        let outcome = match s.outcome {
            SocOutcome::Pass => "PASS",
            SocOutcome::Fail => "FAIL",
            SocOutcome::Error => "NOT JUDGED",
        };
        let left = s.fallback.iter().filter(|f| !f.expected).count();
        vec![
            s.soc.clone(),
            s.htp_arch.clone(),
            outcome.to_string(),
            if s.compiled { "yes" } else { "no" }.to_string(),
            pct(s.nodes_pct),
            pct(s.flops_pct),
            left.to_string(),
            format!("{:.1} s", s.seconds),
        ]
    });
    text.push_str(&crate::table::plain(&["SOC", "ARCH", "OUTCOME", "COMPILED", "NODES ON HTP", "FLOPS ON HTP", "LEFT TO CPU", "TIME"], rows));
    for soc in &report.socs {
        if soc.error.is_none() && soc.fallback.is_empty() {
            continue;
        }
        text.push_str(&format!("\n{} ({}):\n", soc.soc, soc.htp_arch));
        if let Some(error) = &soc.error {
            text.push_str(&format!("  {error}\n"));
        }
        for node in &soc.fallback {
            let kind = if node.expected { "on CPU by design" } else { "left to CPU" };
            let reason = node.reason.as_deref().unwrap_or("no reason in the log");
            text.push_str(&format!("  {kind}: {} ({}): {reason}\n", node.name, node.op_type));
        }
    }
    for warning in &report.warnings {
        text.push_str(&format!("\nwarning: {warning}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hexagon::find;

    fn launched(dir: &Path, code: i32, result: Option<&str>, log: &str) -> Launched {
        std::fs::create_dir_all(dir).unwrap();
        if let Some(json) = result {
            std::fs::write(dir.join(files::RESULT), json).unwrap();
        }
        std::fs::write(dir.join(files::ORT_LOG), log).unwrap();
        Launched { dir: dir.to_path_buf(), execution: Execution { exit_code: Some(code), stderr: "npugate-harness: error: boom".into(), seconds: 1.0, warnings: Vec::new() } }
    }

    #[test]
    fn a_crash_or_a_failed_launch_is_not_judged_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let soc = find("SM8650").unwrap();
        let crashed = judge_soc(soc, Ok(launched(&dir.path().join("a"), 3, None, "")), None);
        assert_eq!(crashed.outcome, SocOutcome::Error);
        assert!(crashed.error.unwrap().contains("without a result: npugate-harness: error: boom"));
        let failed = judge_soc(soc, Err("wine is not installed; run scripts/setup".into()), None);
        assert_eq!((failed.outcome, failed.compiled), (SocOutcome::Error, false));
        assert!(failed.error.unwrap().contains("wine is not installed"));
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
        let rejections = RejectionReasons { finalize_errors: vec!["RouterX86 graph prepare failed 12".into()], ..Default::default() };
        let text = refusal(find("SM8350").unwrap(), "Failed to finalize QNN graph. Code: 1002", &rejections);
        assert_eq!(text, "cannot compile for SM8350 (v68): Failed to finalize QNN graph. Code: 1002; QNN: RouterX86 graph prepare failed 12");
        let other = refusal(find("SM8350").unwrap(), "Node 'c' was not selected", &RejectionReasons::default());
        assert!(other.starts_with("ONNX Runtime refused the session for SM8350 (v68)"), "{other}");
    }
}
