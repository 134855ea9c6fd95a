//! Fetching pinned wheels with pip (by package name) and unpacking their native libraries.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use npugate_result::digest::sha256_file;

use super::catalog::WheelPin;

/// Returns the verified wheel from the cache, downloading it with pip first when it is missing.
/// Once cached, no network is used.
pub fn ensure_wheel(pin: &WheelPin, wheels_dir: &Path) -> Result<PathBuf> {
    let cached = wheels_dir.join(&pin.file);
    if cached.is_file() {
        verify(pin, &cached)?;
        return Ok(cached);
    }
    std::fs::create_dir_all(wheels_dir).with_context(|| format!("cannot create {}", wheels_dir.display()))?;
    let staging = tempfile::Builder::new()
        .prefix(".download-")
        .tempdir_in(wheels_dir)
        .with_context(|| format!("cannot create a download directory in {}", wheels_dir.display()))?;
    let python = python().display().to_string();
    let requirement = format!("{}=={}", pin.package, pin.version);
    let output = Command::new(&python)
        .args(["-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"])
        .args(["--platform", &pin.platform, "--python-version", "3.11", "--implementation", "cp"])
        .arg("--dest")
        .arg(staging.path())
        .arg(&requirement)
        .output()
        .with_context(|| format!("cannot run {python} -m pip (set NPUGATE_PYTHON to a Python with pip)"))?;
    if !output.status.success() {
        bail!(
            "pip could not download {requirement} for {}: {}",
            pin.platform,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let downloaded = staging.path().join(&pin.file);
    if !downloaded.is_file() {
        bail!("pip downloaded {requirement} but not the pinned file {}; the package index changed", pin.file);
    }
    verify(pin, &downloaded)?;
    std::fs::rename(&downloaded, &cached).with_context(|| format!("cannot move the wheel to {}", cached.display()))?;
    Ok(cached)
}

/// The Python whose pip downloads wheels: `$NPUGATE_PYTHON`, else the `python3` beside the running
/// npugate (the venv `pip install npugate` put it in), else `python3` from `PATH`.
pub fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("NPUGATE_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(python);
    }
    std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name("python3"))
        .filter(|beside| beside.is_file())
        .unwrap_or_else(|| PathBuf::from("python3"))
}

fn verify(pin: &WheelPin, wheel: &Path) -> Result<()> {
    let (sha256, _) = sha256_file(wheel).with_context(|| format!("cannot hash {}", wheel.display()))?;
    if sha256 != pin.sha256 {
        bail!(
            "{} has sha256 {sha256}, but {}=={} is pinned to {}; delete the file and fetch again",
            wheel.display(),
            pin.package,
            pin.version,
            pin.sha256
        );
    }
    Ok(())
}

/// Unpacks the members of `wheel` matching `patterns` flat into `dest`; returns their file names.
pub fn extract(wheel: &Path, patterns: &[String], dest: &Path) -> Result<Vec<String>> {
    let file = std::fs::File::open(wheel).with_context(|| format!("cannot open {}", wheel.display()))?;
    let mut archive =
        zip::ZipArchive::new(file).with_context(|| format!("{} is not a valid wheel (zip)", wheel.display()))?;
    let mut extracted = Vec::new();
    let mut matched = vec![false; patterns.len()];
    for index in 0..archive.len() {
        let mut member =
            archive.by_index(index).with_context(|| format!("{}: bad zip entry {index}", wheel.display()))?;
        let name = member.name().to_string();
        let mut wanted = false;
        for (pattern, hit) in patterns.iter().zip(matched.iter_mut()) {
            if member_matches(pattern, &name) {
                *hit = true;
                wanted = true;
            }
        }
        if !wanted {
            continue;
        }
        let file_name = name.rsplit('/').next().unwrap_or(&name).to_string();
        let mut bytes = Vec::with_capacity(member.size() as usize);
        member.read_to_end(&mut bytes).with_context(|| format!("{}: cannot read {name}", wheel.display()))?;
        std::fs::write(dest.join(&file_name), bytes).with_context(|| format!("cannot write {file_name}"))?;
        extracted.push(file_name);
    }
    if let Some((pattern, _)) = patterns.iter().zip(&matched).find(|(_, hit)| !**hit) {
        bail!("{} has no member {pattern}", wheel.display());
    }
    Ok(extracted)
}

/// True when `name` matches `pattern`: an exact path, or one `*` standing for any characters
/// within the last path segment (`onnxruntime_qnn/*.so`).
fn member_matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((prefix, suffix)) => {
            name.len() >= prefix.len() + suffix.len()
                && name.starts_with(prefix)
                && name.ends_with(suffix)
                && !name[prefix.len()..name.len() - suffix.len()].contains('/')
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_patterns() {
        assert!(member_matches("onnxruntime_qnn/*.so", "onnxruntime_qnn/libQnnHtp.so"));
        assert!(!member_matches("onnxruntime_qnn/*.so", "onnxruntime_qnn/sub/libx.so"));
        assert!(!member_matches("onnxruntime_qnn/*.so", "onnxruntime_qnn/__init__.py"));
        assert!(member_matches("a/b.so.1", "a/b.so.1"));
        assert!(!member_matches("a/b.so.1", "a/b.so.2"));
    }
}
