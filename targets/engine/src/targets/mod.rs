//! Where a harness runs. A [`Target`] takes a [`Job`] — the harness binary, the runtime, the model,
//! the typed settings, all as host files — deploys what the run needs, launches the harness with
//! its own paths and collects the harness's output directory into a host directory. Everything
//! above this module (runs, racks, sweeps, preflight, the output check) knows nothing of how bytes
//! move or processes start; the [`mock`] target lets that logic be tested without either.
//!
//! Implementations: [`host::HostTarget`] (this machine), [`aihub::AiHubTarget`] (a Qualcomm AI Hub
//! hosted device: a local reference pass and an AI Hub profile job), [`qemu::QemuTarget`] (an aarch64 harness
//! under qemu-user), [`wine::WineTarget`] (a Windows x64 harness under wine: Qualcomm's host HTP
//! backend), [`adb::AdbTarget`] (a phone or board over adb) and `mock::MockTarget` (tests only).

pub mod adb;
pub mod aihub;
pub mod host;
#[cfg(any(test, feature = "testing"))]
pub mod mock;
pub mod qemu;
pub mod wine;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use npugate_settings::HarnessSettings;

use crate::model::{GivenModel, Memory, ModelFiles, PreparedModel};
use crate::progress::Progress;
use npugate_host::hash_cache::HashCache;
use npugate_host::runtime::RuntimeManifest;

/// One harness run to perform, described with host files.
#[derive(Debug, Clone, Copy)]
pub struct Job<'a> {
    /// The harness binary built for the target.
    pub harness: &'a Path,
    /// The runtime whose libraries the harness loads.
    pub runtime: &'a RuntimeManifest,
    /// The model to run.
    pub model: &'a Path,
    /// `model` prepared for the run (its files hashed; a copy with fixed input shapes); `None`:
    /// the model as given, whose files the target locates and hashes itself.
    pub prepared: Option<&'a PreparedModel>,
    /// `model` as its command looked at it once (the plan's subject: its kind and files, hashed),
    /// when the command has it; used only while it is `model` (a job moved to another model,
    /// as a comparison's sides are, looks at that one itself).
    pub given: Option<&'a GivenModel>,
    /// A compiled model's source model as its command looked at it (its files hashed), deployed
    /// beside it: the harness's CPU reference pass runs it and placement counts in its nodes (see
    /// `crate::compiled::ReferenceChoice`).
    pub reference_model: Option<&'a GivenModel>,
    /// What to measure; `--input` files are host paths (the target maps them to its own).
    pub settings: &'a HarnessSettings,
    /// Extra environment of the harness process (e.g. `ORT_QNN_ENABLE_CPU_BACKEND=1`).
    pub env: &'a [(&'a str, &'a str)],
    /// The longest the harness may run before it is stopped (a [`Retryable`] timeout).
    pub timeout: Duration,
    /// Set when the user interrupted: the target stops the harness and returns an error.
    pub cancel: &'a Cancel,
    /// Keep the graph ONNX Runtime partitions in the result directory
    /// (`--keep-partitioned-graph`, [`npugate_result::files::PARTITIONED_GRAPH`]).
    pub keep_partitioned_graph: bool,
}

