//! The EP's rejections aggregated by cause: a model whose 330 nodes an EP rejected with one reason
//! reads as one line ("330 nodes: Cannot get shape (e.g. conv1, relu1, …) → the model has dynamic
//! input dims; pass --shape x=1x3x640x640"), not 330. Reasons that name their node (the HTP's
//! "… in the node '/blocks.0/mlp/act/Erf'") are compared with the name replaced by `…`, so twelve
//! transformer blocks' Erf nodes are one cause.

use std::collections::BTreeMap;

use crate::hints::{fallback_hint, is_shape_reason};
use crate::report::{FallbackNode, RejectionCause};

/// What a cause is called when the EP logged no reason for its nodes.
pub const NO_REASON: &str = "no reason logged";
/// How many node names a cause lists.
const EXAMPLES: usize = 3;

/// The hint of a single model's shape reasons: the `--shape …` flags that fix its dynamic dims.
pub fn shape_fix_hint(fix: &str) -> String {
    format!("the model has dynamic input dims; pass {fix}")
}

/// Groups the unexpected fallback nodes by their reason, most nodes first. `shape_hint` is the
/// fix of the model's dynamic input dims (when it has any: [`shape_fix_hint`], or a folder's
/// [`crate::hints::FOLDER_SHAPE_HINT`]): shape reasons get it as their hint.
pub fn aggregate(fallback: &[FallbackNode], preferred_ep: &str, shape_hint: Option<&str>) -> Vec<RejectionCause> {
    let mut groups: BTreeMap<String, Vec<&FallbackNode>> = BTreeMap::new();
    for node in fallback.iter().filter(|n| !n.expected) {
        let reason = node.reason.as_deref().map_or_else(|| NO_REASON.to_string(), |r| without_node_name(r, &node.name));
        groups.entry(reason).or_default().push(node);
    }
    let mut causes: Vec<RejectionCause> = groups
        .into_iter()
        .map(|(reason, nodes)| {
            let mut op_counts: BTreeMap<&str, usize> = BTreeMap::new();
            for node in &nodes {
                *op_counts.entry(node.op_type.as_str()).or_default() += 1;
            }
            let mut op_types: Vec<(&str, usize)> = op_counts.into_iter().collect();
            op_types.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let hint = match shape_hint.filter(|_| is_shape_reason(&reason)) {
                Some(hint) => Some(hint.to_string()),
                None if nodes.len() > 1 && op_types.len() > 1 => None,
                None => fallback_hint(
                    &nodes[0].op_type,
                    Some(reason.as_str()).filter(|r| *r != NO_REASON),
                    &nodes[0].input_shapes,
                    false,
                    preferred_ep,
                ),
            };
            RejectionCause {
                reason,
                nodes: nodes.len(),
                op_types: op_types.into_iter().map(|(op, _)| op.to_string()).collect(),
                examples: nodes.iter().take(EXAMPLES).map(|n| n.name.clone()).collect(),
                hint,
            }
        })
        .collect();
    causes.sort_by(|a, b| b.nodes.cmp(&a.nodes).then(a.reason.cmp(&b.reason)));
    causes
}

