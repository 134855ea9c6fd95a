//! Joins the assignment (authority on placement), the reference pass (shapes → FLOPs), the profile
//! (time, partitions, boundaries), the log (rejection reasons) and QNN's CSV into a [`PlacementReport`].

use std::collections::{BTreeMap, HashMap, HashSet};

use npugate_result::stats::median;
use npugate_result::{
    AssignedNode, AssignedSubgraph, Assignment, Fusions, GraphNode, ModelGraph, QnnTrace, RunResult, TraceSource,
};

pub use crate::coverage::strip_token_suffix;
use crate::coverage::Coverage;
use crate::flops::{node_flops, FlopsError, KNOWN_ZERO_OPS};
use crate::hints::fallback_hint;
use crate::ort_log::RejectionReasons;
use crate::profile::{Profile, ProfiledNode};
use crate::qnn_csv::QnnProfile;
use crate::qnn_ops::{self, OpsInputs};
use crate::report::covered_pct;
use crate::report::{
    Boundaries, CompiledAttribution, EpShare, FallbackNode, NodePlacement, NotPlaced, Partition, PlacementReport,
    TimeStats, Totals, Transition, PLACEMENT_SCHEMA,
};
use crate::shape::TensorShape;

/// The CPU EP's name.
pub const CPU_EP: &str = "CPUExecutionProvider";

/// Graph inputs and outputs as concrete or partly dynamic dimensions (`None` = dynamic).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GraphIo {
    /// Shapes fed to the graph inputs.
    pub inputs: Vec<Vec<Option<i64>>>,
    /// Declared graph output shapes.
    pub outputs: Vec<Vec<Option<i64>>>,
}

/// Everything the placement is computed from; only the assignment is required.
#[derive(Debug, Clone)]
pub struct PlacementInputs<'a> {
    /// sha256 of the model.
    pub model_sha256: &'a str,
    /// The EP the model should run on.
    pub preferred_ep: &'a str,
    /// `Session_GetEpGraphAssignmentInfo`: the nodes of the partitioned graph per EP subgraph.
    pub assignment: &'a Assignment,
    /// The model's own nodes and the partitioned graph set against them (`result.json` `graph`).
    /// Without it (results of older harnesses) the assignment's nodes stand in for the model's.
    pub graph: Option<&'a ModelGraph>,
    /// Profile of the profiled pass (same EP configuration).
    pub profile: Option<&'a Profile>,
    /// Profile of the reference pass (CPU EP, optimizations off): per-node shapes.
    pub reference: Option<&'a Profile>,
    /// Rejection reasons from the verbose log.
    pub rejections: Option<&'a RejectionReasons>,
    /// QNN's per-op profiling.
    pub qnn: Option<&'a QnnProfile>,
    /// The QNN EP's op trace: each QNN op's ONNX sources, the nodes it did not take and why.
    pub trace: Option<&'a QnnTrace>,
    /// Set when the run was emulated: QNN's per-op times are then labelled as no device estimate.
    pub emulated: Option<&'a str>,
    /// Graph inputs/outputs: recognises graph-I/O quantization by shape when `graph` is absent.
    pub graph_io: GraphIo,
    /// False when the EP was told to run graph-I/O quantization itself
    /// (`offload_graph_io_quantization=0`): a Q/DQ left to the CPU is then a fallback like any other.
    pub io_offload: bool,
    /// Set when the placement is a prediction (e.g. the QNN Saver backend executed nothing).
    pub predicted: Option<&'a str>,
    /// Kernels of the profiled session traced to the original nodes they replaced.
    pub fusions: Option<&'a Fusions>,
}

impl<'a> PlacementInputs<'a> {
    /// What `result` says about its placement: its model, preferred EP, assignment, graph, graph
    /// I/O (the shapes fed, else those declared), I/O-offload option and traced fusions. Profiles,
    /// log and QNN CSV are the caller's to add.
    pub fn of_run(result: &'a RunResult) -> PlacementInputs<'a> {
        let fed: Vec<Vec<Option<i64>>> =
            result.inputs.iter().map(|i| i.shape.iter().copied().map(Some).collect()).collect();
        let graph_io = GraphIo {
            inputs: if fed.is_empty() { result.model.inputs.iter().map(|i| i.shape.clone()).collect() } else { fed },
            outputs: result.model.outputs.iter().map(|o| o.shape.clone()).collect(),
        };
        PlacementInputs {
            model_sha256: &result.model.sha256,
            preferred_ep: &result.execution.preferred_ep,
            assignment: &result.assignment,
            graph: result.graph.as_ref(),
            profile: None,
            reference: None,
            rejections: None,
            qnn: None,
            trace: result.qnn_trace.as_ref(),
            emulated: result.execution.emulated.as_deref(),
            graph_io,
            io_offload: result.execution.ep_options.get(IO_OFFLOAD_OPTION).is_none_or(|v| v != "0"),
            predicted: None,
            fusions: result.fusions.as_ref(),
        }
    }
}

/// The QNN EP option that puts graph-input quantization and graph-output dequantization on the
/// CPU by design (on unless set to `0`).
pub const IO_OFFLOAD_OPTION: &str = "offload_graph_io_quantization";

/// One model node while the report is assembled.
struct Node<'a> {
    name: &'a str,
    op_type: &'a str,
    domain: &'a str,
    /// The EP it ran on; `None` with `not_placed` set.
    ep: Option<&'a str>,
    not_placed: Option<NotPlaced>,
    reference: Option<&'a ProfiledNode>,
    /// FLOPs from the reference pass's shapes; `None` when unknown.
    flops: Option<u64>,
    /// The nodes of the partitioned graph that stand for it and are no model node themselves (a
    /// fused `Gemm`): the EP's reasons for them are its reasons.
    run_nodes: Vec<&'a str>,
    /// The nodes of the partitioned graph off the preferred EP that stand for it (its own among
    /// them, when the partitioned graph kept it).
    off_preferred: Vec<&'a str>,
    profile_ep: Option<&'a str>,
    time_us_per_run: Option<f64>,
}

impl Node<'_> {
    fn placed(&self) -> bool {
        self.ep.is_some()
    }

    /// Its FLOPs when it runs: none for nodes folded away or not run.
    fn running_flops(&self) -> Option<u64> {
        match self.not_placed {
            Some(NotPlaced::FoldedAtLoad | NotPlaced::NotRun) => None,
            _ => self.flops,
        }
    }
}

