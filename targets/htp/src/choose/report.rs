//! The data of `npugate choose`: the variants and samples it judges, each SoC × variant as judged
//! (`Cell`), the accuracy rule, the choice per SoC, `choose.json` (`npugate.choose/1`) and the
//! deployment manifest (`npugate.deploy-manifest/1`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use npugate_engine::model::GivenModel;
use npugate_gate::outputs::OutputsReport;
use npugate_host::hash_cache::HashCache;
use npugate_result::contract;
use npugate_settings::InputFile;
use serde::{Deserialize, Serialize};

use crate::preflight::SocVerdict;

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
    /// Reads `path` once: looks at its nodes and hashes its files with `hashes` (the command's
    /// one cache); returns the variant and the model as looked at, which every run, reference and
    /// bundle of the command takes from here. The error names the file.
    pub fn read(path: &Path, hashes: &HashCache) -> Result<(Variant, GivenModel)> {
        let name = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .with_context(|| format!("variant {} has no file name", path.display()))?
            .to_string();
        let model = npugate_onnx::Model::read(path)
            .with_context(|| format!("variant {} cannot be read; pass an .onnx file", path.display()))?;
        let given = GivenModel::of(path, None, Some(&model), hashes)?;
        let (sha256, bytes) = (given.files.sha256.clone(), given.files.bytes);
        let graph = model.proto().graph.as_ref();
        let ops: Vec<&str> = graph.iter().flat_map(|g| &g.node).map(|node| node.op_type()).collect();
        let kind = if ops.iter().any(|op| op.starts_with("QLinear") || QUANTIZED_OPS.contains(op)) {
            "quantized"
        } else if ops.iter().any(|op| matches!(*op, "QuantizeLinear" | "DequantizeLinear")) {
            "qdq"
        } else {
            "float"
        };
        Ok((Variant { name, path: path.to_path_buf(), sha256, bytes, kind: kind.into() }, given))
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
    pub accuracy: Option<Accuracy>,
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

/// What a variant's outputs must keep of the float model's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AccuracyRule {
    /// Class scores (an output whose last dim is > 1 and that is compared by argmax): the least
    /// top-1 agreement with the float model, percent, over every row of every sample.
    pub min_top1_pct: f64,
    /// Every output, class scores too: the least SQNR against the float model, dB, on every sample.
    pub min_sqnr_db: f64,
}

impl Default for AccuracyRule {
    /// SQNR ≥ 20 dB for every output, and top-1 agreement ≥ 99% for class scores.
    fn default() -> AccuracyRule {
        AccuracyRule { min_top1_pct: 99.0, min_sqnr_db: 20.0 }
    }
}

impl AccuracyRule {
    /// `SQNR >= 20 dB (every output), top-1 agreement >= 99% (class scores)`.
    pub fn describe(&self) -> String {
        format!(
            "SQNR >= {} dB against the float model (every output), top-1 agreement >= {}% (class scores)",
            self.min_sqnr_db, self.min_top1_pct
        )
    }
}

/// A variant's accuracy on one SoC against the float model: per output, the worst over the samples.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Accuracy {
    /// One entry per model output.
    pub outputs: Vec<OutputAccuracy>,
    /// True when every output meets the rule.
    pub meets: bool,
    /// The first output that misses the rule, as a phrase (`logits: top-1 agreement 40.0% < 99%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miss: Option<String>,
}

/// One output's worst figures over the samples.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OutputAccuracy {
    /// Output name.
    pub name: String,
    /// Least SQNR, dB (`None` when identical everywhere: infinite).
    pub sqnr_db: Option<f64>,
    /// Least cosine similarity.
    pub cosine: f64,
    /// Top-1 agreement over every row of every sample, percent (class scores only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top1_pct: Option<f64>,
}

/// The choice for one SoC.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SocChoice {
    /// SoC model.
    pub soc: String,
    /// Its Hexagon arch.
    pub htp_arch: String,
    /// The chosen variant; `None`: no variant runs whole and meets the rule.
    pub variant: Option<String>,
    /// Why this one (or why none), one sentence.
    pub why: String,
}
