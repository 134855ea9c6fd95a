//! `npugate-harness`: the binary that runs on the device. Loads ONNX Runtime dynamically, creates a
//! session on the requested execution provider, runs warmup + N timed runs, then a separate profiled
//! pass and a CPU reference pass, and writes `result.json` with everything a host stage needs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::{CommandFactory, FromArgMatches};
use npugate_profile::placement::PlacementInputs;
use npugate_result::digest::sha256_file;
use npugate_result::{files, FixedFrom, ModelGraph, ModelInfo, RunResult, TimedLog, Timings};
use ort::environment::Environment;

mod account;
mod backend;
mod context_cache;
mod cpu_wait;
mod energy;
mod fingerprint;
mod footprint;
mod fusions;
mod generate;
mod graph;
mod inputs;
mod kv;
mod measure;
mod memory;
mod model_files;
mod ort_env;
mod outputs;
mod progress;
mod providers;
mod qnn_trace;
mod session;
mod setup;
mod stamp;

use backend::DidNotStart;
use inputs::PreparedInput;
use measure::{BoundSession, RunCount};
use npugate_result::contract::{EXIT_DID_NOT_START, EXIT_ERROR};
use npugate_settings::HarnessCommand as Args;
use npugate_settings::{EpKind, OrtLogLevel};
use session::SessionPlan;
use setup::{
    account_session, adsp_problem, conclude, elapsed_ns, emulation, explain_with_backend, histogram,
    library_identities, model_graph, refused, Setup,
};

/// Exit codes: 0 measured, 2 could not run, 3 the accelerator did not start
/// ([`EXIT_DID_NOT_START`]: its device absent or its backend dead; what was measured on the CPU
/// is still in `result.json`); a session-only run's VERBOSE rerun's code when it had one.
fn main() -> ExitCode {
    setup::report_panics_in_one_line();
    // `--version`: the build, commit and target included (leaked once: clap keeps a `&'static str`).
    let version: &'static str = Box::leak(stamp::build().to_string().into_boxed_str());
    let args = Args::from_arg_matches(&Args::command().version(version).get_matches()).unwrap_or_else(|e| e.exit());
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => match error.downcast_ref::<account::RerunExited>() {
            // The VERBOSE rerun wrote the result and said what there was to say.
            Some(exited) => ExitCode::from(exited.0),
            None => {
                eprintln!("npugate-harness: error: {error:#}");
                ExitCode::from(if DidNotStart::is_cause_of(&error) { EXIT_DID_NOT_START } else { EXIT_ERROR })
            }
        },
    }
}

