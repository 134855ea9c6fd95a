//! `npugate choose`: one model per chipset. For every SoC × variant of one model (float, fp16,
//! w8a8, w8a16, … as QDQ ONNX) Qualcomm's host HTP backend validates, compiles and runs the
//! variant on its emulator configured as that SoC ([`crate::preflight`]), the emulated outputs are
//! compared with the float model's CPU outputs on the same inputs, and the graph's latency is
//! ESTIMATED; then, per SoC, the fastest variant that runs whole on the HTP and meets the accuracy
//! rule is chosen ([`decide`]). The choice is saved as `choose.json` (`npugate.choose/1`) and as the
//! deployment manifest an app loads (`manifest.json`, `npugate.deploy-manifest/1`) beside copies of
//! the chosen files.
//!
//! Each variant × input sample is one preflight (every SoC in parallel); a cell already judged —
//! same variant bytes, SoC, QNN build, inputs and session flags — is read from the cache
//! ([`cache`]) instead of run again.

pub mod cache;
pub mod decide;
pub mod render;
pub mod report;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use npugate_engine::layout::Ownership;
use npugate_engine::model::GivenModel;
use npugate_engine::output_check::{Reference, ReferenceRequest};
use npugate_engine::rack::RackPolicy;
use npugate_engine::timeouts::Timeouts;
use npugate_host::runtime::RuntimeManifest;
use npugate_result::contract;
use npugate_result::hexagon::Soc;
use npugate_result::RunResult;
use npugate_settings::{HarnessSettings, InputFile, SessionSettings};

use crate::preflight::{HtpPreflightRequest, SocOutcome, SocVerdict};
use crate::HostHtp;
pub use report::{
    Accuracy, AccuracyRule, Cell, ChooseReport, DeployManifest, ManifestEntry, ManifestFile, OutputAccuracy, Sample,
    SampleCell, SocChoice, Variant, CHOOSE_SCHEMA, MANIFEST_FILE, MANIFEST_SCHEMA, MODELS_DIR, REPORT_FILE, RUNS_DIR,
};

/// A choose's output directory: its report, and what it writes beside it.
const CHOOSE_DIR: Ownership =
    Ownership { marker: REPORT_FILE, what: "npugate choose", own_names: &[MANIFEST_FILE, MODELS_DIR, RUNS_DIR] };
/// What `npugate choose` needs.
#[derive(Debug, Clone)]
pub struct ChooseRequest<'a> {
    /// The host HTP runtime (one QNN version) that judges.
    pub host: &'a HostHtp,
    /// The host harness and runtime of the float reference run (CPU EP).
    pub reference_tools: (&'a Path, &'a RuntimeManifest),
    /// The variants, in the order given.
    pub variants: &'a [Variant],
    /// Each variant as the command looked at it (its files hashed once), in the same order.
    pub models: &'a [GivenModel],
    /// Index into `variants` of the float model every output is compared with.
    pub float: usize,
    /// The SoCs.
    pub socs: &'a [Soc],
    /// The evaluation inputs.
    pub samples: &'a [Sample],
    /// The user's session flags (`--shape`, QNN options) every job keeps.
    pub session: &'a SessionSettings,
    /// Float graphs in fp16 on the HTP.
    pub fp16: bool,
    /// The limits of the reference runs and the preflights (npugate_engine's `Timeouts`).
    pub timeouts: Timeouts,
    /// The accuracy rule.
    pub rule: AccuracyRule,
    /// An earlier report (`--baseline`): a SoC that lost its variant, or whose choice changed, fails.
    pub baseline: Option<&'a ChooseReport>,
}

