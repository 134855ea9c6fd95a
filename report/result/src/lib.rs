//! The `RunResult`: what one harness invocation measured, written as `result.json` in its output
//! directory and read by every host stage (placement, gate, sweep, evidence).
//!
//! The schema is versioned by [`RUN_RESULT_SCHEMA`]; a reader refuses any other value with an error
//! that names the file and the version it found.
//!
//! Beside it, the data every stage exchanges and stands on no other crate for: the documents of
//! the device side (`energy`, `background`, `resources`), the latency statistics (`stats`), the
//! Snapdragon SoC table (`hexagon`), and the one report stream (`report`, with plain terminal
//! tables in `table`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub mod aihub;
pub mod background;
pub mod build;
pub mod contract;
pub mod energy;
pub mod estimate;
pub mod generation;
pub mod hexagon;
pub mod model_file;
pub mod names;
pub mod qnn_trace;
pub mod report;
pub mod resources;
pub mod stats;
pub mod table;

pub use contract::ReadError;
pub use generation::{Generation, GenerationThreads, GraphPhase, GraphRun, KvCache};
pub use model_file::ModelFile;
pub use qnn_trace::{QnnGraphTrace, QnnTrace, QnnTraceOp, TraceSource, UnsupportedNode, QNN_TRACE_KEY};
pub use resources::{DmaBufRecord, EnergyWindow, LeakCheck, MemoryRecord};

/// Schema identifier written into every `result.json`: the major version is bumped on any
/// incompatible change, the minor one when a field is added (1.1: `timings.cpu_wait`; 1.2: `aihub`).
/// Readers accept every minor version of their major one.
pub const RUN_RESULT_SCHEMA: &str = "npugate.run-result/1.2";

/// Every file and directory name npugate gives inside a result directory (and next to it), in one
/// place: the harness's own files first, then what the host adds.
pub mod files {
    /// The run result itself.
    pub const RESULT: &str = "result.json";
    /// ORT profile of the profiled pass (same EP configuration as the timed runs), gzip-compressed
    /// (ORT's raw JSON, one event per node per run: 165 MB for slanet-plus's 10 runs, 20 MB
    /// compressed).
    pub const PROFILE: &str = "profile.json.gz";
    /// [`PROFILE`] as result directories written before it was compressed hold it (still read).
    pub const PROFILE_UNCOMPRESSED: &str = "profile.json";
    /// ORT profile of the reference pass (CPU EP, graph optimizations disabled), gzip-compressed like
    /// [`PROFILE`] (20 MB plain for slanet-plus's one run of its Loop).
    pub const REFERENCE_PROFILE: &str = "reference_profile.json.gz";
    /// [`REFERENCE_PROFILE`] as result directories written before it was compressed hold it (still read).
    pub const REFERENCE_PROFILE_UNCOMPRESSED: &str = "reference_profile.json";
    /// Everything ONNX Runtime logged (VERBOSE), one line per message.
    pub const ORT_LOG: &str = "ort.log";
    /// QNN's own per-op profiling CSV, when QNN profiling was on.
    pub const QNN_PROFILE: &str = "qnn_profile.csv";
    /// The QNN EP's framework op trace (which ONNX nodes became which QNN ops), as the EP wrote it.
    pub const QNN_OP_TRACE: &str = "qnn_op_trace.json";
    /// The battery gauge's samples around a device run measured for energy (written on the device).
    pub const GAUGE_SAMPLES: &str = "gauge_samples.txt";
    /// Energy per inference from the gauge's samples (`npugate.energy/1`), written by the host.
    pub const ENERGY: &str = "energy.json";
    /// Saved model outputs (`outputs/<name>.npy`), with `--check-outputs`.
    pub const OUTPUTS_DIR: &str = "outputs";
    /// The verdict (`npugate.verdict/1`), written by the host.
    pub const VERDICT: &str = "verdict.json";
    /// The self-contained HTML report, written by the host.
    pub const REPORT_HTML: &str = "report.html";
    /// The outputs compared with the fp32 reference (`npugate.outputs/1`).
    pub const OUTPUTS: &str = "outputs.json";
    /// A placement report saved on its own (`npugate.placement/1`), e.g. by preflight.
    pub const PLACEMENT: &str = "placement.json";
    /// How a run reached a device and came back (`npugate.device-run/1`).
    pub const DEVICE_RUN: &str = "device_run.json";
    /// The device's temperatures and clocks around a run (`npugate.device-state/1`).
    pub const DEVICE_STATE: &str = "device_state.json";
    /// The graph ONNX Runtime partitions (the model after its level-1 optimizations, weights
    /// inside), kept by a harness run with `--keep-partitioned-graph`.
    pub const PARTITIONED_GRAPH: &str = "partitioned_graph.onnx";
    /// The harness's standard output, as captured by the host.
    pub const HARNESS_STDOUT: &str = "harness.stdout";
    /// The harness's standard error, as captured by the host.
    pub const HARNESS_STDERR: &str = "harness.stderr";
    /// A sweep cell's completion marker (`npugate.sweep-cell/1`).
    pub const CELL: &str = "cell.json";
    /// The output-check reference run: inside the result dir (local) or next to the device dirs.
    pub const OUTPUT_REFERENCE_DIR: &str = "output-reference";
    /// The rack summary next to the per-device result dirs (`npugate.rack/1`).
    pub const RACK: &str = "rack.json";
    /// A comparison of two models (`npugate.compare/1`), written by `npugate compare`.
    pub const COMPARE: &str = "compare.json";
    /// A sweep's summary in the sweep dir (`npugate.sweep/1`).
    pub const SWEEP: &str = "sweep.json";
    /// The per-layer comparison of `npugate numerics` (`npugate.numerics/1`).
    pub const NUMERICS: &str = "numerics.json";
    /// Its HTML page.
    pub const NUMERICS_HTML: &str = "numerics.html";
    /// The instrumented models of `npugate numerics` (`model/`, `reference/`).
    pub const INSTRUMENTED_DIR: &str = "instrumented";
    /// The fp32 reference run of `npugate numerics`.
    pub const NUMERICS_REFERENCE_DIR: &str = "reference";
}

