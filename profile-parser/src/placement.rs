//! Joins the assignment (authority on placement), the reference pass (shapes → FLOPs), the profile
//! (time, partitions, boundaries), the log (rejection reasons) and QNN's CSV into a [`PlacementReport`].

use std::collections::{BTreeMap, HashMap};

use npugate_result::{Assignment, Fusions};
use npugate_stats::median;

use crate::flops::{node_flops, FlopsError, KNOWN_ZERO_OPS};
use crate::hints::fallback_hint;
use crate::ort_log::RejectionReasons;
use crate::profile::{Profile, ProfiledNode};
use crate::shape::TensorShape;
use crate::qnn_csv::QnnProfile;
use crate::report::{
    Boundaries, EpShare, FallbackNode, NodePlacement, Partition, PlacementReport, TimeStats, Totals, Transition,
    PLACEMENT_SCHEMA,
};

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
#[derive(Debug, Clone, Copy)]
pub struct PlacementInputs<'a> {
    /// sha256 of the model.
    pub model_sha256: &'a str,
    /// The EP the model should run on.
    pub preferred_ep: &'a str,
    /// `Session_GetEpGraphAssignmentInfo`: original nodes per EP subgraph.
    pub assignment: &'a Assignment,
    /// Profile of the profiled pass (same EP configuration).
    pub profile: Option<&'a Profile>,
    /// Profile of the reference pass (CPU EP, optimizations off): per-node shapes.
    pub reference: Option<&'a Profile>,
    /// Rejection reasons from the verbose log.
    pub rejections: Option<&'a RejectionReasons>,
    /// QNN's per-op profiling.
    pub qnn: Option<&'a QnnProfile>,
    /// Graph inputs/outputs, to recognise graph-I/O quantization placed on CPU by design.
    pub graph_io: &'a GraphIo,
    /// Set when the placement is a prediction (e.g. the QNN Saver backend executed nothing).
    pub predicted: Option<&'a str>,
    /// Kernels of the profiled session traced to the original nodes they replaced.
    pub fusions: Option<&'a Fusions>,
}

/// One original node while the report is assembled.
struct Node<'a> {
    name: &'a str,
    op_type: &'a str,
    domain: &'a str,
    ep: &'a str,
    reference: Option<&'a ProfiledNode>,
    /// True when the reference pass ran it (or it counts 0 FLOPs anyway).
    flops: Option<u64>,
    profile_ep: Option<&'a str>,
    time_us_per_run: Option<f64>,
}

/// Computes the placement report.
pub fn build_report(inputs: &PlacementInputs<'_>) -> PlacementReport {
    let mut warnings = Vec::new();
    let mut nodes = original_nodes(inputs, &mut warnings);
    let partitions = match inputs.profile {
        Some(profile) => match_partitions(inputs.assignment, profile, &mut warnings),
        None => Vec::new(),
    };
    if let Some(profile) = inputs.profile {
        witness_placement(&mut nodes, &partitions, profile, inputs, &mut warnings);
        check_profile_model(profile, inputs.graph_io, &mut warnings);
        warnings.extend(profile.warnings.iter().map(|w| format!("profile: {w}")));
    }
    let total_flops = flops_sum(nodes.iter());
    let per_ep = ep_shares(&nodes, inputs.profile, total_flops);
    let preferred = per_ep.iter().find(|s| s.ep == inputs.preferred_ep);
    let fallback = fallback_list(&nodes, inputs, total_flops);
    let mut report_partitions: Vec<Partition> =
        partitions.iter().map(|p| p.to_report(&nodes, inputs.profile)).collect();
    if let Some(qnn) = inputs.qnn {
        attach_backend_ops(&mut report_partitions, qnn, &mut warnings);
    }
    PlacementReport {
        schema: PLACEMENT_SCHEMA.to_string(),
        model_sha256: inputs.model_sha256.to_string(),
        preferred_ep: inputs.preferred_ep.to_string(),
        predicted: inputs.predicted.map(str::to_string),
        runs_profiled: inputs.profile.map_or(0, |p| p.runs.len()),
        totals: Totals {
            nodes: nodes.len(),
            flops: total_flops,
            flops_unknown_nodes: nodes.iter().filter(|n| n.flops.is_none()).count(),
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
        nodes: nodes.iter().map(Node::to_report).collect(),
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
            ep: self.ep.to_string(),
            input_shapes: shape_strings(self.reference.map(|r| r.input_shapes.as_slice())),
            output_shapes: shape_strings(self.reference.map(|r| r.output_shapes.as_slice())),
            flops: self.flops,
            profile_ep: self.profile_ep.map(str::to_string),
            time_us_per_run: self.time_us_per_run,
        }
    }
}

