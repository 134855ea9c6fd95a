//! Evidence bundles: a directory with copies of everything a verdict rests on — the model, the
//! harness binary, every runtime library, the input files, each result directory (result.json,
//! profiles, log, saved outputs, verdict, reports) — plus `manifest.json` (sha256 of every file,
//! device fingerprints, tool versions, verdicts) signed with ed25519 in `signature.json`.
//! `npugate verify` checks it offline. Bundles are reproducible: the same inputs give the same bytes.
//!
//! Callers (`run`, a sweep's bundle in npugate-sweeps) describe a bundle with [`Bundle`]: result dirs plus extra files.

mod keys;
mod manifest;
mod verify;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use ed25519_dalek::{Signer, SigningKey};
use npugate_result::digest::sha256_file;
use npugate_result::{files, RunResult};
use sha2::{Digest, Sha256};

pub use keys::{generate, private_pem, public_pem, read_public_key, signing_key};
pub use manifest::{Manifest, VerdictSummary, MANIFEST_FILE, SIGNATURE_FILE};
pub use verify::verify;

use crate::layout::Ownership;
use manifest::{
    canonical_json, FileEntry, RunEvidence, RuntimeVersion, SignatureFile, ToolVersion, EVIDENCE_SCHEMA,
    SIGNATURE_SCHEMA,
};
use npugate_host::runtime::manifest::MANIFEST_FILE as RUNTIME_MANIFEST;
use npugate_host::runtime::RuntimeManifest;
use npugate_settings::HarnessSettings;

/// What goes into a bundle: result directories (copied whole) and single files.
#[derive(Debug, Clone, Default)]
pub struct Bundle {
    runs: BTreeMap<String, (PathBuf, RunEvidence)>,
    files: BTreeMap<String, (String, PathBuf)>,
    /// Bundle paths given two different sources (refused when writing).
    conflicts: Vec<String>,
}

impl Bundle {
    /// An empty bundle description.
    pub fn new() -> Bundle {
        Bundle::default()
    }

    /// Adds a result directory as `runs/<label>/` (every file below it, symlinks followed) with
    /// its result and verdict, already in memory; a label may have `/`-separated parts
    /// (`device/runtime/model`).
    pub fn run(mut self, label: &str, dir: &Path, result: &RunResult, verdict: Option<VerdictSummary>) -> Bundle {
        let label = label.split('/').map(safe_name).collect::<Vec<String>>().join("/");
        let evidence = RunEvidence {
            label: label.clone(),
            dir: format!("runs/{label}"),
            status: format!("{:?}", result.status).to_lowercase(),
            harness: result.tool.clone(),
            runtime: RuntimeVersion {
                name: result.runtime.name.clone(),
                ort_version: result.runtime.ort_version.clone(),
            },
            model_digest: result.model.digest.clone(),
            model_files: result.model.files.clone(),
            fingerprint: result.fingerprint.clone(),
            verdict,
        };
        self.runs.insert(label, (dir.to_path_buf(), evidence));
        self
    }

    /// Adds one file as `bundle_path` with a role (see the manifest's `FileEntry::role`). The same
    /// path from another source is a conflict that [`Bundle::write`] refuses.
    pub fn file(mut self, role: &str, bundle_path: &str, source: &Path) -> Bundle {
        // The bundle's own manifest and signature sit at its root: no file may take their place.
        if [MANIFEST_FILE, SIGNATURE_FILE].contains(&bundle_path) {
            self.conflicts.push(bundle_path.to_string());
        }
        let previous = self.files.insert(bundle_path.to_string(), (role.to_string(), source.to_path_buf()));
        if previous.is_some_and(|(_, earlier)| earlier != source) {
            self.conflicts.push(bundle_path.to_string());
        }
        self
    }

    /// Adds what a run of `model` rests on: the model with the files it refers to (and the reference
    /// model of an output check), the harness binary, the runtime (`runtime.json` and every
    /// library) and the `--input` files.
    pub fn subject(
        self,
        model: &crate::model::GivenModel,
        reference_model: Option<&crate::model::GivenModel>,
        harness: &Path,
        runtime: &RuntimeManifest,
        settings: &HarnessSettings,
    ) -> Bundle {
        let mut bundle = self
            .model("model", "model", model)
            .file("harness", &format!("harness/{}", file_name(harness)), harness)
            .runtime(runtime);
        if let Some(reference) = reference_model {
            bundle = bundle.model("reference_model", "reference-model", reference);
        }
        bundle.inputs("inputs", settings)
    }

    /// Adds a model as `<dir>/<file name>` with every file it refers to (external data, context
    /// binaries) beside it under its own name, all with `role`: the files its command located and
    /// hashed when it looked at it.
    pub fn model(self, role: &str, dir: &str, model: &crate::model::GivenModel) -> Bundle {
        let (path, files) = (&model.path, &model.files);
        let mut bundle = self.file(role, &format!("{dir}/{}", file_name(path)), path);
        for (file, local) in &files.referenced {
            bundle = bundle.file(role, &format!("{dir}/{}", file.name), local);
        }
        bundle
    }

