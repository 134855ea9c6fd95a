//! An LLM model folder run as token generation: a seeded synthetic prompt of `--prompt-tokens`
//! ids, then `--gen-tokens` decode steps, each feeding the greedy token of the last logits.
//!
//! The timed loop keeps the harness's discipline: a step's time is its graphs' `RunWithBinding`
//! calls between two clock reads, nothing else. Between steps, outside the clock, the loop writes
//! the next token id, binds views of buffers allocated once (ids, positions, mask, the KV cache,
//! the logits) and picks the argmax. The KV cache is never copied: `ping_pong` keeps two buffers
//! per tensor (a step reads one and writes the other, which the next step reads), `shared` binds
//! one buffer as past and present (`search.past_present_share_buffer`: of the static cache's length,
//! else of the context, as onnxruntime-genai binds it). That
//! no KV output was written elsewhere is checked after every timed step (`kv.copies_per_step`).
//!
//! Profiling and FLOPs work per graph and phase: the profiled generation gives each graph a
//! session per phase it runs in (a decoder runs the prompt and the tokens: two profiles), and the
//! reference pass (CPU EP, optimizations off) runs the prompt, the first decode step and the last
//! one (at the past it has at the end of a generation) the same way: the shapes FLOPs are counted on.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use npugate_onnx::genai::{LlmGraph, LlmModel};
use npugate_onnx::size::{Origin, TensorRequest};
use npugate_profile::placement::PlacementInputs;
use npugate_result::digest::{model_digest, sha256_file};
use npugate_result::stats::{median, LatencyStats};
use npugate_result::{
    files, Assignment, Generation, GenerationThreads, GraphPhase, GraphRun, InputDescription, KvCache, ModelFile,
    ModelGraph, ModelInfo, RunExtension, RunResult, TimedLog, Timings,
};
use npugate_settings::generation::{DEFAULT_GEN_TOKENS, DEFAULT_PROMPT_TOKENS};
use npugate_settings::EpKind;
use ort::environment::Environment;
use ort::session::{IoBinding, NoSelectedOutputs, RunOptions, Session};
use ort::value::TensorElementType;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

use crate::account;
use crate::cpu_wait::CpuWaitRecord;
use crate::graph::LoadedModel;
use crate::kv::{self, Buffer, View};
use crate::measure::{clean_runs, quiet_run_options, run_with_binding, RunCount};
use crate::session::SessionPlan;
use crate::setup::{self, Setup};
use npugate_settings::HarnessCommand as Args;

/// Session config entry with which sessions in one process share the EP's context: the QNN EP
/// loads a context binary that several graphs' EPContext nodes name once, and shares weights; a
/// compile (`ep.context_enable=1`) puts every graph of the group into one context binary.
const SHARE_EP_CONTEXTS: &str = "ep.share_ep_contexts";
/// Set on the last session of a sharing group: it writes the shared context binary (a compile)
/// and ends the group (ONNX Runtime's EPContext design, "EPContext with weight sharing").
const STOP_SHARE_EP_CONTEXTS: &str = "ep.stop_share_ep_contexts";

/// The two phases of a generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Prompt,
    Token,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Prompt => "prompt",
            Phase::Token => "token",
        }
    }
}

/// How long a generation is: prompt, decode steps, how many generations, and how many decode steps
/// the harness may time to replace the ones that waited for a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// Prompt tokens.
    pub prompt: u32,
    /// Decode steps.
    pub gen: u32,
    /// Discarded generations.
    pub warmup: u32,
    /// Timed generations.
    pub generations: u32,
    /// Decode steps timed at most (`--max-runs`, default 4 × the steps asked for).
    pub step_budget: u32,
}

impl Spec {
    /// The lengths the flags ask for, checked against the model: the prompt and the generated
    /// tokens must fit its context (and a static cache), a static prompt graph takes the prompt in
    /// whole chunks. Unset lengths take the defaults, shortened to what the model holds.
    pub fn resolve(args: &Args, llm: &LlmModel) -> Result<Spec> {
        let settings = &args.settings.generation;
        let (prompt, gen) = llm
            .lengths(
                settings.prompt_tokens.map(|c| c.get()),
                settings.gen_tokens.map(|c| c.get()),
                (DEFAULT_PROMPT_TOKENS, DEFAULT_GEN_TOKENS),
            )
            .map_err(anyhow::Error::msg)?;
        let generations = settings.generations();
        let step_budget = args.settings.decode_step_budget(gen * generations);
        Ok(Spec { prompt, gen, warmup: settings.warmup_generations(), generations, step_budget })
    }
}