/// Everything one harness invocation measured and the context needed to judge it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunResult {
    /// Always [`RUN_RESULT_SCHEMA`].
    pub schema: String,
    /// `complete` only when every requested step finished; otherwise what was measured is kept
    /// and `error` says what stopped the run.
    pub status: RunStatus,
    /// Why the run is incomplete (absent when complete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The harness binary that wrote this result.
    pub tool: ToolInfo,
    /// The model file and its graph inputs/outputs.
    pub model: ModelInfo,
    /// The ONNX Runtime library set that ran the model.
    pub runtime: RuntimeIdentity,
    /// Execution provider request: what was asked for, how it was registered, with which options.
    pub execution: ExecutionConfig,
    /// Run-count and input settings.
    pub settings: RunSettings,
    /// The concrete inputs fed to the model.
    pub inputs: Vec<InputDescription>,
    /// Wall-clock measurements.
    pub timings: Timings,
    /// HdrHistogram summary of the timed runs (nanoseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<HistogramSummary>,
    /// Node→EP assignment from `Session_GetEpGraphAssignmentInfo` (ORT ≥ 1.24).
    pub assignment: Assignment,
    /// Health of the accelerator EP as read from the log; absent for CPU runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendHealth>,
    /// Why ONNX Runtime refused to create the session, when it did (written by `--session-only`
    /// runs): the EP rejected the model as configured (e.g. the QNN HTP backend could not compile
    /// it for the chosen SoC). Nothing was run; `assignment` is unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_error: Option<String>,
    /// Why the one inference of a `--session-only --execute-once` run failed: the session was
    /// created (the EP validated and compiled the graph), running it was not possible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inference_error: Option<String>,
    /// Output files in the result directory, relative to it.
    pub artifacts: Artifacts,
    /// Which kernels of the profiled session stand for which original nodes, where ONNX Runtime's
    /// graph optimizations fused, renamed or folded them (CPU-EP sessions; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fusions: Option<Fusions>,
    /// An LLM model folder's generation benchmark: TTFT, decode steps, tokens/s, KV cache and
    /// each graph's placement (absent for a single `.onnx`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<Generation>,
    /// The model's own nodes as ONNX Runtime names them, and the graph ONNX Runtime partitions set
    /// against them: what every share is counted in (absent in results of older harnesses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<ModelGraph>,
    /// The QNN EP's trace of the account session: which ONNX nodes each QNN op came from, which
    /// nodes it did not take and why (QNN EP runs with onnxruntime-qnn ≥ 2.7; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qnn_trace: Option<QnnTrace>,
    /// The memory the harness process held (absent in results of older harnesses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryRecord>,
    /// The inferences the battery gauge was read over (`--energy-window` on a device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_window: Option<EnergyWindow>,
    /// A run on a Qualcomm AI Hub hosted device: where its numbers came from (the service, the
    /// job and its link, the device, AI Hub's figures, how its layers matched the model's nodes,
    /// what AI Hub cannot tell). Absent for every other target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aihub: Option<aihub::AiHubRecord>,
    /// The machine the harness ran on.
    pub fingerprint: SystemFingerprint,
    /// Non-fatal observations, each a full sentence.
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// Whether every requested step of a run finished.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// All steps finished; the result may be judged.
    Complete,
    /// A step failed; fields hold what was measured before it.
    Incomplete,
}

