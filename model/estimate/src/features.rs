//! What the estimate reads of a model: FLOPs by op class, bytes of weights and activations, layers
//! and the precision, from a placement report (npugate's FLOPs counter on the reference pass's
//! shapes) and the ONNX model (initializer and quantization types).

use npugate_onnx::proto::tensor_proto::DataType;
use npugate_onnx::{ElementType, Model, ValueSignature};
use npugate_profile::report::{NodePlacement, PlacementReport};
use serde::{Deserialize, Serialize};

/// Ops whose FLOPs are convolutions (multiply-accumulates over feature maps).
const CONV_OPS: &[&str] = &["Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "FusedConv", "NhwcConv"];
/// Ops whose FLOPs are matrix products (dense layers, attention, recurrences).
const MATMUL_OPS: &[&str] = &[
    "MatMul",
    "Gemm",
    "FusedMatMul",
    "FusedGemm",
    "MatMulInteger",
    "QLinearMatMul",
    "QGemm",
    "Einsum",
    "Attention",
    "MultiHeadAttention",
    "GroupQueryAttention",
    "LSTM",
    "GRU",
    "RNN",
];
/// Ops that are no layer of their own on the HTP: the quantization conversions (folded into
/// their neighbours' encodings) and pure bookkeeping.
const NOT_LAYERS: &[&str] = &["QuantizeLinear", "DequantizeLinear", "Identity", "Constant", "Shape", "Size"];

/// The numeric precision a model runs in on the HTP, in AI Hub's words: `float` (run in fp16),
/// `w8a8`, `w8a16`, … (weight and activation bits of its QDQ nodes).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Precision(pub String);

impl Precision {
    /// A float model (fp32 or fp16 tensors, no quantization nodes), which the HTP runs in fp16.
    pub fn float() -> Precision {
        Precision("float".into())
    }

    /// Reads the precision of a model: `float` without QDQ nodes; else `w<W>a<A>` from the most
    /// common width of the initializers `DequantizeLinear` nodes read (the weights; a few 16-bit
    /// constants beside 8-bit weights do not make a w16 model) and the widest zero point of a
    /// `QuantizeLinear` (8 when it has none, the ONNX default uint8).
    pub fn of_model(model: &Model) -> Precision {
        let index = model.index();
        let initializers: Vec<ValueSignature> = index.graphs().iter().flat_map(|g| g.initializers()).collect();
        let bits_of = |name: &str| initializers.iter().find(|i| i.name == name).and_then(|i| bits(i.element_type));
        let mut weight_widths: Vec<u32> = Vec::new();
        let mut activations = None;
        for node in index.nodes() {
            match node.op_type() {
                "DequantizeLinear" => {
                    weight_widths.extend(node.inputs().first().and_then(|name| bits_of(name)));
                }
                "QuantizeLinear" => {
                    let b = node.inputs().get(2).filter(|n| !n.is_empty()).and_then(|name| bits_of(name)).unwrap_or(8);
                    activations = activations.max(Some(b));
                }
                _ => {}
            }
        }
        let count = |bits: &u32| weight_widths.iter().filter(|b| *b == bits).count();
        let weights = weight_widths.iter().copied().max_by(|a, b| count(a).cmp(&count(b)).then(b.cmp(a)));
        match (weights, activations) {
            (None, None) => Precision::float(),
            (w, a) => Precision(format!("w{}a{}", w.or(a).unwrap_or(8), a.or(w).unwrap_or(8))),
        }
    }

    /// The class of arithmetic its multiply-accumulates run in: `fp16`, `int16` or `int8`
    /// activations (the HTP's MAC throughput differs by about 2× between them).
    pub fn mac_class(&self) -> MacClass {
        match self.0.rsplit_once('a').map(|(_, bits)| bits) {
            _ if self.0 == "float" => MacClass::Fp16,
            Some("16") => MacClass::Int16,
            Some("8") | Some("4") => MacClass::Int8,
            _ => MacClass::Fp16,
        }
    }

    /// Bytes of one activation element on the HTP: 2 for float (fp16) and 16-bit, 1 for 8-bit.
    fn activation_bytes(&self) -> f64 {
        match self.mac_class() {
            MacClass::Int8 => 1.0,
            MacClass::Fp16 | MacClass::Int16 => 2.0,
        }
    }
}

/// The arithmetic of a model's multiply-accumulates on the HTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MacClass {
    /// A float model, run in fp16.
    Fp16,
    /// 16-bit activations (`w8a16`, `w16a16`).
    Int16,
    /// 8-bit activations (`w8a8`).
    Int8,
}

