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

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use npugate_e2e::CpuBurner;
use npugate_engine::confirm::run_confirmed;
use npugate_engine::pipeline::GateSpec;
use npugate_engine::progress::Progress;
use npugate_engine::run::{run_on, RunSpec};
use npugate_engine::scenarios::Scenario;
use npugate_engine::targets::mock::{Behaviour, MockJob, MockTarget};
use npugate_gate::rules::RuleName;
use npugate_gate::verdict::{CheckStatus, Outcome};
use npugate_gate::Verdict;

/// Verdicts counted by outcome.
#[derive(Default)]
struct Tally {
    pass: usize,
    fail: usize,
    not_judged: usize,
    error: usize,
    /// Verdicts that name the machine's contention (a local run) or the fallback node.
    named: usize,
    /// Runs the target made, confirmation reruns included.
    runs: usize,
}

impl Tally {
    fn count(&mut self, verdict: &Verdict, named: bool, runs: usize) {
        match verdict.outcome {
            Outcome::Pass => self.pass += 1,
            Outcome::Fail => self.fail += 1,
            Outcome::NotJudged => self.not_judged += 1,
            Outcome::Error => self.error += 1,
        }
        self.named += usize::from(named);
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
            tally.count(&verdict, false, runs);
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

/// `npugate run --local` `runs` times with `args`, each verdict counted; `named` says whether a
/// verdict names what it should.
fn local_runs(bin: &Path, args: &[&str], runs: usize, named: impl Fn(&Verdict) -> bool) -> Tally {
    let work = tempfile::tempdir().expect("temp dir");
    let mut tally = Tally::default();
    for index in 0..runs {
        let out = work.path().join(format!("run-{index}"));
        let status = Command::new(bin)
            .args(["run", "--local"])
            .args(args)
            .arg("--out")
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run npugate");
        let verdict = Verdict::read(&out.join("verdict.json"))
            .unwrap_or_else(|e| panic!("npugate run exited {status} without a verdict: {e}"));
        let attempts = verdict.confirmation.as_ref().map_or(1, |c| c.attempts.len());
        tally.count(&verdict, named(&verdict), attempts);
    }
    tally
}

fn real(bin: &Path, cache: &Path, runs: usize) {
    let cls = cache.join("models/ch_ppocr_mobile_v2.0_cls_infer.onnx");
    let planted = cache.join("models/fallback_det.onnx");
    for needed in [&cls, &planted] {
        assert!(
            needed.is_file(),
            "{} is missing: run scripts/setup and `npugate model fetch ppocr-cls`",
            needed.display()
        );
    }
    let burners = CpuBurner::every_core(600);
    println!("\n2. npugate run --local, default rules, {runs} runs each, one CPU burner per core ({})", burners.len());
    println!("{HEADER}");
    let contention = |v: &Verdict| v.contention.as_ref().is_some_and(|c| c.busy());
    let cls_args = ["--model", cls.to_str().expect("a UTF-8 cache path"), "--shape", "x=1x3x48x192"];
    let unchanged = local_runs(bin, &cls_args, runs, contention);
    let line =
        format!("false FAILs {}; naming the contention {}", pct(unchanged.fail, runs), pct(unchanged.named, runs));
    println!("{}", unchanged.row("PP-OCR cls (CPU EP), unchanged", &line));
    let names_det = |v: &Verdict| {
        v.checks.iter().any(|c| {
            c.rule == RuleName::NpuFlopsPct && c.status == CheckStatus::Fail && c.message.contains("Det node det")
        })
    };
    let planted_args = ["--ep", "openvino", "--model", planted.to_str().expect("a UTF-8 cache path")];
    let fallback = local_runs(bin, &planted_args, runs, names_det);
    let line = format!("caught {}; naming the node {}", pct(fallback.fail, runs), pct(fallback.named, runs));
    println!("{}", fallback.row("planted fallback (fallback_det.onnx, OpenVINO EP)", &line));
    drop(burners);
}

fn main() {
    let number = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin =
        std::env::var_os("NPUGATE_BIN").map(PathBuf::from).unwrap_or_else(|| workspace.join("target/release/npugate"));
    let cache = std::env::var_os("NPUGATE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/npugate"));
    replayed(number("BENCH_SERIES", 200));
    match number("BENCH_LOCAL_RUNS", 20) as usize {
        0 => println!("\n2. real local runs skipped (BENCH_LOCAL_RUNS=0)"),
        runs => real(&bin, &cache, runs),
    }
}