/// Name and version of the program that wrote a result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolInfo {
    /// Program name, e.g. `npugate-harness`.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Target triple it was built for.
    pub target: String,
    /// The git commit it was built from (empty in results of harnesses older than the field).
    #[serde(default)]
    pub commit: String,
}

/// Identity and interface of the model file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModelInfo {
    /// Path as given to the harness.
    pub path: String,
    /// sha256 of the `.onnx` file, lowercase hex.
    pub sha256: String,
    /// Size of the `.onnx` file in bytes.
    pub bytes: u64,
    /// The model's identity: one digest over the `.onnx` and every file it refers to (see
    /// [`digest::model_digest`]); the `.onnx`'s sha256 when it refers to none. Baselines,
    /// history, sweeps and evidence key on it. Results written before it existed read as their
    /// `sha256`.
    #[serde(default)]
    pub digest: String,
    /// The files the model refers to (external data, EPContext context binaries), relative to
    /// its folder, each with its size and sha256.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<ModelFile>,
    /// Graph inputs as declared by the model (dynamic dims as `null` with their symbolic name).
    pub inputs: Vec<TensorSignature>,
    /// Graph outputs as declared by the model.
    pub outputs: Vec<TensorSignature>,
    /// The model as the user gave it, when this one is its copy with the dynamic input dims
    /// fixed by `--shape` (then `sha256` is the fixed copy's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_from: Option<FixedFrom>,
}

/// The original of a model whose input shapes were fixed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FixedFrom {
    /// sha256 of the model as given.
    pub sha256: String,
    /// The `--shape` values that fixed it (`name=1x3x640x640`).
    pub shapes: Vec<String>,
}

/// A graph input or output as the model declares it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TensorSignature {
    /// Tensor name.
    pub name: String,
    /// ONNX element type in lowercase (`float32`, `uint8`, …), or the non-tensor kind.
    pub element_type: String,
    /// Dimensions; `None` for a dynamic dimension.
    pub shape: Vec<Option<i64>>,
    /// Symbolic names of the dimensions (empty string when fixed or unnamed).
    pub dim_names: Vec<String>,
}

/// The native libraries that executed the model.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RuntimeIdentity {
    /// Name of the runtime (library set) when launched through `npugate`, else `null`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `OrtGetApiBase()->GetVersionString()`.
    pub ort_version: String,
    /// `GetBuildInfoString()`.
    pub ort_build_info: String,
    /// Every library loaded on purpose: ORT core, EP plugin, QNN backend libraries.
    pub libraries: Vec<LibraryIdentity>,
}

/// One native library and its content hash.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LibraryIdentity {
    /// What the library is for: `ort`, `ep_plugin`, `ep_provider` (a provider library ORT loads beside itself), `qnn_backend`.
    pub role: String,
    /// Path as loaded.
    pub path: String,
    /// sha256 of the file, lowercase hex.
    pub sha256: String,
    /// File size in bytes.
    pub bytes: u64,
}

/// How the execution provider was requested and attached.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExecutionConfig {
    /// EP requested on the command line (`cpu`, `qnn`).
    pub requested_ep: String,
    /// The ORT name of the EP the model should run on (`CPUExecutionProvider`, `QNNExecutionProvider`).
    pub preferred_ep: String,
    /// How the EP was attached: `cpu`, `builtin` (compiled into libonnxruntime) or `plugin` (EP library).
    pub attach: String,
    /// EP options passed (without the `<EP>.` prefix).
    pub ep_options: BTreeMap<String, String>,
    /// Session configuration entries set.
    pub session_config: BTreeMap<String, String>,
    /// Graph optimization level of the timed session (`disable`, `basic`, `extended`, `all`).
    pub optimization_level: String,
    /// Intra-op threads (0 = ORT default).
    pub intra_op_threads: usize,
    /// EP options added to the sessions that give the EP's account (the profiled pass, a
    /// session-only run's session), never to the timed session: QNN profiling and the QNN EP's op
    /// trace.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profiled_pass_ep_options: BTreeMap<String, String>,
    /// The EP device a plugin EP was appended on, e.g. `QNNExecutionProvider on CPU (ARM)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ep_device: Option<String>,
    /// The EP context model (`…_ctx.onnx`) the timed session loaded, when `--context-cache` was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_model: Option<String>,
    /// Set when the accelerator was an emulator, not hardware: what ran where (e.g. Qualcomm's HTP
    /// emulator, the x86_64 host build of the HTP backend). Its outputs are real; its speed says
    /// nothing about a device, so the gate leaves latency rules unjudged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated: Option<String>,
    /// How the timed session logged (absent in results of harnesses before it had its own level,
    /// whose timed session logged at VERBOSE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_log: Option<TimedLog>,
    /// How the session of a `--session-only` run on an accelerator EP logged (absent in other runs
    /// and in results of harnesses before it, whose session-only sessions logged at VERBOSE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_log: Option<SessionLog>,
}