fn run(args: &Args) -> Result<()> {
    if let Some(config) = npugate_onnx::genai::config_path(&args.model) {
        return generate::run(args, &config);
    }
    if let Some(flag) = args.settings.generation.given_flags().first() {
        bail!("{flag} applies to an LLM model folder (a directory with genai_config.json), but {} is a single model; drop it", args.model.display());
    }
    let model_bytes = check_model_file(&args.model)?;
    let quiet = account::quiet_first(args);
    let mut setup = Setup::new(args, &args.model, quiet)?;
    let loaded = graph::LoadedModel::read(&args.model)?;
    let source = source_model(args, &loaded)?;
    let reference_pass = !args.settings.no_reference_pass && (!loaded.compiled || source.is_some());
    (setup.plan.source_model, setup.plan.renamed) = match &source {
        Some((path, source)) => ((*path).clone(), source.renamed.clone()),
        None => (args.model.clone(), loaded.renamed.clone()),
    };
    let identity = model_files::identify(&args.model, model_bytes, &args.model_files)?;
    let plan = timed_plan(args, &mut setup, &identity.digest)?;
    let model = model_info(args, model_bytes, identity);
    let mut result = setup.result(args, model, &plan);
    result.settings.reference_pass = reference_pass;
    progress::plan(args, reference_pass);
    result.execution.context_model = args.settings.context_cache.as_ref().map(|_| plan.model.display().to_string());
    let Setup { out, log, env, mut timings, ep_name, .. } = setup;

    result.graph = Some(run_graph(
        &loaded,
        source.as_ref(),
        &env,
        &plan,
        (&out, args.keep_partitioned_graph),
        &mut result.warnings,
    )?);
    if loaded.compiled && source.is_none() && !args.settings.no_reference_pass {
        result.warnings.push(
            "no reference pass: the model is compiled (EPContext nodes), which the CPU EP cannot run, and no source model was given \
             (--reference-model): node shapes and FLOPs are unknown"
                .into(),
        );
    }
    // The timed session logs at an app's level (nothing per inference); a session-only run has no
    // timed runs and its one session is the account: quiet first on an accelerator, created again
    // at VERBOSE where the verdict needs reasons (see `account`).
    let timed_level = (!args.settings.session_only).then_some(args.settings.ort_log_level);
    let log_start = backend::log_position(&log);
    // A session-only run's one session is its account: it gets the op trace, a timed one never.
    let first = if args.settings.session_only { plan.for_account() } else { plan.clone() };
    let start = Instant::now();
    let context = SessionContext { args, env: &env, plan: &plan, log: &log, log_start, out: &out };
    let created = create_timed_session(&context, &first, timed_level, quiet, &mut result)?;
    timings.session_create_ns = elapsed_ns(start);
    let timed = match created {
        Ok(session) => session,
        Err(error) if args.settings.session_only => {
            return refused(args, &out, result, timings, &log, log_start, error)
        }
        Err(error) => return Err(error),
    };
    if args.settings.context_cache.is_some() {
        timings.context_warm_create_ns = Some(timings.session_create_ns);
    }
    let created_memory = footprint::after_create();
    result.assignment = session::assignment(&timed);
    let mut account = args.settings.session_only.then(|| backend::log_since(&log, log_start));
    result.model.inputs = timed.inputs().iter().map(inputs::signature).collect();
    result.model.outputs = timed.outputs().iter().map(inputs::signature).collect();
    let prepared = prepare_inputs(args, &timed, reference_pass)?;
    let (measured, saved_outputs) = if args.settings.session_only {
        run_session_only(&context, timed, &prepared, &created_memory, &mut timings, &mut result)
    } else {
        let (measured, saved_outputs) =
            run_timed(&context, timed, &prepared, &created_memory, &out, &mut timings, &mut result)?;
        if timings.latencies_ns.is_empty() {
            // Nothing was measured: fail without writing a result.
            return measured;
        }
        (measured, saved_outputs)
    };
    result.inputs = prepared.iter().map(|p| p.description.clone()).collect();
    result.histogram = histogram(&timings.latencies_ns);
    result.timings = timings;
    result.artifacts.outputs = saved_outputs.as_ref().cloned().unwrap_or_default();

    // Everything after the timed loop may fail without losing what was measured. A dead backend
    // fails the run loudly, after the CPU numbers and profiles that prove it were kept.
    let finished = measured.and_then(|()| saved_outputs.map(drop)).and_then(|()| {
        finish(
            &AfterRuns {
                args,
                env: &env,
                model: &loaded.model,
                plan: &plan,
                prepared: &prepared,
                out: &out,
                reference_pass,
            },
            &mut result,
            &mut account,
        )
    });
    if args.settings.ep.is_accelerator() {
        assess_backend(&context, account, &ep_name, &mut result);
    }
    record_trace(&mut result, &loaded, &out);
    let finished = finished.and_then(|()| check_leaks(&context, timed_level, &mut result));
    conclude(result, finished, &ep_name, &out)
}

/// The plan of the timed session: the setup's, or with `--context-cache` the one that loads
/// (or first writes) the cached compiled model.
fn timed_plan(args: &Args, setup: &mut Setup, model_digest: &str) -> Result<SessionPlan> {
    match &args.settings.context_cache {
        Some(dir) => with_context_cache(
            args,
            &setup.env,
            setup.plan.clone(),
            dir,
            model_digest,
            &setup.ort_version,
            &mut setup.timings,
        ),
        None => Ok(setup.plan.clone()),
    }
}

/// The inputs the runs feed (none for a session-only run without a reference pass or an inference).
fn prepare_inputs(args: &Args, timed: &ort::session::Session, reference_pass: bool) -> Result<Vec<PreparedInput>> {
    let needs_inputs = !args.settings.session_only || reference_pass || args.settings.execute_once;
    Ok(match needs_inputs {
        true => inputs::prepare(timed.inputs(), &args.settings.shapes, &args.settings.inputs, args.settings.seed)?,
        false => Vec::new(),
    })
}