/// Computes the placement report.
pub fn build_report(inputs: &PlacementInputs<'_>) -> PlacementReport {
    let mut warnings = Vec::new();
    let legacy;
    let graph = match inputs.graph {
        Some(graph) => graph,
        None => {
            legacy = graph_of_assignment(inputs.assignment);
            &legacy
        }
    };
    let coverage =
        Coverage::new(graph.nodes.iter().map(|n| n.name.as_str()), graph.partitioned.iter().flat_map(|p| &p.groups));
    let mut nodes = model_nodes(graph, &coverage, inputs, &mut warnings);
    let partitions = match inputs.profile {
        Some(profile) => match_partitions(inputs.assignment, &coverage, profile, &mut warnings),
        None => Vec::new(),
    };
    if let Some(profile) = inputs.profile {
        witness_placement(&mut nodes, &partitions, profile, inputs, &mut warnings);
        check_profile_model(profile, &inputs.graph_io, &mut warnings);
        warnings.extend(profile.warnings.iter().map(|w| format!("profile: {w}")));
    }
    let placed = || nodes.iter().filter(|n| n.placed());
    let total_flops = flops_sum(placed());
    let unattributed: Vec<&Node<'_>> = nodes.iter().filter(|n| n.not_placed == Some(NotPlaced::Unattributed)).collect();
    let unattributed_flops = flops_sum(unattributed.iter().copied());
    let model_flops = total_flops.saturating_add(unattributed_flops);
    let unknown_estimate = unknown_flops_estimate(&nodes, inputs.reference, model_flops);
    let flops_unknown_nodes = placed().filter(|n| n.flops.is_none()).count();
    let per_ep = ep_shares(&nodes, inputs.profile, total_flops);
    let preferred = per_ep.iter().find(|s| s.ep == inputs.preferred_ep);
    let io_quantization = IoQuantization::new(inputs, graph);
    let fallback = fallback_list(&nodes, inputs, &io_quantization, total_flops);
    note_inserted_nodes(inputs, &coverage, &io_quantization, &mut warnings);
    let mut report_partitions: Vec<Partition> =
        partitions.iter().map(|p| p.to_report(&nodes, inputs.profile)).collect();
    let names: Vec<&str> = nodes.iter().map(|n| n.name).collect();
    let node_flops: Vec<Option<u64>> = nodes.iter().map(|n| n.flops).collect();
    let ops = qnn_ops::attach(
        &mut report_partitions,
        &OpsInputs {
            coverage: &coverage,
            names: &names,
            flops: &node_flops,
            trace: inputs.trace,
            profile: inputs.qnn,
            emulated: inputs.emulated,
        },
    );
    warnings.extend(ops.warnings);
    PlacementReport {
        schema: PLACEMENT_SCHEMA.to_string(),
        model_sha256: inputs.model_sha256.to_string(),
        preferred_ep: inputs.preferred_ep.to_string(),
        predicted: inputs.predicted.map(str::to_string),
        compiled: graph.compiled.as_ref().map(|c| CompiledAttribution {
            attribution: c.attribution,
            source_model: c.source_model.clone(),
            source_sha256: c.source_sha256.clone(),
        }),
        runs_profiled: inputs.profile.map_or(0, |p| p.runs.len()),
        totals: Totals {
            nodes: placed().count(),
            flops: total_flops,
            flops_unknown_nodes,
            model_nodes: inputs.graph.map(|g| g.nodes.len()),
            model_flops,
            unattributed_nodes: unattributed.len(),
            unattributed_flops,
            flops_unknown_estimate: unknown_estimate,
            flops_covered_pct: covered_pct(
                total_flops,
                model_flops,
                unknown_estimate,
                flops_unknown_nodes,
                placed().count(),
            ),
            folded_nodes: nodes.iter().filter(|n| n.not_placed == Some(NotPlaced::FoldedAtLoad)).count(),
            not_run_nodes: nodes.iter().filter(|n| n.not_placed == Some(NotPlaced::NotRun)).count(),
            time_us_per_run: inputs.profile.and_then(|p| total_time_per_run(p, |_| true)),
        },
        preferred_flops_pct: preferred.map_or(0.0, |s| s.flops_pct),
        preferred_nodes_pct: preferred.map_or(0.0, |s| s.nodes_pct),
        preferred_time_pct: inputs.profile.map(|_| preferred.and_then(|s| s.time_pct).unwrap_or(0.0)),
        per_ep,
        partitions: report_partitions,
        boundaries: inputs.profile.map(boundaries).unwrap_or_default(),
        rejections: crate::causes::aggregate(&fallback, inputs.preferred_ep, None),
        fallback,
        nodes: nodes
            .iter()
            .zip(ops.shares)
            .map(|(n, share)| NodePlacement { backend_time: share, ..n.to_report() })
            .collect(),
        qnn_ops: ops.summary,
        graphs: Vec::new(),
        warnings,
    }
}

impl Node<'_> {
    fn to_report(&self) -> NodePlacement {
        NodePlacement {
            name: self.name.to_string(),
            op_type: self.op_type.to_string(),
            domain: self.domain.to_string(),
            ep: self.ep.unwrap_or_default().to_string(),
            not_placed: self.not_placed,
            input_shapes: shape_strings(self.reference.map(|r| r.input_shapes.as_slice())),
            output_shapes: shape_strings(self.reference.map(|r| r.output_shapes.as_slice())),
            flops: self.flops,
            profile_ep: self.profile_ep.map(str::to_string),
            time_us_per_run: self.time_us_per_run,
            backend_time: None,
        }
    }
}

fn shape_strings(shapes: Option<&[TensorShape]>) -> Vec<String> {
    shapes.unwrap_or_default().iter().map(TensorShape::to_string).collect()
}

