//! Progress as one stream of typed events, after cargo-nextest's runner/reporter split: the work
//! (a target deploying and running, a rack retrying and finishing) says what happens as [`Event`]s
//! through a [`Progress`] handle, and one [`Reporter`], chosen once by the command line, decides
//! what the user sees — a progress bar per target on a terminal ([`Bars`]), plain lines
//! ([`Lines`]), one JSON object per event ([`JsonLines`]) or nothing ([`Silent`]).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

/// Schema of a [`JsonLines`] event line.
pub const EVENT_SCHEMA: &str = "npugate.event/1";

/// Something that happened to the work of one command.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event<'a> {
    /// Work on these targets begins, each in parallel.
    Began {
        /// The targets, in order.
        targets: Vec<&'a str>,
    },
    /// A target started a step (`probe`, `deploy`, `run`, `judge`, …).
    Step {
        /// The target.
        target: &'a str,
        /// The step, in a few words.
        step: &'a str,
    },
    /// A target is about to push `bytes`.
    PushTotal {
        /// The target.
        target: &'a str,
        /// Bytes to push.
        bytes: u64,
    },
    /// A target pushed `bytes` more.
    Pushed {
        /// The target.
        target: &'a str,
        /// Bytes pushed since the last event.
        bytes: u64,
    },
    /// A target's harness finished one inference (emulated inferences, seconds each).
    Inference {
        /// The target.
        target: &'a str,
        /// Which inferences: `first`, `warmup`, `timed`, `outputs`, `profiled`, `reference`.
        phase: &'a str,
        /// Inferences of the phase done.
        done: u32,
        /// Inferences of the phase planned.
        total: u32,
        /// The run's time left, estimated from the inferences done so far, seconds.
        seconds_left: f64,
    },
    /// A line worth keeping in the log (a wait for a device lock, a stopped orphan), shown by every
    /// reporter but [`Silent`].
    Note {
        /// The target.
        target: &'a str,
        /// The line.
        line: &'a str,
    },
    /// An attempt on a target failed in a way worth another (device gone, a timeout).
    Retry {
        /// The target.
        target: &'a str,
        /// The attempt that failed (1 = the first).
        attempt: u32,
        /// Retries allowed.
        retries: u32,
        /// Why it failed.
        error: &'a str,
    },
    /// A target's work ended.
    Finished {
        /// The target.
        target: &'a str,
        /// 0 pass, 1 a rule failed, 2 could not judge.
        exit_code: u8,
        /// How, in words (`pass`, `gate failed`, the infrastructure failure).
        summary: &'a str,
    },
    /// Every target's work ended.
    Ended,
}

/// Shows events to the user; called from every target's thread.
pub trait Reporter: Send + Sync {
    /// Shows one event.
    fn report(&self, event: &Event<'_>);
}

/// One target's side of the stream: what a target and the stages of a run call as they go.
#[derive(Clone, Copy)]
pub struct Progress<'a> {
    target: &'a str,
    reporter: &'a dyn Reporter,
}

impl<'a> Progress<'a> {
    /// Events of `target`, to `reporter`.
    pub fn new(target: &'a str, reporter: &'a dyn Reporter) -> Progress<'a> {
        Progress { target, reporter }
    }

    /// Events that go nowhere.
    pub fn silent() -> Progress<'static> {
        Progress { target: "", reporter: &Silent }
    }

    /// A new step started (`deploy`, `run`, …).
    pub fn step(&self, step: &str) {
        self.reporter.report(&Event::Step { target: self.target, step });
    }

    /// `bytes` are about to be pushed.
    pub fn push_total(&self, bytes: u64) {
        self.reporter.report(&Event::PushTotal { target: self.target, bytes });
    }

    /// `bytes` more were pushed.
    pub fn pushed(&self, bytes: u64) {
        self.reporter.report(&Event::Pushed { target: self.target, bytes });
    }

    /// Inference `done` of `total` of `phase` finished; the run has `seconds_left`.
    pub fn inference(&self, phase: &str, done: u32, total: u32, seconds_left: f64) {
        self.reporter.report(&Event::Inference { target: self.target, phase, done, total, seconds_left });
    }

    /// A line worth keeping in the log.
    pub fn note(&self, line: &str) {
        self.reporter.report(&Event::Note { target: self.target, line });
    }
}

