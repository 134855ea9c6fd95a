//! `cargo bench -p npugate-harness --bench generation`: the harness's generation loop against two
//! others, each ratio measured in this one run (rounds interleaved, median of round medians):
//!
//! 1. a bare `ort` loop over the decoder of `tinyllm/` (CPU EP, the same library): per-token decode
//!    latency (target ≤ 1.02) and the KV copies per step (the harness measures them: target 0 with
//!    I/O binding; the bare loop feeds ORT's freshly allocated presents back as the next pasts);
//! 2. onnxruntime-genai's own loop (its Python package, `generate_next_token`, in the model
//!    builder's venv) on the model builder's Qwen2 folder (`past_present_share_buffer`: both run
//!    the shared KV buffer), the harness loading genai's own ONNX Runtime library, both with
//!    genai's thread settings (the harness reads them as genai does): the per-step ratio
//!    npugate/genai over a 32-token prompt and 400 decode steps.
//!
//! Environment: `NPUGATE_CACHE` (runtime and models as `scripts/setup` leaves them), `BENCH_PROMPT`
//! (default 32), `BENCH_GEN` (default 32), `BENCH_GENERATIONS` (default 20), `BENCH_ROUNDS` (default
//! 5); for the genai comparison `BENCH_GENAI_PROMPT` (32), `BENCH_GENAI_GEN` (400),
//! `BENCH_GENAI_GENERATIONS` (3), `BENCH_GENAI_ROUNDS` (3).

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
    harness_generation(lib, folder, prompt, gen, generations).0
}

/// One harness run of `generations` timed generations: its round and its result's generation.
fn harness_generation(
    lib: &Path,
    folder: &Path,
    prompt: u32,
    gen: u32,
    generations: u32,
) -> (Round, npugate_result::Generation) {
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
    let round = Round {
        median_step_ns: median(&steps),
        wall_per_token_ns: decode_wall / f64::from(gen * generations),
        copies_per_step: Some(generation.kv.copies_per_step),
    };
    (round, generation)
}

/// onnxruntime-genai's own greedy loop (argv: folder, prompt ids as JSON, decode steps,
/// generations + 1 warmup): each `generate_next_token` timed (the first only picks the prompt's
/// token: genai runs the model for a token on the next call, so it is left out); EOS held off with
/// `min_length` so that every generation runs every step. Prints JSON: the steps, the decode wall
/// per generation, genai's version.
const GENAI_LOOP: &str = r#"
import json, sys, time
import onnxruntime_genai as og
folder, prompt, gen, generations = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
model = og.Model(folder)
steps, walls = [], []
for generation in range(generations + 1):
    params = og.GeneratorParams(model)
    length = len(prompt) + gen + 1
    params.set_search_options(do_sample=False, max_length=length, min_length=length)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt)
    generator.generate_next_token()
    timed, start = [], time.perf_counter_ns()
    while not generator.is_done():
        t0 = time.perf_counter_ns()
        generator.generate_next_token()
        timed.append(time.perf_counter_ns() - t0)
    if generation > 0:
        steps.extend(timed)
        walls.append((time.perf_counter_ns() - start) / len(timed))
print(json.dumps({"steps": steps, "walls": walls, "version": og.__version__}))
"#;

/// One round of genai's loop on `folder` with the harness's prompt ids.
fn genai_round(python: &Path, folder: &Path, prompt: &[i64], gen: u32, generations: u32) -> (Round, String) {
    let output = Command::new(python)
        .arg("-c")
        .arg(GENAI_LOOP)
        .arg(folder)
        .arg(serde_json::to_string(prompt).expect("ids"))
        .args([gen.to_string(), generations.to_string()])
        .output()
        .expect("run onnxruntime-genai's loop");
    assert!(output.status.success(), "genai's loop failed: {}", String::from_utf8_lossy(&output.stderr));
    let measured: serde_json::Value = serde_json::from_slice(&output.stdout).expect("genai's JSON");
    let numbers = |key: &str| -> Vec<f64> {
        measured[key].as_array().expect(key).iter().map(|v| v.as_f64().expect("a number")).collect()
    };
    let steps = numbers("steps");
    assert_eq!(steps.len() as u32, gen * generations, "every generation ran every decode step");
    let round =
        Round { median_step_ns: median(&steps), wall_per_token_ns: median(&numbers("walls")), copies_per_step: None };
    (round, measured["version"].as_str().unwrap_or("?").to_string())
}

