//! The reference the estimate is fitted on: Qualcomm AI Hub's published device runs
//! (`data/aihub/perf.csv`, made by `scripts/aihub-table`) and the graph features of the models
//! rebuilt locally (`data/aihub/features.json`, made by `scripts/bench-aihub`). Both are built
//! into npugate; `--reference DIR` reads another copy of the same files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::features::{GraphFeatures, Precision};

/// Schema of `features.json`.
pub const FEATURES_SCHEMA: &str = "npugate.aihub-features/1";

const EMBEDDED_PERF: &str = include_str!("../../../data/aihub/perf.csv");
const EMBEDDED_FEATURES: &str = include_str!("../../../data/aihub/features.json");
const EMBEDDED_PROVENANCE: &str = include_str!("../../../data/aihub/PROVENANCE.md");

/// Two names of one die: AI Hub's part name and npugate's SoC table's (one QNN `soc_model` each).
const SAME_CHIP: &[(&str, &str)] = &[("QCS6490", "QCM6490"), ("SA8295P", "SA8295")];

/// The name npugate's SoC table gives `soc` (upper case; AI Hub's QCS6490 is QCM6490).
pub fn chip(soc: &str) -> String {
    let upper = soc.trim().to_ascii_uppercase();
    SAME_CHIP.iter().find(|(hub, _)| *hub == upper).map_or(upper, |(_, ours)| ours.to_string())
}

/// Why the reference could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    /// A file is missing or unreadable.
    #[error("cannot read {path}: {source}; pass --reference with a folder holding perf.csv, features.json and PROVENANCE.md (as data/aihub/)")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not what `scripts/aihub-table` / `scripts/bench-aihub` write.
    #[error("{what} is not a reference file: {why}")]
    Format {
        /// The file.
        what: String,
        /// Why.
        why: String,
    },
}

/// One published run (a row of `perf.csv`; the columns the estimate reads).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PublishedRun {
    /// AI Hub's model id, e.g. `resnet50`.
    pub model: String,
    /// The graph of a model with several (`component`).
    pub component: String,
    /// `float`, `w8a8`, `w8a16`, …
    pub precision: String,
    /// The device, e.g. `Samsung Galaxy S24`.
    pub device: String,
    /// Its SoC, empty when unmapped.
    pub soc: String,
    /// `onnx`, `qnn_dlc`, `tflite`, …
    pub runtime: String,
    /// `Passed` or empty.
    pub job_status: String,
    /// Published latency, ms.
    pub inference_time_ms: Option<f64>,
    /// Layers in total.
    pub layers_total: Option<u32>,
    /// Layers on the NPU.
    pub layers_npu: Option<u32>,
}

impl PublishedRun {
    /// True when the whole graph ran on the NPU (every layer) and passed.
    pub fn whole_on_npu(&self) -> bool {
        self.job_status == "Passed" && self.layers_total.is_some_and(|t| t > 0 && self.layers_npu == Some(t))
    }
}

/// The graph features of one rebuilt reference model at one precision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFeatures {
    /// AI Hub's model id.
    pub model: String,
    /// AI Hub's precision name.
    pub precision: String,
    /// What `npugate estimate` computed from the rebuilt model.
    pub features: GraphFeatures,
}

/// `features.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeaturesFile {
    /// Always [`FEATURES_SCHEMA`].
    pub schema: String,
    /// The command that made it.
    pub made_by: String,
    /// Models rebuilt but kept out of the reference (their published rows check the estimate).
    pub held_out: Vec<String>,
    /// One entry per rebuilt model and precision: what the latency models are fitted on.
    pub models: Vec<ModelFeatures>,
    /// The features of the held-out models, never fitted on: they check the estimate offline.
    #[serde(default)]
    pub held_out_models: Vec<ModelFeatures>,
}

/// What the reference is, for the reports: AI Hub's release and commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceSource {
    /// `qualcomm/ai-hub-models <release> (<commit>)`, from `PROVENANCE.md`.
    pub release: String,
    /// `built in` or the folder given with `--reference`.
    pub location: String,
    /// Models kept out of the fit (see [`FeaturesFile::held_out`]).
    pub held_out: Vec<String>,
}

/// The published runs and the features of the rebuilt models.
#[derive(Debug, Clone)]
pub struct Reference {
    /// Every published `onnx` row.
    pub runs: Vec<PublishedRun>,
    /// The rebuilt models' features.
    pub features: FeaturesFile,
    /// Where it came from.
    pub source: ReferenceSource,
    /// Models with more than one component (a graph per component: no whole-model row).
    multi_component: BTreeSet<String>,
}

impl Reference {
    /// The reference built into npugate (`data/aihub/` at build time).
    pub fn embedded() -> Result<Reference, ReferenceError> {
        Reference::parse(EMBEDDED_PERF, EMBEDDED_FEATURES, EMBEDDED_PROVENANCE, "built in")
    }

