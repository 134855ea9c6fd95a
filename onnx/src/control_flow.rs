//! Models with control flow (`If`, `Loop`, `Scan`: nodes holding subgraphs), as ONNX Runtime's
//! EP-context writer needs them.
//!
//! A session with `ep.context_enable=1` writes the compiled model by copying each main-graph node
//! that no EP compiled, with its attributes, and then only the initializers that a copied node
//! names as an input (`graph_partitioner.cc`, `CreateEpContextModel`: `if
//! (ep_graph.GetNodeArg(name) != nullptr) MakeInitializerCopyIfNotExist(…)`). An initializer that
//! only a subgraph reads (the outer scope of an `If` branch or a `Loop` body) is not named by any
//! main-graph node, so it is dropped, and the written model is invalid ("Nodes in a graph must be
//! topologically sorted, however input 'w' of node Gemm_34 is not output of any previous nodes").
//! A graph output is named in the main graph: [`Model::expose_outer_scope_initializers`] makes
//! each such initializer one for the compile, and [`Model::remove_outputs`] takes them off the
//! written model again.
//!
//! The writer copies a subgraph as its attribute holds it, and ONNX Runtime's optimizers add the
//! initializers they make inside a subgraph (constant folding: `Squeeze(constant)` becomes the
//! initializer `helper.squeeze.2`) to that attribute while leaving its nodes as loaded: the written
//! subgraph defines the name twice ("Duplicate definition of name (helper.squeeze.2)").
//! [`Model::subgraph_folds_constants`] finds the subgraph nodes that computation applies to.

use std::collections::HashSet;

use crate::graph::subgraphs;
use crate::model::Model;
use crate::proto::tensor_shape_proto::{dimension, Dimension};
use crate::proto::type_proto::{Tensor, Value};
use crate::proto::{GraphProto, TensorShapeProto, TypeProto, ValueInfoProto};

/// Adds to `names` every value a node of `graph`, or of a subgraph in it, reads.
fn values_read(graph: &GraphProto, names: &mut HashSet<String>) {
    for node in &graph.node {
        names.extend(node.input.iter().filter(|name| !name.is_empty()).cloned());
        for (_, _, subgraph) in subgraphs(node) {
            values_read(subgraph, names);
        }
    }
}

/// The first node of `graph` (or of a subgraph in it) that is no `Constant` and reads only
/// constants: `constants` (initializers and `Constant` outputs of the enclosing graphs) and those
/// of its own graph; `inside` is true for a subgraph (the main graph's own folding is harmless).
fn constant_computation(graph: &GraphProto, constants: &HashSet<String>, inside: bool) -> Option<String> {
    let mut known = constants.clone();
    known.extend(graph.initializer.iter().map(|tensor| tensor.name().to_string()));
    known.extend(
        graph.node.iter().filter(|node| node.op_type() == crate::CONSTANT).flat_map(|node| node.output.iter().cloned()),
    );
    for node in &graph.node {
        let inputs: Vec<&String> = node.input.iter().filter(|name| !name.is_empty()).collect();
        let folds = node.op_type() != crate::CONSTANT
            && subgraphs(node).next().is_none()
            && !inputs.is_empty()
            && inputs.iter().all(|name| known.contains(name.as_str()));
        if inside && folds {
            return Some(node.name().to_string());
        }
        if let Some(found) = subgraphs(node).find_map(|(_, _, subgraph)| constant_computation(subgraph, &known, true)) {
            return Some(found);
        }
    }
    None
}

impl Model {
    /// A node inside a subgraph that computes from constants alone, which ONNX Runtime's
    /// constant folding turns into an initializer of that subgraph (see the module doc); `None`
    /// when no subgraph has one.
    pub fn subgraph_folds_constants(&self) -> Option<String> {
        let graph = self.proto().graph.as_ref()?;
        constant_computation(graph, &HashSet::new(), false)
    }

    /// True when a node of the main graph holds a subgraph (`If`, `Loop`, `Scan`, …).
    pub fn has_control_flow(&self) -> bool {
        self.proto().graph.iter().flat_map(|graph| &graph.node).any(|node| subgraphs(node).next().is_some())
    }

