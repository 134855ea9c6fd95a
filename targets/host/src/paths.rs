//! Where npugate keeps fetched runtimes, wheels, models and tools.

use std::path::PathBuf;

/// The cache root: `$NPUGATE_CACHE`, else `$HOME/.cache/npugate`.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("NPUGATE_CACHE") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir).join(".cache/npugate"),
    }
}

/// Checks a name that becomes one component of a path (a runtime, a sweep, a model of a plan):
/// letters, digits, `.`, `_` and `-`, not starting with `.` — so no `..`, no `/`, nothing hidden.
/// `what` names it in the error (e.g. `runtime name in /x/runtime.json`).
pub fn check_plain_name(name: &str, what: &str) -> anyhow::Result<()> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    anyhow::ensure!(
        plain,
        "{what} {name:?} must be letters, digits, `.`, `_` or `-`, not starting with `.` (it names a directory)"
    );
    Ok(())
}

/// Directory of fetched runtimes (`<cache>/runtimes`).
pub fn runtimes_dir() -> PathBuf {
    cache_dir().join("runtimes")
}

/// Directory of downloaded wheels (`<cache>/wheels`).
pub fn wheels_dir() -> PathBuf {
    cache_dir().join("wheels")
}
