//! LLM model folders end to end: `npugate run --local` on the tiny random-weight decoders of
//! `scripts/make-test-models` (real ONNX Runtime, CPU EP), checked against independent computations
//! in Python: a generation with the KV cache equals a full forward pass over the same tokens, the
//! static prompt/token pipeline equals the graphs run by Python's onnxruntime, and the model's FLOPs
//! are each graph's counted as often as it runs.

use std::path::Path;
use std::process::{Command, Output};

use npugate_e2e::{bin, describe, model_folder, python, run};
use npugate_result::RunResult;

/// The CV of sub-millisecond steps on a shared machine is whatever the machine makes it.
const NO_CV: &str = "disable=[\"cv_pct\"]";

fn text(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

/// `npugate run --local` of a model folder into `out` with extra arguments.
fn run_local(folder: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut command = Command::new(bin("npugate"));
    command.args(["run", "--local", "--model", text(folder), "--out", text(out), "--rule", NO_CV]).args(extra);
    run(&mut command)
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// Runs a Python script (the venv's, with onnxruntime) with arguments and returns its stdout as JSON.
fn python_json(script: &str, args: &[&str]) -> serde_json::Value {
    let output = run(Command::new(python()).arg("-c").arg(script).args(args));
    assert!(output.status.success(), "{}", describe(&output));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&output)))
}

/// Full forward passes of the decoder over growing prefixes of prompt + generated tokens, with an
/// empty KV cache each time: the greedy token after each prefix and the last logits.
const FULL_FORWARD: &str = r#"
import json, sys, numpy as np, onnxruntime as ort
folder, ids, gen = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
s = ort.InferenceSession(folder + "/model.onnx", providers=["CPUExecutionProvider"])
past = {i.name: np.zeros([1, i.shape[1], 0, i.shape[3]], np.float32) for i in s.get_inputs() if i.name.startswith("past_key_values")}
def forward(tokens):
    n = len(tokens)
    feed = {"input_ids": np.array([tokens], np.int64), "attention_mask": np.ones((1, n), np.int64), "position_ids": np.arange(n, dtype=np.int64)[None], **past}
    return s.run(["logits"], feed)[0][0]
prompt = len(ids) - gen
logits = forward(ids)
tokens = [int(logits[p].argmax()) for p in range(prompt - 1, len(ids))]
print(json.dumps({"tokens": tokens, "last_logits": logits[-1].tolist()}))
"#;

/// The static pipeline run by Python: the prompt graph over 8-token chunks, then the token graph.
const STATIC_PIPELINE: &str = r#"
import json, sys, numpy as np, onnxruntime as ort
folder, prompt, gen = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
graphs = {n: ort.InferenceSession(folder + "/" + n + ".onnx", providers=["CPUExecutionProvider"]) for n in ("prompt", "token")}
cache = {i.name: np.zeros(i.shape, np.float32) for i in graphs["prompt"].get_inputs() if i.name.startswith("past_key_values")}
def step(graph, ids, start):
    s = graphs[graph]
    feed = {"input_ids": np.array([ids], np.int32), "position_ids": np.arange(start, start + len(ids), dtype=np.int32)[None], **cache}
    out = dict(zip([o.name for o in s.get_outputs()], s.run(None, feed)))
    for name in list(cache):
        cache[name] = out[name.replace("past_key_values", "present")]
    return out["logits"][0, -1]
for at in range(0, len(prompt), 8):
    logits = step("prompt", prompt[at:at + 8], at)
tokens = [int(logits.argmax())]
for i in range(gen):
    logits = step("token", [tokens[-1]], len(prompt) + i)
    tokens.append(int(logits.argmax()))
print(json.dumps({"tokens": tokens, "last_logits": logits.tolist()}))
"#;

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

