//! The placement report: the typed, versioned answer to "where did the model run".

use npugate_result::contract::{Document, Schema, EXIT_FAIL, EXIT_PASS};
use serde::{Deserialize, Serialize};

/// Schema identifier of a serialized [`PlacementReport`].
pub const PLACEMENT_SCHEMA: &str = "npugate.placement/1";

/// Where one run's model executed: per EP nodes/FLOPs/time, partitions, boundaries and fallbacks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlacementReport {
    /// Always [`PLACEMENT_SCHEMA`].
    pub schema: String,
    /// sha256 of the model the report describes.
    pub model_sha256: String,
    /// The EP the model is meant to run on (`QNNExecutionProvider`; `CPUExecutionProvider` for CPU runs).
    pub preferred_ep: String,
    /// Set when the placement is a prediction, e.g. `predicted: HTP backend validation not run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<String>,
    /// For a compiled model (`EPContext` nodes): how its `EPContext` nodes were given the source
    /// nodes they replaced (`compile_record` | `source_model` | `unattributed`) and from which
    /// source model (`result.json` `graph.compiled`, without the per-node list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiled: Option<CompiledAttribution>,
    /// How many profiled runs the times are computed from.
    pub runs_profiled: usize,
    /// Whole-model totals.
    pub totals: Totals,
    /// One entry per EP that ran at least one node, largest FLOP share first.
    pub per_ep: Vec<EpShare>,
    /// Share of FLOPs on `preferred_ep`, in percent (the number the `npu_flops_pct` gate rule reads).
    pub preferred_flops_pct: f64,
    /// Share of nodes on `preferred_ep`, in percent.
    pub preferred_nodes_pct: f64,
    /// Share of measured kernel time on `preferred_ep`, in percent (`None` without a profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_time_pct: Option<f64>,
    /// Fused partitions of compiling EPs (one per fused node).
    pub partitions: Vec<Partition>,
    /// CPU↔accelerator switches in execution order.
    pub boundaries: Boundaries,
    /// Every node not on `preferred_ep`, most expensive first (expected I/O quantization included, marked).
    pub fallback: Vec<FallbackNode>,
    /// The unexpected fallback nodes grouped by the EP's reason, most nodes first: what the EP
    /// rejected and why ("5 nodes: Cannot get shape → …").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejections: Vec<RejectionCause>,
    /// Every original node with its placement and cost.
    pub nodes: Vec<NodePlacement>,
    /// The QNN ops as a whole (absent when the run has none to list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qnn_ops: Option<QnnOpsSummary>,
    /// An LLM model folder: each graph in each phase it runs in (the nodes, FLOPs and fallbacks
    /// above are the whole model's, every graph weighted by its runs per generation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphs: Vec<GraphPlacement>,
    /// Named warnings: `FLOPs unknown for <op>`, nodes that could not be joined, truncated profiles, …
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// How a compiled model's `EPContext` nodes were attributed, in the placement report.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CompiledAttribution {
    /// How.
    pub attribution: npugate_result::Attribution,
    /// The source model whose nodes are counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_model: Option<String>,
    /// Its sha256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_sha256: Option<String>,
}

impl Document for PlacementReport {
    const SCHEMA: Schema = Schema::new(PLACEMENT_SCHEMA);
}

impl PlacementReport {
    /// Nodes that fall back against the model's wishes (not I/O quantization by design).
    pub fn unexpected_fallbacks(&self) -> impl Iterator<Item = &FallbackNode> {
        self.fallback.iter().filter(|f| !f.expected)
    }

    /// A preflight's exit code from this placement: 1 when a node falls back against the model's
    /// wishes, 0 otherwise.
    pub fn preflight_exit_code(&self) -> u8 {
        match self.unexpected_fallbacks().next() {
            Some(_) => EXIT_FAIL,
            None => EXIT_PASS,
        }
    }
}

/// One graph of an LLM model folder in one phase.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GraphPlacement {
    /// The graph's id (`decoder`, `prompt-processor`, …).
    pub graph: String,
    /// Its file in the folder.
    pub file: String,
    /// `prompt` or `token`.
    pub phase: String,
    /// Runs per generation in this phase.
    pub runs: u32,
    /// FLOPs of one run, the mean over the phase's runs: a decode step's attention grows with its
    /// past, so `runs × flops_per_run` is the phase's sum over the steps of a generation (from the
    /// reference pass's first and last step, exact for FLOPs linear in the past).
    pub flops_per_run: u64,
    /// Its nodes.
    pub nodes: usize,
    /// Share of its FLOPs on the preferred EP, percent.
    pub preferred_flops_pct: f64,
    /// Share of its nodes on the preferred EP, percent.
    pub preferred_nodes_pct: f64,
    /// Its nodes off the preferred EP (expected graph-I/O quantization left out).
    pub fallback_nodes: usize,
}