/// The FLOPs of the running nodes of unknown FLOPs at the model's own rate in the reference pass:
/// their kernel time there × `known_flops` per µs of the known nodes' kernel time. `None` when no
/// running node's FLOPs are unknown or the reference pass timed no node of known FLOPs.
fn unknown_flops_estimate(nodes: &[Node<'_>], reference: Option<&Profile>, known_flops: u64) -> Option<u64> {
    let reference = reference?;
    let running = || nodes.iter().filter(|n| n.placed() || n.not_placed == Some(NotPlaced::Unattributed));
    let names_of = |known: bool| -> HashSet<&str> {
        running().filter(|n| n.flops.is_some() == known).filter_map(|n| n.reference.map(|r| r.name.as_str())).collect()
    };
    let (unknown, known) = (names_of(false), names_of(true));
    if unknown.is_empty() {
        return None;
    }
    let time_of =
        |names: &HashSet<&str>| -> f64 { per_run_time(reference, |n| names.contains(n.name.as_str())).iter().sum() };
    let (unknown_time, known_time) = (time_of(&unknown), time_of(&known));
    (known_time > 0.0).then(|| (known_flops as f64 * unknown_time / known_time).round() as u64)
}

/// Sum of the known FLOPs of the nodes that run, saturating (absurd shapes in a damaged profile
/// must not overflow).
fn flops_sum<'n, 'a: 'n>(nodes: impl Iterator<Item = &'n Node<'a>>) -> u64 {
    nodes.filter_map(Node::running_flops).fold(0, u64::saturating_add)
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// For results without the model's graph: the assignment's nodes stand in for the model's.
fn graph_of_assignment(assignment: &Assignment) -> ModelGraph {
    let mut nodes: Vec<GraphNode> = Vec::new();
    for node in assignment.subgraphs.iter().flat_map(|s| &s.nodes) {
        if !nodes.iter().any(|n| n.name == node.name) {
            nodes.push(GraphNode {
                name: node.name.clone(),
                op_type: node.op_type.clone(),
                domain: node.domain.clone(),
                subgraph: false,
            });
        }
    }
    ModelGraph { nodes, ..ModelGraph::default() }
}

/// A node's FLOPs per execution in the reference pass: the mean over the shapes it ran with when
/// the profile kept them (the decode steps of a generation at both ends of its context), else
/// those of its first execution. Rounded to the FLOP.
pub fn mean_flops(op_type: &str, reference: &ProfiledNode) -> Result<u64, FlopsError> {
    if reference.shaped_executions.is_empty() {
        return node_flops(op_type, &reference.input_shapes, &reference.output_shapes);
    }
    let (mut sum, mut executions) = (0u128, 0u128);
    for shaped in &reference.shaped_executions {
        let flops = node_flops(op_type, &shaped.input_shapes, &shaped.output_shapes)?;
        sum += u128::from(flops) * shaped.executions as u128;
        executions += shaped.executions as u128;
    }
    Ok(u64::try_from((sum + executions / 2) / executions.max(1)).unwrap_or(u64::MAX))
}

/// What [`model_nodes`] joins each model node against: the reference pass's nodes by name, the
/// partitioned graph's nodes standing for it (with their EP), and the nodes folded away at load.
struct NodeSources<'a> {
    /// The reference pass's nodes by name.
    reference: HashMap<&'a str, &'a ProfiledNode>,
    /// Per model node (by index): the partitioned graph's nodes standing for it, with their EP.
    candidates: Vec<Vec<(&'a str, &'a str)>>,
    /// Model nodes in groups the partitioned graph kept no kernels for.
    folded_groups: Vec<&'a str>,
    /// Whether the reference pass knows any node of the model (else it is of another model).
    reference_knows_the_model: bool,
}

impl<'a> NodeSources<'a> {
    /// Collects the sources from the graph, its coverage and the placement inputs.
    fn collect(graph: &'a ModelGraph, coverage: &Coverage<'_>, inputs: &PlacementInputs<'a>) -> Self {
        let reference: HashMap<&str, &ProfiledNode> =
            inputs.reference.map(|r| r.nodes.iter().map(|n| (n.name.as_str(), n)).collect()).unwrap_or_default();
        let mut candidates: Vec<Vec<(&'a str, &'a str)>> = vec![Vec::new(); graph.nodes.len()];
        for subgraph in &inputs.assignment.subgraphs {
            for run_node in &subgraph.nodes {
                for model_node in coverage.model_nodes(&run_node.name) {
                    candidates[model_node].push((run_node.name.as_str(), subgraph.ep.as_str()));
                }
            }
        }
        let folded_groups: Vec<&str> = graph
            .partitioned
            .iter()
            .flat_map(|p| &p.groups)
            .filter(|g| g.kernels.is_empty())
            .flat_map(|g| g.nodes.iter().map(String::as_str))
            .collect();
        // A reference pass that knows none of the nodes is of another model: it cannot tell which ran.
        let reference_knows_the_model = graph.nodes.iter().any(|n| reference.contains_key(n.name.as_str()));
        NodeSources { reference, candidates, folded_groups, reference_knows_the_model }
    }
}

/// The model's nodes, each with its FLOPs (from the reference pass's shapes, joined by name) and
/// the EP of the nodes of the partitioned graph that stand for it ([`Coverage`]): a node's own
/// (same name) first, else theirs when they agree, else — one model node in nodes ONNX Runtime
/// split across EPs — the EP that is not the preferred one, so the share never claims what may
/// not have run there. A node nothing stands for was folded away at load (its group has no
/// nodes left), did not run (a subgraph node the reference pass did not see: a branch not taken)
/// or could not be attributed.
fn model_nodes<'a>(
    graph: &'a ModelGraph,
    coverage: &Coverage<'_>,
    inputs: &PlacementInputs<'a>,
    warnings: &mut Vec<String>,
) -> Vec<Node<'a>> {
    let sources = NodeSources::collect(graph, coverage, inputs);
    let mut unknown_ops: BTreeMap<&str, usize> = BTreeMap::new();
    let mut split = Vec::new();
    let mut nodes = Vec::with_capacity(graph.nodes.len());
    for (index, model_node) in graph.nodes.iter().enumerate() {
        let name = model_node.name.as_str();
        let found = sources.reference.get(name).or_else(|| sources.reference.get(strip_token_suffix(name))).copied();
        let flops = model_node_flops(model_node, found, &mut unknown_ops, warnings);
        let standing = &sources.candidates[index];
        let ep = standing_ep(name, standing, inputs.preferred_ep, &mut split);
        // A subgraph node the reference pass (which ran every taken branch) did not see sat in a
        // branch that was not taken, wherever ONNX Runtime assigned it.
        let not_run = model_node.subgraph && found.is_none() && sources.reference_knows_the_model;
        let (ep, not_placed) = match ep {
            _ if not_run => (None, Some(NotPlaced::NotRun)),
            Some(ep) => (Some(ep), None),
            None if sources.folded_groups.contains(&name) => (None, Some(NotPlaced::FoldedAtLoad)),
            None => (None, Some(NotPlaced::Unattributed)),
        };
        nodes.push(Node {
            name,
            op_type: &model_node.op_type,
            domain: &model_node.domain,
            ep,
            not_placed,
            reference: found,
            flops,
            run_nodes: standing.iter().map(|&(run, _)| run).filter(|run| coverage.model_node(run).is_none()).collect(),
            off_preferred: standing.iter().filter(|&&(_, ep)| ep != inputs.preferred_ep).map(|&(run, _)| run).collect(),
            profile_ep: None,
            time_us_per_run: None,
        });
    }
    join_warnings(&nodes, unknown_ops, &split, inputs, warnings);
    not_placed_warnings(&nodes, warnings);
    nodes
}

