//! Helpers for the QNN tests: the aarch64 harness, the QNN plugin runtime and qemu-user.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output};

use crate::{run, runtime_file, target_profile_dir};

/// The runtime with aarch64 ONNX Runtime and the onnxruntime-qnn plugin.
pub const QNN_RUNTIME: &str = "qnn-2.7.0-ort-1.31.1-linux-aarch64";
/// The ONNX Runtime library file of the aarch64 runtimes.
pub const AARCH64_ORT: &str = "libonnxruntime.so.1.31.1";
/// Signal number of SIGSEGV.
const SIGSEGV: i32 = 11;

/// The release aarch64 harness built by `scripts/build-aarch64` into the same target directory.
pub fn aarch64_harness() -> PathBuf {
    let target_dir = target_profile_dir().parent().expect("target/<profile> has a parent").to_path_buf();
    let path = target_dir.join("aarch64-unknown-linux-gnu/release/npugate-harness");
    assert!(path.is_file(), "{} is missing: run scripts/build-aarch64 with the same CARGO_TARGET_DIR", path.display());
    path
}

/// A file of the QNN plugin runtime.
pub fn qnn_file(name: &str) -> PathBuf {
    runtime_file(QNN_RUNTIME, name)
}

/// `scripts/qemu-run` of this repository.
pub fn qemu_run() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/qemu-run")
}

/// Runs the aarch64 harness under qemu-user with the QNN plugin (device exposed through
/// `ORT_QNN_ENABLE_CPU_BACKEND=1`), working directory `cwd`, output into `cwd`.
pub fn qnn_harness(model: &Path, cwd: &Path, extra: &[&str]) -> Output {
    let mut command = Command::new(qemu_run());
    command
        .current_dir(cwd)
        .env("ORT_QNN_ENABLE_CPU_BACKEND", "1")
        .arg(aarch64_harness())
        .arg("--ort-lib")
        .arg(qnn_file(AARCH64_ORT))
        .arg("--model")
        .arg(model)
        .arg("--out")
        .arg(cwd)
        .args(["--warmup", "0", "--runs", "2", "--profile-runs", "1", "--ep", "qnn", "--ep-library"])
        .arg(qnn_file("libonnxruntime_providers_qnn.so"))
        .args(extra);
    run(&mut command)
}

/// A guest killed by SIGSEGV under qemu-user (signal 11, or 139 through a shell): the QNN HTP
/// teardown after a failed setup does this *after* the harness wrote everything (feasibility Q4.6).
pub fn qemu_teardown_crash(status: ExitStatus) -> bool {
    status.signal() == Some(SIGSEGV) || status.code() == Some(128 + SIGSEGV)
}
