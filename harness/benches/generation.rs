//! `cargo bench -p npugate-harness --bench generation`: the harness's generation loop against a
//! bare `ort` loop over the same graph (the decoder of `tinyllm/`, CPU EP, same library): per-token
//! decode latency of each (median of round medians, rounds interleaved), their ratio (target ≤ 1.02),
//! and the KV copies per step (the harness measures them: target 0 with I/O binding; the bare loop
//! feeds ORT's freshly allocated presents back as the next pasts).
//!
//! Environment: `NPUGATE_CACHE` (runtime and models as `scripts/setup` leaves them), `BENCH_PROMPT`
//! (default 32), `BENCH_GEN` (default 32), `BENCH_GENERATIONS` (default 20), `BENCH_ROUNDS` (default 5).

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use support::{cache, env_number, median};

use ort::session::{Session, SessionInputValue};
use ort::value::{DynValue, Tensor};

/// One loop's per-token decode latencies and the wall time per generated token.
struct Round {
    median_step_ns: f64,
    wall_per_token_ns: f64,
    copies_per_step: Option<f64>,
}

fn harness_round(lib: &Path, folder: &Path, prompt: u32, gen: u32, generations: u32) -> Round {
    let out = tempfile::tempdir().expect("temp dir");
    let status = Command::new(env!("CARGO_BIN_EXE_npugate-harness"))
        .arg("--ort-lib")
        .arg(lib)
        .arg("--model")
        .arg(folder)
        .arg("--out")
        .arg(out.path())
        .args([
            "--prompt-tokens",
            &prompt.to_string(),
            "--gen-tokens",
            &gen.to_string(),
            "--generations",
            &generations.to_string(),
        ])
        .args(["--warmup-generations", "2", "--profile-runs", "0", "--no-reference-pass"])
        .status()
        .expect("run the harness");
    assert!(status.success(), "harness failed: {status}");
    let generation =
        npugate_result::RunResult::read(out.path()).expect("result.json").generation.expect("a generation");
    let steps: Vec<f64> = generation.decode_ns.iter().flatten().map(|&ns| ns as f64).collect();
    let decode_wall: f64 = generation.wall_ns.iter().zip(&generation.ttft_ns).map(|(&w, &t)| (w - t) as f64).sum();
    Round {
        median_step_ns: median(&steps),
        wall_per_token_ns: decode_wall / f64::from(gen * generations),
        copies_per_step: Some(generation.kv.copies_per_step),
    }
}

/// The simplest correct loop in `ort`: `session.run` with owned inputs, the presents fed back.
fn bare_round(session: &mut Session, prompt: &[i64], gen: u32, generations: u32, layers: usize) -> Round {
    let mut steps = Vec::new();
    let mut decode_wall = 0.0;
    for generation in 0..generations + 2 {
        let mut pasts: Vec<DynValue> = (0..layers * 2)
            .map(|_| Tensor::<f32>::from_array(([1usize, 2, 0, 16], Vec::<f32>::new())).expect("empty past").into_dyn())
            .collect();
        let mut ids: Vec<i64> = prompt.to_vec();
        let mut start = 0usize;
        let mut decode_start = None;
        for step in 0..=gen {
            let count = ids.len();
            let mut inputs: Vec<(String, SessionInputValue<'_>)> = vec![
                (
                    "input_ids".into(),
                    Tensor::from_array(([1usize, count], ids.clone())).expect("ids").into_dyn().into(),
                ),
                (
                    "attention_mask".into(),
                    Tensor::from_array(([1usize, start + count], vec![1i64; start + count]))
                        .expect("mask")
                        .into_dyn()
                        .into(),
                ),
                (
                    "position_ids".into(),
                    Tensor::from_array(([1usize, count], (start as i64..(start + count) as i64).collect::<Vec<_>>()))
                        .expect("positions")
                        .into_dyn()
                        .into(),
                ),
            ];
            for (i, past) in pasts.drain(..).enumerate() {
                inputs.push((
                    format!("past_key_values.{}.{}", i / 2, if i % 2 == 0 { "key" } else { "value" }),
                    past.into(),
                ));
            }
            if step == 1 {
                decode_start = Some(Instant::now());
            }
            let t0 = Instant::now();
            let mut outputs = session.run(inputs).expect("run");
            let ns = t0.elapsed().as_nanos() as f64;
            if step > 0 && generation >= 2 {
                steps.push(ns);
            }
            let (_, logits) = outputs["logits"].try_extract_tensor::<f32>().expect("logits");
            let last = &logits[(count - 1) * 97..count * 97];
            let next = last.iter().enumerate().fold(0, |best, (i, v)| if *v > last[best] { i } else { best }) as i64;
            for i in 0..layers * 2 {
                pasts.push(
                    outputs
                        .remove(format!("present.{}.{}", i / 2, if i % 2 == 0 { "key" } else { "value" }))
                        .expect("present"),
                );
            }
            start += count;
            ids = vec![next];
        }
        if generation >= 2 {
            decode_wall += decode_start.map_or(0.0, |t| t.elapsed().as_nanos() as f64);
        }
    }
    Round {
        median_step_ns: median(&steps),
        wall_per_token_ns: decode_wall / f64::from(gen * generations),
        copies_per_step: None,
    }
}

