//! Creating sessions with the requested execution provider, and reading ORT's node→EP assignment.

use std::ffi::{c_char, CStr};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use npugate_result::{AssignedNode, AssignedSubgraph, Assignment};
use ort::device::Device;
use ort::environment::Environment;
use ort::logging::LogLevel;
use ort::memory::DeviceType;
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};
use ort::session::Session;
use ort::AsPointer;

use npugate_settings::{EpKind, HarnessSettings, OptimizationLevel, OrtLogLevel};

use crate::backend::DidNotStart;
use crate::providers;

/// Session config key that keeps ORT from prepacking weights (used by the reference pass, whose
/// profile must show every weight's shape).
pub const DISABLE_PREPACKING_KEY: &str = "session.disable_prepacking";

/// Session config key that makes ORT record the node→EP assignment (ORT ≥ 1.24).
pub const RECORD_ASSIGNMENT_KEY: &str = "session.record_ep_graph_assignment_info";

/// Session config key naming the folder of a model loaded from memory, where ORT reads its
/// external data.
const EXTERNAL_DATA_FOLDER_KEY: &str = "session.model_external_initializers_file_folder_path";

/// Session config entries that change ORT's graph optimizations: passed on to the session that
/// saves the partitioned graph, so it is optimized as the timed session was.
const OPTIMIZER_CONFIG_PREFIX: &str = "optimization.";

/// How the execution provider reaches ONNX Runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// The CPU EP (always present).
    Cpu,
    /// An EP compiled into libonnxruntime (or shipped beside it as a provider library), appended by name.
    Builtin,
    /// An EP plugin library registered with the environment and appended by device.
    Plugin,
}

impl Attach {
    /// Name recorded in the result.
    pub fn name(self) -> &'static str {
        match self {
            Attach::Cpu => "cpu",
            Attach::Builtin => "builtin",
            Attach::Plugin => "plugin",
        }
    }
}

/// Which device of a plugin EP to append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceChoice {
    /// Its only device (several: the user must choose with `--ep-device`).
    Only,
    /// This hardware when offered, else the EP's first device (QNN: the backend picks the hardware).
    Prefer(DeviceType),
    /// Exactly this hardware (`--ep-device`): without it the EP did not start.
    Require(DeviceType),
}

/// The preferred EP: what it is, its ORT name, how it attaches and which device it sits on.
#[derive(Debug, Clone)]
pub struct PreferredEp {
    /// The EP asked for.
    pub kind: EpKind,
    /// Its ORT name (`OpenVINOExecutionProvider`; a plugin's registration name).
    pub name: String,
    /// How it attaches.
    pub attach: Attach,
    /// The device of a plugin EP.
    pub device: DeviceChoice,
}

/// Everything needed to create identically configured sessions (timed, profiled).
#[derive(Debug, Clone)]
pub struct SessionPlan {
    /// The model the timed and profiled sessions load (an EP context model with `--context-cache`).
    pub model: PathBuf,
    /// The model as given, or a compiled model's source model (`--reference-model`): the reference
    /// pass always runs it (the CPU EP cannot run EPContext nodes).
    pub source_model: PathBuf,
    /// `source_model` with its unnamed nodes named as ONNX Runtime shows them, encoded: every
    /// session of the source model loads it from memory instead of the file (see [`crate::graph`]).
    pub renamed: Option<Arc<[u8]>>,
    /// The preferred EP.
    pub ep: PreferredEp,
    /// EP options (without prefix) of every EP session.
    pub ep_options: Vec<(String, String)>,
    /// EP options added to the profiled session only (QNN profiling).
    pub profiling_ep_options: Vec<(String, String)>,
    /// EP options added to every session that gives the EP's account (the profiled session, a
    /// session-only run's session, the account session), never to the timed one: QNN's op trace.
    pub trace_ep_options: Vec<(String, String)>,
    /// Session configuration entries.
    pub session_config: Vec<(String, String)>,
    /// Graph optimization level.
    pub optimization: OptimizationLevel,
    /// Intra-op threads (0 = default).
    pub intra_threads: usize,
    /// Inter-op threads, when set (an LLM folder's `session_options`).
    pub inter_threads: Option<usize>,
}

