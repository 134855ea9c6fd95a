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
//! subgraph defines the name twice ("Duplicate definition of name (helper.squeeze.2)"). A compile
//! therefore loads subgraphs its optimizers have nothing left to change in:
//! [`Model::take_subgraphs_from`] puts the subgraphs of ONNX Runtime's own optimized copy of the
//! model into it, leaving the main graph (which the writer writes as optimized, and whose
//! optimization decides what the EP takes) to the compile (see `npugate_htp`'s `compile`).

use std::collections::HashSet;

use crate::graph::subgraphs;
use crate::model::Model;
use crate::proto::tensor_shape_proto::{dimension, Dimension};
use crate::proto::type_proto::{Tensor, Value};
use crate::proto::{GraphProto, NodeProto, TensorShapeProto, TypeProto, ValueInfoProto};

/// Adds to `names` every value `graph`, or a subgraph in it, defines (inputs, initializers, node
/// outputs).
fn values_defined(graph: &GraphProto, names: &mut HashSet<String>) {
    names.extend(graph.input.iter().map(|input| input.name().to_string()));
    names.extend(graph.initializer.iter().map(|tensor| tensor.name().to_string()));
    for node in &graph.node {
        names.extend(node.output.iter().filter(|name| !name.is_empty()).cloned());
        for (_, _, subgraph) in subgraphs(node) {
            values_defined(subgraph, names);
        }
    }
}

/// The values the subgraphs of `node` read from the scopes around it.
fn outer_values_read(node: &NodeProto) -> HashSet<String> {
    let (mut read, mut defined) = (HashSet::new(), HashSet::new());
    for (_, _, subgraph) in subgraphs(node) {
        values_read(subgraph, &mut read);
        values_defined(subgraph, &mut defined);
    }
    read.retain(|name| !defined.contains(name));
    read
}

/// Adds to `names` every value a node of `graph`, or of a subgraph in it, reads.
fn values_read(graph: &GraphProto, names: &mut HashSet<String>) {
    for node in &graph.node {
        names.extend(node.input.iter().filter(|name| !name.is_empty()).cloned());
        for (_, _, subgraph) in subgraphs(node) {
            values_read(subgraph, names);
        }
    }
}

impl Model {
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

    /// Gives each main-graph node holding subgraphs the subgraphs of the node of the same name and
    /// operator in `optimized` (ONNX Runtime's optimized copy of this model), with the main-graph
    /// initializers of `optimized` they read that this model lacks; a node whose new subgraphs
    /// would read a value this model cannot give keeps its own. Returns the nodes changed.
    pub fn take_subgraphs_from(&mut self, optimized: &Model) -> Vec<String> {
        let Some(theirs) = optimized.proto().graph.as_ref() else { return Vec::new() };
        let Some(graph) = self.proto_mut().graph.as_mut() else { return Vec::new() };
        let mut taken = Vec::new();
        for index in 0..graph.node.len() {
            let node = &graph.node[index];
            let Some(their_node) = theirs
                .node
                .iter()
                .find(|n| n.name() == node.name() && n.op_type() == node.op_type() && subgraphs(n).next().is_some())
            else {
                continue;
            };
            let mut known = HashSet::new();
            known.extend(graph.input.iter().map(|input| input.name().to_string()));
            known.extend(graph.initializer.iter().map(|tensor| tensor.name().to_string()));
            known.extend(graph.node.iter().flat_map(|n| n.output.iter().cloned()));
            let missing: Vec<String> =
                outer_values_read(their_node).into_iter().filter(|name| !known.contains(name)).collect();
            let lent: Vec<_> = theirs.initializer.iter().filter(|t| missing.iter().any(|m| m == t.name())).collect();
            if lent.len() < missing.len() {
                continue;
            }
            graph.initializer.extend(lent.into_iter().cloned());
            let node = &mut graph.node[index];
            for attribute in &mut node.attribute {
                if let Some(their) = their_node.attribute.iter().find(|a| a.name() == attribute.name()) {
                    if attribute.g.is_some() || !attribute.graphs.is_empty() {
                        attribute.g.clone_from(&their.g);
                        attribute.graphs.clone_from(&their.graphs);
                    }
                }
            }
            taken.push(node.name().to_string());
        }
        taken
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

    /// main: `a = MatMul(x, v)`, `If(c)` whose branch reads the outer `w`.
    fn model() -> Model {
        let branch_nodes = vec![node("verify", "MatMul", &["x", "w"], &["b"])];
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
            input: vec![ValueInfoProto { name: Some("x".into()), ..Default::default() }],
            initializer: vec![initializer("v"), initializer("w")],
            output: vec![ValueInfoProto { name: Some("y".into()), ..Default::default() }],
            ..Default::default()
        };
        Model::from(ModelProto { graph: Some(graph), ..Default::default() })
    }

    #[test]
    fn only_initializers_subgraphs_alone_read_become_outputs_and_go_again() {
        let mut with_if = model();
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
    fn subgraphs_come_from_the_optimized_copy_with_the_outer_values_they_read() {
        let mut with_if = model();
        // The copy's branch reads `k0`, an initializer of its main graph only; the model lends it.
        let mut optimized = model();
        let graph = optimized.proto_mut().graph.as_mut().unwrap();
        graph.initializer.push(initializer("k0"));
        let branch = graph.node[1].attribute[0].g.as_mut().unwrap();
        branch.node = vec![node("verify/Fused", "Gemm", &["x", "w", "k0"], &["b"])];
        assert_eq!(with_if.take_subgraphs_from(&optimized), ["gate"]);
        let graph = with_if.proto().graph.as_ref().unwrap();
        assert_eq!(graph.node[1].attribute[0].g.as_ref().unwrap().node[0].name(), "verify/Fused");
        assert!(graph.initializer.iter().any(|t| t.name() == "k0"));
        assert_eq!(graph.node[0].name(), "a", "the main graph stays the model's");
        // A branch reading a value neither model gives is not taken.
        let mut unknown = optimized.clone();
        let branch = unknown.proto_mut().graph.as_mut().unwrap().node[1].attribute[0].g.as_mut().unwrap();
        branch.node[0].input.push("nowhere".into());
        let mut plain = model();
        assert!(plain.take_subgraphs_from(&unknown).is_empty());
        assert_eq!(
            plain.proto().graph.as_ref().unwrap().node[1].attribute[0].g.as_ref().unwrap().node[0].name(),
            "verify"
        );
    }
}
