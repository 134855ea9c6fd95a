//! The runtime manifest (`runtime.json`): a named, flat set of native libraries with their hashes.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use npugate_result::contract;
use npugate_result::digest::sha256_file;
use npugate_result::names;
use serde::{Deserialize, Serialize};

pub use super::ep::EpLibrary;

/// Schema identifier of `runtime.json`.
pub const RUNTIME_SCHEMA: &str = "npugate.runtime/1";
/// File name of the manifest inside a runtime directory.
pub const MANIFEST_FILE: &str = "runtime.json";

/// A named set of native libraries that runs models: ONNX Runtime, optionally an EP, QNN libraries.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RuntimeManifest {
    /// Always [`RUNTIME_SCHEMA`].
    pub schema: String,
    /// Runtime name, e.g. `qnn-2.7.0-ort-1.31.1-linux-aarch64`.
    pub name: String,
    /// Target triple the libraries are built for.
    pub target: String,
    /// ONNX Runtime version.
    pub ort_version: String,
    /// File name of the ONNX Runtime library.
    pub ort_library: String,
    /// The accelerator EP, when the runtime has one.
    pub ep: Option<EpLibrary>,
    /// Where the libraries came from (`pypi:onnxruntime==1.31.1`, `aar:<file>`, `qairt:<dir>`).
    pub sources: Vec<String>,
    /// Every file of the runtime.
    pub files: Vec<RuntimeFile>,
    /// The QNN build of its HTP backend library (`v2.49.40.260810104044`), read from the library
    /// when the runtime was written; absent without an HTP backend (and in manifests written before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qnn_build: Option<String>,
    /// Directory holding the files (not serialized; set on load).
    #[serde(skip)]
    pub dir: PathBuf,
}

impl contract::Document for RuntimeManifest {
    const SCHEMA: contract::Schema = contract::Schema::new(RUNTIME_SCHEMA);
}

/// One library of a runtime.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RuntimeFile {
    /// File name inside the runtime directory.
    pub name: String,
    /// sha256, lowercase hex.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
    /// `ort`, `ep_plugin`, `ep_provider`, `ep_other`, `qnn_backend`, `qnn_stub`, `qnn_skel` or `qnn_other`.
    pub role: String,
    /// Hexagon architecture of a Stub/Skel (`v75`), else `None`.
    pub hexagon_arch: Option<String>,
}

impl RuntimeManifest {
    /// Loads a runtime by directory path or by name from the cache.
    pub fn load(name_or_dir: &str) -> Result<RuntimeManifest> {
        let as_path = Path::new(name_or_dir);
        let dir = if as_path.join(MANIFEST_FILE).is_file() {
            as_path.to_path_buf()
        } else {
            crate::paths::runtimes_dir().join(fetched_name(name_or_dir)?)
        };
        let file = dir.join(MANIFEST_FILE);
        let mut manifest: RuntimeManifest = contract::read(&file)?;
        crate::paths::check_plain_name(&manifest.name, &format!("the runtime name in {}", file.display()))?;
        manifest.dir = dir;
        Ok(manifest)
    }

    /// Describes the files already in `dir` and writes `runtime.json` there.
    pub fn write_for_dir(
        dir: &Path,
        name: &str,
        target: &str,
        ort_version: &str,
        ort_library: &str,
        ep: Option<EpLibrary>,
        sources: Vec<String>,
    ) -> Result<RuntimeManifest> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.path().is_file())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|file| file != MANIFEST_FILE)
            .collect();
        names.sort();
        if !names.iter().any(|n| n == ort_library) {
            bail!("runtime {name}: {ort_library} is not among the unpacked files in {}", dir.display());
        }
        let files = names
            .into_iter()
            .map(|file| {
                let (sha256, bytes) = sha256_file(&dir.join(&file)).with_context(|| format!("cannot hash {file}"))?;
                let (role, hexagon_arch) = role_of(&file);
                Ok(RuntimeFile { name: file, sha256, bytes, role: role.into(), hexagon_arch })
            })
            .collect::<Result<Vec<_>>>()?;
        let qnn_build = htp_backend(&files).and_then(|backend| qnn_build_in(&dir.join(&backend.name)));
        let manifest = RuntimeManifest {
            schema: RUNTIME_SCHEMA.into(),
            name: name.into(),
            target: target.into(),
            ort_version: ort_version.into(),
            ort_library: ort_library.into(),
            ep,
            sources,
            files,
            qnn_build,
            dir: dir.to_path_buf(),
        };
        contract::write_json(&dir.join(MANIFEST_FILE), &manifest)
            .with_context(|| format!("cannot write {}", dir.join(MANIFEST_FILE).display()))?;
        Ok(manifest)
    }

    /// Path of the ONNX Runtime library.
    pub fn ort_library_path(&self) -> PathBuf {
        self.dir.join(&self.ort_library)
    }

    /// Path of the EP plugin library, when the runtime's EP is a plugin.
    pub fn ep_library_path(&self) -> Option<PathBuf> {
        self.ep.as_ref().and_then(|ep| ep.library.as_ref()).map(|lib| self.dir.join(lib))
    }

    /// An x86_64 CPU runtime in `dir` whose files need not exist, for tests of the layers above.
    pub fn for_tests(dir: &Path) -> RuntimeManifest {
        RuntimeManifest {
            schema: RUNTIME_SCHEMA.into(),
            name: "ort-test".into(),
            target: "x86_64-unknown-linux-gnu".into(),
            ort_version: "1.31.1".into(),
            ort_library: "libonnxruntime.so".into(),
            ep: None,
            sources: Vec::new(),
            files: Vec::new(),
            qnn_build: None,
            dir: dir.to_path_buf(),
        }
    }

    /// The QNN build of the runtime's HTP backend library (e.g. `v2.51.0.260929181845`): as the
    /// manifest recorded it from the library, else read from the library now; `None` when the
    /// runtime has no HTP backend or the library names none.
    pub fn qnn_build(&self) -> Option<String> {
        self.qnn_build.clone().or_else(|| qnn_build_in(&self.dir.join(&htp_backend(&self.files)?.name)))
    }

    /// Re-hashes every file; returns the names of files that are missing or changed.
    pub fn verify(&self) -> Vec<String> {
        self.files
            .iter()
            .filter(|f| !matches!(sha256_file(&self.dir.join(&f.name)), Ok((sha, _)) if sha == f.sha256))
            .map(|f| f.name.clone())
            .collect()
    }
}