/// A session-only run's logging: its session is created at `--ort-log-level` first (the QNN HTP
/// backend then compiles without writing its VERBOSE log), and created again at VERBOSE only when
/// the EP's account (its reasons) is needed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SessionLog {
    /// The level the session was first created at (`verbose`, `info`, `warning`, `error`, `fatal`).
    pub level: String,
    /// Why the session was dropped and created again at VERBOSE for the EP's account (it was
    /// refused, or nodes were left off the EP); `None`: the first session was kept, its assignment
    /// being the whole account.
    pub verbose_rerun: Option<String>,
}

/// The timed session's logging: an app logs at WARNING or less, and every line logged inside the
/// timed loop is work (formatting, a file write) the app would not do.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TimedLog {
    /// ONNX Runtime's log level of the timed session, which the EP gives its backend
    /// (`verbose`, `info`, `warning`, `error`, `fatal`).
    pub level: String,
    /// Lines written to `ort.log` from the first inference to the last timed run (first, warmup
    /// and timed runs; by every logger of the process).
    pub lines_during_runs: u64,
}

/// Run counts and input generation settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunSettings {
    /// Warmup runs (discarded).
    pub warmup: u32,
    /// Timed runs.
    pub runs: u32,
    /// Profiled runs in the separate profiling session (0 = no ORT profile).
    pub profile_runs: u32,
    /// Whether the reference pass (CPU EP, optimizations off) was requested.
    pub reference_pass: bool,
    /// Seed of the random input generator.
    pub seed: u64,
}

/// One concrete input fed to the model.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InputDescription {
    /// Input name.
    pub name: String,
    /// ONNX element type in lowercase.
    pub element_type: String,
    /// Concrete shape used.
    pub shape: Vec<i64>,
    /// `random` (seeded) or `npy:<path>`.
    pub source: String,
    /// sha256 of the raw little-endian tensor bytes, so runs on different devices can prove equal inputs.
    pub sha256: String,
}

/// Wall-clock measurements in nanoseconds (monotonic clock).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Timings {
    /// Loading the ORT library and creating the environment.
    pub ort_init_ns: u64,
    /// Registering the EP plugin library (0 when none).
    pub ep_register_ns: u64,
    /// Creating the timed session (includes EP graph compilation).
    pub session_create_ns: u64,
    /// The first inference after session creation (cold).
    pub first_inference_ns: u64,
    /// Every timed run, in run order. At least `settings.runs` entries when complete (more when
    /// runs were taken to replace contended ones: `extension`).
    pub latencies_ns: Vec<u64>,
    /// Wall time of the whole timed loop (for per-run overhead).
    pub loop_wall_ns: u64,
    /// Wall time of the profiled pass (session creation + profiled runs), 0 when skipped.
    pub profiled_pass_ns: u64,
    /// Wall time of the reference pass, 0 when skipped.
    pub reference_pass_ns: u64,
    /// Cold session creation with an EP context cache: compiling the graph and writing the
    /// context binary (`None` without `--context-cache` or when the cache already existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_cold_create_ns: Option<u64>,
    /// Warm session creation from the EP context binary (`None` without `--context-cache`); the
    /// timed session is this one, so it equals `session_create_ns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_warm_create_ns: Option<u64>,
    /// How long the harness's threads waited for a CPU during each timed run (absent in results
    /// of harnesses before schema 1.1, and in LLM folder runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_wait: Option<CpuWait>,
    /// Timed runs taken beyond `settings.runs` to replace the runs that waited for a CPU (absent
    /// when none were needed or the harness predates it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<RunExtension>,
}

