//! Placement of an LLM model folder: a wrapper around [`build_report`] per graph and phase, merged
//! into one report of the whole model in which every graph's FLOPs and time count as often as the
//! graph runs in a generation (a prompt processor once per prompt chunk, a token generator once
//! per decode step) and every node is named after its graph (`token-generator:positions/neg1`).

use std::collections::BTreeMap;

use npugate_result::GraphRun;

use crate::placement::GraphIo;
use crate::report::{
    covered_pct, EpShare, FallbackNode, GraphPlacement, NodePlacement, Partition, PlacementReport, Totals,
    PLACEMENT_SCHEMA,
};

/// `graph:node`: a node of one graph of a model folder.
pub fn qualified(graph: &str, node: &str) -> String {
    format!("{graph}:{node}")
}

/// One graph of a model folder in one phase, with its placement.
pub struct GraphPart<'a> {
    /// The graph.
    pub graph: &'a GraphRun,
    /// `prompt` or `token`.
    pub phase: String,
    /// Runs per generation in this phase.
    pub runs: u32,
    /// Its placement ([`crate::placement::build_report`] on its assignment and this phase's profiles).
    pub report: PlacementReport,
}

/// The graph I/O of `graph`, as the placement reads it.
pub fn graph_io(graph: &GraphRun) -> GraphIo {
    GraphIo {
        inputs: graph.inputs.iter().map(|i| i.shape.clone()).collect(),
        outputs: graph.outputs.iter().map(|o| o.shape.clone()).collect(),
    }
}

/// One node of the whole model while the reports are merged.
struct Merged {
    node: NodePlacement,
    flops: Option<u64>,
    time_us: Option<f64>,
    fallback: Option<FallbackNode>,
}

/// The whole model from its (graph, phase) reports: nodes once per graph, FLOPs and time summed
/// over the phases weighted by runs per generation.
pub fn merge(digest: &str, preferred: &str, parts: &[GraphPart<'_>]) -> PlacementReport {
    let mut merging = Merging::default();
    for part in parts {
        merging.add(part);
    }
    let Merging { mut nodes, order, beside, warnings, graphs, partitions, .. } = merging;
    let merged: Vec<Merged> = order.into_iter().filter_map(|key| nodes.remove(&key)).collect();
    // The shares are of the nodes placed on an EP, as in one graph's report: a node folded away at
    // load or not run is in none.
    let placed: Vec<&Merged> = merged.iter().filter(|m| m.node.not_placed.is_none()).collect();
    let total_flops: u64 = placed.iter().filter_map(|m| m.flops).sum();
    let total_time: Option<f64> = placed.iter().map(|m| m.time_us).fold(None, add);
    let per_ep = ep_shares(&placed, total_flops, total_time);
    let preferred_share = per_ep.iter().find(|s| s.ep == preferred);
    let mut fallback = fallback_nodes(&merged, total_flops);
    // `--shape` does not apply to a folder: its shape fix is the preflight's per-phase sizing.
    let folder_hint = |hint: &mut Option<String>| {
        if hint.as_deref() == Some(crate::hints::SHAPE_HINT) {
            *hint = Some(crate::hints::FOLDER_SHAPE_HINT.into());
        }
    };
    fallback.iter_mut().for_each(|n| folder_hint(&mut n.hint));
    let mut rejections = crate::causes::aggregate(&fallback, preferred, Some(crate::hints::FOLDER_SHAPE_HINT));
    rejections.iter_mut().for_each(|c| folder_hint(&mut c.hint));
    PlacementReport {
        schema: PLACEMENT_SCHEMA.to_string(),
        model_sha256: digest.to_string(),
        preferred_ep: preferred.to_string(),
        predicted: None,
        runs_profiled: parts.iter().map(|p| p.report.runs_profiled).max().unwrap_or(0),
        totals: totals(&placed, &beside, total_flops, total_time),
        preferred_flops_pct: preferred_share.map_or(0.0, |s| s.flops_pct),
        preferred_nodes_pct: preferred_share.map_or(0.0, |s| s.nodes_pct),
        preferred_time_pct: total_time.map(|_| preferred_share.and_then(|s| s.time_pct).unwrap_or(0.0)),
        per_ep,
        partitions,
        boundaries: Default::default(),
        // A compiled folder's graphs are compiled alike: the first graph's attribution says how.
        compiled: parts.iter().find_map(|p| p.report.compiled.clone()),
        rejections,
        fallback,
        nodes: merged
            .into_iter()
            .map(|m| NodePlacement { flops: m.flops, time_us_per_run: m.time_us, ..m.node })
            .collect(),
        qnn_ops: None,
        graphs,
        warnings,
    }
}

/// The (graph, phase) reports merged so far.
#[derive(Default)]
struct Merging<'a> {
    /// Every node seen, by (graph index, node name).
    nodes: BTreeMap<(usize, String), Merged>,
    /// The nodes' keys in the order first seen.
    order: Vec<(usize, String)>,
    /// Each graph's index, by graph id, in the order first seen.
    graph_index: BTreeMap<&'a str, usize>,
    /// Per graph, what its own totals say beside the placed nodes (the same in every phase but FLOPs).
    beside: BTreeMap<usize, Beside>,
    /// The reports' warnings, each naming its graph file and phase.
    warnings: Vec<String>,
    /// One entry per (graph, phase).
    graphs: Vec<GraphPlacement>,
    /// Every report's partitions, their nodes qualified by graph.
    partitions: Vec<Partition>,
}