impl<'a> Job<'a> {
    /// The one way a job is built: `model` with `harness` and `runtime`, as the user gave it (the
    /// target locates and hashes its files), no reference model, no extra environment, no
    /// partitioned graph kept; a caller that needs those sets them on the result
    /// (`Job { reference_model, ..Job::new(…) }`).
    pub fn new(
        harness: &'a Path,
        runtime: &'a RuntimeManifest,
        model: &'a Path,
        settings: &'a HarnessSettings,
        timeout: Duration,
        cancel: &'a Cancel,
    ) -> Job<'a> {
        Job {
            harness,
            runtime,
            model,
            prepared: None,
            given: None,
            reference_model: None,
            settings,
            env: &[],
            timeout,
            cancel,
            keep_partitioned_graph: false,
        }
    }

    /// sha256 of the model as the user gave it, when `model` is its copy with fixed input shapes.
    pub fn fixed_from(&self) -> Option<&str> {
        self.prepared.and_then(|prepared| prepared.fixed_from.as_ref()).map(|original| original.sha256.as_str())
    }

    /// Rewrites the harness's messages in `out`'s `result.json` (`session_error`,
    /// `inference_error`, `error`) to name the model as the user gave it where they name its copy
    /// with fixed input shapes (`~/.cache/npugate/fixed-models/<digest>/m.onnx`), which the user
    /// never wrote: `m.onnx (fixed by --shape)`.
    pub fn name_the_model_as_given(&self, out: &Path) -> anyhow::Result<()> {
        let Some(original) = self.prepared.and_then(|prepared| prepared.fixed_from.as_ref()) else { return Ok(()) };
        let path = out.join(npugate_result::files::RESULT);
        let Ok(text) = std::fs::read_to_string(&path) else { return Ok(()) };
        let Ok(mut value) = serde_json::from_str::<serde_json::Value>(&text) else { return Ok(()) };
        let copy = self.model.display().to_string();
        let given = format!("{} (fixed by --shape)", original.path.display());
        let mut changed = false;
        for field in ["session_error", "inference_error", "error"] {
            if let Some(serde_json::Value::String(message)) = value.get_mut(field) {
                if message.contains(&copy) {
                    *message = message.replace(&copy, &given);
                    changed = true;
                }
            }
        }
        if changed {
            npugate_result::contract::write_json(&path, &value)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        }
        Ok(())
    }

    /// The model as its command looked at it ([`Job::given`], while it is `model`).
    pub fn given(&self) -> Option<&'a GivenModel> {
        self.given.filter(|given| given.path == self.model)
    }

    /// The files of the model, hashed: the prepared model's, else the given model's, else located
    /// and hashed now (hashes of unchanged files come from the host's hash cache).
    pub fn model_files(&self) -> anyhow::Result<ModelFiles> {
        match self.prepared {
            Some(prepared) => Ok(prepared.files.clone()),
            None => self.given_or_read().map(|given| given.files.clone()),
        }
    }

    /// The model as its command looked at it, or looked at now when the job has none.
    pub fn given_or_read(&self) -> anyhow::Result<std::borrow::Cow<'a, GivenModel>> {
        match self.given() {
            Some(given) => Ok(std::borrow::Cow::Borrowed(given)),
            None => GivenModel::read(self.model, &HashCache::default_cache()).map(std::borrow::Cow::Owned),
        }
    }
}

/// How the harness process ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    /// Its exit code; `None` when a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did and the target can tell (a local process; `adb
    /// shell` reports one as exit code 128 + its number).
    pub signal: Option<i32>,
    /// What it printed on stderr.
    pub stderr: String,
    /// Wall time of the harness process, seconds.
    pub seconds: f64,
    /// Non-fatal observations of the target (a warm device, a missing Skel), each a sentence.
    pub warnings: Vec<String>,
}

impl Execution {
    /// True when the harness exited with code 0.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// The harness's own account of what went wrong, for one-line messages: a failed allocation
    /// as such (the size it tried), else its last stderr line that says `error`, else its last
    /// stderr line — never a line of a backtrace; with no word from the harness, the likely cause
    /// of the signal that ended it.
    pub fn last_message(&self) -> String {
        let mut lines = self.stderr.lines().rev().map(str::trim).filter(|line| !line.is_empty() && !is_backtrace(line));
        if let Some(bytes) = self.stderr.lines().find_map(failed_allocation) {
            return format!(
                "out of memory: the harness failed to allocate {bytes} bytes ({}) at once",
                npugate_onnx::size::human_bytes(bytes)
            );
        }
        let last = lines.clone().next();
        match lines.find(|line| line.to_ascii_lowercase().contains("error")).or(last) {
            Some(line) => line.to_string(),
            None => self.signal.map_or("no message", signal_cause).to_string(),
        }
    }

    /// `exit 2`, `killed by SIGKILL` or `killed by a signal`.
    pub fn status(&self) -> String {
        match (self.signal, self.exit_code) {
            (Some(signal), _) => format!("killed by {}", signal_name(signal)),
            (None, Some(code)) => format!("exit {code}"),
            (None, None) => "killed by a signal".into(),
        }
    }
}

/// `SIGKILL`, or `signal 42` for a number without a name here.
fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal).map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_string())
}

