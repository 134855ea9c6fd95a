//! Which of the model's own nodes a node of the run stands for. One mechanism for every node that
//! is not simply a model node: a node of the graph ONNX Runtime partitions (MatMul+Add fused into
//! a `Gemm` at load, a GELU's five nodes into one `Gelu`), a kernel of an optimized CPU session
//! (Conv+BatchNorm+Relu, `…_nchwc`), a node renamed by a layout transformation (`conv_token_3`),
//! an EP's fused partition (the union of its nodes), and an `EPContext` node of a compiled model.
//!
//! Every such relation is a [`FusionGroup`]: run nodes (`kernels`) and the model nodes (`nodes`)
//! they stand for together. A run node in a group stands for the group's model nodes; any other
//! run node stands for the model node of its name (after dropping a `_token_<n>` suffix), or for
//! none (a node ONNX Runtime inserted, e.g. a layout `Transpose`). To give an `EPContext` node
//! the FLOPs of the source nodes it covers, add the group `{kernels: [its name], nodes: [the
//! source nodes]}` to the run's `graph.partitioned` (or pass it to [`Coverage::new`]).

use std::collections::HashMap;

use npugate_result::FusionGroup;

/// The name a layout-transformed node had before ONNX Runtime appended `_token_<n>` (the layout
/// transformation and `Graph::GenerateNodeName` both do).
pub fn strip_token_suffix(name: &str) -> &str {
    match name.rsplit_once("_token_") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    }
}

/// Run node → the model nodes it stands for (indices into the model's node list).
#[derive(Debug, Default)]
pub struct Coverage<'a> {
    model: HashMap<&'a str, usize>,
    groups: HashMap<&'a str, Vec<usize>>,
}

impl<'a> Coverage<'a> {
    /// The coverage of `groups` over the model nodes named `model_nodes` (in the model's order).
    /// Names in a group that are no model node are ignored.
    pub fn new(
        model_nodes: impl IntoIterator<Item = &'a str>,
        groups: impl IntoIterator<Item = &'a FusionGroup>,
    ) -> Coverage<'a> {
        let mut model = HashMap::new();
        for (index, name) in model_nodes.into_iter().enumerate() {
            model.entry(name).or_insert(index);
        }
        let mut covered: HashMap<&'a str, Vec<usize>> = HashMap::new();
        for group in groups {
            let nodes: Vec<usize> = group.nodes.iter().filter_map(|n| model.get(n.as_str()).copied()).collect();
            for kernel in &group.kernels {
                let entry = covered.entry(kernel.as_str()).or_default();
                for &node in &nodes {
                    if !entry.contains(&node) {
                        entry.push(node);
                    }
                }
            }
        }
        Coverage { model, groups: covered }
    }

    /// The model node named `name` (also after dropping a `_token_<n>` suffix).
    pub fn model_node(&self, name: &str) -> Option<usize> {
        self.model.get(name).or_else(|| self.model.get(strip_token_suffix(name))).copied()
    }

    /// The model nodes `run_node` stands for: its group's, else the model node of its name, else
    /// none (a node ONNX Runtime inserted).
    pub fn model_nodes(&self, run_node: &str) -> Vec<usize> {
        match self.groups.get(run_node).or_else(|| self.groups.get(strip_token_suffix(run_node))) {
            Some(nodes) => nodes.clone(),
            None => self.model_node(run_node).into_iter().collect(),
        }
    }

    /// The model nodes any of `run_nodes` stands for, each once, in the order first met.
    pub fn union<'r>(&self, run_nodes: impl IntoIterator<Item = &'r str>) -> Vec<usize> {
        let mut union = Vec::new();
        for run_node in run_nodes {
            for node in self.model_nodes(run_node) {
                if !union.contains(&node) {
                    union.push(node);
                }
            }
        }
        union
    }
}

/// The FLOPs of some model nodes: their sum where known, and how many are unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoveredFlops {
    /// Sum of the known FLOPs.
    pub flops: u64,
    /// Nodes whose FLOPs are unknown.
    pub unknown: usize,
}

impl CoveredFlops {
    /// The FLOPs of `nodes`, each node's FLOPs given by `flops_of` (`None`: unknown).
    pub fn of(nodes: &[usize], flops_of: impl Fn(usize) -> Option<u64>) -> CoveredFlops {
        nodes.iter().fold(CoveredFlops::default(), |sum, &node| match flops_of(node) {
            Some(f) => CoveredFlops { flops: sum.flops.saturating_add(f), ..sum },
            None => CoveredFlops { unknown: sum.unknown + 1, ..sum },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(kernels: &[&str], nodes: &[&str]) -> FusionGroup {
        FusionGroup {
            kernels: kernels.iter().map(|s| s.to_string()).collect(),
            nodes: nodes.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn groups_identity_layout_names_and_inserted_nodes() {
        let model = ["mm", "add", "relu", "ctx_src_a", "ctx_src_b"];
        let groups = [
            group(&["gemm_input_reshape", "mm/MatMulAddFusion", "gemm_output_reshape_token_5"], &["mm", "add"]),
            group(&["QNN_ctx_0"], &["ctx_src_a", "ctx_src_b", "not_a_model_node"]),
        ];
        let coverage = Coverage::new(model, &groups);
        assert_eq!(coverage.model_nodes("mm/MatMulAddFusion"), [0, 1]);
        assert_eq!(coverage.model_nodes("gemm_output_reshape_token_5"), [0, 1]);
        assert_eq!(coverage.model_nodes("relu"), [2]);
        assert_eq!(coverage.model_nodes("relu_token_7"), [2], "a layout-transformed node stands for its model node");
        assert!(coverage.model_nodes("Transpose_token_9").is_empty(), "an inserted node stands for none");
        assert_eq!(coverage.model_nodes("QNN_ctx_0"), [3, 4], "an EPContext node given its source nodes");
        assert_eq!(coverage.union(["relu", "mm/MatMulAddFusion", "gemm_input_reshape"]), [2, 0, 1]);
        let flops = [Some(100), Some(4), None, Some(1), Some(2)];
        assert_eq!(
            CoveredFlops::of(&coverage.model_nodes("mm/MatMulAddFusion"), |n| flops[n]),
            CoveredFlops { flops: 104, unknown: 0 }
        );
        assert_eq!(CoveredFlops::of(&[1, 2], |n| flops[n]), CoveredFlops { flops: 4, unknown: 1 });
    }
}