/// Whole-model totals. Nodes and FLOPs are the model's own: whatever ONNX Runtime or an EP fused
/// is counted in the model nodes it stands for.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Totals {
    /// Model nodes placed on an EP: the base of every node share.
    pub nodes: usize,
    /// FLOPs of the placed nodes whose FLOPs are known (FLOPs = 2 × multiply-accumulates): the
    /// base of every FLOP share.
    pub flops: u64,
    /// Placed nodes whose FLOPs could not be computed.
    pub flops_unknown_nodes: usize,
    /// Every node of the model ONNX Runtime loads (placed or not); absent in reports of results
    /// without the model's graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_nodes: Option<usize>,
    /// Known FLOPs of every model node that runs: the placed ones and the unattributed ones.
    #[serde(default)]
    pub model_flops: u64,
    /// Nodes that run but could not be traced to a node ONNX Runtime placed, and their known FLOPs:
    /// not in any share.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unattributed_nodes: usize,
    /// Known FLOPs of the unattributed nodes.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub unattributed_flops: u64,
    /// FLOPs the running nodes of unknown FLOPs are estimated to do at the model's own rate: their
    /// kernel time in the CPU reference pass × the FLOPs per µs of the nodes whose FLOPs are known
    /// there. Absent when every FLOP is known or the reference pass has no times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops_unknown_estimate: Option<u64>,
    /// Percent of the model's FLOPs the FLOP shares are computed on (`flops`): of the known FLOPs
    /// (`model_flops`) plus the estimate for the nodes of unknown FLOPs. Below 100 when FLOPs could
    /// not be attributed or are unknown ([`covered_pct`]).
    #[serde(default = "hundred")]
    pub flops_covered_pct: f64,
    /// Nodes ONNX Runtime folded away when it loaded the model (constant folding, eliminated
    /// no-ops): they never run.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub folded_nodes: usize,
    /// Nodes in subgraph branches that did not run (an `If` branch not taken).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_run_nodes: usize,
    /// Median over profiled runs of the summed kernel time (µs), when profiled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_us_per_run: Option<f64>,
}

/// The percent of the model's FLOPs that `flops` covers: of `model_flops` plus `unknown_estimate`.
/// Nodes of unknown FLOPs without an estimate (no reference times) lower it by their share of the
/// `running_nodes`; a model whose FLOPs are all unknown is covered 0%, one of known-zero FLOPs 100%.
pub fn covered_pct(
    flops: u64,
    model_flops: u64,
    unknown_estimate: Option<u64>,
    unknown_nodes: usize,
    running_nodes: usize,
) -> f64 {
    let whole = model_flops.saturating_add(unknown_estimate.unwrap_or(0));
    let of_known = if whole > 0 {
        100.0 * flops as f64 / whole as f64
    } else if unknown_nodes > 0 {
        0.0
    } else {
        100.0
    };
    match unknown_estimate {
        None if unknown_nodes > 0 && running_nodes > 0 => {
            of_known * running_nodes.saturating_sub(unknown_nodes) as f64 / running_nodes as f64
        }
        _ => of_known,
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn hundred() -> f64 {
    100.0
}

/// One execution provider's share of the model.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EpShare {
    /// EP name.
    pub ep: String,
    /// Original nodes assigned to it.
    pub nodes: usize,
    /// Percent of all nodes.
    pub nodes_pct: f64,
    /// FLOPs of its nodes.
    pub flops: u64,
    /// Percent of all known FLOPs.
    pub flops_pct: f64,
    /// Median kernel time per run (µs), when profiled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_us_per_run: Option<f64>,
    /// Percent of measured kernel time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_pct: Option<f64>,
}

/// A fused partition of a compiling EP (one Node event per run in the profile).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Partition {
    /// EP name.
    pub ep: String,
    /// Fused node name from the profile (`QNNExecutionProvider_QNNExecutionProvider_<hash>_<id>_<n>`).
    pub fused_name: String,
    /// Original nodes inside it, in graph order where known.
    pub nodes: Vec<String>,
    /// FLOPs of those nodes.
    pub flops: u64,
    /// Kernel time of the fused node per run (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<TimeStats>,
    /// Its QNN ops (from the EP's op trace and QNN's profile), each with the model nodes it came
    /// from and its time, when available.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backend_ops: Vec<QnnOp>,
    /// An LLM model folder: the graph the partition is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<String>,
    /// An LLM model folder: the phase (`prompt` or `token`) whose session it is of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

/// A time distribution over profiled runs, in microseconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TimeStats {
    /// Median (µs).
    pub median_us: f64,
    /// 95th percentile (µs).
    pub p95_us: f64,
    /// Number of samples.
    pub samples: usize,
}