/// What most likely sent `signal` to a harness that said nothing.
fn signal_cause(signal: i32) -> &'static str {
    use nix::sys::signal::Signal;
    match Signal::try_from(signal) {
        Ok(Signal::SIGKILL) => {
            "no message: a SIGKILL nobody asked for is most often the kernel's out-of-memory killer (the run needed more \
             memory than the machine had; `dmesg` says)"
        }
        Ok(Signal::SIGABRT) => {
            "no message: an abort, most often a failed allocation (out of memory) or an uncaught C++ exception in ONNX \
             Runtime or its execution provider"
        }
        Ok(Signal::SIGSEGV | Signal::SIGBUS | Signal::SIGILL | Signal::SIGFPE) => {
            "no message: a crash in ONNX Runtime, its execution provider or the harness"
        }
        _ => "no message",
    }
}

/// The size of the allocation a Rust process reports as failed before it aborts (`memory
/// allocation of N bytes failed`).
fn failed_allocation(line: &str) -> Option<u64> {
    line.trim().strip_prefix("memory allocation of ")?.strip_suffix(" bytes failed")?.parse().ok()
}

/// A line of a Rust backtrace: its header, a frame (`3: alloc::raw_vec::handle_error`), a frame's
/// source (`at src/main.rs:10:5`) or the note about details.
fn is_backtrace(line: &str) -> bool {
    let frame =
        line.split_once(": ").is_some_and(|(index, _)| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()));
    frame
        || line == "stack backtrace:"
        || line.starts_with("at ") && line.contains(':')
        || line.starts_with("note: Some details are omitted")
        || line.starts_with("note: run with `RUST_BACKTRACE=1`")
}

/// Where a harness runs: deploy what a job needs, launch it, collect its output.
pub trait Target: Sync {
    /// The name used in messages and result directories (`local`, `qemu-aarch64`, a serial).
    fn name(&self) -> &str;

    /// Runs `job`, leaving the harness's output directory's content in `out` (an empty directory
    /// the caller made). A failure of the way to the target (device gone, timeout) is
    /// [`Retryable`]; every other error is final.
    fn execute(&self, job: &Job<'_>, out: &Path, progress: &Progress<'_>) -> anyhow::Result<Execution>;

    /// Where its harness allocates tensors, as the host knows it: this machine's memory unless
    /// the target is another machine (a run's sizes are checked against it before launching).
    fn memory(&self) -> Memory {
        Memory::Here
    }
}

impl<T: Target + ?Sized> Target for Box<T> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn memory(&self) -> Memory {
        (**self).memory()
    }

    fn execute(&self, job: &Job<'_>, out: &Path, progress: &Progress<'_>) -> anyhow::Result<Execution> {
        (**self).execute(job, out, progress)
    }
}

/// A failure worth another attempt: the transport to the target failed (device gone, a timeout)
/// or its accelerator backend did not start. Everything a rack retries is wrapped in this.
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub struct Retryable(pub anyhow::Error);

/// True when `error` (or a cause in its chain) is [`Retryable`].
pub fn is_retryable(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| cause.is::<Retryable>())
}

/// A cancellation flag shared by everything working for one command (set on Ctrl-C).
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A flag that is not set.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Asks everyone holding the flag to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// True once [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// An error for work stopped by the flag.
    pub fn error(&self) -> anyhow::Error {
        anyhow::anyhow!("interrupted")
    }
}

/// A point in time by which a job must be done.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    limit: Duration,
}

impl Deadline {
    /// `limit` from now.
    pub fn after(limit: Duration) -> Deadline {
        Deadline { at: Instant::now() + limit, limit }
    }

    /// True once the deadline passed.
    pub fn passed(&self) -> bool {
        Instant::now() >= self.at
    }

    /// The timeout error of `what` (retryable).
    pub fn error(&self, what: &str) -> anyhow::Error {
        Retryable(anyhow::anyhow!("{what} timed out after {}s", self.limit.as_secs())).into()
    }
}

/// The Rust target triple of this machine's own harness (`x86_64-unknown-linux-gnu`).
pub fn host_triple() -> String {
    format!("{}-unknown-linux-gnu", std::env::consts::ARCH)
}

/// Refuses a runtime built for another target than `triple`, the one `target` runs.
pub fn check_runtime(target: &str, triple: &str, runtime: &RuntimeManifest) -> anyhow::Result<()> {
    anyhow::ensure!(
        runtime.target == triple,
        "{target} runs {triple}, but runtime {} is built for {}; pick a runtime built for {triple} (npugate runtime list)",
        runtime.name,
        runtime.target
    );
    Ok(())
}

