//! `cargo bench -p npugate --bench numerics` (or `scripts/bench-numerics`): ResNet-50 with every
//! tensor exposed, against the plain run — wall time and peak memory of each step, in one run:
//!
//! - the plain run: the harness, one inference, saving the graph output (`--check-outputs`);
//! - `npugate numerics` end to end (instrumentation, the fp32 reference run, the instrumented run,
//!   the comparison, the report), the model against itself;
//! - the comparison alone (this process, tensor by tensor), against one run's activations (the
//!   bytes of every exposed tensor). Target: its peak ≤ 1.5 × one run's activations.
//!
//! Peak memory of the harness processes is `getrusage(RUSAGE_CHILDREN).ru_maxrss` (the largest
//! child so far: the plain run goes first); this process's peak is `VmHWM`, reset through
//! `/proc/self/clear_refs` before the comparison (before it, it is the host side of the end-to-end
//! run: both models read, copied and instrumented, plus the comparison).
//!
//! Needs `cargo build --release -p npugate-harness` and the cache `scripts/setup` leaves
//! (`NPUGATE_CACHE`); `BENCH_MODEL` overrides the model (default `resnet50.onnx`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use npugate_engine::model::GivenModel;
use npugate_engine::progress::Progress;
use npugate_engine::rack::RackPolicy;
use npugate_engine::targets::host::HostTarget;
use npugate_engine::targets::Planned;
use npugate_engine::targets::{Cancel, Job, Target};
use npugate_engine::timeouts::Timeouts;
use npugate_host::hash_cache::HashCache;
use npugate_host::runtime::RuntimeManifest;
use npugate_numerics::compare::{compare_run, Saved};
use npugate_numerics::matching::{Matching, Selection};
use npugate_numerics::{self as numerics, NumericsRequest, Targets, TensorChoice};
use npugate_onnx::Model;
use npugate_result::{files, RunResult};
use npugate_settings::HarnessSettings;

const MB: f64 = 1024.0 * 1024.0;

/// Largest harness process so far, MB.
fn children_peak_mb() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    usage.ru_maxrss as f64 / 1024.0
}

/// A `/proc/self/status` field in MB (`VmHWM`, `VmRSS`).
fn own_mb(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field}"));
    line.split_whitespace().nth(1).and_then(|kb| kb.parse::<f64>().ok()).expect("a number of kB") / 1024.0
}

/// Resets this process's peak RSS to its current RSS.
fn reset_own_peak() {
    std::fs::write("/proc/self/clear_refs", "5").expect("write /proc/self/clear_refs (Linux ≥ 4.0)");
}

/// Bytes of every file below `dir`.
fn bytes_below(dir: &Path) -> u64 {
    std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.metadata().map_or(0, |m| m.len())).sum()
}

/// What every step runs with: the model, the harness, the runtime, a scratch folder.
struct Setup {
    /// The model under test (`BENCH_MODEL` in the cache's models, default `resnet50.onnx`).
    model: PathBuf,
    /// `target/release/npugate-harness`, beside this bench's folder.
    harness: PathBuf,
    /// The host ONNX Runtime.
    runtime: RuntimeManifest,
    /// Scratch folder for the runs' results.
    work: tempfile::TempDir,
    /// Never cancelled.
    cancel: Cancel,
}

impl Setup {
    /// Finds the model, the harness and the runtime; panics naming what is missing.
    fn find() -> Setup {
        let cache = std::env::var_os("NPUGATE_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/npugate"));
        let model = cache.join("models").join(std::env::var("BENCH_MODEL").unwrap_or_else(|_| "resnet50.onnx".into()));
        assert!(model.is_file(), "{} is missing: run scripts/make-test-models", model.display());
        let exe = std::env::current_exe().expect("bench executable");
        let harness = exe.parent().and_then(Path::parent).expect("target/release/deps").join("npugate-harness");
        assert!(harness.is_file(), "{} is missing: cargo build --release -p npugate-harness", harness.display());
        let runtime =
            RuntimeManifest::load("ort-1.31.1-linux-x86_64").expect("runtime ort-1.31.1-linux-x86_64 (scripts/setup)");
        Setup { model, harness, runtime, work: tempfile::tempdir().expect("temp dir"), cancel: Cancel::new() }
    }
}

/// Wall time (s) and peak RSS (MB) of the plain run.
struct PlainRun {
    /// Wall time, s.
    wall: f64,
    /// The harness process's peak RSS, MB.
    peak: f64,
}

/// Step 1, the plain run: one inference, the graph output saved.
fn plain_run(setup: &Setup) -> PlainRun {
    let plain_settings = HarnessSettings {
        runs: 1,
        warmup: 0,
        profile_runs: 0,
        no_reference_pass: true,
        check_outputs: true,
        ..HarnessSettings::default()
    };
    let job = Job::new(
        &setup.harness,
        &setup.runtime,
        &setup.model,
        &plain_settings,
        Duration::from_secs(3600),
        &setup.cancel,
    );
    let plain_dir = setup.work.path().join("plain");
    std::fs::create_dir_all(&plain_dir).unwrap();
    let started = Instant::now();
    let execution = HostTarget::new().execute(&job, &plain_dir, &Progress::silent()).expect("plain run");
    assert!(execution.succeeded(), "plain run: {}", execution.last_message());
    PlainRun { wall: started.elapsed().as_secs_f64(), peak: children_peak_mb() }
}