/// Why the harness timed more runs than asked: runs waited for a CPU long enough to explain why
/// they were slow (`crate::stats::Contention`), so it kept timing to replace them, until enough
/// were clean or its budget was spent.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunExtension {
    /// Runs asked for (`--runs`): the clean runs it measures until.
    pub requested: u32,
    /// Runs it may take at most (`--max-runs`, default 4 × `--runs`).
    pub budget: u32,
    /// Runs it took.
    pub taken: u32,
    /// Runs set aside among the first `requested`, which started the extension.
    pub set_aside_at_requested: usize,
    /// Clean runs at the end; below `requested` only when the budget was spent.
    pub clean: usize,
}

impl RunExtension {
    /// `timed 52 runs (budget 120) to replace 14 of the first 30 that waited for a CPU: 30 clean`.
    pub fn sentence(&self) -> String {
        let end = if self.clean >= self.requested as usize {
            format!("{} clean", self.clean)
        } else {
            format!("only {} clean when the budget was spent (--max-runs)", self.clean)
        };
        format!(
            "timed {} runs (budget {}) to replace {} of the first {} that waited for a CPU: {end}",
            self.taken, self.budget, self.set_aside_at_requested, self.requested
        )
    }
}

/// The CPU contention of each timed run, read by the harness around it — outside the two clock
/// reads — from the kernel's per-thread counters: what the machine, not the model, added to a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CpuWait {
    /// Threads of the harness process whose counters were read: every thread alive when the
    /// timed loop started (ONNX Runtime's intra-op pool among them).
    pub threads: usize,
    /// Nanoseconds those threads were runnable but waited for a CPU during each timed run, summed
    /// over the threads: what their counters prove (`crate::stats::attributed_waits`: the state
    /// of a thread runnable through the run, and the run-queue delay of `schedstat` placed on the
    /// runs it must have overlapped). Before that definition, the delay counted between the
    /// readings around the run.
    pub run_queue_delay_ns: PerRun,
    /// Involuntary context switches (preemptions) of those threads per timed run: the sum of
    /// their `nonvoluntary_ctxt_switches` in `/proc/self/task/*/status`.
    pub involuntary_switches: PerRun,
}

/// A counter read around every timed run, or why it could not be.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum PerRun {
    /// One value per timed run, in run order (parallel to `timings.latencies_ns`).
    Measured(Vec<u64>),
    /// Why the kernel or platform gives no such counter (e.g. a kernel built without
    /// `CONFIG_SCHED_INFO` has no `schedstat`; Windows has neither).
    Unavailable(String),
}

impl PerRun {
    /// The values, when measured.
    pub fn measured(&self) -> Option<&[u64]> {
        match self {
            PerRun::Measured(values) => Some(values),
            PerRun::Unavailable(_) => None,
        }
    }
}

impl Timings {
    /// The run-queue delay of every timed run, when the harness measured one per run.
    pub fn run_queue_delays(&self) -> Option<&[u64]> {
        self.cpu_wait
            .as_ref()
            .and_then(|wait| wait.run_queue_delay_ns.measured())
            .filter(|delays| delays.len() == self.latencies_ns.len())
    }

    /// Which timed runs a busy CPU slowed ([`crate::stats::Contention`]), when the run-queue
    /// delay of every run was measured.
    pub fn contention(&self) -> Option<crate::stats::Contention> {
        self.run_queue_delays().and_then(|delays| crate::stats::Contention::of(&self.latencies_ns, delays))
    }

    /// The timed runs not set aside as contended, in run order: what the latency rules and a
    /// baseline read (every timed run without a per-run wait record).
    pub fn clean_latencies(&self) -> Vec<u64> {
        match self.contention() {
            Some(contention) => contention.clean_latencies(&self.latencies_ns),
            None => self.latencies_ns.clone(),
        }
    }
}

/// HdrHistogram summary of the timed runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HistogramSummary {
    /// Number of recorded runs.
    pub count: u64,
    /// Smallest latency (ns).
    pub min_ns: u64,
    /// Largest latency (ns).
    pub max_ns: u64,
    /// Mean latency (ns).
    pub mean_ns: f64,
    /// Standard deviation (ns).
    pub stdev_ns: f64,
    /// Percentiles by HdrHistogram's `value_at_quantile` (ns): keys `p50`, `p90`, `p95`, `p99`, `p999`.
    pub percentiles_ns: BTreeMap<String, u64>,
    /// Significant figures the histogram kept.
    pub significant_figures: u8,
}