/// The bits of a quantized element type, `None` for anything else.
fn bits(element: ElementType) -> Option<u32> {
    match element.data_type()? {
        DataType::Uint8 | DataType::Int8 => Some(8),
        DataType::Uint16 | DataType::Int16 => Some(16),
        DataType::Uint4 | DataType::Int4 => Some(4),
        _ => None,
    }
}

/// Bytes of one initializer element on the HTP: float weights are stored as fp16; shape and index
/// tensors (int64) are not moved by the NPU.
fn stored_bytes(element: ElementType) -> f64 {
    match element.data_type() {
        Some(DataType::Float | DataType::Float16 | DataType::Bfloat16 | DataType::Uint16 | DataType::Int16) => 2.0,
        Some(DataType::Uint8 | DataType::Int8 | DataType::Bool) => 1.0,
        Some(DataType::Int32 | DataType::Uint32) => 4.0,
        Some(DataType::Uint4 | DataType::Int4) => 0.5,
        _ => 0.0,
    }
}

/// A model's graph as the estimate sees it (one per model and precision).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphFeatures {
    /// `float`, `w8a8`, `w8a16`, …
    pub precision: Precision,
    /// FLOPs of dense convolutions (FLOPs = 2 × multiply-accumulates, npugate's counter).
    pub conv_flops: u64,
    /// FLOPs of grouped and depthwise convolutions (few FLOPs, poorly fed matrix units).
    #[serde(default)]
    pub grouped_conv_flops: u64,
    /// FLOPs of matrix products: MatMul, Gemm, Einsum, attention, recurrences.
    pub matmul_flops: u64,
    /// FLOPs of everything else counted: element-wise, normalization, softmax, pooling, resize.
    pub other_flops: u64,
    /// Nodes whose FLOPs npugate does not know (counted as 0 above).
    pub unknown_flops_nodes: usize,
    /// Bytes of the weights as the HTP stores them (float as fp16).
    pub weight_bytes: u64,
    /// Bytes of every layer's outputs at the precision's activation width.
    pub activation_bytes: u64,
    /// Layers: nodes other than quantization conversions and bookkeeping.
    pub layers: usize,
}

impl GraphFeatures {
    /// The features of `nodes` (a placement report's nodes: every node, or those one EP took) of
    /// `model` running at `precision`.
    pub fn of_nodes<'a>(
        nodes: impl IntoIterator<Item = &'a NodePlacement>,
        model: &Model,
        precision: Precision,
    ) -> GraphFeatures {
        let mut features = GraphFeatures {
            precision,
            conv_flops: 0,
            grouped_conv_flops: 0,
            matmul_flops: 0,
            other_flops: 0,
            unknown_flops_nodes: 0,
            weight_bytes: weight_bytes(model),
            activation_bytes: 0,
            layers: 0,
        };
        let width = features.precision.activation_bytes();
        for node in nodes {
            let op = node.op_type.as_str();
            if NOT_LAYERS.contains(&op) {
                continue;
            }
            features.layers += 1;
            let outputs: u64 = node.output_shapes.iter().map(|shape| elements(shape)).sum();
            features.activation_bytes += (outputs as f64 * width) as u64;
            let Some(flops) = node.flops else {
                features.unknown_flops_nodes += 1;
                continue;
            };
            match op {
                op if CONV_OPS.contains(&op) && grouped(node) => features.grouped_conv_flops += flops,
                op if CONV_OPS.contains(&op) => features.conv_flops += flops,
                op if MATMUL_OPS.contains(&op) => features.matmul_flops += flops,
                _ => features.other_flops += flops,
            }
        }
        features
    }

    /// The features of the whole model in `report` (every node placed on any EP).
    pub fn of_report(report: &PlacementReport, model: &Model) -> GraphFeatures {
        GraphFeatures::of_nodes(&report.nodes, model, Precision::of_model(model))
    }
}

