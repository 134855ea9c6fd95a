//! One comparison on one target. Both models first get a placement run (the profiled and
//! reference passes that say where each node ran; its timed runs are discarded), then `rounds`
//! rounds in ABBA order — AB, BA, AB, … — each model a fresh harness session with only timed runs.
//!
//! Sequential: after the rounds the comparison is judged (look 1). While the slowdown rule is
//! undecided — its interval reaches both sides of the limit — the session measures more rounds,
//! half as many again as it has ([`next_look`]), and looks again at that look's level
//! (`npugate_gate::stats::look_alpha`), until it decides, reaches [`MAX_ROUNDS`], or the next look
//! would end after the time budget (`--budget`); only then is the rule not judged.
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
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use npugate_gate::compare::{
    judge_compare, CompareEvidence, CompareRules, CompareVerdict, First, RoundEvidence, SideEvidence,
};
use npugate_result::files;
use npugate_result::report::{write_all, Format};
use npugate_settings::HarnessSettings;

use crate::layout::Ownership;
use crate::model::GivenModel;
use crate::progress::Progress;
use crate::rack::Attempted;
use crate::run::{run_on, RunReport, RunSpec};
use crate::targets::{Job, Target};

/// Directory of the baseline's runs inside a comparison.
pub const BASELINE_DIR: &str = "baseline";
/// Directory of the candidate's runs inside a comparison.
pub const CANDIDATE_DIR: &str = "candidate";
/// The placement run's directory inside a side's directory.
const PLACEMENT_DIR: &str = "placement";
/// Rounds a comparison measures at most (`round-01` … `round-99`).
pub const MAX_ROUNDS: usize = 99;
/// The default time budget of a comparison (`--budget`): what a pull-request check can wait.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(300);

/// One comparison to make.
#[derive(Debug, Clone, Copy)]
pub struct CompareSpec<'a> {
    /// The harness job both models share (its `model` is replaced by each side's; its settings are
    /// the user's measurement options).
    pub job: Job<'a>,
    /// The baseline model A, as the command looked at it.
    pub baseline: &'a GivenModel,
    /// The candidate model B, as the command looked at it.
    pub candidate: &'a GivenModel,
    /// The source models of a compiled baseline and candidate, in that order, as the command
    /// looked at them (`crate::compiled::ReferenceChoice::source`): their placement runs'
    /// reference pass runs them and counts the compiled model in their nodes and FLOPs.
    pub sources: [Option<&'a GivenModel>; 2],
    /// Rounds of the session's first look.
    pub rounds: usize,
    /// How long an undecided comparison may go on measuring more rounds (from its start).
    pub budget: Duration,
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
        write_all(&self.verdict, &[Format::Html], &self.dir.join(files::REPORT_HTML))?;
        Ok(())
    }
}

/// The settings of the placement runs: the user's, with one timed run (discarded).
fn placement_settings(settings: &HarnessSettings) -> HarnessSettings {
    HarnessSettings { runs: 1, check_outputs: false, ..settings.clone() }
}

/// The settings of the timed rounds: the user's warm-up, `runs` timed runs, nothing after them.
fn round_settings(settings: &HarnessSettings, runs: u32) -> HarnessSettings {
    let mut round =
        HarnessSettings { runs, profile_runs: 0, no_reference_pass: true, check_outputs: false, ..settings.clone() };
    round.qnn.qnn_profiling = None;
    round
}

/// Runs the comparison `spec` on `target` into `out` and saves its verdict there.
pub fn compare_on(
    target: &dyn Target,
    spec: &CompareSpec<'_>,
    out: &Path,
    progress: &Progress<'_>,
) -> Result<CompareReport> {
    clear(out)?;
    let started = Instant::now();
    let session = Session { target, spec, out, progress };
    let placed = session.run_placements()?;
    let rounds_started = Instant::now();
    let mut rounds = session.run_rounds(0..spec.rounds)?;
    let mut look = 1;
    let verdict = loop {
        progress.step("judge");
        let verdict = judge_session(target, spec, &placed, &rounds, look, None);
        if !verdict.undecided() {
            break verdict;
        }
        let per_round = rounds_started.elapsed() / rounds.len().max(1) as u32;
        match next_look(rounds.len(), per_round, started.elapsed(), spec.budget) {
            Ok(next) => {
                rounds.extend(session.run_rounds(rounds.len()..next)?);
                look += 1;
            }
            Err(stopped) => break judge_session(target, spec, &placed, &rounds, look, Some(stopped)),
        }
    };
    let report = CompareReport { dir: out.to_path_buf(), verdict };
    report.save()?;
    Ok(report)
}

