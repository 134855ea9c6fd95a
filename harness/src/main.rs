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
    files, Artifacts, Assignment, BackendHealth, ExecutionConfig, FixedFrom, HistogramSummary, LibraryIdentity, ModelInfo, RunResult,
    RunSettings, RunStatus, RuntimeIdentity, Timings, ToolInfo, RUN_RESULT_SCHEMA,
};
use ort::environment::Environment;
use ort::memory::DeviceType;

mod backend;
mod context_cache;
mod fingerprint;
mod fusions;
mod generate;
mod inputs;
mod kv;
mod measure;
mod model_files;
mod ort_env;
mod outputs;
mod providers;
mod session;

use npugate_settings::HarnessCommand as Args;
use backend::DidNotStart;
use npugate_settings::qnn::QnnBackend;
use npugate_settings::{EpDevice, EpKind};
use inputs::PreparedInput;
use measure::BoundSession;
use npugate_result::contract::{EXIT_DID_NOT_START, EXIT_ERROR};
use session::{Attach, DeviceChoice, PreferredEp, SessionPlan};

/// Exit codes: 0 measured, 2 could not run, 3 the accelerator did not start
/// ([`EXIT_DID_NOT_START`]: its device absent or its backend dead; what was measured on the CPU
/// is still in `result.json`).
fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("npugate-harness: error: {error:#}");
            ExitCode::from(if DidNotStart::is_cause_of(&error) { EXIT_DID_NOT_START } else { EXIT_ERROR })
        }
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
    let mut setup = Setup::new(args, &args.model)?;
    let identity = model_files::identify(&args.model, model_bytes, &args.model_files)?;
    let plan = match &args.settings.context_cache {
        Some(dir) => with_context_cache(args, &setup.env, setup.plan.clone(), dir, &identity.digest, &setup.ort_version, &mut setup.timings)?,
        None => setup.plan.clone(),
    };
    let model = ModelInfo {
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
    };
    let mut result = setup.result(args, model, &plan);
    result.execution.context_model = args.settings.context_cache.as_ref().map(|_| plan.model.display().to_string());
    let Setup { out, log, env, mut timings, ep_name, .. } = setup;

    let log_start = backend::log_position(&log);
    let start = Instant::now();
    let created = plan.create(&env, "timed").map_err(|e| explain_with_backend(e, &plan.ep, &log, log_start));
    timings.session_create_ns = elapsed_ns(start);
    let timed = match created {
        Ok(session) => session,
        Err(error) if args.settings.session_only => return refused(args, &out, result, timings, &log, log_start, error),
        Err(error) => return Err(error),
    };
    if args.settings.context_cache.is_some() {
        timings.context_warm_create_ns = Some(timings.session_create_ns);
    }
    result.assignment = session::assignment(&timed);
    result.backend = args
        .settings
        .ep
        .is_accelerator()
        .then(|| backend::assess(&backend::log_since(&log, log_start), &result.assignment, &ep_name, adsp_problem().as_deref()));
    result.execution.emulated = emulation(args, result.backend.as_ref());
    result.model.inputs = timed.inputs().iter().map(inputs::signature).collect();
    result.model.outputs = timed.outputs().iter().map(inputs::signature).collect();
    let needs_inputs = !args.settings.session_only || !args.settings.no_reference_pass;
    let prepared = match needs_inputs {
        true => inputs::prepare(timed.inputs(), &args.settings.shapes, &args.settings.inputs, args.settings.seed)?,
        false => Vec::new(),
    };
    let (measured, saved_outputs) = if args.settings.session_only {
        drop(timed);
        (Ok(()), Ok(Vec::new()))
    } else {
        let mut bound = BoundSession::new(timed, &prepared)?;
        let (measurement, measured) = bound.measure(args.settings.warmup, args.settings.runs);
        // After the timed loop, never inside it: one extra run whose outputs are saved.
        let saved_outputs = match (&measured, args.settings.check_outputs) {
            (Ok(()), true) => outputs::save(&mut bound, &out),
            _ => Ok(Vec::new()),
        };
        timings.first_inference_ns = measurement.first_inference_ns;
        timings.loop_wall_ns = measurement.loop_wall_ns;
        timings.latencies_ns = measurement.latencies_ns;
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
    let finished = measured
        .and_then(|()| saved_outputs.map(drop))
        .and_then(|()| finish(args, &env, &plan, &prepared, &out, &mut result));
    let finished = match &result.backend {
        Some(health) if !health.started => Err(backend::failure(health, &result.assignment, &ep_name).into()),
        _ => finished,
    };
    if let Err(error) = &finished {
        result.status = RunStatus::Incomplete;
        result.error = Some(format!("{error:#}"));
    }
    result.write(&out).with_context(|| format!("cannot write {}", out.join(files::RESULT).display()))?;
    finished
}