/// Runs the folder whose config is `config`: sessions, warmup and timed generations, the
/// profiled generation, the reference pass; writes `result.json` with its `generation` section.
pub fn run(args: &Args, config: &Path) -> Result<()> {
    let llm = LlmModel::open(config).map_err(|e| anyhow!("{e}"))?;
    refuse_input_flags(args, config)?;
    let spec = Spec::resolve(args, &llm)?;
    let quiet = account::quiet_first(args) && !weight_shared_compile(args, &llm);
    let setup = Setup::new(args, &llm.graphs[0].path, quiet)?;
    let model = identify(&llm, &args.model_files)?;
    let mut result = setup.result(args, model, &setup.plan);
    result.settings.runs = spec.generations;
    result.settings.warmup = spec.warmup;
    let Setup { out, log, env, mut timings, ep_name, plan, .. } = setup;
    let threads = session_threads(args, &llm);
    result.execution.intra_op_threads = threads.intra_op as usize;
    let loaded = llm.graphs.iter().map(|graph| LoadedModel::read(&graph.path)).collect::<Result<Vec<_>>>()?;
    let plans: Vec<SessionPlan> = llm
        .graphs
        .iter()
        .zip(&loaded)
        .enumerate()
        .map(|(index, (graph, loaded))| graph_plan(&plan, graph, loaded, index, llm.graphs.len(), args))
        .collect();
    let model_graphs: Vec<ModelGraph> = loaded
        .iter()
        .zip(&plans)
        .map(|(loaded, plan)| setup::model_graph(loaded, &env, plan, (&out, false), &mut result.warnings))
        .collect();

    let log_start = crate::backend::log_position(&log);
    let start = Instant::now();
    let sessions_input =
        SessionsInput { args, llm: &llm, plans: &plans, model_graphs: &model_graphs, env: &env, log: &log, log_start };
    let created = create_sessions(&sessions_input, quiet, &mut result)?;
    timings.session_create_ns = setup::elapsed_ns(start);
    let sessions = match created {
        Ok(sessions) => sessions,
        Err(error) if args.settings.session_only => {
            return setup::refused(args, &out, result, timings, &log, log_start, error)
        }
        Err(error) => return Err(error),
    };
    let created_memory = crate::footprint::after_create();
    let assignments: Vec<Assignment> = sessions.iter().map(|s| crate::session::assignment(s)).collect();
    result.assignment = merged(&assignments);
    let mut account = args.settings.session_only.then(|| crate::backend::log_since(&log, log_start));
    let prompt = prompt_ids(&llm, spec.prompt, args.settings.seed)?;
    result.inputs = vec![describe_prompt(&llm, &prompt, args.settings.seed)];
    let mut generation =
        new_generation(&llm, &spec, prompt.clone(), graph_runs(&llm, &spec, &assignments, model_graphs)?);
    generation.threads =
        Some(GenerationThreads { intra_op: threads.intra_op, inter_op: threads.inter_op, source: threads.source });

    if args.settings.session_only {
        drop(sessions);
        result.timings = timings;
        result.generation = Some(generation);
        assess_backend(args, &mut result, account, &env, &plans, &log, &ep_name);
        result.write(&out).with_context(|| format!("cannot write {}", out.join(files::RESULT).display()))?;
        return Ok(());
    }

    let by_phase = |phase: Phase| -> Vec<(usize, Rc<Session>)> {
        llm.graphs
            .iter()
            .enumerate()
            .filter(|(_, g)| runs_in(g, phase))
            .map(|(i, _)| (i, Rc::clone(&sessions[i])))
            .collect()
    };
    let mut generator = Generator::new(&llm, &spec, by_phase(Phase::Prompt), by_phase(Phase::Token))?;
    generation.kv.mode = generator.kv.mode().into();
    generation.kv.allocated_bytes = generator.kv.allocated_bytes();
    // ONNX Runtime's own loggers log at the timed level too while the graphs run, as in an app.
    env.set_log_level(crate::session::log_level(args.settings.ort_log_level));
    let runs_start = crate::backend::log_position(&log);
    let kept_rows = if args.settings.check_outputs { saved_logit_rows(generator.vocab) } else { 0 };
    let measured = generator.measure(&prompt, &spec, &mut generation, kept_rows, &mut timings);
    let lines_during_runs = crate::backend::lines_between(&log, runs_start, crate::backend::log_position(&log));
    env.set_log_level(ort::logging::LogLevel::Verbose);
    result.execution.timed_log =
        Some(TimedLog { level: args.settings.ort_log_level.cli_name().into(), lines_during_runs });
    // The cold start of the gate's latency series (decode steps): the first decode step run.
    timings.first_inference_ns = generator.first_step_ns;
    let saved = match (&measured, args.settings.check_outputs) {
        (Ok(step_logits), true) => save_outputs(&out, &generation.tokens, step_logits, generator.vocab).map(Some),
        _ => Ok(None),
    };
    generation.kv.bytes = generator.kv.bytes_in_use(spec.prompt + spec.gen);
    drop(generator);
    if generation.ttft_ns.is_empty() {
        return measured.map(drop);
    }
    let saved_outputs = saved.as_ref().ok().and_then(Option::as_ref);
    record_generation(&mut result, generation, timings, &created_memory, saved_outputs);

    let after = AfterRuns { args, env: &env, llm: &llm, plans: &plans, prompt: &prompt, spec: &spec, out: &out };
    let finished =
        measured.map(drop).and_then(|()| saved.map(drop)).and_then(|()| finish(&after, &mut result, &mut account));
    assess_backend(args, &mut result, account, &env, &plans, &log, &ep_name);
    setup::conclude(result, finished, &ep_name, &out)
}

/// Refuses the flags that feed a model's inputs: a generation feeds its own.
fn refuse_input_flags(args: &Args, config: &Path) -> Result<()> {
    for (given, flag) in [
        (!args.settings.shapes.is_empty(), "--shape"),
        (!args.settings.inputs.is_empty(), "--input"),
        (args.settings.context_cache.is_some(), "--context-cache"),
    ] {
        if given {
            bail!("{flag} does not apply to an LLM model folder ({}): the generation feeds its own ids, positions and KV cache", config.display());
        }
    }
    Ok(())
}

/// What creating a folder's sessions needs: its graphs, their plans and model graphs, the
/// environment and the log (read from `log_start`).
struct SessionsInput<'a> {
    args: &'a Args,
    llm: &'a LlmModel,
    plans: &'a [SessionPlan],
    model_graphs: &'a [ModelGraph],
    env: &'a Environment,
    log: &'a Path,
    log_start: u64,
}

/// Creates the graphs' sessions. The timed sessions log at an app's level (nothing per
/// inference); a session-only run has no timed runs and its sessions are the account: quiet first
/// on an accelerator (`quiet`), created again at VERBOSE where the verdict needs reasons (see
/// `account`). The outer error is the account's, the inner one the sessions'.
fn create_sessions(input: &SessionsInput<'_>, quiet: bool, result: &mut RunResult) -> Result<Result<Vec<Rc<Session>>>> {
    let SessionsInput { args, llm, plans, model_graphs, env, log, log_start } = *input;
    let timed_level = (!args.settings.session_only).then_some(args.settings.ort_log_level);
    let create = |level| -> Result<Vec<Rc<Session>>> {
        llm.graphs
            .iter()
            .zip(plans)
            .map(|(graph, plan)| {
                plan.create(env, &format!("timed:{}", graph.id), level).map(Rc::new).map_err(|e| {
                    setup::explain_with_backend(e, &plan.ep, log, log_start)
                        .context(format!("graph {} ({})", graph.id, graph.file))
                })
            })
            .collect()
    };
    if !quiet {
        return Ok(create(timed_level));
    }
    // The first graph whose assignment needs the EP's reasons.
    let judge = |sessions: &Vec<Rc<Session>>| {
        sessions.iter().zip(model_graphs).zip(&llm.graphs).find_map(|((session, graph), llm_graph)| {
            let assignment = crate::session::assignment(session);
            let placement =
                PlacementInputs { assignment: &assignment, graph: Some(graph), ..PlacementInputs::of_run(result) };
            account::rerun_reason(&placement).map(|reason| format!("graph {}: {reason}", llm_graph.id))
        })
    };
    let plan_refs: Vec<&SessionPlan> = plans.iter().collect();
    let (created, logged) = account::create_quiet_first(args.settings.ort_log_level, env, &plan_refs, create, judge)?;
    result.execution.session_log = Some(logged);
    Ok(created)
}

/// A generation's record before it runs: its layout and lengths, the prompt and the graphs' runs.
fn new_generation(llm: &LlmModel, spec: &Spec, prompt_ids: Vec<i64>, graphs: Vec<GraphRun>) -> Generation {
    Generation {
        layout: match llm.layout {
            npugate_onnx::genai::Layout::Decoder => "decoder".into(),
            npugate_onnx::genai::Layout::Pipeline => "pipeline".into(),
        },
        prompt_tokens: spec.prompt,
        gen_tokens: spec.gen,
        warmup_generations: spec.warmup,
        generations: spec.generations,
        context_length: llm.context_length,
        ttft_ns: Vec::new(),
        decode_ns: Vec::new(),
        ttft: None,
        decode: None,
        prefill_tok_s: 0.0,
        decode_tok_s: 0.0,
        wall_ns: Vec::new(),
        kv: KvCache { mode: String::new(), copies_per_step: 0.0, bytes: 0, allocated_bytes: 0 },
        threads: None,
        peak_rss_bytes: None,
        prompt_ids,
        tokens: Vec::new(),
        graphs,
    }
}