/// The rounds in all of the next look after `rounds`: half as many again (at least 2 more, at most
/// [`MAX_ROUNDS`]), or why there is none — the rounds' limit, or the next look would end after
/// `budget` at `per_round` each with `elapsed` gone.
pub fn next_look(rounds: usize, per_round: Duration, elapsed: Duration, budget: Duration) -> Result<usize, String> {
    let next = (rounds + rounds.div_ceil(2).max(2)).min(MAX_ROUNDS);
    if next <= rounds {
        return Err(format!("the session stopped at {rounds} rounds, the most a comparison measures"));
    }
    let ends = elapsed + per_round * (next - rounds) as u32;
    if ends > budget {
        return Err(format!(
            "the session stopped: {} more rounds at {:.1} s each after {:.0} s would pass its time budget of {:.0} s \
             (--budget)",
            next - rounds,
            per_round.as_secs_f64(),
            elapsed.as_secs_f64(),
            budget.as_secs_f64()
        ));
    }
    Ok(next)
}

/// One side of a session: its folder name, its model, the source model of a compiled one.
type SessionSide<'a> = (&'static str, &'a GivenModel, Option<&'a GivenModel>);

/// A session's runs: both models on one target, into folders of `out`.
struct Session<'s, 'a, 'p> {
    /// Where every run goes.
    target: &'s dyn Target,
    /// The models, the shared job, the rounds.
    spec: &'s CompareSpec<'a>,
    /// The comparison's folder.
    out: &'s Path,
    /// Where each run's step is shown.
    progress: &'s Progress<'p>,
}

/// Both models' timed runs of one round, in side order (baseline, candidate).
type RoundRuns = (First, RunReport, RunReport);

impl<'a> Session<'_, 'a, '_> {
    /// The baseline's and the candidate's side, in that order.
    fn sides(&self) -> [SessionSide<'a>; 2] {
        [
            (BASELINE_DIR, self.spec.baseline, self.spec.sources[0]),
            (CANDIDATE_DIR, self.spec.candidate, self.spec.sources[1]),
        ]
    }

    /// Runs one side's model with `settings` into `<out>/<dir>`, shown as `step`; stops if the
    /// session was cancelled.
    fn run(&self, side: SessionSide<'a>, settings: &HarnessSettings, dir: &str, step: &str) -> Result<RunReport> {
        let (_, model, source) = side;
        let cancel = self.spec.job.cancel;
        if cancel.is_cancelled() {
            return Err(cancel.error());
        }
        self.progress.step(step);
        let job = Job { model: &model.path, given: Some(model), reference_model: source, settings, ..self.spec.job };
        run_on(self.target, &RunSpec { job, gate: None, reference: None }, &self.out.join(dir), self.progress)
            .with_context(|| format!("{dir} ({})", model.path.display()))
    }

    /// Each model's placement run (profiled, one timed run), baseline first.
    fn run_placements(&self) -> Result<Vec<RunReport>> {
        let placement = placement_settings(self.spec.job.settings);
        let mut placed = Vec::new();
        for side in self.sides() {
            let name = side.0;
            placed.push(self.run(
                side,
                &placement,
                &format!("{name}/{PLACEMENT_DIR}"),
                &format!("placement {name}"),
            )?);
        }
        Ok(placed)
    }

    /// The timed rounds `indices` (from 0), each model once per round, which goes first alternating
    /// by round.
    fn run_rounds(&self, indices: std::ops::Range<usize>) -> Result<Vec<RoundRuns>> {
        let spec = self.spec;
        let timed = round_settings(spec.job.settings, spec.runs_per_round);
        let sides = self.sides();
        let mut rounds: Vec<RoundRuns> = Vec::with_capacity(indices.len());
        for index in indices.clone() {
            let first = First::of_round(index);
            let order = match first {
                First::Baseline => [0, 1],
                First::Candidate => [1, 0],
            };
            let mut pair: [Option<RunReport>; 2] = [None, None];
            for side in order {
                let name = sides[side].0;
                let dir = format!("{name}/{}", round_dir(index));
                pair[side] = Some(self.run(
                    sides[side],
                    &timed,
                    &dir,
                    &format!("round {}/{} {name}", index + 1, indices.end),
                )?);
            }
            let [Some(a), Some(b)] = pair else { unreachable!("both sides ran") };
            rounds.push((first, a, b));
        }
        Ok(rounds)
    }
}

