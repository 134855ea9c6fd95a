//! What an EPContext model was compiled for, kept in its metadata (`metadata_props`) by `npugate
//! compile`: the SoC, its Hexagon arch, the QNN SDK and backend build, ONNX Runtime, the source
//! model (sha256 and digest) and which source nodes each EPContext node covers. A context binary
//! for the wrong chip fails on the device at load, and so does one for a QNN version that the
//! measured rule ([`crate::context_compat`]) says refuses it: a run refuses such a device or runtime
//! before anything is pushed, naming both sides, and warns on a pair never measured.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use npugate_onnx::genai::LlmModel;
use npugate_onnx::Model;
use npugate_result::EP_CONTEXT_NODES_KEY;
use npugate_settings::{HarnessSettings, ShapeSpec};

use crate::context_compat::{ContextCompat, Verdict};
use npugate_host::runtime::manifest::qnn_sdk_version;

/// Prefix of every metadata key npugate writes.
const PREFIX: &str = "npugate.compiled_for.";

/// What a context model was compiled for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CompiledFor {
    /// SoC model, e.g. `SM8650`.
    pub soc: String,
    /// Hexagon arch, e.g. `v75`.
    pub htp_arch: String,
    /// QNN `soc_model` id.
    pub qnn_soc_model: u32,
    /// QNN SDK version of the backend that compiled it, e.g. `2.51.0`.
    pub qnn_sdk: String,
    /// Full build of that backend, e.g. `v2.51.0.260929181845`.
    pub qnn_backend_build: String,
    /// ONNX Runtime version, e.g. `1.31.1`.
    pub ort_version: String,
    /// The runtime that compiled it.
    pub runtime: String,
    /// sha256 of the model as the user gave it.
    pub source_model_sha256: String,
    /// Digest of the model as the user gave it (over the `.onnx` and every file it refers to).
    pub source_model_digest: String,
    /// Where the model as the user gave it was: relative to the compiled model's folder when it
    /// can be (`../m.onnx`), else absolute; empty when unknown (models compiled before the field).
    pub source_model: String,
    /// Which source nodes each EPContext node of the compiled model covers, in graph order.
    pub ep_context_nodes: Vec<EpContextCover>,
    /// `--shape` values that fixed its inputs (space-separated; empty when none).
    pub source_shapes: String,
    /// Float graphs compiled in fp16 (`1`) or not (`0`).
    pub fp16: String,
}

/// One EPContext node of a compiled model and the nodes of the source model it stands for: the
/// compile session's assignment gives the nodes of each QNN partition, in order, and each partition
/// becomes one EPContext node, in the same order.
pub use npugate_result::EpContextCover;

impl CompiledFor {
    /// The metadata entries, keys in a fixed order (so the written bytes are deterministic).
    pub fn entries(&self) -> Vec<(String, String)> {
        [
            ("soc", self.soc.clone()),
            ("htp_arch", self.htp_arch.clone()),
            ("qnn_soc_model", self.qnn_soc_model.to_string()),
            ("qnn_sdk", self.qnn_sdk.clone()),
            ("qnn_backend_build", self.qnn_backend_build.clone()),
            ("ort_version", self.ort_version.clone()),
            ("runtime", self.runtime.clone()),
            ("source_model_sha256", self.source_model_sha256.clone()),
            ("source_model_digest", self.source_model_digest.clone()),
            ("source_model", self.source_model.clone()),
            ("source_shapes", self.source_shapes.clone()),
            ("enable_htp_fp16_precision", self.fp16.clone()),
        ]
        .into_iter()
        .map(|(key, value)| (format!("{PREFIX}{key}"), value))
        .chain([(EP_CONTEXT_NODES_KEY.to_string(), serde_json::to_string(&self.ep_context_nodes).unwrap_or_default())])
        .collect()
    }

    /// Writes the entries into `model`'s metadata.
    pub fn stamp(&self, model: &mut Model) {
        for (key, value) in self.entries() {
            model.set_metadata(&key, &value);
        }
    }

