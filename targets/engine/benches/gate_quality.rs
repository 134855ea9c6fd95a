//! `scripts/bench-gate`: the default rules' false-alarm and detection rates, in one run.
//!
//! 1. Labelled series (`npugate_engine::scenarios`: clean device runs, preemption spikes with and
//!    without their schedstat record, a two-level clock with and without its record, thermal
//!    drift, partial fallbacks with and without placement evidence, a fallback under preemption),
//!    `BENCH_SERIES` seeds each, replayed on the mock target through the whole pipeline of
//!    `npugate run` with the default rules: run → placement → judge → the bounded confirmation
//!    rerun of a latency failure on a busy machine. A failure of a noise-only series is a false
//!    alarm; of a planted fallback, a detection.
//! 2. Real `npugate run --local` runs (`BENCH_LOCAL_RUNS` each; 0 skips them) while a CPU burner
//!    keeps each core busy: PP-OCR's text direction classifier, unchanged (noise only), and a
//!    planted fallback (`fallback_det.onnx` on the OpenVINO EP, whose `Det` runs on the CPU).
//!
//! Environment: `BENCH_SERIES` (default 200), `BENCH_LOCAL_RUNS` (default 20), `NPUGATE_BIN`
//! (default `target/release/npugate`), `NPUGATE_CACHE` (runtimes and models as `scripts/setup`
//! leaves them).

//! `scripts/bench-gate`: the default rules' error rates and power, in one run.
//!
//! 1. Labelled series (`npugate_engine::scenarios`: clean device runs, preemption spikes with and
//!    without their schedstat record, a two-level clock with and without its record, thermal
//!    drift, partial fallbacks with and without placement evidence, a fallback under preemption),
//!    `BENCH_SERIES` seeds each, replayed on the mock target through the whole pipeline of
//!    `npugate run` with the default rules: run → placement → judge → the bounded confirmation
//!    rerun of a latency failure on a busy machine. A failure of a noise-only series is a false
//!    alarm; of a planted fallback, a detection.
//! 2. `npugate compare` on the mock target's simulated device (the replayed device series of the
//!    comparison): B 0%, +10%, +20%, +50% slower than A, every harness launch slowed 1.0–3.7× at
//!    random on half the launches (the round-ratio spread issue 44 measured; no CPU-wait record, so
//!    nothing is set aside), `BENCH_MOCK_REPS` sessions each, the sequential design to 99 rounds.
//! 3. Real runs on this machine per load level — quiet, one CPU burner, one per core
//!    (`BENCH_LEVELS`, default `quiet,one,two`) — of a ≈1 ms model (`convstack(30)` of
//!    scripts/make-test-models: 30 identical Conv/Relu blocks) and its planted slowdowns (33, 36 and
//!    45 blocks: +10%, +20%, +50% of the work), and a planted fallback (`fallback_det.onnx` on the
//!    OpenVINO EP, whose `Det` runs on the CPU): `npugate run --local` (`BENCH_RUN_REPS` each; the
//!    unchanged model by the default rules, the slowed ones against a baseline of the unchanged
//!    model saved at the same load level, `--force` across the model digest) and `npugate compare --local` against the unchanged model
//!    (`BENCH_COMPARE_REPS` each, `--budget BENCH_COMPARE_BUDGET`; the fallback against
//!    `convstack(30)` on the OpenVINO EP). Shares of PASS / FAIL / NOT JUDGED and the median wall
//!    time per verdict.
//!
//! Environment: `BENCH_SERIES` (default 200), `BENCH_MOCK_REPS` (20), `BENCH_RUN_REPS` (10),
//! `BENCH_COMPARE_REPS` (3),
//! `BENCH_COMPARE_BUDGET` (300 s), `BENCH_LEVELS`, `NPUGATE_BIN` (default
//! `target/release/npugate`), `NPUGATE_CACHE` (runtimes, venv and models as `scripts/setup`
//! leaves them). `BENCH_RUN_REPS=0` skips the real runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use npugate_e2e::CpuBurner;
use npugate_engine::compare::{compare_on, CompareSpec};
use npugate_engine::confirm::run_confirmed;
use npugate_engine::model::GivenModel;
use npugate_engine::pipeline::GateSpec;
use npugate_engine::progress::Progress;
use npugate_engine::run::{run_on, RunSpec};
use npugate_engine::scenarios::Scenario;
use npugate_engine::targets::mock::{Behaviour, MockJob, MockTarget, Simulated};
use npugate_engine::targets::Job;
use npugate_gate::compare::{CompareRules, CompareVerdict};
use npugate_gate::verdict::Outcome;
use npugate_gate::Verdict;

