//! npugate as a user installs it: the wheel `scripts/package` packs from the binaries already built
//! (it builds nothing), pip-installed into a fresh venv outside the repository without a package
//! index (nothing is downloaded).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{describe, run, target_profile_dir};

/// The repository (for its scripts).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("the checkout")
}

/// The wheel `scripts/package` writes into `out` from this target directory's binaries, and the
/// names of its members.
pub fn package(out: &Path) -> (PathBuf, Vec<String>) {
    let target_dir = target_profile_dir().parent().expect("target/<profile> has a parent").to_path_buf();
    let packed =
        run(Command::new(repo().join("scripts/package")).arg("--out").arg(out).env("CARGO_TARGET_DIR", &target_dir));
    assert!(packed.status.success(), "scripts/package: {}", describe(&packed));
    let wheel = PathBuf::from(String::from_utf8_lossy(&packed.stdout).trim());
    let script = "import sys, zipfile\nprint('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))";
    let listed = run(Command::new("python3").args(["-c", script]).arg(&wheel));
    assert!(listed.status.success(), "list {}: {}", wheel.display(), describe(&listed));
    (wheel, String::from_utf8_lossy(&listed.stdout).lines().map(String::from).collect())
}

/// A fresh venv (`python3 -m venv`) at `dir` with `requirement` (a wheel file, or `npugate==V`
/// with `PIP_FIND_LINKS` set) pip-installed without an index; returns the installed `npugate`.
pub fn venv_with(dir: &Path, requirement: &str, pip_env: &[(&str, &str)]) -> PathBuf {
    let created = run(Command::new("python3").args(["-m", "venv"]).arg(dir));
    assert!(created.status.success(), "python3 -m venv {}: {}", dir.display(), describe(&created));
    let installed = run(Command::new(dir.join("bin/python"))
        .args(["-m", "pip", "install", "--quiet", "--no-index", "--disable-pip-version-check", requirement])
        .envs(pip_env.iter().copied()));
    assert!(installed.status.success(), "pip install {requirement}: {}", describe(&installed));
    let npugate = dir.join("bin/npugate");
    assert!(npugate.is_file(), "pip installed no {}", npugate.display());
    npugate
}