/// A model node's mean FLOPs from its reference node; unknown ops are counted in `unknown_ops`,
/// other FLOPs errors warned about. Without a reference node: 0 for ops known to do no arithmetic.
fn model_node_flops<'a>(
    model_node: &'a GraphNode,
    found: Option<&ProfiledNode>,
    unknown_ops: &mut BTreeMap<&'a str, usize>,
    warnings: &mut Vec<String>,
) -> Option<u64> {
    match found {
        Some(r) => match mean_flops(&model_node.op_type, r) {
            Ok(f) => Some(f),
            Err(FlopsError::UnknownOp(_)) => {
                *unknown_ops.entry(model_node.op_type.as_str()).or_default() += 1;
                None
            }
            Err(err) => {
                warnings.push(format!("{err} (node {})", model_node.name));
                None
            }
        },
        None => KNOWN_ZERO_OPS.contains(&model_node.op_type.as_str()).then_some(0),
    }
}

/// The EP of the partitioned-graph nodes standing for model node `name`: its own, else theirs when
/// they agree, else (split across EPs; `name` is added to `split`) the first that is not `preferred_ep`.
fn standing_ep<'a>(
    name: &'a str,
    standing: &[(&'a str, &'a str)],
    preferred_ep: &str,
    split: &mut Vec<&'a str>,
) -> Option<&'a str> {
    let own = standing.iter().find(|(run, _)| *run == name || strip_token_suffix(run) == name);
    match own {
        Some(&(_, ep)) => Some(ep),
        None => match standing.first() {
            Some(&(_, first)) if standing.iter().all(|&(_, ep)| ep == first) => Some(first),
            Some(_) => {
                split.push(name);
                standing.iter().map(|&(_, ep)| ep).find(|ep| *ep != preferred_ep)
            }
            None => None,
        },
    }
}

/// Warnings about the join: ops of unknown FLOPs, nodes split across EPs, a missing or foreign reference.
fn join_warnings(
    nodes: &[Node<'_>],
    unknown_ops: BTreeMap<&str, usize>,
    split: &[&str],
    inputs: &PlacementInputs<'_>,
    warnings: &mut Vec<String>,
) {
    for (op, count) in unknown_ops {
        warnings.push(format!("FLOPs unknown for {op} ({count} node(s))"));
    }
    if !split.is_empty() {
        warnings.push(format!(
            "{} model node(s) are fused with nodes on different EPs; counted on the EP that is not {}: {}",
            split.len(),
            inputs.preferred_ep,
            preview(split)
        ));
    }
    let joined = nodes.iter().filter(|n| n.reference.is_some()).count();
    match inputs.reference {
        None => warnings.push("no reference profile: node shapes and FLOPs are unknown".to_string()),
        Some(_) if joined == 0 && !nodes.is_empty() => warnings.push(format!(
            "{n} of {n} model node(s) are not in the reference profile (shapes and FLOPs unknown); is the reference profile from another model?",
            n = nodes.len()
        )),
        Some(_) => {}
    }
}

/// Warnings about the nodes left without an EP: not run, folded at load, or unattributed.
fn not_placed_warnings(nodes: &[Node<'_>], warnings: &mut Vec<String>) {
    let count = |state| nodes.iter().filter(|n| n.not_placed == Some(state)).count();
    let flops_of = |state| {
        nodes.iter().filter(|n| n.not_placed == Some(state)).filter_map(|n| n.flops).fold(0u64, u64::saturating_add)
    };
    if count(NotPlaced::NotRun) > 0 {
        warnings.push(format!(
            "{} node(s) in subgraph branches did not run (an If/Loop branch not taken): no EP, no FLOPs counted",
            count(NotPlaced::NotRun)
        ));
    }
    if count(NotPlaced::FoldedAtLoad) > 0 {
        warnings.push(format!(
            "{} node(s) were folded away when ONNX Runtime loaded the model: they never run",
            count(NotPlaced::FoldedAtLoad)
        ));
    }
    if count(NotPlaced::Unattributed) > 0 {
        let unattributed: Vec<&Node<'_>> =
            nodes.iter().filter(|n| n.not_placed == Some(NotPlaced::Unattributed)).collect();
        let names: Vec<&str> = unattributed.iter().map(|n| n.name).collect();
        let moved_data_only = unattributed.iter().all(|n| KNOWN_ZERO_OPS.contains(&n.op_type));
        warnings.push(format!(
            "{} node(s) with {} FLOPs could not be traced to a node ONNX Runtime placed{}: unknown to every share ({})",
            names.len(),
            flops_of(NotPlaced::Unattributed),
            if moved_data_only {
                " (an EP's layout transformation replaces Transpose and Q/DQ nodes with new ones)"
            } else {
                ""
            },
            preview(&names)
        ));
    }
}

/// The first few names of a list, for warnings.
fn preview(names: &[&str]) -> String {
    const SHOWN: usize = 8;
    let mut text = names.iter().take(SHOWN).copied().collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(", … {} more", names.len() - SHOWN));
    }
    text
}

/// A fused partition event of the profile matched to an assignment subgraph.
struct MatchedPartition {
    ep: String,
    fused_node: usize,
    fused_name: String,
    /// The model nodes its subgraph's nodes stand for, in model order.
    model_nodes: Vec<usize>,
}

