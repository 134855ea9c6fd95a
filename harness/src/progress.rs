//! A line on stderr after each inference under `--progress` ([`InferenceProgress`]): the host
//! shows progress per inference where inferences are slow (the HTP emulator, seconds each). Off,
//! every call is one relaxed load; on, the line is written between inferences, never inside a
//! clock read.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use npugate_settings::{HarnessCommand, InferenceProgress};

static ENABLED: AtomicBool = AtomicBool::new(false);
/// Inferences of the run still to come.
static LEFT: AtomicU32 = AtomicU32::new(0);

/// Turns progress on when `args` ask for it, with every inference the run will do counted: the
/// first, warmup, timed (the last of which leaves the outputs `--check-outputs` saves), profiled
/// and the reference pass's.
pub fn plan(args: &HarnessCommand, reference_pass: bool) {
    if !args.progress {
        return;
    }
    let settings = &args.settings;
    let measured = match settings.session_only {
        true => u32::from(settings.execute_once),
        false => 1 + settings.warmup + settings.runs + settings.profile_runs,
    };
    LEFT.store(measured + u32::from(reference_pass), Ordering::Relaxed);
    ENABLED.store(true, Ordering::Relaxed);
}

/// `more` inferences were added to the plan (timed runs extended while undecided).
pub fn planned_more(more: u32) {
    LEFT.fetch_add(more, Ordering::Relaxed);
}

/// Inference `done` of `total` of `phase` took `took`.
pub fn done(phase: &str, done: u32, total: u32, took: Duration) {
    if !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    let left = LEFT.load(Ordering::Relaxed).saturating_sub(1);
    LEFT.store(left, Ordering::Relaxed);
    let line = InferenceProgress { phase: phase.into(), done, total, seconds: took.as_secs_f64(), left }.line();
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
