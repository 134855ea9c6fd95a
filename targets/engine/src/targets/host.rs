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
use npugate_settings::{HarnessCommand, InferenceProgress};

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
            LocalLaunch { program: Command::new(job.harness), path: &|p: &Path| p.to_path_buf(), inferences: None }
                .run(job, out)?;
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
    /// Where each inference is reported, when inferences are slow enough to show (the HTP
    /// emulator): the harness runs with `--progress`.
    pub inferences: Option<&'a Progress<'a>>,
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
            reference_model: job.reference_model.map(|reference| path(&reference.path)),
            energy_window: None,
            progress: self.inferences.is_some(),
            keep_partitioned_graph: job.keep_partitioned_graph,
            settings: job.settings.with_input_paths(|input| path(&input.path)),
        };
        let mut program = self.program;
        program.args(command.to_argv()).current_dir(out).envs(job.env.iter().copied());
        let started = Instant::now();
        let mut timer = InferenceTimer::default();
        let mut on_line = |line: &str| {
            if let (Some(progress), Some(inference)) = (self.inferences, InferenceProgress::parse(line)) {
                timer.report(progress, &inference);
            }
        };
        let mut finished =
            npugate_host::process::run_watched(program, job.timeout, &|| job.cancel.is_cancelled(), &mut on_line)
                .map_err(|stopped| match stopped {
                    npugate_host::process::Stopped::Timeout { .. } => super::Retryable(stopped.into()).into(),
                    other => anyhow::Error::from(other),
                })?;
        if self.inferences.is_some() {
            finished.stderr = without_progress(&finished.stderr);
        }
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

/// The seconds the inferences of a run took so far, which estimate its time left.
#[derive(Default)]
struct InferenceTimer {
    seconds: f64,
    inferences: u32,
}

impl InferenceTimer {
    /// Reports `inference` to `progress` with the time left at the mean of the inferences so far.
    fn report(&mut self, progress: &Progress<'_>, inference: &InferenceProgress) {
        self.seconds += inference.seconds;
        self.inferences += 1;
        let left = self.seconds / f64::from(self.inferences) * f64::from(inference.left);
        progress.inference(&inference.phase, inference.done, inference.total, left);
    }
}

/// A harness's stderr without its progress lines (the harness's own account stays).
fn without_progress(stderr: &str) -> String {
    stderr.lines().filter(|line| InferenceProgress::parse(line).is_none()).map(|line| format!("{line}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Recorded;

    #[test]
    fn the_time_left_is_the_mean_inference_times_the_inferences_left_and_progress_leaves_the_stderr_kept() {
        let kept = Recorded::default();
        let progress = Progress::new("SM8650", &kept);
        let mut timer = InferenceTimer::default();
        for (phase, seconds, left) in [("first", 10.0, 3), ("timed", 14.0, 2)] {
            timer.report(&progress, &InferenceProgress { phase: phase.into(), done: 1, total: 1, seconds, left });
        }
        assert_eq!(
            kept.0.lock().unwrap()[1],
            r#"{"event":"inference","target":"SM8650","phase":"timed","done":1,"total":1,"seconds_left":24.0}"#
        );
        let line = InferenceProgress { phase: "timed".into(), done: 1, total: 1, seconds: 1.0, left: 0 }.line();
        assert_eq!(
            without_progress(&format!("a\n{line}\nnpugate-harness: error: x\n")),
            "a\nnpugate-harness: error: x\n"
        );
    }
}