impl MatchedPartition {
    fn to_report(&self, nodes: &[Node<'_>], profile: Option<&Profile>) -> Partition {
        let inside = self.model_nodes.iter().map(|&i| &nodes[i]);
        Partition {
            ep: self.ep.clone(),
            fused_name: self.fused_name.clone(),
            nodes: inside.clone().map(|n| n.name.to_string()).collect(),
            flops: flops_sum(inside),
            time: profile.and_then(|p| TimeStats::from_samples(&p.node_time_per_run(self.fused_node))),
            backend_ops: Vec::new(),
            graph: None,
            phase: None,
        }
    }
}

/// A compiling EP's fused partition node: named `<provider>_<metadef name>_<n>`.
fn is_fused_partition(node: &ProfiledNode) -> bool {
    node.name.strip_prefix(node.provider.as_str()).is_some_and(|rest| rest.starts_with('_'))
}

/// The trailing `_<n>` of a fused node name: ORT's `fused_node_unique_id`.
fn fused_id(name: &str) -> u64 {
    name.rsplit('_').next().and_then(|n| n.parse().ok()).unwrap_or(u64::MAX)
}

/// Matches the profile's fused partition events to the assignment's subgraphs.
///
/// A fused node is named `<provider>_<metadef name>_<fused_node_unique_id>` (graph_partitioner.cc
/// `PlaceNode`), so an event is a partition when its name starts with its provider followed by `_`.
/// ORT numbers fused nodes in partitioning order and the assignment lists an EP's subgraphs in the
/// same order: the k-th fused node of an EP, by that id, is the k-th subgraph of that EP. When the
/// counts differ the common prefix is matched and a warning says so. A partition stands for the
/// model nodes its subgraph's nodes stand for.
fn match_partitions(
    assignment: &Assignment,
    coverage: &Coverage<'_>,
    profile: &Profile,
    warnings: &mut Vec<String>,
) -> Vec<MatchedPartition> {
    let mut fused_by_ep: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, node) in profile.nodes.iter().enumerate() {
        if is_fused_partition(node) {
            fused_by_ep.entry(node.provider.as_str()).or_default().push(index);
        }
    }
    let mut subgraphs_of: BTreeMap<&str, Vec<&AssignedSubgraph>> = BTreeMap::new();
    for subgraph in &assignment.subgraphs {
        subgraphs_of.entry(subgraph.ep.as_str()).or_default().push(subgraph);
    }
    let mut matched = Vec::new();
    for (ep, mut fused) in fused_by_ep {
        fused.sort_by_key(|&i| fused_id(&profile.nodes[i].name));
        let subgraphs = subgraphs_of.get(ep).cloned().unwrap_or_default();
        if subgraphs.len() != fused.len() {
            warnings.push(format!(
                "{ep}: profile has {} fused partition node(s) but the assignment has {} subgraph(s); matched the first {}",
                fused.len(),
                subgraphs.len(),
                fused.len().min(subgraphs.len())
            ));
        }
        for (fused_node, subgraph) in fused.into_iter().zip(subgraphs) {
            matched.push(MatchedPartition {
                ep: ep.to_string(),
                fused_node,
                fused_name: profile.nodes[fused_node].name.clone(),
                model_nodes: {
                    let mut inside = coverage.union(subgraph.nodes.iter().map(|n| n.name.as_str()));
                    inside.sort_unstable();
                    inside
                },
            });
        }
    }
    matched
}

/// Records where the profile shows each placed node ran, and per-node time.
///
/// Nodes inside a matched partition ran where the partition's fused event ran. Other nodes are
/// found by kernel name, exactly or after dropping a `_token_<n>` suffix (layout transformation),
/// else through the traced fusions ([`Fusions`]): a group's kernel time is shared by its original
/// nodes in proportion to their FLOPs, and a group without kernels was folded away (no time per
/// run). What remains unexplained is counted in one line each, never listed.
fn witness_placement<'a>(
    nodes: &mut [Node<'a>],
    partitions: &[MatchedPartition],
    profile: &'a Profile,
    inputs: &PlacementInputs<'a>,
    warnings: &mut Vec<String>,
) {
    let mut kernels_by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut kernel_named: HashMap<&str, usize> = HashMap::new();
    for (index, kernel) in profile.nodes.iter().enumerate() {
        kernels_by_name.entry(strip_token_suffix(&kernel.name)).or_default().push(index);
        kernel_named.insert(&kernel.name, index);
    }
    let mut in_partition = vec![false; nodes.len()];
    for partition in partitions {
        for &index in &partition.model_nodes {
            in_partition[index] = true;
            nodes[index].profile_ep = Some(profile.nodes[partition.fused_node].provider.as_str());
        }
    }
    let kernel_time = |kernels: &[usize]| -> (Option<f64>, Option<&'a str>) {
        let mut per_run = vec![0.0; profile.runs.len()];
        for &kernel in kernels {
            for (run, t) in profile.node_time_per_run(kernel).into_iter().enumerate() {
                per_run[run] += t;
            }
        }
        (median(&per_run), kernels.first().map(|&k| profile.nodes[k].provider.as_str()))
    };
    let group_of: HashMap<&str, usize> = inputs
        .fusions
        .map(|f| {
            f.groups
                .iter()
                .enumerate()
                .flat_map(|(g, group)| group.nodes.iter().map(move |n| (n.as_str(), g)))
                .collect()
        })
        .unwrap_or_default();
    let mut individual_eps = profile.nodes.iter().filter(|k| !is_fused_partition(k)).map(|k| k.provider.as_str());
    let only_individual_ep = individual_eps.next().filter(|first| individual_eps.all(|ep| ep == *first));
    let (mut folded, mut unattributed) = (0, 0);
    let mut group_members: HashMap<usize, Vec<usize>> = HashMap::new();
    for (index, node) in nodes.iter_mut().enumerate() {
        if in_partition[index] || !node.placed() {
            continue;
        }
        if let Some(kernels) = kernels_by_name.get(node.name).filter(|_| !group_of.contains_key(node.name)) {
            (node.time_us_per_run, node.profile_ep) = kernel_time(kernels);
        } else if let Some(&group) = group_of.get(node.name) {
            group_members.entry(group).or_default().push(index);
        } else {
            unattributed += 1;
            node.profile_ep = only_individual_ep;
        }
    }
    let groups = inputs.fusions.map(|f| f.groups.as_slice()).unwrap_or_default();
    for (group, members) in group_members {
        let kernels: Vec<usize> =
            groups[group].kernels.iter().filter_map(|k| kernel_named.get(k.as_str())).copied().collect();
        if groups[group].kernels.is_empty() {
            folded += members.len();
            for &member in &members {
                nodes[member].time_us_per_run = Some(0.0);
                nodes[member].profile_ep = only_individual_ep;
            }
            continue;
        }
        let (time, ep) = kernel_time(&kernels);
        let weights: Vec<f64> = members.iter().map(|&m| nodes[m].flops.unwrap_or(0) as f64).collect();
        let total: f64 = weights.iter().sum();
        for (&member, weight) in members.iter().zip(&weights) {
            let share = if total > 0.0 { weight / total } else { 1.0 / members.len() as f64 };
            nodes[member].time_us_per_run = time.map(|t| t * share);
            nodes[member].profile_ep = ep.or(only_individual_ep);
        }
    }
    if folded > 0 {
        warnings.push(format!(
            "{folded} node(s) were folded away by the profiled session's graph optimizations: no time per run"
        ));
    }
    if unattributed > 0 {
        warnings.push(format!(
            "{unattributed} node(s) have no kernel of their own in the profile (fused or renamed by graph optimizations): \
             their time counts in their EP's total only"
        ));
    }
    let disagreeing: Vec<&str> =
        nodes.iter().filter(|n| n.profile_ep.is_some_and(|p| Some(p) != n.ep)).map(|n| n.name).collect();
    if !disagreeing.is_empty() {
        warnings.push(format!(
            "{} node(s) ran on another EP in the profile than the assignment says: {}",
            disagreeing.len(),
            preview(&disagreeing)
        ));
    }
}

