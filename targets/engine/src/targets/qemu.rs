//! An aarch64 Linux harness on an x86_64 host, under qemu-user: the same binary and runtime a
//! Qualcomm Linux board runs, with an ARM `/proc/cpuinfo` bind-mounted in a private mount
//! namespace (ONNX Runtime's CPU detection crashes on the host's x86 one). Natively on an aarch64
//! host.

use std::path::Path;
use std::process::Command;

use anyhow::Context;

use super::host::LocalLaunch;
use super::{Execution, Job, Progress, Target};
use npugate_host::process::Stopped;

/// The triple of the harness and runtimes qemu runs.
pub const TRIPLE: &str = "aarch64-unknown-linux-gnu";
/// ARM `/proc/cpuinfo` for ORT's CPU detection under qemu.
const ARM_CPUINFO: &str = include_str!("../../../../scripts/qemu/cpuinfo-cortex-a76");
/// Where the ARM cpuinfo is written inside the output directory (removed after the run).
const CPUINFO_FILE: &str = ".qemu-cpuinfo";

/// aarch64 Linux under qemu-user on this machine.
#[derive(Debug, Clone, Default)]
pub struct QemuTarget;

impl Target for QemuTarget {
    fn name(&self) -> &str {
        "qemu-aarch64"
    }

    fn execute(&self, job: &Job<'_>, out: &Path, progress: &Progress<'_>) -> anyhow::Result<Execution> {
        super::check_runtime(self.name(), TRIPLE, job.runtime)?;
        progress.step("run under qemu");
        let program = if std::env::consts::ARCH == "aarch64" {
            Command::new(job.harness)
        } else {
            let cpuinfo = out.join(CPUINFO_FILE);
            std::fs::write(&cpuinfo, ARM_CPUINFO).with_context(|| format!("cannot write {}", cpuinfo.display()))?;
            let mut command = Command::new("unshare");
            // Root may mount in a new mount namespace; anyone else needs a user namespace for it.
            command.args(if is_root() { &["-m"][..] } else { &["-r", "-m"][..] });
            command
                .args(["--propagation", "private", "sh", "-c"])
                .arg(r#"mount --bind "$0" /proc/cpuinfo && exec qemu-aarch64 -L /usr/aarch64-linux-gnu "$@""#)
                .arg(&cpuinfo)
                .arg(job.harness);
            if std::env::var_os("QEMU_CPU").is_none() {
                command.env("QEMU_CPU", "cortex-a76");
            }
            command
        };
        let execution = LocalLaunch { program, path: &|p: &Path| p.to_path_buf(), inferences: None }.run(job, out).map_err(|error| {
            match error.downcast_ref::<Stopped>() {
                Some(Stopped::Spawn { .. }) => error.context(
                    "the aarch64 harness needs qemu-user, util-linux unshare and the aarch64 libc on an x86_64 host (scripts/build-aarch64 installs them)",
                ),
                _ => error,
            }
        });
        let _ = std::fs::remove_file(out.join(CPUINFO_FILE));
        execution
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}
