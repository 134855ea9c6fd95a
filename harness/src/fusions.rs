//! Which kernels stand for which original nodes. ONNX Runtime's graph optimizations fuse nodes
//! (Conv+BatchNorm+Relu into one `Conv`), rename them (`…_nchwc`), insert layout nodes
//! (`ReorderInput`) and fold constants away, so the profile's kernel names no longer match the
//! model's node names. The profiled session saves its optimized graph; this module sets it against
//! the model: both graphs are cut at the tensors they share, each piece of the model and the piece
//! of the optimized graph that produces the same shared tensors form one group.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use anyhow::{anyhow, Result};
use npugate_onnx::proto::{GraphProto, NodeProto};
use npugate_onnx::Model;
use npugate_result::{FusionGroup, Fusions};

/// Sets the optimized graph in `optimized` against `model` (main graphs).
pub fn map(model: &Model, optimized: &Path) -> Result<Fusions> {
    let optimized = Model::read(optimized).map_err(|e| anyhow!("{e}"))?;
    let (Some(a), Some(b)) = (model.proto().graph.as_ref(), optimized.proto().graph.as_ref()) else {
        return Ok(Fusions::default());
    };
    Ok(groups(a, b))
}

/// The groups of two graphs (see the module doc).
pub fn groups(original: &GraphProto, optimized: &GraphProto) -> Fusions {
    let shared: HashSet<&str> = tensors(original).intersection(&tensors(optimized)).copied().collect();
    let count = original.node.len() + optimized.node.len();
    let bypassed = bypassed(original, optimized, &shared);
    let mut sets = UnionFind::new(count);
    // Within each graph, a tensor the other graph lacks ties its producer to its consumers (a
    // bypassed node's output ties nothing: its consumers read its input now).
    for (graph, offset) in [(original, 0), (optimized, original.node.len())] {
        let mut producer: HashMap<&str, usize> = HashMap::new();
        for (index, node) in graph.node.iter().enumerate() {
            if offset == 0 && bypassed.contains(&index) {
                continue;
            }
            for output in node.output.iter().filter(|o| !o.is_empty()) {
                producer.insert(output, offset + index);
            }
        }
        for (index, node) in graph.node.iter().enumerate() {
            for input in node.input.iter().filter(|i| !shared.contains(i.as_str())) {
                if let Some(&from) = producer.get(input.as_str()) {
                    sets.union(from, offset + index);
                }
            }
        }
    }
    // Across the graphs, the producers of one shared tensor belong together.
    let producers = |graph: &GraphProto, offset: usize| -> HashMap<String, usize> {
        graph.node.iter().enumerate().flat_map(|(i, n)| n.output.iter().map(move |o| (o.clone(), offset + i))).collect()
    };
    let in_optimized = producers(optimized, original.node.len());
    for (tensor, from) in producers(original, 0) {
        if let Some(&to) = in_optimized.get(&tensor).filter(|_| shared.contains(tensor.as_str())) {
            sets.union(from, to);
        }
    }
    let mut by_root: HashMap<usize, FusionGroup> = HashMap::new();
    let mut order = Vec::new();
    for index in 0..count {
        let root = sets.find(index);
        let group = by_root.entry(root).or_insert_with(|| {
            order.push(root);
            FusionGroup::default()
        });
        match index.checked_sub(original.node.len()) {
            None => group.nodes.push(original.node[index].name().to_string()),
            Some(kernel) => group.kernels.push(optimized.node[kernel].name().to_string()),
        }
    }
    let groups = order
        .into_iter()
        .filter_map(|root| by_root.remove(&root))
        .filter(|g| !(g.nodes.is_empty() || g.nodes.len() == 1 && g.kernels == g.nodes))
        .collect();
    Fusions { groups }
}

/// The original nodes ONNX Runtime eliminated as no-ops: none of their outputs is left, and a
/// consumer of one of them, kept as itself ([`kept_as_itself`]), reads one of the node's inputs
/// in its place.
fn bypassed(original: &GraphProto, optimized: &GraphProto, shared: &HashSet<&str>) -> HashSet<usize> {
    let kernels: HashMap<&str, &NodeProto> =
        optimized.node.iter().filter(|k| !k.name().is_empty()).map(|k| (k.name(), k)).collect();
    let rewired = |node: &NodeProto| {
        original.node.iter().filter(|c| node.output.iter().any(|o| c.input.contains(o))).any(|consumer| {
            kernels.get(consumer.name()).filter(|kernel| kept_as_itself(kernel, consumer)).is_some_and(|kernel| {
                node.input
                    .iter()
                    .any(|i| shared.contains(i.as_str()) && kernel.input.contains(i) && !consumer.input.contains(i))
            })
        })
    };
    original
        .node
        .iter()
        .enumerate()
        .filter(|(_, node)| !node.output.is_empty() && node.output.iter().all(|o| !shared.contains(o.as_str())))
        .filter(|(_, node)| rewired(node))
        .map(|(index, _)| index)
        .collect()
}

/// Whether `kernel` is `consumer` unchanged but for its inputs: same name, op type and attributes
/// (a Split that reads a tensor from before a Transpose with another axis had the Transpose moved
/// past it, not eliminated; a fused kernel has another op type).
fn kept_as_itself(kernel: &NodeProto, consumer: &NodeProto) -> bool {
    kernel.op_type() == consumer.op_type()
        && kernel.domain() == consumer.domain()
        && kernel.attribute == consumer.attribute
}

/// Every tensor a node of `graph` reads or writes.
fn tensors(graph: &GraphProto) -> HashSet<&str> {
    graph
        .node
        .iter()
        .flat_map(|n| n.input.iter().chain(&n.output))
        .map(String::as_str)
        .filter(|t| !t.is_empty())
        .collect()
}