/// Figures of `npugate numerics` end to end.
struct EndToEnd {
    /// Its output folder (reference and instrumented runs).
    out: PathBuf,
    /// Tensors compared.
    tensors: usize,
    /// Wall time, s.
    wall: f64,
    /// Largest harness process so far (the instrumented run), MB.
    harness_peak: f64,
    /// This process's peak, MB.
    host_peak: f64,
}

/// Step 2, `npugate numerics` end to end, every tensor, the model against itself.
fn numerics_end_to_end(setup: &Setup) -> EndToEnd {
    let out = setup.work.path().join("numerics");
    let settings = HarnessSettings::default();
    let given = GivenModel::read(&setup.model, &HashCache::default_cache()).expect("the model");
    let request = NumericsRequest {
        model: &given,
        reference_model: &given,
        tensors: &TensorChoice::All,
        min_sqnr_db: numerics::DEFAULT_MIN_SQNR_DB,
        settings: &settings,
        host_harness: &setup.harness,
        host_runtime: &setup.runtime,
        out: &out,
        cancel: &setup.cancel,
    };
    let host = [Planned {
        target: Box::new(HostTarget::new()),
        runtime: setup.runtime.clone(),
        harness: setup.harness.clone(),
        soc: None,
        device: None,
    }];
    let policy = RackPolicy::once(&setup.cancel);
    let on = Targets { planned: &host, env: &[], timeouts: Timeouts::LOCAL, policy: &policy };
    let started = Instant::now();
    let report = numerics::run(&request, &on).expect("numerics");
    let wall = started.elapsed().as_secs_f64();
    let (harness_peak, host_peak) = (children_peak_mb(), own_mb("VmHWM"));
    assert!(
        report.layers.iter().all(|l| l.results[0].metrics.is_some_and(|m| m.sqnr_db == f64::INFINITY)),
        "the model against itself"
    );
    EndToEnd { out, tensors: report.layers.len(), wall, harness_peak, host_peak }
}

/// Figures of the comparison alone.
#[derive(Clone, Copy)]
struct CompareAlone {
    /// Bytes of one run's activations, MB.
    activations: f64,
    /// The largest activation, MB.
    largest: f64,
    /// This process's RSS before the comparison, MB.
    baseline: f64,
    /// Wall time, s.
    wall: f64,
    /// This process's peak during the comparison, MB.
    peak: f64,
}

/// Step 3, the comparison alone, in this process, over the runs step 2 saved in `out`.
fn compare_alone(model: &Path, out: &Path) -> CompareAlone {
    let onnx = Model::read(model).expect("model");
    let matching = Matching::build(&onnx, &onnx, &Selection::All).expect("matching");
    drop(onnx);
    let (reference_dir, run_dir) = (out.join(files::NUMERICS_REFERENCE_DIR), out.join("local"));
    let (reference, run) = (RunResult::read(&reference_dir).unwrap(), RunResult::read(&run_dir).unwrap());
    let activations = bytes_below(&run_dir.join(files::OUTPUTS_DIR)) as f64 / MB;
    let largest = std::fs::read_dir(run_dir.join(files::OUTPUTS_DIR))
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .max()
        .unwrap_or(0) as f64
        / MB;
    reset_own_peak();
    let baseline = own_mb("VmRSS");
    let started = Instant::now();
    let compared = compare_run(
        &matching.layers,
        Saved { dir: &reference_dir, result: &reference },
        Saved { dir: &run_dir, result: &run },
    )
    .expect("compare");
    let wall = started.elapsed().as_secs_f64();
    let peak = own_mb("VmHWM");
    assert!(compared.iter().all(Result::is_ok));
    CompareAlone { activations, largest, baseline, wall, peak }
}

/// Prints the table of the three steps and their ratios.
fn print_report(model: &Path, plain: &PlainRun, end_to_end: &EndToEnd, alone: &CompareAlone) {
    let (plain_wall, plain_peak) = (plain.wall, plain.peak);
    let (numerics_wall, instrumented_peak, host_peak) =
        (end_to_end.wall, end_to_end.harness_peak, end_to_end.host_peak);
    let CompareAlone { activations, largest, baseline, wall: compare_wall, peak: compare_peak } = *alone;
    println!("{} with every tensor exposed: {} tensors, {activations:.1} MB of activations per run (largest tensor {largest:.1} MB)", model.display(), end_to_end.tensors);
    println!();
    println!("| step | wall | peak RSS |");
    println!("|---|---|---|");
    println!("| plain run (harness, 1 inference, graph output saved) | {plain_wall:.2} s | {plain_peak:.0} MB |");
    println!("| `npugate numerics` end to end (instrument, reference run, instrumented run, compare, report) | {numerics_wall:.2} s | harness {instrumented_peak:.0} MB, npugate {host_peak:.0} MB |");
    println!("| comparison alone (this process, tensor by tensor) | {compare_wall:.2} s | {compare_peak:.0} MB ({:.0} MB above its {baseline:.0} MB before) |", compare_peak - baseline);
    println!();
    println!("end to end / plain run wall: {:.1}×", numerics_wall / plain_wall);
    println!(
        "instrumented harness peak − plain harness peak: {:.0} MB ({:.2}× the activations)",
        instrumented_peak - plain_peak,
        (instrumented_peak - plain_peak) / activations
    );
    println!(
        "comparison peak / one run's activations: {:.2} (target ≤ 1.5; above its baseline: {:.2})",
        compare_peak / activations,
        (compare_peak - baseline) / activations
    );
}

fn main() {
    let setup = Setup::find();
    let plain = plain_run(&setup);
    let end_to_end = numerics_end_to_end(&setup);
    let alone = compare_alone(&setup.model, &end_to_end.out);
    print_report(&setup.model, &plain, &end_to_end, &alone);
}
