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

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use npugate_engine::layout::Ownership;
use npugate_engine::output_check::{Reference, ReferenceRequest};
use npugate_engine::rack::RackPolicy;
use npugate_gate::outputs::OutputsReport;
use npugate_host::hexagon::Soc;
use npugate_host::runtime::RuntimeManifest;
use npugate_result::contract;
use npugate_result::RunResult;
use npugate_settings::{HarnessSettings, InputFile, SessionSettings};
use serde::{Deserialize, Serialize};

use crate::preflight::{HtpPreflightRequest, SocOutcome, SocVerdict};
use crate::HostHtp;
pub use decide::{AccuracyRule, SocChoice};

/// Schema of `choose.json`.
pub const CHOOSE_SCHEMA: &str = "npugate.choose/1";
/// Schema of the deployment manifest.
pub const MANIFEST_SCHEMA: &str = "npugate.deploy-manifest/1";
/// The report's file in the output directory.
pub const REPORT_FILE: &str = "choose.json";
/// The deployment manifest's file in the output directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Where the chosen files are copied, relative to the output directory (the manifest's `file`s
/// are relative to the manifest).
pub const MODELS_DIR: &str = "models";

/// A choose's output directory: its report, and what it writes beside it.
const CHOOSE_DIR: Ownership =
    Ownership { marker: REPORT_FILE, what: "npugate choose", own_names: &[MANIFEST_FILE, MODELS_DIR, RUNS_DIR] };
/// Where each sample's runs go, relative to the output directory.
pub const RUNS_DIR: &str = "runs";

/// One variant of the model.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Variant {
    /// Its name: the file stem (`mobilenet_w8a8`).
    pub name: String,
    /// The file as given.
    pub path: PathBuf,
    /// sha256 of the file.
    pub sha256: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// What it holds, as its nodes say: `float`, `qdq` (QuantizeLinear/DequantizeLinear pairs) or
    /// `quantized` (QLinear*/MatMulNBits/… operators).
    pub kind: String,
}

impl Variant {
    /// Reads `path` (hashes it and looks at its nodes); the error names the file.
    pub fn read(path: &Path) -> Result<Variant> {
        let name = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .with_context(|| format!("variant {} has no file name", path.display()))?
            .to_string();
        let (sha256, bytes) = npugate_result::digest::sha256_file(path)
            .with_context(|| format!("variant {} cannot be read; pass an .onnx file", path.display()))?;
        let model = npugate_onnx::Model::read(path)?;
        let graph = model.proto().graph.as_ref();
        let ops: Vec<&str> = graph.iter().flat_map(|g| &g.node).map(|node| node.op_type()).collect();
        let kind = if ops.iter().any(|op| op.starts_with("QLinear") || QUANTIZED_OPS.contains(op)) {
            "quantized"
        } else if ops.iter().any(|op| matches!(*op, "QuantizeLinear" | "DequantizeLinear")) {
            "qdq"
        } else {
            "float"
        };
        Ok(Variant { name, path: path.to_path_buf(), sha256, bytes, kind: kind.into() })
    }
}

/// Operators that hold quantized arithmetic themselves (besides `QLinear*`).
const QUANTIZED_OPS: &[&str] =
    &["MatMulNBits", "MatMulInteger", "ConvInteger", "DynamicQuantizeLinear", "GatherBlockQuantized"];

/// One evaluation input set: a `--input` file per model input.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Sample {
    /// Its name (the folder or file it came from; `seeded` for the harness's seeded inputs).
    pub name: String,
    /// Its files (none: the harness's seeded random inputs in each input's range).
    pub inputs: Vec<InputFile>,
}

/// What `npugate choose` needs.
#[derive(Debug, Clone)]
pub struct ChooseRequest<'a> {
    /// The host HTP runtime (one QNN version) that judges.
    pub host: &'a HostHtp,
    /// The host harness and runtime of the float reference run (CPU EP).
    pub reference_tools: (&'a Path, &'a RuntimeManifest),
    /// The variants, in the order given.
    pub variants: &'a [Variant],
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
    /// The accuracy rule.
    pub rule: AccuracyRule,
    /// An earlier report (`--baseline`): a SoC that lost its variant, or whose choice changed, fails.
    pub baseline: Option<&'a ChooseReport>,
}

/// One SoC × variant as judged.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cell {
    /// SoC model.
    pub soc: String,
    /// Variant name.
    pub variant: String,
    /// True when the backend compiled the graph for the SoC.
    pub compiled: bool,
    /// True when every model node runs on the HTP (graph-I/O quantization aside), it compiled and
    /// every emulated inference ran.
    pub whole: bool,
    /// The nodes left off the HTP, `Name (OpType): reason`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub off_htp: Vec<String>,
    /// Why the SoC could not take or run the variant, or could not be judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// True when the cell could not be judged (a crash, missing wine): neither pass nor fail.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_judged: bool,
    /// Its accuracy against the float model on every sample (worst over samples), when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<decide::Accuracy>,
    /// The ESTIMATED latency, ms (`npugate estimate`'s model), when the graph runs whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_ms: Option<f64>,
    /// The estimate's p90 relative error, or why there is no estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_note: Option<String>,
    /// Each sample's result directory, relative to the output directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub result_dirs: Vec<String>,
    /// True when the cell was read from the cache (nothing ran).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
}

