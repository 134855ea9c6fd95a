//! Several targets in parallel (one run per target at a time), each with its own progress line.
//! A target that fails or vanishes is an *infrastructure* failure for that target only; retryable
//! failures (transport, a backend that did not start) are retried up to `--retries` times; a judged
//! run (pass or gate failure) never is. A panic in one target's work is reported for that target
//! and the others finish; an interrupt stops every target before its next attempt.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use std::sync::Arc;

use npugate_result::contract::{self, EXIT_ERROR, EXIT_PASS};
use npugate_result::report::{json_of, Report};
use serde::{Deserialize, Serialize};

use crate::progress::{Event, Progress, Reporter, Silent};
use crate::targets::{is_retryable, Cancel, Target};

/// Schema of `rack.json`, the summary written next to the per-device result dirs.
pub const RACK_SCHEMA: &str = "npugate.rack/1";

/// How one target's work ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceOutcome {
    /// Device serial (or target name).
    pub serial: String,
    /// 0 pass, 1 a gate rule failed, 2 infrastructure failure / could not judge.
    pub exit_code: u8,
    /// Where its result is on the host (absent when nothing came back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_dir: Option<PathBuf>,
    /// The infrastructure error, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_error: Option<String>,
    /// Attempts made (1 + retries used).
    pub attempts: u32,
    /// The retryable errors that were retried, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retried_errors: Vec<String>,
    /// Wall time for this target, seconds.
    pub seconds: f64,
}

impl DeviceOutcome {
    /// One phrase for people: `pass`, `gate failed`, `could not judge (exit 2)` or the
    /// infrastructure failure.
    pub fn summary(&self) -> String {
        match (&self.infrastructure_error, self.exit_code) {
            (Some(error), _) => format!("infrastructure failure: {error}"),
            (None, 0) => "pass".into(),
            (None, 1) => "gate failed".into(),
            (None, code) => format!("could not judge (exit {code})"),
        }
    }
}

/// `rack.json`: every target's outcome and the overall exit code.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RackReport {
    /// Always [`RACK_SCHEMA`].
    pub schema: String,
    /// One entry per target, in the order they were given.
    pub devices: Vec<DeviceOutcome>,
    /// 2 if any target had an infrastructure failure, else 1 if any gate failed, else 0.
    pub exit_code: u8,
    /// Wall time of the whole rack, seconds.
    pub seconds: f64,
}

impl RackReport {
    /// One line per target: name, outcome in words, result directory (`-` when none came back).
    pub fn lines(&self) -> String {
        self.devices
            .iter()
            .map(|device| {
                let dir = device.result_dir.as_ref().map(|d| d.display().to_string()).unwrap_or_else(|| "-".into());
                format!("{}\t{}\t{dir}\n", device.serial, device.summary())
            })
            .collect()
    }
}

/// A rack's summary as a report: one line per target on a terminal, `rack.json` as JSON.
impl Report for RackReport {
    fn schema(&self) -> &str {
        &self.schema
    }
    fn exit_code(&self) -> u8 {
        self.exit_code
    }
    fn text(&self, _color: bool) -> String {
        self.lines()
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

impl contract::Document for RackReport {
    const SCHEMA: contract::Schema = contract::Schema::new(RACK_SCHEMA);
}

/// What a finished attempt on one target tells the rack: where its result is, and its exit code.
pub trait Attempted {
    /// The result directory on the host.
    fn result_dir(&self) -> PathBuf;
    /// 0 pass, 1 a rule failed, 2 could not be judged.
    fn exit_code(&self) -> u8;
}

/// A rack that ran: the summary (`rack.json`) and each target's finished work, in target order.
#[derive(Debug)]
pub struct Rack<R> {
    /// Every target's outcome.
    pub report: RackReport,
    /// What each target's last attempt produced (`None` when it failed).
    pub results: Vec<Option<R>>,
}

/// How a rack retries, stops and reports.
#[derive(Clone)]
pub struct RackPolicy {
    /// Extra attempts after a retryable failure.
    pub retries: u32,
    /// Pause before a retry.
    pub retry_pause: Duration,
    /// Stops every target before its next attempt.
    pub cancel: Cancel,
    /// Where every target's progress goes.
    pub reporter: Arc<dyn Reporter>,
}

impl RackPolicy {
    /// One attempt per target, stopped by `cancel`, reported nowhere (tests, racks inside a command).
    pub fn once(cancel: &Cancel) -> RackPolicy {
        RackPolicy { retries: 0, retry_pause: Duration::ZERO, cancel: cancel.clone(), reporter: Arc::new(Silent) }
    }
}

impl std::fmt::Debug for RackPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RackPolicy").field("retries", &self.retries).field("retry_pause", &self.retry_pause).finish()
    }
}