/// Decides how the requested EP attaches and registers its plugin library when one is given. An
/// EP the loaded ONNX Runtime does not contain is one error naming the runtime (`ort_lib`) and
/// the EPs it does contain.
pub fn register_ep(
    env: &Environment,
    settings: &HarnessSettings,
    library: Option<&Path>,
    ort_lib: &Path,
) -> Result<(String, Attach)> {
    let kind = settings.ep;
    let name = match (kind.ort_name(), &settings.ep_name, library) {
        (_, Some(name), Some(_)) => name.clone(),
        (None, None, _) => {
            bail!("--ep plugin needs --ep-name NAME (the EP's name) and --ep-library PATH (its plugin library)")
        }
        (None, Some(_), None) => bail!("--ep plugin needs --ep-library PATH, the plugin library to register"),
        (Some(_), Some(name), None) => {
            bail!("--ep-name {name} names a plugin EP; it needs --ep-library PATH (a built-in EP has its own name)")
        }
        (Some(known), None, _) => known.to_string(),
    };
    if settings.ep_device.is_some() && library.is_none() {
        bail!("--ep-device chooses the device of a plugin EP; it needs --ep-library PATH (a built-in EP picks its device by its own options)");
    }
    match (kind, library) {
        (EpKind::Cpu, None) => Ok((name, Attach::Cpu)),
        (EpKind::Cpu, Some(path)) => bail!(
            "--ep-library {} was given with --ep cpu; pass the EP it holds (--ep qnn, --ep plugin …)",
            path.display()
        ),
        (_, Some(path)) => {
            if !path.is_file() {
                bail!("EP plugin library {} does not exist; pass --ep-library with the EP's plugin library (e.g. libonnxruntime_providers_qnn.so)", path.display());
            }
            env.register_ep_library(name.as_str(), path)
                .map_err(|e| anyhow!("cannot register EP plugin library {}: {e}", path.display()))?;
            Ok((name, Attach::Plugin))
        }
        (_, None) => {
            let available = providers::available()?;
            if !available.contains(&name) {
                bail!(
                    "{name} is not in this ONNX Runtime ({}), which contains {}; use a runtime with it (`npugate runtime list`)",
                    ort_lib.display(),
                    available.join(", ")
                );
            }
            Ok((name, Attach::Builtin))
        }
    }
}

impl SessionPlan {
    /// Creates a session from this plan. `log_id` tags the session's log lines (`timed`,
    /// `compile`, `account`) so log readers can tell the sessions apart. `level` is the session's
    /// own log level (ONNX Runtime's, which the QNN EP also gives its backend when it sets it up);
    /// `None` logs at the environment's level, VERBOSE.
    pub fn create(&self, env: &Environment, log_id: &str, level: Option<OrtLogLevel>) -> Result<Session> {
        let mut builder = self.builder(env, log_id, self.optimization)?;
        if let Some(level) = level {
            builder = builder
                .with_log_level(log_level(level))
                .map_err(|e| anyhow!("cannot set the session's log level: {e}"))?;
        }
        let builder = self.attach_ep(env, builder, &self.ep_options)?;
        self.commit(builder, &self.model)
    }

    /// The plan of a session that gives the EP's account: the trace options added to the EP's.
    pub fn for_account(&self) -> SessionPlan {
        let mut plan = self.clone();
        plan.ep_options.extend(self.trace_ep_options.iter().cloned());
        plan
    }

    /// Creates the profiled session (log id `profiled`): profiling on into `profile_prefix`, and,
    /// when `optimized_graph` is given, the optimized graph saved there with its weights in a
    /// file beside it (`<name without extension>.weights`).
    pub fn create_profiled(
        &self,
        env: &Environment,
        profile_prefix: &Path,
        optimized_graph: Option<&Path>,
    ) -> Result<Session> {
        let mut builder = self
            .builder(env, "profiled", self.optimization)?
            .with_profiling(profile_prefix)
            .map_err(|e| anyhow!("cannot enable profiling: {e}"))?;
        if let Some(path) = optimized_graph {
            builder = save_optimized_graph(builder, path, true)?;
        }
        let mut options = self.ep_options.clone();
        options.extend(self.trace_ep_options.iter().cloned());
        options.extend(self.profiling_ep_options.iter().cloned());
        builder = self.attach_ep(env, builder, &options)?;
        self.commit(builder, &self.model)
    }

