//! Exposing intermediate tensors as extra graph outputs (for instrumentation).

use std::collections::HashSet;

use crate::graph::GraphId;
use crate::model::Model;
use crate::proto::{GraphProto, ValueInfoProto};
use crate::value::ValueSignature;

/// Why a tensor cannot become a graph output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    /// No node of the main graph outputs it.
    #[error(
        "cannot add output {name:?}: no node of the main graph produces it (not a tensor of this model, or a \
         graph input or initializer); see the model's intermediate tensors"
    )]
    NotProduced {
        /// The tensor.
        name: String,
    },
    /// It only exists inside a subgraph.
    #[error(
        "cannot add output {name:?}: it is computed inside subgraph {graph}, and only main-graph tensors can be \
         graph outputs; add the output of the node that holds that subgraph instead"
    )]
    InSubgraph {
        /// The tensor.
        name: String,
        /// The subgraph, e.g. `main > loop_0.body`.
        graph: String,
    },
}

impl Model {
    /// The main graph's intermediate tensors: every named node output that is not already a graph
    /// output, in node order.
    pub fn intermediate_tensors(&self) -> Vec<String> {
        let Some(graph) = self.proto().graph.as_ref() else { return Vec::new() };
        let outputs = output_names(graph);
        let mut seen = HashSet::new();
        let produced = graph.node.iter().flat_map(|node| node.output.iter());
        produced
            .filter(|name| !name.is_empty() && !outputs.contains(name.as_str()) && seen.insert(name.as_str()))
            .cloned()
            .collect()
    }

    /// Makes the named main-graph tensors graph outputs, each with its type and shape when the
    /// main graph's `value_info` records them; otherwise by name alone, which ONNX Runtime
    /// accepts and types by its own shape inference (`onnx.checker` does not accept it). Names already outputs, or repeated, are skipped. Every name is
    /// checked first: on an error the model is unchanged. Returns what was added, in order.
    pub fn add_outputs<S: AsRef<str>>(&mut self, names: &[S]) -> Result<Vec<ValueSignature>, OutputError> {
        let mut additions: Vec<ValueInfoProto> = Vec::new();
        {
            let index = self.index();
            let Some(main) = index.graph(GraphId::MAIN) else {
                let name = names.first().map(|n| n.as_ref().to_string()).unwrap_or_default();
                return Err(OutputError::NotProduced { name });
            };
            let mut skip = output_names(main.proto);
            for name in names.iter().map(AsRef::as_ref) {
                if skip.contains(name) {
                    continue;
                }
                match index.producer(name) {
                    Some(node) if node.graph == GraphId::MAIN => {}
                    Some(node) => {
                        let graph = index.graph(node.graph).map(|g| g.path.to_string()).unwrap_or_default();
                        return Err(OutputError::InSubgraph { name: name.to_string(), graph });
                    }
                    None => return Err(OutputError::NotProduced { name: name.to_string() }),
                }
                let known = main.proto.value_info.iter().find(|info| info.name() == name);
                additions.push(
                    known
                        .cloned()
                        .unwrap_or_else(|| ValueInfoProto { name: Some(name.to_string()), ..Default::default() }),
                );
                skip.insert(name.to_string());
            }
        }
        let added = additions.iter().map(ValueSignature::from_value_info).collect();
        if let Some(graph) = self.proto_mut().graph.as_mut() {
            graph.output.extend(additions);
        }
        Ok(added)
    }
}

fn output_names(graph: &GraphProto) -> HashSet<String> {
    graph.output.iter().map(|output| output.name().to_string()).collect()
}