/// `choose.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ChooseReport {
    /// Always [`CHOOSE_SCHEMA`].
    pub schema: String,
    /// The variants.
    pub variants: Vec<Variant>,
    /// The float variant every output was compared with.
    pub float: String,
    /// The QNN version that judged (`2.51.0`).
    pub qnn_sdk: String,
    /// Where the inputs came from, one sentence.
    pub inputs: String,
    /// The samples.
    pub samples: Vec<Sample>,
    /// The accuracy rule.
    pub rule: AccuracyRule,
    /// One cell per SoC × variant, SoC-major.
    pub cells: Vec<Cell>,
    /// The choice per SoC, in the order asked.
    pub choices: Vec<SocChoice>,
    /// What every latency figure is.
    pub estimate_label: String,
    /// What changed since the baseline (a SoC lost its variant, or its choice changed), one
    /// sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
    /// 0: every SoC has a variant (and nothing changed since the baseline); 1: a SoC has none, or
    /// a change; 2: a cell could not be judged.
    pub exit_code: u8,
}

impl contract::Document for ChooseReport {
    const SCHEMA: contract::Schema = contract::Schema::new(CHOOSE_SCHEMA);
}

/// The deployment manifest: what an app loads on each SoC.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeployManifest {
    /// Always [`MANIFEST_SCHEMA`].
    pub schema: String,
    /// One entry per SoC that has a variant.
    pub socs: Vec<ManifestEntry>,
    /// What to load on any other SoC (or one whose entry is missing): the float model, on the CPU.
    pub fallback: ManifestFile,
}

impl contract::Document for DeployManifest {
    const SCHEMA: contract::Schema = contract::Schema::new(MANIFEST_SCHEMA);
}

/// One SoC's file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ManifestEntry {
    /// The SoC model as Android's `ro.soc.model` spells it (`SM8650`; a suffixed `SM8750P` matches
    /// by prefix).
    pub soc_model: String,
    /// Its Hexagon arch (`v75`).
    pub htp_arch: String,
    /// QNN's `soc_model` id.
    pub qnn_soc_model: u32,
    /// The file.
    #[serde(flatten)]
    pub file: ManifestFile,
}

/// A file of the manifest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ManifestFile {
    /// The variant's name.
    pub variant: String,
    /// The file, relative to the manifest.
    pub file: String,
    /// Its sha256 (check it before loading).
    pub sha256: String,
    /// Its size in bytes.
    pub bytes: u64,
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
            for variant in self.variants {
                let key = cache::Key::new(variant, &qnn_build, sample, self.session, self.fp16);
                let cached: Option<Vec<SampleCell>> =
                    self.socs.iter().map(|soc| cache::read(&key, soc.model)).collect();
                if let Some(cached) = cached {
                    cells.extend(cached);
                    continue;
                }
                let reference = match &mut reference {
                    Some(reference) => reference,
                    empty => empty.insert(self.reference(float, sample, &sample_dir.join("reference"), policy)?),
                };
                let judged = self.judge_variant(variant, sample, reference, &sample_dir.join(&variant.name), policy)?;
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
    fn reference(&self, float: &Variant, sample: &Sample, dir: &Path, policy: &RackPolicy) -> Result<Reference> {
        let settings = HarnessSettings::from(SessionSettings {
            shapes: self.session.shapes.clone(),
            inputs: sample.inputs.clone(),
            seed: self.session.seed,
            ..SessionSettings::default()
        });
        let (harness, runtime) = self.reference_tools;
        ReferenceRequest { harness, runtime, model: &float.path, settings: &settings }
            .run(dir, &policy.cancel)
            .with_context(|| format!("the float reference {} on sample {}", float.name, sample.name))
    }

    /// One preflight of `variant` on every SoC with `sample`, each SoC's outputs compared with
    /// the reference's.
    fn judge_variant(
        &self,
        variant: &Variant,
        sample: &Sample,
        reference: &Reference,
        dir: &Path,
        policy: &RackPolicy,
    ) -> Result<Vec<SampleCell>> {
        let request = HtpPreflightRequest {
            hosts: std::slice::from_ref(self.host),
            model: &variant.path,
            session: self.session,
            shapes: &self.session.shapes,
            inputs: &sample.inputs,
            socs: self.socs,
            fp16: self.fp16,
            execute: true,
            keep_outputs: true,
        };
        let report = request.run(dir, policy)?;
        Ok(report.socs.iter().map(|soc| sample_cell(variant, soc, reference)).collect())
    }
}

/// One SoC × variant on one sample.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SampleCell {
    /// SoC model.
    pub soc: String,
    /// Variant name.
    pub variant: String,
    /// The preflight's verdict for the SoC (its result directory absolute).
    pub verdict: SocVerdict,
    /// The emulated outputs against the float reference; `Err` names why they could not be compared.
    pub outputs: Option<std::result::Result<OutputsReport, String>>,
    /// True when this was read from the cache.
    #[serde(default)]
    pub cached: bool,
    /// True when the SoC could not be judged.
    #[serde(default)]
    pub not_judged: bool,
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
