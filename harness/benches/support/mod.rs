//! What the harness's benchmarks share: where the cache is, numbers from the environment, medians.

use std::path::PathBuf;

/// `$NPUGATE_CACHE`, else `~/.cache/npugate` (as `scripts/setup` leaves it).
pub fn cache() -> PathBuf {
    std::env::var_os("NPUGATE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/npugate"))
}

/// A number from the environment variable `name`, else `default`.
pub fn env_number(name: &str, default: u32) -> u32 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The median of a loop's (or round's) values; every loop measures at least one run.
pub fn median(values: &[f64]) -> f64 {
    npugate_result::stats::median(values).expect("at least one value")
}