/// The accelerator backend's assessment from the account (the session-only run's log, else a
/// fresh account session) and whether the run was emulated.
fn assess_backend(context: &SessionContext<'_>, account: Option<String>, ep_name: &str, result: &mut RunResult) {
    let account =
        account.unwrap_or_else(|| account_session(context.env, context.plan, context.log, &mut result.warnings));
    result.backend = Some(backend::assess(&account, &result.assignment, ep_name, adsp_problem().as_deref()));
    result.execution.emulated = emulation(context.args, result.backend.as_ref());
}

/// `--leak-check N`: creates and drops N more sessions and records how memory grew.
fn check_leaks(context: &SessionContext<'_>, timed_level: Option<OrtLogLevel>, result: &mut RunResult) -> Result<()> {
    match context.args.settings.leak_check {
        0 => Ok(()),
        n => {
            let check = footprint::leak_check(n, || context.plan.create(context.env, "leak-check", timed_level))?;
            result.memory.get_or_insert_with(Default::default).leak_check = Some(check);
            Ok(())
        }
    }
}

/// A compiled model's source model (`--reference-model`), which its reference pass runs.
fn source_model<'a>(args: &'a Args, loaded: &graph::LoadedModel) -> Result<Option<(&'a PathBuf, graph::LoadedModel)>> {
    Ok(match (&args.reference_model, loaded.compiled) {
        (Some(path), true) => Some((
            path,
            graph::LoadedModel::read(path).with_context(|| format!("--reference-model {}", path.display()))?,
        )),
        _ => None,
    })
}

/// The model's identity in `result.json` (its inputs and outputs are filled in once a session has them).
fn model_info(args: &Args, model_bytes: u64, identity: model_files::ModelIdentity) -> ModelInfo {
    ModelInfo {
        path: args.model.display().to_string(),
        sha256: identity.sha256,
        bytes: model_bytes,
        digest: identity.digest,
        files: identity.files,
        inputs: Vec::new(),
        outputs: Vec::new(),
        fixed_from: args.fixed_from_sha256.as_ref().map(|sha256| FixedFrom {
            sha256: sha256.clone(),
            shapes: args.settings.shapes.iter().map(ToString::to_string).collect(),
        }),
    }
}

/// The model's graph as placement sees it: its own, or a compiled model's, counted in the nodes
/// of its source model when one was given; `keep`: the partitioned graph stays in `out`.
fn run_graph(
    loaded: &graph::LoadedModel,
    source: Option<&(&PathBuf, graph::LoadedModel)>,
    env: &Environment,
    plan: &SessionPlan,
    (out, keep): (&Path, bool),
    warnings: &mut Vec<String>,
) -> Result<ModelGraph> {
    Ok(match source {
        _ if !loaded.compiled => model_graph(loaded, env, plan, (out, keep), warnings),
        Some((path, source)) => {
            let sha256 =
                sha256_file(path).with_context(|| format!("cannot hash --reference-model {}", path.display()))?.0;
            loaded.compiled_graph(Some(&graph::SourceModel { loaded: source, path, sha256 }))
        }
        None => loaded.compiled_graph(None),
    })
}

/// What the timed session's stages share: the arguments, the environment, the plan and the log
/// (the session's part of it starts at `log_start`).
struct SessionContext<'a> {
    args: &'a Args,
    env: &'a Environment,
    plan: &'a SessionPlan,
    log: &'a Path,
    log_start: u64,
    /// The run's directory (the harness's working directory), where the EP writes its op trace.
    out: &'a Path,
}

/// Creates the timed session from `first`: quiet first on an accelerator (`quiet`), created again
/// at VERBOSE where the verdict needs reasons, else at `timed_level`. The outer error is the
/// account's, the inner one the session's.
fn create_timed_session(
    context: &SessionContext<'_>,
    first: &SessionPlan,
    timed_level: Option<OrtLogLevel>,
    quiet: bool,
    result: &mut RunResult,
) -> Result<Result<ort::session::Session>> {
    let SessionContext { args, env, plan, log, log_start, out } = *context;
    let create =
        |level| first.create(env, "timed", level).map_err(|e| explain_with_backend(e, &plan.ep, log, log_start));
    if !quiet {
        return Ok(create(timed_level));
    }
    let judge = |session: &ort::session::Session| {
        let assignment = session::assignment(session);
        let trace = qnn_trace::peek(out);
        let inputs =
            PlacementInputs { assignment: &assignment, trace: trace.as_ref(), ..PlacementInputs::of_run(result) };
        account::rerun_reason(&inputs)
    };
    let (created, logged) = account::create_quiet_first(args.settings.ort_log_level, env, &[plan], create, judge)?;
    result.execution.session_log = Some(logged);
    Ok(created)
}

