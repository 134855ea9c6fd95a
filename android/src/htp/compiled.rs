//! What an EPContext model was compiled for, kept in its metadata (`metadata_props`) by `npugate
//! compile`: the SoC, its Hexagon arch, the QNN SDK and backend build, ONNX Runtime, and the
//! source model. A context binary for the wrong chip or QNN version fails on the device at load,
//! so a run refuses a device or runtime the model does not fit, naming both sides.

use std::path::Path;

use anyhow::{bail, Result};
use npugate_onnx::Model;

use crate::runtime::manifest::qnn_sdk_version;

/// Prefix of every metadata key npugate writes.
const PREFIX: &str = "npugate.compiled_for.";

/// What a context model was compiled for.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// `--shape` values that fixed its inputs (space-separated; empty when none).
    pub source_shapes: String,
    /// Float graphs compiled in fp16 (`1`) or not (`0`).
    pub fp16: String,
}

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
            ("source_shapes", self.source_shapes.clone()),
            ("enable_htp_fp16_precision", self.fp16.clone()),
        ]
        .into_iter()
        .map(|(key, value)| (format!("{PREFIX}{key}"), value))
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
        Ok(Some(CompiledFor {
            soc: soc.to_string(),
            htp_arch: get("htp_arch"),
            qnn_soc_model,
            qnn_sdk: get("qnn_sdk"),
            qnn_backend_build: get("qnn_backend_build"),
            ort_version: get("ort_version"),
            runtime: get("runtime"),
            source_model_sha256: get("source_model_sha256"),
            source_shapes: get("source_shapes"),
            fp16: get("enable_htp_fp16_precision"),
        }))
    }

    /// Reads the model file and what it was compiled for.
    pub fn read(path: &Path) -> Result<Option<CompiledFor>> {
        if let Some(config) = npugate_onnx::genai::config_path(path) {
            // A folder is compiled as a whole: its graphs say what for.
            for graph in crate::model::open_folder(&config)?.graphs {
                if let Some(compiled) = CompiledFor::read(&graph.path)? {
                    return Ok(Some(compiled));
                }
            }
            return Ok(None);
        }
        let model = Model::read(path).map_err(|e| anyhow::anyhow!("{e}"))?;
        CompiledFor::of(&model).map_err(|e| e.context(format!("model {}", path.display())))
    }

    /// `SM8650 (v75) with QNN 2.51.0`.
    pub fn describe(&self) -> String {
        format!("{} ({}) with QNN {}", self.soc, self.htp_arch, self.qnn_sdk)
    }

    /// Checks that `target` (a device or an emulated SoC, `name` in messages) with `soc`/`arch`
    /// and a runtime whose QNN backend is `runtime_build` can load this context binary. An arch
    /// or QNN version that differs is refused (both sides named); `Ok` carries warnings (a SoC
    /// that cannot be identified, another SoC of the same arch, a runtime whose QNN build is unknown).
    pub fn check(&self, model: &Path, name: &str, soc: Option<&str>, arch: Option<&str>, runtime: &str, runtime_build: Option<&str>) -> Result<Vec<String>> {
        let mut warnings = Vec::new();
        let recompile = |for_soc: &str| format!("compile it for {for_soc}: npugate compile --model <source model> --soc {for_soc}");
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
        match runtime_build.map(qnn_sdk_version) {
            Some(version) if version != self.qnn_sdk => bail!(
                "model {} was compiled for {} (backend {}), but runtime {runtime} has QNN {version}: QNN loads context binaries of its own version; \
                 run with a QNN {} runtime or compile the model again with this runtime's QNN",
                model.display(),
                self.describe(),
                self.qnn_backend_build,
                self.qnn_sdk
            ),
            Some(_) => {}
            None => warnings.push(format!("runtime {runtime} names no QNN HTP build, so its QNN version is not checked against {}", self.describe())),
        }
        Ok(warnings)
    }
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
            source_shapes: String::new(),
            fp16: "1".into(),
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
        let error = compiled().check(model, "device d1", Some("SM8350"), Some("v68"), "rt", build).unwrap_err().to_string();
        assert!(error.contains("compiled for SM8650 (v75) with QNN 2.51.0") && error.contains("device d1 is SM8350 (v68)"), "{error}");
        assert!(error.contains("--soc SM8350"), "{error}");
        let error = compiled().check(model, "device d1", Some("SM8650"), Some("v75"), "rt", Some("v2.50.0.1234567890")).unwrap_err().to_string();
        assert!(error.contains("runtime rt has QNN 2.50.0"), "{error}");
        let warnings = compiled().check(model, "device d1", None, None, "rt", None).unwrap();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert_eq!(compiled().check(model, "device d1", Some("SM8635"), Some("v75"), "rt", build).unwrap().len(), 1);
    }
}