/// The saved logits of the last generated token (the last row of `outputs/step_logits.npy`) as f64.
fn saved_logits(dir: &Path) -> Vec<f64> {
    let values = python_json(
        "import json, sys, numpy as np; print(json.dumps(np.load(sys.argv[1])[-1].astype(float).tolist()))",
        &[text(&dir.join("outputs/step_logits.npy"))],
    );
    values.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()
}

#[test]
fn a_generation_with_the_kv_cache_equals_a_full_forward_pass_over_the_same_tokens() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("gen");
    let folder = model_folder("tinyllm");
    let (prompt, gen, generations) = (12u32, 6u32, 3u32);
    let output = run_local(
        &folder,
        &out,
        &["--prompt-tokens", "12", "--gen-tokens", "6", "--generations", "3", "--check-outputs"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));

    let result = RunResult::read(&out).unwrap();
    let generation = result.generation.as_ref().expect("a generation section");
    assert_eq!((generation.layout.as_str(), generation.prompt_tokens, generation.gen_tokens), ("decoder", prompt, gen));
    // Whole generations more when decode steps waited for a CPU.
    let generations = npugate_e2e::runs_taken(&result, (gen * generations) as usize) / gen as usize;
    assert_eq!(generation.ttft_ns.len(), generations);
    assert!(generation.decode_ns.iter().all(|steps| steps.len() == gen as usize && steps.iter().all(|&ns| ns > 0)));
    assert_eq!(
        generation.decode.as_ref().map(|d| d.n),
        Some(gen as usize * generations),
        "per-token statistics over every step"
    );
    assert_eq!(generation.ttft.as_ref().map(|t| t.n), Some(generations));
    assert!(generation.prefill_tok_s > 0.0 && generation.decode_tok_s > 0.0);
    let median_step = generation.decode.as_ref().unwrap().median_ns;
    assert!(
        (generation.decode_tok_s - 1e9 / median_step).abs() < 1e-6 * generation.decode_tok_s,
        "decode tok/s is 1 / median step"
    );
    assert_eq!(
        (generation.kv.mode.as_str(), generation.kv.copies_per_step),
        ("ping_pong", 0.0),
        "I/O binding carries the cache without copies"
    );
    // 2 layers × key and value × 2 heads × (prompt + gen) positions × 16 × 4 bytes.
    assert_eq!(generation.kv.bytes, 2 * 2 * 2 * u64::from(prompt + gen) * 16 * 4);
    assert!(generation.peak_rss_bytes.is_some_and(|b| b > 1 << 20));
    assert_eq!(
        result.timings.latencies_ns.len(),
        gen as usize * generations,
        "the gate's latency series is the decode steps"
    );

    // The same tokens through Python's onnxruntime, each position from a full forward pass without a cache.
    let ids: Vec<i64> = generation.prompt_ids.iter().chain(&generation.tokens[..gen as usize]).copied().collect();
    let full = python_json(FULL_FORWARD, &[text(&folder), &serde_json::to_string(&ids).unwrap(), &gen.to_string()]);
    let tokens: Vec<i64> = full["tokens"].as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).collect();
    assert_eq!(tokens, generation.tokens, "greedy tokens of the cached generation = of full forward passes");
    let reference: Vec<f64> = full["last_logits"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let diff = max_abs_diff(&saved_logits(&out), &reference);
    assert!(diff < 1e-4, "last logits differ by {diff}");

    // --check-outputs compared tokens and step logits with the fp32 CPU reference run of the folder.
    let outputs = json(&out.join("outputs.json"));
    let names: Vec<&str> = outputs["outputs"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["step_logits"], "tokens are compared as tokens, not as a float tensor");
    assert_eq!(outputs["tokens"]["agreement_pct"], 100.0, "the same tokens on the reference");
    assert_eq!(outputs["outputs"][0]["metrics"]["max_abs_err"], 0.0, "the same logits on the reference");

    // Placement: the decoder in both phases, the model's FLOPs each phase's times its runs.
    let verdict = json(&out.join("verdict.json"));
    let graphs = verdict["placement"]["graphs"].as_array().unwrap();
    let phases: Vec<(String, u64)> =
        graphs.iter().map(|g| (g["phase"].as_str().unwrap().to_string(), g["runs"].as_u64().unwrap())).collect();
    assert_eq!(phases, [("prompt".to_string(), 1), ("token".to_string(), u64::from(gen))]);
    let weighted: u64 = graphs.iter().map(|g| g["flops_per_run"].as_u64().unwrap() * g["runs"].as_u64().unwrap()).sum();
    assert_eq!(verdict["placement"]["totals"]["flops"].as_u64(), Some(weighted));
    // Independent count of the MatMuls (2 × MACs): per layer q, k, v, o (32×32), up (32×64),
    // down (64×32), scores and context (2 heads × 16 × keys); the head (32×97). The reference
    // decode step i attends over prompt + 1 + i keys.
    let matmuls =
        |s: u64, keys: u64| 2 * (2 * s * (4 * 32 * 32 + 2 * 32 * 64) + 2 * 2 * (2 * s * keys * 16)) + 2 * s * 32 * 97;
    let (prompt, gen) = (u64::from(prompt), u64::from(gen));
    let expected = matmuls(prompt, prompt) + (0..gen).map(|i| matmuls(1, prompt + 1 + i)).sum::<u64>();
    let counted: u64 = verdict["placement"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["op_type"] == "MatMul")
        .map(|n| n["flops"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, expected, "MatMul FLOPs, weighted by runs per generation");
    assert!(
        verdict["placement"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["name"].as_str().unwrap().starts_with("decoder:")),
        "nodes are named after their graph"
    );
    assert!(verdict["generation"]["decode_tok_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_static_prompt_and_token_pipeline_shares_its_kv_buffer_and_matches_python() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("pipeline");
    let folder = model_folder("tinyllm_qnn");
    let output = run_local(
        &folder,
        &out,
        &["--prompt-tokens", "16", "--gen-tokens", "8", "--generations", "2", "--check-outputs"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("Generation (pipeline, 16-token prompt, 8 decode steps, 2 generations)"), "{stdout}");

    let result = RunResult::read(&out).unwrap();
    let generation = result.generation.unwrap();
    assert_eq!((generation.kv.mode.as_str(), generation.kv.copies_per_step), ("shared", 0.0));
    assert_eq!(generation.kv.bytes, 2 * 2 * 2 * 32 * 16 * 4, "a static cache is its whole length");
    let runs: Vec<(&str, u32, u32)> =
        generation.graphs.iter().map(|g| (g.id.as_str(), g.prompt_runs, g.token_runs)).collect();
    assert_eq!(
        runs,
        [("prompt-processor", 2, 0), ("token-generator", 0, 8)],
        "two 8-token prompt chunks, then 8 steps"
    );
    let python =
        python_json(STATIC_PIPELINE, &[text(&folder), &serde_json::to_string(&generation.prompt_ids).unwrap(), "8"]);
    let tokens: Vec<i64> = python["tokens"].as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).collect();
    assert_eq!(tokens, generation.tokens);
    let reference: Vec<f64> = python["last_logits"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert!(max_abs_diff(&saved_logits(&out), &reference) < 1e-4);
    let verdict = json(&out.join("verdict.json"));
    let fallen =
        verdict["placement"]["nodes"].as_array().unwrap().iter().filter(|n| n["ep"] != "CPUExecutionProvider").count();
    assert_eq!(fallen, 0);
}

#[test]
fn generation_rules_judge_ttft_and_tokens_per_second() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("rules");
    let folder = model_folder("tinyllm");
    let output = run_local(
        &folder,
        &out,
        &[
            "--prompt-tokens",
            "8",
            "--gen-tokens",
            "4",
            "--generations",
            "2",
            "--profile-runs",
            "1",
            "--rule",
            "min_decode_tok_s=1",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    // Each decode step's CPU wait is recorded, as each run's is; steps the harness added to
    // replace those that waited come in whole generations.
    let result = RunResult::read(&out).unwrap();
    let waits = result.timings.run_queue_delays().expect("the CPU wait of every decode step");
    assert_eq!(waits.len(), result.timings.latencies_ns.len());
    let taken = npugate_e2e::runs_taken(&result, 8);
    assert!(taken.is_multiple_of(4) && waits.len() == taken, "{:?}", result.timings.extension);
    // Limits no machine meets, judged on the same result.
    let fail = run(Command::new(bin("npugate")).args([
        "gate",
        text(&out),
        "--rule",
        NO_CV,
        "--rule",
        "max_ttft_ms=0.000001",
        "--rule",
        "min_decode_tok_s=1e12",
        "--rule",
        "min_prefill_tok_s=1e12",
        "--rule",
        "decode_cv_pct=5",
    ]));
    assert_eq!(fail.status.code(), Some(1), "{}", describe(&fail));
    let stdout = String::from_utf8_lossy(&fail.stdout);
    for needle in [
        "max_ttft_ms: median time to first token",
        "min_decode_tok_s: decode",
        "min_prefill_tok_s: prefill",
        "decode_cv_pct: a CV limit needs at least 20 decode steps, this run has 8",
    ] {
        assert!(stdout.contains(needle), "{needle}: {stdout}");
    }

    // A baseline keeps the TTFT of every generation; the run against itself is 1.000× (pass), against
    // a baseline whose first tokens came after 1 ns the TTFT rule fails while the decode steps pass.
    let saved = work.path().join("baseline.json");
    let output = run(Command::new(bin("npugate")).args(["baseline", "save", text(&out), "--out", text(&saved)]));
    assert!(output.status.success(), "{}", describe(&output));
    let mut baseline = json(&saved);
    let ttft: Vec<u64> = baseline["ttft_ns"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(
        ttft,
        json(&out.join("result.json"))["generation"]["ttft_ns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect::<Vec<_>>()
    );
    let same =
        run(Command::new(bin("npugate")).args(["gate", text(&out), "--rule", NO_CV, "--baseline", text(&saved)]));
    assert_eq!(same.status.code(), Some(0), "{}", describe(&same));
    assert!(
        String::from_utf8_lossy(&same.stdout)
            .contains("baseline_ttft_pct: median time to first token is 1.000× the baseline's"),
        "{}",
        describe(&same)
    );
    baseline["ttft_ns"] = serde_json::json!([1, 1]);
    std::fs::write(&saved, baseline.to_string()).unwrap();
    let slower =
        run(Command::new(bin("npugate")).args(["gate", text(&out), "--rule", NO_CV, "--baseline", text(&saved)]));
    assert_eq!(slower.status.code(), Some(1), "{}", describe(&slower));
    let verdict = json(&out.join("verdict.json"));
    let status = |rule: &str| {
        verdict["checks"].as_array().unwrap().iter().find(|c| c["rule"] == rule).map(|c| c["status"].clone())
    };
    assert_eq!(
        (status("baseline_ttft_pct"), status("baseline_median_pct")),
        (Some("fail".into()), Some("pass".into())),
        "{verdict}"
    );
}

#[test]
fn bad_model_folders_and_lengths_are_one_line_exit_2_before_anything_runs() {
    let work = tempfile::tempdir().unwrap();
    let source = model_folder("tinyllm");
    let copy = work.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    std::fs::copy(source.join("model.onnx"), copy.join("model.onnx")).unwrap();
    let config = std::fs::read_to_string(source.join("genai_config.json")).unwrap();
    let cases: Vec<(String, Vec<&str>, &str)> = vec![
        (
            config.replace("\"model.onnx\"", "\"missing.onnx\""),
            vec![],
            "model.decoder.filename: names missing.onnx, which is not in",
        ),
        (
            config.replace("\"position_ids\": \"position_ids\"", "\"position_ids\": \"positions\""),
            vec![],
            "graph model.onnx has inputs the config does not name (position_ids)",
        ),
        (
            config.replace("\"input_ids\": \"input_ids\"", "\"input_ids\": \"tokens\""),
            vec![],
            "model.decoder.inputs.input_ids: \"tokens\": graph model.onnx has no input of that name",
        ),
        (
            config.clone(),
            vec!["--prompt-tokens", "60", "--gen-tokens", "8"],
            "--prompt-tokens 60 + --gen-tokens 8 = 68 tokens, more than",
        ),
        (config.clone(), vec!["--gen-tokens", "0"], "0 leaves nothing to measure"),
        (config.clone(), vec!["--shape", "input_ids=1x4"], "--shape does not apply to the LLM model folder"),
    ];
    for (text_config, extra, needle) in cases {
        std::fs::write(copy.join("genai_config.json"), &text_config).unwrap();
        let out = work.path().join("out");
        let output = run_local(&copy, &out, &extra);
        assert_eq!(output.status.code(), Some(2), "{extra:?}: {}", describe(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{needle}: {stderr}");
        assert!(!out.exists(), "nothing ran: {}", out.display());
    }
    let lines = run_local(&copy, &work.path().join("x"), &["--prompt-tokens", "60", "--gen-tokens", "8"]);
    let stderr = String::from_utf8_lossy(&lines.stderr);
    assert!(
        stderr.trim().lines().count() == 1 && stderr.starts_with("npugate: error: --prompt-tokens 60"),
        "refused before a runtime is even chosen: {}",
        describe(&lines)
    );
}

#[test]
fn the_output_of_onnxruntime_genais_own_model_builder_runs_and_generates_its_tokens() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("builder");
    let folder = model_folder("genai_builder_llama");
    let output = run_local(&folder, &out, &["--prompt-tokens", "16", "--gen-tokens", "8", "--generations", "2"]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let generation = RunResult::read(&out).unwrap().generation.unwrap();
    assert_eq!(
        (generation.layout.as_str(), generation.kv.mode.as_str(), generation.kv.copies_per_step),
        ("decoder", "shared", 0.0),
        "the config's past_present_share_buffer: one max-length buffer bound as past and present, as genai does"
    );
    // onnxruntime-genai itself, greedy on the same prompt: its tokens until it stops at EOS.
    let builder_python = npugate_e2e::cache_dir().join("genai-builder-venv/bin/python");
    let script = r#"
import json, sys, onnxruntime_genai as og
model = og.Model(sys.argv[1]); prompt = json.loads(sys.argv[2])
params = og.GeneratorParams(model); params.set_search_options(max_length=len(prompt) + int(sys.argv[3]) + 1, do_sample=False)
generator = og.Generator(model, params); generator.append_tokens(prompt)
tokens = []
while not generator.is_done():
    generator.generate_next_token(); tokens.append(int(generator.get_next_tokens()[0]))
print(json.dumps(tokens))
"#;
    let genai = run(Command::new(builder_python).arg("-c").arg(script).args([
        text(&folder),
        &serde_json::to_string(&generation.prompt_ids).unwrap(),
        "8",
    ]));
    assert!(genai.status.success(), "{}", describe(&genai));
    let tokens: Vec<i64> = serde_json::from_slice(&genai.stdout).unwrap();
    assert!(!tokens.is_empty() && tokens.len() <= generation.tokens.len());
    assert_eq!(
        tokens,
        generation.tokens[..tokens.len()],
        "npugate's greedy tokens = onnxruntime-genai's (up to its EOS)"
    );
}

/// The independent count of a builder folder's decode FLOPs over steps at pasts `[first, last]`:
/// 2 × the MACs of every MatMul / MatMulNBits (its K×N; the tied head: the embedding's) and of each
/// GroupQueryAttention's Q·Kᵀ and A·V over past + 1 keys, read from the ONNX file with onnx.
const BUILDER_DECODE_FLOPS: &str = r#"
import json, sys, onnx
model = onnx.load(sys.argv[1] + "/model.onnx", load_external_data=False)
config = json.load(open(sys.argv[1] + "/genai_config.json"))["model"]["decoder"]
first, last = int(sys.argv[2]), int(sys.argv[3])
dims = {i.name: list(i.dims) for i in model.graph.initializer}
produced_by = {o: n for n in model.graph.node for o in n.output}
def weight(name):
    node = produced_by.get(name)
    if node is not None and node.op_type == "Transpose":
        return weight(node.input[0])
    return dims[name]
per_token = 0
attention_heads = 0
for node in model.graph.node:
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "MatMul":
        k_by_n = weight(node.input[1]); per_token += k_by_n[0] * k_by_n[1]
    elif node.op_type == "MatMulNBits":
        per_token += attrs["K"] * attrs["N"]
    elif node.op_type == "GroupQueryAttention":
        attention_heads += attrs["num_heads"]
head_size = config["head_size"]
macs = sum(per_token + 2 * attention_heads * head_size * (past + 1) for past in range(first, last + 1))
print(json.dumps({"flops": 2 * macs, "steps": last - first + 1}))
"#;

#[test]
fn a_builder_folders_decode_flops_follow_the_context_like_an_independent_count() {
    // Steps 201–400 of a 32-token prompt: a 232-token prompt and 200 decode steps (pasts 232–431).
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("qwen2");
    // The builder's shared buffer, as genai runs it: GroupQueryAttention's past inputs have the
    // buffer's length whatever the context, so the reference pass counts on the growing cache.
    let folder = model_folder("genai_builder_qwen2_fp32");
    let extra = ["--prompt-tokens", "232", "--gen-tokens", "200", "--generations", "1", "--warmup-generations", "0"];
    let output = run_local(&folder, &out, &extra);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let generation = RunResult::read(&out).unwrap().generation.unwrap();
    assert_eq!(generation.kv.mode, "shared", "the layout genai runs is the one timed");
    let verdict = json(&out.join("verdict.json"));
    let token = verdict["placement"]["graphs"].as_array().unwrap().iter().find(|g| g["phase"] == "token").unwrap();
    let counted = token["flops_per_run"].as_u64().unwrap() * token["runs"].as_u64().unwrap();
    let independent = python_json(BUILDER_DECODE_FLOPS, &[text(&folder), "232", "431"]);
    let expected = independent["flops"].as_u64().unwrap();
    let ratio = counted as f64 / expected as f64;
    // The rest (norms, SiLU, residual adds) is element-wise: well under 2% of a step.
    assert!((1.0..1.02).contains(&ratio), "decode FLOPs {counted} vs independent {expected} (ratio {ratio:.4})");
    let first_step_only = python_json(BUILDER_DECODE_FLOPS, &[text(&folder), "232", "232"])["flops"].as_u64().unwrap();
    assert!(counted > 200 * first_step_only * 102 / 100, "not the first step's FLOPs 200 times");
    // Decode steps grow with the context by design: the verdict fits that growth, not noise.
    let warnings = verdict["warnings"].as_array().unwrap();
    assert!(warnings.iter().any(|w| w.as_str().unwrap().starts_with("decode steps grow ")), "{warnings:?}");
}

/// The run's and the reference's greedy tokens (each `result.json`) and the reference's digest.
fn tokens_of_both(out: &Path) -> (Vec<i64>, Vec<i64>, RunResult) {
    let run = RunResult::read(out).unwrap().generation.unwrap().tokens;
    let reference = RunResult::read(&out.join("output-reference")).unwrap();
    (run, reference.generation.clone().unwrap().tokens, reference)
}

#[test]
fn an_int4_folder_is_compared_with_its_fp32_folder_as_tokens_with_the_logits_up_to_the_first_divergence() {
    let work = tempfile::tempdir().unwrap();
    let int4 = model_folder("genai_builder_qwen2_int4");
    let lengths = ["--prompt-tokens", "16", "--gen-tokens", "24", "--generations", "1", "--warmup-generations", "0"];
    // Against its own fp32 folder, and against another model of the same vocabulary (which must
    // part from it somewhere: the divergence path).
    for (name, reference, other_model) in
        [("fp32", "genai_builder_qwen2_fp32", false), ("llama", "genai_builder_llama", true)]
    {
        let out = work.path().join(name);
        let reference_folder = model_folder(reference);
        let mut extra = vec!["--check-outputs", "--reference-model", text(&reference_folder)];
        extra.extend(lengths);
        let output = run_local(&int4, &out, &extra);
        let (run, reference_tokens, reference_result) = tokens_of_both(&out);
        // The independent count from the two result.json.
        let compared = run.len().min(reference_tokens.len());
        let agreeing = run.iter().zip(&reference_tokens).filter(|(a, b)| a == b).count();
        let divergence = run.iter().zip(&reference_tokens).position(|(a, b)| a != b);
        assert!(!other_model || divergence.is_some(), "another model's tokens: {run:?} = {reference_tokens:?}");
        let outputs = json(&out.join("outputs.json"));
        assert_eq!(outputs["schema"], "npugate.outputs/1.1");
        let tokens = &outputs["tokens"];
        assert_eq!((tokens["compared"].as_u64(), tokens["agreeing"].as_u64()), (Some(25), Some(agreeing as u64)));
        assert_eq!(compared, 25, "the prompt's token and 24 decode steps");
        assert!((tokens["agreement_pct"].as_f64().unwrap() - agreeing as f64 * 100.0 / 25.0).abs() < 1e-9);
        assert_eq!(tokens["first_token_agrees"], run[0] == reference_tokens[0]);
        match divergence {
            None => assert!(tokens.get("first_divergence").is_none(), "{tokens}"),
            Some(p) => assert_eq!(
                tokens["first_divergence"],
                serde_json::json!({"position": p, "token": run[p], "reference_token": reference_tokens[p]})
            ),
        }
        // The logits of the positions both runs reached from the same tokens: up to the divergence.
        let rows = divergence.map_or(compared, |p| p + 1);
        assert_eq!(tokens["logit_positions"].as_u64(), Some(rows as u64));
        assert_eq!(outputs["outputs"][0]["name"], "step_logits");
        assert_eq!(outputs["outputs"][0]["shape"], serde_json::json!([rows, 128]), "vocabulary 128");
        // The reference is identified by every file of its folder, not its genai_config.json.
        assert_eq!(outputs["reference"]["model_digest"], reference_result.model.digest.as_str());
        assert_ne!(reference_result.model.digest, reference_result.model.sha256);
        let files: Vec<&str> = reference_result.model.files.iter().map(|f| f.name.as_str()).collect();
        assert!(files.contains(&"tokenizer.json") && files.contains(&"model.onnx.data"), "{files:?}");
        // Judged as tokens: the first token must agree by default; the report says where they part.
        let first_agrees = divergence != Some(0);
        assert_eq!(output.status.code(), Some(if first_agrees { 0 } else { 1 }), "{}", describe(&output));
        let printed = describe(&output);
        assert!(
            printed.contains("tokens on ") && printed.contains(&format!("{agreeing}/25 tokens agree")),
            "{printed}"
        );
        let verdict = json(&out.join("verdict.json"));
        let check = verdict["checks"].as_array().unwrap().iter().find(|c| c["rule"] == "min_first_divergence").unwrap();
        assert_eq!(check["status"], if first_agrees { "pass" } else { "fail" }, "{check}");
        assert!(!verdict["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["message"].as_str().unwrap().contains("generated_tokens")));
    }
}
