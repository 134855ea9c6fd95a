//! One file a model refers to (external weights, a context binary), as a run records it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One file a model refers to: its name relative to the model's folder, size and sha256. Spelled
/// `NAME=SHA256:BYTES` on a command line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ModelFile {
    /// Path relative to the model's folder, as the model names it (`weights.bin`, `ctx/a.bin`).
    pub name: String,
    /// sha256 of the content, lowercase hex.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
}

impl fmt::Display for ModelFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}:{}", self.name, self.sha256, self.bytes)
    }
}

impl FromStr for ModelFile {
    type Err = String;

    fn from_str(text: &str) -> Result<ModelFile, String> {
        let bad = || format!("{text:?} is not NAME=SHA256:BYTES (a model file with its sha256 and size)");
        let (name, rest) = text.rsplit_once('=').ok_or_else(bad)?;
        let (sha256, bytes) = rest.split_once(':').ok_or_else(bad)?;
        let hex = sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if name.is_empty() || !hex {
            return Err(bad());
        }
        Ok(ModelFile { name: name.into(), sha256: sha256.into(), bytes: bytes.parse().map_err(|_| bad())? })
    }
}