/// A session-only run: one inference when `--execute-once` asks for it (its failure recorded,
/// not returned; with `--check-outputs` its outputs are the ones saved), then the memory; nothing
/// is measured.
fn run_session_only(
    context: &SessionContext<'_>,
    timed: ort::session::Session,
    prepared: &[PreparedInput],
    created_memory: &footprint::AfterCreate,
    timings: &mut Timings,
    result: &mut RunResult,
) -> (Result<()>, Result<Vec<String>>) {
    let mut saved = Vec::new();
    if context.args.settings.execute_once {
        let log_start = backend::log_position(context.log);
        let start = Instant::now();
        let ran = BoundSession::new(timed, prepared).and_then(|mut bound| match context.args.settings.check_outputs {
            true => outputs::save(&mut bound, context.out),
            false => bound.run_once().map(|()| Vec::new()),
        });
        match ran {
            Ok(written) => {
                timings.first_inference_ns = elapsed_ns(start);
                saved = written;
            }
            Err(error) => result.inference_error = Some(explained_inference_error(&error, context.log, log_start)),
        }
    } else {
        drop(timed);
    }
    result.memory = Some(footprint::record(created_memory));
    (Ok(()), Ok(saved))
}

/// The timed runs (warmup, then the measured loop at the timed log level), the memory, the
/// outputs saved after them and the energy window; the timings go into `timings`. Returns
/// whether the runs succeeded and the saved outputs.
fn run_timed(
    context: &SessionContext<'_>,
    timed: ort::session::Session,
    prepared: &[PreparedInput],
    created_memory: &footprint::AfterCreate,
    out: &Path,
    timings: &mut Timings,
    result: &mut RunResult,
) -> Result<(Result<()>, Result<Vec<String>>)> {
    let SessionContext { args, env, log, .. } = *context;
    let mut bound = BoundSession::new(timed, prepared)?;
    // ONNX Runtime's own loggers (arenas, the QNN backend's messages) log at the timed level too
    // while the model runs, as in an app; the VERBOSE account is logged before and after.
    env.set_log_level(session::log_level(args.settings.ort_log_level));
    let runs_start = backend::log_position(log);
    let count = RunCount { runs: args.settings.runs, budget: args.settings.run_budget() };
    let (measurement, measured) = bound.measure(args.settings.warmup, count);
    let lines_during_runs = backend::lines_between(log, runs_start, backend::log_position(log));
    // Read after the loop, never inside it: the peak covers session creation and every run.
    result.memory = Some(footprint::record(created_memory));
    env.set_log_level(ort::logging::LogLevel::Verbose);
    result.execution.timed_log =
        Some(TimedLog { level: args.settings.ort_log_level.cli_name().into(), lines_during_runs });
    let allocated: Vec<&str> = bound.allocated_on_run().collect();
    if !allocated.is_empty() {
        result.warnings.push(format!(
            "output(s) {} have no static declared shape, or another shape than declared: ONNX Runtime allocates them on every run",
            allocated.join(", ")
        ));
    }
    // After the timed loop, never inside it: the outputs the last timed run left in the binding
    // are saved (no extra inference: on the HTP emulator one costs seconds).
    let saved_outputs = match (&measured, args.settings.check_outputs) {
        (Ok(()), true) => outputs::save_last(&bound, out),
        _ => Ok(Vec::new()),
    };
    if let (Ok(()), Some(seconds)) = (&measured, args.energy_window) {
        match energy::run_window(&mut bound, seconds) {
            Ok(window) => result.energy_window = Some(window),
            Err(error) => result.warnings.push(format!("no energy window: {error:#}")),
        }
    }
    timings.first_inference_ns = measurement.first_inference_ns;
    timings.loop_wall_ns = measurement.loop_wall_ns;
    timings.latencies_ns = measurement.latencies_ns;
    timings.cpu_wait = measurement.cpu_wait;
    timings.extension = measurement.extension;
    Ok((measured, saved_outputs))
}

