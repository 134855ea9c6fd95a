//! QNN's ops set against the model's own nodes. The EP's op trace ([`QnnTrace`]) names each QNN
//! op's ONNX sources as the graph the EP was given names them (after ONNX Runtime's load-time
//! fusions and layout transformation: `conv1_token_1`, `MatMul_6/MatMulAddFusion`); [`Coverage`]
//! traces those to the model's nodes, as it does for FLOPs. An op ONNX Runtime inserted (a layout
//! `Transpose` and its Q/DQ) stands for no model node: it is counted with the op it feeds, else the
//! one it follows, in QNN's graph (its tensors). QNN's profile adds each op's time; an op the
//! profile names but the trace does not (no trace: an older onnxruntime-qnn) is traced by its name.
//!
//! A model node's share of the ops' time ([`BackendShare`]) is each op's value shared among the
//! op's model nodes in proportion to their FLOPs, evenly where none are known.

use std::collections::HashMap;

use npugate_result::{ModelGraph, QnnTrace, QnnTraceOp, TraceSource};

use crate::coverage::Coverage;
use crate::qnn_csv::{GraphIoOp, ProfiledOp, QnnProfile};
use crate::report::{BackendShare, OpAttribution, Partition, QnnOp, QnnOpsSummary};

/// What the ops are set against.
pub struct OpsInputs<'a> {
    /// Run node → model nodes.
    pub coverage: &'a Coverage<'a>,
    /// The model's node names, in the coverage's order.
    pub names: &'a [&'a str],
    /// Their FLOPs (`None`: unknown).
    pub flops: &'a [Option<u64>],
    /// The EP's op trace.
    pub trace: Option<&'a QnnTrace>,
    /// QNN's profile.
    pub profile: Option<&'a QnnProfile>,
    /// Why the times are an emulator's, when they are.
    pub emulated: Option<&'a str>,
}

/// The ops with the partitions they belong to; model nodes' shares of their time.
pub struct AttributedOps {
    /// The summary for the report; `None` when there is no op.
    pub summary: Option<QnnOpsSummary>,
    /// Per model node (coverage order): its share of the ops' time.
    pub shares: Vec<Option<BackendShare>>,
    /// Ops that belong to no partition, and other observations.
    pub warnings: Vec<String>,
}

/// One op while it is attributed: its report entry, its graph and its tensors.
struct Pending<'a> {
    op: QnnOp,
    graph: Option<&'a str>,
    traced: Option<&'a QnnTraceOp>,
    nodes: Vec<usize>,
}

/// Lists every QNN op in its partition's `backend_ops`, with the model nodes it came from and its time.
pub fn attach(partitions: &mut [Partition], inputs: &OpsInputs<'_>) -> AttributedOps {
    let mut ops = trace_ops(inputs);
    if let Some(profile) = inputs.profile {
        add_profiled(&mut ops, profile, inputs);
    }
    attribute_adjacent(&mut ops);
    let mut warnings = Vec::new();
    let shares = shares(&ops, inputs.flops);
    let summary = (!ops.is_empty()).then(|| QnnOpsSummary {
        sources: match inputs.trace.map(|t| t.source) {
            Some(TraceSource::Session) => "trace",
            Some(TraceSource::Compile) => "compile_trace",
            None => "names",
        }
        .into(),
        ops: ops.len(),
        attributed: ops.iter().filter(|o| !o.nodes.is_empty()).count(),
        executes: inputs.profile.map_or(0, |p| p.executes),
        emulated: inputs.emulated.filter(|_| inputs.profile.is_some()).map(|what| {
            format!("emulated, never a device estimate: the emulator's cycles follow this machine's time ({what})")
        }),
    });
    let qnn: Vec<usize> = (0..partitions.len()).filter(|&i| partitions[i].ep.starts_with("QNN")).collect();
    let mut unplaced = Vec::new();
    for pending in ops {
        let by_graph = pending.graph.and_then(|g| qnn.iter().copied().find(|&i| partitions[i].fused_name == g));
        let by_node =
            || qnn.iter().copied().find(|&i| pending.op.model_nodes.iter().any(|n| partitions[i].nodes.contains(n)));
        let only = || match qnn.as_slice() {
            [only] => Some(*only),
            _ => None,
        };
        match by_graph.or_else(by_node).or_else(only) {
            Some(i) => partitions[i].backend_ops.push(pending.op),
            None => unplaced.push(pending.op.name),
        }
    }
    if !unplaced.is_empty() {
        let shown: Vec<&str> = unplaced.iter().take(8).map(String::as_str).collect();
        warnings.push(format!("QNN ops: {} op(s) match no partition: {}", unplaced.len(), shown.join(", ")));
    }
    AttributedOps { summary, shares, warnings }
}