/// Puts the measured generation into `result`: its summary, the memory, the gate's latency series
/// (every decode step), the histogram and the saved outputs.
fn record_generation(
    result: &mut RunResult,
    mut generation: Generation,
    mut timings: Timings,
    created_memory: &crate::footprint::AfterCreate,
    saved: Option<&(Vec<String>, Vec<npugate_result::TensorSignature>)>,
) {
    summarize(&mut generation);
    let memory = crate::footprint::record(created_memory);
    generation.peak_rss_bytes = memory.peak_bytes;
    result.memory = Some(memory);
    // The gate's latency series of a generation: every decode step (per-token latency).
    timings.latencies_ns = generation.decode_ns.iter().flatten().copied().collect();
    timings.loop_wall_ns = generation.wall_ns.iter().sum();
    result.histogram = setup::histogram(&timings.latencies_ns);
    if let Some((saved, signatures)) = saved {
        result.artifacts.outputs = saved.clone();
        result.model.outputs = signatures.clone();
    }
    result.timings = timings;
    result.generation = Some(generation);
}

/// True for a weight-shared compile (the graphs' sessions write their EPContext models from one
/// shared EP context): it logs VERBOSE from the start, not quiet first (see [`account`]), since
/// QNN's word that it prepared each graph with weight sharing (`weight_sharing_enabled = 1`) is in
/// its VERBOSE log only, and the backend logs at the environment's level when the EP was registered.
fn weight_shared_compile(args: &Args, llm: &LlmModel) -> bool {
    let config: Vec<(String, String)> =
        args.settings.session_config.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
    shares_ep_context(args.settings.ep, llm.graphs.len()) && crate::context_cache::written_by(&config).is_some()
}

/// Whether the sessions of a folder of `graphs` graphs on `ep` share one EP context.
fn shares_ep_context(ep: EpKind, graphs: usize) -> bool {
    ep == EpKind::Qnn && graphs > 1
}

/// The accelerator's health and emulation from the VERBOSE account: the session-only sessions'
/// or the profiled pass's set-up log, else one account session per graph.
fn assess_backend(
    args: &Args,
    result: &mut RunResult,
    account: Option<String>,
    env: &Environment,
    plans: &[SessionPlan],
    log: &Path,
    ep_name: &str,
) {
    if !args.settings.ep.is_accelerator() {
        return;
    }
    let account = account.unwrap_or_else(|| {
        plans.iter().map(|plan| setup::account_session(env, plan, log, &mut result.warnings)).collect()
    });
    result.backend =
        Some(crate::backend::assess(&account, &result.assignment, ep_name, setup::adsp_problem().as_deref()));
    result.execution.emulated = setup::emulation(args, result.backend.as_ref());
}

/// The session plan of graph `index` of `graphs`: the run's plan on the graph's file; with QNN
/// and several graphs, one shared EP context across them (what onnxruntime-genai sets for QNN),
/// which the last graph's session ends. A compile of a folder writes each graph's EPContext model
/// beside the path asked for, named after the graph's file (`token.onnx` → `token_ctx.onnx`).
fn graph_plan(
    plan: &SessionPlan,
    graph: &LlmGraph,
    loaded: &LoadedModel,
    index: usize,
    graphs: usize,
    args: &Args,
) -> SessionPlan {
    let threads = graph.threads.resolve(args.settings.intra_threads as u32, hardware_threads());
    let mut plan = SessionPlan {
        model: graph.path.clone(),
        source_model: graph.path.clone(),
        renamed: loaded.renamed.clone(),
        // One trace file per result directory: the graphs of a folder would overwrite each other's.
        trace_ep_options: Vec::new(),
        intra_threads: threads.intra_op as usize,
        inter_threads: threads.inter_op.map(|n| n as usize),
        ..plan.clone()
    };
    if shares_ep_context(plan.ep.kind, graphs) {
        let last = index + 1 == graphs;
        for (key, wanted) in [(SHARE_EP_CONTEXTS, true), (STOP_SHARE_EP_CONTEXTS, last)] {
            if wanted && !plan.session_config.iter().any(|(k, _)| k == key) {
                plan.session_config.push((key.into(), "1".into()));
            }
        }
    }
    if let Some((_, path)) =
        plan.session_config.iter_mut().find(|(key, _)| key == crate::context_cache::CONTEXT_FILE_PATH)
    {
        let stem = Path::new(&graph.file)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| graph.id.clone());
        *path = Path::new(path.as_str()).with_file_name(format!("{stem}_ctx.onnx")).display().to_string();
    }
    plan
}

/// The threads the first graph's sessions run with, as onnxruntime-genai sets them (see
/// [`npugate_onnx::genai::ConfigThreads::resolve`]), with `--intra-threads` over both.
fn session_threads(args: &Args, llm: &LlmModel) -> npugate_onnx::genai::SessionThreads {
    llm.graphs[0].threads.resolve(args.settings.intra_threads as u32, hardware_threads())
}

/// The machine's hardware threads as this process may use them (`std::thread::hardware_concurrency`
/// in genai; here the ones the process's affinity allows).
fn hardware_threads() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

fn runs_in(graph: &LlmGraph, phase: Phase) -> bool {
    match phase {
        Phase::Prompt => graph.run_on_prompt,
        Phase::Token => graph.run_on_token_gen,
    }
}

/// The folder as one model: the config's sha256, every graph and its files, one digest.
fn identify(llm: &LlmModel, hashed: &[ModelFile]) -> Result<ModelInfo> {
    let (sha256, bytes) = sha256_file(&llm.config).with_context(|| format!("cannot hash {}", llm.config.display()))?;
    let mut files = Vec::new();
    for (name, path) in llm.files().into_iter().filter(|(_, path)| *path != llm.config) {
        let size = std::fs::metadata(&path).with_context(|| format!("cannot read {}", path.display()))?.len();
        match hashed.iter().find(|known| known.name == name && known.bytes == size) {
            Some(known) => files.push(known.clone()),
            None => {
                let (sha256, bytes) = sha256_file(&path).with_context(|| format!("cannot hash {}", path.display()))?;
                files.push(ModelFile { name, sha256, bytes });
            }
        }
    }
    let digest = model_digest(&sha256, bytes, &files);
    Ok(ModelInfo {
        path: llm.config.display().to_string(),
        sha256,
        bytes,
        digest,
        files,
        inputs: Vec::new(),
        outputs: Vec::new(),
        fixed_from: None,
    })
}

/// Every graph's assignment in one list (the whole model's nodes, graph after graph).
fn merged(assignments: &[Assignment]) -> Assignment {
    let unavailable: Vec<&Assignment> = assignments.iter().filter(|a| a.subgraphs.is_empty()).collect();
    match unavailable.first() {
        Some(first) => Assignment { source: "unavailable".into(), error: first.error.clone(), subgraphs: Vec::new() },
        None => Assignment {
            source: "Session_GetEpGraphAssignmentInfo".into(),
            error: None,
            subgraphs: assignments.iter().flat_map(|a| a.subgraphs.iter().cloned()).collect(),
        },
    }
}

