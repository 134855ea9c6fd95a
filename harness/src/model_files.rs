//! The model as a set of files: the `.onnx` and every file it refers to (external data,
//! EPContext context binaries), each hashed, and the model's digest over all of them.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use npugate_onnx::Model;
use npugate_result::digest::{model_digest, sha256_file};
use npugate_result::ModelFile;

/// The model's files and identity.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelIdentity {
    /// sha256 of the `.onnx`.
    pub sha256: String,
    /// The files it refers to, sorted by name.
    pub files: Vec<ModelFile>,
    /// The digest over all of them ([`model_digest`]).
    pub digest: String,
}

/// Hashes `model` (`bytes` long) and locates and hashes every file it refers to; a file in
/// `hashed` (what the caller already hashed) whose size still matches is not read again.
pub fn identify(model: &Path, bytes: u64, hashed: &[ModelFile]) -> Result<ModelIdentity> {
    let (sha256, _) = sha256_file(model).with_context(|| format!("cannot hash {}", model.display()))?;
    let folder = model.parent().unwrap_or(Path::new("."));
    let located = Model::read(model)
        .map_err(|e| anyhow!("{e}"))?
        .locate_files(folder)
        .map_err(|e| anyhow!("model {}: {e}", model.display()))?;
    let files = located
        .into_iter()
        .map(|file| match hashed.iter().find(|known| known.name == file.name && known.bytes == file.bytes) {
            Some(known) => Ok(known.clone()),
            None => {
                let (sha256, bytes) =
                    sha256_file(&file.path).with_context(|| format!("cannot hash {}", file.path.display()))?;
                Ok(ModelFile { name: file.name, sha256, bytes })
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let digest = model_digest(&sha256, bytes, &files);
    Ok(ModelIdentity { sha256, files, digest })
}

#[cfg(test)]
mod tests {
    use super::*;
    use npugate_onnx::proto::tensor_proto::DataLocation;
    use npugate_onnx::proto::{GraphProto, ModelProto, StringStringEntryProto, TensorProto};

    fn model_with_weights(dir: &Path) -> std::path::PathBuf {
        let tensor = TensorProto {
            name: Some("w".into()),
            dims: vec![2],
            data_type: Some(1),
            data_location: Some(DataLocation::External as i32),
            external_data: vec![StringStringEntryProto { key: Some("location".into()), value: Some("w.bin".into()) }],
            ..Default::default()
        };
        let graph = GraphProto { name: Some("g".into()), initializer: vec![tensor], ..Default::default() };
        let path = dir.join("m.onnx");
        Model::from(ModelProto { ir_version: Some(8), graph: Some(graph), ..Default::default() }).write(&path).unwrap();
        std::fs::write(dir.join("w.bin"), [0u8; 8]).unwrap();
        path
    }

    #[test]
    fn referenced_files_are_hashed_unless_the_caller_did_and_they_change_the_digest() {
        let dir = tempfile::tempdir().unwrap();
        let model = model_with_weights(dir.path());
        let bytes = std::fs::metadata(&model).unwrap().len();
        let identity = identify(&model, bytes, &[]).unwrap();
        assert_eq!(identity.files.len(), 1);
        assert_eq!(identity.files[0].sha256, sha256_file(&dir.path().join("w.bin")).unwrap().0);
        assert_ne!(identity.digest, identity.sha256);

        let hint = ModelFile { name: "w.bin".into(), sha256: "c".repeat(64), bytes: 8 };
        let stale = ModelFile { bytes: 9, ..hint.clone() };
        assert_eq!(
            identify(&model, bytes, std::slice::from_ref(&hint)).unwrap().files,
            [hint],
            "the caller's hash is taken"
        );
        assert_eq!(identify(&model, bytes, &[stale]).unwrap(), identity, "a hint of another size is not");

        std::fs::write(dir.path().join("w.bin"), [1u8; 8]).unwrap();
        assert_ne!(identify(&model, bytes, &[]).unwrap().digest, identity.digest);
        std::fs::remove_file(dir.path().join("w.bin")).unwrap();
        let error = identify(&model, bytes, &[]).unwrap_err().to_string();
        assert!(error.contains("m.onnx") && error.contains("w.bin") && error.contains("\"w\""), "{error}");
    }
}