    /// The same plan with extra session configuration entries (e.g. `ep.context_enable`).
    pub fn with_session_config(&self, extra: &[(String, String)]) -> SessionPlan {
        let mut plan = self.clone();
        plan.session_config.extend(extra.iter().cloned());
        plan
    }

    /// Creates the reference session (log id `reference`): CPU EP only, graph optimizations off,
    /// profiling on, so every original node appears in the profile with its shapes.
    pub fn create_reference(&self, env: &Environment, profile_prefix: &Path) -> Result<Session> {
        let builder = self
            .builder(env, "reference", OptimizationLevel::Disable)?
            .with_profiling(profile_prefix)
            .map_err(|e| anyhow!("cannot enable profiling: {e}"))?
            // Prepacked weights vanish from a kernel's input shapes; FLOPs need them.
            .with_config_entry(DISABLE_PREPACKING_KEY, "1")
            .map_err(|e| anyhow!("{DISABLE_PREPACKING_KEY}: {e}"))?;
        let builder = with_cpu_device(env, builder)?;
        self.commit(builder, &self.source_model)
    }

    /// Saves the graph ONNX Runtime partitions (the source model after its level-1, EP-independent
    /// optimizations, at most the plan's level) to `path`: a CPU session that is created and
    /// dropped (log id `partitioned`). Only the optimizer settings of the session configuration
    /// apply. `whole`: its weights inside it (a model whose graphs another model can take, whose
    /// shapes ONNX can infer), else in a weights file beside it.
    pub fn save_partitioned_graph(&self, env: &Environment, path: &Path, whole: bool) -> Result<()> {
        let level = match self.optimization {
            OptimizationLevel::Disable => OptimizationLevel::Disable,
            _ => OptimizationLevel::Basic,
        };
        let plan = SessionPlan {
            session_config: self
                .session_config
                .iter()
                .filter(|(key, _)| key.starts_with(OPTIMIZER_CONFIG_PREFIX))
                .cloned()
                .collect(),
            ..self.clone()
        };
        let builder = plan.builder(env, "partitioned", level)?;
        let builder = save_optimized_graph(builder, path, !whole)?;
        let builder = with_cpu_device(env, builder)?;
        drop(self.commit(builder, &self.source_model)?);
        Ok(())
    }

    /// Creates the session of `model`: from memory when it is the source model and its nodes were
    /// renamed (its external data read from its folder), else from the file.
    fn commit(&self, mut builder: SessionBuilder, model: &Path) -> Result<Session> {
        let Some(bytes) = self.renamed.as_deref().filter(|_| model == self.source_model) else {
            return builder
                .commit_from_file(model)
                .map_err(|e| anyhow!("cannot create a session for model {}: {e}", model.display()));
        };
        let folder = model.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        builder = builder
            .with_config_entry(EXTERNAL_DATA_FOLDER_KEY, folder.display().to_string())
            .map_err(|e| anyhow!("{EXTERNAL_DATA_FOLDER_KEY}: {e}"))?;
        builder
            .commit_from_memory(bytes)
            .map_err(|e| anyhow!("cannot create a session for model {}: {e}", model.display()))
    }

    fn builder(&self, env: &Environment, log_id: &str, optimization: OptimizationLevel) -> Result<SessionBuilder> {
        let mut builder = Session::builder(env).map_err(|e| anyhow!("cannot create session options: {e}"))?;
        builder = builder
            .with_log_id(log_id)
            .map_err(|e| anyhow!("cannot set the session log id: {e}"))?
            .with_optimization_level(optimization_level(optimization))
            .map_err(|e| anyhow!("cannot set the optimization level: {e}"))?;
        if self.intra_threads > 0 {
            builder = builder
                .with_intra_threads(self.intra_threads)
                .map_err(|e| anyhow!("cannot set intra-op threads: {e}"))?;
        }
        if let Some(threads) = self.inter_threads {
            builder = builder.with_inter_threads(threads).map_err(|e| anyhow!("cannot set inter-op threads: {e}"))?;
        }
        builder = builder
            .with_config_entry(RECORD_ASSIGNMENT_KEY, "1")
            .map_err(|e| anyhow!("{RECORD_ASSIGNMENT_KEY}: {e}"))?;
        for (key, value) in &self.session_config {
            builder = builder
                .with_config_entry(key, value)
                .map_err(|e| anyhow!("ONNX Runtime rejected --session-config {key}={value}: {e}"))?;
        }
        Ok(builder)
    }

