//! What every harness run sets up and shares: the output directory and log, ONNX Runtime with the
//! EP registered, the session plan, the result skeleton; and the helpers of a run's edges — a
//! refused session recorded, the backend's account of a failure, library identities, emulation.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use npugate_result::digest::sha256_file;
use npugate_result::{
    files, Artifacts, Assignment, BackendHealth, ExecutionConfig, HistogramSummary, LibraryIdentity, ModelInfo,
    RunResult, RunSettings, RunStatus, RuntimeIdentity, Timings, ToolInfo, RUN_RESULT_SCHEMA,
};
use npugate_settings::qnn::QnnBackend;
use npugate_settings::{EpDevice, EpKind, HarnessCommand as Args};
use ort::environment::Environment;
use ort::memory::DeviceType;

use crate::backend::{self, DidNotStart};
use crate::graph::LoadedModel;
use crate::session::{self, Attach, DeviceChoice, PreferredEp, SessionPlan};
use crate::{account, fingerprint, ort_env};

/// What every run sets up before its first session: the output directory and log, ONNX Runtime
/// with the EP registered, and the plan its sessions are made from.
pub struct Setup {
    /// The output directory, resolved.
    pub out: PathBuf,
    /// `ort.log` in it.
    pub log: PathBuf,
    /// The ORT environment (its logger writes `log`; VERBOSE, or at `--ort-log-level` in a
    /// session-only run on an accelerator EP, see [`crate::account`]).
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
    /// plans sessions of `model`. `quiet`: the run creates its session quiet first (see
    /// [`crate::account`]), so the environment starts at `--ort-log-level` — the QNN EP gives its
    /// backend the environment's level when it is registered — else at VERBOSE.
    pub fn new(args: &Args, model: &Path, quiet: bool) -> Result<Setup> {
        args.settings.check()?;
        let given_ep_options: Vec<(String, String)> =
            args.settings.ep_options.iter().map(|o| (o.key.clone(), o.value.clone())).collect();
        let ep_options = match args.settings.ep {
            EpKind::Qnn => args.settings.qnn.provider_options(&given_ep_options).map_err(anyhow::Error::msg)?,
            _ => given_ep_options,
        };
        std::fs::create_dir_all(&args.out)
            .with_context(|| format!("cannot create output directory {}", args.out.display()))?;
        let out = args.out.canonicalize().with_context(|| format!("cannot resolve {}", args.out.display()))?;
        let log = out.join(files::ORT_LOG);
        let mut timings = Timings::default();

        let start = Instant::now();
        let level = match quiet && account::verbose_rerun().is_none() {
            true => session::log_level(args.settings.ort_log_level),
            false => ort::logging::LogLevel::Verbose,
        };
        let env = ort_env::create_environment(&args.ort_lib, &log, level)?;
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
            renamed: Default::default(),
            ep: PreferredEp { kind: args.settings.ep, name: ep_name.clone(), attach, device },
            ep_options,
            profiling_ep_options: args.settings.qnn.profiling_options(&out.join(files::QNN_PROFILE)),
            // The QNN EP plugin (onnxruntime-qnn) traces its graphs; a QNN EP built into ONNX Runtime
            // is not given options it may not know.
            trace_ep_options: match (args.settings.ep, attach) {
                (EpKind::Qnn, Attach::Plugin) => npugate_settings::QnnArgs::trace_options(&out),
                _ => Vec::new(),
            },
            session_config,
            optimization: args.settings.optimization,
            intra_threads: args.settings.intra_threads,
            inter_threads: None,
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
                commit: crate::stamp::build().commit,
            },
            model,
            runtime: RuntimeIdentity {
                name: args.runtime_name.clone(),
                ort_version: self.ort_version.clone(),
                ort_build_info: ort::info().to_string(),
                libraries: Vec::new(),
            },
            execution: ExecutionConfig {
                requested_ep: args.settings.ep.cli_name().into(),
                preferred_ep: self.ep_name.clone(),
                attach: self.attach.name().into(),
                ep_options: plan.ep_options.iter().cloned().collect(),
                session_config: plan.session_config.iter().cloned().collect(),
                optimization_level: args.settings.optimization.cli_name().into(),
                intra_op_threads: args.settings.intra_threads,
                profiled_pass_ep_options: plan
                    .trace_ep_options
                    .iter()
                    .chain(&plan.profiling_ep_options)
                    .cloned()
                    .collect(),
                ep_device: self.ep_device.clone(),
                context_model: None,
                emulated: None,
                timed_log: None,
                session_log: None,
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
            inference_error: None,
            artifacts: Artifacts { ort_log: files::ORT_LOG.into(), ..Artifacts::default() },
            fusions: None,
            generation: None,
            graph: None,
            qnn_trace: None,
            memory: None,
            energy_window: None,
            aihub: None,
            fingerprint: fingerprint::collect(),
            warnings: Vec::new(),
        };
        if args.settings.session_only {
            result.settings = RunSettings { warmup: 0, runs: 0, profile_runs: 0, ..result.settings };
        }
        result
    }
}

