//! The `generation` section of a result: an LLM model folder run as token generation — time to
//! first token, each decode step, tokens per second, the KV cache, and each graph's placement.

use serde::{Deserialize, Serialize};

use crate::stats::LatencyStats;

use crate::{Assignment, ModelGraph, TensorSignature};

/// What a generation benchmark measured (`--model` an onnxruntime-genai folder).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Generation {
    /// `decoder` (one graph for prompt and tokens) or `pipeline` (several graphs).
    pub layout: String,
    /// `--prompt-tokens`: seeded synthetic prompt length.
    pub prompt_tokens: u32,
    /// `--gen-tokens`: decode steps per generation (each feeds one token and yields the next logits).
    pub gen_tokens: u32,
    /// Discarded generations before the timed ones.
    pub warmup_generations: u32,
    /// Timed generations.
    pub generations: u32,
    /// The model's context length (`model.context_length`).
    pub context_length: u32,
    /// Time to first token of each timed generation: the prompt's graph runs, up to the first logits.
    pub ttft_ns: Vec<u64>,
    /// Each timed generation's decode steps, in order (one entry per step: its graph runs).
    pub decode_ns: Vec<Vec<u64>>,
    /// Statistics of `ttft_ns` (the gate's: median, its interval, CV, bimodality).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<LatencyStats>,
    /// Statistics of every decode step of every timed generation, per token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<LatencyStats>,
    /// Prompt tokens per second: `prompt_tokens` / median TTFT.
    pub prefill_tok_s: f64,
    /// Generated tokens per second: 1 / median decode step.
    pub decode_tok_s: f64,
    /// Wall time of each timed generation (graph runs plus the loop's own work between them).
    pub wall_ns: Vec<u64>,
    /// How the KV cache went from step to step.
    pub kv: KvCache,
    /// The thread counts the graphs' sessions ran with (the first graph's), and where they come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<GenerationThreads>,
    /// The harness process's peak resident memory (`VmHWM`), where the OS reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
    /// The prompt's token ids (seeded, the same in every generation).
    pub prompt_ids: Vec<i64>,
    /// Token ids of the first timed generation: the first from the prompt's logits, then one per
    /// decode step (`gen_tokens + 1` ids, greedy).
    pub tokens: Vec<i64>,
    /// Every graph of the model, in run order, with where its nodes ran.
    pub graphs: Vec<GraphRun>,
}

/// The thread counts of a generation's sessions: `--intra-threads`, else the folder's
/// `session_options`, else onnxruntime-genai's default.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GenerationThreads {
    /// Intra-op threads (0: ONNX Runtime's own default).
    pub intra_op: u32,
    /// Inter-op threads, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inter_op: Option<u32>,
    /// Where the intra-op count comes from.
    pub source: String,
}

/// The KV cache: how it was carried between steps and how large it grew.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KvCache {
    /// `ping_pong` (two buffers per tensor, each step reads one and writes the other through I/O
    /// binding) or `shared` (past and present are one buffer: `search.past_present_share_buffer`
    /// with a static cache).
    pub mode: String,
    /// KV tensors copied per decode step, measured: a present output ONNX Runtime did not write into
    /// the buffer bound for it (0 with I/O binding).
    pub copies_per_step: f64,
    /// Bytes of the KV cache in use at the end of a generation (static caches: their whole size).
    pub bytes: u64,
    /// Bytes the harness allocated for it (two buffers per tensor in `ping_pong` mode).
    pub allocated_bytes: u64,
}

/// One graph of an LLM folder and where its nodes ran.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GraphRun {
    /// The graph's id (`decoder`, or its pipeline key such as `prompt-processor`).
    pub id: String,
    /// Its file, relative to the folder.
    pub file: String,
    /// sha256 of the file.
    pub sha256: String,
    /// How often it runs in one generation while the prompt is processed (chunks of a static prompt graph).
    pub prompt_runs: u32,
    /// How often it runs in one generation for generated tokens.
    pub token_runs: u32,
    /// Its inputs as declared.
    pub inputs: Vec<TensorSignature>,
    /// Its outputs as declared.
    pub outputs: Vec<TensorSignature>,
    /// Its node→EP assignment (`Session_GetEpGraphAssignmentInfo`).
    pub assignment: Assignment,
    /// Its own nodes and the graph ONNX Runtime partitions set against them (as `graph` of a
    /// single model's result; absent in results of older harnesses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<ModelGraph>,
    /// Per phase the graph runs in, its profiles (paths relative to the result directory).
    pub phases: Vec<GraphPhase>,
}

/// One phase of a graph: prompt or token generation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GraphPhase {
    /// `prompt` or `token`.
    pub phase: String,
    /// Runs per generation in this phase (the weight of its FLOPs in the model's share).
    pub runs: u32,
    /// The concrete shapes fed in this phase.
    pub input_shapes: Vec<Vec<i64>>,
    /// ORT profile of this phase's runs in the profiled generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// ORT profile of this phase in the reference pass (CPU EP, optimizations off): the prompt's
    /// runs; the first decode step and the last (at the past it has at the end of a generation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_profile: Option<String>,
}
