//! Confirmation reruns on disk (`--confirm K` of `run` and `compare`). When the first attempt fails
//! only latency rules, it moves to `<out>/attempt-1/`, K more attempts run into
//! `<out>/attempt-2/` …, and the attempt that stands for the decision (`npugate_gate::confirm`: fail when
//! more than half failed) is linked into `<out>` itself with its verdict carrying every attempt —
//! so `<out>` stays a complete result that `npugate gate` and evidence bundles read as before, and
//! no attempt is hidden. Each attempt goes through the target again, which waits for
//! `--cooldown-until` first when it is set. Without `--confirm`, a latency failure of a run during
//! which the machine was busy is confirmed by `CONTENTION_RERUNS` reruns all the same.

use std::path::Path;

use anyhow::{Context, Result};
use npugate_gate::confirm::{median_headline, worth_confirming, Attempt, Confirmation, CONTENTION_RERUNS};
use npugate_gate::rules::RuleName;
use npugate_gate::verdict::Outcome;
use npugate_result::contract::EXIT_ERROR;
use npugate_result::files;

use crate::compare::CompareReport;
use crate::layout::{link_tree, Placed};
use crate::run::RunReport;

/// A judged attempt the confirmation loop can count and finish.
pub trait Confirmable: Sized {
    /// Its outcome; `error` when it could not be judged.
    fn outcome(&self) -> Outcome;
    /// The rules it failed.
    fn failed_rules(&self) -> Vec<RuleName>;
    /// Its headline latency for the attempts table.
    fn headline(&self) -> Option<String>;
    /// The machine's contention during it, in a phrase, when the machine was busy.
    fn contention(&self) -> Option<String> {
        None
    }
    /// This attempt, which ran in `dir`, as the final result in `out`: its files linked into `out`
    /// and its verdict, carrying `confirmation`, saved there.
    fn finish(self, dir: &Path, confirmation: Confirmation, out: &Path) -> Result<Self>;
}

/// Runs `attempt(dir)` into `out`; when it fails only latency rules, runs it `confirm` more times
/// — [`CONTENTION_RERUNS`] times when `confirm` is 0 and the machine was busy — and returns the
/// attempt that stands for the majority decision.
pub fn run_confirmed<R: Confirmable>(
    confirm: u32,
    out: &Path,
    mut attempt: impl FnMut(&Path) -> Result<R>,
) -> Result<R> {
    let first = attempt(out)?;
    if first.outcome() != Outcome::Fail || !worth_confirming(&first.failed_rules()) {
        return Ok(first);
    }
    let (confirm, contention) = match (confirm, first.contention()) {
        (0, None) => return Ok(first),
        (0, Some(contention)) => (CONTENTION_RERUNS, Some(contention)),
        (asked, _) => (asked, None),
    };
    move_into(out, &attempt_dir_name(1))?;
    let mut reports = vec![(out.join(attempt_dir_name(1)), first)];
    for number in 2..=confirm + 1 {
        let dir = out.join(attempt_dir_name(number));
        let report = attempt(&dir)?;
        reports.push((dir, report));
    }
    let attempts: Vec<Attempt> = reports
        .iter()
        .zip(1..)
        .map(|((_, report), number)| Attempt {
            attempt: number,
            dir: attempt_dir_name(number),
            outcome: report.outcome(),
            failed_rules: report.failed_rules(),
            headline: report.headline(),
        })
        .collect();
    let confirmation = Confirmation { contention, ..Confirmation::decide(confirm, attempts) };
    let (dir, representative) = reports.swap_remove(confirmation.representative as usize - 1);
    representative.finish(&dir, confirmation, out)
}

/// `attempt-1`, …
fn attempt_dir_name(number: u32) -> String {
    format!("attempt-{number}")
}

/// Moves the directory `out` to `out/<name>`.
fn move_into(out: &Path, name: &str) -> Result<()> {
    let aside = out.with_file_name(format!(
        ".{}.{name}",
        out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    ));
    std::fs::rename(out, &aside).with_context(|| format!("cannot move {} aside", out.display()))?;
    std::fs::create_dir(out).with_context(|| format!("cannot create {}", out.display()))?;
    std::fs::rename(&aside, out.join(name))
        .with_context(|| format!("cannot move the first attempt into {}", out.join(name).display()))
}

impl Confirmable for RunReport {
    fn outcome(&self) -> Outcome {
        match &self.verdict {
            // NOT JUDGED exits 2 too, and is no error of the run.
            Some(verdict) if self.exit_code != EXIT_ERROR || verdict.outcome == Outcome::NotJudged => verdict.outcome,
            Some(_) => Outcome::Error,
            None => Outcome::Pass,
        }
    }

    fn failed_rules(&self) -> Vec<RuleName> {
        self.verdict.iter().flat_map(|v| v.failures().map(|c| c.rule)).collect()
    }

    fn headline(&self) -> Option<String> {
        median_headline(self.verdict.as_ref().and_then(|v| v.latency.as_ref()).map(|s| s.median_ns))
    }

    fn contention(&self) -> Option<String> {
        self.verdict.as_ref()?.contention.as_ref().filter(|c| c.busy()).map(|c| c.phrase())
    }

    fn finish(mut self, dir: &Path, confirmation: Confirmation, out: &Path) -> Result<RunReport> {
        link_tree(dir, out, &[files::VERDICT, files::REPORT_HTML])?;
        if let Some(verdict) = self.verdict.as_mut() {
            verdict.confirmation = Some(confirmation);
            crate::pipeline::save(verdict, out)?;
        }
        self.placed = Placed::Out(out.to_path_buf());
        Ok(self)
    }
}

