//! Where the numbers go wrong: the model under test and its fp32 reference, compared layer by
//! layer on one or more targets (`npugate numerics`).
//!
//! 1. [`matching`]: which tensor of the model stands for which float tensor (same name, or the
//!    QDQ `DequantizeLinear` output that stands for it), and what is left unmatched.
//! 2. Instrumentation: the matched tensors become extra graph outputs of copies of both models
//!    (with `--tensors boundaries`, only those crossing a partition boundary in a plain run of
//!    each target first, see [`placement`]).
//! 3. The instrumented model runs on every target through the [`Target`] trait (the same
//!    [`npugate_engine::run::run_on`] as `npugate run`, in a [`npugate_engine::rack`]); the instrumented reference
//!    runs once on the host CPU EP, fp32, with the same inputs; both save every graph output.
//! 4. [`compare`]: each target's tensors against the reference's, one pair in memory at a time;
//!    [`report`]: per layer SQNR, cosine and max abs error, the first divergence, the outcome;
//!    [`render`]: the terminal table and the HTML page.
//!
//! A target is anything implementing [`Target`]: this machine, devices over adb, and (once it
//! exists) the host's HTP emulator — adding one changes nothing here.

pub mod compare;
pub mod matching;
pub mod placement;
pub mod quant;
pub mod render;
pub mod report;
#[cfg(test)]
mod testing;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use npugate_onnx::Model;
use npugate_result::{contract, files};
use npugate_settings::HarnessSettings;

use compare::{compare_run, compare_runs, Saved};
use matching::{Matching, Selection};
use npugate_engine::device_rack::result_dir_names;
use npugate_engine::layout::Ownership;
use npugate_engine::model::GivenModel;
use npugate_engine::output_check::ReferenceRequest;
use npugate_engine::rack::{run_rack, Rack, RackPolicy};
use npugate_engine::run::{run_on, RunReport, RunSpec};
use npugate_engine::targets::Planned;
use npugate_engine::targets::{Cancel, Job, Target};
use npugate_engine::timeouts::Timeouts;
use npugate_host::runtime::RuntimeManifest;
use report::{
    Header, Instrumentation, ModelRef, NumericsReport, TargetPair, TargetReport, TargetRun, INSTRUMENTATION_NOTE,
};

/// The default divergence threshold, dB.
pub const DEFAULT_MIN_SQNR_DB: f64 = 20.0;
/// Where the plain runs of `--tensors boundaries` go, inside the output directory.
const PLAIN_DIR: &str = "plain";

/// Which tensors to expose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TensorChoice {
    /// Every activation of the float model that the model has.
    All,
    /// Only tensors that cross a partition boundary (an EP switch) in a plain run on a target.
    Boundaries,
    /// These tensors (float names, or the model's names for them).
    Names(Vec<String>),
}

impl TensorChoice {
    /// Parses `--tensors`: `all`, `boundaries`, or tensor names.
    pub fn parse(values: &[String]) -> TensorChoice {
        match values {
            [] => TensorChoice::All,
            [one] if one == "all" => TensorChoice::All,
            [one] if one == "boundaries" => TensorChoice::Boundaries,
            names => TensorChoice::Names(names.to_vec()),
        }
    }

    /// `all`, `boundaries` or `names`.
    pub fn label(&self) -> &'static str {
        match self {
            TensorChoice::All => "all",
            TensorChoice::Boundaries => "boundaries",
            TensorChoice::Names(_) => "names",
        }
    }
}

/// What to compare and how.
#[derive(Debug, Clone, Copy)]
pub struct NumericsRequest<'a> {
    /// The model under test (quantized or float), as the command looked at it.
    pub model: &'a GivenModel,
    /// The float model whose CPU run is the reference (the model itself when it is float).
    pub reference_model: &'a GivenModel,
    /// Which tensors to expose.
    pub tensors: &'a TensorChoice,
    /// The divergence threshold, dB.
    pub min_sqnr_db: f64,
    /// The run's settings (EP, shapes, inputs, seed, …); numerics runs one inference.
    pub settings: &'a HarnessSettings,
    /// The host harness and runtime of the reference run.
    pub host_harness: &'a Path,
    /// The host runtime (CPU EP).
    pub host_runtime: &'a RuntimeManifest,
    /// The output directory.
    pub out: &'a Path,
    /// Set on Ctrl-C.
    pub cancel: &'a Cancel,
}