impl<'a> Merging<'a> {
    /// Adds one (graph, phase) report, its FLOPs and time weighted by its runs per generation.
    fn add(&mut self, part: &'a GraphPart<'_>) {
        let GraphPart { graph, phase, runs, report } = part;
        let next = self.graph_index.len();
        let index = *self.graph_index.entry(graph.id.as_str()).or_insert(next);
        let totals = &report.totals;
        let entry = self.beside.entry(index).or_default();
        entry.model_nodes = totals.model_nodes;
        entry.unattributed_nodes = entry.unattributed_nodes.max(totals.unattributed_nodes);
        entry.unattributed_flops += totals.unattributed_flops * u64::from(*runs);
        entry.unknown_estimate = match (entry.unknown_estimate, totals.flops_unknown_estimate) {
            (Some(sum), Some(estimate)) => Some(sum + estimate * u64::from(*runs)),
            (sum, estimate) => sum.or(estimate.map(|e| e * u64::from(*runs))),
        };
        entry.folded_nodes = entry.folded_nodes.max(totals.folded_nodes);
        entry.not_run_nodes = entry.not_run_nodes.max(totals.not_run_nodes);
        self.add_nodes(index, part);
        self.partitions.extend(report.partitions.iter().cloned().map(|mut p| {
            p.nodes = p.nodes.iter().map(|n| qualified(&graph.id, n)).collect();
            p.graph = Some(graph.id.clone());
            p.phase = Some(phase.clone());
            p
        }));
        self.warnings.extend(report.warnings.iter().map(|w| format!("{} ({phase}): {w}", graph.file)));
        let fallback_nodes = report.fallback.iter().filter(|f| !f.expected).count();
        self.graphs.push(GraphPlacement {
            graph: graph.id.clone(),
            file: graph.file.clone(),
            phase: phase.clone(),
            runs: *runs,
            flops_per_run: report.totals.flops,
            nodes: report.totals.nodes,
            preferred_flops_pct: report.preferred_flops_pct,
            preferred_nodes_pct: report.preferred_nodes_pct,
            fallback_nodes,
        });
    }

    /// Adds the nodes of graph `index` in `part`: a node seen in another phase gets this phase's
    /// FLOPs and time added; a new one is named after its graph, with its fallback entry if any.
    fn add_nodes(&mut self, index: usize, part: &GraphPart<'_>) {
        let GraphPart { graph, runs, report, .. } = part;
        let weight = f64::from(*runs);
        for node in &report.nodes {
            let key = (index, node.name.clone());
            let flops = node.flops.map(|f| f * u64::from(*runs));
            let time = node.time_us_per_run.map(|t| t * weight);
            match self.nodes.get_mut(&key) {
                Some(merged) => {
                    merged.flops = merged.flops.zip(flops).map(|(a, b)| a + b);
                    merged.time_us = add(merged.time_us, time);
                }
                None => {
                    let mut placed = node.clone();
                    placed.name = qualified(&graph.id, &node.name);
                    let fallback = report.fallback.iter().find(|f| f.name == node.name).cloned().map(|mut f| {
                        f.name = qualified(&graph.id, &f.name);
                        f
                    });
                    self.order.push(key.clone());
                    self.nodes.insert(key, Merged { node: placed, flops, time_us: time, fallback });
                }
            }
        }
    }
}