fn shape_strings(shapes: Option<&[TensorShape]>) -> Vec<String> {
    shapes.unwrap_or_default().iter().map(TensorShape::to_string).collect()
}

/// Sum of the known FLOPs, saturating (absurd shapes in a damaged profile must not overflow).
fn flops_sum<'n, 'a: 'n>(nodes: impl Iterator<Item = &'n Node<'a>>) -> u64 {
    nodes.filter_map(|n| n.flops).fold(0, u64::saturating_add)
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// Assigned nodes joined with their reference shapes by name, FLOPs computed; join failures become
/// warnings. For an EP with a preferred layout the assignment is taken after the layout
/// transformation, which renames nodes `<name>_token_<n>` and inserts `Transpose` nodes: a name is
/// also tried without that suffix, and an inserted node of a known-zero op counts 0 FLOPs.
fn original_nodes<'a>(inputs: &PlacementInputs<'a>, warnings: &mut Vec<String>) -> Vec<Node<'a>> {
    let reference: HashMap<&str, &ProfiledNode> =
        inputs.reference.map(|r| r.nodes.iter().map(|n| (n.name.as_str(), n)).collect()).unwrap_or_default();
    let mut unknown_ops: BTreeMap<&str, usize> = BTreeMap::new();
    let mut nodes = Vec::new();
    for subgraph in &inputs.assignment.subgraphs {
        for assigned in &subgraph.nodes {
            let found = reference
                .get(assigned.name.as_str())
                .or_else(|| reference.get(strip_token_suffix(&assigned.name)))
                .copied();
            let flops = match found {
                Some(r) => match node_flops(&assigned.op_type, &r.input_shapes, &r.output_shapes) {
                    Ok(f) => Some(f),
                    Err(FlopsError::UnknownOp(_)) => {
                        *unknown_ops.entry(assigned.op_type.as_str()).or_default() += 1;
                        None
                    }
                    Err(err) => {
                        warnings.push(format!("{err} (node {})", assigned.name));
                        None
                    }
                },
                None => KNOWN_ZERO_OPS.contains(&assigned.op_type.as_str()).then_some(0),
            };
            nodes.push(Node {
                name: &assigned.name,
                op_type: &assigned.op_type,
                domain: &assigned.domain,
                ep: &subgraph.ep,
                reference: found,
                flops,
                profile_ep: None,
                time_us_per_run: None,
            });
        }
    }
    for (op, count) in unknown_ops {
        warnings.push(format!("FLOPs unknown for {op} ({count} node(s))"));
    }
    let joined = nodes.iter().filter(|n| n.reference.is_some()).count();
    match inputs.reference {
        None => warnings.push("no reference profile: node shapes and FLOPs are unknown".to_string()),
        Some(_) if joined == 0 && !nodes.is_empty() => warnings.push(format!(
            "{n} of {n} assigned node(s) are not in the reference profile (shapes and FLOPs unknown); is the reference profile from another model?",
            n = nodes.len()
        )),
        Some(_) => {}
    }
    nodes
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
    /// Index of the first node of the subgraph in the flattened node list, and its node count.
    nodes: std::ops::Range<usize>,
}