/// Where the model under test runs.
#[derive(Clone, Copy)]
pub struct Targets<'a> {
    /// The targets with the harness and runtime of each, run in parallel with each other.
    pub planned: &'a [Planned],
    /// Extra environment of the harness.
    pub env: &'a [(&'a str, &'a str)],
    /// The limits of one harness run and of the reference run (npugate_engine's `Timeouts`).
    pub timeouts: Timeouts,
    /// Retries and cancellation.
    pub policy: &'a RackPolicy,
}

impl Targets<'_> {
    /// Pairs of targets (indices) whose runs are also compared with each other, layer by layer:
    /// consecutive targets that are one SoC of the host HTP emulator under two runtimes (QNN versions).
    fn version_pairs(&self) -> Vec<(usize, usize)> {
        (1..self.planned.len())
            .filter(|&i| self.planned[i].soc.is_some() && self.planned[i].soc == self.planned[i - 1].soc)
            .map(|i| (i - 1, i))
            .collect()
    }
}

/// Runs the whole comparison and writes `numerics.json` and `numerics.html` into the output
/// directory; returns the report. Errors are for what makes any comparison impossible (bad
/// models, a failed reference run); a failed target is reported in the report.
pub fn run(request: &NumericsRequest<'_>, on: &Targets<'_>) -> Result<NumericsReport> {
    let out = request.out;
    let model = load(&request.model.path, request.settings)?;
    prepare_out(out)?;
    // The model against itself is read once.
    let reference_model = &request.reference_model.path;
    let same = std::fs::canonicalize(&request.model.path).ok() == std::fs::canonicalize(reference_model).ok();
    let reference = if same { None } else { Some(load(reference_model, request.settings)?) };
    let reference = reference.as_ref().unwrap_or(&model);
    let names = result_dir_names(&on.planned.iter().map(|p| p.target.name().to_string()).collect::<Vec<_>>());
    let selection = match request.tensors {
        TensorChoice::All => Selection::All,
        TensorChoice::Names(names) => Selection::Only { tensors: names.iter().cloned().collect(), strict: true },
        TensorChoice::Boundaries => {
            Selection::Only { tensors: boundaries(request, on, &model, &names)?, strict: false }
        }
    };
    let matching = Matching::build(&model, reference, &selection).map_err(|e| anyhow::anyhow!("--tensors: {e}"))?;
    if matching.layers.is_empty() {
        bail!(
            "no tensor of {} matches a tensor of {} (rules: same name, or the DequantizeLinear output of the QuantizeLinear that \
             reads the float name); pass the float model the QDQ model was made from as --reference-model",
            request.model.path.display(),
            reference_model.display()
        );
    }
    let instrumented = instrument(request, &model, (!same).then_some(reference), &matching)?;
    let reference_dir = out.join(files::NUMERICS_REFERENCE_DIR);
    let reference_run = ReferenceRequest {
        harness: request.host_harness,
        runtime: request.host_runtime,
        model: &GivenModel::read(&instrumented.reference, &request.model.hashes)?,
        settings: request.settings,
        timeout: on.timeouts.reference,
    }
    .run(&reference_dir, request.cancel)?;
    let settings = one_inference(request.settings, true);
    // The instrumented copy is a file of its own: looked at once, with the command's cache.
    let instrumented_model = GivenModel::read(&instrumented.model, &request.model.hashes)?;
    let rack = on_every_target(on, &instrumented_model, &settings, request.cancel, out, &names);
    let reference_saved = Saved { dir: &reference_run.dir, result: &reference_run.result };
    let runs: Vec<TargetRun> = on
        .planned
        .iter()
        .map(|p| &p.target)
        .zip(&rack.results)
        .zip(&rack.report.devices)
        .zip(&names)
        .map(|(((target, finished), outcome), dir)| {
            let infrastructure = outcome.infrastructure_error.clone();
            target_run(target.name(), dir, finished.as_ref(), infrastructure, &matching, reference_saved)
        })
        .collect();
    let header = Header {
        model: ModelRef { path: request.model.path.display().to_string(), sha256: request.model.files.sha256.clone() },
        reference: ModelRef {
            path: reference_model.display().to_string(),
            sha256: request.reference_model.files.sha256.clone(),
        },
        reference_run: files::NUMERICS_REFERENCE_DIR.into(),
        min_sqnr_db: request.min_sqnr_db,
        tensors: request.tensors.label().into(),
        instrumentation: Instrumentation {
            model: relative(&instrumented.model, out),
            reference: relative(&instrumented.reference, out),
            exposed_in_model: instrumented.exposed_in_model,
            exposed_in_reference: instrumented.exposed_in_reference,
            note: INSTRUMENTATION_NOTE.into(),
        },
    };
    let mut report = NumericsReport::assemble(header, &matching, runs);
    report.between_targets = on
        .version_pairs()
        .into_iter()
        .map(|(from, to)| {
            let saved = |index: usize| -> Result<Saved<'_>, String> {
                let finished = rack.results[index].as_ref().filter(|r| r.execution.succeeded());
                finished
                    .map(|r| Saved { dir: r.placed.dir(), result: &r.result })
                    .ok_or_else(|| format!("the run on {} did not finish", on.planned[index].target.name()))
            };
            let compared = saved(from).and_then(|a| {
                saved(to).and_then(|b| compare_runs(&matching.layers, a, b).map_err(|e| format!("{e:#}")))
            });
            TargetPair::judge(
                on.planned[from].target.name(),
                on.planned[to].target.name(),
                &matching,
                compared,
                request.min_sqnr_db,
            )
        })
        .collect();
    contract::write_json(&out.join(files::NUMERICS), &report)
        .with_context(|| format!("cannot write {}", out.join(files::NUMERICS).display()))?;
    contract::write_atomic(&out.join(files::NUMERICS_HTML), render::html(&report).as_bytes())
        .with_context(|| format!("cannot write {}", out.join(files::NUMERICS_HTML).display()))?;
    Ok(report)
}

