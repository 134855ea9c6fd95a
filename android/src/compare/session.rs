//! One comparison on one target. Both models first get a placement run (the profiled and
//! reference passes that say where each node ran; its timed runs are discarded), then `rounds`
//! rounds in ABBA order — AB, BA, AB, … — each model a fresh harness session with only timed runs.
//!
//! Why a fresh session per round: the harness is one process per run, and a fresh process per
//! round samples what differs between sessions (thread placement, memory layout, an accelerator
//! context) as part of the round-to-round spread the interval is bootstrapped from; one long
//! session per model would hide it and make the interval too narrow. The cold start of each
//! session — session creation, the first inference (recorded apart) and the `--warmup` runs
//! (discarded) — never reaches the timed runs. Profiling and the reference pass run only in the
//! placement runs, so every timed round has the same settings and no extra heat.
//!
//! Layout of `out` (one per device in a rack):
//! `compare.json`, `report.html`, `baseline/placement/`, `baseline/round-01/` …,
//! `candidate/placement/`, `candidate/round-01/` …, each a result directory as `npugate run`
//! writes it (and `attempt-N/` holding whole sessions after a confirmation rerun).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use gate::compare::{judge_compare, CompareEvidence, CompareRules, CompareVerdict, First, RoundEvidence, SideEvidence};
use gate::export::{write_all, Format};
use harness_settings::HarnessSettings;
use npugate_result::files;

use crate::rack::Attempted;
use crate::run::{run_on, RunReport, RunSpec};
use crate::target::{Job, Progress, Target};

/// Directory of the baseline's runs inside a comparison.
pub const BASELINE_DIR: &str = "baseline";
/// Directory of the candidate's runs inside a comparison.
pub const CANDIDATE_DIR: &str = "candidate";
/// The placement run's directory inside a side's directory.
const PLACEMENT_DIR: &str = "placement";

/// One comparison to make.
#[derive(Debug, Clone, Copy)]
pub struct CompareSpec<'a> {
    /// The harness job both models share (its `model` is replaced by each side's; its settings are
    /// the user's measurement options).
    pub job: Job<'a>,
    /// The baseline model A.
    pub baseline: &'a Path,
    /// The candidate model B.
    pub candidate: &'a Path,
    /// Rounds of the session.
    pub rounds: usize,
    /// Timed runs of each model in each round.
    pub runs_per_round: u32,
    /// The rules it is judged by.
    pub rules: &'a CompareRules,
}

/// A finished comparison.
#[derive(Debug, Clone)]
pub struct CompareReport {
    /// Where it is (`compare.json` and every run).
    pub dir: PathBuf,
    /// The judgement, as saved in `compare.json`.
    pub verdict: CompareVerdict,
}

impl Attempted for CompareReport {
    fn result_dir(&self) -> PathBuf {
        self.dir.clone()
    }

    fn exit_code(&self) -> u8 {
        self.verdict.exit_code()
    }
}

impl CompareReport {
    /// Saves the verdict in `dir`: `compare.json` and `report.html`.
    pub fn save(&self) -> Result<()> {
        let path = self.dir.join(files::COMPARE);
        self.verdict.write(&path).with_context(|| format!("cannot write {}", path.display()))?;
        write_all(&self.verdict, &[Format::Html], Some(&self.dir.join(files::REPORT_HTML)))?;
        Ok(())
    }
}

/// The settings of the placement runs: the user's, with one timed run (discarded).
fn placement_settings(settings: &HarnessSettings) -> HarnessSettings {
    HarnessSettings { runs: 1, check_outputs: false, ..settings.clone() }
}

/// The settings of the timed rounds: the user's warm-up, `runs` timed runs, nothing after them.
fn round_settings(settings: &HarnessSettings, runs: u32) -> HarnessSettings {
    let mut round = HarnessSettings { runs, profile_runs: 0, no_reference_pass: true, check_outputs: false, ..settings.clone() };
    round.qnn.qnn_profiling = None;
    round
}