/// `trace` with each op's ONNX sources named as the model nodes of `graph` they stand for (a name
/// that stands for none is kept). `npugate compile` records a trace so: the runs of the compiled
/// model count in its source model's nodes, not in the graph the compile's EP was given.
pub fn resolve_sources(trace: &QnnTrace, graph: &ModelGraph) -> QnnTrace {
    let coverage =
        Coverage::new(graph.nodes.iter().map(|n| n.name.as_str()), graph.partitioned.iter().flat_map(|p| &p.groups));
    let mut resolved = trace.clone();
    for op in resolved.graphs.iter_mut().flat_map(|g| &mut g.ops) {
        let mut sources: Vec<String> = Vec::new();
        for source in &op.sources {
            let nodes = coverage.model_nodes(source);
            let names = match nodes.is_empty() {
                true => vec![source.clone()],
                false => nodes.iter().map(|&i| graph.nodes[i].name.clone()).collect(),
            };
            for name in names {
                if !sources.contains(&name) {
                    sources.push(name);
                }
            }
        }
        op.sources = sources;
    }
    resolved
}

/// The trace's ops, in its order, each with the model nodes its sources stand for.
fn trace_ops<'a>(inputs: &OpsInputs<'a>) -> Vec<Pending<'a>> {
    let Some(trace) = inputs.trace else { return Vec::new() };
    trace
        .graphs
        .iter()
        .flat_map(|graph| graph.ops.iter().map(move |op| (graph, op)))
        .map(|(graph, op)| {
            let nodes = inputs.coverage.union(op.sources.iter().map(String::as_str));
            Pending {
                op: QnnOp {
                    name: op.name.clone(),
                    op_id: None,
                    qnn_type: op.qnn_type.clone(),
                    model_nodes: Vec::new(),
                    attribution: if nodes.is_empty() { OpAttribution::Unattributed } else { OpAttribution::Traced },
                    sources: op.sources.clone(),
                    value: None,
                    unit: String::new(),
                },
                graph: Some(graph.name.as_str()),
                traced: Some(op),
                nodes,
            }
            .named(inputs.names)
        })
        .collect()
}

impl<'a> Pending<'a> {
    /// Fills the report's model node names from `nodes`.
    fn named(mut self, names: &[&str]) -> Pending<'a> {
        self.op.model_nodes = self.nodes.iter().map(|&i| names[i].to_string()).collect();
        self
    }
}

/// Gives each traced op its profiled time, and adds the ops only the profile names.
fn add_profiled<'a>(ops: &mut Vec<Pending<'a>>, profile: &QnnProfile, inputs: &OpsInputs<'a>) {
    let by_name: HashMap<String, usize> = ops.iter().enumerate().map(|(i, o)| (o.op.name.clone(), i)).collect();
    for profiled in &profile.ops {
        if let Some(&i) = profiled.op.name.as_ref().and_then(|n| by_name.get(n)) {
            let op = &mut ops[i].op;
            if op.value.is_none() {
                (op.op_id, op.value, op.unit) = (profiled.op.op_id, Some(profiled.value), profiled.unit.clone());
            }
            continue;
        }
        ops.push(profiled_only(profiled, inputs).named(inputs.names));
    }
}

/// An op the profile names and the trace does not: QNN's graph input/output, an op without a
/// name, or (no trace) any op, traced by its ONNX sources column or its name.
fn profiled_only<'a>(profiled: &ProfiledOp, inputs: &OpsInputs<'_>) -> Pending<'a> {
    let (name, attribution, nodes, sources) = match (&profiled.op.name, profiled.op.graph_io) {
        (_, Some(io)) => {
            let name = match io {
                GraphIoOp::Input => "Input",
                GraphIoOp::Output => "Output",
            };
            (
                format!("{name} OpId_{}", profiled.op.op_id.unwrap_or_default()),
                OpAttribution::GraphIo,
                Vec::new(),
                Vec::new(),
            )
        }
        (None, None) => (
            format!("OpId_{}", profiled.op.op_id.unwrap_or_default()),
            OpAttribution::Unattributed,
            Vec::new(),
            Vec::new(),
        ),
        (Some(name), None) => {
            let sources = match profiled.sources.is_empty() {
                true => vec![name.clone()],
                false => profiled.sources.clone(),
            };
            let nodes = inputs.coverage.union(sources.iter().map(String::as_str));
            let how = if nodes.is_empty() { OpAttribution::Unattributed } else { OpAttribution::Named };
            (name.clone(), how, nodes, sources)
        }
    };
    Pending {
        op: QnnOp {
            name,
            op_id: profiled.op.op_id,
            qnn_type: String::new(),
            model_nodes: Vec::new(),
            attribution,
            sources,
            value: Some(profiled.value),
            unit: profiled.unit.clone(),
        },
        graph: None,
        traced: None,
        nodes,
    }
}