/// What every run sets up before its first session: the output directory and log, ONNX Runtime
/// with the EP registered, and the plan its sessions are made from.
pub struct Setup {
    /// The output directory, resolved.
    pub out: PathBuf,
    /// `ort.log` in it.
    pub log: PathBuf,
    /// The ORT environment (VERBOSE logger into `log`).
    pub env: Environment,
    /// Init and registration times so far.
    pub timings: Timings,
    /// The loaded ORT's version.
    pub ort_version: String,
    /// The preferred EP's ORT name.
    pub ep_name: String,
    /// How it attaches.
    pub attach: Attach,
    /// The plugin device it sits on, described.
    pub ep_device: Option<String>,
    /// How sessions of `model` are made.
    pub plan: SessionPlan,
}

impl Setup {
    /// Checks the EP flags, creates the output directory and the environment, registers the EP and
    /// plans sessions of `model`.
    pub fn new(args: &Args, model: &Path) -> Result<Setup> {
        check_ep_flags(args)?;
        let given_ep_options: Vec<(String, String)> = args.settings.ep_options.iter().map(|o| (o.key.clone(), o.value.clone())).collect();
        let ep_options = match args.settings.ep {
            EpKind::Qnn => args.settings.qnn.provider_options(&given_ep_options).map_err(anyhow::Error::msg)?,
            _ => given_ep_options,
        };
        std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create output directory {}", args.out.display()))?;
        let out = args.out.canonicalize().with_context(|| format!("cannot resolve {}", args.out.display()))?;
        let log = out.join(files::ORT_LOG);
        let mut timings = Timings::default();

        let start = Instant::now();
        let env = ort_env::create_environment(&args.ort_lib, &log)?;
        timings.ort_init_ns = elapsed_ns(start);
        let ort_version = ort_env::ort_version(&args.ort_lib)?;

        let start = Instant::now();
        let (ep_name, attach) = session::register_ep(&env, &args.settings, args.ep_library.as_deref(), &args.ort_lib)?;
        timings.ep_register_ns = elapsed_ns(start);

        let mut session_config: Vec<(String, String)> =
            args.settings.session_config.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
        if args.settings.strict {
            session_config.push(("session.disable_cpu_ep_fallback".into(), "1".into()));
        }
        let device = match (args.settings.ep_device, args.settings.ep) {
            (Some(device), _) => DeviceChoice::Require(hardware(device)),
            (None, EpKind::Qnn) => DeviceChoice::Prefer(backend_hardware(&args.settings.qnn.backend())),
            (None, _) => DeviceChoice::Only,
        };
        let plan = SessionPlan {
            model: model.to_path_buf(),
            source_model: model.to_path_buf(),
            ep: PreferredEp { kind: args.settings.ep, name: ep_name.clone(), attach, device },
            ep_options,
            profiling_ep_options: args.settings.qnn.profiling_options(&out.join(files::QNN_PROFILE)),
            session_config,
            optimization: args.settings.optimization,
            intra_threads: args.settings.intra_threads,
        };
        let ep_device = match attach {
            Attach::Plugin => Some(session::describe_device(&session::plugin_device(&env, &ep_name, device)?)),
            Attach::Cpu | Attach::Builtin => None,
        };
        Ok(Setup { out, log, env, timings, ort_version, ep_name, attach, ep_device, plan })
    }

    /// The result of this run before anything is measured: `model` and `plan` as given.
    pub fn result(&self, args: &Args, model: ModelInfo, plan: &SessionPlan) -> RunResult {
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
            runtime: RuntimeIdentity { name: args.runtime_name.clone(), ort_version: self.ort_version.clone(), ort_build_info: ort::info().to_string(), libraries: Vec::new() },
            execution: ExecutionConfig {
                requested_ep: args.settings.ep.cli_name().into(),
                preferred_ep: self.ep_name.clone(),
                attach: self.attach.name().into(),
                ep_options: plan.ep_options.iter().cloned().collect(),
                session_config: plan.session_config.iter().cloned().collect(),
                optimization_level: args.settings.optimization.cli_name().into(),
                intra_op_threads: args.settings.intra_threads,
                profiled_pass_ep_options: plan.profiling_ep_options.iter().cloned().collect(),
                ep_device: self.ep_device.clone(),
                context_model: None,
                emulated: None,
            },
            settings: RunSettings {
                warmup: args.settings.warmup,
                runs: args.settings.runs,
                profile_runs: args.settings.profile_runs,
                reference_pass: !args.settings.no_reference_pass,
                seed: args.settings.seed,
            },
            inputs: Vec::new(),
            timings: Timings::default(),
            histogram: None,
            assignment: Assignment::default(),
            backend: None,
            session_error: None,
            artifacts: Artifacts { ort_log: files::ORT_LOG.into(), ..Artifacts::default() },
            fusions: None,
            generation: None,
            fingerprint: fingerprint::collect(),
            warnings: Vec::new(),
        };
        if args.settings.session_only {
            result.settings = RunSettings { warmup: 0, runs: 0, profile_runs: 0, ..result.settings };
        }
        result
    }
}