/// One sentence for each run whose harness failed, placement runs first.
fn harness_errors(placed: &[RunReport], rounds: &[RoundRuns]) -> Vec<String> {
    let all = placed.iter().chain(rounds.iter().flat_map(|(_, a, b)| [a, b]));
    all.filter(|report| !report.execution.succeeded())
        .map(|report| {
            format!(
                "the harness failed ({}) in {}: {}",
                report.execution.status(),
                report.placed.dir().display(),
                report.execution.last_message()
            )
        })
        .collect()
}

/// Judges the session's runs at `look`: both placements (computed from the placement runs), every
/// round, the failed harnesses, by `spec.rules`; `stopped` says why no more rounds will be measured.
fn judge_session(
    target: &dyn Target,
    spec: &CompareSpec<'_>,
    placed: &[RunReport],
    rounds: &[RoundRuns],
    look: usize,
    stopped: Option<String>,
) -> CompareVerdict {
    let errors = harness_errors(placed, rounds);
    let placements: Vec<_> = placed
        .iter()
        .map(|r| npugate_profile::analyze_run(r.placed.dir(), &r.result).map_err(|e| e.to_string()))
        .collect();
    let (a_dir, b_dir) = (format!("{BASELINE_DIR}/{PLACEMENT_DIR}"), format!("{CANDIDATE_DIR}/{PLACEMENT_DIR}"));
    let (a_run, b_run) = (&placed[0].result, &placed[1].result);
    let (a_model, b_model) = (spec.baseline.path.display().to_string(), spec.candidate.path.display().to_string());
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
        baseline: SideEvidence {
            model: &a_model,
            placement_run: a_run,
            placement: placements[0].as_ref().map_err(Clone::clone),
            placement_dir: &a_dir,
        },
        candidate: SideEvidence {
            model: &b_model,
            placement_run: b_run,
            placement: placements[1].as_ref().map_err(Clone::clone),
            placement_dir: &b_dir,
        },
        rounds: &evidence_rounds,
        errors,
        look,
        stopped,
    };
    judge_compare(&evidence, spec.rules)
}

/// `round-01`, … (two digits keep them in order up to 99 rounds).
fn round_dir(index: usize) -> String {
    format!("round-{:02}", index + 1)
}