/// Ops without model nodes take those of the op they feed, else the one they follow, in QNN's
/// graph (repeated, so a chain of inserted ops reaches a traced one).
fn attribute_adjacent(ops: &mut [Pending<'_>]) {
    let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut producers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        let Some(traced) = op.traced else { continue };
        for input in &traced.inputs {
            consumers.entry(input.as_str()).or_default().push(i);
        }
        for output in &traced.outputs {
            producers.entry(output.as_str()).or_default().push(i);
        }
    }
    loop {
        let mut changed = false;
        for i in 0..ops.len() {
            let Some(traced) = ops[i].traced.filter(|_| ops[i].nodes.is_empty()) else { continue };
            let fed = traced.outputs.iter().flat_map(|t| consumers.get(t.as_str()).into_iter().flatten());
            let followed = traced.inputs.iter().flat_map(|t| producers.get(t.as_str()).into_iter().flatten());
            let Some(&neighbour) = fed.chain(followed).find(|&&j| j != i && !ops[j].nodes.is_empty()) else {
                continue;
            };
            let (nodes, names) = (ops[neighbour].nodes.clone(), ops[neighbour].op.model_nodes.clone());
            ops[i].nodes = nodes;
            ops[i].op.model_nodes = names;
            ops[i].op.attribution = OpAttribution::Adjacent;
            changed = true;
        }
        if !changed {
            return;
        }
    }
}

