//! Where the harness binary for each target is: next to this `npugate` for the host's own
//! target, else in the cargo layout `<target dir>/<triple>/release/` (what `cargo build --target`
//! and the project's build scripts produce).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The harness's file name.
pub const HARNESS: &str = "npugate-harness";

/// The harness built for this machine, next to the running `npugate`.
pub fn host() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot locate the npugate executable")?;
    let path = exe.with_file_name(HARNESS);
    if !path.is_file() {
        bail!("{HARNESS} not found next to {}; build it (cargo build --release) or pass --harness", exe.display());
    }
    Ok(path)
}

/// The harness built for `triple`.
pub fn for_target(triple: &str) -> Result<PathBuf> {
    if triple == crate::targets::host_triple() {
        return host();
    }
    let exe = std::env::current_exe().context("cannot locate the npugate executable")?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let file = if triple.contains("windows") { format!("{HARNESS}.exe") } else { HARNESS.to_string() };
    dir.parent()
        .map(|target_dir| target_dir.join(triple).join("release").join(file))
        .filter(|path| path.is_file())
        .ok_or_else(|| anyhow::anyhow!("no {HARNESS} built for {triple} (build it, or pass --harness PATH)"))
}
