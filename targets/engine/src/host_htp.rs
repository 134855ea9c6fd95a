//! Qualcomm's host HTP backend as a runtime: the Windows x64 ONNX Runtime with the QNN plugin and
//! `QnnHtp.dll`, run under wine ([`crate::targets::wine`]), the runtime npugate pins for it and the
//! SoC it is configured as by default. npugate-htp's `HostHtp` pairs such a runtime with its harness.

use anyhow::{bail, Result};
use npugate_host::runtime::RuntimeManifest;

use crate::targets::wine;

/// The runtime with the Windows x64 ONNX Runtime and Qualcomm's host HTP backend.
pub const HOST_HTP_RUNTIME: &str = "qnn-2.7.0-ort-1.31.1-windows-x86_64";
/// The SoC the host HTP is configured as when none is given (preflight, the emulator).
pub const DEFAULT_SOC: &str = "SM8650";
/// The QNN HTP backend library of that runtime.
const HTP_BACKEND: &str = "QnnHtp.dll";

/// Refuses a runtime that is not a Windows x64 QNN plugin runtime with the HTP backend.
pub fn check_runtime(runtime: &RuntimeManifest) -> Result<()> {
    let fix = format!("pass --runtime {HOST_HTP_RUNTIME} (npugate runtime fetch {HOST_HTP_RUNTIME})");
    if runtime.target != wine::TRIPLE {
        bail!(
            "runtime {} is built for {}, but the host HTP runs the {} harness under wine; {fix}",
            runtime.name,
            runtime.target,
            wine::TRIPLE
        );
    }
    let plugin = runtime.ep.as_ref().is_some_and(|ep| ep.name == "QNNExecutionProvider" && ep.attach == "plugin");
    if !plugin || !runtime.dir.join(HTP_BACKEND).is_file() {
        bail!("runtime {} has no QNN plugin with {HTP_BACKEND}; {fix}", runtime.name);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_for_another_target_or_without_the_htp_backend_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let linux = RuntimeManifest::for_tests(dir.path());
        let error = check_runtime(&linux).unwrap_err().to_string();
        assert!(
            error.contains("x86_64-pc-windows-gnu")
                && error.contains("npugate runtime fetch qnn-2.7.0-ort-1.31.1-windows-x86_64"),
            "{error}"
        );
        let windows = RuntimeManifest { target: wine::TRIPLE.into(), ..RuntimeManifest::for_tests(dir.path()) };
        assert!(check_runtime(&windows).unwrap_err().to_string().contains("no QNN plugin with QnnHtp.dll"));
    }
}