/// Bytes of every weight of the model as the HTP stores it: its initializers and the tensors of
/// its `Constant` nodes (exporters such as paddle2onnx hold weights there; ONNX Runtime turns them
/// into initializers at load), in every graph.
fn weight_bytes(model: &Model) -> u64 {
    let index = model.index();
    let stored = |value: ValueSignature| {
        let count: f64 = value.dims.iter().flatten().map(|d| d.fixed().unwrap_or(0).max(0) as f64).product();
        count * stored_bytes(value.element_type)
    };
    let initializers: f64 = index.graphs().iter().flat_map(|graph| graph.initializers()).map(stored).sum();
    let constants: f64 = index
        .nodes()
        .iter()
        .filter(|node| node.op_type() == npugate_onnx::CONSTANT)
        .flat_map(|node| node.proto.attribute.iter().filter(|a| a.name() == "value").flat_map(|a| a.t.as_ref()))
        .map(|tensor| stored(ValueSignature::from_tensor(tensor)))
        .sum();
    (initializers + constants) as u64
}

/// True for a grouped or depthwise convolution: its weight `[C_out, C_in/group, k…]` reads fewer
/// channels than its input `[N, C_in, …]` has.
fn grouped(node: &NodePlacement) -> bool {
    let channels = |shape: Option<&String>, at: usize| shape.and_then(|s| dims(s).get(at).copied());
    match (channels(node.input_shapes.first(), 1), channels(node.input_shapes.get(1), 1)) {
        (Some(input), Some(per_group)) => per_group > 0 && per_group < input,
        _ => false,
    }
}

/// The dims of a shape as the placement report prints it (`[1,64,112,112]`).
fn dims(shape: &str) -> Vec<i64> {
    let inner = shape.trim().trim_start_matches('[').trim_end_matches(']');
    inner.split(',').filter_map(|d| d.trim().parse().ok()).collect()
}

/// Elements of a shape as the placement report prints it (`[1,64,112,112]`); 0 when unreadable.
fn elements(shape: &str) -> u64 {
    let inner = shape.trim().trim_start_matches('[').trim_end_matches(']');
    if inner.split(',').any(|d| d.trim().parse::<i64>().is_err()) && !inner.trim().is_empty() {
        return 0;
    }
    dims(shape).iter().map(|&d| u64::try_from(d).unwrap_or(0)).product()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_held_in_constant_nodes_count_as_weights() {
        use npugate_onnx::proto::{AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto};
        let tensor = |name: &str| TensorProto {
            name: Some(name.into()),
            dims: vec![10, 10],
            data_type: Some(DataType::Float as i32),
            ..Default::default()
        };
        let constant = NodeProto {
            op_type: Some("Constant".into()),
            output: vec!["w".into()],
            attribute: vec![AttributeProto { name: Some("value".into()), t: Some(tensor("w")), ..Default::default() }],
            ..Default::default()
        };
        let graph = GraphProto { node: vec![constant], initializer: vec![tensor("v")], ..Default::default() };
        let model = Model::from(ModelProto { graph: Some(graph), ..Default::default() });
        // 100 floats each, stored as fp16: 200 bytes in the Constant node, 200 in the initializer.
        assert_eq!(weight_bytes(&model), 400);
    }

    #[test]
    fn shapes_count_their_elements() {
        assert_eq!(elements("[1,64,112,112]"), 64 * 112 * 112);
        assert_eq!(elements("[]"), 1);
        assert_eq!(elements("[1,-1]"), 0);
    }

    #[test]
    fn depthwise_and_grouped_convolutions_are_told_from_dense_ones() {
        let conv = |input: &str, weight: &str| NodePlacement {
            name: "c".into(),
            op_type: "Conv".into(),
            domain: String::new(),
            ep: String::new(),
            not_placed: None,
            input_shapes: vec![input.into(), weight.into()],
            output_shapes: vec![],
            flops: Some(1),
            profile_ep: None,
            time_us_per_run: None,
            backend_time: None,
        };
        assert!(grouped(&conv("[1,32,112,112]", "[32,1,3,3]")));
        assert!(grouped(&conv("[1,64,56,56]", "[64,16,3,3]")));
        assert!(!grouped(&conv("[1,3,224,224]", "[64,3,7,7]")));
        assert!(!grouped(&conv("[1,3,224,224]", "")));
    }

    #[test]
    fn precisions_name_their_arithmetic() {
        assert_eq!(Precision::float().mac_class(), MacClass::Fp16);
        assert_eq!(Precision("w8a16".into()).mac_class(), MacClass::Int16);
        assert_eq!(Precision("w8a8".into()).mac_class(), MacClass::Int8);
        assert_eq!(Precision("w8a8".into()).activation_bytes(), 1.0);
    }
}
