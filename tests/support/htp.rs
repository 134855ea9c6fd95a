//! Helpers for the host-HTP tests: Qualcomm's x86_64 HTP backend under wine, driven through the
//! real `npugate` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::{bin, describe, run, runtime_file, target_profile_dir};

/// The runtime with the Windows x64 ONNX Runtime and the onnxruntime-qnn 2.7.0 host HTP backend.
pub const HTP_RUNTIME: &str = "qnn-2.7.0-ort-1.31.1-windows-x86_64";

/// The Windows harness `scripts/build-windows` builds into the same target directory (with the
/// wine PRNG shim beside it); checks the runtime is fetched too.
pub fn windows_harness() -> PathBuf {
    let target_dir = target_profile_dir().parent().expect("target/<profile> has a parent").to_path_buf();
    let path = target_dir.join("x86_64-pc-windows-gnu/release/npugate-harness.exe");
    assert!(
        path.is_file() && path.with_file_name("bcryptprimitives.dll").is_file(),
        "{} (with bcryptprimitives.dll) is missing: run scripts/build-windows with the same CARGO_TARGET_DIR",
        path.display()
    );
    runtime_file(HTP_RUNTIME, "QnnHtp.dll");
    path
}

/// Runs `npugate` with `args` (the Windows harness checked first).
pub fn npugate(args: &[&str], extra: &[&Path]) -> Output {
    windows_harness();
    run(Command::new(bin("npugate")).args(args).args(extra))
}

/// `npugate preflight --json` of the test model `model` for `socs` into `out`: the exit output and
/// the parsed report (`npugate.htp-preflight/1`).
pub fn preflight(model: &Path, socs: &[&str], out: &Path) -> (Output, Value) {
    let mut args = vec!["preflight", "--json"];
    for soc in socs {
        args.extend(["--soc", soc]);
    }
    let output = npugate(&args, &[Path::new("--model"), model, Path::new("--out"), out]);
    let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("preflight --json prints JSON ({e}):\n{}", describe(&output)));
    (output, report)
}

/// The verdict of `soc` in a preflight report.
pub fn soc<'a>(report: &'a Value, soc: &str) -> &'a Value {
    report["socs"].as_array().expect("socs").iter().find(|s| s["soc"] == soc).unwrap_or_else(|| panic!("no {soc} in {report:#}"))
}