impl TimeStats {
    /// Median, p95 and count of the samples (µs), `None` when there are none.
    pub fn from_samples(samples: &[f64]) -> Option<TimeStats> {
        Some(TimeStats {
            median_us: npugate_result::stats::median(samples)?,
            p95_us: npugate_result::stats::percentile(samples, 95.0)?,
            samples: samples.len(),
        })
    }
}

/// One QNN op of a partition: the ONNX nodes it came from, traced to the model's own nodes, and
/// its time in QNN's profile (`--qnn-profiling detailed|optrace`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct QnnOp {
    /// The QNN op's name (`conv1_token_1`); QNN's own ops without a name are `Input OpId_2`,
    /// `Output OpId_3`, `OpId_19`.
    pub name: String,
    /// QNN's op id in the profile (`OpId_23`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_id: Option<u32>,
    /// Its QNN type (`Conv2d`), from the EP's trace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub qnn_type: String,
    /// The model's own nodes it came from (through ONNX Runtime's fusions and layout transformation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_nodes: Vec<String>,
    /// How `model_nodes` were found.
    #[serde(default)]
    pub attribution: OpAttribution,
    /// Its ONNX sources as the EP named them (`conv1_token_1`, `MatMul_6/MatMulAddFusion`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// Median value per execute in QNN's profile; `None` without QNN profiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Its unit as QNN reported it (`CYCLES`, `US`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unit: String,
}

/// How a QNN op was tied to the model's nodes.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum OpAttribution {
    /// By the EP's op trace: the op's ONNX sources, traced to the model's nodes.
    Traced,
    /// By its name alone (no trace: an older onnxruntime-qnn, a model compiled without one).
    Named,
    /// An op ONNX Runtime inserted (a layout `Transpose`, its Q/DQ): counted with the model nodes of
    /// the op it feeds or follows, by QNN's graph.
    Adjacent,
    /// QNN's own graph input or output op.
    GraphIo,
    /// An op without an ONNX source: one the HTP's compiler added, or an inserted op with no
    /// traced neighbour.
    #[default]
    Unattributed,
}

/// The QNN ops of a run, as a whole: how they were attributed and what their times are.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct QnnOpsSummary {
    /// Where the ops' ONNX sources come from: `trace` (the EP's op trace of this run),
    /// `compile_trace` (the trace `npugate compile` recorded in the compiled model) or `names`
    /// (QNN's op names alone).
    pub sources: String,
    /// QNN ops listed (in the partitions' `backend_ops`).
    pub ops: usize,
    /// Of them, ops tied to model nodes.
    pub attributed: usize,
    /// Profiled executes the times are medians of (0 without QNN profiling).
    pub executes: usize,
    /// Set when the times are an emulator's: why they are no device estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated: Option<String>,
}

/// A model node's share of QNN op time: the ops it came from, each shared by its model nodes in
/// proportion to their FLOPs (evenly where none are known).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BackendShare {
    /// Value per execute.
    pub value: f64,
    /// Unit (`CYCLES`, `US`).
    pub unit: String,
}

/// CPU↔accelerator switches.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Boundaries {
    /// Number of EP switches in each profiled run, in run order.
    pub per_run: Vec<usize>,
    /// The switches of the first profiled run, in execution order.
    pub transitions: Vec<Transition>,
    /// Median over runs of the idle time summed over a run's switches (µs): what the hand-overs
    /// between EPs cost besides the kernels. `None` without a switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_us_per_run: Option<f64>,
    /// Median idle time between consecutive kernels of the same EP (µs), for comparison with the
    /// gaps at switches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_ep_gap_us: Option<f64>,
}