    /// The reference in `dir` (`perf.csv`, `features.json`, `PROVENANCE.md`).
    pub fn load(dir: &Path) -> Result<Reference, ReferenceError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path).map_err(|source| ReferenceError::Read { path, source })
        };
        Reference::parse(
            &read("perf.csv")?,
            &read("features.json")?,
            &read("PROVENANCE.md")?,
            &dir.display().to_string(),
        )
    }

    fn parse(perf: &str, features: &str, provenance: &str, location: &str) -> Result<Reference, ReferenceError> {
        let format = |what: &str, why: String| ReferenceError::Format { what: format!("{what} ({location})"), why };
        let mut runs = Vec::new();
        let mut components: BTreeSet<(String, String)> = BTreeSet::new();
        for row in csv::Reader::from_reader(perf.as_bytes()).deserialize::<PublishedRun>() {
            let row = row.map_err(|e| format("perf.csv", e.to_string()))?;
            components.insert((row.model.clone(), row.component.clone()));
            if row.runtime == "onnx" {
                runs.push(row);
            }
        }
        let mut multi_component = BTreeSet::new();
        for (model, _) in &components {
            if components.iter().filter(|(m, _)| m == model).count() > 1 {
                multi_component.insert(model.clone());
            }
        }
        let features: FeaturesFile =
            serde_json::from_str(features).map_err(|e| format("features.json", e.to_string()))?;
        if features.schema != FEATURES_SCHEMA {
            return Err(format("features.json", format!("schema {:?}, expected {FEATURES_SCHEMA:?}", features.schema)));
        }
        let release = release_of(provenance).ok_or_else(|| format("PROVENANCE.md", "names no release".into()))?;
        let source = ReferenceSource { release, location: location.into(), held_out: features.held_out.clone() };
        Ok(Reference { runs, features, source, multi_component })
    }

    /// Every SoC with published `onnx` rows, in npugate's names, sorted.
    pub fn socs(&self) -> Vec<String> {
        let socs: BTreeSet<String> = self.runs.iter().filter(|r| !r.soc.is_empty()).map(|r| chip(&r.soc)).collect();
        socs.into_iter().collect()
    }

    /// The published `onnx` rows of `soc` a fit can use: the whole graph on the NPU, one component,
    /// with a latency and the features of the rebuilt model; each with its features.
    pub fn fit_rows(&self, soc: &str) -> Vec<(&PublishedRun, &GraphFeatures)> {
        let soc = chip(soc);
        self.runs
            .iter()
            .filter(|r| chip(&r.soc) == soc && r.whole_on_npu() && r.inference_time_ms.is_some())
            .filter(|r| !self.multi_component.contains(&r.model))
            .filter_map(|r| self.features_of(&r.model, &r.precision).map(|f| (r, f)))
            .collect()
    }

    /// All published `onnx` rows of `soc`.
    pub fn rows_of(&self, soc: &str) -> impl Iterator<Item = &PublishedRun> {
        let soc = chip(soc);
        self.runs.iter().filter(move |r| chip(&r.soc) == soc)
    }

    /// The features of a rebuilt reference model.
    pub fn features_of(&self, model: &str, precision: &str) -> Option<&GraphFeatures> {
        self.features.models.iter().find(|m| m.model == model && m.precision == precision).map(|m| &m.features)
    }

    /// The precisions of the rebuilt models (those the fit can see).
    pub fn precisions(&self) -> BTreeSet<Precision> {
        self.features.models.iter().map(|m| m.features.precision.clone()).collect()
    }
}

/// `qualcomm/ai-hub-models v0.47.0 (b61a0090)` from the provenance note.
fn release_of(provenance: &str) -> Option<String> {
    let release = provenance.split("release **").nth(1)?.split("**").next()?;
    let commit = provenance.split("(commit `").nth(1)?.split('`').next()?;
    Some(format!("qualcomm/ai-hub-models {release} ({commit})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ai_hub_part_names_are_npugate_soc_names() {
        assert_eq!(chip("QCS6490"), "QCM6490");
        assert_eq!(chip("sa8295p"), "SA8295");
        assert_eq!(chip("SM8650"), "SM8650");
    }

    #[test]
    fn the_built_in_reference_names_its_release_and_its_socs() {
        let reference = Reference::embedded().unwrap();
        assert_eq!(reference.source.release, "qualcomm/ai-hub-models v0.47.0 (b61a0090)");
        let socs = reference.socs();
        for soc in ["SM8650", "SM8750", "SM8850", "QCM6490"] {
            assert!(socs.contains(&soc.to_string()), "{soc} in {socs:?}");
        }
        // AI Hub's RB3 Gen 2 ran every quantized onnx row on the CPU: nothing to fit there.
        assert!(reference.fit_rows("QCS6490").is_empty());
        assert!(reference.rows_of("QCM6490").count() > 100);
    }
}