    /// Appends the preferred EP. A built-in EP whose registration fails is an error naming it and
    /// its options; the EP's own account is in the log (see `explain_with_backend` in main).
    fn attach_ep(
        &self,
        env: &Environment,
        builder: SessionBuilder,
        options: &[(String, String)],
    ) -> Result<SessionBuilder> {
        let name = &self.ep.name;
        match self.ep.attach {
            Attach::Cpu => with_cpu_device(env, builder),
            Attach::Builtin => {
                builder.with_execution_providers([providers::builtin(self.ep.kind, options)?]).map_err(|e| {
                    let shown: Vec<String> = options.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    anyhow!(
                        "ONNX Runtime could not attach {name} (options: {}): {e}",
                        if shown.is_empty() { "none".into() } else { shown.join(" ") }
                    )
                })
            }
            Attach::Plugin => {
                let device = plugin_device(env, name, self.ep.device)?;
                let prefixed: Vec<(String, String)> =
                    options.iter().map(|(k, v)| (format!("{name}.{k}"), v.clone())).collect();
                builder
                    .with_devices([device], Some(&prefixed))
                    .map_err(|e| anyhow!("cannot attach the {name} plugin device: {e}"))
            }
        }
    }
}

/// Chooses the one device of a plugin EP to append (see [`DeviceChoice`]). ORT on Android (and on
/// hosts with `ORT_QNN_ENABLE_CPU_BACKEND=1`) discovers only a CPU hardware device, so the QNN
/// device sits on it and the backend comes from `backend_type`/`backend_path`, never from the
/// device. An EP with no device at all, or without the required one, did not start.
pub fn plugin_device<'e>(env: &'e Environment, name: &str, choice: DeviceChoice) -> Result<Device<'e>> {
    let devices: Vec<Device<'e>> = env.devices().filter(|d| d.ep().is_ok_and(|ep| ep == name)).collect();
    if devices.is_empty() {
        let hint = if name == "QNNExecutionProvider" {
            "; on a host without a Snapdragon set ORT_QNN_ENABLE_CPU_BACKEND=1 (the QNN EP then offers a CPU-type device) \
             and choose the backend with --qnn-backend"
        } else {
            ""
        };
        return Err(DidNotStart::new(name, format!("the {name} plugin offers no device on this machine{hint}")).into());
    }
    let offered = || devices.iter().map(describe_device).collect::<Vec<_>>().join(", ");
    let index = match choice {
        DeviceChoice::Only if devices.len() > 1 => {
            bail!("the {name} plugin offers several devices ({}); choose one with --ep-device cpu|gpu|npu", offered())
        }
        DeviceChoice::Only => 0,
        DeviceChoice::Prefer(ty) => devices.iter().position(|d| d.hardware_device().ty() == ty).unwrap_or(0),
        DeviceChoice::Require(ty) => match devices.iter().position(|d| d.hardware_device().ty() == ty) {
            Some(index) => index,
            None => {
                let reason =
                    format!("--ep-device {ty:?} was asked for, but the {name} plugin offers only {}", offered());
                return Err(DidNotStart::new(name, reason).into());
            }
        },
    };
    Ok(devices.into_iter().nth(index).expect("index is within the devices"))
}

/// `QNNExecutionProvider on NPU (Qualcomm)`: what a plugin device is, for the result.
pub fn describe_device(device: &Device<'_>) -> String {
    let hardware = device.hardware_device();
    format!("{} on {:?} ({})", device.ep().unwrap_or("?"), hardware.ty(), hardware.vendor().unwrap_or("unknown vendor"))
}

/// Appends the CPU EP device explicitly. Once a plugin EP is registered, ORT's default device
/// policy may otherwise place the session on the plugin.
fn with_cpu_device(env: &Environment, builder: SessionBuilder) -> Result<SessionBuilder> {
    let cpu: Vec<_> = env.devices().filter(|d| d.ep().is_ok_and(|ep| ep == "CPUExecutionProvider")).collect();
    if cpu.is_empty() {
        return Ok(builder);
    }
    builder.with_devices(cpu, None).map_err(|e| anyhow!("cannot attach the CPU EP device: {e}"))
}

