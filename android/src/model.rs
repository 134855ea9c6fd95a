//! The model a run uses. When the EP needs static dims (QNN) and `--shape` gives input shapes, the
//! model's dynamic input dims are fixed in the model itself (ONNX Runtime's QNN EP rejects every
//! node of a model with dynamic dims, and free-dimension overrides cannot give two dims sharing
//! one symbolic name different sizes) and the fixed model — written once into the cache,
//! content-addressed — is what is deployed, compiled and hashed; the result records the
//! original's sha256 too. A dynamic model without the shapes it needs is refused before anything
//! runs, with the exact flags to pass.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use harness_settings::{HarnessSettings, InputFile, ShapeSpec};
use npugate_result::digest::sha256_file;
use onnx_model::Model;
use sha2::{Digest, Sha256};

/// A model ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedModel {
    /// The file the harness loads: the model as given, or its fixed copy in the cache.
    pub path: PathBuf,
    /// The model as given, when `path` is a fixed copy of it.
    pub fixed_from: Option<FixedFrom>,
}

/// The original of a model whose input shapes were fixed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedFrom {
    /// The model as the user gave it.
    pub path: PathBuf,
    /// Its sha256.
    pub sha256: String,
}

/// Reads `model` and applies `shapes`: checks every shape against the model's inputs (a name
/// that is no input, a rank mismatch, a dim the model fixes otherwise: an error naming the input
/// and the fix) and refuses a model left with dynamic inputs that neither `shapes` nor an
/// `--input` file gives a size. Nothing is written.
pub fn check(model: &Path, shapes: &[ShapeSpec], inputs: &[InputFile]) -> Result<Option<(Model, String)>> {
    let mut onnx = Model::read(model).map_err(|e| anyhow::anyhow!("{e}"))?;
    let given: Vec<(String, Vec<i64>)> = shapes.iter().map(|s| (s.input.clone(), s.dims.clone())).collect();
    let fixed = onnx.fix_input_shapes(&given).map_err(|e| anyhow::anyhow!("model {}: {e}", model.display()))?;
    let missing: Vec<String> = fixed
        .still_dynamic
        .iter()
        .filter(|input| !inputs.iter().any(|file| file.input == input.name))
        .map(|input| input.shape_flag())
        .collect();
    if !missing.is_empty() {
        bail!(
            "model {} has dynamic input dims (a run needs sizes, and accelerator EPs such as QNN reject dynamic dims node by node); pass {} (N = the size to run with)",
            model.display(),
            missing.join(" ")
        );
    }
    let changed = fixed.fixed.iter().any(|input| input.before.as_ref().is_none_or(|dims| dims.iter().any(|d| d.fixed().is_none())));
    Ok(changed.then(|| (onnx, shapes.iter().map(ToString::to_string).collect::<Vec<_>>().join(" "))))
}

/// The model a run with `settings` loads: fixed by its `--shape`s when its EP needs static dims
/// ([`prepare`]), else the model as given, [`check`]ed.
pub fn for_run(model: &Path, settings: &HarnessSettings, cache: &Path) -> Result<PreparedModel> {
    if settings.ep.needs_static_shapes() {
        return prepare(model, &settings.shapes, &settings.inputs, cache);
    }
    check(model, &settings.shapes, &settings.inputs)?;
    Ok(PreparedModel { path: model.to_path_buf(), fixed_from: None })
}