impl ChooseRequest<'_> {
    /// Judges every SoC × variant into `out` (`runs/<sample>/reference/`, `runs/<sample>/<variant>/<SOC>/`,
    /// `choose.json`, `manifest.json`, `models/`) and returns the report. `out` must be empty or
    /// a choose's own.
    pub fn run(&self, out: &Path, policy: &RackPolicy) -> Result<ChooseReport> {
        CHOOSE_DIR.check(out, "--out")?;
        std::fs::create_dir_all(out).with_context(|| format!("cannot create --out {}", out.display()))?;
        let host = self.host;
        let float = &self.variants[self.float];
        let qnn_build = host.runtime.qnn_build().unwrap_or_default();
        let mut per_sample: Vec<Vec<SampleCell>> = Vec::new();
        for sample in self.samples {
            let sample_dir = out.join(RUNS_DIR).join(&sample.name);
            let mut reference: Option<Reference> = None;
            let mut cells = Vec::new();
            for (variant, model) in self.variants.iter().zip(self.models) {
                let key = cache::Key::new(variant, &qnn_build, sample, (self.session, self.fp16), &model.hashes);
                let cached: Option<Vec<SampleCell>> =
                    self.socs.iter().map(|soc| cache::read(&key, soc.model)).collect();
                if let Some(cached) = cached {
                    cells.extend(cached);
                    continue;
                }
                let reference = match &mut reference {
                    Some(reference) => reference,
                    empty => empty.insert(self.reference(sample, &sample_dir.join("reference"), policy)?),
                };
                let judged =
                    self.judge_variant((variant, model), sample, reference, &sample_dir.join(&variant.name), policy)?;
                for cell in &judged {
                    if !cell.not_judged {
                        cache::write(&key, cell);
                    }
                }
                cells.extend(judged);
            }
            per_sample.push(cells);
        }
        let cells = decide::merge_samples(self.socs, self.variants, &per_sample, &self.rule, out);
        let choices = decide::choose(self.socs, self.variants, &cells);
        let changes = self.baseline.map(|earlier| decide::changes_since(earlier, &choices)).unwrap_or_default();
        let exit_code = decide::exit_code(&cells, &choices, &changes);
        let report = ChooseReport {
            schema: CHOOSE_SCHEMA.into(),
            variants: self.variants.to_vec(),
            float: float.name.clone(),
            qnn_sdk: host.qnn_sdk(),
            inputs: inputs_note(self.samples),
            samples: self.samples.to_vec(),
            rule: self.rule.clone(),
            cells,
            choices,
            estimate_label: npugate_estimate::LABEL.into(),
            changes,
            exit_code,
        };
        let file = out.join(REPORT_FILE);
        contract::write_json(&file, &report).with_context(|| format!("cannot write {}", file.display()))?;
        write_manifest(&report, self.socs, float, out)?;
        Ok(report)
    }

    /// The float model's CPU outputs on `sample`.
    fn reference(&self, sample: &Sample, dir: &Path, policy: &RackPolicy) -> Result<Reference> {
        let float = &self.variants[self.float];
        let settings = HarnessSettings::from(SessionSettings {
            shapes: self.session.shapes.clone(),
            inputs: sample.inputs.clone(),
            seed: self.session.seed,
            ..SessionSettings::default()
        });
        let (harness, runtime) = self.reference_tools;
        let model = &self.models[self.float];
        ReferenceRequest { harness, runtime, model, settings: &settings, timeout: self.timeouts.reference }
            .run(dir, &policy.cancel)
            .with_context(|| format!("the float reference {} on sample {}", float.name, sample.name))
    }

    /// One preflight of `variant` (with its `model` as looked at) on every SoC with `sample`,
    /// each SoC's outputs compared with the reference's.
    fn judge_variant(
        &self,
        (variant, model): (&Variant, &GivenModel),
        sample: &Sample,
        reference: &Reference,
        dir: &Path,
        policy: &RackPolicy,
    ) -> Result<Vec<SampleCell>> {
        let request = HtpPreflightRequest {
            hosts: std::slice::from_ref(self.host),
            model,
            session: self.session,
            shapes: &self.session.shapes,
            inputs: &sample.inputs,
            socs: self.socs,
            fp16: self.fp16,
            execute: true,
            keep_outputs: true,
            timeout: self.timeouts.tool,
        };
        let report = request.run(dir, policy)?;
        Ok(report.socs.iter().map(|soc| sample_cell(variant, soc, reference)).collect())
    }
}

/// The verdict of one SoC and the comparison of its outputs.
fn sample_cell(variant: &Variant, verdict: &SocVerdict, reference: &Reference) -> SampleCell {
    let outputs = match (&verdict.result_dir, verdict.executed) {
        (Some(dir), Some(true)) => Some(
            RunResult::read(dir)
                .map_err(anyhow::Error::from)
                .and_then(|run| reference.compare(dir, &run))
                .map_err(|error| format!("{error:#}")),
        ),
        _ => None,
    };
    SampleCell {
        soc: verdict.soc.clone(),
        variant: variant.name.clone(),
        verdict: verdict.clone(),
        outputs,
        cached: false,
        not_judged: verdict.outcome == SocOutcome::Error,
    }
}