/// The QNN EP's op trace of this run: the one its account session wrote, or, for a compiled
/// model, the one recorded at compile; a trace that cannot be read is a warning.
fn record_trace(result: &mut RunResult, loaded: &graph::LoadedModel, out: &Path) {
    if result.execution.preferred_ep != "QNNExecutionProvider" {
        return;
    }
    if loaded.compiled {
        result.qnn_trace = qnn_trace::recorded(&loaded.model);
        if result.qnn_trace.is_none() {
            result.warnings.push(
                "the compiled model holds no QNN op trace (compile it with npugate compile to record one): its QNN ops \
                 are attributed by their names only"
                    .into(),
            );
        }
        return;
    }
    match qnn_trace::read(out) {
        Ok(trace) => {
            if trace.is_some() {
                result.artifacts.qnn_op_trace = Some(files::QNN_OP_TRACE.into());
            }
            result.qnn_trace = trace;
        }
        Err(error) => result.warnings.push(format!("the QNN EP's op trace could not be read: {error:#}")),
    }
}

/// The profiled session's optimized graph, read and removed before the result is written.
const OPTIMIZED_GRAPH: &str = "optimized_graph.onnx";
/// Its weights, kept out of the graph file so that reading it stays cheap.
const OPTIMIZED_WEIGHTS: &str = "optimized_graph.weights";

/// What the steps after the timed runs work with.
struct AfterRuns<'a> {
    args: &'a Args,
    env: &'a Environment,
    model: &'a npugate_onnx::Model,
    plan: &'a SessionPlan,
    prepared: &'a [PreparedInput],
    out: &'a Path,
    /// Run the CPU reference pass (of the plan's source model).
    reference_pass: bool,
}

/// The steps after the timed runs: library identity, profiled pass, reference pass. The profiled
/// session logs VERBOSE: what it logged while it was created is the EP's account (`account`).
fn finish(after: &AfterRuns<'_>, result: &mut RunResult, account: &mut Option<String>) -> Result<()> {
    let AfterRuns { args, env, model, plan, prepared, out, reference_pass } = *after;
    // A session-only run (preflight, compile) hashes nothing: its runtime's manifest holds the hashes.
    if !args.settings.session_only {
        result.runtime.libraries = library_identities(args, &plan.ep_options)?;
    }
    if args.settings.profile_runs > 0 && !args.settings.session_only {
        let qnn_csv = out.join(files::QNN_PROFILE);
        // QNN appends to its CSV: start from an empty file so only this pass is in it.
        if qnn_csv.exists() {
            std::fs::remove_file(&qnn_csv).with_context(|| format!("cannot remove the old {}", qnn_csv.display()))?;
        }
        let start = Instant::now();
        // A CPU-EP session saves its optimized graph (weights in a side file), so fused kernels can
        // be traced back to the nodes they replaced; compiling EPs cannot serialize their graphs.
        let optimized = (args.settings.ep == EpKind::Cpu).then(|| out.join(OPTIMIZED_GRAPH));
        let log = out.join(files::ORT_LOG);
        let log_start = backend::log_position(&log);
        let session = plan.create_profiled(env, &out.join("profile"), optimized.as_deref());
        *account = Some(backend::log_since(&log, log_start));
        let session = session?;
        profile(session, prepared, ("profiled", args.settings.profile_runs), &out.join(files::PROFILE))
            .context("profiled pass")?;
        result.timings.profiled_pass_ns = elapsed_ns(start);
        if let Some(optimized) = &optimized {
            match fusions::map(model, optimized) {
                Ok(fusions) => result.fusions = Some(fusions),
                Err(error) => {
                    result.warnings.push(format!("kernels could not be traced to the model's nodes: {error:#}"))
                }
            }
            for file in [optimized.clone(), out.join(OPTIMIZED_WEIGHTS)] {
                let _ = std::fs::remove_file(file);
            }
        }
        result.artifacts.profile = Some(files::PROFILE.into());
        if !plan.profiling_ep_options.is_empty() && qnn_csv.is_file() {
            result.artifacts.qnn_profile = Some(files::QNN_PROFILE.into());
        }
    }
    if reference_pass {
        let start = Instant::now();
        let session = plan.create_reference(env, &out.join("reference"))?;
        profile(session, prepared, ("reference", 1), &out.join(files::REFERENCE_PROFILE)).context("reference pass")?;
        result.timings.reference_pass_ns = elapsed_ns(start);
        result.artifacts.reference_profile = Some(files::REFERENCE_PROFILE.into());
    }
    Ok(())
}

