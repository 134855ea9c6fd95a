//! Where npugate keeps fetched runtimes, wheels, models and tools.

use std::path::PathBuf;

/// The cache root: `$NPUGATE_CACHE`, else `$HOME/.cache/npugate`.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("NPUGATE_CACHE") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir).join(".cache/npugate"),
    }
}

/// Directory of fetched runtimes (`<cache>/runtimes`).
pub fn runtimes_dir() -> PathBuf {
    cache_dir().join("runtimes")
}

/// Directory of downloaded wheels (`<cache>/wheels`).
pub fn wheels_dir() -> PathBuf {
    cache_dir().join("wheels")
}
