//! The build script of the harness and of the `npugate` CLI (cli/Cargo.toml names this file): sets
//! `NPUGATE_COMMIT`, the git commit checked out — `$NPUGATE_COMMIT` when set (a build from a source
//! archive), `unknown` outside git — and `NPUGATE_TARGET`, the target triple, for
//! `npugate_result::this_build!`. Reruns when HEAD moves (a commit, a checkout), not on every edit.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=NPUGATE_COMMIT");
    let given = std::env::var("NPUGATE_COMMIT").ok().filter(|commit| !commit.trim().is_empty());
    let commit = given.map(|c| c.trim().to_string()).or_else(git_commit).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=NPUGATE_COMMIT={commit}");
    println!("cargo:rustc-env=NPUGATE_TARGET={}", std::env::var("TARGET").expect("cargo sets TARGET"));
}

/// The output of `git args` in the package's directory, trimmed; `None` when git fails.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let output = Command::new("git").args(args).current_dir(&dir).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// HEAD's commit; asks cargo to rerun this script when HEAD, the branch it names or the packed refs change.
fn git_commit() -> Option<String> {
    let commit = git(&["rev-parse", "--verify", "HEAD"])?;
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    for name in watched {
        let Some(path) = git(&["rev-parse", "--git-path", &name]) else { continue };
        let path = if Path::new(&path).is_absolute() { PathBuf::from(path) } else { dir.join(path) };
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    Some(commit)
}