/// Disjoint sets over `0..n` (path halving, union by size).
struct UnionFind {
    parent: Vec<usize>,
    size: Vec<usize>,
}

impl UnionFind {
    fn new(n: usize) -> UnionFind {
        UnionFind { parent: (0..n).collect(), size: vec![1; n] }
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (mut a, mut b) = (self.find(a), self.find(b));
        if a == b {
            return;
        }
        if self.size[a] < self.size[b] {
            std::mem::swap(&mut a, &mut b);
        }
        self.parent[b] = a;
        self.size[a] += self.size[b];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
        NodeProto {
            name: Some(name.into()),
            op_type: Some(op.into()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn graph(nodes: Vec<NodeProto>) -> GraphProto {
        GraphProto { node: nodes, ..Default::default() }
    }

    #[test]
    fn fused_renamed_inserted_and_folded_nodes_find_their_kernels() {
        // x → Conv → BN → Relu → y → Mul → z ; Shape(x) → Gather → c (folded) feeds Mul.
        let original = graph(vec![
            node("conv", "Conv", &["x", "w"], &["c1"]),
            node("bn", "BatchNormalization", &["c1", "s"], &["b1"]),
            node("relu", "Relu", &["b1"], &["y"]),
            node("shape", "Shape", &["k"], &["sh"]),
            node("gather", "Gather", &["sh", "i"], &["c"]),
            node("mul", "Mul", &["y", "c"], &["z"]),
        ]);
        let optimized = graph(vec![
            node("ReorderInput", "ReorderInput", &["x"], &["r0"]),
            node("y_nchwc", "Conv", &["r0", "w_fused"], &["r1"]),
            node("ReorderOutput", "ReorderOutput", &["r1"], &["y"]),
            node("mul", "Mul", &["y", "c"], &["z"]),
        ]);
        let fusions = groups(&original, &optimized);
        assert_eq!(fusions.groups.len(), 2, "{fusions:?}");
        let conv = &fusions.groups[0];
        assert_eq!(conv.nodes, ["conv", "bn", "relu"]);
        assert_eq!(conv.kernels, ["ReorderInput", "y_nchwc", "ReorderOutput"]);
        let folded = &fusions.groups[1];
        assert_eq!(
            (folded.nodes.as_slice(), folded.kernels.len()),
            (&["shape".to_string(), "gather".to_string()][..], 0)
        );
    }

    #[test]
    fn an_eliminated_no_op_stands_alone_not_with_consumers_on_two_eps() {
        // div → sub(x − 0) → {reducemax, clip}; sub2 → cast(float→float) → clip. ONNX Runtime drops
        // sub and cast and rewires their consumers to their inputs; reducemax and clip keep their names.
        let original = graph(vec![
            node("div", "Div", &["a", "b"], &["d"]),
            node("zero", "Constant", &[], &["z"]),
            node("sub", "Sub", &["d", "z"], &["s"]),
            node("reducemax", "ReduceMax", &["s"], &["m"]),
            node("sub2", "Sub", &["m", "k"], &["t"]),
            node("cast", "Cast", &["t"], &["lo"]),
            node("clip", "Clip", &["s", "lo", "hi"], &["y"]),
        ]);
        let optimized = graph(vec![
            node("div", "Div", &["a", "b"], &["d"]),
            node("reducemax", "ReduceMax", &["d"], &["m"]),
            node("sub2", "Sub", &["m", "k"], &["t"]),
            node("clip", "Clip", &["d", "t", "hi"], &["y"]),
        ]);
        let fusions = groups(&original, &optimized);
        let of = |name: &str| fusions.groups.iter().find(|g| g.nodes.iter().any(|n| n == name)).cloned();
        let sub = of("sub").expect("sub in a group");
        assert_eq!(
            (sub.nodes.as_slice(), sub.kernels.len()),
            (&["zero".to_string(), "sub".to_string()][..], 0),
            "{fusions:?}"
        );
        let cast = of("cast").expect("cast in a group");
        assert_eq!((cast.nodes.as_slice(), cast.kernels.len()), (&["cast".to_string()][..], 0), "{fusions:?}");
        assert!(of("clip").is_none() && of("reducemax").is_none(), "kept their names and neighbours: {fusions:?}");
    }

    #[test]
    fn a_transpose_moved_past_its_consumer_is_not_eliminated() {
        // Transpose → Split(axis 0); ONNX Runtime's transpose optimizer splits first (axis 2) and
        // transposes each part: the Split reads the Transpose's input, with another axis.
        let mut split = node("split", "Split", &["t"], &["a", "b"]);
        split.attribute =
            vec![npugate_onnx::proto::AttributeProto { name: Some("axis".into()), i: Some(0), ..Default::default() }];
        let original = graph(vec![node("transpose", "Transpose", &["x"], &["t"]), split.clone()]);
        let mut moved = node("split", "Split", &["x"], &["a0", "b0"]);
        moved.attribute =
            vec![npugate_onnx::proto::AttributeProto { name: Some("axis".into()), i: Some(2), ..Default::default() }];
        let optimized = graph(vec![
            moved,
            node("transpose_a", "Transpose", &["a0"], &["a"]),
            node("transpose_b", "Transpose", &["b0"], &["b"]),
        ]);
        let fusions = groups(&original, &optimized);
        assert_eq!(fusions.groups.len(), 1, "{fusions:?}");
        assert_eq!(fusions.groups[0].nodes, ["transpose", "split"], "{fusions:?}");
        assert_eq!(fusions.groups[0].kernels, ["split", "transpose_a", "transpose_b"], "{fusions:?}");
    }
}
