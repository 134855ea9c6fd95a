//! Helpers for the host-HTP tests: Qualcomm's x86_64 HTP backend under wine, driven through the
//! real `npugate` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::{bin, describe, run, runtime_file, target_profile_dir};

/// The runtime with the Windows x64 ONNX Runtime and the onnxruntime-qnn 2.7.0 host HTP backend (QNN 2.51.0).
pub const HTP_RUNTIME: &str = "qnn-2.7.0-ort-1.31.1-windows-x86_64";
/// The second QNN version the tests use: onnxruntime-qnn 2.3.0, QNN 2.47.0 (on the ONNX Runtime 1.27.0 core,
/// the newest its plugin loads into).
pub const HTP_RUNTIME_OLD: &str = "qnn-2.3.0-ort-1.27.0-windows-x86_64";

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
/// the parsed report (`npugate.htp-preflight/2`).
pub fn preflight(model: &Path, socs: &[&str], out: &Path) -> (Output, Value) {
    let mut args = vec!["preflight", "--json"];
    for soc in socs {
        args.extend(["--soc", soc]);
    }
    let output = npugate(&args, &[Path::new("--model"), model, Path::new("--out"), out]);
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("preflight --json prints JSON ({e}):\n{}", describe(&output)));
    (output, report)
}

/// The verdict of `soc` in a preflight report.
pub fn soc<'a>(report: &'a Value, soc: &str) -> &'a Value {
    report["socs"]
        .as_array()
        .expect("socs")
        .iter()
        .find(|s| s["soc"] == soc)
        .unwrap_or_else(|| panic!("no {soc} in {report:#}"))
}

/// Checks that the second QNN version's runtime is fetched (scripts/setup fetches it).
pub fn second_qnn_version() {
    runtime_file(HTP_RUNTIME_OLD, "QnnHtp.dll");
}

/// Runs the Windows harness directly under wine, in npugate's own prefix (which an earlier
/// `npugate` run created), with `runtime`'s ONNX Runtime and QNN plugin on `model`: what a direct
/// load does, without npugate's checks in between. Returns the harness's output.
pub fn harness_under_wine(runtime: &str, model: &Path, out: &Path, args: &[&str]) -> Output {
    let harness = windows_harness();
    let prefix = crate::cache_dir().join("wine/prefix");
    assert!(
        prefix.join(".npugate-ready").is_file(),
        "{} is not ready: run npugate on the host HTP first",
        prefix.display()
    );
    let z = |path: &Path| {
        format!("Z:{}", std::path::absolute(path).expect("absolute path").display().to_string().replace('/', "\\"))
    };
    std::fs::create_dir_all(out).expect("harness output directory");
    run(Command::new("wine")
        .env("WINEPREFIX", &prefix)
        .env("WINEARCH", "win64")
        .env("WINEDEBUG", "-all")
        .env("WINEDLLOVERRIDES", "mscoree,mshtml=")
        .current_dir(out)
        .arg(&harness)
        .args(["--ort-lib", &z(&runtime_file(runtime, "onnxruntime.dll"))])
        .args(["--ep-library", &z(&runtime_file(runtime, "onnxruntime_providers_qnn.dll"))])
        .args(["--model", &z(model), "--out", &z(out), "--ep", "qnn", "--qnn-backend", "htp", "--no-reference-pass"])
        .args(args))
}
