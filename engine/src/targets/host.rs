//! This machine as a target: the harness runs as a local process with the runtime's libraries
//! where they are in the cache, and this machine's state and load are read around it as a
//! device's are (`device_state.json`: its busiest other processes while the runs were timed, its
//! temperatures and clocks where it has sensors). [`LocalLaunch`] is shared with the targets that
//! run a foreign harness locally through an emulator (qemu-user, wine).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::Context;
use npugate_android::adb::ThisMachine;
use npugate_android::device_load::LOCAL_SAMPLE_S;
use npugate_android::device_state::{self, DeviceStateRecord};
use npugate_result::{contract, files};
use npugate_settings::HarnessCommand;

use super::{Execution, Job, Progress, Target};

/// The harness on this machine, natively.
#[derive(Debug, Clone)]
pub struct HostTarget {
    triple: String,
}

impl HostTarget {
    /// This machine.
    pub fn new() -> HostTarget {
        HostTarget { triple: super::host_triple() }
    }
}

impl Default for HostTarget {
    fn default() -> Self {
        HostTarget::new()
    }
}

impl Target for HostTarget {
    fn name(&self) -> &str {
        "local"
    }

    fn execute(&self, job: &Job<'_>, out: &Path, progress: &Progress<'_>) -> anyhow::Result<Execution> {
        super::check_runtime(self.name(), &self.triple, job.runtime)?;
        let before = device_state::read_sampled(&ThisMachine, LOCAL_SAMPLE_S);
        progress.step("run");
        let execution =
            LocalLaunch { program: Command::new(job.harness), path: &|p: &Path| p.to_path_buf() }.run(job, out)?;
        job.name_the_model_as_given(out)?;
        let after = device_state::read_sampled(&ThisMachine, LOCAL_SAMPLE_S).ok();
        match before {
            Ok(before) => {
                let state = DeviceStateRecord::new(self.name(), None, before, after);
                contract::write_json(&out.join(files::DEVICE_STATE), &state)
                    .with_context(|| format!("cannot write {}", out.join(files::DEVICE_STATE).display()))?;
            }
            Err(error) => progress.note(&format!("this machine's load could not be sampled: {error}")),
        }
        Ok(execution)
    }
}

/// How a local process starts the harness: the program (with any emulator in front of the
/// harness) and how a host path is spelled for the harness.
pub struct LocalLaunch<'a> {
    /// The command up to the harness's own arguments (`harness`, or `qemu-aarch64 … harness`).
    pub program: Command,
    /// A host path as the harness sees it.
    pub path: &'a dyn Fn(&Path) -> PathBuf,
}

impl LocalLaunch<'_> {
    /// Runs the harness with the job's settings, its working directory and output in `out`;
    /// keeps what it printed as `harness.stdout`/`harness.stderr` there.
    pub fn run(self, job: &Job<'_>, out: &Path) -> anyhow::Result<Execution> {
        // The harness runs in `out`, so every path it gets is absolute.
        let path = |p: &Path| (self.path)(&std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()));
        let model_files = job.model_files()?;
        let command = HarnessCommand {
            ort_lib: path(&job.runtime.ort_library_path()),
            model: path(job.model),
            out: path(out),
            ep_library: job.runtime.ep_library_path().filter(|_| job.settings.ep.is_accelerator()).map(|p| path(&p)),
            runtime_name: Some(job.runtime.name.clone()),
            fixed_from_sha256: job.fixed_from().map(str::to_string),
            model_files: model_files.hints(),
            reference_model: job.reference_model.map(path),
            energy_window: None,
            settings: job.settings.with_input_paths(|input| path(&input.path)),
        };
        let mut program = self.program;
        program.args(command.to_argv()).current_dir(out).envs(job.env.iter().copied());
        let started = Instant::now();
        let finished =
            npugate_host::process::run(program, job.timeout, &|| job.cancel.is_cancelled()).map_err(|stopped| {
                match stopped {
                    npugate_host::process::Stopped::Timeout { .. } => super::Retryable(stopped.into()).into(),
                    other => anyhow::Error::from(other),
                }
            })?;
        for (name, text) in [(files::HARNESS_STDOUT, &finished.stdout), (files::HARNESS_STDERR, &finished.stderr)] {
            if !text.is_empty() {
                std::fs::write(out.join(name), text)
                    .with_context(|| format!("cannot write {}", out.join(name).display()))?;
            }
        }
        Ok(Execution {
            exit_code: finished.code,
            signal: finished.signal,
            stderr: finished.stderr,
            seconds: started.elapsed().as_secs_f64(),
            warnings: Vec::new(),
        })
    }
}