/// Warns when no kernel of the first run consumes a tensor shaped like a graph input.
fn check_profile_model(profile: &Profile, io: &GraphIo, warnings: &mut Vec<String>) {
    let first_run = profile.run(0);
    if io.inputs.is_empty() || first_run.is_empty() {
        return;
    }
    let consumes_input = first_run
        .iter()
        .any(|e| profile.node_of(e).input_shapes.iter().any(|s| io.inputs.iter().any(|i| dims_match(i, &s.dims))));
    if !consumes_input {
        warnings.push(
            "profile: no kernel consumes a tensor shaped like the graph inputs: is the profile from another model or input shape?"
                .to_string(),
        );
    }
}

/// True when `dims` fits a signature (`None` matches any size).
fn dims_match(signature: &[Option<i64>], dims: &[i64]) -> bool {
    signature.len() == dims.len() && signature.iter().zip(dims).all(|(s, d)| s.is_none_or(|s| s == *d))
}

/// Median over runs of the summed kernel time of the kernels `keep` selects.
fn total_time_per_run(profile: &Profile, keep: impl Fn(&ProfiledNode) -> bool) -> Option<f64> {
    median(&per_run_time(profile, keep))
}

/// Summed kernel time per run of the kernels `keep` selects, each its own (a control-flow kernel
/// without its body's, see [`Profile::self_times`]).
fn per_run_time(profile: &Profile, keep: impl Fn(&ProfiledNode) -> bool) -> Vec<f64> {
    profile
        .run_executions()
        .map(|run| profile.self_times(run).filter(|(e, _)| keep(profile.node_of(e))).map(|(_, t)| t).sum())
        .collect()
}

/// Per-EP nodes, FLOPs and time. Node and FLOP counts are the placed model nodes'; when their
/// known FLOPs are 0 (a model of data movement only), the FLOP shares are the node shares. Time
/// comes from the profile's kernels grouped by `args.provider`. `time_pct` is the EP's share of all
/// kernel time summed over the profiled runs (so shares add up to 100 %); `time_us_per_run` is the
/// median over runs of the EP's per-run sum.
fn ep_shares(nodes: &[Node<'_>], profile: Option<&Profile>, total_flops: u64) -> Vec<EpShare> {
    let placed: Vec<&Node<'_>> = nodes.iter().filter(|n| n.placed()).collect();
    let mut eps: Vec<&str> = placed.iter().filter_map(|n| n.ep).collect();
    if let Some(p) = profile {
        eps.extend(p.nodes.iter().map(|n| n.provider.as_str()));
    }
    eps.sort_unstable();
    eps.dedup();
    let total_time: f64 = profile.map_or(0.0, |p| per_run_time(p, |_| true).iter().sum());
    let mut shares: Vec<EpShare> = eps
        .into_iter()
        .map(|ep| {
            let on_ep: Vec<&Node<'_>> = placed.iter().copied().filter(|n| n.ep == Some(ep)).collect();
            let flops = flops_sum(on_ep.iter().copied());
            let ep_time = profile.map(|p| per_run_time(p, |k| k.provider == ep));
            EpShare {
                ep: ep.to_string(),
                nodes: on_ep.len(),
                nodes_pct: percent(on_ep.len() as f64, placed.len() as f64),
                flops,
                flops_pct: percent(flops as f64, total_flops as f64),
                time_us_per_run: ep_time.as_deref().and_then(median),
                time_pct: ep_time.map(|t| percent(t.iter().sum(), total_time)),
            }
        })
        .collect();
    if total_flops == 0 {
        // Nothing but data movement (or FLOPs unknown everywhere): the FLOP shares are the node shares.
        for share in &mut shares {
            share.flops_pct = share.nodes_pct;
        }
    }
    shares.sort_by(|a, b| b.flops.cmp(&a.flops).then(b.nodes.cmp(&a.nodes)).then(a.ep.cmp(&b.ep)));
    shares
}

/// The one rule for graph-I/O quantization, in `run`, `preflight`, `compile` and the gate alike: a
/// `QuantizeLinear` reading a graph input or a `DequantizeLinear` writing a graph output — of the
/// model or inserted by ONNX Runtime — left to the CPU while the EP offloads graph-I/O quantization
/// by design (`offload_graph_io_quantization`, on unless set to `0`) is on the CPU by design.
/// Known by tensor names from the model's graph, or by the EP's own reason for it (log or op
/// trace: the Q/DQ its layout transformation inserts before a graph output have no name of ours);
/// for results without the graph, by shapes (see [`IoQuantization::by_shape`]).
struct IoQuantization<'a> {
    offloaded: bool,
    names: Option<&'a [String]>,
    rejections: Option<&'a RejectionReasons>,
    trace: Option<&'a QnnTrace>,
    reference_order: Vec<&'a ProfiledNode>,
    graph_io: &'a GraphIo,
}