    /// Adds the `--input` files of `settings` as `<prefix>/<input name>.npy`.
    pub fn inputs(mut self, prefix: &str, settings: &HarnessSettings) -> Bundle {
        for input in &settings.inputs {
            self = self.file("input", &format!("{prefix}/{}.npy", safe_name(&input.input)), &input.path);
        }
        self
    }

    /// Adds a runtime as `runtime/<name>/`: its `runtime.json` and every library.
    pub fn runtime(self, runtime: &RuntimeManifest) -> Bundle {
        let manifest = runtime.dir.join(RUNTIME_MANIFEST);
        let mut bundle = self.file("runtime", &format!("runtime/{}/{RUNTIME_MANIFEST}", runtime.name), &manifest);
        for library in &runtime.files {
            bundle = bundle.file(
                "runtime",
                &format!("runtime/{}/{}", runtime.name, library.name),
                &runtime.dir.join(&library.name),
            );
        }
        bundle
    }

    /// Writes the bundle to `out` (replacing a previous bundle there; any other non-empty
    /// directory is refused), signs its manifest with `key` and returns the manifest.
    pub fn write(&self, out: &Path, key: &SigningKey) -> Result<Manifest> {
        if let Some(path) = self.conflicts.first() {
            let (_, source) = &self.files[path];
            if [MANIFEST_FILE, SIGNATURE_FILE].contains(&path.as_str()) {
                bail!(
                    "{} would be {path} in the evidence bundle, the bundle's own file; put it in a folder",
                    source.display()
                );
            }
            bail!(
                "two different files would be {path} in the evidence bundle (one is {}); give them distinct names",
                source.display()
            );
        }
        prepare(out)?;
        let mut entries = Vec::new();
        for (bundle_path, (role, source)) in &self.files {
            entries.push(copy_into(out, bundle_path, role, source)?);
        }
        let mut runs = Vec::new();
        for (label, (dir, evidence)) in &self.runs {
            for (relative, source) in files_below(dir)? {
                let role = role_of(&relative);
                entries.push(copy_into(out, &format!("runs/{label}/{relative}"), role, &source)?);
            }
            runs.push(evidence.clone());
        }
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        let manifest = Manifest {
            schema: EVIDENCE_SCHEMA.into(),
            tool: ToolVersion { name: env!("CARGO_PKG_NAME").into(), version: env!("CARGO_PKG_VERSION").into() },
            files: entries,
            runs,
        };
        let bytes = canonical_json(&manifest)?;
        let signature = SignatureFile {
            schema: SIGNATURE_SCHEMA.into(),
            algorithm: "ed25519".into(),
            manifest: MANIFEST_FILE.into(),
            manifest_sha256: format!("{:x}", Sha256::digest(&bytes)),
            public_key: hex::encode(key.verifying_key().as_bytes()),
            signature: hex::encode(key.sign(&bytes).to_bytes()),
        };
        write_file(&out.join(MANIFEST_FILE), &bytes)?;
        write_file(&out.join(SIGNATURE_FILE), &canonical_json(&signature)?)?;
        Ok(manifest)
    }
}

/// `out` made an empty directory: a previous bundle there is replaced, anything else refused.
fn prepare(out: &Path) -> Result<()> {
    const BUNDLE: Ownership = Ownership { marker: MANIFEST_FILE, what: "evidence bundle", own_names: &[] };
    BUNDLE.replace(out, "--evidence directory")
}

/// Copies `source` to `out/bundle_path` and describes the copy.
fn copy_into(out: &Path, bundle_path: &str, role: &str, source: &Path) -> Result<FileEntry> {
    let destination = out.join(bundle_path);
    if let Some(parent) = destination.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::copy(source, &destination)
        .with_context(|| format!("cannot copy {} into the evidence bundle", source.display()))?;
    let (sha256, bytes) =
        sha256_file(&destination).with_context(|| format!("cannot hash {}", destination.display()))?;
    Ok(FileEntry { path: bundle_path.to_string(), role: role.to_string(), sha256, bytes })
}