/// Runs `model` (as the command looked at it) with `settings` on every target in parallel (each
/// with its own harness and runtime), each into `dir/<its name>`.
fn on_every_target(
    on: &Targets<'_>,
    model: &GivenModel,
    settings: &HarnessSettings,
    cancel: &Cancel,
    dir: &Path,
    names: &[String],
) -> Rack<RunReport> {
    let specs: Vec<RunSpec> = on
        .planned
        .iter()
        .map(|p| {
            let job = Job {
                env: on.env,
                given: Some(model),
                ..Job::new(&p.harness, &p.runtime, &model.path, settings, on.timeouts.run, cancel)
            };
            RunSpec { job, gate: None, reference: None }
        })
        .collect();
    let targets: Vec<&dyn Target> = on.planned.iter().map(|p| p.target.as_ref()).collect();
    run_rack(&targets, on.policy, |target, progress| {
        let index = targets.iter().position(|t| std::ptr::addr_eq(*t, target)).unwrap_or_default();
        run_on(target, &specs[index], &dir.join(&names[index]), progress)
    })
}

/// The settings of a numerics run: one inference, no profiling, no reference pass; every output
/// saved when `save` (else only the placement is wanted).
fn one_inference(settings: &HarnessSettings, save: bool) -> HarnessSettings {
    HarnessSettings {
        runs: 1,
        warmup: 0,
        profile_runs: 0,
        no_reference_pass: true,
        check_outputs: save,
        ..settings.clone()
    }
}

/// One target's finished run (or its failure) compared with the reference.
fn target_run(
    name: &str,
    dir: &str,
    finished: Option<&RunReport>,
    infrastructure: Option<String>,
    matching: &Matching,
    reference: Saved<'_>,
) -> TargetRun {
    let failed = |error: String| TargetRun {
        target: blank_target(name, None, error.clone().into()),
        layers: Vec::new(),
        eps: Vec::new(),
    };
    let Some(report) = finished else {
        return failed(infrastructure.unwrap_or_else(|| "the run did not finish".into()));
    };
    let fingerprint = npugate_gate::fingerprint::Fingerprint::of(&report.result);
    let mut target = blank_target(name, Some(dir), None);
    (target.device, target.soc, target.ep) =
        (fingerprint.device, fingerprint.soc, report.result.execution.preferred_ep.clone());
    target.placement = Some(placement::Placement::of(&report.result.assignment));
    let eps = placement::node_eps(&report.result.assignment);
    let layer_eps = matching.layers.iter().map(|l| eps.get(&l.id.node).cloned()).collect();
    if !report.execution.succeeded() {
        target.error =
            Some(format!("the harness failed ({}): {}", report.execution.status(), report.execution.last_message()));
        return TargetRun { target, layers: Vec::new(), eps: layer_eps };
    }
    match compare_run(&matching.layers, reference, Saved { dir: report.placed.dir(), result: &report.result }) {
        Ok(layers) => TargetRun { target, layers, eps: layer_eps },
        Err(error) => {
            target.error = Some(format!("{error:#}"));
            TargetRun { target, layers: Vec::new(), eps: layer_eps }
        }
    }
}