/// Runs the comparison `spec` on `target` into `out` and saves its verdict there.
pub fn compare_on(target: &dyn Target, spec: &CompareSpec<'_>, out: &Path, progress: &dyn Progress) -> Result<CompareReport> {
    for model in [spec.baseline, spec.candidate] {
        anyhow::ensure!(model.is_file(), "model {} not found", model.display());
    }
    clear(out)?;
    let cancel = spec.job.cancel;
    let placement = placement_settings(spec.job.settings);
    let timed = round_settings(spec.job.settings, spec.runs_per_round);
    let sides = [(BASELINE_DIR, spec.baseline), (CANDIDATE_DIR, spec.candidate)];
    let run = |model: &Path, settings: &HarnessSettings, dir: &str, step: &str| -> Result<RunReport> {
        if cancel.is_cancelled() {
            return Err(cancel.error());
        }
        progress.step(step);
        let job = Job { model, settings, ..spec.job };
        run_on(target, &RunSpec { job, gate: None, reference: None }, &out.join(dir), progress)
            .with_context(|| format!("{dir} ({})", model.display()))
    };
    let mut placed = Vec::new();
    for (side, model) in sides {
        placed.push(run(model, &placement, &format!("{side}/{PLACEMENT_DIR}"), &format!("placement {side}"))?);
    }
    let mut rounds: Vec<(First, RunReport, RunReport)> = Vec::with_capacity(spec.rounds);
    for index in 0..spec.rounds {
        let first = First::of_round(index);
        let order = match first {
            First::Baseline => [0, 1],
            First::Candidate => [1, 0],
        };
        let mut pair: [Option<RunReport>; 2] = [None, None];
        for side in order {
            let (name, model) = sides[side];
            let dir = format!("{name}/{}", round_dir(index));
            pair[side] = Some(run(model, &timed, &dir, &format!("round {}/{} {name}", index + 1, spec.rounds))?);
        }
        let [Some(a), Some(b)] = pair else { unreachable!("both sides ran") };
        rounds.push((first, a, b));
    }
    progress.step("judge");
    let mut errors = Vec::new();
    let all = placed.iter().chain(rounds.iter().flat_map(|(_, a, b)| [a, b]));
    for report in all {
        if !report.execution.succeeded() {
            errors.push(format!(
                "the harness failed ({}) in {}: {}",
                report.execution.status(),
                report.placed.dir().display(),
                report.execution.last_message()
            ));
        }
    }
    let placements: Vec<_> = placed.iter().map(|r| profile_parser::analyze_run(r.placed.dir(), &r.result).map_err(|e| e.to_string())).collect();
    let (a_dir, b_dir) = (format!("{BASELINE_DIR}/{PLACEMENT_DIR}"), format!("{CANDIDATE_DIR}/{PLACEMENT_DIR}"));
    let (a_run, b_run) = (&placed[0].result, &placed[1].result);
    let (a_model, b_model) = (spec.baseline.display().to_string(), spec.candidate.display().to_string());
    let evidence_rounds: Vec<RoundEvidence<'_>> = rounds
        .iter()
        .enumerate()
        .map(|(index, (first, a, b))| RoundEvidence {
            first: *first,
            baseline: &a.result,
            candidate: &b.result,
            baseline_dir: format!("{BASELINE_DIR}/{}", round_dir(index)),
            candidate_dir: format!("{CANDIDATE_DIR}/{}", round_dir(index)),
        })
        .collect();
    let evidence = CompareEvidence {
        target: target.name(),
        baseline: SideEvidence { model: &a_model, placement_run: a_run, placement: placements[0].as_ref().map_err(Clone::clone), placement_dir: &a_dir },
        candidate: SideEvidence { model: &b_model, placement_run: b_run, placement: placements[1].as_ref().map_err(Clone::clone), placement_dir: &b_dir },
        rounds: &evidence_rounds,
        errors,
    };
    let report = CompareReport { dir: out.to_path_buf(), verdict: judge_compare(&evidence, spec.rules) };
    report.save()?;
    Ok(report)
}

/// `round-01`, … (two digits keep them in order up to 99 rounds).
fn round_dir(index: usize) -> String {
    format!("round-{:02}", index + 1)
}

/// Makes `out` an empty directory: missing, empty, or holding only what a comparison writes
/// (it is replaced); anything else is refused.
fn clear(out: &Path) -> Result<()> {
    if out.is_dir() {
        let own = |name: &str| {
            [BASELINE_DIR, CANDIDATE_DIR, files::COMPARE, files::REPORT_HTML].contains(&name) || name.starts_with("attempt-")
        };
        for entry in std::fs::read_dir(out).with_context(|| format!("cannot read {}", out.display()))? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if !own(&name) {
                bail!("{} is not empty and holds no npugate comparison ({name}); choose another --out", out.display());
            }
        }
        std::fs::remove_dir_all(out).with_context(|| format!("cannot replace {}", out.display()))?;
    } else if out.exists() {
        bail!("{} is a file; --out needs a directory", out.display());
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))
}