/// Each model node's share of the profiled ops' values, in the unit most ops use.
fn shares(ops: &[Pending<'_>], flops: &[Option<u64>]) -> Vec<Option<BackendShare>> {
    let mut shares: Vec<Option<BackendShare>> = vec![None; flops.len()];
    let Some(unit) = ops.iter().find(|o| o.op.value.is_some()).map(|o| o.op.unit.clone()) else { return shares };
    for op in ops.iter().filter(|o| o.op.unit == unit && !o.nodes.is_empty()) {
        let Some(value) = op.op.value else { continue };
        let known: u64 = op.nodes.iter().filter_map(|&n| flops[n]).sum();
        for &node in &op.nodes {
            let part = match known {
                0 => value / op.nodes.len() as f64,
                _ => value * flops[node].unwrap_or(0) as f64 / known as f64,
            };
            let share = shares[node].get_or_insert_with(|| BackendShare { value: 0.0, unit: unit.clone() });
            share.value += part;
        }
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qnn_csv::parse_qnn_csv;
    use npugate_result::{FusionGroup, QnnGraphTrace};

    fn op(name: &str, sources: &[&str], inputs: &[&str], outputs: &[&str]) -> QnnTraceOp {
        let strings = |s: &[&str]| s.iter().map(|s| s.to_string()).collect();
        QnnTraceOp {
            name: name.into(),
            qnn_type: "T".into(),
            group: "OrtNodeUnit".into(),
            sources: strings(sources),
            inputs: strings(inputs),
            outputs: strings(outputs),
        }
    }

    fn partition(nodes: &[&str]) -> Partition {
        Partition {
            ep: "QNNExecutionProvider".into(),
            fused_name: "G".into(),
            nodes: nodes.iter().map(|s| s.to_string()).collect(),
            flops: 0,
            time: None,
            backend_ops: Vec::new(),
            graph: None,
            phase: None,
        }
    }

    /// A QDQ conv with a layout transpose ONNX Runtime inserted before it, and a MatMul+Add fused
    /// into `mm/MatMulAddFusion` at load.
    #[test]
    fn every_op_reaches_the_model_nodes_it_came_from() {
        let names = ["x_dq", "conv", "y_q", "mm", "add"];
        let groups =
            [FusionGroup { kernels: vec!["mm/MatMulAddFusion".into()], nodes: vec!["mm".into(), "add".into()] }];
        let coverage = Coverage::new(names, &groups);
        let trace = QnnTrace {
            source: TraceSource::Session,
            schema_version: 2,
            graphs: vec![QnnGraphTrace {
                name: "G".into(),
                ops: vec![
                    op("Transpose_token_4", &["DequantizeLinear_token_5", "Transpose_token_4"], &["x"], &["t"]),
                    op("conv_token_1", &["x_dq", "conv_token_1", "y_q"], &["t", "w"], &["y"]),
                    op("mm/MatMulAddFusion_2", &["mm/MatMulAddFusion"], &["y"], &["z"]),
                ],
            }],
            unsupported: Vec::new(),
        };
        let csv = format!(
            "{},ONNX Source Ops\n0,NODE,10,CYCLES,BACKEND,SUB-EVENT,Input OpId_2 (cycles),\n\
             0,NODE,100,CYCLES,BACKEND,SUB-EVENT,Transpose_token_4:OpId_17 (cycles),x\n\
             0,NODE,3000,CYCLES,BACKEND,SUB-EVENT,conv_token_1:OpId_23 (cycles),x_dq;conv_token_1;y_q\n\
             0,NODE,7,CYCLES,BACKEND,SUB-EVENT,OpId_24 (cycles),\n\
             0,NODE,600,CYCLES,BACKEND,SUB-EVENT,mm/MatMulAddFusion_2:OpId_30 (cycles),mm/MatMulAddFusion\n",
            crate::qnn_csv::QNN_CSV_HEADER
        );
        let profile = parse_qnn_csv(csv.as_bytes()).unwrap();
        let flops = [Some(0), Some(1000), Some(0), Some(400), Some(200)];
        let mut partitions = [partition(&names)];
        let attributed = attach(
            &mut partitions,
            &OpsInputs {
                coverage: &coverage,
                names: &names,
                flops: &flops,
                trace: Some(&trace),
                profile: Some(&profile),
                emulated: Some("Qualcomm's HTP emulator"),
            },
        );
        let ops = &partitions[0].backend_ops;
        let seen: Vec<(&str, Vec<&str>, OpAttribution, Option<f64>)> = ops
            .iter()
            .map(|o| (o.name.as_str(), o.model_nodes.iter().map(String::as_str).collect(), o.attribution, o.value))
            .collect();
        assert_eq!(
            seen,
            [
                ("Transpose_token_4", vec!["x_dq", "conv", "y_q"], OpAttribution::Adjacent, Some(100.0)),
                ("conv_token_1", vec!["x_dq", "conv", "y_q"], OpAttribution::Traced, Some(3000.0)),
                ("mm/MatMulAddFusion_2", vec!["mm", "add"], OpAttribution::Traced, Some(600.0)),
                ("Input OpId_2", vec![], OpAttribution::GraphIo, Some(10.0)),
                ("OpId_24", vec![], OpAttribution::Unattributed, Some(7.0)),
            ]
        );
        assert_eq!(ops[1].op_id, Some(23));
        let summary = attributed.summary.unwrap();
        assert_eq!((summary.sources.as_str(), summary.ops, summary.attributed), ("trace", 5, 3));
        assert!(summary.emulated.unwrap().contains("never a device estimate"));
        // The conv's model node holds its op and the transpose inserted for it; MatMul+Add share by FLOPs.
        let value = |i: usize| attributed.shares[i].as_ref().map(|s| s.value);
        assert_eq!((value(1), value(3), value(4)), (Some(3100.0), Some(400.0), Some(200.0)));
        assert_eq!(value(0), Some(0.0));
    }

    #[test]
    fn without_a_trace_ops_are_traced_by_name() {
        let names = ["conv1", "relu1"];
        let coverage = Coverage::new(names, &[]);
        let csv = format!(
            "{}\n0,NODE,5,CYCLES,BACKEND,SUB-EVENT,conv1_token_1:OpId_23 (cycles)\n0,NODE,1,CYCLES,BACKEND,SUB-EVENT,q::flat:OpId_9 (cycles)\n",
            crate::qnn_csv::QNN_CSV_HEADER
        );
        let profile = parse_qnn_csv(csv.as_bytes()).unwrap();
        let mut partitions = [partition(&names), Partition { fused_name: "H".into(), ..partition(&[]) }];
        let inputs = OpsInputs {
            coverage: &coverage,
            names: &names,
            flops: &[None, None],
            trace: None,
            profile: Some(&profile),
            emulated: None,
        };
        let attributed = attach(&mut partitions, &inputs);
        assert_eq!(partitions[0].backend_ops[0].model_nodes, ["conv1"]);
        assert_eq!(partitions[0].backend_ops[0].attribution, OpAttribution::Named);
        assert!(attributed.warnings[0].contains("1 op(s) match no partition: q::flat"), "{:?}", attributed.warnings);
        assert_eq!(attributed.summary.unwrap().sources, "names");
        assert!(partitions[1].backend_ops.is_empty());
    }
}