/// Each graph with its phases: runs per generation and the shapes fed.
fn graph_runs(
    llm: &LlmModel,
    spec: &Spec,
    assignments: &[Assignment],
    model_graphs: Vec<ModelGraph>,
) -> Result<Vec<GraphRun>> {
    let chunk = prompt_chunk(llm, spec);
    let mut runs = Vec::new();
    for ((graph, assignment), model_graph) in llm.graphs.iter().zip(assignments).zip(model_graphs) {
        let mut phases = Vec::new();
        if graph.run_on_prompt {
            phases.push(GraphPhase {
                phase: Phase::Prompt.name().into(),
                runs: spec.prompt / chunk,
                input_shapes: Vec::new(),
                profile: None,
                reference_profile: None,
            });
        }
        if graph.run_on_token_gen {
            phases.push(GraphPhase {
                phase: Phase::Token.name().into(),
                runs: spec.gen,
                input_shapes: Vec::new(),
                profile: None,
                reference_profile: None,
            });
        }
        let (sha256, _) = sha256_file(&graph.path).with_context(|| format!("cannot hash {}", graph.path.display()))?;
        runs.push(GraphRun {
            id: graph.id.clone(),
            file: graph.file.clone(),
            sha256,
            prompt_runs: if graph.run_on_prompt { spec.prompt / chunk } else { 0 },
            token_runs: if graph.run_on_token_gen { spec.gen } else { 0 },
            inputs: graph.inputs.iter().map(signature).collect(),
            outputs: graph.outputs.iter().map(signature).collect(),
            assignment: assignment.clone(),
            graph: Some(model_graph),
            phases,
        });
    }
    Ok(runs)
}

/// Tokens per prompt run: a static prompt graph's sequence length, else the whole prompt.
fn prompt_chunk(llm: &LlmModel, spec: &Spec) -> u32 {
    llm.prompt_chunk().unwrap_or(spec.prompt)
}

fn signature(value: &npugate_onnx::ValueSignature) -> npugate_result::TensorSignature {
    let dims = value.dims.clone().unwrap_or_default();
    npugate_result::TensorSignature {
        name: value.name.clone(),
        element_type: value.element_type.to_string(),
        shape: dims.iter().map(|d| d.fixed()).collect(),
        dim_names: dims.iter().map(|d| if d.fixed().is_some() { String::new() } else { d.to_string() }).collect(),
    }
}

/// The seeded synthetic prompt: ids uniform over the vocabulary (the logits' last dim), its size
/// checked first (the first buffer a generation sizes by its lengths).
fn prompt_ids(llm: &LlmModel, tokens: u32, seed: u64) -> Result<Vec<i64>> {
    crate::memory::check(&TensorRequest {
        name: llm.names.input_ids.clone(),
        element_type: npugate_onnx::ElementType::of(npugate_onnx::proto::tensor_proto::DataType::Int64),
        dims: vec![1, i64::from(tokens)],
        origin: Origin::Generation,
    })?;
    let vocab = vocabulary(llm)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Ok((0..tokens).map(|_| i64::from(rng.next_u32() % vocab as u32)).collect())
}

fn describe_prompt(llm: &LlmModel, prompt: &[i64], seed: u64) -> InputDescription {
    let bytes: Vec<u8> = prompt.iter().flat_map(|id| id.to_le_bytes()).collect();
    InputDescription {
        name: llm.names.input_ids.clone(),
        element_type: "int64".into(),
        shape: vec![1, prompt.len() as i64],
        source: format!("random token ids (seed={seed})"),
        sha256: format!("{:x}", Sha256::digest(&bytes)),
    }
}

/// The vocabulary size: the fixed last dim of the logits.
fn vocabulary(llm: &LlmModel) -> Result<usize> {
    llm.vocabulary().ok_or_else(|| {
        anyhow!("{}: the logits output {:?} has no fixed vocabulary dim", llm.config.display(), llm.names.logits)
    })
}

/// The KV cache: per layer a key and a value, each one buffer (`shared`) or two (`ping_pong`).
struct KvStore {
    /// Per layer and kind (key, value): the buffers and which one holds the past.
    tensors: Vec<([Buffer; 2], usize)>,
    shared: bool,
    /// The length a past and present are always bound at: a static cache's (its third dim), or a
    /// shared cache's (the context: genai's max-length buffer); `None` for a growing cache.
    whole_length: Option<i64>,
    heads: i64,
    head_size: i64,
}

impl KvStore {
    fn new(llm: &LlmModel, spec: &Spec) -> Result<KvStore> {
        let past_key = npugate_onnx::genai::layer_name(&llm.names.past_key, 0);
        let declared =
            llm.graphs.iter().find_map(|g| g.input(&past_key)).ok_or_else(|| anyhow!("no graph takes {past_key:?}"))?;
        let dims = declared.dims.clone().unwrap_or_default();
        let fixed = |i: usize| dims.get(i).and_then(|d| d.fixed());
        // The graph's fixed dims, else the config's num_key_value_heads and head_size.
        let from_config = |value: Option<u32>| value.map(i64::from);
        let (heads, head_size) = match (fixed(1).or(from_config(llm.kv_heads)), fixed(3).or(from_config(llm.head_size)), dims.len()) {
            (Some(h), Some(d), 4) => (h, d),
            _ => bail!(
                "{}: the KV input {past_key:?} is {}: its heads and head size must be fixed in the graph or given as model.decoder.num_key_value_heads and model.decoder.head_size",
                llm.config.display(),
                declared.shape_pattern()
            ),
        };
        // genai's shared cache (`past_present_share_buffer`): one buffer of the cache's length (a
        // static cache's, else the context) bound as both past and present from the first run.
        let shared = llm.share_buffer;
        let whole_length = fixed(2).or(shared.then(|| i64::from(llm.capacity())));
        let length = whole_length.unwrap_or(i64::from(spec.prompt + spec.gen));
        let ty = tensor_type(declared.element_type)?;
        let shape = [1, heads, length, head_size];
        // The whole cache first: every buffer may fit while all of them do not.
        let buffers = i64::from(llm.layers) * 2 * if shared { 1 } else { 2 };
        crate::memory::check(&TensorRequest {
            name: format!("KV cache ({buffers} buffers like {past_key})"),
            element_type: declared.element_type,
            dims: [&[buffers][..], &shape].concat(),
            origin: Origin::Generation,
        })?;
        let mut tensors = Vec::new();
        for layer in 0..llm.layers {
            for name in &llm.names.kv(layer)[..2] {
                let second = Buffer::new(name, ty, if shared { &[0] } else { &shape })?;
                tensors.push(([Buffer::new(name, ty, &shape)?, second], 0));
            }
        }
        Ok(KvStore { tensors, shared, whole_length, heads, head_size })
    }

