//! Where the harness binary for each target is, and whether it belongs to this npugate.
//!
//! One lookup ([`for_target`]) over three layouts, relative to the running `npugate`; the first
//! place that holds the harness wins:
//! 1. cargo's, for this machine's target: `npugate-harness` next to `npugate` (`target/release/`);
//! 2. cargo's, for another target: `<target dir>/<triple>/release/` (`cargo build --target`, the
//!    `scripts/build-*` scripts);
//! 3. installed — the wheel (`pip install npugate`), or any `<prefix>/bin` + `<prefix>/lib` install:
//!    `<prefix>/lib/npugate/<triple>/` beside `<prefix>/bin/npugate`.
//!
//! Every harness carries its build as a stamp in its bytes ([`Build`]); [`check`] refuses a harness
//! of another version than this npugate before it runs anywhere. A device runs this same file:
//! deploy is content-addressed (`npugate_android::deploy`), so checking it here checks the
//! deployed copy.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use npugate_result::build::Build;

use crate::targets::{host_triple, qemu, wine};

/// The harness's file name (`.exe` added for Windows).
pub const HARNESS: &str = "npugate-harness";
/// Where an install keeps its harnesses, relative to its prefix (`<prefix>/bin/npugate`).
pub const INSTALLED_DIR: &str = "lib/npugate";
/// The version every harness must have: npugate's own (one workspace version).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The triple of Android devices' harness.
pub const ANDROID_TRIPLE: &str = "aarch64-linux-android";

/// A target npugate runs a harness for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessTarget {
    /// Its triple.
    pub triple: String,
    /// What runs it, in a few words.
    pub runs: &'static str,
    /// How a source checkout builds its harness.
    pub build: &'static str,
}

/// The targets a harness is built for: this machine, aarch64 Linux, Windows x64, Android.
pub fn targets() -> Vec<HarnessTarget> {
    vec![
        HarnessTarget {
            triple: host_triple(),
            runs: "this machine (run --local)",
            build: "cargo build --release -p npugate-harness",
        },
        HarnessTarget {
            triple: wine::TRIPLE.into(),
            runs: "Qualcomm's host HTP under wine (preflight, compile, --local --ep qnn)",
            build: "scripts/build-windows",
        },
        HarnessTarget {
            triple: qemu::TRIPLE.into(),
            runs: "aarch64 Linux boards, and qemu-aarch64 (preflight --backend saver)",
            build: "scripts/build-aarch64",
        },
        HarnessTarget {
            triple: ANDROID_TRIPLE.into(),
            runs: "Android devices over adb",
            build: "scripts/build-android, with an Android NDK",
        },
    ]
}

/// The harness's file name for `triple`.
pub fn file_name(triple: &str) -> String {
    match triple.contains("windows") {
        true => format!("{HARNESS}.exe"),
        false => HARNESS.to_string(),
    }
}

/// Where the harness for `triple` is looked for, in order, for an npugate at `exe`.
pub fn places(exe: &Path, triple: &str) -> Vec<PathBuf> {
    let dir = exe.parent().unwrap_or(Path::new("."));
    let file = file_name(triple);
    let mut places = Vec::new();
    if triple == host_triple() {
        places.push(dir.join(&file));
    }
    if let Some(parent) = dir.parent() {
        places.push(parent.join(triple).join("release").join(&file));
        places.push(parent.join(INSTALLED_DIR).join(triple).join(&file));
    }
    places
}

/// The running `npugate`.
fn this_executable() -> Result<PathBuf> {
    std::env::current_exe().context("cannot locate the npugate executable")
}

/// The harness for `triple`: the first of [`places`] that holds it (not yet [`check`]ed).
pub fn for_target(triple: &str) -> Result<PathBuf> {
    let places = places(&this_executable()?, triple);
    if let Some(found) = places.iter().find(|path| path.is_file()) {
        return Ok(found.clone());
    }
    let build =
        targets().into_iter().find(|t| t.triple == triple).map_or("cargo build --release --target", |t| t.build);
    let looked: Vec<String> = places.iter().map(|p| p.display().to_string()).collect();
    anyhow::bail!(
        "no {HARNESS} for {triple} (looked in {}); build it ({build}), reinstall npugate (pip install --force-reinstall npugate=={VERSION}), or pass --harness PATH",
        looked.join(", ")
    )
}

/// The build of the harness at `path` when it is one of this npugate's version; else an error
/// naming both versions and the fix.
pub fn check(path: &Path) -> Result<Build> {
    let build = Build::of_file(path).with_context(|| format!("cannot read the harness {}", path.display()))?;
    let fix = format!(
        "a harness must come from the same npugate: reinstall npugate (pip install --force-reinstall npugate=={VERSION}), rebuild the harness (scripts/setup), or pass --harness of version {VERSION}"
    );
    match build {
        Some(build) if build.version == VERSION => Ok(build),
        Some(build) => {
            anyhow::bail!("harness {} is npugate-harness {build}, this npugate is {VERSION}; {fix}", path.display())
        }
        None => anyhow::bail!(
            "{} is not an npugate-harness of version {VERSION} (it carries no npugate build stamp); {fix}",
            path.display()
        ),
    }
}

/// Writes at `path` a file that passes [`check`] as a harness of this version for `triple` (test
/// fixtures: a harness the mock target never runs).
pub fn write_stand_in(path: &Path, triple: &str) -> std::io::Result<()> {
    let build = Build { version: VERSION.into(), commit: "stand-in".into(), target: triple.into() };
    std::fs::write(path, format!("a stand-in harness, never run\n{}", build.stamp()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cargo_layouts_come_before_the_installed_one() {
        let host = host_triple();
        assert_eq!(
            places(Path::new("/w/target/release/npugate"), &host),
            [
                PathBuf::from("/w/target/release/npugate-harness"),
                PathBuf::from(format!("/w/target/{host}/release/npugate-harness")),
                PathBuf::from(format!("/w/target/lib/npugate/{host}/npugate-harness")),
            ]
        );
        assert_eq!(
            places(Path::new("/venv/bin/npugate"), wine::TRIPLE),
            [
                PathBuf::from("/venv/x86_64-pc-windows-gnu/release/npugate-harness.exe"),
                PathBuf::from("/venv/lib/npugate/x86_64-pc-windows-gnu/npugate-harness.exe"),
            ]
        );
    }

    #[test]
    fn a_harness_of_another_version_or_without_a_stamp_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let stamped = |version: &str| {
            let build = Build { version: version.into(), commit: "abc".into(), target: host_triple() };
            let path = dir.path().join(format!("harness-{version}"));
            std::fs::write(&path, format!("\x7fELF…{}…", build.stamp())).unwrap();
            path
        };
        assert_eq!(check(&stamped(VERSION)).unwrap().commit, "abc");
        let other = format!("{}{VERSION}", "9.");
        let refused = format!("{:#}", check(&stamped(&other)).unwrap_err());
        assert!(
            refused.contains(&format!("is npugate-harness {other} (commit abc"))
                && refused.contains(&format!("this npugate is {VERSION}"))
                && refused.contains("pip install --force-reinstall"),
            "{refused}"
        );
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        assert!(format!("{:#}", check(&plain).unwrap_err()).contains("carries no npugate build stamp"));
        assert!(format!("{:#}", check(&dir.path().join("absent")).unwrap_err()).contains("cannot read the harness"));
    }
}