/// Verdicts counted by outcome.
#[derive(Default)]
struct Tally {
    pass: usize,
    fail: usize,
    not_judged: usize,
    error: usize,
    /// Runs the target made, confirmation reruns included.
    runs: usize,
}

impl Tally {
    fn count(&mut self, outcome: Outcome, runs: usize) {
        match outcome {
            // The bench judges by rules: a run is never only measured.
            Outcome::Pass | Outcome::Measured => self.pass += 1,
            Outcome::Fail => self.fail += 1,
            Outcome::NotJudged => self.not_judged += 1,
            Outcome::Error => self.error += 1,
        }
        self.runs += runs;
    }

    fn total(&self) -> usize {
        self.pass + self.fail + self.not_judged + self.error
    }

    fn row(&self, label: &str, rate: &str) -> String {
        format!(
            "{label:<52} {:>6} {:>5} {:>5} {:>10} {:>5} {:>6.2}  {rate}",
            self.total(),
            self.pass,
            self.fail,
            self.not_judged,
            self.error,
            self.runs as f64 / self.total().max(1) as f64
        )
    }
}

const HEADER: &str =
    "series                                               verdicts  PASS  FAIL  NOT JUDGED ERROR  runs/verdict";

fn pct(part: usize, whole: usize) -> String {
    format!("{part}/{whole} ({:.1}%)", part as f64 * 100.0 / whole.max(1) as f64)
}

/// One replayed series judged as `npugate run` judges it: each call of the mock replays the next
/// seed (so a confirmation rerun sees fresh runs of the same scenario).
fn replay(scenario: Scenario, seed: u64, mock: &MockJob) -> (Verdict, usize) {
    let script = (0..3).map(|attempt| Behaviour::Replay(Box::new(scenario.replay(seed * 10 + attempt)))).collect();
    let target = MockTarget::new("replay", script);
    let gate = GateSpec::default();
    let spec = RunSpec { job: mock.job(), gate: Some(&gate), reference: None };
    let out = mock.work.path().join(format!("out-{seed}"));
    let report =
        run_confirmed(0, &out, |dir| run_on(&target, &spec, dir, &Progress::silent())).expect("a replayed run");
    let _ = std::fs::remove_dir_all(&out);
    (report.verdict.expect("judged"), target.calls())
}

fn replayed(series: u64) {
    println!("1. Labelled series on the mock target, default rules, {series} seeds each (30 runs per series)");
    println!("{HEADER}");
    let mock = MockJob::new();
    let (mut noise, mut noise_failed, mut planted, mut caught) = (0, 0, 0, 0);
    for scenario in Scenario::ALL {
        let mut tally = Tally::default();
        for seed in 0..series {
            let (verdict, runs) = replay(scenario, seed, &mock);
            tally.count(verdict.outcome, runs);
        }
        let rate = if scenario.is_noise() {
            format!("false FAILs {}", pct(tally.fail, tally.total()))
        } else {
            format!("caught {}", pct(tally.fail, tally.total()))
        };
        println!("{}", tally.row(scenario.label(), &rate));
        match (scenario.is_noise(), scenario.has_evidence()) {
            (true, true) => (noise, noise_failed) = (noise + tally.total(), noise_failed + tally.fail),
            (false, _) => (planted, caught) = (planted + tally.total(), caught + tally.fail),
            (true, false) => {}
        }
    }
    println!(
        "noise-only series with their evidence: false FAILs {}; planted fallbacks caught {}",
        pct(noise_failed, noise),
        pct(caught, planted)
    );
}