    fn mode(&self) -> &'static str {
        if self.shared {
            "shared"
        } else {
            "ping_pong"
        }
    }

    fn allocated_bytes(&self) -> u64 {
        self.tensors.iter().map(|(pair, _)| (pair[0].bytes() + pair[1].bytes()) as u64).sum()
    }

    /// Bytes of cache holding `tokens` positions (a static or shared cache: all of it).
    fn bytes_in_use(&self, tokens: u32) -> u64 {
        let length = self.whole_length.unwrap_or(i64::from(tokens));
        let size =
            self.tensors.first().and_then(|(pair, _)| kv::element_size(pair[0].element_type()).ok()).unwrap_or(0);
        (self.tensors.len() as i64 * self.heads * length * self.head_size) as u64 * size as u64
    }

    fn reset(&mut self) {
        for (pair, current) in &mut self.tensors {
            pair[0].zero();
            pair[1].zero();
            *current = 0;
        }
    }

    fn shape(&self, length: i64) -> [i64; 4] {
        [1, self.heads, self.whole_length.unwrap_or(length), self.head_size]
    }

    /// The past of tensor `index` holding `past` positions.
    fn past(&self, index: usize, past: i64) -> Result<View> {
        let (pair, current) = &self.tensors[index];
        pair[*current].view(0, &self.shape(past))
    }

    /// The present of tensor `index` after a run of `sequence` tokens over `past` positions.
    fn present(&self, index: usize, past: i64, sequence: i64) -> Result<View> {
        let (pair, current) = &self.tensors[index];
        let target = if self.shared { *current } else { 1 - *current };
        pair[target].view(0, &self.shape(past + sequence))
    }

    /// After a run: the presents become the pasts.
    fn advance(&mut self) {
        if !self.shared {
            for (_, current) in &mut self.tensors {
                *current = 1 - *current;
            }
        }
    }
}

fn tensor_type(ty: npugate_onnx::ElementType) -> Result<TensorElementType> {
    use npugate_onnx::proto::tensor_proto::DataType;
    Ok(match ty.data_type() {
        Some(DataType::Float) => TensorElementType::Float32,
        Some(DataType::Float16) => TensorElementType::Float16,
        Some(DataType::Bfloat16) => TensorElementType::Bfloat16,
        Some(DataType::Int64) => TensorElementType::Int64,
        Some(DataType::Int32) => TensorElementType::Int32,
        _ => bail!("element type {ty} is not one the generation loop feeds (float32/16, bfloat16, int64, int32)"),
    })
}

/// One graph in one phase, ready to bind and run.
struct Stage {
    session: Rc<Session>,
    binding: IoBinding,
    run_options: RunOptions<NoSelectedOutputs>,
    ids: Option<(CString, Buffer)>,
    positions: Option<(CString, Buffer)>,
    /// The mask's name, its buffer (`ones` ones, then as many zeros) and the graph's static mask
    /// length (`[1, context]`), if it has one.
    mask: Option<(CString, Buffer, usize, Option<i64>)>,
    /// (name, index into the KV store) of each past input and present output.
    past: Vec<(CString, usize)>,
    present: Vec<(CString, usize)>,
    logits: Option<(CString, Buffer)>,
    vocab: i64,
}

/// The generation loop over the graphs of both phases.
struct Generator {
    prompt: Vec<Stage>,
    token: Vec<Stage>,
    kv: KvStore,
    /// Tokens per prompt run.
    chunk: i64,
    vocab: usize,
    /// The first decode step ever run (cold), nanoseconds.
    first_step_ns: u64,
}

/// What a step's binding expects ONNX Runtime to write where (KV outputs), for the copy check.
type Expected = Vec<(usize, *mut std::ffi::c_void)>;

impl Generator {
    fn new(
        llm: &LlmModel,
        spec: &Spec,
        prompt: Vec<(usize, Rc<Session>)>,
        token: Vec<(usize, Rc<Session>)>,
    ) -> Result<Generator> {
        let kv = KvStore::new(llm, spec)?;
        let vocab = vocabulary(llm)?;
        let chunk = i64::from(prompt_chunk(llm, spec));
        let capacity = i64::from(spec.prompt + spec.gen);
        let stages = |sessions: Vec<(usize, Rc<Session>)>, sequence: i64| -> Result<Vec<Stage>> {
            sessions
                .into_iter()
                .map(|(index, session)| Stage::new(llm, &llm.graphs[index], session, sequence, capacity, vocab))
                .collect()
        };
        if let Some(graph) = llm.phase(false).find(|g| g.fixed_sequence(&llm.names).is_some_and(|s| s != 1)) {
            bail!(
                "{}: graph {} runs on generated tokens but takes {} tokens at a time; a token generator takes 1",
                llm.config.display(),
                graph.file,
                graph.fixed_sequence(&llm.names).unwrap_or_default()
            );
        }
        Ok(Generator { prompt: stages(prompt, chunk)?, token: stages(token, 1)?, kv, chunk, vocab, first_step_ns: 0 })
    }

    /// Warmup generations, then the timed ones into `generation` — and, when decode steps waited
    /// for a CPU long enough to be set aside, more generations until the steps asked for are clean
    /// or `spec.step_budget` were timed (recorded in `timings.extension`, each step's CPU wait in
    /// `timings.cpu_wait`, as for a model's runs); returns the logits of the first `kept_rows`
    /// steps of the first timed generation (row `i` chose token `i`).
    fn measure(
        &mut self,
        prompt: &[i64],
        spec: &Spec,
        generation: &mut Generation,
        kept_rows: usize,
        timings: &mut Timings,
    ) -> Result<Vec<f32>> {
        for _ in 0..spec.warmup {
            self.generate(prompt, spec.gen, None, 0).context("warmup generation")?;
        }
        let count = RunCount { runs: spec.gen * spec.generations, budget: spec.step_budget };
        let mut waits = CpuWaitRecord::open(count.capacity());
        let measured = self.timed_generations(prompt, spec, generation, kept_rows, count, &mut waits);
        let steps: Vec<u64> = generation.decode_ns.iter().flatten().copied().collect();
        let (first_logits, set_aside_at_requested) = measured?;
        timings.extension = set_aside_at_requested.map(|set_aside| RunExtension {
            requested: count.runs,
            budget: count.capacity() as u32,
            taken: steps.len() as u32,
            set_aside_at_requested: set_aside,
            clean: clean_runs(&steps, waits.delays(steps.len()).as_deref()),
        });
        timings.cpu_wait = Some(waits.finish(steps.len()));
        Ok(first_logits)
    }