    /// What `model` was compiled for, when npugate compiled it (`None` for any other model).
    pub fn of(model: &Model) -> Result<Option<CompiledFor>> {
        let Some(soc) = model.metadata(&format!("{PREFIX}soc")) else {
            return Ok(None);
        };
        let get = |key: &str| model.metadata(&format!("{PREFIX}{key}")).unwrap_or_default().to_string();
        let qnn_soc_model = get("qnn_soc_model");
        let Ok(qnn_soc_model) = qnn_soc_model.parse() else {
            bail!("its metadata {PREFIX}qnn_soc_model is {qnn_soc_model:?}, not a number; compile it again with npugate compile");
        };
        // Models compiled before the record existed have none.
        let covers = model.metadata(EP_CONTEXT_NODES_KEY).unwrap_or_default();
        let ep_context_nodes = match covers.is_empty() {
            true => Vec::new(),
            false => serde_json::from_str(covers)
                .map_err(|e| anyhow::anyhow!("its metadata {PREFIX}ep_context_nodes is not the JSON npugate writes ({e}); compile it again with npugate compile"))?,
        };
        Ok(Some(CompiledFor {
            soc: soc.to_string(),
            htp_arch: get("htp_arch"),
            qnn_soc_model,
            qnn_sdk: get("qnn_sdk"),
            qnn_backend_build: get("qnn_backend_build"),
            ort_version: get("ort_version"),
            runtime: get("runtime"),
            source_model_sha256: get("source_model_sha256"),
            source_model_digest: get("source_model_digest"),
            source_model: get("source_model"),
            ep_context_nodes,
            source_shapes: get("source_shapes"),
            fp16: get("enable_htp_fp16_precision"),
        }))
    }

    /// Reads the model file and what it was compiled for.
    pub fn read(path: &Path) -> Result<Option<CompiledFor>> {
        if let Some(config) = npugate_onnx::genai::config_path(path) {
            return CompiledFor::of_folder(&crate::model::open_folder(&config)?);
        }
        let model = Model::read(path).map_err(|e| anyhow::anyhow!("{e}"))?;
        CompiledFor::of(&model).map_err(|e| e.context(format!("model {}", path.display())))
    }

    /// What an LLM folder was compiled for: a folder is compiled as a whole, so its first graph
    /// that says what for.
    pub fn of_folder(llm: &npugate_onnx::genai::LlmModel) -> Result<Option<CompiledFor>> {
        for graph in &llm.graphs {
            if let Some(compiled) = CompiledFor::read(&graph.path)? {
                return Ok(Some(compiled));
            }
        }
        Ok(None)
    }

    /// `SM8650 (v75) with QNN 2.51.0`.
    pub fn describe(&self) -> String {
        format!("{} ({}) with QNN {}", self.soc, self.htp_arch, self.qnn_sdk)
    }

    /// Checks that `target` (a device or an emulated SoC, `name` in messages) with `soc`/`arch`
    /// and a runtime whose QNN backend is `runtime_build` can load this context binary. Another
    /// arch is refused, and so is a QNN version the measured rule ([`ContextCompat::measured`])
    /// says refuses this context (both sides named, with the fix); `Ok` carries warnings (a SoC
    /// that cannot be identified, another SoC of the same arch, a QNN pair never measured, a
    /// runtime whose QNN build is unknown).
    pub fn check(
        &self,
        model: &Path,
        name: &str,
        soc: Option<&str>,
        arch: Option<&str>,
        runtime: &str,
        runtime_build: Option<&str>,
    ) -> Result<Vec<String>> {
        self.check_with(&ContextCompat::measured()?, model, name, (soc, arch), runtime, runtime_build)
    }