impl Confirmable for CompareReport {
    fn outcome(&self) -> Outcome {
        self.verdict.outcome
    }

    fn failed_rules(&self) -> Vec<RuleName> {
        self.verdict
            .checks
            .iter()
            .filter(|c| c.status == npugate_gate::verdict::CheckStatus::Fail)
            .map(|c| c.rule)
            .collect()
    }

    fn headline(&self) -> Option<String> {
        self.verdict.paired.as_ref().map(|p| format!("B/A {:.3}× ({:.3}–{:.3}×)", p.ratio, p.ci.lower, p.ci.upper))
    }

    fn finish(mut self, dir: &Path, confirmation: Confirmation, out: &Path) -> Result<CompareReport> {
        link_tree(dir, out, &[files::COMPARE, files::REPORT_HTML])?;
        self.verdict.confirmation = Some(confirmation);
        self.dir = out.to_path_buf();
        self.save()?;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use npugate_gate::Rules;

    use super::*;
    use crate::pipeline::GateSpec;
    use crate::progress::Progress;
    use crate::run::{run_on, RunSpec};
    use crate::targets::mock::{Behaviour, MockJob, MockTarget, Simulated};

    /// The first run 50% slower: a one-off (a shared rack's hiccup).
    fn first_slow(call: usize, _: &str) -> f64 {
        if call == 0 {
            1.5
        } else {
            1.0
        }
    }

    fn always_slow(_: usize, _: &str) -> f64 {
        1.5
    }

    /// `npugate run` with `median_ms = 1.2` (1 ms model) on a simulated device, `confirm` reruns.
    fn run(
        load: fn(usize, &str) -> f64,
        extra_rules: &[&str],
        confirm: u32,
    ) -> (RunReport, MockTarget, tempfile::TempDir) {
        let mock = MockJob::new();
        let target = MockTarget::new(
            "sim",
            vec![Behaviour::Simulate(Simulated { base_ns: vec![("m.onnx".into(), 1_000_000)], noise_pct: 2.0, load })],
        );
        let mut overrides = vec!["median_ms=1.2".to_string(), "disable=[\"cv_pct\", \"npu_flops_pct\"]".to_string()];
        overrides.extend(extra_rules.iter().map(|r| r.to_string()));
        let gate = GateSpec { rules: Rules::load(None, &overrides).unwrap(), ..GateSpec::default() };
        let spec = RunSpec { job: mock.job(), gate: Some(&gate), reference: None };
        let out = mock.work.path().join("out");
        let report = run_confirmed(confirm, &out, |dir| run_on(&target, &spec, dir, &Progress::silent())).unwrap();
        let MockJob { work, .. } = mock;
        (report, target, work)
    }

    #[test]
    fn a_one_off_slow_run_passes_on_confirmation_with_every_attempt_kept() {
        let (report, target, work) = run(first_slow, &[], 2);
        let out = work.path().join("out");
        let verdict = report.verdict.as_ref().unwrap();
        let confirmation = verdict.confirmation.as_ref().unwrap();
        assert_eq!(confirmation.sentence(), "failed 1 of 3, passed on confirmation");
        assert_eq!((verdict.outcome, report.exit_code, target.calls()), (Outcome::Pass, 0, 3));
        assert_eq!(confirmation.attempts[0].failed_rules, [RuleName::MedianMs]);
        assert!(confirmation.attempts[0].headline.as_deref().unwrap().starts_with("median 1.4"), "{confirmation:?}");
        let saved = npugate_gate::Verdict::read(&out.join(files::VERDICT)).unwrap();
        assert_eq!(saved.confirmation.as_ref().unwrap().failed, 1);
        assert!(std::fs::read_to_string(out.join(files::REPORT_HTML))
            .unwrap()
            .contains("failed 1 of 3, passed on confirmation"));
        for attempt in 1..=3 {
            let dir = out.join(format!("attempt-{attempt}"));
            assert!(
                dir.join(files::RESULT).is_file()
                    && npugate_gate::Verdict::read(&dir.join(files::VERDICT)).unwrap().confirmation.is_none()
            );
        }
        assert!(out.join(files::RESULT).is_file(), "the result dir stays complete for `npugate gate`");
        assert_eq!(report.placed.dir(), out);
    }

    #[test]
    fn a_reproducible_slowdown_fails_with_all_three_attempts() {
        let (report, target, work) = run(always_slow, &[], 2);
        let verdict = report.verdict.as_ref().unwrap();
        assert_eq!(verdict.confirmation.as_ref().unwrap().sentence(), "failed 3 of 3: the failure reproduced");
        assert_eq!((verdict.outcome, report.exit_code, target.calls()), (Outcome::Fail, 1, 3));
        let text = std::fs::read_to_string(work.path().join("out").join(files::REPORT_HTML)).unwrap();
        assert!(
            ["attempt-1", "attempt-2", "attempt-3"].iter().all(|a| text.contains(a)),
            "the report lists every attempt"
        );
    }

    #[test]
    fn placement_failures_and_passes_are_never_rerun() {
        let (report, target, _work) = run(always_slow, &["npu_nodes_pct=100"], 2);
        assert_eq!((report.exit_code, target.calls()), (1, 1), "a placement failure is deterministic");
        assert!(report.verdict.as_ref().unwrap().confirmation.is_none());
        let (report, target, _work) = run(|_, _| 1.0, &[], 2);
        assert_eq!((report.exit_code, target.calls()), (0, 1));
        let (report, target, _work) = run(always_slow, &[], 0);
        assert_eq!((report.exit_code, target.calls()), (1, 1), "without --confirm nothing reruns");
    }
}