    /// The timed generations: `spec.generations`, then whole generations more while the decode
    /// steps clean of CPU wait are fewer than `count.runs` and the budget holds another. Returns
    /// the kept logits and, when it extended, the steps set aside among those asked for; sets the
    /// KV copies per step.
    fn timed_generations(
        &mut self,
        prompt: &[i64],
        spec: &Spec,
        generation: &mut Generation,
        kept_rows: usize,
        count: RunCount,
        waits: &mut CpuWaitRecord,
    ) -> Result<(Vec<f32>, Option<usize>)> {
        let (mut first_logits, mut copies) = (None, 0usize);
        let (mut index, mut planned, mut set_aside_at_requested) = (0, spec.generations, None);
        while index < planned {
            let keep = if first_logits.is_none() { kept_rows } else { 0 };
            let run = self
                .generate(prompt, spec.gen, Some(&mut *waits), keep)
                .with_context(|| format!("timed generation {}", index + 1))?;
            generation.ttft_ns.push(run.ttft_ns);
            generation.decode_ns.push(run.decode_ns);
            generation.wall_ns.push(run.wall_ns);
            copies += run.copies;
            if first_logits.is_none() {
                generation.tokens = run.tokens;
                first_logits = Some(run.step_logits);
            }
            index += 1;
            if index == planned && spec.gen > 0 {
                let steps: Vec<u64> = generation.decode_ns.iter().flatten().copied().collect();
                let delays = waits.delays(steps.len());
                let missing = count.next_stop(&steps, delays.as_deref()) - steps.len();
                let room = (count.capacity() - steps.len()) / spec.gen as usize;
                let more = missing.div_ceil(spec.gen as usize).min(room) as u32;
                if more > 0 && set_aside_at_requested.is_none() {
                    set_aside_at_requested = Some(steps.len() - clean_runs(&steps, delays.as_deref()));
                }
                planned += more;
            }
        }
        generation.kv.copies_per_step = copies as f64 / f64::from((spec.gen * index).max(1));
        Ok((first_logits.unwrap_or_default(), set_aside_at_requested))
    }

    /// One generation: the prompt in chunks, then `gen` decode steps; keeps the logits of the
    /// first `keep_rows` generated tokens. A timed generation (`waits` given) checks the KV copies
    /// and records each decode step's CPU wait.
    fn generate(
        &mut self,
        prompt: &[i64],
        gen: u32,
        mut waits: Option<&mut CpuWaitRecord>,
        keep_rows: usize,
    ) -> Result<GenerationRun> {
        let check = waits.is_some();
        let wall = Instant::now();
        self.kv.reset();
        let mut run = GenerationRun::default();
        let mut past = 0i64;
        let mut logits = Vec::new();
        for chunk in prompt.chunks(self.chunk as usize) {
            let (ns, copies, last) = self.step(Phase::Prompt, chunk, past, check, None)?;
            run.ttft_ns += ns;
            run.copies += copies;
            past += chunk.len() as i64;
            logits = last;
        }
        let mut next = argmax(&logits);
        run.tokens.push(next);
        run.keep_logits(&logits, keep_rows);
        for _ in 0..gen {
            let (ns, copies, last) = self.step(Phase::Token, &[next], past, check, waits.as_deref_mut())?;
            if self.first_step_ns == 0 {
                self.first_step_ns = ns;
            }
            run.decode_ns.push(ns);
            run.copies += copies;
            past += 1;
            next = argmax(&last);
            run.tokens.push(next);
            run.keep_logits(&last, keep_rows);
        }
        run.wall_ns = wall.elapsed().as_nanos() as u64;
        Ok(run)
    }

    /// Binds one run of `tokens` at `past` for every graph of `phase`, runs them between two
    /// clock reads (and, given `waits`, two readings of the threads' CPU wait just outside them),
    /// then reads the last row of logits; counts KV outputs not written in place.
    fn step(
        &mut self,
        phase: Phase,
        tokens: &[i64],
        past: i64,
        check: bool,
        waits: Option<&mut CpuWaitRecord>,
    ) -> Result<(u64, usize, Vec<f32>)> {
        let stages = match phase {
            Phase::Prompt => &mut self.prompt,
            Phase::Token => &mut self.token,
        };
        let mut views = Vec::new();
        let mut expected: Vec<Expected> = Vec::new();
        for stage in stages.iter_mut() {
            let (stage_views, stage_expected) = stage.bind(&self.kv, tokens, past)?;
            views.extend(stage_views);
            expected.push(stage_expected);
        }
        let mut waits = waits.map(|waits| (waits.read(), waits));
        let t0 = Instant::now();
        for stage in stages.iter() {
            run_with_binding(&stage.session, &stage.run_options, &stage.binding)?;
        }
        let t1 = Instant::now();
        if let Some((before, waits)) = waits.as_mut() {
            let after = waits.read();
            waits.record(waits.recorded(), (t0, t1), *before, after);
        }
        let ns = t1.duration_since(t0).as_nanos() as u64;
        drop(views);
        let mut copies = 0;
        if check {
            for (stage, expected) in stages.iter().zip(&expected) {
                let written = kv::bound_output_data(&stage.binding)?;
                copies += expected.iter().filter(|(slot, address)| written.get(*slot) != Some(address)).count();
            }
        }
        let sequence = tokens.len();
        let logits = stages
            .iter()
            .find_map(|s| s.logits.as_ref())
            .map(|(_, buffer)| buffer.read_floats((sequence - 1) * self.vocab, self.vocab))
            .transpose()?
            .ok_or_else(|| anyhow!("no graph of the {} phase yields logits", phase.name()))?;
        self.kv.advance();
        Ok((ns, copies, logits))
    }
}

impl Stage {
    fn new(
        llm: &LlmModel,
        graph: &LlmGraph,
        session: Rc<Session>,
        sequence: i64,
        capacity: i64,
        vocab: usize,
    ) -> Result<Stage> {
        let managed = llm.managed_inputs();
        if let Some(foreign) = graph.inputs.iter().find(|i| !managed.contains(&i.name)) {
            bail!(
                "{}: graph {} takes {:?} from another graph; npugate runs pipelines whose graphs take only the model's inputs (ids, mask, positions, KV cache)",
                llm.config.display(),
                graph.file,
                foreign.name
            );
        }
        let name = |text: &str| CString::new(text).map_err(|_| anyhow!("the name {text:?} holds a NUL byte"));
        let int_buffer = |input: &str, elements: i64| -> Result<Option<(CString, Buffer)>> {
            match graph.input(input) {
                Some(declared) => {
                    Ok(Some((name(input)?, Buffer::new(input, tensor_type(declared.element_type)?, &[elements])?)))
                }
                None => Ok(None),
            }
        };
        let ids = int_buffer(&llm.names.input_ids, sequence)?;
        let length = i64::from(llm.context_length).max(capacity);
        let mut positions = int_buffer(&llm.names.position_ids, length)?;
        if let Some((_, buffer)) = positions.as_mut() {
            buffer.write_ints(0, &(0..length).collect::<Vec<_>>())?;
        }
        let mask = match graph.input(&llm.names.attention_mask) {
            Some(declared) => {
                let fixed = declared.dims.as_ref().and_then(|d| d.get(1)?.fixed());
                let ones = length.max(fixed.unwrap_or(0));
                let mut buffer =
                    Buffer::new(&llm.names.attention_mask, tensor_type(declared.element_type)?, &[2, ones])?;
                let ones = usize::try_from(ones)?;
                // Ones, then zeros: a window over it is a mask of the first `total` positions.
                buffer.write_ints(0, &vec![1; ones])?;
                Some((name(&llm.names.attention_mask)?, buffer, ones, fixed))
            }
            None => None,
        };
        let mut past = Vec::new();
        let mut present = Vec::new();
        for layer in 0..llm.layers {
            let [past_key, past_value, present_key, present_value] = llm.names.kv(layer);
            let index = (layer * 2) as usize;
            for (input, output, offset) in [(past_key, present_key, 0), (past_value, present_value, 1)] {
                if graph.input(&input).is_some() {
                    past.push((name(&input)?, index + offset));
                }
                if graph.output(&output).is_some() {
                    present.push((name(&output)?, index + offset));
                }
            }
        }
        let logits = match graph.output(&llm.names.logits) {
            Some(declared) => Some((
                name(&llm.names.logits)?,
                Buffer::new(
                    &llm.names.logits,
                    tensor_type(declared.element_type)?,
                    &[sequence, i64::try_from(vocab)?],
                )?,
            )),
            None => None,
        };
        let binding =
            session.create_binding().map_err(|e| anyhow!("cannot create an I/O binding for {}: {e}", graph.file))?;
        Ok(Stage {
            session,
            binding,
            run_options: quiet_run_options()?,
            ids,
            positions,
            mask,
            past,
            present,
            logits,
            vocab: vocab as i64,
        })
    }