/// Every regular file below `dir` (symlinks followed) as (`/`-separated relative path, path), sorted.
fn files_below(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let mut pending = vec![(String::new(), dir.to_path_buf())];
    while let Some((prefix, current)) = pending.pop() {
        for entry in std::fs::read_dir(&current).with_context(|| format!("cannot read {}", current.display()))? {
            let path = entry?.path();
            let relative = format!("{prefix}{}", file_name(&path));
            let meta = std::fs::metadata(&path).with_context(|| format!("cannot read {}", path.display()))?;
            if meta.is_dir() {
                pending.push((format!("{relative}/"), path));
            } else if meta.is_file() {
                out.push((relative, path));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The role of a file inside a result directory, by its name.
fn role_of(relative: &str) -> &'static str {
    let name = relative.rsplit('/').next().unwrap_or(relative);
    match name {
        files::RESULT => "result",
        files::VERDICT | files::REPORT_HTML | files::OUTPUTS => "report",
        files::DEVICE_RUN | files::DEVICE_STATE | files::RACK => "device",
        _ if name.ends_with(".npy") => "outputs",
        _ if name.ends_with(".log") => "log",
        _ if name.contains("profile") => "profile",
        _ => "other",
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// The last component of `path` (empty when it has none), as a bundle names a copied file.
pub fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "file".into())
}

/// A path component: characters outside `[A-Za-z0-9._-]` become `_`; never empty, `.` or `..`.
fn safe_name(text: &str) -> String {
    let name: String =
        text.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    if name.is_empty() || name.chars().all(|c| c == '.') {
        format!("_{name}")
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real harness result directory kept as a profile-parser fixture.
    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profile-parser/tests/fixtures/harness-qnn-saver-mixed")
    }

    /// Every file below `dir` with its bytes.
    fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
        files_below(dir).unwrap().into_iter().map(|(relative, path)| (relative, std::fs::read(path).unwrap())).collect()
    }

    #[test]
    fn the_same_inputs_give_byte_identical_bundles_that_verify() {
        let work = tempfile::tempdir().unwrap();
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let model = fixture().join(npugate_result::files::RESULT);
        let result = RunResult::read(&fixture()).unwrap();
        let bundle = Bundle::new().run("device one", &fixture(), &result, None).file("model", "model/m.onnx", &model);
        let (first, second) = (work.path().join("a"), work.path().join("nested/b"));
        let manifest = bundle.write(&first, &key).unwrap();
        bundle.write(&second, &key).unwrap();
        assert_eq!(contents(&first), contents(&second));
        assert!(manifest.files.iter().any(|f| f.path == "runs/device_one/result.json" && f.role == "result"));
        assert_eq!(manifest.runs[0].fingerprint.arch, RunResult::read(&fixture()).unwrap().fingerprint.arch);
        assert_eq!(verify(&first, &key.verifying_key()).unwrap(), Vec::new());
        // Writing again over a bundle replaces it; over anything else is refused.
        bundle.write(&first, &key).unwrap();
        let err = bundle.write(&fixture(), &key).unwrap_err().to_string();
        assert!(err.contains("holds no evidence bundle"), "{err}");
        // Someone else's manifest.json does not make a folder a bundle: it survives, untouched.
        let foreign = work.path().join("release");
        std::fs::create_dir_all(&foreign).unwrap();
        std::fs::write(foreign.join(MANIFEST_FILE), r#"{"files": []}"#).unwrap();
        std::fs::write(foreign.join("notes.txt"), "keep me").unwrap();
        let err = bundle.write(&foreign, &key).unwrap_err().to_string();
        assert!(err.contains("release") && err.contains("holds no evidence bundle"), "{err}");
        assert_eq!(std::fs::read_to_string(foreign.join("notes.txt")).unwrap(), "keep me");
    }

    #[test]
    fn roles_and_names() {
        assert_eq!(role_of("outputs/probs.npy"), "outputs");
        assert_eq!(role_of("output-reference/result.json"), "result");
        assert_eq!(role_of("reference_profile.json"), "profile");
        assert_eq!(role_of("ort.log"), "log");
        assert_eq!(safe_name("../x y"), ".._x_y");
        assert_eq!(safe_name(".."), "_..");
        let result = RunResult::read(&fixture()).unwrap();
        let bundle = Bundle::new().run("dev 1/ort-1.31/../m", Path::new("x"), &result, None);
        assert_eq!(bundle.runs.keys().collect::<Vec<_>>(), ["dev_1/ort-1.31/_../m"]);
    }

    #[test]
    fn one_bundle_path_from_two_sources_is_refused() {
        let work = tempfile::tempdir().unwrap();
        let bundle = Bundle::new().file("model", "model/m.onnx", Path::new("a/m.onnx")).file(
            "model",
            "model/m.onnx",
            Path::new("b/m.onnx"),
        );
        let err = bundle.write(&work.path().join("out"), &SigningKey::from_bytes(&[1; 32])).unwrap_err().to_string();
        assert!(err.contains("model/m.onnx"), "{err}");
        assert!(!work.path().join("out").exists(), "nothing written");
    }

    #[test]
    fn a_file_in_the_place_of_the_bundles_own_manifest_is_refused() {
        let work = tempfile::tempdir().unwrap();
        let bundle = Bundle::new().file("deploy_manifest", MANIFEST_FILE, Path::new("choice/manifest.json"));
        let err = bundle.write(&work.path().join("out"), &SigningKey::from_bytes(&[1; 32])).unwrap_err().to_string();
        assert!(err.contains("the bundle's own file; put it in a folder"), "{err}");
        assert!(!work.path().join("out").exists(), "nothing written");
    }
}
