//! Which tensor of the model under test stands for which tensor of the float reference model.
//!
//! The layers are the float model's activations: every output of a node of its main graph
//! (outputs of `Constant` nodes are weights, not activations, and are left out). For each one,
//! in this order:
//!
//! 1. **QDQ** — the model has a `QuantizeLinear` reading the tensor by its float name whose output
//!    feeds a `DequantizeLinear`: the layer is that `DequantizeLinear`'s output, what the next
//!    layer sees. A QDQ model from `onnxruntime.quantization` may keep a float name and change
//!    its meaning (with Conv+Relu the Relu is dropped and `r` holds the raw Conv output, negatives
//!    and all; only the `QuantizeLinear` clips them), so the tensor named `r` itself is never
//!    compared. The `QuantizeLinear` output (integers) is exposed and dequantized on the host with
//!    the `DequantizeLinear`'s constant scale and zero point ([`super::quant`]), which keeps the
//!    QDQ node groups ONNX Runtime fuses intact; when those are not constants, the
//!    `DequantizeLinear` output is exposed instead.
//! 2. **Same name** — the model has a tensor of that name (a float model against itself, or a
//!    QDQ model's graph output that keeps its float name on its last `DequantizeLinear`).
//! 3. Otherwise the float tensor is **unmatched** (fused away or renamed), and listed.
//!
//! The model's own tensors that stand for no float tensor are listed too: weights and biases
//! through their `DequantizeLinear`, the quantized graph inputs, anything else. The node named
//! for a layer is the model's node that computed it (for a QDQ layer the node before its
//! `QuantizeLinear`, e.g. the `Conv`), and layers are in the model's graph order.

use std::collections::{BTreeSet, HashMap, HashSet};

use npugate_onnx::{GraphId, Model, ModelIndex, NodeInfo};
use serde::{Deserialize, Serialize};

use super::quant::QuantParams;

/// How a float tensor was found in the model under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchRule {
    /// The `DequantizeLinear` output of the `QuantizeLinear` that reads the float tensor's name.
    QuantizeDequantize,
    /// The model's tensor of the same name.
    SameName,
}

/// How the model under test shows a layer's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    /// Its tensor `0`, as saved.
    Tensor(String),
    /// The `QuantizeLinear` output `quantized`, dequantized on the host with `params`.
    Dequantized {
        /// The integer tensor exposed.
        quantized: String,
        /// The `DequantizeLinear` node whose constants dequantize it.
        dequantize_node: String,
        /// Its scale, zero point and axis.
        params: QuantParams,
    },
}

impl Probe {
    /// The model tensor that is exposed as a graph output.
    pub fn exposed(&self) -> &str {
        match self {
            Probe::Tensor(name) => name,
            Probe::Dequantized { quantized, .. } => quantized,
        }
    }
}

/// One layer as the reports name it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerId {
    /// The float tensor (its name in the reference model).
    pub tensor: String,
    /// The model's node that computed it (empty when the node has no name; see `op_type`).
    pub node: String,
    /// That node's operator.
    pub op_type: String,
    /// The reference model's node that produced the float tensor.
    pub reference_node: String,
    /// How it was matched.
    pub rule: MatchRule,
    /// The model tensor exposed as a graph output to read it.
    pub exposed: String,
    /// The `DequantizeLinear` whose scale and zero point dequantized `exposed` on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dequantized_with: Option<String>,
    /// The layers feeding it: the nearest compared tensors upstream in the model's graph.
    pub inputs: Vec<String>,
}

/// A matched layer: how to read it, and where it sits.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    /// How the reports name it.
    pub id: LayerId,
    /// How the model under test shows it.
    pub probe: Probe,
    /// Indices (into [`Matching::layers`]) of [`LayerId::inputs`].
    pub inputs: Vec<usize>,
    /// True when the float tensor is a graph output of the reference model (class scores keep top-1).
    pub model_output: bool,
    /// The model's tensors from the computing node's output to the probe (`r`, its Q and DQ outputs).
    chain: Vec<String>,
    /// Position of the computing node in the model's main graph.
    order: (usize, usize),
}

/// Which model a tensor belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The model under test.
    Model,
    /// The float reference model.
    Reference,
}

