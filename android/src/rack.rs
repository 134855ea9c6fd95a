//! Several devices in parallel (one run per device at a time), each with its own progress line.
//! A device that fails or vanishes is an *infrastructure* failure for that device only; transport
//! failures are retried up to `--retries` times; a judged run (pass or gate failure) never is.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::adb::AdbError;
use crate::device_run::Progress;

/// Schema of `rack.json`, the summary written next to the per-device result dirs.
pub const RACK_SCHEMA: &str = "npugate.rack/1";
/// File name of the rack summary.
pub const RACK_FILE: &str = "rack.json";

/// How one device's run ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceOutcome {
    /// Device serial.
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
    /// The transport errors that were retried, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retried_errors: Vec<String>,
    /// Wall time for this device, seconds.
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

/// `rack.json`: every device's outcome and the overall exit code.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RackReport {
    /// Always [`RACK_SCHEMA`].
    pub schema: String,
    /// One entry per device, in the order they were chosen.
    pub devices: Vec<DeviceOutcome>,
    /// 2 if any device had an infrastructure failure, else 1 if any gate failed, else 0.
    pub exit_code: u8,
    /// Wall time of the whole rack, seconds.
    pub seconds: f64,
}

/// What one attempt on one device produced: where the result is and its judged exit code.
pub type Judged = (PathBuf, u8);

/// Runs `attempt(serial, progress)` on every device in parallel, retrying transport failures.
pub fn run_rack(
    serials: &[String],
    retries: u32,
    attempt: impl Fn(&str, &dyn Progress) -> anyhow::Result<Judged> + Sync,
) -> RackReport {
    let start = Instant::now();
    let multi = MultiProgress::with_draw_target(draw_target());
    let overall = multi.add(ProgressBar::new(serials.len() as u64));
    overall
        .set_style(ProgressStyle::with_template("runs {pos}/{len} [{elapsed}] {wide_bar}").expect("static template"));
    let width = serials.iter().map(String::len).max().unwrap_or(0);
    let devices = std::thread::scope(|scope| {
        let handles: Vec<_> = serials
            .iter()
            .map(|serial| {
                let line = DeviceLine::new(&multi, serial, width);
                let (attempt, overall) = (&attempt, &overall);
                scope.spawn(move || {
                    let outcome = run_with_retries(serial, retries, &line, attempt);
                    line.finish(&outcome);
                    overall.inc(1);
                    outcome
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("device thread panicked")).collect::<Vec<_>>()
    });
    overall.finish_and_clear();
    let exit_code = overall_exit(&devices);
    RackReport { schema: RACK_SCHEMA.into(), devices, exit_code, seconds: start.elapsed().as_secs_f64() }
}

fn run_with_retries(
    serial: &str,
    retries: u32,
    line: &DeviceLine,
    attempt: &(dyn Fn(&str, &dyn Progress) -> anyhow::Result<Judged> + Sync),
) -> DeviceOutcome {
    let start = Instant::now();
    let mut attempts = 0;
    let mut retried_errors = Vec::new();
    loop {
        attempts += 1;
        let result = attempt(serial, line);
        let seconds = start.elapsed().as_secs_f64();
        match result {
            Ok((dir, exit_code)) => {
                return DeviceOutcome {
                    serial: serial.into(),
                    exit_code,
                    result_dir: Some(dir),
                    infrastructure_error: None,
                    attempts,
                    retried_errors,
                    seconds,
                }
            }
            Err(error) if is_transient(&error) && attempts <= retries => {
                line.step(&format!("retry {attempts}/{retries} after: {error:#}"));
                retried_errors.push(format!("{error:#}"));
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(error) => {
                return DeviceOutcome {
                    serial: serial.into(),
                    exit_code: crate::EXIT_ERROR,
                    result_dir: None,
                    infrastructure_error: Some(format!("{error:#}")),
                    attempts,
                    retried_errors,
                    seconds,
                }
            }
        }
    }
}

/// True when the error chain holds a transport failure of adb (device gone, timeout).
pub fn is_transient(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| cause.downcast_ref::<AdbError>().is_some_and(AdbError::is_transient))
}

/// 2 if any device had an infrastructure failure, else 1 if any gate failed, else 0.
fn overall_exit(devices: &[DeviceOutcome]) -> u8 {
    devices.iter().map(|d| d.exit_code).max().unwrap_or(crate::EXIT_PASS)
}

/// Progress bars only on an interactive terminal.
fn draw_target() -> ProgressDrawTarget {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}

/// One device's progress line: the current step, and bytes during pushes.
struct DeviceLine {
    bar: ProgressBar,
}

impl DeviceLine {
    fn new(multi: &MultiProgress, serial: &str, width: usize) -> DeviceLine {
        let bar = multi.add(ProgressBar::new(0));
        let style = ProgressStyle::with_template("{prefix} {msg:20} {bytes:>10}/{total_bytes:10} {bar:30}")
            .expect("static template");
        bar.set_style(style);
        bar.set_prefix(format!("{serial:width$}"));
        DeviceLine { bar }
    }

    fn finish(&self, outcome: &DeviceOutcome) {
        self.bar.finish_with_message(outcome.summary());
    }
}

impl Progress for DeviceLine {
    fn step(&self, what: &str) {
        self.bar.set_message(what.to_string());
    }
    fn push_total(&self, total: u64) {
        self.bar.set_length(total);
        self.bar.set_position(0);
    }
    fn pushed(&self, bytes: u64) {
        self.bar.inc(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn gone(serial: &str) -> anyhow::Error {
        anyhow::Error::new(AdbError::DeviceGone {
            serial: serial.into(),
            step: "push".into(),
            state: "offline".into(),
            message: "error: closed".into(),
        })
        .context("deploy")
    }

    #[test]
    fn transport_failures_are_retried_and_gate_failures_are_not() {
        let calls = AtomicU32::new(0);
        let serials = vec!["flaky".to_string(), "gate".to_string()];
        let report = run_rack(&serials, 2, |serial, _| match serial {
            "flaky" if calls.fetch_add(1, Ordering::SeqCst) == 0 => Err(gone(serial)),
            "flaky" => Ok((PathBuf::from("flaky"), 0)),
            _ => Ok((PathBuf::from("gate"), 1)),
        });
        assert_eq!(report.devices[0].attempts, 2);
        assert_eq!(report.devices[0].exit_code, 0);
        assert!(report.devices[0].retried_errors[0].contains("device flaky"), "{:?}", report.devices[0]);
        assert_eq!(report.devices[1].attempts, 1);
        assert_eq!(report.exit_code, 1);
    }

    #[test]
    fn one_infrastructure_failure_makes_exit_2_and_keeps_the_others() {
        let serials = vec!["a".to_string(), "dead".to_string(), "c".to_string()];
        let report = run_rack(&serials, 1, |serial, _| match serial {
            "dead" => Err(gone(serial)),
            other => Ok((PathBuf::from(other), 0)),
        });
        assert_eq!(report.exit_code, 2);
        let dead = &report.devices[1];
        assert_eq!((dead.exit_code, dead.attempts), (2, 2));
        assert!(dead.infrastructure_error.as_deref().unwrap().contains("not reachable"));
        assert!(report.devices.iter().filter(|d| d.serial != "dead").all(|d| d.result_dir.is_some()));
    }

    #[test]
    fn non_transport_errors_are_not_retried() {
        let report = run_rack(&["x".to_string()], 3, |_, _| Err(anyhow::anyhow!("runtime targets aarch64")));
        assert_eq!((report.devices[0].attempts, report.exit_code), (1, 2));
    }
}