/// One target of a plan with what runs on it.
pub struct Planned {
    /// Where the harness runs.
    pub target: Box<dyn Target>,
    /// The runtime its harness loads.
    pub runtime: RuntimeManifest,
    /// The harness built for the runtime's target.
    pub harness: std::path::PathBuf,
    /// The SoC the host HTP emulator is configured as (emulator targets only).
    pub soc: Option<npugate_result::hexagon::Soc>,
    /// What the target is as probed (devices only).
    pub device: Option<npugate_android::devices::DeviceInfo>,
}

impl std::fmt::Debug for Planned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Planned")
            .field("target", &self.target.name())
            .field("runtime", &self.runtime.name)
            .field("harness", &self.harness)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_harness_messages_name_the_model_as_given_not_its_fixed_copy() {
        let mock = mock::MockJob::new();
        let fixed = mock.work.path().join("fixed-models/abc/m.onnx");
        let prepared = PreparedModel {
            path: fixed.clone(),
            fixed_from: Some(crate::model::FixedFrom { path: "models/m.onnx".into(), sha256: "0".repeat(64) }),
            files: ModelFiles::read(&mock.model, &HashCache::default_cache()).unwrap(),
        };
        let job = Job { model: &fixed, prepared: Some(&prepared), ..mock.job() };
        let out = mock.work.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let refused = format!("cannot create a session for model {}: This is an invalid model.", fixed.display());
        let result = serde_json::json!({"session_error": refused, "model": {"path": fixed.display().to_string()}});
        std::fs::write(out.join(npugate_result::files::RESULT), result.to_string()).unwrap();
        job.name_the_model_as_given(&out).unwrap();
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join(npugate_result::files::RESULT)).unwrap()).unwrap();
        assert_eq!(
            written["session_error"],
            "cannot create a session for model models/m.onnx (fixed by --shape): This is an invalid model."
        );
        assert_eq!(written["model"]["path"], fixed.display().to_string(), "what was loaded stays recorded");
    }

    fn ended(exit_code: Option<i32>, signal: Option<i32>, stderr: &str) -> Execution {
        Execution { exit_code, signal, stderr: stderr.into(), seconds: 1.0, warnings: Vec::new() }
    }

    #[test]
    fn a_harness_a_signal_ended_is_named_by_the_signal_and_its_likely_cause_never_a_backtrace_frame() {
        // What the harness printed when a 4 EiB input's allocation failed (RUST_BACKTRACE=1).
        let aborted = "memory allocation of 4611686018427387904 bytes failed\nstack backtrace:\n   0: std::alloc::rust_oom\n   \
                       1: __rustc::__rust_alloc_error_handler\n   2: alloc::alloc::handle_alloc_error\n   3: \
                       alloc::raw_vec::handle_error\n   4: npugate_harness::inputs::random\n             at ./src/inputs.rs:140:5\n\
                       note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.\n";
        let local = ended(None, Some(6), aborted);
        assert_eq!(local.status(), "killed by SIGABRT");
        assert_eq!(
            local.last_message(),
            "out of memory: the harness failed to allocate 4611686018427387904 bytes (4.0 EiB) at once"
        );
        // Under wine the same abort is Windows' fast-fail status, exit 9: the same account.
        assert_eq!(ended(Some(9), None, aborted).last_message(), local.last_message());
        let killed = ended(Some(137), Some(9), "");
        assert_eq!(killed.status(), "killed by SIGKILL");
        assert!(killed.last_message().contains("out-of-memory killer"), "{}", killed.last_message());
        assert_eq!(ended(None, Some(11), "").status(), "killed by SIGSEGV");
        assert!(ended(None, Some(11), "").last_message().contains("a crash in ONNX Runtime"));
        // A panic's frames are skipped: the harness's own line is its account.
        let panicked = "npugate-harness: error: internal error at harness/src/x.rs:3: boom (a bug in npugate-harness: please report it)\n\
                        stack backtrace:\n   0: __rustc::rust_begin_unwind\n   3: core::result::unwrap_failed\n";
        assert!(ended(Some(101), None, panicked).last_message().starts_with("npugate-harness: error: internal error"));
        assert_eq!(ended(Some(2), None, "npugate-harness: error: no session").status(), "exit 2");
    }
}