impl<'a> IoQuantization<'a> {
    fn new(inputs: &'a PlacementInputs<'a>, graph: &'a ModelGraph) -> IoQuantization<'a> {
        IoQuantization {
            offloaded: inputs.io_offload && inputs.preferred_ep != CPU_EP,
            names: inputs.graph.map(|_| graph.io_quantization.as_slice()),
            rejections: inputs.rejections,
            trace: inputs.trace,
            reference_order: inputs
                .reference
                .map(|r| r.run(0).iter().map(|e| r.node_of(e)).collect())
                .unwrap_or_default(),
            graph_io: &inputs.graph_io,
        }
    }

    /// Whether the node `name` of type `op_type` is on the CPU by design (when it is on the CPU).
    fn by_design(&self, name: &str, op_type: &str, reference: Option<&ProfiledNode>) -> bool {
        self.offloaded
            && (match self.names {
                Some(names) => names.iter().any(|n| n == name),
                None => self.by_shape(op_type, reference),
            } || self.offloaded_by_the_eps_word(name))
    }

    /// Whether the EP's own reason for leaving `name` (its log's, else its op trace's) is the
    /// graph-I/O offload.
    fn offloaded_by_the_eps_word(&self, name: &str) -> bool {
        let logged = self.rejections.and_then(|r| r.reason(name));
        logged.as_deref().or_else(|| self.trace.and_then(|t| t.reason(name))).is_some_and(is_io_offload_reason)
    }

    /// Whether model node `node` is off the preferred EP only through graph-I/O quantization on
    /// the CPU by design: every node of the partitioned graph standing for it off the EP is one
    /// (the rule [`off_preferred_ep`] applies to them). A float input-layout `Transpose` of a QDQ
    /// model is such a node: ONNX Runtime moves the graph input's `QuantizeLinear` in front of it,
    /// the HTP runs the transposition, and the inserted Q, which stands for the `Transpose`, is left
    /// to the CPU by design.
    fn stood_for_by_design(&self, node: &Node<'_>) -> bool {
        !node.off_preferred.is_empty() && node.off_preferred.iter().all(|run| self.by_design(run, "", None))
    }

    /// Without the graph: a `QuantizeLinear` whose input is shaped like a graph input and before
    /// which only Q/DQ kernels ran, or a `DequantizeLinear` whose output is shaped like a graph
    /// output and after which only `DequantizeLinear` kernels ran (the reference run's order).
    fn by_shape(&self, op_type: &str, reference: Option<&ProfiledNode>) -> bool {
        let Some(reference) = reference else { return false };
        let order = &self.reference_order;
        let Some(position) = order.iter().position(|r| std::ptr::eq(*r, reference)) else { return false };
        let is_qdq = |r: &&ProfiledNode| matches!(r.op_type.as_str(), "QuantizeLinear" | "DequantizeLinear");
        match op_type {
            "QuantizeLinear" => {
                reference
                    .input_shapes
                    .first()
                    .is_some_and(|s| self.graph_io.inputs.iter().any(|i| dims_match(i, &s.dims)))
                    && order[..position].iter().all(is_qdq)
            }
            "DequantizeLinear" => {
                reference
                    .output_shapes
                    .first()
                    .is_some_and(|s| self.graph_io.outputs.iter().any(|o| dims_match(o, &s.dims)))
                    && order[position + 1..].iter().all(|r| r.op_type == "DequantizeLinear")
            }
            _ => false,
        }
    }
}

impl PlacementInputs<'_> {
    /// Whether the node `name`, on the CPU, is there by design: graph-I/O quantization the EP
    /// offloads ([`IoQuantization`], the one rule), known by the model graph's tensor names. The
    /// same judgement whether the session was created or refused.
    pub fn on_cpu_by_design(&self, name: &str) -> bool {
        let no_graph = ModelGraph::default();
        IoQuantization::new(self, self.graph.unwrap_or(&no_graph)).by_design(name, "", None)
    }
}

/// The nodes of the assignment left off the preferred EP, in assignment order, except graph-I/O
/// quantization on the CPU by design ([`IoQuantization`], the one rule): the nodes a placement
/// verdict needs the EP's reasons for. Without the model's graph, only the EP's own reason (an op
/// trace in `inputs`) tells a Q/DQ of the graph I/O.
pub fn off_preferred_ep<'a>(inputs: &'a PlacementInputs<'a>) -> Vec<&'a AssignedNode> {
    let no_graph = ModelGraph::default();
    let io = IoQuantization::new(inputs, inputs.graph.unwrap_or(&no_graph));
    inputs
        .assignment
        .subgraphs
        .iter()
        .filter(|s| s.ep != inputs.preferred_ep)
        .flat_map(|s| &s.nodes)
        .filter(|node| !io.by_design(&node.name, &node.op_type, None))
        .collect()
}

/// Names, in one line each, the nodes ONNX Runtime inserted (they stand for no model node, so no
/// count includes them) that run off the preferred EP: graph-I/O Q/DQ on the CPU by design — by
/// the partitioned graph's tensor names, or, for those the EP's layout transformation inserted
/// (no graph of ours has them), by the EP's own reason — and any others.
fn note_inserted_nodes(
    inputs: &PlacementInputs<'_>,
    coverage: &Coverage<'_>,
    io: &IoQuantization<'_>,
    warnings: &mut Vec<String>,
) {
    let (mut by_design, mut other): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    for node in inputs.assignment.subgraphs.iter().filter(|s| s.ep != inputs.preferred_ep).flat_map(|s| &s.nodes) {
        if !coverage.model_nodes(&node.name).is_empty() {
            continue;
        }
        if io.by_design(&node.name, "", None) {
            by_design.push(&node.name);
        } else {
            other.push(&node.name);
        }
    }
    if !by_design.is_empty() {
        warnings.push(format!(
            "ONNX Runtime inserted {} graph-I/O QuantizeLinear/DequantizeLinear node(s) that run on the CPU by design \
             ({IO_OFFLOAD_OPTION}); no model node, not counted: {}",
            by_design.len(),
            preview(&by_design)
        ));
    }
    if !other.is_empty() {
        warnings.push(format!(
            "ONNX Runtime inserted {} node(s) that run off {}; no model node, not counted: {}",
            other.len(),
            inputs.preferred_ep,
            preview(&other)
        ));
    }
}