/// Node→EP assignment as ONNX Runtime reports it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Assignment {
    /// Where the assignment came from: `Session_GetEpGraphAssignmentInfo`, or `unavailable`.
    pub source: String,
    /// Why it is unavailable, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// One entry per EP subgraph, in ORT's order.
    pub subgraphs: Vec<AssignedSubgraph>,
}

/// One subgraph assigned to one EP.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AssignedSubgraph {
    /// EP name, e.g. `QNNExecutionProvider`.
    pub ep: String,
    /// Original (pre-fusion) nodes in it.
    pub nodes: Vec<AssignedNode>,
}

/// A node as listed in an assigned subgraph.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AssignedNode {
    /// Node name.
    pub name: String,
    /// Operator type.
    pub op_type: String,
    /// Operator domain (empty for the default ONNX domain).
    pub domain: String,
}

/// The optimized graph of the profiled session set against the model: groups of kernels and the
/// original nodes they replaced, cut at the tensors both graphs share.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Fusions {
    /// Every group where kernels and original nodes differ (a node that kept its name and its
    /// neighbours is no group).
    pub groups: Vec<FusionGroup>,
}

/// Original nodes and the kernels that do their work after optimization. No kernels: the nodes
/// were folded away (constant folding, eliminated no-ops) and cost nothing per run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FusionGroup {
    /// Kernel (optimized node) names, as the profile names them.
    pub kernels: Vec<String>,
    /// Original node names, as the assignment names them.
    pub nodes: Vec<String>,
}

/// The model's own nodes and how ONNX Runtime regroups them before it partitions the graph: the
/// unit npugate counts nodes and FLOPs in, whatever ONNX Runtime or an EP fused.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ModelGraph {
    /// Every node ONNX Runtime loads (`Constant` nodes become initializers at load and are not
    /// listed): the main graph's and, flagged, those of subgraphs (`If`/`Loop`/`Scan` bodies).
    pub nodes: Vec<GraphNode>,
    /// How many of them had no name and are named `<op_type>_<index>`, as ONNX Runtime shows them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub named: usize,
    /// The graph ONNX Runtime partitions among the EPs — the model after its load-time, EP-independent
    /// optimizations (level 1: MatMul+Add → Gemm, GELU and LayerNorm fusion, constant folding, QDQ
    /// propagation, …), whose nodes `Session_GetEpGraphAssignmentInfo` lists — set against the model:
    /// each group's `kernels` are nodes of that graph (as the assignment names them) and `nodes`
    /// the model nodes they stand for. A node that kept its name and neighbours is no group; a
    /// group without kernels was folded away at load. An EP's node that stands for model nodes
    /// (an `EPContext` node of a compiled model) is one more group. `None` when ONNX Runtime's CPU
    /// EP could not optimize the model (see the warnings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitioned: Option<Fusions>,
    /// Nodes of the model or of the partitioned graph (ONNX Runtime inserts some) that quantize a
    /// graph input or dequantize into a graph output: the QNN EP leaves them to the CPU by design.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io_quantization: Vec<String>,
    /// For a compiled model (`EPContext` nodes): the nodes above are its source model's, and this
    /// says how each `EPContext` node was given the source nodes it replaced (see [`CompiledGraph`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiled: Option<CompiledGraph>,
}

/// Metadata key (`metadata_props`) under which `npugate compile` records, as JSON, which source
/// nodes each `EPContext` node of the compiled model replaced (`[EpContextCover]`).
pub const EP_CONTEXT_NODES_KEY: &str = "npugate.compiled_for.ep_context_nodes";

/// One `EPContext` node of a compiled model and the nodes of the source model it stands for.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct EpContextCover {
    /// Name of the `EPContext` node in the compiled model.
    pub ep_context: String,
    /// Names of the source model's nodes it replaced.
    pub source_nodes: Vec<String>,
}

/// A compiled model set against its source model: where its `EPContext` nodes' source nodes (and
/// so their FLOPs) came from.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CompiledGraph {
    /// How the `EPContext` nodes were attributed.
    pub attribution: Attribution,
    /// The source model whose nodes the graph lists (as the harness was given it), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_model: Option<String>,
    /// Its sha256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_sha256: Option<String>,
    /// Each `EPContext` node and the source nodes it stands for (empty when unattributed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ep_context_nodes: Vec<EpContextCover>,
}

