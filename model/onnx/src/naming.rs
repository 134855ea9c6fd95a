//! The names ONNX Runtime gives nodes that have none, and the graph-I/O quantization nodes.
//!
//! ONNX does not require node names, and exporters and converters (tflite2onnx, some paddle and
//! keras paths, onnx's own backend test models) leave them empty. ONNX Runtime keeps the empty
//! name on the node and, wherever it must show one, calls the node `<op_type>_<node index>`
//! (`onnxruntime/core/framework/sequential_executor.cc`, the profiler's `KernelScope`:
//! `node_name_ = node.Name().empty() ? MakeString(node.OpType(), "_", node.Index()) : node.Name()`).
//! The index is the node's place in its graph as loaded: `Graph::Graph` (`onnxruntime/core/graph/graph.cc`)
//! first turns every `Constant` node into an initializer and erases it from the node list
//! ("Remove constant nodes as they're replaced with initializers above"), then adds the remaining
//! nodes in file order (`for (const auto& node_proto : graph_proto_->node()) AddNode(...)`), each
//! getting the next index. So the third non-`Constant` node of a graph, an unnamed `MatMul`, is
//! `MatMul_2`; a subgraph numbers its own nodes from 0.
//!
//! [`Model::name_nodes_as_onnx_runtime`] writes those names into the model, so that every stage
//! — ONNX Runtime's node→EP assignment, its profile, the QNN EP's validation log, npugate's
//! placement and numerics — knows each node by one name.

use crate::model::Model;
use crate::proto::{GraphProto, NodeProto};
use crate::ModelIndex;

/// The op type of the nodes ONNX Runtime turns into initializers at load.
pub const CONSTANT: &str = "Constant";

/// The name ONNX Runtime gives a node: its own, or `<op_type>_<index>` where `index` is its
/// position among the non-`Constant` nodes of its graph (see the module doc).
fn onnx_runtime_name(node: &NodeProto, index: usize) -> String {
    if node.name().is_empty() {
        format!("{}_{index}", node.op_type())
    } else {
        node.name().to_string()
    }
}

/// Names the unnamed nodes of `graph` and of its subgraphs, recursively; returns how many.
fn name_graph(graph: &mut GraphProto) -> usize {
    let mut named = 0;
    let mut index = 0;
    for node in &mut graph.node {
        if node.op_type() == CONSTANT {
            // Folded into an initializer at load: ONNX Runtime never shows it, and it takes no index.
            continue;
        }
        if node.name().is_empty() {
            node.name = Some(onnx_runtime_name(node, index));
            named += 1;
        }
        index += 1;
    }
    for node in &mut graph.node {
        for attribute in &mut node.attribute {
            named += attribute.g.iter_mut().chain(attribute.graphs.iter_mut()).map(name_graph).sum::<usize>();
        }
    }
    named
}

impl Model {
    /// Gives every unnamed node of the main graph and its subgraphs the name ONNX Runtime shows
    /// for it (`<op_type>_<index>`, see the module doc) and returns how many nodes it named.
    /// `Constant` nodes keep an empty name: ONNX Runtime folds them away at load.
    pub fn name_nodes_as_onnx_runtime(&mut self) -> usize {
        self.proto_mut().graph.as_mut().map_or(0, name_graph)
    }

    /// True when a node of the main graph or of a subgraph (other than a `Constant`) has no name.
    pub fn has_unnamed_nodes(&self) -> bool {
        self.index().nodes().iter().any(|n| n.name().is_empty() && n.op_type() != CONSTANT)
    }
}

impl<'m> ModelIndex<'m> {
    /// The main graph's graph-I/O quantization nodes, in graph order: each `QuantizeLinear` that
    /// reads a graph input and each `DequantizeLinear` that writes a graph output. ONNX Runtime's
    /// QNN EP leaves these to the CPU by design (`offload_graph_io_quantization`, on by default:
    /// "QNN EP is configured to not take DQ nodes that generate a graph output").
    pub fn io_quantization(&self) -> Vec<&'m NodeProto> {
        let Some(main) = self.graphs().first() else { return Vec::new() };
        let graph = main.proto;
        let is_input = |name: &str| graph.input.iter().any(|i| i.name() == name);
        let is_output = |name: &str| graph.output.iter().any(|o| o.name() == name);
        graph
            .node
            .iter()
            .filter(|node| match node.op_type() {
                "QuantizeLinear" => node.input.first().is_some_and(|i| is_input(i)),
                "DequantizeLinear" => node.output.first().is_some_and(|o| is_output(o)),
                _ => false,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{AttributeProto, ModelProto, ValueInfoProto};

    fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
        NodeProto {
            name: (!name.is_empty()).then(|| name.to_string()),
            op_type: Some(op.into()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn value(name: &str) -> ValueInfoProto {
        ValueInfoProto { name: Some(name.into()), ..Default::default() }
    }

    #[test]
    fn unnamed_nodes_get_onnx_runtimes_names_constants_take_no_index_subgraphs_count_from_zero() {
        let branch = GraphProto {
            node: vec![node("", "Relu", &["x"], &["t"]), node("", "Neg", &["t"], &["u"])],
            ..Default::default()
        };
        let mut if_node = node("", "If", &["c"], &["y"]);
        if_node.attribute.push(AttributeProto {
            name: Some("then_branch".into()),
            g: Some(branch),
            ..Default::default()
        });
        let graph = GraphProto {
            node: vec![
                node("", "Constant", &[], &["k"]),
                node("", "QuantizeLinear", &["x", "s"], &["q"]),
                node("named", "DequantizeLinear", &["q", "s"], &["d"]),
                node("", "Constant", &[], &["k2"]),
                if_node,
                node("", "DequantizeLinear", &["d", "s"], &["out"]),
            ],
            input: vec![value("x")],
            output: vec![value("out")],
            ..Default::default()
        };
        let mut model =
            Model::from_bytes(prost::Message::encode_to_vec(&ModelProto { graph: Some(graph), ..Default::default() }))
                .unwrap();
        assert!(model.has_unnamed_nodes());
        assert_eq!(model.name_nodes_as_onnx_runtime(), 5);
        assert!(!model.has_unnamed_nodes());
        let index = model.index();
        let names: Vec<(&str, &str)> = index.nodes().iter().map(|n| (n.name(), n.op_type())).collect();
        assert_eq!(
            names,
            [
                ("", "Constant"),
                ("QuantizeLinear_0", "QuantizeLinear"),
                ("named", "DequantizeLinear"),
                ("", "Constant"),
                ("If_2", "If"),
                ("Relu_0", "Relu"),
                ("Neg_1", "Neg"),
                ("DequantizeLinear_3", "DequantizeLinear"),
            ]
        );
        let io: Vec<&str> = index.io_quantization().iter().map(|n| n.name()).collect();
        assert_eq!(
            io,
            ["QuantizeLinear_0", "DequantizeLinear_3"],
            "`named` reads a quantized tensor, not a graph input"
        );
    }
}