/// The QNN EP's reason for leaving a graph-I/O Q/DQ to the CPU ("QNN EP is configured to not take
/// DQ nodes that generate a graph output", `simple_op_builder.cc`).
fn is_io_offload_reason(reason: &str) -> bool {
    reason.contains("configured to not take") && (reason.contains("graph output") || reason.contains("graph input"))
}

/// Every placed node not on the preferred EP, most FLOPs first (unknown FLOPs last), then by time.
/// Its reason is the EP's for it, or for a node of the partitioned graph that stands for it.
fn fallback_list(
    nodes: &[Node<'_>],
    inputs: &PlacementInputs<'_>,
    io: &IoQuantization<'_>,
    total_flops: u64,
) -> Vec<FallbackNode> {
    let mut list: Vec<FallbackNode> = nodes
        .iter()
        .filter(|n| n.placed() && n.ep != Some(inputs.preferred_ep))
        .map(|n| {
            let input_shapes = shape_strings(n.reference.map(|r| r.input_shapes.as_slice()));
            let own_by_design = io.by_design(n.name, n.op_type, n.reference);
            let stood_for_by_design = !own_by_design && io.stood_for_by_design(n);
            let expected = own_by_design || stood_for_by_design;
            let reason = inputs
                .rejections
                .and_then(|r| r.reason(n.name).or_else(|| n.run_nodes.iter().find_map(|run| r.reason(run))))
                .or_else(|| traced_reason(inputs.trace?, n))
                .or_else(|| if expected { None } else { fused_into(n) });
            let reason = match reason {
                Some(reason) if stood_for_by_design => Some(format!(
                    "on the CPU only as the graph-I/O quantization ONNX Runtime put in its place ({}): {reason}",
                    n.off_preferred.join(", ")
                )),
                reason => reason,
            };
            FallbackNode {
                name: n.name.to_string(),
                op_type: n.op_type.to_string(),
                ep: n.ep.unwrap_or_default().to_string(),
                hint: fallback_hint(n.op_type, reason.as_deref(), &input_shapes, expected, inputs.preferred_ep),
                input_shapes,
                flops: n.flops,
                flops_pct: percent(n.flops.unwrap_or(0) as f64, total_flops as f64),
                time_us_per_run: n.time_us_per_run,
                expected,
                reason,
            }
        })
        .collect();
    list.sort_by(|a, b| {
        (b.flops.is_some(), b.flops)
            .cmp(&(a.flops.is_some(), a.flops))
            .then(b.time_us_per_run.unwrap_or(0.0).total_cmp(&a.time_us_per_run.unwrap_or(0.0)))
            .then(a.name.cmp(&b.name))
    });
    list
}

/// EP switches between consecutive kernels, per run; transitions listed for the first run, each
/// with its measured cost: the idle time between the kernel before the switch ending and the one
/// after it starting (the hand-over: copies, synchronisation, the executor), median over runs.
/// The same gap between consecutive kernels of one EP is given for comparison.
fn boundaries(profile: &Profile) -> Boundaries {
    let gap = |a: &crate::profile::Execution, b: &crate::profile::Execution| {
        b.ts_us.saturating_sub(a.ts_us + u64::from(a.dur_us)) as f64
    };
    // Per run: (position of the switch, gap) for each EP switch, and the gaps within one EP.
    let mut switch_gaps: Vec<Vec<(usize, f64)>> = Vec::new();
    let mut same_ep_gaps: Vec<f64> = Vec::new();
    let mut per_run = Vec::new();
    for run in profile.run_executions() {
        let mut gaps = Vec::new();
        for (position, pair) in run.windows(2).enumerate() {
            let (a, b) = (profile.node_of(&pair[0]), profile.node_of(&pair[1]));
            if a.provider == b.provider {
                same_ep_gaps.push(gap(&pair[0], &pair[1]));
            } else {
                gaps.push((position, gap(&pair[0], &pair[1])));
            }
        }
        per_run.push(gaps.len());
        switch_gaps.push(gaps);
    }
    let first = profile.run(0);
    let transitions = switch_gaps
        .first()
        .map(|gaps| {
            gaps.iter()
                .enumerate()
                .map(|(k, &(position, _))| {
                    let (a, b) = (profile.node_of(&first[position]), profile.node_of(&first[position + 1]));
                    // The k-th switch of every run that switches between the same two kernels.
                    let samples: Vec<f64> = switch_gaps
                        .iter()
                        .zip(profile.run_executions())
                        .filter_map(|(gaps, run)| {
                            let &(p, g) = gaps.get(k)?;
                            let same =
                                profile.node_of(&run[p]).name == a.name && profile.node_of(&run[p + 1]).name == b.name;
                            same.then_some(g)
                        })
                        .collect();
                    Transition {
                        from_ep: a.provider.clone(),
                        to_ep: b.provider.clone(),
                        after: a.name.clone(),
                        before: b.name.clone(),
                        gap_us: median(&samples),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let totals: Vec<f64> =
        switch_gaps.iter().filter(|g| !g.is_empty()).map(|g| g.iter().map(|(_, t)| t).sum()).collect();
    Boundaries { per_run, transitions, gap_us_per_run: median(&totals), same_ep_gap_us: median(&same_ep_gaps) }
}

/// Why a node the log gives no reason for is off the preferred EP, when ONNX Runtime's graph
/// optimizations fused it into other nodes before partitioning (a `Cast` folded into the `If` it
/// feeds): it runs inside them, where they run.
fn fused_into(node: &Node<'_>) -> Option<String> {
    let into = &node.off_preferred;
    (!into.is_empty() && !into.contains(&node.name))
        .then(|| format!("fused into {} by ONNX Runtime's graph optimizations: it runs inside it", into.join(", ")))
}

/// The QNN EP's reason for not taking a node, from its op trace: where the log gave none (a log
/// at warning level, a truncated one, a compiled model's run), the trace still has it — a compiled
/// model's, recorded by `npugate compile` with the compile log's reasons.
fn traced_reason(trace: &QnnTrace, node: &Node<'_>) -> Option<String> {
    let reason = trace.reason(node.name).or_else(|| node.run_nodes.iter().find_map(|run| trace.reason(run)))?;
    Some(match trace.source {
        TraceSource::Session => format!("{reason} (QNN EP op trace)"),
        TraceSource::Compile => format!("{reason} (recorded when the model was compiled)"),
    })
}
