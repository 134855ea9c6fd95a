//! Runtimes: named sets of native libraries (ONNX Runtime core, EP plugin, QNN libraries) with a
//! manifest of their hashes. Sources: pinned PyPI wheels (the catalog); more sources add modules here.

pub mod catalog;
pub mod manifest;
pub mod pypi;

use anyhow::{Context, Result};

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
    let runtimes = crate::paths::runtimes_dir();
    std::fs::create_dir_all(&runtimes).with_context(|| format!("cannot create {}", runtimes.display()))?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{}-", entry.name))
        .tempdir_in(&runtimes)
        .with_context(|| format!("cannot create a staging directory in {}", runtimes.display()))?;
    let mut sources = Vec::new();
    for pin in &entry.wheel {
        let wheel = pypi::ensure_wheel(pin, &crate::paths::wheels_dir())?;
        pypi::extract(&wheel, &pin.members, staging.path())?;
        sources.push(format!("pypi:{}=={} ({})", pin.package, pin.version, pin.file));
    }
    RuntimeManifest::write_for_dir(
        staging.path(),
        &entry.name,
        &entry.target,
        &entry.ort_version,
        &entry.ort_library,
        entry.ep.clone(),
        sources,
    )?;
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot replace {}", dir.display()))?;
    }
    let staged = staging.keep();
    std::fs::rename(&staged, &dir).with_context(|| format!("cannot move the runtime into {}", dir.display()))?;
    Ok(FetchOutcome::Fetched(RuntimeManifest::load(&dir.display().to_string())?))
}
