//! `cargo bench -p npugate-harness --bench overhead`: the harness's median latency and per-run
//! overhead (loop wall time / N − median) side by side with a bare `ort` `session.run` loop and a
//! Python `onnxruntime` loop, on the same library and model, interleaved over several rounds.
//! Targets: harness overhead ≤ 1 µs per run; harness median ≤ the Python loop's.
//!
//! Environment: `NPUGATE_CACHE` (runtime, venv and models as `scripts/setup` leaves them),
//! `BENCH_MODEL` (default smallcnn.onnx), `BENCH_RUNS` (default 2000), `BENCH_ROUNDS` (default 3).

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use support::{cache, env_number, median};

const PYTHON_LOOP: &str = r#"
import json, sys, time
import numpy as np, onnxruntime as ort
model, runs, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
meta = session.get_inputs()[0]
x = np.random.default_rng(42).random(meta.shape).astype(np.float32)
feed = {meta.name: x}
for _ in range(warmup):
    session.run(None, feed)
lat = []
start = time.perf_counter_ns()
for _ in range(runs):
    t0 = time.perf_counter_ns()
    session.run(None, feed)
    lat.append(time.perf_counter_ns() - t0)
wall = time.perf_counter_ns() - start
print(json.dumps({"latencies_ns": lat, "wall_ns": wall}))
"#;

/// One loop's measurement.
struct LoopTiming {
    median_ns: f64,
    /// The issue's definition: loop wall time / N − median (includes the mean−median gap of noise).
    overhead_ns: f64,
    /// Time per run spent outside the measured region: (loop wall − Σ latencies) / N.
    unmeasured_ns: f64,
}

impl LoopTiming {
    fn from(latencies: Vec<u64>, wall_ns: u64) -> LoopTiming {
        let n = latencies.len() as f64;
        let unmeasured_ns = (wall_ns as f64 - latencies.iter().sum::<u64>() as f64) / n;
        let median_ns = median(&latencies.iter().map(|&ns| ns as f64).collect::<Vec<_>>());
        LoopTiming { median_ns, overhead_ns: wall_ns as f64 / n - median_ns, unmeasured_ns }
    }
}

fn harness_loop(lib: &Path, model: &Path, runs: u32, warmup: u32) -> LoopTiming {
    let out = tempfile::tempdir().expect("temp dir");
    let status = Command::new(env!("CARGO_BIN_EXE_npugate-harness"))
        .arg("--ort-lib")
        .arg(lib)
        .arg("--model")
        .arg(model)
        .arg("--out")
        .arg(out.path())
        .args([
            "--runs",
            &runs.to_string(),
            "--warmup",
            &warmup.to_string(),
            "--profile-runs",
            "0",
            "--no-reference-pass",
        ])
        .status()
        .expect("run the harness");
    assert!(status.success(), "harness failed: {status}");
    let result = npugate_result::RunResult::read(out.path()).expect("result.json");
    LoopTiming::from(result.timings.latencies_ns, result.timings.loop_wall_ns)
}

fn bare_ort_loop(
    session: &mut ort::session::Session,
    input: &ort::value::DynValue,
    runs: u32,
    warmup: u32,
) -> LoopTiming {
    let name = session.inputs()[0].name().to_string();
    for _ in 0..warmup {
        session.run(ort::inputs![name.as_str() => input]).expect("warmup run");
    }
    let mut latencies = Vec::with_capacity(runs as usize);
    let start = Instant::now();
    for _ in 0..runs {
        let t0 = Instant::now();
        let outputs = session.run(ort::inputs![name.as_str() => input]).expect("run");
        drop(outputs);
        latencies.push(t0.elapsed().as_nanos() as u64);
    }
    LoopTiming::from(latencies, start.elapsed().as_nanos() as u64)
}

