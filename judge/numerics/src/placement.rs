//! Where the nodes ran, from a run's node→EP assignment (`Session_GetEpGraphAssignmentInfo`):
//! the EP of each layer's node, the placement summary of an instrumented run, and the
//! partition-boundary tensors of a plain run (`--tensors boundaries`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use npugate_onnx::{GraphId, Model};
use npugate_profile::placement::strip_token_suffix;
use npugate_result::Assignment;
use serde::{Deserialize, Serialize};

/// How many nodes each EP ran, and in how many partitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// Where the assignment came from (`Session_GetEpGraphAssignmentInfo`, or `unavailable`).
    pub source: String,
    /// Nodes per EP, as ONNX Runtime assigned them after its graph optimizations.
    pub nodes_by_ep: BTreeMap<String, usize>,
    /// Subgraphs off the CPU EP (each an accelerator partition).
    pub accelerator_partitions: usize,
}

impl Placement {
    /// The summary of `assignment`.
    pub fn of(assignment: &Assignment) -> Placement {
        let mut nodes_by_ep = BTreeMap::new();
        for subgraph in &assignment.subgraphs {
            *nodes_by_ep.entry(subgraph.ep.clone()).or_insert(0) += subgraph.nodes.len();
        }
        let accelerator_partitions = assignment.subgraphs.iter().filter(|s| s.ep != CPU).count();
        Placement { source: assignment.source.clone(), nodes_by_ep, accelerator_partitions }
    }
}

const CPU: &str = "CPUExecutionProvider";

/// Node name (as in the model, without a layout transformation's `_token_<n>`) → (EP, partition).
/// Every CPU node counts as one partition: the CPU EP needs no copy between its nodes.
fn partitions(assignment: &Assignment) -> HashMap<&str, (&str, usize)> {
    let mut map = HashMap::new();
    for (index, subgraph) in assignment.subgraphs.iter().enumerate() {
        let partition = if subgraph.ep == CPU { usize::MAX } else { index };
        for node in &subgraph.nodes {
            map.entry(strip_token_suffix(&node.name)).or_insert((subgraph.ep.as_str(), partition));
        }
    }
    map
}

/// The EP that ran each named node.
pub fn node_eps(assignment: &Assignment) -> HashMap<String, String> {
    partitions(assignment).into_iter().map(|(node, (ep, _))| (node.to_string(), ep.to_string())).collect()
}

/// The main-graph tensors of `model` produced in one partition and read in another (an EP
/// switch, or two accelerator partitions): where the data leaves an EP. Nodes the assignment
/// does not name (fused or renamed by optimizations) are skipped.
pub fn boundary_tensors(model: &Model, assignment: &Assignment) -> BTreeSet<String> {
    let placed = partitions(assignment);
    let index = model.index();
    let mut tensors = BTreeSet::new();
    for node in index.nodes().iter().filter(|n| n.graph == GraphId::MAIN) {
        let Some(&(_, from)) = placed.get(node.name()) else { continue };
        for output in node.outputs().iter().filter(|o| !o.is_empty()) {
            let crosses = index
                .consumers(output)
                .filter(|c| c.graph == GraphId::MAIN)
                .any(|c| placed.get(c.name()).is_some_and(|&(_, to)| to != from));
            if crosses {
                tensors.insert(output.clone());
            }
        }
    }
    tensors
}

#[cfg(test)]
mod tests {
    use super::*;
    use npugate_result::{AssignedNode, AssignedSubgraph};

    fn subgraph(ep: &str, nodes: &[&str]) -> AssignedSubgraph {
        AssignedSubgraph {
            ep: ep.into(),
            nodes: nodes
                .iter()
                .map(|n| AssignedNode { name: n.to_string(), op_type: String::new(), domain: String::new() })
                .collect(),
        }
    }

    #[test]
    fn boundaries_are_where_data_changes_partition() {
        // The float test model: conv → c, relu → r, pool → y; conv and relu on QNN, pool on CPU.
        let model = crate::testing::float();
        let assignment = Assignment {
            source: "Session_GetEpGraphAssignmentInfo".into(),
            error: None,
            subgraphs: vec![subgraph("QNNExecutionProvider", &["conv_token_1", "relu"]), subgraph(CPU, &["pool"])],
        };
        assert_eq!(boundary_tensors(&model, &assignment), BTreeSet::from(["r".to_string()]));
        assert_eq!(node_eps(&assignment)["conv"], "QNNExecutionProvider");
        let placement = Placement::of(&assignment);
        assert_eq!(
            (
                placement.nodes_by_ep["QNNExecutionProvider"],
                placement.nodes_by_ep[CPU],
                placement.accelerator_partitions
            ),
            (2, 1, 1)
        );
        let cpu_only = Assignment {
            subgraphs: vec![subgraph(CPU, &["conv"]), subgraph(CPU, &["relu"]), subgraph(CPU, &["pool"])],
            ..assignment
        };
        assert!(boundary_tensors(&model, &cpu_only).is_empty(), "CPU nodes share one partition");
    }
}