/// How a compiled model's `EPContext` nodes were given the source nodes they replaced.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Attribution {
    /// From the compile's own record (`npugate compile` wrote [`EP_CONTEXT_NODES_KEY`]): the
    /// nodes of each QNN partition the compile session made, completed by the source nodes
    /// between the `EPContext` node's input and output tensors.
    CompileRecord,
    /// From the source model's graph: the source nodes between each `EPContext` node's input and
    /// output tensors (a model compiled elsewhere, e.g. by ONNX Runtime's `ep.context_enable`).
    SourceModel,
    /// No source model: each `EPContext` node counts as one node of unknown FLOPs.
    #[default]
    Unattributed,
}

impl Attribution {
    /// How the terminal report says it.
    pub fn describe(self) -> &'static str {
        match self {
            Attribution::CompileRecord => {
                "the compile record (the source nodes each EPContext node replaced, written by npugate compile)"
            }
            Attribution::SourceModel => {
                "the source model's graph (the source nodes between each EPContext node's inputs and outputs)"
            }
            Attribution::Unattributed => {
                "nothing: no source model, so each EPContext node is one node of unknown FLOPs (pass --reference-model)"
            }
        }
    }
}

/// One node of the model.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GraphNode {
    /// Its name, or `<op_type>_<index>` when it has none (as ONNX Runtime shows it).
    pub name: String,
    /// Operator type.
    pub op_type: String,
    /// Operator domain (empty for the default ONNX domain).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub domain: String,
    /// True for a node inside a subgraph (an `If` branch, a `Loop` body): it runs only when its
    /// branch is taken.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub subgraph: bool,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What the log says about the accelerator: did it start (its device present, its backend up)?
/// An accelerator that started and rejected nodes — even every node — started: the rejections are
/// a placement verdict, not a dead backend.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BackendHealth {
    /// True when the accelerator started.
    pub started: bool,
    /// The log lines that decided it (e.g. `QNN SetupBackend failed …`).
    pub evidence: Vec<String>,
    /// One-line reason when it did not start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What the QNN HTP backend reported about the power configuration it set up for the session
    /// (absent for other EPs and backends, and when the log holds no such record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub htp_power: Option<HtpPowerReport>,
}

/// The HTP power configuration of a session, as the QNN EP and the backend logged it when the
/// session was set up: what the EP asked for and whether the backend applied it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HtpPowerReport {
    /// The performance mode the EP set (`burst`, …), or kept when it equalled the backend's
    /// (`default`: nothing to set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance_mode: Option<String>,
    /// RPC polling time the EP set, µs (`burst` sets 9999).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_polling_time_us: Option<u64>,
    /// RPC control latency the EP set, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_control_latency_us: Option<u64>,
    /// The backend's own account of the settings it set (DCVS, power mode, voltage corners, …), in log order.
    pub backend_settings: Vec<String>,
    /// Status the backend's `setPowerConfig` returned (`0x0` = success), when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// True when the backend set the configuration and said nothing against it.
    pub applied: bool,
    /// Why it was not applied, in the backend's or the EP's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_applied: Option<String>,
}

/// Files written next to `result.json` (paths relative to the result directory).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Artifacts {
    /// ORT profile of the profiled pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// ORT profile of the reference pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_profile: Option<String>,
    /// The captured ORT log.
    pub ort_log: String,
    /// QNN profiling CSV.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qnn_profile: Option<String>,
    /// The QNN EP's framework op trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qnn_op_trace: Option<String>,
    /// Saved model outputs (for cross-device comparison), when requested.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<String>,
}

/// The machine a run happened on. Absent sources are listed in `absent`, never fatal.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SystemFingerprint {
    /// Host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// CPU brand string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    /// Logical CPU count.
    pub logical_cores: usize,
    /// Physical core count, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_cores: Option<usize>,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// OS name (`Android`, `Debian GNU/Linux`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_name: Option<String>,
    /// OS version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_version: Option<String>,
    /// Kernel version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// CPU architecture (`x86_64`, `aarch64`).
    pub arch: String,
    /// Android system properties that identify the device (`ro.soc.model`, …), when `getprop` exists.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub android_properties: BTreeMap<String, String>,
    /// `/sys/devices/soc0/*` values on Linux boards.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub soc: BTreeMap<String, String>,
    /// Sources that could not be read, each with the reason.
    #[serde(default)]
    pub absent: Vec<String>,
}

/// Content hashing shared by every stage (models, libraries, bundles).
pub mod digest {
    use std::io::Read;
    use std::path::Path;

    use sha2::{Digest, Sha256};