impl MatchedPartition {
    fn to_report(&self, nodes: &[Node<'_>], profile: Option<&Profile>) -> Partition {
        let inside = &nodes[self.nodes.clone()];
        Partition {
            ep: self.ep.clone(),
            fused_name: self.fused_name.clone(),
            nodes: inside.iter().map(|n| n.name.to_string()).collect(),
            flops: flops_sum(inside.iter()),
            time: profile.and_then(|p| TimeStats::from_samples(&p.node_time_per_run(self.fused_node))),
            backend_ops: Vec::new(),
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
/// counts differ the common prefix is matched and a warning says so.
fn match_partitions(assignment: &Assignment, profile: &Profile, warnings: &mut Vec<String>) -> Vec<MatchedPartition> {
    let mut fused_by_ep: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, node) in profile.nodes.iter().enumerate() {
        if is_fused_partition(node) {
            fused_by_ep.entry(node.provider.as_str()).or_default().push(index);
        }
    }
    let mut subgraph_ranges: BTreeMap<&str, Vec<std::ops::Range<usize>>> = BTreeMap::new();
    let mut start = 0;
    for subgraph in &assignment.subgraphs {
        let end = start + subgraph.nodes.len();
        subgraph_ranges.entry(subgraph.ep.as_str()).or_default().push(start..end);
        start = end;
    }
    let mut matched = Vec::new();
    for (ep, mut fused) in fused_by_ep {
        fused.sort_by_key(|&i| fused_id(&profile.nodes[i].name));
        let ranges = subgraph_ranges.get(ep).cloned().unwrap_or_default();
        if ranges.len() != fused.len() {
            warnings.push(format!(
                "{ep}: profile has {} fused partition node(s) but the assignment has {} subgraph(s); matched the first {}",
                fused.len(),
                ranges.len(),
                fused.len().min(ranges.len())
            ));
        }
        for (fused_node, range) in fused.into_iter().zip(ranges) {
            matched.push(MatchedPartition {
                ep: ep.to_string(),
                fused_node,
                fused_name: profile.nodes[fused_node].name.clone(),
                nodes: range,
            });
        }
    }
    matched
}

/// The name a layout-transformed kernel had before ORT appended `_token_<n>`.
pub fn strip_token_suffix(name: &str) -> &str {
    match name.rsplit_once("_token_") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    }
}

/// Records where the profile shows each node ran, and per-node time.
///
/// Nodes inside a matched partition ran where the partition's fused event ran. Other nodes are
/// found by kernel name, exactly or after dropping a `_token_<n>` suffix (layout transformation),
/// else through the traced fusions ([`Fusions`]): a group's kernel time is shared by its original
/// nodes in proportion to their FLOPs, and a group without kernels was folded away (no time per
/// run). A node that neither profile saw did not run at all (an `If` branch not taken): 0 FLOPs, no
/// time. What remains unexplained is counted in one line each, never listed.
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
    // A reference pass that knows none of the nodes is of another model: it cannot tell which ran.
    let reference_knows_the_model = nodes.iter().any(|n| n.reference.is_some());
    let mut in_partition = vec![false; nodes.len()];
    for partition in partitions {
        for index in partition.nodes.clone() {
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
        .map(|f| f.groups.iter().enumerate().flat_map(|(g, group)| group.nodes.iter().map(move |n| (n.as_str(), g))).collect())
        .unwrap_or_default();
    let mut individual_eps = profile.nodes.iter().filter(|k| !is_fused_partition(k)).map(|k| k.provider.as_str());
    let only_individual_ep = individual_eps.next().filter(|first| individual_eps.all(|ep| ep == *first));
    let (mut folded, mut not_run, mut unattributed) = (0, 0, 0);
    let mut group_members: HashMap<usize, Vec<usize>> = HashMap::new();
    for (index, node) in nodes.iter_mut().enumerate() {
        if in_partition[index] {
            continue;
        }
        if let Some(kernels) = kernels_by_name.get(node.name).filter(|_| !group_of.contains_key(node.name)) {
            (node.time_us_per_run, node.profile_ep) = kernel_time(kernels);
        } else if let Some(&group) = group_of.get(node.name) {
            group_members.entry(group).or_default().push(index);
        } else if reference_knows_the_model && node.reference.is_none() {
            not_run += 1;
            node.flops = Some(0);
        } else {
            unattributed += 1;
            node.profile_ep = only_individual_ep;
        }
    }
    let groups = inputs.fusions.map(|f| f.groups.as_slice()).unwrap_or_default();
    for (group, members) in group_members {
        let kernels: Vec<usize> = groups[group].kernels.iter().filter_map(|k| kernel_named.get(k.as_str())).copied().collect();
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
    if not_run > 0 {
        warnings.push(format!("{not_run} node(s) did not run in the profiled passes (e.g. If/Loop branches not taken): 0 FLOPs, no time"));
    }
    if folded > 0 {
        warnings.push(format!("{folded} node(s) were folded away by graph optimizations: no time per run"));
    }
    if unattributed > 0 {
        warnings.push(format!(
            "{unattributed} node(s) have no kernel of their own in the profile (fused or renamed by graph optimizations): \
             their time counts in their EP's total only"
        ));
    }
    let disagreeing: Vec<&str> =
        nodes.iter().filter(|n| n.profile_ep.is_some_and(|p| p != n.ep)).map(|n| n.name).collect();
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
    let consumes_input = first_run.iter().any(|e| {
        profile.node_of(e).input_shapes.iter().any(|s| io.inputs.iter().any(|i| dims_match(i, &s.dims)))
    });
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

/// Summed kernel time per run of the kernels `keep` selects.
fn per_run_time(profile: &Profile, keep: impl Fn(&ProfiledNode) -> bool) -> Vec<f64> {
    profile
        .run_executions()
        .map(|run| run.iter().filter(|e| keep(profile.node_of(e))).map(|e| f64::from(e.dur_us)).sum())
        .collect()
}

/// Per-EP nodes, FLOPs and time. Node and FLOP counts come from the assignment; time from the
/// profile's kernels grouped by `args.provider`. `time_pct` is the EP's share of all kernel time
/// summed over the profiled runs (so shares add up to 100 %); `time_us_per_run` is the median
/// over runs of the EP's per-run sum.
fn ep_shares(nodes: &[Node<'_>], profile: Option<&Profile>, total_flops: u64) -> Vec<EpShare> {
    let mut eps: Vec<&str> = nodes.iter().map(|n| n.ep).collect();
    if let Some(p) = profile {
        eps.extend(p.nodes.iter().map(|n| n.provider.as_str()));
    }
    eps.sort_unstable();
    eps.dedup();
    let total_time: f64 = profile.map_or(0.0, |p| per_run_time(p, |_| true).iter().sum());
    let mut shares: Vec<EpShare> = eps
        .into_iter()
        .map(|ep| {
            let on_ep: Vec<&Node<'_>> = nodes.iter().filter(|n| n.ep == ep).collect();
            let flops = flops_sum(on_ep.iter().copied());
            let ep_time = profile.map(|p| per_run_time(p, |k| k.provider == ep));
            EpShare {
                ep: ep.to_string(),
                nodes: on_ep.len(),
                nodes_pct: percent(on_ep.len() as f64, nodes.len() as f64),
                flops,
                flops_pct: percent(flops as f64, total_flops as f64),
                time_us_per_run: ep_time.as_deref().and_then(median),
                time_pct: ep_time.map(|t| percent(t.iter().sum(), total_time)),
            }
        })
        .collect();
    shares.sort_by(|a, b| b.flops.cmp(&a.flops).then(b.nodes.cmp(&a.nodes)).then(a.ep.cmp(&b.ep)));
    shares
}

/// Every node not on the preferred EP, most FLOPs first (unknown FLOPs last), then by time.
fn fallback_list(nodes: &[Node<'_>], inputs: &PlacementInputs<'_>, total_flops: u64) -> Vec<FallbackNode> {
    let reference_order: Vec<&ProfiledNode> = inputs
        .reference
        .map(|r| r.run(0).iter().map(|e| r.node_of(e)).collect())
        .unwrap_or_default();
    let mut list: Vec<FallbackNode> = nodes
        .iter()
        .filter(|n| n.ep != inputs.preferred_ep)
        .map(|n| {
            let input_shapes = shape_strings(n.reference.map(|r| r.input_shapes.as_slice()));
            let expected = inputs.preferred_ep != CPU_EP && is_graph_io_quantization(n, &reference_order, inputs.graph_io);
            let reason = inputs.rejections.and_then(|r| r.reason(n.name));
            FallbackNode {
                name: n.name.to_string(),
                op_type: n.op_type.to_string(),
                ep: n.ep.to_string(),
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

/// Whether a node is graph-input quantization or graph-output dequantization.
///
/// The profile has no tensor names, so this uses shapes and the reference run's execution order:
/// a `QuantizeLinear` whose input is shaped like a graph input and before which only Q/DQ kernels
/// ran, or a `DequantizeLinear` whose output is shaped like a graph output and after which only
/// `DequantizeLinear` kernels ran. A graph output produced early in a multi-output model is missed.
fn is_graph_io_quantization(node: &Node<'_>, reference_order: &[&ProfiledNode], io: &GraphIo) -> bool {
    let Some(reference) = node.reference else { return false };
    let Some(position) = reference_order.iter().position(|r| std::ptr::eq(*r, reference)) else { return false };
    let is_qdq = |r: &&ProfiledNode| matches!(r.op_type.as_str(), "QuantizeLinear" | "DequantizeLinear");
    match node.op_type {
        "QuantizeLinear" => {
            reference.input_shapes.first().is_some_and(|s| io.inputs.iter().any(|i| dims_match(i, &s.dims)))
                && reference_order[..position].iter().all(is_qdq)
        }
        "DequantizeLinear" => {
            reference.output_shapes.first().is_some_and(|s| io.outputs.iter().any(|o| dims_match(o, &s.dims)))
                && reference_order[position + 1..].iter().all(|r| r.op_type == "DequantizeLinear")
        }
        _ => false,
    }
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
                            let same = profile.node_of(&run[p]).name == a.name && profile.node_of(&run[p + 1]).name == b.name;
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
    let totals: Vec<f64> = switch_gaps.iter().filter(|g| !g.is_empty()).map(|g| g.iter().map(|(_, t)| t).sum()).collect();
    Boundaries { per_run, transitions, gap_us_per_run: median(&totals), same_ep_gap_us: median(&same_ep_gaps) }
}

/// Attaches QNN's per-op times to the partition holding a node of the same name; with a single
/// partition of the EP every op goes there. Unplaceable ops are reported.
fn attach_backend_ops(partitions: &mut [Partition], qnn: &QnnProfile, warnings: &mut Vec<String>) {
    let qnn_partitions: Vec<usize> = (0..partitions.len()).filter(|&i| partitions[i].ep.starts_with("QNN")).collect();
    let mut unplaced = Vec::new();
    for op in &qnn.ops {
        let by_name = qnn_partitions.iter().copied().find(|&i| partitions[i].nodes.contains(&op.name));
        match by_name.or(match qnn_partitions.as_slice() {
            [only] => Some(*only),
            _ => None,
        }) {
            Some(i) => partitions[i].backend_ops.push(op.clone()),
            None => unplaced.push(op.name.as_str()),
        }
    }
    if !unplaced.is_empty() {
        warnings.push(format!("QNN profile: {} op(s) match no partition: {}", unplaced.len(), preview(&unplaced)));
    }
}