/// Shows nothing (tests, work nested in a command that reports on its own).
pub struct Silent;

impl Reporter for Silent {
    fn report(&self, _event: &Event<'_>) {}
}

/// Plain lines on stderr, for logs: notes, retries and inferences, each `npugate: …`; steps are
/// not shown.
pub struct Lines;

/// `timed 3/20, about 4 minutes left`: an [`Event::Inference`] in words.
fn inference_line(phase: &str, done: u32, total: u32, seconds_left: f64) -> String {
    let left = std::time::Duration::from_secs_f64(seconds_left.max(0.0));
    format!("{phase} {done}/{total}, about {} left", indicatif::HumanDuration(left))
}

impl Reporter for Lines {
    fn report(&self, event: &Event<'_>) {
        match event {
            Event::Note { line, .. } => eprintln!("npugate: {line}"),
            Event::Inference { target, phase, done, total, seconds_left } => {
                eprintln!("npugate: {target}: {}", inference_line(phase, *done, *total, *seconds_left))
            }
            Event::Retry { target, attempt, retries, error } => {
                eprintln!("npugate: {target}: retry {attempt}/{retries} after: {error}")
            }
            _ => {}
        }
    }
}

/// One JSON object per event on stderr (`{"schema":"npugate.event/1","event":"step",…}`), for tools.
pub struct JsonLines;

impl Reporter for JsonLines {
    fn report(&self, event: &Event<'_>) {
        #[derive(Serialize)]
        struct Line<'e, 'a> {
            schema: &'static str,
            #[serde(flatten)]
            event: &'e Event<'a>,
        }
        if let Ok(text) = serde_json::to_string(&Line { schema: EVENT_SCHEMA, event }) {
            let _ = writeln!(std::io::stderr().lock(), "{text}");
        }
    }
}

/// A progress line per target (its step, the bytes of a push) under an overall bar, on stderr.
pub struct Bars {
    multi: MultiProgress,
    state: Mutex<BarsState>,
}

/// The bars of a [`Bars`] reporter: the overall one and one per target.
#[derive(Default)]
struct BarsState {
    overall: Option<ProgressBar>,
    lines: BTreeMap<String, ProgressBar>,
    width: usize,
}

impl Bars {
    /// Bars drawn on stderr.
    pub fn new() -> Bars {
        Bars::drawn_on(ProgressDrawTarget::stderr())
    }

    fn drawn_on(target: ProgressDrawTarget) -> Bars {
        Bars { multi: MultiProgress::with_draw_target(target), state: Mutex::new(BarsState::default()) }
    }

    /// The line of `target`, made when first needed.
    fn line(&self, state: &mut BarsState, target: &str) -> ProgressBar {
        if let Some(line) = state.lines.get(target) {
            return line.clone();
        }
        let bar = self.multi.add(ProgressBar::new(0));
        bar.set_style(ProgressStyle::with_template("{prefix} {msg}").expect("static template"));
        bar.set_prefix(format!("{target:width$}", width = state.width));
        state.lines.insert(target.to_string(), bar.clone());
        bar
    }
}

impl Default for Bars {
    fn default() -> Bars {
        Bars::new()
    }
}

impl Reporter for Bars {
    fn report(&self, event: &Event<'_>) {
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match event {
            Event::Began { targets } => {
                state.width = targets.iter().map(|t| t.len()).max().unwrap_or(0);
                let overall = self.multi.add(ProgressBar::new(targets.len() as u64));
                overall.set_style(
                    ProgressStyle::with_template("runs {pos}/{len} [{elapsed}] {wide_bar}").expect("static template"),
                );
                state.overall = Some(overall);
                for target in targets {
                    self.line(&mut state, target);
                }
            }
            Event::Step { target, step } => self.line(&mut state, target).set_message(step.to_string()),
            Event::PushTotal { target, bytes } => {
                let line = self.line(&mut state, target);
                line.set_style(
                    ProgressStyle::with_template("{prefix} {msg:20} {bytes:>10}/{total_bytes:10} {bar:30}")
                        .expect("static template"),
                );
                line.set_length(*bytes);
                line.set_position(0);
            }
            Event::Inference { target, phase, done, total, seconds_left } => {
                let line = self.line(&mut state, target);
                line.set_style(ProgressStyle::with_template("{prefix} {msg:40} {bar:30}").expect("static template"));
                line.set_length(u64::from(*total));
                line.set_position(u64::from(*done));
                line.set_message(inference_line(phase, *done, *total, *seconds_left));
            }
            Event::Pushed { target, bytes } => self.line(&mut state, target).inc(*bytes),
            Event::Note { line, .. } => self.multi.suspend(|| eprintln!("npugate: {line}")),
            Event::Retry { target, attempt, retries, error } => {
                self.line(&mut state, target).set_message(format!("retry {attempt}/{retries} after: {error}"))
            }
            Event::Finished { target, summary, .. } => {
                self.line(&mut state, target).finish_with_message(summary.to_string());
                if let Some(overall) = &state.overall {
                    overall.inc(1);
                }
            }
            Event::Ended => {
                if let Some(overall) = state.overall.take() {
                    overall.finish_and_clear();
                }
            }
        }
    }
}

/// How progress is shown (`npugate --progress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// Bars on a terminal, lines otherwise.
    Auto,
    /// [`Bars`].
    Bars,
    /// [`Lines`].
    Lines,
    /// [`JsonLines`].
    Json,
    /// [`Silent`].
    Nothing,
}