fn main() {
    let cache = cache();
    let lib = cache.join("runtimes/ort-1.31.1-linux-x86_64/libonnxruntime.so.1.31.1");
    let folder = cache.join("models/tinyllm");
    for needed in [&lib, &folder.join("model.onnx")] {
        assert!(needed.is_file(), "{} is missing: run scripts/setup", needed.display());
    }
    let (prompt, gen, generations, rounds) = (
        env_number("BENCH_PROMPT", 32),
        env_number("BENCH_GEN", 32),
        env_number("BENCH_GENERATIONS", 20),
        env_number("BENCH_ROUNDS", 5),
    );
    let env = ort::init_from(&lib).expect("load ORT").build().expect("environment");
    let mut session =
        Session::builder(&env).expect("builder").commit_from_file(folder.join("model.onnx")).expect("session");
    // The harness's prompt for seed 42 is its own; the bare loop's length is what matters.
    let prompt_ids: Vec<i64> = (0..i64::from(prompt)).map(|i| (i * 7 + 3) % 97).collect();
    let (mut harness, mut bare) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        eprintln!("round {round}/{rounds}: {generations} generations of {prompt} + {gen} tokens each");
        harness.push(harness_round(&lib, &folder, prompt, gen, generations));
        bare.push(bare_round(&mut session, &prompt_ids, gen, generations, 2));
    }
    let summarize = |rounds: &[Round]| {
        (
            median(&rounds.iter().map(|r| r.median_step_ns).collect::<Vec<_>>()),
            median(&rounds.iter().map(|r| r.wall_per_token_ns).collect::<Vec<_>>()),
        )
    };
    let (h_step, h_wall) = summarize(&harness);
    let (b_step, b_wall) = summarize(&bare);
    let copies = median(&harness.iter().filter_map(|r| r.copies_per_step).collect::<Vec<_>>());
    println!("tinyllm (decoder, CPU EP) · ORT 1.31.1 · {prompt}-token prompt, {gen} decode steps, {generations} generations × {rounds} rounds (median of round medians)");
    println!("{:<26} {:>22} {:>28}", "loop", "decode step (µs)", "decode wall / token (µs)");
    println!("{:<26} {:>22.2} {:>28.2}", "npugate-harness", h_step / 1e3, h_wall / 1e3);
    println!("{:<26} {:>22.2} {:>28.2}", "bare ort session.run", b_step / 1e3, b_wall / 1e3);
    println!("harness / bare ort, per-token decode step: {:.3} (target ≤ 1.02)", h_step / b_step);
    println!("harness / bare ort, decode wall per token: {:.3}", h_wall / b_wall);
    println!("KV copies per decode step, harness (measured): {copies} (target 0 with I/O binding); bare loop: 0 copies, ORT allocates {} new present tensors per step", 2 * 2);
}
