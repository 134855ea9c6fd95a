//! The pinned catalog of runtimes that `npugate runtime fetch` can build from PyPI wheels.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::ep::EpLibrary;

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
    /// Why the runtime is used only when named (`--runtime`) and never picked for a command that
    /// names none, e.g. a plugin that offers its devices on some hosts only.
    #[serde(default)]
    pub only_when_named: Option<String>,
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

/// The catalog entry named exactly `name` (in any case), or an error naming the closest and
/// listing the known names.
pub fn find(name: &str) -> Result<CatalogEntry> {
    let catalog = catalog()?;
    let names = || catalog.runtime.iter().map(|r| r.name.as_str());
    match npugate_result::names::exact(name, names()) {
        Some(known) => Ok(catalog.runtime.iter().find(|r| r.name == known).cloned().expect("a catalog name")),
        None => bail!("{} (npugate runtime list)", npugate_result::names::refusal("runtime", name, names())),
    }
}

/// True when the runtime named `name` may be picked for a command that names no runtime: every
/// runtime but the catalog's `only_when_named` ones (imported runtimes included).
pub fn pickable(name: &str) -> bool {
    catalog().map(|c| c.runtime.iter().all(|r| r.name != name || r.only_when_named.is_none())).unwrap_or(true)
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
        assert_eq!(find("ORT-1.31.1-linux-x86_64").unwrap().name, "ort-1.31.1-linux-x86_64");
        let near = find("ort-1.31.1-linux-x86").unwrap_err().to_string();
        assert!(near.contains("did you mean ort-1.31.1-linux-x86_64?"), "{near}");
        assert!(pickable("openvino-1.24.1-linux-x86_64") && pickable("an-imported-runtime"));
        assert!(
            !pickable("openvino-plugin-1.8.1-ort-1.31.1-linux-x86_64"),
            "its plugin lists no device on non-Intel hosts"
        );
    }
}