impl Shown {
    /// The reporter this choice makes, on this process's stderr.
    pub fn reporter(self) -> Box<dyn Reporter> {
        match self {
            Shown::Auto if std::io::stderr().is_terminal() => Box::new(Bars::new()),
            Shown::Auto | Shown::Lines => Box::new(Lines),
            Shown::Bars => Box::new(Bars::new()),
            Shown::Json => Box::new(JsonLines),
            Shown::Nothing => Box::new(Silent),
        }
    }
}

/// A reporter for tests: keeps every event as its JSON line.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Recorded(pub(crate) Mutex<Vec<String>>);

#[cfg(test)]
impl Reporter for Recorded {
    fn report(&self, event: &Event<'_>) {
        self.0.lock().unwrap().push(serde_json::to_string(event).unwrap());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_reports_typed_events_through_its_handle() {
        let recorded = Recorded::default();
        let progress = Progress::new("phone-a", &recorded);
        progress.step("deploy");
        progress.push_total(10);
        progress.pushed(4);
        progress.note("waiting for the device lock");
        assert_eq!(
            *recorded.0.lock().unwrap(),
            [
                r#"{"event":"step","target":"phone-a","step":"deploy"}"#,
                r#"{"event":"push_total","target":"phone-a","bytes":10}"#,
                r#"{"event":"pushed","target":"phone-a","bytes":4}"#,
                r#"{"event":"note","target":"phone-a","line":"waiting for the device lock"}"#,
            ]
        );
    }

    #[test]
    fn bars_follow_the_events_of_every_target() {
        let bars = Bars::drawn_on(ProgressDrawTarget::hidden());
        bars.report(&Event::Began { targets: vec!["a", "bb"] });
        bars.report(&Event::Step { target: "bb", step: "run" });
        bars.report(&Event::PushTotal { target: "a", bytes: 100 });
        bars.report(&Event::Pushed { target: "a", bytes: 40 });
        {
            let state = bars.state.lock().unwrap();
            assert_eq!((state.lines["a"].position(), state.lines["a"].length()), (40, Some(100)));
        }
        bars.report(&Event::Inference { target: "bb", phase: "timed", done: 2, total: 20, seconds_left: 250.0 });
        {
            let state = bars.state.lock().unwrap();
            assert_eq!((state.lines["bb"].position(), state.lines["bb"].length()), (2, Some(20)));
            assert_eq!(state.lines["bb"].message(), "timed 2/20, about 4 minutes left");
        }
        bars.report(&Event::Step { target: "bb", step: "run" });
        bars.report(&Event::Finished { target: "a", exit_code: 0, summary: "pass" });
        {
            let state = bars.state.lock().unwrap();
            assert_eq!(state.lines["bb"].message(), "run");
            assert_eq!(state.lines["a"].message(), "pass");
            assert_eq!(state.overall.as_ref().map(ProgressBar::position), Some(1));
            assert_eq!(state.lines["a"].prefix(), "a ", "names padded to the longest");
        }
        bars.report(&Event::Step { target: "late", step: "run" });
        bars.report(&Event::Ended);
        let state = bars.state.lock().unwrap();
        assert!(state.overall.is_none() && state.lines.contains_key("late"));
    }
}