/// One switch from one EP to another between consecutive kernels.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Transition {
    /// EP before the switch.
    pub from_ep: String,
    /// EP after the switch.
    pub to_ep: String,
    /// Kernel (profile event name without `_kernel_time`) before the switch.
    pub after: String,
    /// Kernel after the switch.
    pub before: String,
    /// Median over runs of the idle time between the two kernels (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_us: Option<f64>,
}

/// Fallback nodes that share one rejection reason.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RejectionCause {
    /// The EP's reason (`Cannot get shape`), or `no reason logged` when it gave none; node names
    /// inside it are replaced by `…`, so one cause covers every node it rejected.
    pub reason: String,
    /// How many nodes it rejected for it.
    pub nodes: usize,
    /// Their op types, most frequent first.
    pub op_types: Vec<String>,
    /// The first few node names.
    pub examples: Vec<String>,
    /// What to do about it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl RejectionCause {
    /// `5 nodes: Cannot get shape (e.g. conv, relu, fc) → the model has dynamic input dims; pass
    /// --shape x=1x3x32x32`; more examples than shown end in `…`.
    pub fn describe(&self) -> String {
        let hint = self.hint.as_deref().map(|h| format!(" → {h}")).unwrap_or_default();
        let more = if self.nodes > self.examples.len() { ", …" } else { "" };
        let examples = match self.examples.as_slice() {
            [] => String::new(),
            names => format!(" (e.g. {}{more})", names.join(", ")),
        };
        format!("{} node{}: {}{examples}{hint}", self.nodes, if self.nodes == 1 { "" } else { "s" }, self.reason)
    }
}

/// A node that did not run on the preferred EP.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FallbackNode {
    /// Original node name.
    pub name: String,
    /// Operator type.
    pub op_type: String,
    /// EP it ran on.
    pub ep: String,
    /// Input shapes (from the reference pass), as `[1,3,224,224]` strings per input.
    pub input_shapes: Vec<String>,
    /// FLOPs, `None` when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<u64>,
    /// Percent of the placed nodes' known FLOPs (`totals.flops`).
    pub flops_pct: f64,
    /// Median kernel time per run (µs), when profiled and attributable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_us_per_run: Option<f64>,
    /// True for graph-input QuantizeLinear / output DequantizeLinear put on CPU by
    /// `offload_graph_io_quantization`: by design, not a regression.
    pub expected: bool,
    /// The EP's own rejection reason from the log (`Validation FAILED … REASON : …`), else from its
    /// op trace (`… (QNN EP op trace)`), when found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A one-line remedy where one is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// One original node: where it ran and what it costs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodePlacement {
    /// Original node name.
    pub name: String,
    /// Operator type.
    pub op_type: String,
    /// Operator domain.
    pub domain: String,
    /// EP it was assigned to; empty when it ran on none (see `not_placed`).
    pub ep: String,
    /// Why it is on no EP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_placed: Option<NotPlaced>,
    /// Input shapes from the reference pass.
    pub input_shapes: Vec<String>,
    /// Output shapes from the reference pass.
    pub output_shapes: Vec<String>,
    /// FLOPs, `None` when unknown (see `warnings`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<u64>,
    /// EP the profile shows it ran on (its partition's or same-named kernel's provider); `None`
    /// when no profile event can be tied to it (fused or renamed by later optimizations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_ep: Option<String>,
    /// Median kernel time per run (µs) of the same-named kernel(s); `None` inside partitions or when
    /// not attributable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_us_per_run: Option<f64>,
    /// Its share of the QNN ops' profiled time (see [`BackendShare`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_time: Option<BackendShare>,
}

/// Why a model node is on no EP.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum NotPlaced {
    /// ONNX Runtime folded it away when it loaded the model: it never runs.
    FoldedAtLoad,
    /// It sits in a subgraph branch that did not run (an `If` branch not taken).
    NotRun,
    /// It runs, but no node ONNX Runtime placed could be traced to it: its FLOPs are in no share.
    Unattributed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_stats_interpolate() {
        let stats = TimeStats::from_samples(&[0.0, 10.0]).unwrap();
        assert_eq!((stats.median_us, stats.p95_us, stats.samples), (5.0, 9.5, 2));
        assert_eq!(TimeStats::from_samples(&[3.0, 1.0, 2.0]).unwrap().median_us, 2.0);
        assert!(TimeStats::from_samples(&[]).is_none());
    }
}