/// The session the simulated device's load is drawn for (each replayed comparison its own).
static SESSION: AtomicU64 = AtomicU64::new(0);

/// A loaded device: half the harness launches slowed 1.0–3.7× at random (splitmix64 of the session
/// and the launch), the rest steady.
fn loaded_device(call: usize, _: &str) -> f64 {
    let mut z = SESSION.load(Ordering::Relaxed).wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(call as u64 + 1);
    let mut next = || {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = z;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((x ^ (x >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    if next() < 0.5 {
        1.0 + 2.7 * next().powi(2)
    } else {
        1.0
    }
}

/// `npugate compare` on the mock's simulated, loaded device: A 1 ms, B `slowdown` times that.
fn replayed_compare(reps: usize) {
    println!(
        "\n2. npugate compare on the mock target's simulated device, half the launches slowed 1.0–3.7× at random, \
         {reps} sessions each (10 rounds of 20 runs to start, ±3% noise per run)"
    );
    println!("{VERDICT_HEADER}");
    let mock = MockJob::new();
    let rules = CompareRules::default();
    let hashes = npugate_host::hash_cache::HashCache::default_cache();
    for (label, slowdown) in [("unchanged", 1.0), ("+10%", 1.1), ("+20%", 1.2), ("+50%", 1.5)] {
        let mut tally = Timed::default();
        for rep in 0..reps {
            SESSION.store(rep as u64 + (slowdown * 1000.0) as u64 * 1000, Ordering::Relaxed);
            let (a, b) = (mock.work.path().join("a.onnx"), mock.work.path().join("b.onnx"));
            for model in [&a, &b] {
                std::fs::copy(&mock.model, model).expect("copy the mock model");
            }
            let base_ns = vec![("a.onnx".into(), 1_000_000), ("b.onnx".into(), (1e6 * slowdown) as u64)];
            let simulated = Simulated { base_ns, noise_pct: 3.0, load: loaded_device };
            let target = MockTarget::new("sim", vec![Behaviour::Simulate(simulated)]);
            let job = Job { model: &a, ..mock.job() };
            let [given_a, given_b] = [&a, &b].map(|model| GivenModel::read(model, &hashes).expect("the mock model"));
            let spec = CompareSpec {
                job,
                baseline: &given_a,
                candidate: &given_b,
                sources: [None, None],
                rounds: 10,
                budget: Duration::from_secs(300),
                runs_per_round: 20,
                rules: &rules,
            };
            let started = Instant::now();
            let out = mock.work.path().join("compare");
            let report = compare_on(&target, &spec, &out, &Progress::silent()).expect("a simulated comparison");
            tally.count(&report.verdict.outcome, started.elapsed(), report.verdict.rounds.len());
        }
        println!("{}", tally.row("mock device", "compare", label));
    }
}

/// Verdicts by outcome with the wall time of each and the rounds (compare) they took.
#[derive(Default)]
struct Timed {
    walls: [Vec<f64>; 3],
    rounds: Vec<usize>,
    errors: usize,
}

impl Timed {
    fn count(&mut self, outcome: &Outcome, wall: Duration, rounds: usize) {
        let slot = match outcome {
            Outcome::Pass | Outcome::Measured => 0,
            Outcome::Fail => 1,
            Outcome::NotJudged => 2,
            Outcome::Error => {
                self.errors += 1;
                return;
            }
        };
        self.walls[slot].push(wall.as_secs_f64());
        self.rounds.push(rounds);
    }

    fn row(&self, level: &str, command: &str, variant: &str) -> String {
        let n = self.walls.iter().map(Vec::len).sum::<usize>() + self.errors;
        let share = |slot: usize| format!("{}/{n}", self.walls[slot].len());
        let wall = |slot: usize| {
            npugate_gate::stats::median(&self.walls[slot]).map_or_else(|| "—".to_string(), |s| format!("{s:.1} s"))
        };
        let rounds = npugate_gate::stats::median(&self.rounds.iter().map(|&r| r as f64).collect::<Vec<_>>())
            .filter(|r| *r > 0.0)
            .map_or_else(String::new, |r| format!("  median {r:.0} rounds"));
        format!(
            "{level:<12} {command:<8} {variant:<10} {:>5} {:>5} {:>10} {:>5}   {:>8} {:>8} {:>10}{rounds}",
            share(0),
            share(1),
            share(2),
            self.errors,
            wall(0),
            wall(1),
            wall(2)
        )
    }
}

const VERDICT_HEADER: &str =
    "load         command  model       PASS  FAIL NOT JUDGED ERROR   wall PASS wall FAIL  wall NOT J.";

/// The models of the real runs, written into `dir`: `convstack30.onnx` (≈1 ms here) and its planted
/// slowdowns `convstack33/36/45.onnx`, by scripts/make-test-models' own `convstack`.
fn write_models(workspace: &Path, cache: &Path, dir: &Path) {
    const WRITE: &str = "import importlib.machinery, importlib.util, sys, onnx\n\
        loader = importlib.machinery.SourceFileLoader('make_test_models', sys.argv[1])\n\
        module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))\n\
        loader.exec_module(module)\n\
        for blocks in (30, 33, 36, 45):\n    onnx.save(module.convstack(blocks), f'{sys.argv[2]}/convstack{blocks}.onnx')\n";
    let status = Command::new(cache.join("venv/bin/python"))
        .args(["-c", WRITE])
        .arg(workspace.join("scripts/make-test-models"))
        .arg(dir)
        .status()
        .expect("run the venv's python (scripts/setup)");
    assert!(status.success(), "writing the convstack models failed");
}

/// One `npugate` command's verdict (`verdict.json` or `compare.json` in `out`), the rounds it took
/// and its wall time.
fn verdict_of(bin: &Path, args: &[String], out: &Path) -> (Outcome, Duration, usize) {
    let started = Instant::now();
    let status =
        Command::new(bin).args(args).arg("--out").arg(out).stdout(Stdio::null()).stderr(Stdio::null()).status();
    let wall = started.elapsed();
    let status = status.expect("run npugate");
    if let Ok(v) = CompareVerdict::read(&out.join("compare.json")) {
        return (v.outcome, wall, v.rounds.len());
    }
    match Verdict::read(&out.join("verdict.json")) {
        Ok(v) => (v.outcome, wall, 0),
        Err(e) => panic!("npugate {} exited {status} without a verdict: {e}", args.join(" ")),
    }
}

/// The variants of one load level: label, `run` arguments, `compare` arguments. The unchanged
/// model's `run` is judged by the default rules alone; the slowed ones against `baseline`.
fn variants(
    models: &Path,
    cache: &Path,
    baseline: &Path,
    budget: u64,
) -> Vec<(&'static str, Vec<String>, Vec<String>)> {
    let path = |p: &Path| p.display().to_string();
    let base = path(&models.join("convstack30.onnx"));
    let budget = budget.to_string();
    let compare = |candidate: &str, ep: &str| -> Vec<String> {
        ["compare", "--local", "--ep", ep, "--baseline-model", &base, "--model", candidate, "--budget", &budget]
            .map(String::from)
            .to_vec()
    };
    let run = |model: &str, ep: &str| ["run", "--local", "--ep", ep, "--model", model].map(String::from).to_vec();
    let copy = models.join("convstack30_copy.onnx");
    std::fs::copy(models.join("convstack30.onnx"), &copy).expect("copy the model");
    let mut out = vec![("unchanged", run(&path(&copy), "cpu"), compare(&path(&copy), "cpu"))];
    for (label, blocks) in [("+10%", 33), ("+20%", 36), ("+50%", 45)] {
        let model = path(&models.join(format!("convstack{blocks}.onnx")));
        let mut against = run(&model, "cpu");
        against.extend(["--baseline".into(), path(baseline), "--force".into()]);
        out.push((label, against, compare(&model, "cpu")));
    }
    let fallback = path(&cache.join("models/fallback_det.onnx"));
    out.push(("fallback", run(&fallback, "openvino"), compare(&fallback, "openvino")));
    out
}

/// Every variant at one load level, `run` and `compare`.
fn level(bin: &Path, name: &str, variants: &[(&str, Vec<String>, Vec<String>)], reps: [usize; 2], work: &Path) {
    for (command, index) in [("run", 0), ("compare", 1)] {
        for (label, run_args, compare_args) in variants {
            let args = if index == 0 { run_args } else { compare_args };
            let mut tally = Timed::default();
            for rep in 0..reps[index] {
                let out = work.join(format!("{name}-{command}-{label}-{rep}"));
                let (outcome, wall, rounds) = verdict_of(bin, args, &out);
                tally.count(&outcome, wall, rounds);
                let _ = std::fs::remove_dir_all(&out);
            }
            println!("{}", tally.row(name, command, label));
        }
    }
}

/// Saves the unchanged model's baseline at this load level into `baseline` (replacing it).
fn save_baseline(bin: &Path, model: &Path, work: &Path, baseline: &Path) {
    let saved = work.join("saved");
    let _ = std::fs::remove_dir_all(&saved);
    let status = Command::new(bin)
        .args(["run", "--local", "--no-gate", "--model"])
        .arg(model)
        .arg("--out")
        .arg(&saved)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run npugate");
    assert!(status.success(), "the baseline run failed");
    let status = Command::new(bin).args(["baseline", "save"]).arg(&saved).arg("--out").arg(baseline).status();
    assert!(status.expect("run npugate").success(), "saving the baseline failed");
}

fn real(bin: &Path, workspace: &Path, cache: &Path, reps: [usize; 2], budget: u64) {
    let work = tempfile::tempdir().expect("temp dir");
    write_models(workspace, cache, work.path());
    let baseline = work.path().join("convstack30-baseline.json");
    let variants = variants(work.path(), cache, &baseline, budget);
    println!(
        "\n3. Real runs on this machine: `run --local` {} each (unchanged: the default rules; the slowed models \
         against a baseline of the unchanged one saved at the same load level), `compare --local` {} each \
         (--budget {budget} s)",
        reps[0], reps[1]
    );
    println!("{VERDICT_HEADER}");
    let levels = std::env::var("BENCH_LEVELS").unwrap_or_else(|_| "quiet,one,two".into());
    for name in levels.split(',') {
        let burners: Vec<CpuBurner> = match name {
            "quiet" => Vec::new(),
            "one" => vec![CpuBurner::start(3600)],
            "two" => CpuBurner::every_core(3600),
            other => panic!("BENCH_LEVELS: unknown level {other:?} (quiet, one, two)"),
        };
        save_baseline(bin, &work.path().join("convstack30.onnx"), work.path(), &baseline);
        level(bin, name, &variants, reps, work.path());
        drop(burners);
    }
}

fn main() {
    let number = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin =
        std::env::var_os("NPUGATE_BIN").map(PathBuf::from).unwrap_or_else(|| workspace.join("target/release/npugate"));
    let cache = std::env::var_os("NPUGATE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/npugate"));
    let compare_reps = number("BENCH_COMPARE_REPS", 3) as usize;
    replayed(number("BENCH_SERIES", 200));
    replayed_compare(number("BENCH_MOCK_REPS", 20) as usize);
    match number("BENCH_RUN_REPS", 10) as usize {
        0 => println!("\n3. real local runs skipped (BENCH_RUN_REPS=0)"),
        runs => real(&bin, &workspace, &cache, [runs, compare_reps], number("BENCH_COMPARE_BUDGET", 300)),
    }
}