/// The HTP backend library among a runtime's files (`libQnnHtp.so`, `QnnHtp.dll`).
fn htp_backend(files: &[RuntimeFile]) -> Option<&RuntimeFile> {
    files.iter().find(|f| f.role == "qnn_backend" && f.name.contains("QnnHtp"))
}

/// The first QNN build string (`v<major>.<minor>.<patch>.<build>`, the build at least 8 digits)
/// in the file at `path`, read in chunks.
pub fn qnn_build_in(path: &Path) -> Option<String> {
    use std::io::Read;
    const CHUNK: usize = 1 << 20;
    const LONGEST: usize = 64;
    let mut file = std::fs::File::open(path).ok()?;
    let mut buffer = Vec::with_capacity(CHUNK + LONGEST);
    loop {
        let kept = buffer.len();
        buffer.resize(kept + CHUNK, 0);
        let read = file.read(&mut buffer[kept..]).ok()?;
        buffer.truncate(kept + read);
        if let Some(found) = find_qnn_build(&buffer) {
            return Some(found);
        }
        if read == 0 {
            return None;
        }
        // Keep the tail: a build string may straddle two chunks.
        let tail = buffer.len().saturating_sub(LONGEST);
        buffer.drain(..tail);
    }
}

/// `v2.51.0.260929181845` inside `bytes`, if there is one.
fn find_qnn_build(bytes: &[u8]) -> Option<String> {
    memchr::memchr_iter(b'v', bytes).find_map(|at| {
        let rest = &bytes[at + 1..];
        let end = rest.iter().position(|b| !(b.is_ascii_digit() || *b == b'.')).unwrap_or(rest.len());
        let text = std::str::from_utf8(&rest[..end]).ok()?;
        let parts: Vec<&str> = text.split('.').collect();
        let numeric = parts.iter().all(|p| !p.is_empty());
        (numeric && parts.len() == 4 && parts[3].len() >= 8 && end < rest.len()).then(|| format!("v{text}"))
    })
}

/// The QNN SDK version (`2.51.0`) of a build string (`v2.51.0.260929181845`).
pub fn qnn_sdk_version(build: &str) -> &str {
    let text = build.trim_start_matches('v');
    text.rsplit_once('.').map_or(text, |(version, _)| version)
}

/// The role of a runtime file from its name, and the Hexagon architecture of a Stub/Skel.
pub fn role_of(file: &str) -> (&'static str, Option<String>) {
    let hexagon = |suffix: &str| {
        file.strip_prefix("libQnnHtpV")
            .and_then(|rest| rest.strip_suffix(suffix))
            .filter(|digits| !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()))
            .map(|digits| format!("v{digits}"))
    };
    if let Some(arch) = hexagon("Stub.so") {
        return ("qnn_stub", Some(arch));
    }
    if let Some(arch) = hexagon("Skel.so") {
        return ("qnn_skel", Some(arch));
    }
    // Linux/Android names first, then the Windows DLLs of the same libraries.
    let role = match file {
        f if f.starts_with("libonnxruntime_providers_qnn") || f == "onnxruntime_providers_qnn.dll" => "ep_plugin",
        f if f.starts_with("libonnxruntime_providers_") && f.contains("_plugin.so") => "ep_plugin",
        f if f.starts_with("libonnxruntime.so") || f == "libonnxruntime_providers_shared.so" => "ort",
        "onnxruntime.dll" | "onnxruntime_providers_shared.dll" => "ort",
        f if f.starts_with("libonnxruntime_providers_") => "ep_provider",
        "libQnnHtp.so" | "libQnnCpu.so" | "libQnnGpu.so" | "libQnnSaver.so" | "libQnnDsp.so" => "qnn_backend",
        "QnnHtp.dll" | "QnnCpu.dll" | "QnnGpu.dll" | "QnnSaver.dll" => "qnn_backend",
        f if f.starts_with("Qnn") && f.ends_with(".dll") => "qnn_other",
        f if f.starts_with("libQnn") => "qnn_other",
        _ => "ep_other",
    };
    (role, None)
}