/// A target entry before judging.
fn blank_target(name: &str, dir: Option<&str>, error: Option<String>) -> TargetReport {
    TargetReport {
        name: name.to_string(),
        device: String::new(),
        soc: String::new(),
        ep: String::new(),
        result_dir: dir.map(str::to_string),
        placement: None,
        first_divergence: None,
        largest_drop: None,
        outcome: npugate_gate::Outcome::Error,
        error,
    }
}

/// The instrumented copies and what they expose.
struct Instrumented {
    model: PathBuf,
    reference: PathBuf,
    exposed_in_model: usize,
    exposed_in_reference: usize,
}

/// Writes both models with the matched tensors added as graph outputs into
/// `<out>/instrumented/{model,reference}/`; without a separate `reference` (the model against
/// itself) one copy serves both.
fn instrument(
    request: &NumericsRequest<'_>,
    model: &Model,
    reference: Option<&Model>,
    matching: &Matching,
) -> Result<Instrumented> {
    let dir = request.out.join(files::INSTRUMENTED_DIR);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    let write = |source: &Model, original: &Path, exposed: Vec<&str>, folder: &str| -> Result<(PathBuf, usize)> {
        let mut copy = source.clone();
        let added = copy.add_outputs(&exposed).map_err(|e| anyhow::anyhow!("{}: {e}", original.display()))?;
        let folder = dir.join(folder);
        std::fs::create_dir_all(&folder).with_context(|| format!("cannot create {}", folder.display()))?;
        Ok((npugate_engine::model::write_with_data(&copy, original, &folder)?, added.len()))
    };
    let (model_path, exposed_in_model) = write(model, &request.model.path, matching.exposed_in_model(), "model")?;
    let (reference_path, exposed_in_reference) = match reference {
        None => (model_path.clone(), exposed_in_model),
        Some(reference) => {
            write(reference, &request.reference_model.path, matching.exposed_in_reference(), "reference")?
        }
    };
    Ok(Instrumented { model: model_path, reference: reference_path, exposed_in_model, exposed_in_reference })
}

/// `--tensors boundaries`: a plain run of the model on every target (one inference, nothing
/// saved) and the tensors that cross a partition boundary on any of them.
fn boundaries(
    request: &NumericsRequest<'_>,
    on: &Targets<'_>,
    model: &Model,
    names: &[String],
) -> Result<BTreeSet<String>> {
    let settings = one_inference(request.settings, false);
    let rack = on_every_target(on, request.model, &settings, request.cancel, &request.out.join(PLAIN_DIR), names);
    let mut tensors = BTreeSet::new();
    for (outcome, finished) in rack.report.devices.iter().zip(&rack.results) {
        let Some(report) = finished else {
            bail!(
                "--tensors boundaries: the plain run on {} failed, so its partition boundaries are unknown: {}",
                outcome.serial,
                outcome.infrastructure_error.as_deref().unwrap_or("no result")
            );
        };
        tensors.extend(placement::boundary_tensors(model, &report.result.assignment));
    }
    if tensors.is_empty() {
        let targets: Vec<&str> = on.planned.iter().map(|p| p.target.name()).collect();
        bail!(
            "--tensors boundaries: no tensor crosses a partition boundary on {} (the model runs in one partition there; \
             the plain runs are in {}); pass --tensors all",
            targets.join(", "),
            request.out.join(PLAIN_DIR).display()
        );
    }
    Ok(tensors)
}

/// Reads a model with `--shape` applied (the instrumented copies are run as they are), its unnamed
/// nodes named as ONNX Runtime shows them, so layers and partition boundaries match the runs. Its
/// sizes are checked against this machine's memory, where the reference run always runs.
fn load(path: &Path, settings: &HarnessSettings) -> Result<Model> {
    let mut model = npugate_engine::model::check(path, &settings.shapes, &settings.inputs)?;
    let memory = npugate_engine::model::Memory::Here;
    npugate_engine::model::check_sizes(&model, path, &settings.shapes, &settings.inputs, memory)?;
    model.name_nodes_as_onnx_runtime();
    Ok(model)
}

/// `path` relative to `base` when below it.
fn relative(path: &Path, base: &Path) -> String {
    path.strip_prefix(base).unwrap_or(path).display().to_string()
}

/// Refuses an output directory that holds something else than an earlier numerics report.
fn prepare_out(out: &Path) -> Result<()> {
    const NUMERICS_DIR: Ownership = Ownership {
        marker: files::NUMERICS,
        what: "npugate numerics report",
        own_names: &[files::INSTRUMENTED_DIR, files::NUMERICS_REFERENCE_DIR, PLAIN_DIR, files::NUMERICS_HTML],
    };
    NUMERICS_DIR.check(out, "--out")?;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))
}
