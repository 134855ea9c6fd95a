//! `npugate-harness`: the binary that runs on the device. Loads ONNX Runtime dynamically, creates a
//! session on the requested execution provider, runs warmup + N timed runs, then a separate profiled
//! pass and a CPU reference pass, and writes `result.json` with everything a host stage needs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use npugate_result::digest::sha256_file;
use npugate_result::{
    files, Artifacts, ExecutionConfig, HistogramSummary, LibraryIdentity, ModelInfo, RunResult, RunSettings, RunStatus,
    RuntimeIdentity, Timings, ToolInfo, RUN_RESULT_SCHEMA,
};
use ort::environment::Environment;

mod cli;
mod fingerprint;
mod inputs;
mod measure;
mod ort_env;
mod session;

use cli::Args;
use inputs::PreparedInput;
use measure::BoundSession;
use session::SessionPlan;

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("npugate-harness: error: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> Result<()> {
    let model_bytes = check_model_file(&args.model)?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create output directory {}", args.out.display()))?;
    let out = args.out.canonicalize().with_context(|| format!("cannot resolve {}", args.out.display()))?;
    let mut timings = Timings::default();

    let start = Instant::now();
    let env = ort_env::create_environment(&args.ort_lib, &out.join(files::ORT_LOG))?;
    timings.ort_init_ns = elapsed_ns(start);
    let ort_version = ort_env::ort_version(&args.ort_lib)?;

    let start = Instant::now();
    let attach = session::register_ep(&env, args.ep, args.ep_library.as_deref())?;
    timings.ep_register_ns = elapsed_ns(start);

    let plan = SessionPlan {
        model: args.model.clone(),
        ep: args.ep,
        attach,
        ep_options: args.ep_options.clone(),
        session_config: args.session_config.clone(),
        optimization: args.optimization,
        intra_threads: args.intra_threads,
    };
    let start = Instant::now();
    let timed = plan.create(&env, "timed", None)?;
    timings.session_create_ns = elapsed_ns(start);

    let prepared = inputs::prepare(timed.inputs(), &args.shapes, &args.input_files, args.seed)?;
    let (model_sha256, _) = sha256_file(&args.model).with_context(|| format!("cannot hash {}", args.model.display()))?;
    let model = ModelInfo {
        path: args.model.display().to_string(),
        sha256: model_sha256,
        bytes: model_bytes,
        inputs: timed.inputs().iter().map(inputs::signature).collect(),
        outputs: timed.outputs().iter().map(inputs::signature).collect(),
    };
    let assignment = session::assignment(&timed);
    let bound = BoundSession::new(timed, &prepared)?;
    let (measurement, measured) = bound.measure(args.warmup, args.runs);
    drop(bound);
    timings.first_inference_ns = measurement.first_inference_ns;
    timings.loop_wall_ns = measurement.loop_wall_ns;
    timings.latencies_ns = measurement.latencies_ns;
    if timings.latencies_ns.is_empty() {
        // Nothing was measured: fail without writing a result.
        return measured;
    }

    let mut result = RunResult {
        schema: RUN_RESULT_SCHEMA.to_string(),
        status: RunStatus::Complete,
        error: None,
        tool: ToolInfo {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            target: format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS),
        },
        model,
        runtime: RuntimeIdentity {
            name: args.runtime_name.clone(),
            ort_version,
            ort_build_info: ort::info().to_string(),
            libraries: Vec::new(),
        },
        execution: ExecutionConfig {
            requested_ep: args.ep.cli_name().into(),
            preferred_ep: args.ep.ort_name().into(),
            attach: attach.name().into(),
            ep_options: args.ep_options.iter().cloned().collect(),
            session_config: args.session_config.iter().cloned().collect(),
            optimization_level: args.optimization.cli_name().into(),
            intra_op_threads: args.intra_threads,
        },
        settings: RunSettings {
            warmup: args.warmup,
            runs: args.runs,
            profile_runs: args.profile_runs,
            reference_pass: !args.no_reference_pass,
            seed: args.seed,
        },
        inputs: prepared.iter().map(|p| p.description.clone()).collect(),
        histogram: histogram(&timings.latencies_ns),
        timings,
        assignment,
        backend: None,
        artifacts: Artifacts { ort_log: files::ORT_LOG.into(), ..Artifacts::default() },
        fingerprint: fingerprint::collect(),
        warnings: Vec::new(),
    };

    // Everything after the timed loop may fail without losing what was measured.
    let finished = measured.and_then(|()| finish(args, &env, &plan, &prepared, &out, &mut result));
    if let Err(error) = &finished {
        result.status = RunStatus::Incomplete;
        result.error = Some(format!("{error:#}"));
    }
    result.write(&out).with_context(|| format!("cannot write {}", out.join(files::RESULT).display()))?;
    finished
}