fn python_loop(python: &Path, model: &Path, runs: u32, warmup: u32) -> LoopTiming {
    let output = Command::new(python)
        .args(["-c", PYTHON_LOOP])
        .arg(model)
        .args([runs.to_string(), warmup.to_string()])
        .output()
        .expect("run the Python loop");
    assert!(output.status.success(), "python loop failed: {}", String::from_utf8_lossy(&output.stderr));
    let parsed: serde_json::Value = serde_json::from_slice(&output.stdout).expect("python JSON");
    let latencies = parsed["latencies_ns"].as_array().expect("latencies").iter().filter_map(|v| v.as_u64()).collect();
    LoopTiming::from(latencies, parsed["wall_ns"].as_u64().expect("wall"))
}

fn main() {
    let cache = cache();
    let lib = cache.join("runtimes/ort-1.31.1-linux-x86_64/libonnxruntime.so.1.31.1");
    let model = cache.join("models").join(std::env::var("BENCH_MODEL").unwrap_or_else(|_| "smallcnn.onnx".into()));
    let python = cache.join("venv/bin/python");
    for needed in [&lib, &model, &python] {
        assert!(needed.is_file(), "{} is missing: run scripts/setup", needed.display());
    }
    let (runs, warmup, rounds) = (env_number("BENCH_RUNS", 2000), 50, env_number("BENCH_ROUNDS", 3));

    let env = ort::init_from(&lib).expect("load ORT").build().expect("environment");
    let mut session = ort::session::Session::builder(&env).expect("builder").commit_from_file(&model).expect("session");
    let shape: Vec<i64> = match session.inputs()[0].dtype() {
        ort::value::ValueType::Tensor { shape, .. } => shape.iter().map(|&d| d.max(1)).collect(),
        other => panic!("benchmark model input must be a tensor, got {other:?}"),
    };
    let count: usize = shape.iter().map(|&d| d as usize).product();
    let input = ort::value::Tensor::from_array((shape, vec![0.5f32; count])).expect("input").into_dyn();

    let (mut harness, mut bare, mut python_t) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        eprintln!("round {round}/{rounds}: {runs} runs each");
        harness.push(harness_loop(&lib, &model, runs, warmup));
        bare.push(bare_ort_loop(&mut session, &input, runs, warmup));
        python_t.push(python_loop(&python, &model, runs, warmup));
    }
    let summarize = |loops: &[LoopTiming]| {
        let medians: Vec<f64> = loops.iter().map(|l| l.median_ns).collect();
        let overheads: Vec<f64> = loops.iter().map(|l| l.overhead_ns).collect();
        let unmeasured: Vec<f64> = loops.iter().map(|l| l.unmeasured_ns).collect();
        (median(&medians), median(&overheads), median(&unmeasured))
    };
    let rows = [
        ("npugate-harness", summarize(&harness)),
        ("bare ort session.run", summarize(&bare)),
        ("python onnxruntime", summarize(&python_t)),
    ];
    println!("model {} · ORT 1.31.1 · {runs} runs × {rounds} rounds (median of round medians)", model.display());
    println!("{:<24} {:>12} {:>26} {:>24}", "loop", "median (µs)", "wall/N − median (µs)", "unmeasured/run (µs)");
    for (name, (median_ns, overhead_ns, unmeasured_ns)) in &rows {
        println!("{name:<24} {:>12.2} {:>26.3} {:>24.3}", median_ns / 1e3, overhead_ns / 1e3, unmeasured_ns / 1e3);
    }
    let (h_median, h_overhead, h_unmeasured) = rows[0].1;
    let (b_median, _, _) = rows[1].1;
    let (p_median, _, _) = rows[2].1;
    println!("harness median / python median: {:.3} (target ≤ 1)", h_median / p_median);
    println!("harness median / bare ort median: {:.3}", h_median / b_median);
    println!(
        "harness overhead per run: {:.3} µs as wall/N − median, {:.3} µs outside the measured call (target ≤ 1 µs)",
        h_overhead / 1e3,
        h_unmeasured / 1e3
    );
}