/// The profiled session's optimized graph, read and removed before the result is written.
const OPTIMIZED_GRAPH: &str = "optimized_graph.onnx";
/// Its weights, kept out of the graph file so that reading it stays cheap.
const OPTIMIZED_WEIGHTS: &str = "optimized_graph.weights";

/// `--session-only` and the EP refused the session: the refusal is the finding, so it is written
/// into `result.json` (`session_error`, with the backend health read from the log) before the
/// harness fails.
fn refused(
    args: &Args,
    out: &Path,
    mut result: RunResult,
    timings: Timings,
    log: &Path,
    log_start: u64,
    error: anyhow::Error,
) -> Result<()> {
    let message = format!("{error:#}");
    result.status = RunStatus::Incomplete;
    result.error = Some(message.clone());
    result.session_error = Some(message);
    result.timings = timings;
    result.assignment = Assignment { source: "unavailable".into(), error: Some("the session was not created".into()), subgraphs: Vec::new() };
    result.backend = args
        .settings
        .ep
        .is_accelerator()
        .then(|| backend::assess(&backend::log_since(log, log_start), &result.assignment, &result.execution.preferred_ep, adsp_problem().as_deref()));
    result.write(out).with_context(|| format!("cannot write {}", out.join(files::RESULT).display()))?;
    Err(error)
}