/// Runs a profiling session `runs` times (the inferences of `phase`, for progress) and moves its
/// profile to `destination`.
fn profile(
    session: ort::session::Session,
    prepared: &[PreparedInput],
    (phase, runs): (&str, u32),
    destination: &Path,
) -> Result<()> {
    let mut bound = BoundSession::new(session, prepared)?;
    for run in 1..=runs {
        let start = Instant::now();
        bound.run_once()?;
        progress::done(phase, run, runs, start.elapsed());
    }
    let written = bound.session_mut().end_profiling().map_err(|e| anyhow!("cannot end profiling: {e}"))?;
    if destination.extension().is_some_and(|extension| extension == "gz") {
        return compress(Path::new(&written), destination);
    }
    std::fs::rename(&written, destination)
        .with_context(|| format!("cannot move profile {written} to {}", destination.display()))
}

/// Writes `plain` gzip-compressed to `destination` and removes it.
fn compress(plain: &Path, destination: &Path) -> Result<()> {
    let failed = || format!("cannot compress profile {} to {}", plain.display(), destination.display());
    let mut reader = std::io::BufReader::new(std::fs::File::open(plain).with_context(failed)?);
    let file = std::fs::File::create(destination).with_context(failed)?;
    let mut encoder = flate2::write::GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::fast());
    std::io::copy(&mut reader, &mut encoder).with_context(failed)?;
    encoder.finish().and_then(|mut writer| std::io::Write::flush(&mut writer)).with_context(failed)?;
    std::fs::remove_file(plain).with_context(failed)
}

/// The model must be a non-empty regular file; returns its size.
fn check_model_file(model: &Path) -> Result<u64> {
    let meta = std::fs::metadata(model)
        .with_context(|| format!("model {} cannot be read; pass --model with an .onnx file", model.display()))?;
    if meta.is_dir() {
        bail!("model {} is a directory; pass --model with an .onnx file", model.display());
    }
    if meta.len() == 0 {
        bail!("model {} is empty; pass --model with an .onnx file", model.display());
    }
    Ok(meta.len())
}

/// Compiles the graph into the context cache unless it is there (timed as cold creation) and
/// returns the plan whose timed and profiled sessions load the cached context model.
fn with_context_cache(
    args: &Args,
    env: &Environment,
    plan: SessionPlan,
    dir: &Path,
    model_digest: &str,
    ort_version: &str,
    timings: &mut Timings,
) -> Result<SessionPlan> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create --context-cache directory {}", dir.display()))?;
    let context_model =
        context_cache::context_model_path(dir, &args.model, model_digest, &plan.ep_options, ort_version);
    if !context_model.is_file() {
        let log = args.out.join(files::ORT_LOG);
        let log_start = backend::log_position(&log);
        let start = Instant::now();
        let compiling = plan.with_session_config(&context_cache::write_config(&context_model));
        let session = compiling.create(env, "compile", None).map_err(|e| {
            let e = e.context(
                "--context-cache: cold session creation (compile, then write the context binary) failed; only EPs that \
                 compile (QNN HTP/GPU, OpenVINO, TensorRT, …) make context binaries",
            );
            explain_with_backend(e, &plan.ep, &log, log_start)
        })?;
        drop(session);
        timings.context_cold_create_ns = Some(elapsed_ns(start));
        context_cache::check_written(&context_model).map_err(|e| explain_with_backend(e, &plan.ep, &log, log_start))?;
    }
    Ok(SessionPlan { model: context_model, ..plan })
}

/// A failed inference in the EP's own words: ORT's error, and the first error ORT logged since
/// `log_start` when it says more (e.g. QNN's message for a kernel that failed).
fn explained_inference_error(error: &anyhow::Error, log: &Path, log_start: u64) -> String {
    let message = format!("{error:#}");
    match backend::first_logged_error(&backend::log_since(log, log_start)) {
        Some(logged) if !message.contains(&logged) => format!("{message}; ORT logged: {logged}"),
        _ => message,
    }
}