/// Why a tensor is not compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnmatchedReason {
    /// A float tensor with no tensor of its name in the model and no `QuantizeLinear` reading it
    /// (fused away, e.g. a Conv output whose Relu was folded in, or renamed).
    NotInModel,
    /// A model tensor that stands for no float tensor.
    NotInReference,
    /// A weight or bias dequantized by a `DequantizeLinear` (a constant, not an activation).
    DequantizedConstant,
    /// A weight computed from weights alone (an `Identity`, `Cast`, `Reshape`, … of constants: a
    /// copy of a weight, not an activation).
    WeightCopy,
    /// A graph input passing through `QuantizeLinear`/`DequantizeLinear` (the inputs are the same
    /// for both runs by construction).
    QuantizedInput,
    /// A float tensor the model under test computes inside a compiled context binary (an
    /// `EPContext` node): no run can expose it; numerics of the model's source model can.
    InsideCompiledContext,
}

impl UnmatchedReason {
    /// What the reason means, for people (plural: it heads a group of tensors).
    pub fn describe(self) -> &'static str {
        match self {
            UnmatchedReason::NotInModel => "float tensors with no counterpart in the model (fused away or renamed)",
            UnmatchedReason::NotInReference => "model tensors with no counterpart in the reference",
            UnmatchedReason::DequantizedConstant => "dequantized weights and biases (constants, not activations)",
            UnmatchedReason::WeightCopy => "weights computed from weights alone (copies of constants, not activations)",
            UnmatchedReason::QuantizedInput => "quantized graph inputs (the same inputs for both runs)",
            UnmatchedReason::InsideCompiledContext => {
                "float tensors computed inside the model's compiled context (EPContext nodes: no run exposes them; run numerics on the source model for each layer)"
            }
        }
    }
}

/// A tensor that is not compared, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unmatched {
    /// The model it belongs to.
    pub side: Side,
    /// Its name.
    pub tensor: String,
    /// The node producing it.
    pub node: String,
    /// That node's operator.
    pub op_type: String,
    /// Why it is not compared.
    pub reason: UnmatchedReason,
}

/// The layers to compare, and what was left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Matching {
    /// Matched layers in the model's graph order.
    pub layers: Vec<Layer>,
    /// Tensors of either model that are not compared, each with why.
    pub unmatched: Vec<Unmatched>,
}

/// Which tensors to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every activation.
    All,
    /// Only these tensors (float names, or the model's names for them); with `strict`, a name that
    /// is no tensor of either model is an error.
    Only {
        /// The names.
        tensors: BTreeSet<String>,
        /// Names typed by the user (each must exist).
        strict: bool,
    },
}

impl Matching {
    /// Matches the float tensors of `reference` with `model`'s and keeps the `selection`.
    /// Errors only for names of a strict selection that neither model has.
    pub fn build(model: &Model, reference: &Model, selection: &Selection) -> Result<Matching, String> {
        let (m, r) = (model.index(), reference.index());
        let mut layers = Vec::new();
        let mut unmatched = Vec::new();
        let reference_outputs: HashSet<String> =
            reference.proto().graph.iter().flat_map(|g| &g.output).map(|o| o.name().to_string()).collect();
        // A compiled model computes what it does not show inside its EPContext nodes.
        let compiled = m.nodes().iter().any(NodeInfo::is_ep_context);
        let not_in_model = if compiled { UnmatchedReason::InsideCompiledContext } else { UnmatchedReason::NotInModel };
        // A copy of weights (an `Identity` of a dequantized bias, …) is no layer: both sides hold
        // the same constants (∞ dB). It is listed once, as a weight copy of the reference.
        let mut copies: HashSet<&str> = HashSet::new();
        for (node, tensor) in activations(&r) {
            if from_constants(reference, &r, node, 0) {
                copies.insert(tensor);
                unmatched.push(Unmatched {
                    side: Side::Reference,
                    tensor: tensor.to_string(),
                    node: node.name().to_string(),
                    op_type: node.op_type().to_string(),
                    reason: UnmatchedReason::WeightCopy,
                });
                continue;
            }
            match find(model, &m, tensor) {
                Some((probe, rule, chain, computing)) => {
                    let dequantized_with = match &probe {
                        Probe::Dequantized { dequantize_node, .. } => Some(dequantize_node.clone()),
                        Probe::Tensor(_) => None,
                    };
                    layers.push(Layer {
                        id: LayerId {
                            tensor: tensor.to_string(),
                            node: computing.name().to_string(),
                            op_type: computing.op_type().to_string(),
                            reference_node: node.name().to_string(),
                            rule,
                            exposed: probe.exposed().to_string(),
                            dequantized_with,
                            inputs: Vec::new(),
                        },
                        probe,
                        inputs: Vec::new(),
                        model_output: reference_outputs.contains(tensor),
                        chain,
                        order: (computing.index, computing.outputs().iter().position(|o| o == tensor).unwrap_or(0)),
                    });
                }
                None => unmatched.push(Unmatched {
                    side: Side::Reference,
                    tensor: tensor.to_string(),
                    node: node.name().to_string(),
                    op_type: node.op_type().to_string(),
                    reason: not_in_model,
                }),
            }
        }
        layers.sort_by_key(|layer| layer.order);
        let covered: HashSet<&str> = layers.iter().flat_map(|l| l.chain.iter().map(String::as_str)).collect();
        let model_unmatched: Vec<Unmatched> = activations(&m)
            .filter(|(_, tensor)| !covered.contains(tensor) && !copies.contains(tensor))
            .map(|(node, tensor)| Unmatched {
                side: Side::Model,
                tensor: tensor.to_string(),
                node: node.name().to_string(),
                op_type: node.op_type().to_string(),
                reason: model_only_reason(model, &m, node),
            })
            .collect();
        unmatched.extend(model_unmatched);
        if let Selection::Only { tensors, strict } = selection {
            if *strict {
                let known: HashSet<&str> = activations(&m).chain(activations(&r)).map(|(_, t)| t).collect();
                let unknown: Vec<&String> = tensors.iter().filter(|t| !known.contains(t.as_str())).collect();
                if !unknown.is_empty() {
                    return Err(format!("no tensor {unknown:?} in either model (node outputs of the main graph; the list of a model's tensors is in numerics.json of a --tensors all run)"));
                }
            }
            layers.retain(|l| tensors.contains(&l.id.tensor) || l.chain.iter().any(|t| tensors.contains(t)));
            unmatched.retain(|u| tensors.contains(&u.tensor));
        }
        link_inputs(&m, &mut layers);
        Ok(Matching { layers, unmatched })
    }

