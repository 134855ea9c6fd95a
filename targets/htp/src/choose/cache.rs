//! Judged cells of `npugate choose`, kept under `<cache>/choose/<key>/<SOC>.json`: a variant that
//! did not change is not run again. The key is everything a cell depends on: the variant's bytes,
//! the QNN build, the inputs' bytes, the session flags, fp16 and npugate's version.

use std::path::PathBuf;

use npugate_host::hash_cache::HashCache;
use npugate_settings::SessionSettings;
use sha2::{Digest, Sha256};

use super::report::{Sample, SampleCell, Variant};

/// The key of one variant × sample (each SoC is a file under it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key(String);

impl Key {
    /// The key of `variant` on `sample` with these flags, judged by the QNN build `qnn_build`;
    /// the sample's input files hashed with the command's `hashes`.
    pub fn new(
        variant: &Variant,
        qnn_build: &str,
        sample: &Sample,
        (session, fp16): (&SessionSettings, bool),
        hashes: &HashCache,
    ) -> Key {
        let mut key = Sha256::new();
        key.update(format!("{}\n{}\n{qnn_build}\n{fp16}\n", env!("CARGO_PKG_VERSION"), variant.sha256));
        key.update(serde_json::to_string(session).unwrap_or_default());
        for input in &sample.inputs {
            // An input file is part of the key by content.
            let content = hashes.sha256(&input.path).map(|(sha, _)| sha).unwrap_or_default();
            key.update(format!("\n{}={content}", input.input));
        }
        Key(format!("{:x}", key.finalize()))
    }

    fn file(&self, soc: &str) -> PathBuf {
        npugate_host::paths::cache_dir().join("choose").join(&self.0).join(format!("{soc}.json"))
    }
}

/// The cell kept for `soc` under `key`, marked as cached.
pub fn read(key: &Key, soc: &str) -> Option<SampleCell> {
    let text = std::fs::read_to_string(key.file(soc)).ok()?;
    let cell: SampleCell = serde_json::from_str(&text).ok()?;
    Some(SampleCell { cached: true, ..cell })
}

/// Keeps `cell` under `key`; a cache that cannot be written only costs the next run its time.
pub fn write(key: &Key, cell: &SampleCell) {
    let file = key.file(&cell.soc);
    let written = file
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| npugate_result::contract::write_json(&file, cell));
    if written.is_err() {
        eprintln!("npugate: warning: cannot keep a judged cell in {}", file.display());
    }
}