/// The harness against onnxruntime-genai's loop on the model builder's Qwen2 folder, both on the
/// ONNX Runtime library genai loads.
fn against_genai(cache: &Path) {
    let venv = cache.join("genai-builder-venv");
    let python = venv.join("bin/python");
    let folder = cache.join("models/genai_builder_qwen2_fp32");
    let Some(lib) = std::fs::read_dir(venv.join("lib"))
        .ok()
        .and_then(|mut dirs| dirs.next())
        .and_then(|dir| dir.ok())
        .map(|dir| dir.path().join("site-packages/onnxruntime/capi"))
        .and_then(|capi| std::fs::read_dir(&capi).ok())
        .and_then(|files| {
            files.flatten().map(|f| f.path()).find(|p| p.to_string_lossy().contains("libonnxruntime.so."))
        })
    else {
        panic!("no onnxruntime library in {}: run scripts/setup (it makes the model builder's venv)", venv.display());
    };
    assert!(folder.join("genai_config.json").is_file(), "{} is missing: run scripts/setup", folder.display());
    let (prompt, gen, generations, rounds) = (
        env_number("BENCH_GENAI_PROMPT", 32),
        env_number("BENCH_GENAI_GEN", 400),
        env_number("BENCH_GENAI_GENERATIONS", 3),
        env_number("BENCH_GENAI_ROUNDS", 3),
    );
    let (mut harness, mut genai) = (Vec::new(), Vec::new());
    let (mut generation, mut version) = (None, String::new());
    for round in 1..=rounds {
        eprintln!("genai round {round}/{rounds}: {generations} generations of {prompt} + {gen} tokens each");
        let (measured, ran) = harness_generation(&lib, &folder, prompt, gen, generations);
        let (theirs, ran_version) = genai_round(&python, &folder, &ran.prompt_ids, gen, generations);
        harness.push(measured);
        genai.push(theirs);
        (generation, version) = (Some(ran), ran_version);
    }
    let generation = generation.expect("at least one round");
    let threads = generation.threads.as_ref().map_or("?".into(), |t| format!("{} intra-op ({})", t.intra_op, t.source));
    let (h_step, h_wall) = summarize(&harness);
    let (g_step, g_wall) = summarize(&genai);
    println!(
        "\ngenai_builder_qwen2_fp32 (decoder, CPU EP, KV layout {}) · the ONNX Runtime library of onnxruntime-genai {version} ({}) · {prompt}-token prompt, {gen} decode steps, {generations} generations × {rounds} rounds · threads: {threads}",
        generation.kv.mode,
        lib.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    );
    println!("{:<30} {:>22} {:>28}", "loop", "decode step (µs)", "decode wall / token (µs)");
    println!("{:<30} {:>22.2} {:>28.2}", "npugate-harness", h_step / 1e3, h_wall / 1e3);
    println!("{:<30} {:>22.2} {:>28.2}", "genai generate_next_token", g_step / 1e3, g_wall / 1e3);
    println!("npugate / genai, per-token decode step: {:.3}", h_step / g_step);
    println!("npugate / genai, decode wall per token: {:.3}", h_wall / g_wall);
}

/// The median over rounds of the per-step medians and of the wall per token.
fn summarize(rounds: &[Round]) -> (f64, f64) {
    (
        median(&rounds.iter().map(|r| r.median_step_ns).collect::<Vec<_>>()),
        median(&rounds.iter().map(|r| r.wall_per_token_ns).collect::<Vec<_>>()),
    )
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
    against_genai(&cache);
}