    /// sha256 (lowercase hex) and size of a file, read in 1 MiB chunks.
    pub fn sha256_file(path: &Path) -> std::io::Result<(String, u64)> {
        let mut file = std::fs::File::open(path)?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 1 << 20];
        let mut bytes = 0u64;
        loop {
            let n = file.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
            bytes += n as u64;
        }
        Ok((format!("{:x}", hasher.finalize()), bytes))
    }

    /// A model's identity from its `.onnx` (sha256, size) and the files it refers to: the
    /// `.onnx`'s sha256 when there are none (so a one-file model keeps the identity it always
    /// had), else the sha256 of a manifest listing the `.onnx` and each file (name, size, sha256)
    /// sorted by name. Changing any byte of any file changes it.
    pub fn model_digest(onnx_sha256: &str, onnx_bytes: u64, files: &[crate::ModelFile]) -> String {
        if files.is_empty() {
            return onnx_sha256.to_string();
        }
        let mut sorted: Vec<&crate::ModelFile> = files.iter().collect();
        sorted.sort();
        let mut hasher = Sha256::new();
        hasher.update(format!("npugate.model/1\n.onnx\t{onnx_bytes}\t{onnx_sha256}\n"));
        for file in sorted {
            hasher.update(format!("{}\t{}\t{}\n", file.name, file.bytes, file.sha256));
        }
        format!("{:x}", hasher.finalize())
    }
}

impl contract::Document for RunResult {
    const SCHEMA: contract::Schema = contract::Schema::new(RUN_RESULT_SCHEMA);
}

impl RunResult {
    /// Reads and validates `result.json` from a result directory or a direct file path.
    pub fn read(path: &Path) -> Result<RunResult, ReadError> {
        let names_a_file = path.extension().is_some_and(|e| e == "json") && !path.is_dir();
        let file = if names_a_file { path.to_path_buf() } else { path.join(files::RESULT) };
        let mut result: RunResult = contract::read(&file)?;
        if result.model.digest.is_empty() {
            result.model.digest = digest::model_digest(&result.model.sha256, result.model.bytes, &result.model.files);
        }
        Ok(result)
    }

    /// Writes `result.json` into `dir` atomically.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        contract::write_json(&dir.join(files::RESULT), self)
    }

    /// Total number of nodes across the assignment's subgraphs.
    pub fn assigned_node_count(&self) -> usize {
        self.assignment.subgraphs.iter().map(|s| s.nodes.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_file_parses_back_and_bad_ones_are_refused() {
        let file = ModelFile { name: "w=1.bin".into(), sha256: "a".repeat(64), bytes: 12 };
        assert_eq!(file.to_string().parse::<ModelFile>().unwrap(), file);
        for bad in ["w.bin", "w.bin=abc:1", &format!("={}:1", "a".repeat(64)), &format!("w={}:x", "a".repeat(64))] {
            assert!(bad.parse::<ModelFile>().unwrap_err().contains("NAME=SHA256:BYTES"), "{bad}");
        }
    }

    #[test]
    fn the_digest_of_a_one_file_model_is_its_sha256_and_any_file_changes_it() {
        let onnx = "1".repeat(64);
        assert_eq!(digest::model_digest(&onnx, 10, &[]), onnx);
        let weights = ModelFile { name: "w.bin".into(), sha256: "2".repeat(64), bytes: 4 };
        let with = digest::model_digest(&onnx, 10, std::slice::from_ref(&weights));
        assert_ne!(with, onnx);
        let changed = ModelFile { sha256: "3".repeat(64), ..weights.clone() };
        assert_ne!(digest::model_digest(&onnx, 10, &[changed]), with);
        let renamed = ModelFile { name: "v.bin".into(), ..weights.clone() };
        assert_ne!(digest::model_digest(&onnx, 10, &[renamed]), with);
        let other = ModelFile { name: "a.bin".into(), ..weights.clone() };
        assert_eq!(
            digest::model_digest(&onnx, 10, &[weights.clone(), other.clone()]),
            digest::model_digest(&onnx, 10, &[other, weights]),
            "order does not matter"
        );
    }

    #[test]
    fn rejects_other_schema_naming_file() {
        let dir = std::env::temp_dir().join(format!("npugate-result-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(files::RESULT), r#"{"schema":"npugate.run-result/99"}"#).unwrap();
        let err = RunResult::read(&dir).unwrap_err().to_string();
        assert!(err.contains("result.json"), "{err}");
        assert!(err.contains("run-result/99"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