/// [`check`]s `model` and, when `shapes` change it, writes the fixed model into `cache`
/// (`<cache>/<key>/<file name>`, the key a digest of the original's files, its name and the shapes) unless
/// it is there already; the model's external data files are linked (or copied) beside it.
pub fn prepare(model: &Path, shapes: &[ShapeSpec], inputs: &[InputFile], cache: &Path) -> Result<PreparedModel> {
    let Some((fixed, shape_text)) = check(model, shapes, inputs)? else {
        return Ok(PreparedModel { path: model.to_path_buf(), fixed_from: None });
    };
    let (sha256, _) = sha256_file(model).with_context(|| format!("cannot read model {}", model.display()))?;
    let folder = model.parent().unwrap_or(Path::new("."));
    let data: Vec<String> = fixed
        .file_references()
        .map_err(|e| anyhow::anyhow!("model {}: {e}", model.display()))?
        .files()
        .into_iter()
        .map(str::to_string)
        .collect();
    let name = model.file_name().context("the model path names no file")?;
    let mut key = Sha256::new();
    key.update(name.as_encoded_bytes());
    key.update(format!("\n{sha256}\n{shape_text}\n"));
    for file in &data {
        let (file_sha, _) = sha256_file(&folder.join(file)).with_context(|| format!("model {}: cannot read its external data {file}", model.display()))?;
        key.update(format!("{file}={file_sha}\n"));
    }
    let dir = cache.join(format!("{:x}", key.finalize()));
    let path = dir.join(name);
    if !path.is_file() {
        std::fs::create_dir_all(cache).with_context(|| format!("cannot create {}", cache.display()))?;
        let staging = tempfile::Builder::new().prefix(".fixing-").tempdir_in(cache).with_context(|| format!("cannot write into {}", cache.display()))?;
        write_with_data(&fixed, model, staging.path())?;
        match std::fs::rename(staging.path(), &dir) {
            Ok(()) => {
                let _ = staging.keep();
            }
            // Another run fixed the same model with the same shapes first: use theirs.
            Err(_) if path.is_file() => {}
            Err(error) => return Err(error).with_context(|| format!("cannot move the fixed model into {}", dir.display())),
        }
    }
    Ok(PreparedModel { path, fixed_from: Some(FixedFrom { path: model.to_path_buf(), sha256 }) })
}

/// Writes `rewritten` (a changed copy of the model file `original`) into the existing directory
/// `dir` under `original`'s file name, with `original`'s external data files linked (or copied)
/// beside it so that their relative paths still hold. Returns the written model's path.
pub fn write_with_data(rewritten: &Model, original: &Path, dir: &Path) -> Result<PathBuf> {
    let name = original.file_name().context("the model path names no file")?;
    let folder = original.parent().unwrap_or(Path::new("."));
    let path = dir.join(name);
    rewritten.write(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let references = rewritten.file_references().map_err(|e| anyhow::anyhow!("model {}: {e}", original.display()))?;
    for file in references.files() {
        let (from, to) = (folder.join(file), dir.join(file));
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).with_context(|| format!("cannot copy {} beside {}", from.display(), path.display()))?;
        }
    }
    Ok(path)
}

/// Where fixed models are kept: `<npugate cache>/fixed-models`.
pub fn default_cache() -> PathBuf {
    crate::paths::cache_dir().join("fixed-models")
}

/// Tiny models for the tests of the layers above.
#[cfg(test)]
pub mod testing {
    use std::path::Path;

    use onnx_model::proto::tensor_shape_proto::dimension::Value as DimValue;
    use onnx_model::proto::tensor_shape_proto::Dimension;
    use onnx_model::proto::type_proto::{Tensor, Value};
    use onnx_model::proto::{GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto};
    use onnx_model::Model;