    /// [`CompiledFor::check`] with the rule `rule`.
    fn check_with(
        &self,
        rule: &ContextCompat,
        model: &Path,
        name: &str,
        (soc, arch): (Option<&str>, Option<&str>),
        runtime: &str,
        runtime_build: Option<&str>,
    ) -> Result<Vec<String>> {
        let mut warnings = Vec::new();
        let recompile =
            |for_soc: &str| format!("compile it for {for_soc}: npugate compile --model <source model> --soc {for_soc}");
        match (soc, arch) {
            (_, Some(arch)) if arch != self.htp_arch => bail!(
                "model {} was compiled for {}, but {name} is {} ({arch}): its context binary would fail to load; {}",
                model.display(),
                self.describe(),
                soc.unwrap_or("an unnamed SoC"),
                recompile(soc.unwrap_or("that SoC"))
            ),
            (Some(soc), Some(_)) if !soc.eq_ignore_ascii_case(&self.soc) => warnings.push(format!(
                "model {} was compiled for {}, {name} is {soc} of the same arch: the context binary may not load (VTCM size)",
                model.display(),
                self.describe()
            )),
            (_, None) => warnings.push(format!(
                "cannot tell which SoC {name} has, so the context binary for {} in {} is not checked against it",
                self.describe(),
                model.display()
            )),
            _ => {}
        }
        let Some(version) = runtime_build.map(qnn_sdk_version) else {
            warnings.push(format!(
                "runtime {runtime} names no QNN HTP build, so its QNN version is not checked against {}",
                self.describe()
            ));
            return Ok(warnings);
        };
        if version == self.qnn_sdk {
            return Ok(warnings);
        }
        match rule.verdict(&self.qnn_sdk, version, &self.htp_arch) {
            Verdict::Fails(pair) => bail!(
                "model {} was compiled for {} (backend {}), but runtime {runtime} has QNN {version}: a context binary from QNN {} {} on QNN {version} \
                 (measured with {} as {} ({}) by `{}` on {}: {}); run it with a QNN {} runtime (--qnn {}) or compile it with QNN {version} \
                 (npugate compile --qnn {version} --soc {} --model <source model>)",
                model.display(),
                self.describe(),
                self.qnn_backend_build,
                self.qnn_sdk,
                if pair.outcome == crate::context_compat::CompatOutcome::Refused { "is refused" } else { "fails to run" },
                pair.model,
                pair.soc,
                pair.htp_arch,
                rule.measured_by.join("`, `"),
                rule.measured_at,
                pair.error.as_deref().unwrap_or("no error recorded"),
                self.qnn_sdk,
                self.qnn_sdk,
                self.soc
            ),
            Verdict::Works(_) => {}
            Verdict::Untested => warnings.push(format!(
                "model {} was compiled with QNN {}, and runtime {runtime} has QNN {version}: whether QNN {version} loads a context binary from \
                 QNN {} was never measured (npugate compile --qnn {} --qnn {version} measures it); it may fail at load",
                model.display(),
                self.qnn_sdk,
                self.qnn_sdk,
                self.qnn_sdk
            )),
        }
        Ok(warnings)
    }
}

/// What a run's reference pass and output check use, decided once per command from `--model` and
/// `--reference-model` (by the plan's subject, which looks at both). For a model that is not compiled: the model itself (the output check: the
/// given reference model, else the model). For a compiled (`EPContext`) model, whose nodes the CPU
/// EP cannot run: its source model — the one given, else the one recorded at compile time when it
/// is at hand and still has the recorded digest — or none, with one line saying why and what to pass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReferenceChoice {
    /// A compiled model's source model: the harness's reference pass runs it, and placement counts
    /// in its nodes (`--reference-model` of the harness). `None` for a model that is not compiled.
    pub source: Option<PathBuf>,
    /// The model whose fp32 CPU outputs are `--check-outputs`' reference; `None`: no reference.
    pub outputs: Option<PathBuf>,
    /// `--shape` values that fixed the source model's inputs at compile time (its reference run
    /// needs them when the source has dynamic dims and the run gave none).
    pub source_shapes: Vec<ShapeSpec>,
    /// Why a compiled model gets no reference pass, one line with the fix; `None` when it gets one.
    pub skipped: Option<String>,
}