/// Makes the session save its optimized graph to `path`, with `external_weights` its weights in a
/// file beside it (`<name without extension>.weights`), so that reading the graph stays cheap;
/// without, all inside the graph (a model a session loads as it is).
fn save_optimized_graph(builder: SessionBuilder, path: &Path, external_weights: bool) -> Result<SessionBuilder> {
    fn cannot(e: impl std::fmt::Display) -> anyhow::Error {
        anyhow!("cannot save the optimized graph: {e}")
    }
    let builder = builder.with_optimized_model_path(path).map_err(cannot)?;
    if !external_weights {
        return Ok(builder);
    }
    let weights = path.with_extension("weights");
    let weights = weights.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    builder
        .with_config_entry("session.optimized_model_external_initializers_file_name", &weights)
        .map_err(cannot)?
        .with_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "0")
        .map_err(cannot)
}

/// ONNX Runtime's severity of a `--ort-log-level`.
pub fn log_level(level: OrtLogLevel) -> LogLevel {
    match level {
        OrtLogLevel::Verbose => LogLevel::Verbose,
        OrtLogLevel::Info => LogLevel::Info,
        OrtLogLevel::Warning => LogLevel::Warning,
        OrtLogLevel::Error => LogLevel::Error,
        OrtLogLevel::Fatal => LogLevel::Fatal,
    }
}

fn optimization_level(level: OptimizationLevel) -> GraphOptimizationLevel {
    match level {
        OptimizationLevel::Disable => GraphOptimizationLevel::Disable,
        OptimizationLevel::Basic => GraphOptimizationLevel::Level1,
        OptimizationLevel::Extended => GraphOptimizationLevel::Level2,
        OptimizationLevel::All => GraphOptimizationLevel::All,
    }
}

/// Reads `Session_GetEpGraphAssignmentInfo`; on failure returns an `unavailable` assignment that
/// says why instead of failing the run.
pub fn assignment(session: &Session) -> Assignment {
    match read_assignment(session) {
        Ok(subgraphs) => Assignment { source: "Session_GetEpGraphAssignmentInfo".into(), error: None, subgraphs },
        Err(e) => Assignment { source: "unavailable".into(), error: Some(format!("{e:#}")), subgraphs: Vec::new() },
    }
}

fn read_assignment(session: &Session) -> Result<Vec<AssignedSubgraph>> {
    let api = ort::api();
    let mut subgraphs: *const *const ort::sys::OrtEpAssignedSubgraph = ptr::null();
    let mut count = 0usize;
    // SAFETY: the session pointer is valid for the borrow; ORT owns the returned arrays, which live
    // as long as the session.
    unsafe {
        check((api.Session_GetEpGraphAssignmentInfo)(session.ptr(), &mut subgraphs, &mut count))?;
        let mut out = Vec::with_capacity(count);
        for i in 0..count {
            let subgraph = *subgraphs.add(i);
            let mut ep: *const c_char = ptr::null();
            check((api.EpAssignedSubgraph_GetEpName)(subgraph, &mut ep))?;
            let mut nodes: *const *const ort::sys::OrtEpAssignedNode = ptr::null();
            let mut node_count = 0usize;
            check((api.EpAssignedSubgraph_GetNodes)(subgraph, &mut nodes, &mut node_count))?;
            let mut assigned = Vec::with_capacity(node_count);
            for j in 0..node_count {
                let node = *nodes.add(j);
                let (mut name, mut op, mut domain) = (ptr::null(), ptr::null(), ptr::null());
                check((api.EpAssignedNode_GetName)(node, &mut name))?;
                check((api.EpAssignedNode_GetOperatorType)(node, &mut op))?;
                check((api.EpAssignedNode_GetDomain)(node, &mut domain))?;
                assigned.push(AssignedNode { name: text(name), op_type: text(op), domain: text(domain) });
            }
            out.push(AssignedSubgraph { ep: text(ep), nodes: assigned });
        }
        Ok(out)
    }
}

/// Converts an ORT status into a result, releasing it.
///
/// # Safety
/// `status` must be a status returned by an ORT API call (or null).
unsafe fn check(status: ort::sys::OrtStatusPtr) -> Result<()> {
    // SAFETY: forwarded from the caller.
    unsafe { ort::Error::result_from_status(status) }
        .map_err(|e| anyhow!("{e}"))
        .context("Session_GetEpGraphAssignmentInfo")
}

/// Copies a C string owned by ORT; null becomes empty.
///
/// # Safety
/// `p` must be null or a valid NUL-terminated string.
unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}