/// The steps after the timed runs: library identity, profiled pass, reference pass.
fn finish(
    args: &Args,
    env: &Environment,
    plan: &SessionPlan,
    prepared: &[PreparedInput],
    out: &Path,
    result: &mut RunResult,
) -> Result<()> {
    result.runtime.libraries = library_identities(args)?;
    if args.profile_runs > 0 {
        let start = Instant::now();
        let session = plan.create(env, "profiled", Some(&out.join("profile")))?;
        profile(session, prepared, args.profile_runs, &out.join(files::PROFILE)).context("profiled pass")?;
        result.timings.profiled_pass_ns = elapsed_ns(start);
        result.artifacts.profile = Some(files::PROFILE.into());
    }
    if !args.no_reference_pass {
        let start = Instant::now();
        let session = plan.create_reference(env, &out.join("reference"))?;
        profile(session, prepared, 1, &out.join(files::REFERENCE_PROFILE)).context("reference pass")?;
        result.timings.reference_pass_ns = elapsed_ns(start);
        result.artifacts.reference_profile = Some(files::REFERENCE_PROFILE.into());
    }
    Ok(())
}

/// Runs a profiling session `runs` times and moves its profile to `destination`.
fn profile(session: ort::session::Session, prepared: &[PreparedInput], runs: u32, destination: &Path) -> Result<()> {
    let mut bound = BoundSession::new(session, prepared)?;
    for _ in 0..runs {
        bound.run_once()?;
    }
    let written = bound.session_mut().end_profiling().map_err(|e| anyhow!("cannot end profiling: {e}"))?;
    std::fs::rename(&written, destination)
        .with_context(|| format!("cannot move profile {written} to {}", destination.display()))
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

/// sha256 of every library loaded on purpose: ORT, the EP plugin, the QNN backend.
fn library_identities(args: &Args) -> Result<Vec<LibraryIdentity>> {
    let mut libraries: Vec<(&str, PathBuf)> = vec![("ort", args.ort_lib.clone())];
    if let Some(plugin) = &args.ep_library {
        libraries.push(("ep_plugin", plugin.clone()));
    }
    if let Some((_, backend)) = args.ep_options.iter().find(|(k, _)| k == "backend_path") {
        let path = PathBuf::from(backend);
        let resolved = match (&args.ep_library, path.is_absolute()) {
            (Some(plugin), false) => plugin.with_file_name(&path),
            _ => path,
        };
        if resolved.is_file() {
            libraries.push(("qnn_backend", resolved));
        }
    }
    libraries
        .into_iter()
        .map(|(role, path)| {
            let (sha256, bytes) = sha256_file(&path).with_context(|| format!("cannot hash {}", path.display()))?;
            Ok(LibraryIdentity { role: role.into(), path: path.display().to_string(), sha256, bytes })
        })
        .collect()
}

/// HdrHistogram summary (3 significant figures) of the timed runs.
fn histogram(latencies_ns: &[u64]) -> Option<HistogramSummary> {
    const SIGNIFICANT_FIGURES: u8 = 3;
    let mut histogram = hdrhistogram::Histogram::<u64>::new(SIGNIFICANT_FIGURES).ok()?;
    for &latency in latencies_ns {
        histogram.record(latency.max(1)).ok()?;
    }
    let percentiles = [("p50", 0.50), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999)]
        .into_iter()
        .map(|(name, q)| (name.to_string(), histogram.value_at_quantile(q)))
        .collect();
    Some(HistogramSummary {
        count: histogram.len(),
        min_ns: histogram.min(),
        max_ns: histogram.max(),
        mean_ns: histogram.mean(),
        stdev_ns: histogram.stdev(),
        percentiles_ns: percentiles,
        significant_figures: SIGNIFICANT_FIGURES,
    })
}

fn elapsed_ns(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}