impl ReferenceChoice {
    /// The line that says why a compiled model gets no reference pass, when `settings` asks for
    /// one (or for the output check); `None` when it gets one or nothing asked for it.
    pub fn skipped_for(&self, settings: &HarnessSettings) -> Option<&str> {
        self.skipped.as_deref().filter(|_| settings.check_outputs || !settings.no_reference_pass)
    }

    /// `settings` with the source model's recorded shapes when they fix none (its reference run
    /// needs them when the source has dynamic dims).
    pub fn settings_for(&self, settings: &HarnessSettings) -> HarnessSettings {
        let mut settings = settings.clone();
        if settings.shapes.is_empty() {
            settings.shapes = self.source_shapes.clone();
        }
        settings
    }
}

/// The context binary several graphs of `llm` name (a weight-shared context, as npugate-htp's
/// `FolderCompileRequest` writes), if any.
pub fn shared_context_binary(llm: &LlmModel) -> Option<&str> {
    let named: Vec<&str> = llm
        .graphs
        .iter()
        .flat_map(|graph| graph.files.iter().filter(|f| f.name.ends_with(".bin")).map(|f| f.name.as_str()))
        .collect();
    named.iter().enumerate().find(|(index, name)| named[..*index].contains(name)).map(|(_, name)| *name)
}

/// Refuses to run a weight-shared compiled folder on the host HTP emulator: Qualcomm's x86_64 HTP
/// backend compiles such a context but cannot load it under any QNN version measured (its own
/// words: "Shared weights buffer isn't supported on this platform"; QNN 2.47.0 and 2.49.40 then
/// fail with `QNN_COMMON_ERROR_NOT_SUPPORTED`, 2.50.40 and 2.51.0 crash with a page fault).
pub fn refuse_on_emulator(llm: &LlmModel) -> Result<()> {
    match shared_context_binary(llm) {
        Some(binary) => bail!(
            "{}: its graphs share one weight-shared context ({binary}), which Qualcomm's host HTP emulator cannot load (its x86_64 backend does not support shared weights: QNN 2.47.0 to 2.49.40 refuse the context, 2.50.40 and 2.51.0 crash loading it); run it on a device, or emulate the folder it was compiled from",
            llm.folder.display()
        ),
        None => Ok(()),
    }
}

/// Where `source` is, seen from the folder of `compiled`: relative when both resolve (`../m.onnx`),
/// else absolute (as given when even that fails).
pub fn source_path_from(compiled: &Path, source: &Path) -> String {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (source, folder) = (absolute(source), absolute(compiled).parent().map(Path::to_path_buf).unwrap_or_default());
    relative_path(&folder, &source).unwrap_or(source).display().to_string()
}

