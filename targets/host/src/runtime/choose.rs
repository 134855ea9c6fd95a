//! Choosing a runtime when the user names none: the newest fetched runtime built for the target
//! that has the requested EP (by ONNX Runtime version), or, when none is fetched, the fetch
//! command of the catalog's runtimes for that target.

use anyhow::{bail, Result};

use super::catalog;
use super::manifest::RuntimeManifest;

/// Every runtime fetched into (or imported to) the cache, in name order.
pub fn fetched() -> Vec<RuntimeManifest> {
    let mut runtimes: Vec<RuntimeManifest> = std::fs::read_dir(crate::paths::runtimes_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|entry| RuntimeManifest::load(&entry.path().display().to_string()).ok())
        .collect();
    runtimes.sort_by(|a, b| a.name.cmp(&b.name));
    runtimes
}

/// The runtime to use for `target` and the EP `ep` (its ONNX Runtime name; `None` or the CPU EP:
/// any runtime) among `fetched`: the newest ONNX Runtime that has that EP, a runtime without an
/// accelerator first among equals for the CPU EP. None fetched: an error with the catalog's fetch
/// commands for `target`.
pub fn newest_for(target: &str, ep: Option<&str>, fetched: &[RuntimeManifest]) -> Result<RuntimeManifest> {
    let accelerator = ep.filter(|name| *name != "CPUExecutionProvider");
    let best = fetched
        .iter()
        .filter(|runtime| runtime.target == target && super::catalog::pickable(&runtime.name))
        .filter(|runtime| accelerator.is_none_or(|name| runtime.ep.as_ref().is_some_and(|e| e.name == name)))
        .max_by(|a, b| {
            version(&a.ort_version)
                .cmp(&version(&b.ort_version))
                .then(b.ep.is_some().cmp(&a.ep.is_some()))
                .then(b.name.cmp(&a.name))
        });
    if let Some(runtime) = best {
        return Ok(runtime.clone());
    }
    let known: Vec<String> = catalog::catalog()?
        .runtime
        .into_iter()
        .filter(|entry| entry.target == target)
        .map(|entry| format!("npugate runtime fetch {}", entry.name))
        .collect();
    let with = accelerator.map(|name| format!(" with {name}")).unwrap_or_default();
    if known.is_empty() {
        bail!("no runtime{with} is fetched for {target} and the catalog has none; import one (npugate runtime import-aar / import-qairt) and pass --runtime NAME");
    }
    bail!("no runtime{with} is fetched for {target}; fetch one ({}) or pass --runtime NAME", known.join(", or "))
}

/// `1.31.1` → [1, 31, 1] (non-numeric parts count as 0) for ordering.
fn version(text: &str) -> Vec<u64> {
    text.split(['.', '-', '+']).map(|part| part.parse().unwrap_or(0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::ep::EpLibrary;

    fn runtime(name: &str, target: &str, ort: &str, ep: bool) -> RuntimeManifest {
        let mut runtime = RuntimeManifest::for_tests(std::path::Path::new("/nowhere"));
        runtime.name = name.into();
        runtime.target = target.into();
        runtime.ort_version = ort.into();
        runtime.ep = ep.then(|| EpLibrary {
            name: "QNNExecutionProvider".into(),
            attach: "plugin".into(),
            library: Some("q.so".into()),
        });
        runtime
    }

    #[test]
    fn the_newest_runtime_for_the_target_and_the_ep_wins() {
        let android = "aarch64-linux-android";
        let fetched = [
            runtime("ort-1.24.4-android", android, "1.24.4", false),
            runtime("ort-1.31.1-android", android, "1.31.1", false),
            runtime("qnn-2.7.0-ort-1.31.1-android", android, "1.31.1", true),
            runtime("ort-1.32.0-linux-x86_64", "x86_64-unknown-linux-gnu", "1.32.0", false),
        ];
        let qnn = Some("QNNExecutionProvider");
        assert_eq!(newest_for(android, qnn, &fetched).unwrap().name, "qnn-2.7.0-ort-1.31.1-android");
        assert_eq!(newest_for(android, Some("CPUExecutionProvider"), &fetched).unwrap().name, "ort-1.31.1-android");
        assert_eq!(newest_for("x86_64-unknown-linux-gnu", None, &fetched).unwrap().name, "ort-1.32.0-linux-x86_64");
        let error = newest_for("x86_64-unknown-linux-gnu", qnn, &fetched).unwrap_err().to_string();
        assert!(error.contains("no runtime with QNNExecutionProvider is fetched"), "{error}");
        let error = newest_for("aarch64-unknown-linux-gnu", None, &fetched).unwrap_err().to_string();
        assert!(error.contains("npugate runtime fetch ort-1.31.1-linux-aarch64"), "{error}");
        assert!(version("1.10.0") > version("1.9.2"));
    }
}