/// Makes `out` an empty directory: missing, empty, or a comparison of npugate's (it is replaced,
/// also when cut short); anything else is refused.
fn clear(out: &Path) -> Result<()> {
    const COMPARISON: Ownership = Ownership {
        marker: files::COMPARE,
        what: "npugate comparison",
        own_names: &[BASELINE_DIR, CANDIDATE_DIR, files::REPORT_HTML, "attempt-*"],
    };
    COMPARISON.replace(out, "--out")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use npugate_gate::verdict::Outcome;
    use npugate_gate::{Baseline, Rules};
    use npugate_result::RunResult;

    use super::*;
    use crate::confirm::run_confirmed;
    use crate::pipeline::{self, GateSpec, OutputsCheck};
    use crate::progress::Progress;
    use crate::targets::mock::{Behaviour, MockTarget, Simulated};
    use crate::targets::Cancel;
    use npugate_host::hash_cache::HashCache;
    use npugate_host::runtime::RuntimeManifest;

    const ROUNDS: usize = 10;

    /// A work dir with `a.onnx`, its copy `a_copy.onnx` and `b.onnx`.
    fn models() -> tempfile::TempDir {
        let work = tempfile::tempdir().unwrap();
        crate::model::testing::identity_model(&work.path().join("a.onnx"), &[Some(1), Some(3)]);
        std::fs::copy(work.path().join("a.onnx"), work.path().join("a_copy.onnx")).unwrap();
        crate::model::testing::identity_model(&work.path().join("b.onnx"), &[Some(1), Some(4)]);
        work
    }

    /// A simulated device: a.onnx and its copy 1 ms, b.onnx `b_ns`, ±3% noise, `load` per call.
    fn device(b_ns: u64, load: fn(usize, &str) -> f64) -> MockTarget {
        let base_ns = vec![("a.onnx".into(), 1_000_000), ("a_copy.onnx".into(), 1_000_000), ("b.onnx".into(), b_ns)];
        MockTarget::new("sim-1", vec![Behaviour::Simulate(Simulated { base_ns, noise_pct: 3.0, load })])
    }

    fn steady(_: usize, _: &str) -> f64 {
        1.0
    }

    /// Compares `baseline` with `candidate` (files in `work`) on `target` into `work/out`, `confirm` reruns.
    fn compare(target: &MockTarget, work: &Path, baseline: &str, candidate: &str, confirm: u32) -> CompareReport {
        let settings = HarnessSettings::default();
        let runtime = RuntimeManifest::for_tests(work);
        let cancel = Cancel::new();
        let rules = CompareRules::default();
        let (a, b) = (work.join(baseline), work.join(candidate));
        let job = Job::new(&a, &runtime, &a, &settings, Duration::from_secs(5), &cancel);
        let [given_a, given_b] = [&a, &b].map(|model| GivenModel::read(model, &HashCache::default_cache()).unwrap());
        let spec = CompareSpec {
            job,
            baseline: &given_a,
            candidate: &given_b,
            sources: [None, None],
            rounds: ROUNDS,
            budget: DEFAULT_BUDGET,
            runs_per_round: 20,
            rules: &rules,
        };
        run_confirmed(confirm, &work.join("out"), |dir| compare_on(target, &spec, dir, &Progress::silent())).unwrap()
    }

    #[test]
    fn each_side_runs_with_its_own_source_model_as_the_reference() {
        let work = models();
        let target = device(1_000_000, steady);
        let (settings, runtime, cancel, rules) = (
            HarnessSettings::default(),
            RuntimeManifest::for_tests(work.path()),
            Cancel::new(),
            CompareRules::default(),
        );
        let (a, b) = (work.path().join("a.onnx"), work.path().join("b.onnx"));
        let source_b = work.path().join("a_copy.onnx");
        let job = Job::new(&a, &runtime, &a, &settings, Duration::from_secs(5), &cancel);
        let [given_a, given_b, given_source_b] =
            [&a, &b, &source_b].map(|model| GivenModel::read(model, &HashCache::default_cache()).unwrap());
        let spec = CompareSpec {
            job,
            baseline: &given_a,
            candidate: &given_b,
            sources: [None, Some(&given_source_b)],
            rounds: 2,
            budget: Duration::ZERO,
            runs_per_round: 5,
            rules: &rules,
        };
        compare_on(&target, &spec, &work.path().join("out"), &Progress::silent()).unwrap();
        let jobs = target.jobs();
        assert_eq!(jobs.len(), 6, "two placement runs and two rounds of two: {jobs:?}");
        for (model, reference) in jobs {
            assert_eq!(reference, (model == b).then(|| source_b.clone()), "{}", model.display());
        }
    }

    #[test]
    fn a_ten_percent_slower_candidate_is_found_and_every_run_is_on_disk() {
        let work = models();
        let target = device(1_100_000, steady);
        let report = compare(&target, work.path(), "a.onnx", "b.onnx", 0);
        let v = &report.verdict;
        let paired = v.paired.as_ref().unwrap();
        assert!(paired.ci.lower > 1.05 && (paired.ratio - 1.10).abs() < 0.01, "{paired:?}");
        assert_eq!((v.outcome, report.exit_code()), (Outcome::Fail, 1), "{:#?}", v.checks);
        assert_eq!(target.calls(), 2 + 2 * ROUNDS, "two placement runs, then two runs per round");
        let out = work.path().join("out");
        assert_eq!(CompareVerdict::read(&out.join(files::COMPARE)).unwrap().rounds.len(), ROUNDS);
        for dir in ["baseline/placement", "candidate/placement", "baseline/round-01", "candidate/round-10"] {
            assert!(out.join(dir).join(files::RESULT).is_file(), "{dir}");
        }
        assert!(out.join(files::REPORT_HTML).is_file());
        assert_eq!(RunResult::read(&out.join("candidate/round-03")).unwrap().timings.latencies_ns.len(), 20);
        assert_eq!(
            RunResult::read(&out.join("candidate/placement")).unwrap().timings.latencies_ns.len(),
            1,
            "placement runs time one run"
        );
        assert!(v.baseline.placement.is_some() && v.placement_differences.is_empty());
    }

    #[test]
    fn a_model_against_its_identical_copy_passes_with_an_interval_spanning_one() {
        let work = models();
        let report = compare(&device(1_000_000, steady), work.path(), "a.onnx", "a_copy.onnx", 0);
        let paired = report.verdict.paired.as_ref().unwrap();
        assert!(paired.ci.lower <= 1.0 && paired.ci.upper >= 1.0, "{paired:?}");
        assert_eq!(report.verdict.outcome, Outcome::Pass, "{:#?}", report.verdict.checks);
        // Running again into the same directory replaces the comparison.
        let again = compare(&device(1_000_000, steady), work.path(), "a.onnx", "a_copy.onnx", 0);
        assert_eq!(again.verdict.outcome, Outcome::Pass);
    }

    /// Background load from the 12th harness launch on (half of the rounds): 40% slower.
    fn load_halfway(call: usize, _: &str) -> f64 {
        if call >= 2 + ROUNDS {
            1.4
        } else {
            1.0
        }
    }

    #[test]
    fn load_halfway_moves_both_sides_so_compare_passes_while_the_stored_baseline_gate_fails_on_the_same_runs() {
        let work = models();
        let report = compare(&device(1_000_000, load_halfway), work.path(), "a.onnx", "a_copy.onnx", 0);
        assert_eq!(report.verdict.outcome, Outcome::Pass, "{:#?}", report.verdict.checks);
        assert!(report.verdict.baseline.session_drift.as_ref().unwrap().change_pct > 30.0);
        assert!(report.verdict.warnings[0].starts_with("the device drifted +"), "{:?}", report.verdict.warnings);

        // The same runs through the stored-baseline gate: A's first round saved as the baseline
        // (last week's cool device), B's last round judged against it (the PR on the busy device).
        let out = work.path().join("out");
        let saved = out.join("baseline/round-01");
        let run = RunResult::read(&saved).unwrap();
        let placement = npugate_profile::analyze_run(&saved, &run).unwrap();
        let baseline = Baseline::from_run(&run, Some(&placement), "baseline/round-01").unwrap();
        let rules = Rules::load(None, &["disable=[\"cv_pct\", \"npu_flops_pct\"]".into()]).unwrap();
        let spec = GateSpec { rules, baseline: Some(baseline), ..GateSpec::default() };
        let current = out.join(format!("candidate/round-{ROUNDS}"));
        let verdict =
            pipeline::judge(&current, &RunResult::read(&current).unwrap(), &OutputsCheck::NotRequested, &spec);
        assert_eq!(verdict.outcome, Outcome::Fail, "{:#?}", verdict.checks);
        assert!(verdict.failures().all(|c| c.rule == npugate_gate::RuleName::BaselineMedianPct));
    }

    /// b.onnx 30% slower during the first session only (2 + 2·ROUNDS launches): a one-off.
    fn b_slow_once(call: usize, model: &str) -> f64 {
        if model == "b.onnx" && call < 2 + 2 * ROUNDS {
            1.3
        } else {
            1.0
        }
    }

    #[test]
    fn confirm_2_passes_a_one_off_slow_session_and_fails_a_reproducible_one_with_all_three_attempts() {
        let work = models();
        let target = device(1_000_000, b_slow_once);
        let report = compare(&target, work.path(), "a.onnx", "b.onnx", 2);
        let confirmation = report.verdict.confirmation.as_ref().unwrap();
        assert_eq!(confirmation.sentence(), "failed 1 of 3, passed on confirmation");
        assert_eq!((report.verdict.outcome, confirmation.representative), (Outcome::Pass, 3));
        assert_eq!(target.calls(), 3 * (2 + 2 * ROUNDS));
        let out = work.path().join("out");
        let saved = CompareVerdict::read(&out.join(files::COMPARE)).unwrap();
        assert_eq!(saved.confirmation.as_ref().unwrap().attempts.len(), 3);
        for attempt in 1..=3 {
            let kept = CompareVerdict::read(&out.join(format!("attempt-{attempt}")).join(files::COMPARE)).unwrap();
            assert!(kept.confirmation.is_none(), "each attempt keeps its own verdict");
            assert_eq!(kept.outcome, if attempt == 1 { Outcome::Fail } else { Outcome::Pass });
        }
        assert!(
            out.join("baseline/round-01").join(files::RESULT).is_file(),
            "the reported attempt's runs are in place"
        );

        let work = models();
        let report = compare(&device(1_300_000, steady), work.path(), "a.onnx", "b.onnx", 2);
        let confirmation = report.verdict.confirmation.as_ref().unwrap();
        assert_eq!(confirmation.sentence(), "failed 3 of 3: the failure reproduced");
        assert_eq!((report.verdict.outcome, report.exit_code()), (Outcome::Fail, 1));
        assert!(
            confirmation.attempts.iter().all(|a| a.headline.as_deref().is_some_and(|h| h.starts_with("B/A 1.3"))),
            "{confirmation:?}"
        );
    }
}