/// `to` relative to the folder `from` (both absolute, without `..`), when they share a root.
fn relative_path(from: &Path, to: &Path) -> Option<PathBuf> {
    let (from, to): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    if common == 0 || from[common..].iter().chain(&to[common..]).any(|c| matches!(c, std::path::Component::ParentDir)) {
        return None;
    }
    let mut path: PathBuf = from[common..].iter().map(|_| std::path::Component::ParentDir).collect();
    path.extend(&to[common..]);
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled() -> CompiledFor {
        CompiledFor {
            soc: "SM8650".into(),
            htp_arch: "v75".into(),
            qnn_soc_model: 57,
            qnn_sdk: "2.51.0".into(),
            qnn_backend_build: "v2.51.0.260929181845".into(),
            ort_version: "1.31.1".into(),
            runtime: "qnn-2.7.0-ort-1.31.1-windows-x86_64".into(),
            source_model_sha256: "ab".into(),
            source_model_digest: "ab".into(),
            source_model: "../m.onnx".into(),
            ep_context_nodes: vec![EpContextCover {
                ep_context: "QNN_ctx_0".into(),
                source_nodes: vec!["conv".into(), "relu".into()],
            }],
            source_shapes: String::new(),
            fp16: "1".into(),
        }
    }

    /// A rule measured on SM8650: 2.49.40's context runs on 2.51.0, 2.51.0's is refused by 2.49.40.
    fn rule() -> ContextCompat {
        let pair = |compiled: &str, loaded: &str, outcome| crate::context_compat::CompatPair {
            soc: "SM8650".into(),
            htp_arch: "v75".into(),
            model: "smallcnn_qdq.onnx".into(),
            compiled_with: compiled.into(),
            loaded_with: loaded.into(),
            outcome,
            error: None,
        };
        use crate::context_compat::CompatOutcome::{Refused, Runs};
        ContextCompat {
            schema: crate::context_compat::CONTEXT_COMPAT_SCHEMA.into(),
            measured_by: vec!["npugate compile --qnn all --soc SM8650".into()],
            measured_at: "2026-11-25T00:00:00Z".into(),
            measured_on: "emulator".into(),
            pairs: vec![pair("2.49.40", "2.51.0", Runs), pair("2.51.0", "2.49.40", Refused)],
        }
    }

    #[test]
    fn metadata_round_trips_and_other_models_have_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.onnx");
        crate::model::testing::identity_model(&path, &[Some(1)]);
        let mut model = Model::read(&path).unwrap();
        assert_eq!(CompiledFor::of(&model).unwrap(), None);
        compiled().stamp(&mut model);
        assert_eq!(CompiledFor::of(&model).unwrap(), Some(compiled()));
        model.set_metadata("npugate.compiled_for.qnn_soc_model", "x");
        assert!(CompiledFor::of(&model).unwrap_err().to_string().contains("not a number"));
    }

    #[test]
    fn another_arch_or_qnn_version_is_refused_naming_both_sides() {
        let model = Path::new("m_ctx.onnx");
        let build = Some("v2.51.0.260929181845");
        assert!(compiled().check(model, "device d1", Some("SM8650"), Some("v75"), "rt", build).unwrap().is_empty());
        let error =
            compiled().check(model, "device d1", Some("SM8350"), Some("v68"), "rt", build).unwrap_err().to_string();
        assert!(
            error.contains("compiled for SM8650 (v75) with QNN 2.51.0") && error.contains("device d1 is SM8350 (v68)"),
            "{error}"
        );
        assert!(error.contains("--soc SM8350"), "{error}");
        let warnings = compiled().check(model, "device d1", None, None, "rt", None).unwrap();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert_eq!(compiled().check(model, "device d1", Some("SM8635"), Some("v75"), "rt", build).unwrap().len(), 1);
    }

    #[test]
    fn the_qnn_version_is_judged_by_the_measured_rule() {
        let model = Path::new("m_ctx.onnx");
        let v75 = (Some("SM8650"), Some("v75"));
        let newer = compiled();
        let error = newer
            .check_with(&rule(), model, "device d1", v75, "rt", Some("v2.49.40.260810104044"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("compiled for SM8650 (v75) with QNN 2.51.0") && error.contains("runtime rt has QNN 2.49.40"),
            "{error}"
        );
        assert!(
            error.contains("is refused on QNN 2.49.40") && error.contains("npugate compile --qnn all --soc SM8650"),
            "{error}"
        );
        assert!(
            error.contains("--qnn 2.51.0") && error.contains("npugate compile --qnn 2.49.40 --soc SM8650"),
            "{error}"
        );
        let older =
            CompiledFor { qnn_sdk: "2.49.40".into(), qnn_backend_build: "v2.49.40.260810104044".into(), ..compiled() };
        assert!(
            older.check_with(&rule(), model, "device d1", v75, "rt", Some("v2.51.0.260929181845")).unwrap().is_empty(),
            "measured to load"
        );
        let untested = older.check_with(&rule(), model, "device d1", v75, "rt", Some("v2.50.40.260831140417")).unwrap();
        assert!(untested.len() == 1 && untested[0].contains("never measured"), "{untested:?}");
    }
}