/// Nodes, FLOPs and time per execution provider over the placed nodes, most FLOPs first.
fn ep_shares(placed: &[&Merged], total_flops: u64, total_time: Option<f64>) -> Vec<EpShare> {
    let mut by_ep: BTreeMap<&str, (usize, u64, Option<f64>)> = BTreeMap::new();
    for m in placed {
        let entry = by_ep.entry(m.node.ep.as_str()).or_default();
        entry.0 += 1;
        entry.1 += m.flops.unwrap_or(0);
        entry.2 = add(entry.2, m.time_us);
    }
    let count = placed.len();
    let mut per_ep: Vec<EpShare> = by_ep
        .into_iter()
        .map(|(ep, (n, flops, time))| EpShare {
            ep: ep.to_string(),
            nodes: n,
            nodes_pct: percent(n as f64, count as f64),
            flops,
            flops_pct: percent(flops as f64, total_flops as f64),
            time_us_per_run: time,
            time_pct: time.zip(total_time).map(|(t, all)| percent(t, all)),
        })
        .collect();
    per_ep.sort_by(|a, b| b.flops.cmp(&a.flops).then(a.ep.cmp(&b.ep)));
    per_ep
}

/// The merged nodes that fell back, with their merged FLOPs and time, most FLOPs first.
fn fallback_nodes(merged: &[Merged], total_flops: u64) -> Vec<FallbackNode> {
    let mut fallback: Vec<FallbackNode> = merged
        .iter()
        .filter_map(|m| {
            m.fallback.clone().map(|mut f| {
                f.flops = m.flops;
                f.flops_pct = percent(m.flops.unwrap_or(0) as f64, total_flops as f64);
                f.time_us_per_run = m.time_us;
                f
            })
        })
        .collect();
    fallback.sort_by(|a, b| (b.flops.is_some(), b.flops).cmp(&(a.flops.is_some(), a.flops)).then(a.name.cmp(&b.name)));
    fallback
}

/// The whole model's totals: the placed nodes, and each graph's totals beside them summed.
fn totals(placed: &[&Merged], beside: &BTreeMap<usize, Beside>, total_flops: u64, total_time: Option<f64>) -> Totals {
    let unattributed_flops: u64 = beside.values().map(|b| b.unattributed_flops).sum();
    let model_flops = total_flops + unattributed_flops;
    let unknown_estimate = beside.values().filter_map(|b| b.unknown_estimate).reduce(|a, b| a + b);
    let flops_unknown_nodes = placed.iter().filter(|m| m.flops.is_none()).count();
    Totals {
        nodes: placed.len(),
        flops: total_flops,
        flops_unknown_nodes,
        model_nodes: beside.values().map(|b| b.model_nodes).sum(),
        model_flops,
        unattributed_nodes: beside.values().map(|b| b.unattributed_nodes).sum(),
        unattributed_flops,
        flops_unknown_estimate: unknown_estimate,
        flops_covered_pct: covered_pct(total_flops, model_flops, unknown_estimate, flops_unknown_nodes, placed.len()),
        folded_nodes: beside.values().map(|b| b.folded_nodes).sum(),
        not_run_nodes: beside.values().map(|b| b.not_run_nodes).sum(),
        time_us_per_run: total_time,
    }
}

/// One graph's totals beside its placed nodes, over its phases (unattributed FLOPs weighted by runs).
#[derive(Default)]
struct Beside {
    model_nodes: Option<usize>,
    unattributed_nodes: usize,
    unattributed_flops: u64,
    /// The estimated FLOPs of its nodes of unknown FLOPs, weighted by runs.
    unknown_estimate: Option<u64>,
    folded_nodes: usize,
    not_run_nodes: usize,
}

fn add(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}