    /// Writes `tokens` and binds this run's views; returns them (alive until the run ends) and
    /// the addresses the KV outputs must be written to (by output slot).
    fn bind(&mut self, kv: &KvStore, tokens: &[i64], past: i64) -> Result<(Vec<View>, Expected)> {
        let sequence = tokens.len() as i64;
        let mut views = Vec::new();
        let mut expected = Vec::new();
        if let Some((name, buffer)) = self.ids.as_mut() {
            buffer.write_ints(0, tokens)?;
            let view = buffer.view(0, &[1, sequence])?;
            kv::bind_input(&self.binding, name, &view)?;
            views.push(view);
        }
        if let Some((name, buffer)) = &self.positions {
            let view = buffer.view(past as usize, &[1, sequence])?;
            kv::bind_input(&self.binding, name, &view)?;
            views.push(view);
        }
        if let Some((name, buffer, ones, fixed)) = &self.mask {
            let total = past + sequence;
            let view = match fixed {
                // `[1, C]`: the window that starts `total` ones before the zeros.
                Some(length) => buffer.view(ones - total as usize, &[1, *length])?,
                None => buffer.view(0, &[1, total])?,
            };
            kv::bind_input(&self.binding, name, &view)?;
            views.push(view);
        }
        for (name, index) in &self.past {
            let view = kv.past(*index, past)?;
            kv::bind_input(&self.binding, name, &view)?;
            views.push(view);
        }
        for (slot, (name, index)) in self.present.iter().enumerate() {
            let view = kv.present(*index, past, sequence)?;
            kv::bind_output(&self.binding, name, &view)?;
            expected.push((slot, view.data()));
            views.push(view);
        }
        if let Some((name, buffer)) = &self.logits {
            let view = buffer.view(0, &[1, sequence, self.vocab])?;
            kv::bind_output(&self.binding, name, &view)?;
            views.push(view);
        }
        Ok((views, expected))
    }
}

/// One generation's measurements.
#[derive(Debug, Default)]
struct GenerationRun {
    ttft_ns: u64,
    decode_ns: Vec<u64>,
    wall_ns: u64,
    copies: usize,
    tokens: Vec<i64>,
    /// The logits row of each kept token, concatenated.
    step_logits: Vec<f32>,
}

impl GenerationRun {
    /// Appends the logits that chose the latest token while fewer than `rows` rows are kept.
    fn keep_logits(&mut self, logits: &[f32], rows: usize) {
        if self.step_logits.len() < rows * logits.len() {
            self.step_logits.extend_from_slice(logits);
        }
    }
}

/// The most bytes of step logits `--check-outputs` saves (rows of the vocabulary's size).
const SAVED_LOGITS_BYTES: usize = 64 << 20;

/// Rows of step logits `--check-outputs` saves: every generated token's while they fit in
/// [`SAVED_LOGITS_BYTES`], at least one.
fn saved_logit_rows(vocab: usize) -> usize {
    (SAVED_LOGITS_BYTES / (vocab.max(1) * std::mem::size_of::<f32>())).max(1)
}

/// The greedy token: the index of the largest logit (the first on ties).
fn argmax(logits: &[f32]) -> i64 {
    let mut best = 0;
    for (i, value) in logits.iter().enumerate() {
        if *value > logits[best] {
            best = i;
        }
    }
    best as i64
}

/// TTFT and per-token statistics, tokens per second.
fn summarize(generation: &mut Generation) {
    let steps: Vec<u64> = generation.decode_ns.iter().flatten().copied().collect();
    generation.ttft = LatencyStats::from_ns(&generation.ttft_ns);
    generation.decode = LatencyStats::from_ns(&steps);
    let ttft: Vec<f64> = generation.ttft_ns.iter().map(|&ns| ns as f64).collect();
    let decode: Vec<f64> = steps.iter().map(|&ns| ns as f64).collect();
    generation.prefill_tok_s =
        median(&ttft).filter(|m| *m > 0.0).map_or(0.0, |m| f64::from(generation.prompt_tokens) * 1e9 / m);
    generation.decode_tok_s = median(&decode).filter(|m| *m > 0.0).map_or(0.0, |m| 1e9 / m);
}

/// `--check-outputs`: the generated ids as `outputs/tokens.npy` (`generated_tokens`) and the
/// logits that chose each of the first of them as `outputs/step_logits.npy` (`step_logits`,
/// `[rows, vocab]`: row `i` chose token `i`), described as the model's two outputs.
fn save_outputs(
    out: &Path,
    tokens: &[i64],
    step_logits: &[f32],
    vocab: usize,
) -> Result<(Vec<String>, Vec<npugate_result::TensorSignature>)> {
    let dir = out.join(files::OUTPUTS_DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let rows = step_logits.len() / vocab.max(1);
    crate::outputs::write_array(&dir.join("tokens.npy"), &[tokens.len() as u64], tokens.iter().copied())?;
    crate::outputs::write_array(
        &dir.join("step_logits.npy"),
        &[rows as u64, vocab as u64],
        step_logits.iter().copied(),
    )?;
    let signature = |name: &str, element_type: &str, shape: &[usize]| npugate_result::TensorSignature {
        name: name.into(),
        element_type: element_type.into(),
        shape: shape.iter().map(|&d| Some(d as i64)).collect(),
        dim_names: vec![String::new(); shape.len()],
    };
    Ok((
        vec![format!("{}/tokens.npy", files::OUTPUTS_DIR), format!("{}/step_logits.npy", files::OUTPUTS_DIR)],
        vec![
            signature("generated_tokens", "int64", &[tokens.len()]),
            signature("step_logits", "float32", &[rows, vocab]),
        ],
    ))
}

/// What the steps after the timed generations work with.
struct AfterRuns<'a> {
    args: &'a Args,
    env: &'a Environment,
    llm: &'a LlmModel,
    plans: &'a [SessionPlan],
    prompt: &'a [i64],
    spec: &'a Spec,
    out: &'a Path,
}

