//! The pinned catalog of runtimes that `npugate runtime fetch` can build from PyPI wheels.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::manifest::EpLibrary;

/// The catalog, embedded at build time.
const CATALOG_TOML: &str = include_str!("catalog.toml");

/// All pinned runtimes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// The runtimes, in catalog order.
    pub runtime: Vec<CatalogEntry>,
}

/// One pinned runtime: what it is and which wheel members make it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogEntry {
    /// Runtime name.
    pub name: String,
    /// One line for `npugate runtime list`.
    pub description: String,
    /// Target triple.
    pub target: String,
    /// ONNX Runtime version.
    pub ort_version: String,
    /// File name of the ONNX Runtime library.
    pub ort_library: String,
    /// The accelerator EP, when any.
    #[serde(default)]
    pub ep: Option<EpLibrary>,
    /// The QNN SDK version of the runtime's HTP backend (`2.49.40`), for QNN runtimes: what `--qnn`
    /// chooses by before the runtime is fetched; the fetch checks it against the library itself.
    #[serde(default)]
    pub qnn_sdk: Option<String>,
    /// Why this ONNX Runtime core was paired with the EP plugin (which cores it loads into, tried).
    #[serde(default)]
    pub ort_pairing: Option<String>,
    /// Wheels to unpack, in order.
    pub wheel: Vec<WheelPin>,
}

/// A wheel pinned by version, platform and content hash.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WheelPin {
    /// PyPI package name.
    pub package: String,
    /// Exact version.
    pub version: String,
    /// Wheel platform tag.
    pub platform: String,
    /// Expected wheel file name.
    pub file: String,
    /// Expected sha256 of the wheel.
    pub sha256: String,
    /// Members to unpack: exact paths or `dir/*.so` patterns (one `*` within the last segment).
    pub members: Vec<String>,
}

/// Parses the embedded catalog.
pub fn catalog() -> Result<Catalog> {
    toml::from_str(CATALOG_TOML).context("the embedded runtime catalog is invalid")
}

/// The catalog entry named `name`, or an error listing the known names.
pub fn find(name: &str) -> Result<CatalogEntry> {
    let catalog = catalog()?;
    let names: Vec<&str> = catalog.runtime.iter().map(|r| r.name.as_str()).collect();
    match catalog.runtime.iter().find(|r| r.name == name) {
        Some(entry) => Ok(entry.clone()),
        None => bail!("unknown runtime {name:?}; known runtimes: {}", names.join(", ")),
    }
}

/// The first pinned runtime for `target` whose accelerator EP is `ep_name` (`OpenVINOExecutionProvider`
/// → `openvino-1.24.1-linux-x86_64` on x86_64 Linux).
pub fn with_ep(target: &str, ep_name: &str) -> Result<Option<String>> {
    Ok(catalog()?
        .runtime
        .into_iter()
        .find(|r| r.target == target && r.ep.as_ref().is_some_and(|ep| ep.name == ep_name))
        .map(|r| r.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_catalog_parses_and_pins_every_wheel() {
        let catalog = catalog().unwrap();
        assert!(catalog.runtime.len() >= 3);
        for entry in &catalog.runtime {
            for wheel in &entry.wheel {
                assert_eq!(wheel.sha256.len(), 64, "{} {}", entry.name, wheel.package);
                assert!(wheel.file.ends_with(".whl"));
            }
        }
        assert!(find("nope").unwrap_err().to_string().contains("ort-1.31.1-linux-x86_64"));
        let openvino = with_ep("x86_64-unknown-linux-gnu", "OpenVINOExecutionProvider").unwrap();
        assert_eq!(openvino.as_deref(), Some("openvino-1.24.1-linux-x86_64"));
        assert_eq!(with_ep("x86_64-unknown-linux-gnu", "CUDAExecutionProvider").unwrap(), None);
    }
}
