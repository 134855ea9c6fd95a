//! A scripted target for tests of everything above [`Target`]: racks, retries, timeouts,
//! cancellation, panics, sweep resume, comparisons and confirmation reruns run without processes,
//! devices or root. Each call to `execute` takes the next [`Behaviour`] of the script (the last one
//! repeats). A successful run leaves a real harness result directory (the profile-parser's fixture
//! of a real QNN run) with the latencies the script gives — or, with [`Behaviour::Simulate`], the
//! latencies of a simulated device whose speed depends on the model and on the call (a drift); or,
//! with [`Behaviour::Replay`], a labelled series with the evidence a device run records beside it
//! (each run's CPU wait, the device's state) on a placement with or without a fallback node.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use npugate_android::device_state::DeviceStateRecord;
use npugate_host::runtime::RuntimeManifest;
use npugate_result::{contract, files, BackendHealth, CpuWait, PerRun, RunResult, RunStatus};
use npugate_settings::HarnessSettings;

use super::{Cancel, Deadline, Execution, Job, Progress, Retryable, Target};

/// What one call of [`MockTarget::execute`] does.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Writes a complete result with these latencies (ns) and exits 0.
    Measure(Vec<u64>),
    /// The accelerator did not start (this reason): an incomplete result of CPU numbers with
    /// `backend.started = false`, harness exit 3.
    BackendDown(String),
    /// The accelerator refused to attach (its device absent) before anything ran: no result,
    /// harness exit 3 with this message.
    DeviceAbsent(String),
    /// The session could not be created: no result, harness exit 2 with this message.
    NoSession(String),
    /// Writes a complete result with latencies the simulated device produces for this call.
    Simulate(Simulated),
    /// Writes a complete result of a labelled series and its evidence.
    Replay(Box<Replay>),
    /// The way to the target fails (device gone): a retryable error.
    Transport(String),
    /// A final error (e.g. the runtime does not fit the device).
    Fail(String),
    /// Runs until the job's timeout passes (or it is cancelled).
    Hang,
    /// Panics with this message.
    Panic(String),
}

/// A simulated device: each model's base latency, scaled by a load that depends on the call and the
/// model (background load, heat, a one-off slow run), with seeded uniform noise.
#[derive(Debug, Clone)]
pub struct Simulated {
    /// Base latency (ns) by model file name; a model not listed takes the first entry's.
    pub base_ns: Vec<(String, u64)>,
    /// Uniform noise of each run, ± this many percent.
    pub noise_pct: f64,
    /// The load factor of a call: `load(call index from 0, model file name)`.
    pub load: fn(usize, &str) -> f64,
}

impl Simulated {
    /// `runs` latencies of `model` on call `call`.
    fn latencies(&self, call: usize, model: &str, runs: u32) -> Vec<u64> {
        let base = self
            .base_ns
            .iter()
            .find(|(name, _)| name == model)
            .or(self.base_ns.first())
            .map_or(1_000_000, |(_, ns)| *ns);
        let mean = base as f64 * (self.load)(call, model);
        let mut rng = fastrand::Rng::with_seed(call as u64 * 7919 + 17);
        (0..runs).map(|_| (mean * (1.0 + self.noise_pct / 100.0 * (2.0 * rng.f64() - 1.0))) as u64).collect()
    }
}

/// A labelled latency series replayed as a device run: its latencies, the CPU wait the harness
/// recorded around each run, the device's state around the run, and where the model ran.
#[derive(Debug, Clone)]
pub struct Replay {
    /// The timed runs (ns), in order.
    pub latencies_ns: Vec<u64>,
    /// Each run's run-queue delay (ns); `None`: the harness recorded none (an older harness).
    pub run_queue_delay_ns: Option<Vec<u64>>,
    /// The device's state and load around the run (`device_state.json`), when recorded.
    pub device_state: Option<DeviceStateRecord>,
    /// Where the model ran.
    pub placement: ReplayPlacement,
}

/// The real result a replay is written over, chosen for its placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayPlacement {
    /// A node off the preferred EP: the QNN run of `mixed.onnx`, its `Det` on the CPU.
    Fallback,
    /// Every node on the preferred EP: the OpenVINO run of `smallcnn.onnx`.
    AllOnEp,
}

impl ReplayPlacement {
    /// The result directory of this placement.
    fn template(self) -> PathBuf {
        match self {
            ReplayPlacement::Fallback => template_dir(),
            ReplayPlacement::AllOnEp => Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../profile-parser/tests/fixtures/harness-openvino-smallcnn"),
        }
    }
}

/// A job for the mock target with everything it borrows owned: a tiny model (`m.onnx`) in a
/// temporary folder, the default settings, a runtime for tests, a cancellation flag.
pub struct MockJob {
    /// The temporary folder holding the model (and whatever the caller writes there).
    pub work: tempfile::TempDir,
    /// `m.onnx` in it.
    pub model: PathBuf,
    /// What to measure (the command line's defaults).
    pub settings: HarnessSettings,
    /// The longest a run may take (5 s).
    pub timeout: Duration,
    runtime: RuntimeManifest,
    cancel: Cancel,
}

impl MockJob {
    /// A fresh folder with its model.
    pub fn new() -> MockJob {
        let work = tempfile::tempdir().expect("a temporary folder");
        let model = work.path().join("m.onnx");
        crate::model::testing::identity_model(&model, &[Some(1), Some(3)]);
        let runtime = RuntimeManifest::for_tests(work.path());
        let (settings, cancel, timeout) = (HarnessSettings::default(), Cancel::new(), Duration::from_secs(5));
        MockJob { work, model, settings, timeout, runtime, cancel }
    }