/// The fetched runtime named exactly `name` (in any case): its directory's name, or an error naming
/// the closest fetched or catalog runtime, the fetched ones, and the fetch command.
fn fetched_name(name: &str) -> Result<String> {
    let fetched: Vec<String> = std::fs::read_dir(crate::paths::runtimes_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.path().join(MANIFEST_FILE).is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    if let Some(dir) = names::exact(name, fetched.iter().map(String::as_str)) {
        return Ok(dir.to_string());
    }
    let catalog: Vec<String> =
        crate::runtime::catalog::catalog().map(|c| c.runtime.into_iter().map(|r| r.name).collect()).unwrap_or_default();
    let mut listed = fetched.clone();
    listed.sort();
    let fix = match names::exact(name, catalog.iter().map(String::as_str)) {
        Some(known) => format!("run `npugate runtime fetch {known}`"),
        None => match names::closest(name, fetched.iter().chain(&catalog).map(String::as_str)) {
            Some(near) => format!("did you mean {near}? (`npugate runtime list` shows every runtime)"),
            None => "`npugate runtime list` shows the runtimes that can be fetched".into(),
        },
    };
    let fetched = if listed.is_empty() { "none".into() } else { listed.join(", ") };
    bail!("runtime {name:?} is not fetched; {fix}; fetched: {fetched}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_qnn_build_is_found_even_across_chunks() {
        assert_eq!(find_qnn_build(b"xx v1.2 v2.51.0.260929181845\0yy").as_deref(), Some("v2.51.0.260929181845"));
        assert_eq!(find_qnn_build(b"v2.51.0.2609\0 v3.1.2\0"), None);
        assert_eq!(qnn_sdk_version("v2.51.0.260929181845"), "2.51.0");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("libQnnHtp.so");
        let mut bytes = vec![0u8; (1 << 20) - 10];
        bytes.extend_from_slice(b"v2.51.0.260929181845\0tail");
        std::fs::write(&file, bytes).unwrap();
        assert_eq!(qnn_build_in(&file).as_deref(), Some("v2.51.0.260929181845"));
    }

    #[test]
    fn a_runtime_whose_name_would_leave_its_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("libonnxruntime.so"), "lib").unwrap();
        let written = RuntimeManifest::write_for_dir(
            dir.path(),
            "ok-name",
            "x86_64-unknown-linux-gnu",
            "1.31.1",
            "libonnxruntime.so",
            None,
            vec![],
        );
        assert!(written.is_ok());
        let file = dir.path().join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&file).unwrap().replace("\"ok-name\"", "\"../x\"");
        std::fs::write(&file, text).unwrap();
        let error = RuntimeManifest::load(&dir.path().display().to_string()).unwrap_err().to_string();
        assert!(
            error.contains("runtime.json") && error.contains("\"../x\"") && error.contains("names a directory"),
            "{error}"
        );
    }

    #[test]
    fn roles_follow_qnn_library_names() {
        assert_eq!(role_of("libQnnHtpV75Skel.so"), ("qnn_skel", Some("v75".into())));
        assert_eq!(role_of("libQnnHtpV81Stub.so"), ("qnn_stub", Some("v81".into())));
        assert_eq!(role_of("libQnnHtp.so"), ("qnn_backend", None));
        assert_eq!(role_of("libQnnHtpPrepare.so"), ("qnn_other", None));
        assert_eq!(role_of("libonnxruntime.so.1.31.1"), ("ort", None));
        assert_eq!(role_of("libonnxruntime_providers_qnn.so"), ("ep_plugin", None));
        assert_eq!(role_of("libonnxruntime_providers_openvino.so"), ("ep_provider", None));
        assert_eq!(role_of("libonnxruntime_providers_openvino_plugin.so"), ("ep_plugin", None));
        assert_eq!(role_of("libonnxruntime_providers_shared.so"), ("ort", None));
        assert_eq!(role_of("libopenvino_intel_cpu_plugin.so"), ("ep_other", None));
        assert_eq!(role_of("libGenie.so"), ("ep_other", None));
    }
}