/// After the timed generations: library identities, the profiled generation (a session per
/// graph and phase) and the reference pass (the prompt, the first and the last decode step on the
/// CPU EP). The profiled sessions log VERBOSE: what they logged while they were created is the
/// EP's account.
fn finish(after: &AfterRuns<'_>, result: &mut RunResult, account: &mut Option<String>) -> Result<()> {
    let AfterRuns { args, env, llm, plans, prompt, spec, out } = *after;
    let first = plans.first().ok_or_else(|| anyhow!("the model has no graph"))?;
    result.runtime.libraries = setup::library_identities(args, &first.ep_options)?;
    let Some(generation) = result.generation.as_mut() else { return Ok(()) };
    if args.settings.profile_runs > 0 {
        let start = Instant::now();
        let log = out.join(files::ORT_LOG);
        let created_log = std::cell::RefCell::new(String::new());
        let profiled = |graph: usize, phase: Phase| {
            let log_start = crate::backend::log_position(&log);
            let session =
                plans[graph].create_profiled(env, &out.join(format!("profile-{}-{}", graph, phase.name())), None);
            created_log.borrow_mut().push_str(&crate::backend::log_since(&log, log_start));
            session
        };
        let written = profile_generation(llm, spec, prompt, Profiled::EveryStep, profiled);
        *account = Some(created_log.into_inner());
        let written = written.context("profiled pass")?;
        attach(generation, written, out, "profile", |p, file| p.profile = Some(file))?;
        result.timings.profiled_pass_ns = setup::elapsed_ns(start);
    }
    if !args.settings.no_reference_pass {
        let start = Instant::now();
        let reference = |graph: usize, phase: Phase| {
            plans[graph].create_reference(env, &out.join(format!("reference-{}-{}", graph, phase.name())))
        };
        let counted = shaped_by_context(llm);
        let written = profile_generation(&counted, spec, prompt, Profiled::FirstAndLastStep, reference)
            .context("reference pass")?;
        attach(generation, written, out, "reference_profile", |p, file| p.reference_profile = Some(file))?;
        result.timings.reference_pass_ns = setup::elapsed_ns(start);
    }
    Ok(())
}

/// The model as the reference pass runs it: with genai's shared cache a step's past is bound at the
/// buffer's whole length whatever the context, so shapes would count attention over all of it; the
/// reference pass (shapes and FLOPs, not the timed program) runs the growing cache instead wherever
/// the graph's past length is dynamic, so each step's shapes hold its actual past.
fn shaped_by_context(llm: &LlmModel) -> std::borrow::Cow<'_, LlmModel> {
    let past_key = npugate_onnx::genai::layer_name(&llm.names.past_key, 0);
    let past_length_fixed = llm
        .graphs
        .iter()
        .find_map(|g| g.input(&past_key))
        .and_then(|input| input.dims.as_ref()?.get(2)?.fixed())
        .is_some();
    if llm.share_buffer && !past_length_fixed {
        std::borrow::Cow::Owned(LlmModel { share_buffer: false, ..llm.clone() })
    } else {
        std::borrow::Cow::Borrowed(llm)
    }
}

/// Which decode steps a profiled generation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Profiled {
    /// Every step (the profiled pass: the time of each).
    EveryStep,
    /// The first step and then the last one, at the past it has in a whole generation (the
    /// reference pass: the shapes at both ends of the context). A decode step's FLOPs grow
    /// linearly with its past (attention over it), so the mean of the two ends is the mean over
    /// every step and the placement's FLOPs per step are exact without profiling them all.
    FirstAndLastStep,
}

/// One generation with a fresh session per graph and phase from `create` (profiling on), its
/// decode steps as `profiled` says; returns each (graph, phase)'s ended profile file.
fn profile_generation(
    llm: &LlmModel,
    spec: &Spec,
    prompt: &[i64],
    profiled: Profiled,
    create: impl Fn(usize, Phase) -> Result<Session>,
) -> Result<Vec<(usize, Phase, String)>> {
    let sessions = |phase: Phase| -> Result<Vec<(usize, Rc<Session>)>> {
        llm.graphs
            .iter()
            .enumerate()
            .filter(|(_, g)| runs_in(g, phase))
            .map(|(i, _)| Ok((i, Rc::new(create(i, phase)?))))
            .collect()
    };
    let prompt_sessions = sessions(Phase::Prompt)?;
    let token_sessions = sessions(Phase::Token)?;
    let keys: Vec<(usize, Phase)> = prompt_sessions
        .iter()
        .map(|(i, _)| (*i, Phase::Prompt))
        .chain(token_sessions.iter().map(|(i, _)| (*i, Phase::Token)))
        .collect();
    let mut generator = Generator::new(llm, spec, prompt_sessions, token_sessions)?;
    match profiled {
        Profiled::EveryStep => {
            generator.generate(prompt, spec.gen, None, 0)?;
        }
        Profiled::FirstAndLastStep => {
            let first = generator.generate(prompt, 1, None, 0)?;
            if spec.gen > 1 {
                let last_past = (prompt.len() + spec.gen as usize - 1) as i64;
                let token = first.tokens.last().copied().unwrap_or_default();
                generator.step(Phase::Token, &[token], last_past, false, None)?;
            }
        }
    }
    let stages: Vec<Stage> = generator.prompt.drain(..).chain(generator.token.drain(..)).collect();
    drop(generator);
    let mut written = Vec::new();
    for ((graph, phase), stage) in keys.into_iter().zip(stages) {
        let Stage { session, binding, .. } = stage;
        drop(binding);
        let mut session = Rc::try_unwrap(session).map_err(|_| anyhow!("a profiled session is still shared"))?;
        let file = session.end_profiling().map_err(|e| anyhow!("cannot end profiling: {e}"))?;
        written.push((graph, phase, file));
    }
    Ok(written)
}

/// Moves each written profile to `<kind>.<graph id>.<phase>.json` and records it on its phase.
fn attach(
    generation: &mut Generation,
    written: Vec<(usize, Phase, String)>,
    out: &Path,
    kind: &str,
    set: impl Fn(&mut GraphPhase, String),
) -> Result<()> {
    for (graph, phase, file) in written {
        let run = &mut generation.graphs[graph];
        let name = format!("{kind}.{}.{}.json", safe(&run.id), phase.name());
        let destination: PathBuf = out.join(&name);
        std::fs::rename(&file, &destination)
            .with_context(|| format!("cannot move profile {file} to {}", destination.display()))?;
        if let Some(entry) = run.phases.iter_mut().find(|p| p.phase == phase.name()) {
            set(entry, name);
        }
    }
    Ok(())
}

/// A graph id as a file-name component.
fn safe(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_greedy_token_is_the_first_largest_logit() {
        assert_eq!(argmax(&[0.1, 3.0, -1.0, 3.0]), 1);
        assert_eq!(argmax(&[]), 0);
    }
}