/// One sentence on where the inputs came from.
fn inputs_note(samples: &[Sample]) -> String {
    match samples {
        [one] if one.inputs.is_empty() => {
            "seeded random inputs in each input's range (no --eval set given): accuracy on one random sample, not on \
             data"
                .into()
        }
        _ => format!("{} evaluation sample(s) from --eval", samples.len()),
    }
}

/// `manifest.json` and a copy of every file it names in `models/`.
fn write_manifest(report: &ChooseReport, socs: &[Soc], float: &Variant, out: &Path) -> Result<()> {
    let models = out.join(MODELS_DIR);
    std::fs::create_dir_all(&models).with_context(|| format!("cannot create {}", models.display()))?;
    let file_of = |variant: &Variant| -> Result<ManifestFile> {
        let name = variant.path.file_name().context("a variant file name")?.to_string_lossy().to_string();
        let copy = models.join(&name);
        let same = |a: &Path, b: &Path| a.canonicalize().ok().is_some_and(|a| b.canonicalize().ok() == Some(a));
        if !same(&variant.path, &copy) {
            std::fs::copy(&variant.path, &copy)
                .with_context(|| format!("cannot copy {} to {}", variant.path.display(), copy.display()))?;
        }
        Ok(ManifestFile {
            variant: variant.name.clone(),
            file: format!("{MODELS_DIR}/{name}"),
            sha256: variant.sha256.clone(),
            bytes: variant.bytes,
        })
    };
    let mut entries = Vec::new();
    for choice in &report.choices {
        let (Some(name), Some(soc)) = (&choice.variant, socs.iter().find(|s| s.model == choice.soc)) else {
            continue;
        };
        let variant = report.variants.iter().find(|v| &v.name == name).context("the chosen variant")?;
        entries.push(ManifestEntry {
            soc_model: soc.model.into(),
            htp_arch: soc.arch.into(),
            qnn_soc_model: soc.qnn_soc_model,
            file: file_of(variant)?,
        });
    }
    let manifest = DeployManifest { schema: MANIFEST_SCHEMA.into(), socs: entries, fallback: file_of(float)? };
    let file = out.join(MANIFEST_FILE);
    contract::write_json(&file, &manifest).with_context(|| format!("cannot write {}", file.display()))
}

/// The samples of `--eval DIR` for a model with `inputs`: each sub-folder holding one `<input>.npy`
/// per model input is a sample; for a one-input model each `.npy` file is one too. No folder: one
/// sample of the harness's seeded inputs.
pub fn samples(eval: Option<&Path>, inputs: &[String]) -> Result<Vec<Sample>> {
    let Some(dir) = eval else {
        return Ok(vec![Sample { name: "seeded".into(), inputs: Vec::new() }]);
    };
    let entries = std::fs::read_dir(dir).with_context(|| format!("--eval {} cannot be read", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|entry| entry.ok().map(|e| e.path())).collect();
    paths.sort();
    let mut samples = Vec::new();
    for path in paths {
        let name = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
        if path.is_dir() {
            let files =
                inputs.iter().map(|input| InputFile { input: input.clone(), path: path.join(format!("{input}.npy")) });
            let files: Vec<InputFile> = files.collect();
            if let Some(missing) = files.iter().find(|f| !f.path.is_file()) {
                bail!(
                    "--eval sample {} has no {}: each sample folder holds one <input>.npy per model input ({})",
                    path.display(),
                    missing.path.display(),
                    inputs.join(", ")
                );
            }
            samples.push(Sample { name, inputs: files });
        } else if path.extension().is_some_and(|e| e == "npy") {
            let [input] = inputs else {
                bail!(
                    "--eval {}: the model has {} inputs ({}); put each sample in a folder of <input>.npy files",
                    dir.display(),
                    inputs.len(),
                    inputs.join(", ")
                );
            };
            samples.push(Sample { name, inputs: vec![InputFile { input: input.clone(), path }] });
        }
    }
    if samples.is_empty() {
        bail!("--eval {} holds no sample: put one folder of <input>.npy files per sample (or .npy files for a one-input model)", dir.display());
    }
    Ok(samples)
}