/// `reason` with the node's own name replaced by `…`; a quoted name the EP derived from it
/// (`'Einsum_0MatMul_2'`, the QNN op's name) becomes `'…'` whole. A quote opens after a
/// non-alphanumeric character and closes before one, so an apostrophe (`it's`) is no quote.
fn without_node_name(reason: &str, node: &str) -> String {
    // A folder's nodes are named `graph:node`; the EP's reason names the node of its graph.
    let node = match node.split_once(':') {
        Some((_, in_graph)) if !reason.contains(node) => in_graph,
        _ => node,
    };
    if node.is_empty() || !reason.contains(node) {
        return reason.to_string();
    }
    let chars: Vec<char> = reason.replace(node, "…").chars().collect();
    let word = |i: Option<usize>| i.and_then(|i| chars.get(i)).is_some_and(|c| c.is_alphanumeric());
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let opens = matches!(c, '\'' | '`') && !word(i.checked_sub(1));
        let close = opens.then(|| (i + 1..chars.len()).find(|&j| chars[j] == c && !word(Some(j + 1)))).flatten();
        match close {
            Some(j) if chars[i + 1..j].contains(&'…') => {
                out.extend([c, '…', c]);
                i = j + 1;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, op: &str, reason: Option<&str>, expected: bool) -> FallbackNode {
        FallbackNode {
            name: name.into(),
            op_type: op.into(),
            ep: "CPUExecutionProvider".into(),
            input_shapes: Vec::new(),
            flops: Some(0),
            flops_pct: 0.0,
            time_us_per_run: None,
            expected,
            reason: reason.map(str::to_string),
            hint: None,
        }
    }

    #[test]
    fn nodes_are_grouped_by_reason_most_first_with_the_shape_fix() {
        let fallback = [
            node("conv", "Conv", Some("Cannot get shape"), false),
            node("relu", "Relu", Some("Cannot get shape"), false),
            node("fc", "MatMul", Some("Cannot get shape"), false),
            node("det", "Det", Some("Operators of type `Det` are not supported by QNN EP."), false),
            node("q", "QuantizeLinear", None, true),
        ];
        let causes = aggregate(&fallback, "QNNExecutionProvider", Some(&shape_fix_hint("--shape x=1x3x32x32")));
        assert_eq!(causes.len(), 2, "expected nodes are not causes: {causes:?}");
        assert_eq!(
            causes[0].describe(),
            "3 nodes: Cannot get shape (e.g. conv, relu, fc) → the model has dynamic input dims; pass --shape x=1x3x32x32"
        );
        assert_eq!(causes[0].examples, ["conv", "relu", "fc"]);
        assert_eq!(causes[1].nodes, 1);
        assert!(causes[1].hint.as_deref().unwrap().contains("not supported by QNN"), "{causes:?}");
    }

    #[test]
    fn reasons_that_name_their_node_are_one_cause() {
        let erf = |block: usize| {
            let name = format!("/blocks.{block}/mlp/act/Erf");
            let reason = format!("QNN backend: Unsupported datatypes for the HTP Op 'ElementWiseErf' in the node '{name}_2'. (EP: `{name}` failed)");
            node(&name, "Erf", Some(&reason), false)
        };
        let fallback: Vec<FallbackNode> = (0..12).map(erf).collect();
        let causes = aggregate(&fallback, "QNNExecutionProvider", None);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(
            causes[0].reason,
            "QNN backend: Unsupported datatypes for the HTP Op 'ElementWiseErf' in the node '…'. (EP: `…` failed)"
        );
        assert_eq!(
            causes[0].describe(),
            "12 nodes: QNN backend: Unsupported datatypes for the HTP Op 'ElementWiseErf' in the node '…'. (EP: `…` failed) \
             (e.g. /blocks.0/mlp/act/Erf, /blocks.1/mlp/act/Erf, /blocks.2/mlp/act/Erf, …)"
        );
        assert_eq!(without_node_name("it's `conv_2` not 'conv's", "conv"), "it's `…` not '…'s");
        // A folder's node is `graph:node`; the EP's reason names it as its graph does.
        let layer = |n: usize| {
            let name = format!("/model/layers.{n}/input_layernorm/SkipLayerNorm");
            let reason = format!("SkipSimplifiedLayerNormalization is not supported: node {name}");
            node(&format!("decoder:{name}"), "SkipSimplifiedLayerNormalization", Some(&reason), false)
        };
        let causes = aggregate(&(0..9).map(layer).collect::<Vec<_>>(), "QNNExecutionProvider", None);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].reason, "SkipSimplifiedLayerNormalization is not supported: node …");
    }

    #[test]
    fn nodes_without_a_reason_are_one_cause() {
        let fallback = [node("det", "Det", None, false), node("mul", "Mul", None, false)];
        let causes = aggregate(&fallback, "OpenVINOExecutionProvider", None);
        assert_eq!(causes.len(), 1);
        assert_eq!((causes[0].reason.as_str(), causes[0].nodes), (NO_REASON, 2));
        assert_eq!(causes[0].op_types, ["Det", "Mul"]);
        assert_eq!(causes[0].hint, None, "no one remedy fits two op types");
    }
}