    /// The job: the model as the harness too (the mock runs nothing).
    pub fn job(&self) -> Job<'_> {
        Job::new(&self.model, &self.runtime, &self.model, &self.settings, self.timeout, &self.cancel)
    }
}

impl Default for MockJob {
    fn default() -> Self {
        MockJob::new()
    }
}

/// A target that follows a script.
#[derive(Debug)]
pub struct MockTarget {
    name: String,
    script: Mutex<VecDeque<Behaviour>>,
    calls: AtomicUsize,
    jobs: Mutex<Vec<(PathBuf, Option<PathBuf>)>>,
}

impl MockTarget {
    /// A target called `name` that behaves as `script` says, call by call.
    pub fn new(name: &str, script: Vec<Behaviour>) -> MockTarget {
        MockTarget {
            name: name.into(),
            script: Mutex::new(script.into()),
            calls: AtomicUsize::new(0),
            jobs: Mutex::default(),
        }
    }

    /// How many times `execute` was called.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The model and reference model of every job, in call order.
    pub fn jobs(&self) -> Vec<(PathBuf, Option<PathBuf>)> {
        self.jobs.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    fn next(&self) -> Behaviour {
        let mut script = self.script.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match script.len() {
            0 => Behaviour::Fail("the mock's script is empty".into()),
            1 => script[0].clone(),
            _ => script.pop_front().unwrap_or(Behaviour::Hang),
        }
    }
}

/// The real harness result directory the mock copies.
pub fn template_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profile-parser/tests/fixtures/harness-qnn-saver-mixed")
}

impl Target for MockTarget {
    fn name(&self) -> &str {
        &self.name
    }

    fn execute(&self, job: &Job<'_>, out: &Path, progress: &Progress<'_>) -> anyhow::Result<Execution> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        self.jobs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((job.model.to_path_buf(), job.reference_model.map(|reference| reference.path.clone())));
        progress.step("run");
        let started = Instant::now();
        match self.next() {
            Behaviour::Measure(latencies_ns) => {
                write_result(out, latencies_ns, |_| ())?;
                Ok(exited(0, String::new(), started))
            }
            Behaviour::Simulate(device) => {
                let model = job.model.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                write_result(out, device.latencies(call, &model, job.settings.runs), |_| ())?;
                Ok(exited(0, String::new(), started))
            }
            Behaviour::Replay(replay) => {
                write_replay(out, &replay)?;
                Ok(exited(0, String::new(), started))
            }
            Behaviour::BackendDown(reason) => {
                write_result(out, vec![1_000_000; 3], |result| {
                    result.status = RunStatus::Incomplete;
                    result.backend = Some(BackendHealth {
                        started: false,
                        evidence: vec![reason.clone()],
                        reason: Some(reason.clone()),
                        htp_power: None,
                    });
                })?;
                Ok(exited(3, format!("npugate-harness: error: QNN backend did not start: {reason}"), started))
            }
            Behaviour::DeviceAbsent(message) => Ok(exited(3, format!("npugate-harness: error: {message}"), started)),
            Behaviour::NoSession(message) => Ok(exited(2, format!("npugate-harness: error: {message}"), started)),
            Behaviour::Transport(message) => Err(Retryable(anyhow::anyhow!("device {}: {message}", self.name)).into()),
            Behaviour::Fail(message) => Err(anyhow::anyhow!("device {}: {message}", self.name)),
            Behaviour::Hang => {
                let deadline = Deadline::after(job.timeout);
                loop {
                    if job.cancel.is_cancelled() {
                        return Err(job.cancel.error());
                    }
                    if deadline.passed() {
                        return Err(deadline.error(&format!("device {}: the harness", self.name)));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            Behaviour::Panic(message) => panic!("{message}"),
        }
    }
}

/// Copies the template result into `out` with these latencies, changed further by `edit`.
fn write_result(out: &Path, latencies_ns: Vec<u64>, edit: impl FnOnce(&mut RunResult)) -> anyhow::Result<()> {
    write_over(&template_dir(), out, latencies_ns, edit)
}

/// Writes a replayed series: its template's result with the series, its CPU wait and its device state.
fn write_replay(out: &Path, replay: &Replay) -> anyhow::Result<()> {
    write_over(&replay.placement.template(), out, replay.latencies_ns.clone(), |result| {
        let runs = replay.latencies_ns.len();
        result.timings.cpu_wait = replay.run_queue_delay_ns.as_ref().map(|delays| CpuWait {
            threads: 2,
            run_queue_delay_ns: PerRun::Measured(delays.clone()),
            involuntary_switches: PerRun::Measured(delays.iter().map(|&d| u64::from(d > 0)).collect()),
        });
        result.settings.runs = runs as u32;
    })?;
    if let Some(state) = &replay.device_state {
        contract::write_json(&out.join(files::DEVICE_STATE), state)?;
    }
    Ok(())
}

/// Copies the result in `template` into `out` with these latencies, changed further by `edit`.
fn write_over(
    template: &Path,
    out: &Path,
    latencies_ns: Vec<u64>,
    edit: impl FnOnce(&mut RunResult),
) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(template)? {
        let entry = entry?;
        if entry.file_name() != "PROVENANCE.md" {
            std::fs::copy(entry.path(), out.join(entry.file_name()))?;
        }
    }
    let mut result = RunResult::read(out)?;
    result.settings.runs = latencies_ns.len() as u32;
    result.timings.latencies_ns = latencies_ns;
    result.histogram = None;
    edit(&mut result);
    result.write(out)?;
    Ok(())
}

/// How a harness that exited with `code` ended.
fn exited(code: i32, stderr: String, started: Instant) -> Execution {
    Execution {
        exit_code: Some(code),
        signal: None,
        stderr,
        seconds: started.elapsed().as_secs_f64(),
        warnings: vec![],
    }
}