/// What an x86_64 harness running the QNN HTP backend ran on: Qualcomm's HTP emulator (the
/// backend's x86_64 host build executes the graph with x86 kernels). `None` on real hardware, for
/// other backends, and when the backend did not start.
fn emulation(args: &Args, backend: Option<&BackendHealth>) -> Option<String> {
    let htp = match args.settings.qnn.backend() {
        QnnBackend::Type(name) => name == "htp",
        QnnBackend::Path(path) => path.file_name().is_some_and(|n| n.to_string_lossy().to_ascii_lowercase().contains("htp")),
    };
    let started = backend.is_some_and(|b| b.started);
    let soc = args.settings.qnn.soc_model.map(|id| format!(" configured for QNN soc_model {id}")).unwrap_or_default();
    (cfg!(target_arch = "x86_64") && args.settings.ep == EpKind::Qnn && htp && started).then(|| {
        format!(
            "Qualcomm's HTP emulator: the x86_64 host build of the QNN HTP backend{soc} ran the graph with x86 kernels on {}; \
             its outputs are real, its speed says nothing about a device",
            std::env::consts::OS
        )
    })
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
        let session = plan.create_profiled(env, &out.join("profile"), optimized.as_deref())?;
        profile(session, prepared, args.settings.profile_runs, &out.join(files::PROFILE)).context("profiled pass")?;
        result.timings.profiled_pass_ns = elapsed_ns(start);
        if let Some(optimized) = &optimized {
            match fusions::map(&args.model, optimized) {
                Ok(fusions) => result.fusions = Some(fusions),
                Err(error) => result.warnings.push(format!("kernels could not be traced to the model's nodes: {error:#}")),
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
    if !args.settings.no_reference_pass {
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

/// sha256 of every library loaded on purpose: ORT, the EP plugin or the provider library ORT
/// loads beside itself (`libonnxruntime_providers_openvino.so`), the QNN backend (and Saver).
fn library_identities(args: &Args, ep_options: &[(String, String)]) -> Result<Vec<LibraryIdentity>> {
    let mut libraries: Vec<(&str, PathBuf)> = vec![("ort", args.ort_lib.clone())];
    if let Some(plugin) = &args.ep_library {
        libraries.push(("ep_plugin", plugin.clone()));
    } else if args.settings.ep.is_accelerator() {
        let provider = args.ort_lib.with_file_name(format!("libonnxruntime_providers_{}.so", args.settings.ep.cli_name()));
        if provider.is_file() {
            libraries.push(("ep_provider", provider));
        }
    }
    for (key, value) in ep_options {
        let file = match key.as_str() {
            "backend_path" | "qnn_saver_path" => PathBuf::from(value),
            "backend_type" => PathBuf::from(qnn_backend_file(value)),
            _ => continue,
        };
        // Relative names are what the QNN EP resolves next to itself (the plugin's directory).
        let resolved = match (&args.ep_library, file.is_absolute()) {
            (Some(plugin), false) => plugin.with_file_name(&file),
            _ => file,
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

/// The library a QNN `backend_type` loads (`htp` → `libQnnHtp.so`, `QnnHtp.dll` on Windows).
fn qnn_backend_file(backend_type: &str) -> String {
    let mut name = backend_type.to_string();
    if let Some(first) = name.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    if cfg!(windows) {
        format!("Qnn{name}.dll")
    } else {
        format!("libQnn{name}.so")
    }
}

/// ORT's hardware type of an `--ep-device`.
fn hardware(device: EpDevice) -> DeviceType {
    match device {
        EpDevice::Cpu => DeviceType::CPU,
        EpDevice::Gpu => DeviceType::GPU,
        EpDevice::Npu => DeviceType::NPU,
    }
}

/// The hardware a QNN backend runs on, to pick the plugin device when several are offered.
fn backend_hardware(backend: &QnnBackend) -> DeviceType {
    let name = match backend {
        QnnBackend::Type(t) => t.to_string(),
        QnnBackend::Path(p) => p.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default(),
    };
    if name.contains("htp") || name.contains("dsp") {
        DeviceType::NPU
    } else if name.contains("gpu") {
        DeviceType::GPU
    } else {
        DeviceType::CPU
    }
}

/// Rejects flags that do not apply to the chosen EP or contradict each other (one line, the fix).
fn check_ep_flags(args: &Args) -> Result<()> {
    let ep = args.settings.ep;
    if ep != EpKind::Qnn {
        if let Some(flag) = args.settings.qnn.given_flags().first() {
            bail!("{flag} applies to --ep qnn only; drop it or pass --ep qnn");
        }
    }
    if !ep.is_accelerator() {
        for (flag, given) in [("--strict", args.settings.strict), ("--context-cache", args.settings.context_cache.is_some())] {
            if given {
                bail!("{flag} applies to an accelerator EP (the CPU EP has no fallback and no context binary); drop it or pass --ep qnn, --ep openvino, …");
            }
        }
    }
    if args.settings.qnn.profiling() && args.settings.profile_runs == 0 {
        bail!("--qnn-profiling runs in the profiled pass only, but --profile-runs is 0; pass --profile-runs 1 or more");
    }
    Ok(())
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
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create --context-cache directory {}", dir.display()))?;
    let context_model = context_cache::context_model_path(dir, &args.model, model_digest, &plan.ep_options, ort_version);
    if !context_model.is_file() {
        let log = args.out.join(files::ORT_LOG);
        let log_start = backend::log_position(&log);
        let start = Instant::now();
        let compiling = plan.with_session_config(&context_cache::write_config(&context_model));
        let session = compiling.create(env, "compile").map_err(|e| {
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

/// Explains a failed session creation with the log written since `log_start`: a dead backend
/// (e.g. `--strict` refusing the all-CPU session) or an absent device (OpenVINO `device_type=NPU`
/// without an NPU) becomes [`DidNotStart`] ("QNN backend did not start: <reason>"); otherwise the
/// first error ORT logged is added, in the EP's own words.
fn explain_with_backend(error: anyhow::Error, ep: &PreferredEp, log: &Path, log_start: u64) -> anyhow::Error {
    if !ep.kind.is_accelerator() || DidNotStart::is_cause_of(&error) {
        return error;
    }
    let logged = backend::log_since(log, log_start);
    let dead = backend::failure_in_log(&logged, adsp_problem().as_deref()).or_else(|| backend::absent_device_cause(&logged));
    match (dead, backend::first_logged_error(&logged)) {
        (Some(reason), _) => error.context(DidNotStart::new(&ep.name, reason)),
        (None, Some(logged)) if !format!("{error:#}").contains(&logged) => anyhow!("{error:#}; ORT logged: {logged}"),
        (None, _) => error,
    }
}

/// On Android, what is wrong with `ADSP_LIBRARY_PATH` (if anything); elsewhere nothing.
fn adsp_problem() -> Option<String> {
    if !cfg!(target_os = "android") {
        return None;
    }
    std::env::var("ADSP_LIBRARY_PATH").ok().and_then(|value| backend::adsp_library_path_problem(&value))
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