/// Runs `attempt(target, progress)` on every target in parallel, retrying retryable failures; each
/// target's progress, retries and end go to the policy's reporter.
pub fn run_rack<T: Target + ?Sized, R: Attempted + Send>(
    targets: &[&T],
    policy: &RackPolicy,
    attempt: impl Fn(&T, &Progress<'_>) -> anyhow::Result<R> + Sync,
) -> Rack<R> {
    let start = Instant::now();
    let reporter = policy.reporter.as_ref();
    reporter.report(&Event::Began { targets: targets.iter().map(|t| t.name()).collect() });
    let outcomes = std::thread::scope(|scope| {
        let handles: Vec<_> = targets
            .iter()
            .map(|target| {
                let attempt = &attempt;
                scope.spawn(move || {
                    let (outcome, finished) = run_with_retries(*target, policy, attempt);
                    let summary = outcome.summary();
                    let finished_event =
                        Event::Finished { target: target.name(), exit_code: outcome.exit_code, summary: &summary };
                    reporter.report(&finished_event);
                    (outcome, finished)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("a target's thread catches its panics"))
            .collect::<Vec<_>>()
    });
    reporter.report(&Event::Ended);
    let (devices, results): (Vec<DeviceOutcome>, Vec<Option<R>>) = outcomes.into_iter().unzip();
    let exit_code = devices.iter().map(|d| d.exit_code).max().unwrap_or(EXIT_PASS);
    Rack {
        report: RackReport { schema: RACK_SCHEMA.into(), devices, exit_code, seconds: start.elapsed().as_secs_f64() },
        results,
    }
}

fn run_with_retries<T: Target + ?Sized, R: Attempted>(
    target: &T,
    policy: &RackPolicy,
    attempt: &(dyn Fn(&T, &Progress<'_>) -> anyhow::Result<R> + Sync),
) -> (DeviceOutcome, Option<R>) {
    let start = Instant::now();
    let progress = Progress::new(target.name(), policy.reporter.as_ref());
    let mut outcome = DeviceOutcome {
        serial: target.name().to_string(),
        exit_code: EXIT_ERROR,
        result_dir: None,
        infrastructure_error: None,
        attempts: 0,
        retried_errors: Vec::new(),
        seconds: 0.0,
    };
    let mut finished = None;
    loop {
        if policy.cancel.is_cancelled() {
            outcome.infrastructure_error = Some("interrupted".into());
            break;
        }
        outcome.attempts += 1;
        let result = catch_unwind(AssertUnwindSafe(|| attempt(target, &progress))).unwrap_or_else(|panic| {
            Err(anyhow::anyhow!("npugate panicked while working on {}: {}", target.name(), panic_message(&*panic)))
        });
        match result {
            Ok(done) => {
                (outcome.result_dir, outcome.exit_code) = (Some(done.result_dir()), done.exit_code());
                finished = Some(done);
                break;
            }
            Err(error)
                if is_retryable(&error) && outcome.attempts <= policy.retries && !policy.cancel.is_cancelled() =>
            {
                let error = format!("{error:#}");
                policy.reporter.report(&Event::Retry {
                    target: target.name(),
                    attempt: outcome.attempts,
                    retries: policy.retries,
                    error: &error,
                });
                outcome.retried_errors.push(error);
                std::thread::sleep(policy.retry_pause);
            }
            Err(error) => {
                outcome.infrastructure_error = Some(format!("{error:#}"));
                break;
            }
        }
    }
    outcome.seconds = start.elapsed().as_secs_f64();
    (outcome, finished)
}

/// The text of a panic payload.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::mock::{Behaviour, MockTarget};
    use crate::targets::Job;
    use npugate_settings::HarnessSettings;

    /// A judged run in the tests: a directory and an exit code.
    struct Judged(PathBuf, u8);

    impl Attempted for Judged {
        fn result_dir(&self) -> PathBuf {
            self.0.clone()
        }
        fn exit_code(&self) -> u8 {
            self.1
        }
    }

    fn policy(retries: u32) -> RackPolicy {
        RackPolicy { retries, ..RackPolicy::once(&Cancel::new()) }
    }

    /// An attempt that runs a job on the mock with a short timeout; a run judges as `exit_code`.
    fn attempt(
        exit_code: u8,
        cancel: &Cancel,
    ) -> impl Fn(&MockTarget, &Progress<'_>) -> anyhow::Result<Judged> + Sync + '_ {
        move |target, progress| {
            let dir = tempfile::tempdir()?;
            let settings = HarnessSettings::default();
            let runtime = npugate_host::runtime::RuntimeManifest::for_tests(dir.path());
            let job = Job::new(dir.path(), &runtime, dir.path(), &settings, Duration::from_millis(200), cancel);
            target.execute(&job, dir.path(), progress)?;
            Ok(Judged(PathBuf::from(target.name()), exit_code))
        }
    }

    #[test]
    fn one_target_failing_one_timing_out_and_one_panicking_leave_the_others_finished() {
        let cancel = Cancel::new();
        let targets = [
            MockTarget::new("ok-1", vec![Behaviour::Measure(vec![1_000; 3])]),
            MockTarget::new("fails", vec![Behaviour::Fail("runtime targets aarch64".into())]),
            MockTarget::new("hangs", vec![Behaviour::Hang]),
            MockTarget::new("panics", vec![Behaviour::Panic("index out of bounds".into())]),
            MockTarget::new("ok-2", vec![Behaviour::Measure(vec![1_000; 3])]),
        ];
        let refs: Vec<&MockTarget> = targets.iter().collect();
        let report = run_rack(&refs, &policy(0), attempt(0, &cancel)).report;
        let by_name = |name: &str| report.devices.iter().find(|d| d.serial == name).unwrap();
        for ok in ["ok-1", "ok-2"] {
            assert_eq!((by_name(ok).exit_code, by_name(ok).infrastructure_error.as_deref()), (0, None), "{report:?}");
        }
        assert!(by_name("fails").infrastructure_error.as_deref().unwrap().contains("runtime targets aarch64"));
        assert!(by_name("hangs").infrastructure_error.as_deref().unwrap().contains("timed out"), "{report:?}");
        let panicked = by_name("panics").infrastructure_error.as_deref().unwrap();
        assert!(panicked.contains("panicked") && panicked.contains("index out of bounds"), "{panicked}");
        assert_eq!(report.exit_code, EXIT_ERROR);
        assert_eq!(report.devices.len(), 5);
    }

    #[test]
    fn transport_failures_and_timeouts_are_retried_and_gate_failures_are_not() {
        let cancel = Cancel::new();
        let flaky = MockTarget::new(
            "flaky",
            vec![Behaviour::Transport("closed".into()), Behaviour::Hang, Behaviour::Measure(vec![1; 3])],
        );
        let report = run_rack(&[&flaky], &policy(2), attempt(0, &cancel)).report;
        assert_eq!((report.devices[0].attempts, report.devices[0].exit_code), (3, 0), "{report:?}");
        assert!(report.devices[0].retried_errors[0].contains("device flaky: closed"), "{report:?}");
        assert!(report.devices[0].retried_errors[1].contains("timed out"), "{report:?}");

        let failing_gate = MockTarget::new("gate", vec![Behaviour::Measure(vec![1; 3])]);
        let report = run_rack(&[&failing_gate], &policy(3), attempt(1, &cancel)).report;
        assert_eq!((failing_gate.calls(), report.devices[0].exit_code, report.exit_code), (1, 1, 1));

        let broken = MockTarget::new("x", vec![Behaviour::Fail("runtime targets aarch64".into())]);
        let report = run_rack(&[&broken], &policy(3), attempt(0, &cancel)).report;
        assert_eq!((broken.calls(), report.exit_code), (1, EXIT_ERROR), "final errors are not retried");
    }

    #[test]
    fn a_rack_reports_every_target_through_one_event_stream() {
        #[derive(Default)]
        struct Kept(std::sync::Mutex<Vec<String>>);
        impl Reporter for Kept {
            fn report(&self, event: &Event<'_>) {
                self.0.lock().unwrap().push(serde_json::to_string(event).unwrap());
            }
        }
        let cancel = Cancel::new();
        let kept = Arc::new(Kept::default());
        let flaky =
            MockTarget::new("flaky", vec![Behaviour::Transport("closed".into()), Behaviour::Measure(vec![1; 3])]);
        let policy = RackPolicy { retries: 1, reporter: kept.clone(), ..RackPolicy::once(&cancel) };
        run_rack(&[&flaky], &policy, attempt(0, &cancel));
        let events = kept.0.lock().unwrap().clone();
        assert_eq!(events.first().map(String::as_str), Some(r#"{"event":"began","targets":["flaky"]}"#));
        assert_eq!(
            events.iter().filter(|e| e.as_str() == r#"{"event":"step","target":"flaky","step":"run"}"#).count(),
            2
        );
        assert!(
            events.iter().any(|e| e.starts_with(
                r#"{"event":"retry","target":"flaky","attempt":1,"retries":1,"error":"device flaky: closed"#
            )),
            "{events:?}"
        );
        assert!(
            events.contains(&r#"{"event":"finished","target":"flaky","exit_code":0,"summary":"pass"}"#.to_string()),
            "{events:?}"
        );
        assert_eq!(events.last().map(String::as_str), Some(r#"{"event":"ended"}"#));
    }

    #[test]
    fn a_dead_device_is_retried_up_to_the_limit_and_keeps_the_others() {
        let cancel = Cancel::new();
        let (a, dead, c) = (
            MockTarget::new("a", vec![Behaviour::Measure(vec![1; 3])]),
            MockTarget::new("dead", vec![Behaviour::Transport("not reachable".into())]),
            MockTarget::new("c", vec![Behaviour::Measure(vec![1; 3])]),
        );
        let report = run_rack(&[&a, &dead, &c], &policy(1), attempt(0, &cancel)).report;
        assert_eq!(report.exit_code, EXIT_ERROR);
        assert_eq!((report.devices[1].exit_code, report.devices[1].attempts), (EXIT_ERROR, 2));
        assert!(report.devices[1].infrastructure_error.as_deref().unwrap().contains("not reachable"));
        assert!(report.devices.iter().filter(|d| d.serial != "dead").all(|d| d.result_dir.is_some()));
    }

    #[test]
    fn an_interrupt_stops_a_hanging_target_and_is_not_retried() {
        let cancel = Cancel::new();
        let hangs = MockTarget::new("hangs", vec![Behaviour::Hang]);
        let mut policy = policy(5);
        policy.cancel = cancel.clone();
        let stopper = std::thread::spawn({
            let cancel = cancel.clone();
            move || {
                std::thread::sleep(Duration::from_millis(50));
                cancel.cancel();
            }
        });
        let long = |target: &MockTarget, progress: &Progress<'_>| -> anyhow::Result<Judged> {
            let dir = tempfile::tempdir()?;
            let settings = HarnessSettings::default();
            let runtime = npugate_host::runtime::RuntimeManifest::for_tests(dir.path());
            let job = Job::new(dir.path(), &runtime, dir.path(), &settings, Duration::from_secs(60), &cancel);
            target.execute(&job, dir.path(), progress)?;
            Ok(Judged(PathBuf::new(), 0))
        };
        let started = Instant::now();
        let report = run_rack(&[&hangs], &policy, long).report;
        stopper.join().unwrap();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!((hangs.calls(), report.exit_code), (1, EXIT_ERROR));
        assert!(report.devices[0].infrastructure_error.as_deref().unwrap().contains("interrupted"), "{report:?}");
    }
}