    /// The model tensors to expose (the probes), in layer order.
    pub fn exposed_in_model(&self) -> Vec<&str> {
        self.layers.iter().map(|l| l.probe.exposed()).collect()
    }

    /// The reference tensors to expose, in layer order.
    pub fn exposed_in_reference(&self) -> Vec<&str> {
        self.layers.iter().map(|l| l.id.tensor.as_str()).collect()
    }
}

const QUANTIZE: &str = "QuantizeLinear";
const DEQUANTIZE: &str = "DequantizeLinear";

/// The main graph's activations: (producing node, tensor) in node order, without `Constant` nodes.
fn activations<'i, 'm>(index: &'i ModelIndex<'m>) -> impl Iterator<Item = (&'i NodeInfo<'m>, &'m str)> + 'i {
    index
        .nodes()
        .iter()
        .filter(|node| node.graph == GraphId::MAIN && node.op_type() != "Constant")
        .flat_map(|node| node.outputs().iter().filter(|o| !o.is_empty()).map(move |o| (node, o.as_str())))
}

/// The main-graph node producing `tensor`.
fn producer<'i, 'm>(index: &'i ModelIndex<'m>, tensor: &str) -> Option<&'i NodeInfo<'m>> {
    index.producer(tensor).filter(|node| node.graph == GraphId::MAIN)
}

/// The model's probe of float tensor `tensor` by the rules of this module: the probe, the rule,
/// the chain of model tensors it covers, and the computing node.
fn find<'i, 'm>(
    model: &Model,
    index: &'i ModelIndex<'m>,
    tensor: &str,
) -> Option<(Probe, MatchRule, Vec<String>, &'i NodeInfo<'m>)> {
    let computing = producer(index, tensor)?;
    let pair = index
        .consumers(tensor)
        .filter(|q| {
            q.graph == GraphId::MAIN
                && q.op_type() == QUANTIZE
                && q.inputs().first().map(String::as_str) == Some(tensor)
        })
        .find_map(|q| {
            let quantized = q.outputs().first()?;
            let dq = index.consumers(quantized).find(|d| {
                d.graph == GraphId::MAIN
                    && d.op_type() == DEQUANTIZE
                    && d.inputs().first() == Some(quantized)
                    && d.outputs().first().is_some_and(|o| !o.is_empty())
            })?;
            Some((quantized.clone(), dq))
        });
    if let Some((quantized, dq)) = pair {
        let dequantized = dq.outputs()[0].clone();
        let probe = match QuantParams::of_dequantize(model, dq.proto) {
            Ok(params) => {
                Probe::Dequantized { quantized: quantized.clone(), dequantize_node: dq.name().to_string(), params }
            }
            Err(_) => Probe::Tensor(dequantized.clone()),
        };
        return Some((
            probe,
            MatchRule::QuantizeDequantize,
            vec![tensor.to_string(), quantized, dequantized],
            computing,
        ));
    }
    // Same name: walk up through a Q/DQ chain to the node that computed the value.
    let mut chain = vec![tensor.to_string()];
    let mut node = computing;
    while matches!(node.op_type(), QUANTIZE | DEQUANTIZE) {
        let Some(up) = node.inputs().first().and_then(|input| producer(index, input).map(|p| (input, p))) else {
            break;
        };
        chain.push(up.0.clone());
        node = up.1;
    }
    chain.reverse();
    Some((Probe::Tensor(tensor.to_string()), MatchRule::SameName, chain, node))
}

/// Why a model tensor that stands for no float tensor is there.
fn model_only_reason(model: &Model, index: &ModelIndex<'_>, node: &NodeInfo<'_>) -> UnmatchedReason {
    if node.op_type() != DEQUANTIZE && from_constants(model, index, node, 0) {
        return UnmatchedReason::WeightCopy;
    }
    let mut node = *node;
    let mut first = true;
    while matches!(node.op_type(), QUANTIZE | DEQUANTIZE) {
        let Some(input) = node.inputs().first() else { break };
        if first && node.op_type() == DEQUANTIZE && model.constant(input).is_some() {
            return UnmatchedReason::DequantizedConstant;
        }
        match producer(index, input) {
            Some(up) => node = *up,
            None if model.constant(input).is_none() => return UnmatchedReason::QuantizedInput,
            None => break,
        }
        first = false;
    }
    UnmatchedReason::NotInReference
}

/// True when every input of `node` is a constant or computed from constants alone (a weight
/// copy); `depth` bounds the walk up the graph.
fn from_constants(model: &Model, index: &ModelIndex<'_>, node: &NodeInfo<'_>, depth: usize) -> bool {
    let inputs: Vec<&String> = node.inputs().iter().filter(|input| !input.is_empty()).collect();
    !inputs.is_empty()
        && depth < 16
        && inputs.iter().all(|input| {
            model.constant(input).is_some()
                || producer(index, input).is_some_and(|up| from_constants(model, index, up, depth + 1))
        })
}

/// Sets each layer's inputs: the nearest layers upstream of its computing node in the model's
/// graph (graph inputs and constants end the walk; they are the same for both runs).
fn link_inputs(index: &ModelIndex<'_>, layers: &mut [Layer]) {
    let owner: HashMap<&str, usize> =
        layers.iter().enumerate().flat_map(|(i, l)| l.chain.iter().map(move |t| (t.as_str(), i))).collect();
    let mut found = Vec::with_capacity(layers.len());
    for (i, layer) in layers.iter().enumerate() {
        let mut inputs = BTreeSet::new();
        let computing = layer.chain.first().and_then(|t| producer(index, t));
        let mut stack: Vec<&str> =
            computing.map(|n| n.inputs().iter().map(String::as_str).collect()).unwrap_or_default();
        let mut seen = HashSet::new();
        while let Some(tensor) = stack.pop() {
            if tensor.is_empty() || !seen.insert(tensor) {
                continue;
            }
            match owner.get(tensor) {
                Some(&j) if j != i => {
                    inputs.insert(j);
                }
                Some(_) => {}
                None => {
                    if let Some(node) = producer(index, tensor) {
                        stack.extend(node.inputs().iter().map(String::as_str));
                    }
                }
            }
        }
        found.push(inputs.into_iter().collect::<Vec<usize>>());
    }
    let names: Vec<String> = layers.iter().map(|l| l.id.tensor.clone()).collect();
    for (layer, inputs) in layers.iter_mut().zip(found) {
        layer.id.inputs = inputs.iter().map(|&j| names[j].clone()).collect();
        layer.inputs = inputs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{float, qdq};

    #[test]
    fn a_qdq_layer_is_its_dequantized_tensor_never_the_raw_one() {
        let matching = Matching::build(&qdq(), &float(), &Selection::All).unwrap();
        let ids: Vec<(&str, &str, MatchRule, &str)> = matching
            .layers
            .iter()
            .map(|l| (l.id.tensor.as_str(), l.id.node.as_str(), l.id.rule, l.id.exposed.as_str()))
            .collect();
        assert_eq!(
            ids,
            [("r", "conv", MatchRule::QuantizeDequantize, "r_qo"), ("y", "pool", MatchRule::SameName, "y")]
        );
        let Probe::Dequantized { params, dequantize_node, .. } = &matching.layers[0].probe else {
            panic!("dequantized on the host")
        };
        assert_eq!(
            (params.scale.as_slice(), params.zero_point.as_slice(), dequantize_node.as_str()),
            (&[0.5][..], &[10.0][..], "r_dq")
        );
        assert_eq!(matching.layers[1].id.inputs, ["r"]);
        assert!(matching.layers[0].id.inputs.is_empty(), "the graph input and the weight end the walk");
        assert!(matching.layers[1].model_output);
        let unmatched: Vec<(Side, &str, UnmatchedReason)> =
            matching.unmatched.iter().map(|u| (u.side, u.tensor.as_str(), u.reason)).collect();
        assert_eq!(
            unmatched,
            [
                (Side::Reference, "c", UnmatchedReason::NotInModel),
                (Side::Model, "x_qo", UnmatchedReason::QuantizedInput),
                (Side::Model, "x_dqo", UnmatchedReason::QuantizedInput),
                (Side::Model, "w", UnmatchedReason::DequantizedConstant),
                (Side::Model, "spare", UnmatchedReason::NotInReference),
            ]
        );
        assert_eq!(matching.exposed_in_model(), ["r_qo", "y"]);
        assert_eq!(matching.exposed_in_reference(), ["r", "y"]);
    }

    #[test]
    fn copies_of_weights_are_weights_not_unmatched_activations() {
        let mut nodes = vec![
            crate::testing::node("copy", "Identity", &["w_q"], &["w_c"]),
            crate::testing::node("cast", "Cast", &["w_c"], &["w_f"]),
        ];
        let model = crate::testing::graph(nodes.clone());
        nodes.push(crate::testing::node("scaled", "Mul", &["x", "w_f"], &["y"]));
        let reference = crate::testing::graph(nodes);
        let matching = Matching::build(&model, &reference, &Selection::All).unwrap();
        let reasons: Vec<(&str, UnmatchedReason)> =
            matching.unmatched.iter().map(|u| (u.tensor.as_str(), u.reason)).collect();
        assert_eq!(
            reasons,
            [
                ("w_c", UnmatchedReason::WeightCopy),
                ("w_f", UnmatchedReason::WeightCopy),
                ("y", UnmatchedReason::NotInModel)
            ],
            "the copies are weights (no layer, listed once, by the reference's name), not layers at ∞ dB"
        );
        assert!(matching.layers.is_empty(), "no copy of a weight is a layer");
        let alone = Matching::build(&model, &float(), &Selection::All).unwrap();
        let model_side: Vec<(&str, UnmatchedReason)> =
            alone.unmatched.iter().filter(|u| u.side == Side::Model).map(|u| (u.tensor.as_str(), u.reason)).collect();
        assert_eq!(model_side, [("w_c", UnmatchedReason::WeightCopy), ("w_f", UnmatchedReason::WeightCopy)]);
    }

    #[test]
    fn a_float_model_against_itself_matches_every_tensor_by_name() {
        let matching = Matching::build(&float(), &float(), &Selection::All).unwrap();
        let names: Vec<&str> = matching.layers.iter().map(|l| l.id.tensor.as_str()).collect();
        assert_eq!(names, ["c", "r", "y"]);
        assert!(matching.layers.iter().all(|l| l.id.rule == MatchRule::SameName));
        assert_eq!(matching.layers[2].inputs, [1]);
        assert!(matching.unmatched.is_empty());
    }

    #[test]
    fn a_selection_keeps_its_tensors_by_either_name_and_refuses_unknown_ones() {
        let only =
            |names: &[&str], strict| Selection::Only { tensors: names.iter().map(|s| s.to_string()).collect(), strict };
        let matching = Matching::build(&qdq(), &float(), &only(&["r_dqo"], true)).unwrap();
        assert_eq!(matching.layers.len(), 1);
        assert_eq!(matching.layers[0].id.tensor, "r");
        assert!(matching.unmatched.is_empty());
        let spare = Matching::build(&qdq(), &float(), &only(&["y", "spare"], true)).unwrap();
        assert_eq!(spare.layers[0].id.inputs, Vec::<String>::new(), "inputs among the selected layers only");
        assert_eq!(spare.unmatched.len(), 1);
        let error = Matching::build(&qdq(), &float(), &only(&["nope"], true)).unwrap_err();
        assert!(error.contains("\"nope\""), "{error}");
        assert!(Matching::build(&qdq(), &float(), &only(&["nope"], false)).unwrap().layers.is_empty());
    }
}