    /// Makes each main-graph initializer that only subgraphs read (no main-graph node, no graph
    /// output) a graph output, typed and shaped as the tensor; returns their names, in
    /// initializer order (see the module doc for why a compile needs them).
    pub fn expose_outer_scope_initializers(&mut self) -> Vec<String> {
        let Some(graph) = self.proto_mut().graph.as_mut() else { return Vec::new() };
        let main_reads: HashSet<&str> = graph.node.iter().flat_map(|node| &node.input).map(String::as_str).collect();
        let outputs: HashSet<&str> = graph.output.iter().map(|output| output.name()).collect();
        let mut subgraph_reads = HashSet::new();
        for node in &graph.node {
            for (_, _, subgraph) in subgraphs(node) {
                values_read(subgraph, &mut subgraph_reads);
            }
        }
        let additions: Vec<ValueInfoProto> = graph
            .initializer
            .iter()
            .filter(|tensor| {
                subgraph_reads.contains(tensor.name())
                    && !main_reads.contains(tensor.name())
                    && !outputs.contains(tensor.name())
            })
            .map(|tensor| ValueInfoProto {
                name: tensor.name.clone(),
                r#type: Some(TypeProto {
                    value: Some(Value::TensorType(Tensor {
                        elem_type: tensor.data_type,
                        shape: Some(TensorShapeProto {
                            dim: tensor
                                .dims
                                .iter()
                                .map(|&size| Dimension {
                                    value: Some(dimension::Value::DimValue(size)),
                                    ..Default::default()
                                })
                                .collect(),
                        }),
                    })),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        let names = additions.iter().map(|info| info.name().to_string()).collect();
        graph.output.extend(additions);
        names
    }

    /// Removes the named graph outputs (the values stay in the graph).
    pub fn remove_outputs(&mut self, names: &[String]) {
        if let Some(graph) = self.proto_mut().graph.as_mut() {
            graph.output.retain(|output| !names.iter().any(|name| name == output.name()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{AttributeProto, ModelProto, NodeProto, TensorProto};

    fn node(name: &str, op_type: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
        NodeProto {
            name: Some(name.into()),
            op_type: Some(op_type.into()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn initializer(name: &str) -> TensorProto {
        TensorProto { name: Some(name.into()), dims: vec![2, 3], data_type: Some(1), ..Default::default() }
    }

    /// main: `a = MatMul(x, v)`, `If(c)` whose branch reads the outer `w` and, with `folds`,
    /// squeezes its own `Constant`.
    fn model(folds: bool) -> Model {
        let mut branch_nodes = vec![node("verify", "MatMul", &["x", "w"], &["b"])];
        if folds {
            branch_nodes.push(node("k", "Constant", &[], &["k1"]));
            branch_nodes.push(node("squeeze_k", "Squeeze", &["k1"], &["k0"]));
        }
        let branch = GraphProto { name: Some("then".into()), node: branch_nodes, ..Default::default() };
        let mut if_node = node("gate", "If", &["c"], &["y"]);
        if_node.attribute.push(AttributeProto {
            name: Some("then_branch".into()),
            g: Some(branch),
            ..Default::default()
        });
        let graph = GraphProto {
            name: Some("main".into()),
            node: vec![node("a", "MatMul", &["x", "v"], &["c"]), if_node],
            initializer: vec![initializer("v"), initializer("w")],
            output: vec![ValueInfoProto { name: Some("y".into()), ..Default::default() }],
            ..Default::default()
        };
        Model::from(ModelProto { graph: Some(graph), ..Default::default() })
    }

    #[test]
    fn only_initializers_subgraphs_alone_read_become_outputs_and_go_again() {
        let mut with_if = model(false);
        assert!(with_if.has_control_flow());
        assert_eq!(with_if.expose_outer_scope_initializers(), ["w"]);
        let output = &with_if.proto().graph.as_ref().unwrap().output[1];
        assert_eq!(output.name(), "w");
        assert!(format!("{:?}", output.r#type).contains("DimValue(3)"), "typed and shaped as the tensor");
        assert!(with_if.expose_outer_scope_initializers().is_empty(), "an output already");
        with_if.remove_outputs(&["w".to_string()]);
        let names: Vec<&str> = with_if.proto().graph.as_ref().unwrap().output.iter().map(|o| o.name()).collect();
        assert_eq!(names, ["y"]);
        let plain = Model::from(ModelProto {
            graph: Some(GraphProto { node: vec![node("a", "Relu", &["x"], &["y"])], ..Default::default() }),
            ..Default::default()
        });
        assert!(!plain.has_control_flow());
    }

    #[test]
    fn a_subgraph_node_of_constants_alone_is_found_the_main_graphs_are_not() {
        assert_eq!(model(true).subgraph_folds_constants().as_deref(), Some("squeeze_k"));
        // `verify` reads `x`, no constant; the main graph folds what it likes (written whole).
        assert_eq!(model(false).subgraph_folds_constants(), None);
    }
}