    /// `y = Identity(x)` with `x` float32 of `dims` (`None`: a dim named `?`), written to `path`.
    pub fn identity_model(path: &Path, dims: &[Option<i64>]) {
        let value = |name: &str| ValueInfoProto {
            name: Some(name.into()),
            r#type: Some(TypeProto {
                value: Some(Value::TensorType(Tensor {
                    elem_type: Some(1),
                    shape: Some(TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|d| Dimension {
                                value: Some(match d {
                                    Some(size) => DimValue::DimValue(*size),
                                    None => DimValue::DimParam("?".into()),
                                }),
                                ..Default::default()
                            })
                            .collect(),
                    }),
                })),
                ..Default::default()
            }),
            ..Default::default()
        };
        let node = NodeProto { name: Some("id".into()), op_type: Some("Identity".into()), input: vec!["x".into()], output: vec!["y".into()], ..Default::default() };
        let graph = GraphProto { name: Some("g".into()), node: vec![node], input: vec![value("x")], output: vec![value("y")], ..Default::default() };
        let proto = ModelProto {
            ir_version: Some(8),
            opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
            graph: Some(graph),
            ..Default::default()
        };
        Model::from(proto).write(path).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::testing::identity_model;
    use super::*;

    fn shape(text: &str) -> ShapeSpec {
        text.parse().unwrap()
    }

    #[test]
    fn two_dims_sharing_a_name_get_their_own_sizes_and_the_fixed_copy_is_reused() {
        let work = tempfile::tempdir().unwrap();
        let model = work.path().join("cls.onnx");
        identity_model(&model, &[Some(1), Some(3), None, None]);
        let cache = work.path().join("cache");
        let prepared = prepare(&model, &[shape("x=1x3x48x192")], &[], &cache).unwrap();
        let original = prepared.fixed_from.clone().unwrap();
        assert_eq!(original.sha256, sha256_file(&model).unwrap().0);
        let fixed = Model::read(&prepared.path).unwrap();
        let dims: Vec<String> = fixed.input_signatures()[0].dims.clone().unwrap().iter().map(ToString::to_string).collect();
        assert_eq!(dims, ["1", "3", "48", "192"]);
        assert_eq!(prepared.path.file_name().unwrap(), "cls.onnx");
        let again = prepare(&model, &[shape("x=1x3x48x192")], &[], &cache).unwrap();
        assert_eq!(again, prepared, "the same shapes reuse the same fixed copy");
        let other = prepare(&model, &[shape("x=1x3x48x320")], &[], &cache).unwrap();
        assert_ne!(other.path, prepared.path);
        // An identical copy under another name (an A/B comparison of a model with itself).
        let copy = work.path().join("cls_copy.onnx");
        std::fs::copy(&model, &copy).unwrap();
        let copied = prepare(&copy, &[shape("x=1x3x48x192")], &[], &cache).unwrap();
        assert_eq!(copied.path.file_name().unwrap(), "cls_copy.onnx");
        assert!(copied.path.is_file() && prepared.path.is_file());
    }

    #[test]
    fn static_models_run_as_given_and_dynamic_ones_need_the_flags() {
        let work = tempfile::tempdir().unwrap();
        let (fixed, dynamic) = (work.path().join("fixed.onnx"), work.path().join("dyn.onnx"));
        identity_model(&fixed, &[Some(1), Some(3)]);
        identity_model(&dynamic, &[None, Some(3)]);
        let cache = work.path().join("cache");
        assert_eq!(prepare(&fixed, &[], &[], &cache).unwrap().path, fixed);
        assert_eq!(prepare(&fixed, &[shape("x=1x3")], &[], &cache).unwrap().path, fixed, "nothing to fix");
        let error = prepare(&dynamic, &[], &[], &cache).unwrap_err().to_string();
        assert!(error.contains("dyn.onnx") && error.contains("pass --shape x=Nx3"), "{error}");
        let npy: InputFile = "x=/data/x.npy".parse().unwrap();
        assert_eq!(prepare(&dynamic, &[], &[npy], &cache).unwrap().path, dynamic, "an --input file gives the size");
        for (bad, needle) in [("y=1x3", "no input"), ("x=1x3x3", "3 dims"), ("x=2x4", "fixes it to 3")] {
            let error = prepare(&dynamic, &[shape(bad)], &[], &cache).unwrap_err().to_string();
            assert!(error.to_lowercase().contains(needle) || error.contains(needle), "{bad}: {error}");
        }
        assert!(!cache.exists(), "nothing is written for a refused shape");
    }

    #[test]
    fn a_file_that_is_no_model_is_named() {
        let work = tempfile::tempdir().unwrap();
        let broken = work.path().join("broken.onnx");
        std::fs::write(&broken, b"\x08\x07\x12\xff\xff").unwrap();
        let error = prepare(&broken, &[], &[], work.path()).unwrap_err().to_string();
        assert!(error.contains("broken.onnx"), "{error}");
    }
}
