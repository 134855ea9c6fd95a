//! The EP context cache (`--context-cache DIR`): the first session compiles the graph and writes
//! an EP context model (`ep.context_enable`, `ep.context_file_path`) with the backend's context
//! binary; later sessions load that model and skip compilation. Cold and warm creation are timed
//! separately, because on a phone the cold path is what a user's first launch pays.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

/// Session config key that makes the EP write a context model.
const CONTEXT_ENABLE: &str = "ep.context_enable";
/// Session config key naming the context model to write.
pub const CONTEXT_FILE_PATH: &str = "ep.context_file_path";
/// Operator type of the nodes that carry a context binary.
const EP_CONTEXT_OP: &[u8] = b"EPContext";

/// Path of the context model for this model and configuration inside `dir`. The name carries a
/// hash of everything that changes the compiled graph (the model digest over all its files, EP
/// options, ORT version), so a stale cache is never loaded for a changed model or option.
pub fn context_model_path(
    dir: &Path,
    model: &Path,
    model_digest: &str,
    ep_options: &[(String, String)],
    ort_version: &str,
) -> PathBuf {
    let mut hasher = Sha256::new();
    hasher.update(model_digest.as_bytes());
    hasher.update(ort_version.as_bytes());
    for (key, value) in ep_options {
        hasher.update(format!("\0{key}={value}").as_bytes());
    }
    let key = format!("{:x}", hasher.finalize());
    let stem = model.file_stem().and_then(|s| s.to_str()).unwrap_or("model");
    dir.join(format!("{stem}-{}_ctx.onnx", &key[..16]))
}

/// Session config entries that make a session write the context model `path`.
pub fn write_config(path: &Path) -> Vec<(String, String)> {
    vec![(CONTEXT_ENABLE.into(), "1".into()), (CONTEXT_FILE_PATH.into(), path.display().to_string())]
}

/// The context model a session with `session_config` writes: its `ep.context_file_path` when
/// `ep.context_enable` is `1`.
pub fn written_by(session_config: &[(String, String)]) -> Option<PathBuf> {
    let value =
        |wanted: &str| session_config.iter().rev().find(|(key, _)| key == wanted).map(|(_, value)| value.as_str());
    (value(CONTEXT_ENABLE) == Some("1")).then(|| value(CONTEXT_FILE_PATH)).flatten().map(PathBuf::from)
}

/// Checks that a cold session really wrote a usable context model. ORT "succeeds" without one
/// when the backend cannot make context binaries (QNN Saver and CPU: "Qnn context cache only
/// works for HTP/DSP/GPU backend"), writing a model with no `EPContext` node; such a file is
/// removed so it is never loaded as a cache.
pub fn check_written(path: &Path) -> Result<()> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "--context-cache: the EP wrote no context model {} (only the QNN HTP and GPU backends make context binaries)",
            path.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("cannot read context model {}", path.display())),
    };
    if !bytes.windows(EP_CONTEXT_OP.len()).any(|w| w == EP_CONTEXT_OP) {
        std::fs::remove_file(path)
            .with_context(|| format!("cannot remove unusable context model {}", path.display()))?;
        bail!(
            "--context-cache: {} has no EPContext node, so the backend made no context binary (only the QNN HTP and GPU \
             backends can; the Saver and CPU backends cannot): run with --qnn-backend htp on a device, or drop --context-cache",
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_changes_with_options_and_keeps_the_stem() {
        let dir = Path::new("/cache");
        let model = Path::new("/m/smallcnn.onnx");
        let a = context_model_path(dir, model, "abc", &[("backend_type".into(), "htp".into())], "1.31.1");
        let b = context_model_path(dir, model, "abc", &[("backend_type".into(), "gpu".into())], "1.31.1");
        assert_ne!(a, b);
        let name = a.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("smallcnn-") && name.ends_with("_ctx.onnx"), "{name}");
    }

    #[test]
    fn a_model_without_epcontext_is_rejected_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m_ctx.onnx");
        std::fs::write(&path, b"\x08\x07graph Conv Relu").unwrap();
        let err = check_written(&path).unwrap_err().to_string();
        assert!(err.contains("no EPContext node"), "{err}");
        assert!(!path.exists());
        std::fs::write(&path, b"\x08\x07 EPContext node").unwrap();
        check_written(&path).unwrap();
        assert!(check_written(&dir.path().join("missing.onnx"))
            .unwrap_err()
            .to_string()
            .contains("wrote no context model"));
    }
}