/// `--session-only` and the EP refused the session: the refusal is the finding, so it is written
/// into `result.json` (`session_error`, with the backend health read from the log) before the
/// harness fails.
pub fn refused(
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
    result.assignment = Assignment {
        source: "unavailable".into(),
        error: Some("the session was not created".into()),
        subgraphs: Vec::new(),
    };
    result.backend = args.settings.ep.is_accelerator().then(|| {
        backend::assess(
            &backend::log_since(log, log_start),
            &result.assignment,
            &result.execution.preferred_ep,
            adsp_problem().as_deref(),
        )
    });
    result.write(out).with_context(|| format!("cannot write {}", out.join(files::RESULT).display()))?;
    Err(error)
}

/// What an x86_64 harness running the QNN HTP backend ran on: Qualcomm's HTP emulator (the
/// backend's x86_64 host build executes the graph with x86 kernels). `None` on real hardware, for
/// other backends, and when the backend did not start.
pub fn emulation(args: &Args, backend: Option<&BackendHealth>) -> Option<String> {
    let htp = match args.settings.qnn.backend() {
        QnnBackend::Type(name) => name == "htp",
        QnnBackend::Path(path) => {
            path.file_name().is_some_and(|n| n.to_string_lossy().to_ascii_lowercase().contains("htp"))
        }
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

/// sha256 of every library loaded on purpose: ORT, the EP plugin or the provider library ORT
/// loads beside itself (`libonnxruntime_providers_openvino.so`), the QNN backend (and Saver).
pub fn library_identities(args: &Args, ep_options: &[(String, String)]) -> Result<Vec<LibraryIdentity>> {
    let mut libraries: Vec<(&str, PathBuf)> = vec![("ort", args.ort_lib.clone())];
    if let Some(plugin) = &args.ep_library {
        libraries.push(("ep_plugin", plugin.clone()));
    } else if args.settings.ep.is_accelerator() {
        let provider =
            args.ort_lib.with_file_name(format!("libonnxruntime_providers_{}.so", args.settings.ep.cli_name()));
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
pub fn qnn_backend_file(backend_type: &str) -> String {
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
pub fn hardware(device: EpDevice) -> DeviceType {
    match device {
        EpDevice::Cpu => DeviceType::CPU,
        EpDevice::Gpu => DeviceType::GPU,
        EpDevice::Npu => DeviceType::NPU,
    }
}

/// The hardware a QNN backend runs on, to pick the plugin device when several are offered.
pub fn backend_hardware(backend: &QnnBackend) -> DeviceType {
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

/// Explains a failed session creation with the log written since `log_start`: a dead backend
/// (e.g. `--strict` refusing the all-CPU session) or an absent device (OpenVINO `device_type=NPU`
/// without an NPU) becomes [`DidNotStart`] ("QNN backend did not start: <reason>"); otherwise the
/// first error ORT logged is added, in the EP's own words.
pub fn explain_with_backend(error: anyhow::Error, ep: &PreferredEp, log: &Path, log_start: u64) -> anyhow::Error {
    if !ep.kind.is_accelerator() || DidNotStart::is_cause_of(&error) {
        return error;
    }
    let logged = backend::log_since(log, log_start);
    let dead =
        backend::failure_in_log(&logged, adsp_problem().as_deref()).or_else(|| backend::absent_device_cause(&logged));
    match (dead, backend::first_logged_error(&logged)) {
        (Some(reason), _) => error.context(DidNotStart::new(&ep.name, reason)),
        (None, Some(logged)) if !format!("{error:#}").contains(&logged) => anyhow!("{error:#}; ORT logged: {logged}"),
        (None, _) => error,
    }
}

/// On Android, what is wrong with `ADSP_LIBRARY_PATH` (if anything); elsewhere nothing.
pub fn adsp_problem() -> Option<String> {
    if !cfg!(target_os = "android") {
        return None;
    }
    std::env::var("ADSP_LIBRARY_PATH").ok().and_then(|value| backend::adsp_library_path_problem(&value))
}

/// HdrHistogram summary (3 significant figures) of the timed runs.
pub fn histogram(latencies_ns: &[u64]) -> Option<HistogramSummary> {
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

/// Replaces Rust's panic report (its message, then a backtrace under `RUST_BACKTRACE`) with one
/// line in the harness's error format, which npugate shows as the harness's account: a panic is
/// a bug of the harness, never a way to report bad input.
pub fn report_panics_in_one_line() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message =
            payload.downcast_ref::<&str>().copied().or_else(|| payload.downcast_ref::<String>().map(String::as_str));
        let message = message.unwrap_or("(no message)").replace('\n', " ");
        let place = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        eprintln!(
            "npugate-harness: error: internal error{place}: {message} (a bug in npugate-harness: please report it)"
        );
    }));
}

/// Nanoseconds since `start`.
pub fn elapsed_ns(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}

/// The VERBOSE account of the EP when no profiled session gave it: a session created (log id
/// `account`, at the environment's VERBOSE level) and dropped only for what its set-up logs — the
/// backend's health, its power configuration. Returns the log written meanwhile; a failure to
/// create it is a warning (the log then holds why).
pub fn account_session(env: &Environment, plan: &SessionPlan, log: &Path, warnings: &mut Vec<String>) -> String {
    let start = backend::log_position(log);
    if let Err(error) = plan.for_account().create(env, "account", None) {
        warnings.push(format!("the VERBOSE account session of the EP could not be created: {error:#}"));
    }
    backend::log_since(log, start)
}

/// The model's own nodes and the graph ONNX Runtime partitions set against them. A model ONNX
/// Runtime's CPU EP cannot optimize (a compiled model) gets its nodes only, and a warning. The
/// partitioned graph, saved by a CPU session into `out` ([`files::PARTITIONED_GRAPH`]), is removed
/// once read unless `keep` (`--keep-partitioned-graph`).
pub fn model_graph(
    loaded: &LoadedModel,
    env: &Environment,
    plan: &SessionPlan,
    (out, keep): (&Path, bool),
    warnings: &mut Vec<String>,
) -> npugate_result::ModelGraph {
    let mut graph = loaded.graph();
    let path = out.join(files::PARTITIONED_GRAPH);
    let traced = plan.save_partitioned_graph(env, &path, keep).and_then(|()| loaded.add_partitioned(&mut graph, &path));
    for file in [path.clone(), path.with_extension("weights")].into_iter().filter(|_| !keep) {
        let _ = std::fs::remove_file(file);
    }
    if let Err(error) = traced {
        warnings.push(format!("the nodes ONNX Runtime partitions could not be traced to the model's nodes: {error:#}"));
    }
    graph
}

/// Writes the result of a run that measured something: a backend that did not start fails it
/// loudly (after the CPU numbers that prove it are kept), so does a first inference that failed;
/// any failure after the timed runs makes it `incomplete` with the error; returns how the run finished.
pub fn conclude(mut result: RunResult, finished: Result<()>, ep_name: &str, out: &Path) -> Result<()> {
    let finished = match (&result.backend, &result.inference_error) {
        (Some(health), _) if !health.started => Err(backend::failure(health, &result.assignment, ep_name).into()),
        (_, Some(failed)) => {
            finished.and(Err(anyhow!("the session was created, but its first inference failed: {failed}")))
        }
        _ => finished,
    };
    if let Err(error) = &finished {
        result.status = RunStatus::Incomplete;
        result.error = Some(format!("{error:#}"));
    }
    result.write(out).with_context(|| format!("cannot write {}", out.join(files::RESULT).display()))?;
    finished
}
