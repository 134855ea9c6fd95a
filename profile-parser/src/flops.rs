//! FLOPs of one node from its op type and input/output shapes (ORT's profile has no FLOPs field).
//!
//! # Convention
//!
//! * **FLOPs = 2 × multiply-accumulates** for ops with a MAC core: Conv (and FusedConv, NCHWc /
//!   NHWC convs, QLinearConv, ConvInteger), ConvTranspose, MatMul, Gemm, FusedMatMul, QLinearMatMul,
//!   MatMulInteger, QGemm, DynamicQuantizeMatMul, MatMulNBits, Einsum, the attention ops and
//!   LSTM/GRU/RNN. Bias additions are not counted (≤ 0.1 % on CNNs); the activation fused into a
//!   FusedConv/FusedGemm counts 1 FLOP per output element.
//!   - Conv: `output elements × weight[1] × prod(kernel)`, i.e. group = in_channels / weight[1] is
//!     implied by the weight shape `[C_out, C_in/group, k…]`.
//!   - Einsum: the equation is not in the profile; leading dimensions equal in all operands are
//!     taken as batch, the rest of the contraction size follows from the shapes.
//!   - Attention family: the Q·Kᵀ and A·V products (plus the QKV projection for `Attention`);
//!     softmax and masking are not counted.
//!   - LSTM/GRU/RNN: `directions × seq × batch × (W gates·hidden × input + R gates·hidden × hidden)`.
//! * **Non-MAC ops** count per element:
//!   - element-wise and activation ops: 1 FLOP per output element (variadic Sum/Min/Max/Mean:
//!     inputs − 1 per element);
//!   - Softmax / LogSoftmax: 3 per element (exp, sum, divide);
//!   - LayerNormalization, InstanceNormalization, GroupNormalization: 5 per element (mean, centred
//!     square, variance sum, normalize, affine); SkipLayerNormalization: +1 for the skip add;
//!     SimplifiedLayerNormalization / RMSNorm: 4; BatchNormalization (inference): 2;
//!   - pooling, reductions and TopK: 1 per input element (kernel size is not in the profile; exact
//!     for global pooling and non-overlapping windows);
//!   - Resize / Upsample: 1 per output element (the interpolation mode is not in the profile);
//!   - Det: ⅔·n³ per matrix (LU).
//! * **Known zero**: data movement, shape and type ops (Reshape, Transpose, Gather, Concat, Slice,
//!   Cast, …) and the quantization conversions QuantizeLinear / DequantizeLinear /
//!   DynamicQuantizeLinear: a QDQ group's cost is its core op's.
//! * Anything else is **unknown** ([`FlopsError::UnknownOp`]): reported, never silently zero.

/// Why FLOPs could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlopsError {
    /// The op type is in neither the counted nor the known-zero list.
    #[error("FLOPs unknown for {0}")]
    UnknownOp(String),
    /// A shape the formula needs is absent or has the wrong rank.
    #[error("FLOPs unknown for {op}: {what}")]
    MissingShape {
        /// Op type.
        op: String,
        /// What was missing.
        what: &'static str,
    },
}

use crate::shape::{product, TensorShape};

/// Ops that move, reshape, index or convert data: 0 FLOPs by convention.
pub const KNOWN_ZERO_OPS: &[&str] = &[
    "Reshape",
    "Transpose",
    "Shape",
    "Size",
    "Gather",
    "GatherElements",
    "GatherND",
    "Concat",
    "Slice",
    "Split",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Identity",
    "Expand",
    "Tile",
    "Pad",
    "Cast",
    "CastLike",
    "Constant",
    "ConstantOfShape",
    "Range",
    "Dropout",
    "DepthToSpace",
    "SpaceToDepth",
    "ScatterND",
    "ScatterElements",
    "NonZero",
    "OneHot",
    "Trilu",
    "ReorderInput",
    "ReorderOutput",
    "MemcpyToHost",
    "MemcpyFromHost",
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "QLinearConcat",
    "EyeLike",
    "Compress",
    "ReverseSequence",
    "Optional",
    "OptionalHasElement",
    "OptionalGetElement",
    "SequenceConstruct",
    "If",
];

/// Element-wise and activation ops: 1 FLOP per output element.
const ELEMENTWISE_OPS: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Mod",
    "Sqrt",
    "Exp",
    "Log",
    "Abs",
    "Neg",
    "Reciprocal",
    "Floor",
    "Ceil",
    "Round",
    "Sign",
    "Sin",
    "Cos",
    "Tan",
    "Asin",
    "Acos",
    "Atan",
    "Sinh",
    "Cosh",
    "Erf",
    "Relu",
    "LeakyRelu",
    "PRelu",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "Tanh",
    "Elu",
    "Selu",
    "Celu",
    "Gelu",
    "FastGelu",
    "BiasGelu",
    "QuickGelu",
    "Softplus",
    "Softsign",
    "Mish",
    "ThresholdedRelu",
    "Shrink",
    "Clip",
    "Where",
    "Equal",
    "Greater",
    "GreaterOrEqual",
    "Less",
    "LessOrEqual",
    "Not",
    "And",
    "Or",
    "Xor",
    "BitShift",
    "IsNaN",
    "IsInf",
    "CumSum",
    "BiasAdd",
    "QLinearAdd",
    "QLinearMul",
    "QLinearSigmoid",
    "QLinearLeakyRelu",
    "Affine",
    "ScaledTanh",
];

/// Variadic element-wise ops: inputs − 1 FLOPs per output element.
const VARIADIC_OPS: &[&str] = &["Sum", "Min", "Max", "Mean"];

/// Pooling and reductions: 1 FLOP per input element.
const POOL_REDUCE_OPS: &[&str] = &[
    "MaxPool",
    "AveragePool",
    "LpPool",
    "GlobalMaxPool",
    "GlobalAveragePool",
    "GlobalLpPool",
    "NhwcMaxPool",
    "QLinearGlobalAveragePool",
    "QLinearAveragePool",
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
    "ArgMax",
    "ArgMin",
    "MaxRoiPool",
    "TopK",
];

/// FLOPs of one node. `inputs`/`outputs` are the shapes ORT recorded, in operand order.
pub fn node_flops(op_type: &str, inputs: &[TensorShape], outputs: &[TensorShape]) -> Result<u64, FlopsError> {
    let out_elems = || first_elements(op_type, outputs, "output shape");
    let in_elems = || first_elements(op_type, inputs, "input shape");
    match op_type {
        op if KNOWN_ZERO_OPS.contains(&op) => Ok(0),
        op if ELEMENTWISE_OPS.contains(&op) => out_elems(),
        op if VARIADIC_OPS.contains(&op) => Ok(out_elems()?.saturating_mul(inputs.len().max(2) as u64 - 1)),
        op if POOL_REDUCE_OPS.contains(&op) => in_elems(),
        "Conv" | "NhwcConv" | "ConvInteger" => conv_macs(op_type, inputs, outputs, 1).map(double),
        "FusedConv" | "NhwcFusedConv" => {
            Ok(double(conv_macs(op_type, inputs, outputs, 1)?).saturating_add(out_elems()?))
        }
        "QLinearConv" => conv_macs(op_type, inputs, outputs, 3).map(double),
        "ConvTranspose" => conv_transpose_macs(op_type, inputs).map(double),
        "MatMul"
        | "FusedMatMul"
        | "MatMulInteger"
        | "DynamicQuantizeMatMul"
        | "MatMulNBits"
        | "Gemm"
        | "MatMulIntegerToFloat" => matmul_macs(op_type, inputs, outputs, 0).map(double),
        "FusedGemm" => Ok(double(matmul_macs(op_type, inputs, outputs, 0)?).saturating_add(out_elems()?)),
        "QLinearMatMul" | "QGemm" => matmul_macs(op_type, inputs, outputs, 0).map(double),
        "Einsum" => einsum_macs(op_type, inputs, outputs).map(double),
        "Attention" => attention_macs(op_type, inputs).map(double),
        "MultiHeadAttention" => mha_macs(op_type, inputs, outputs).map(double),
        "GroupQueryAttention" => gqa_macs(op_type, inputs, outputs).map(double),
        "LSTM" | "GRU" | "RNN" => recurrent_macs(op_type, inputs).map(double),
        "Softmax" | "LogSoftmax" | "QLinearSoftmax" => per_element(3, out_elems()?),
        "LayerNormalization" | "InstanceNormalization" | "GroupNormalization" | "GroupNorm" => {
            per_element(5, out_elems()?)
        }
        "SkipLayerNormalization" => per_element(6, out_elems()?),
        "SimplifiedLayerNormalization" | "SkipSimplifiedLayerNormalization" | "RMSNormalization" => {
            per_element(4, out_elems()?)
        }
        "BatchNormalization" => per_element(2, out_elems()?),
        "Resize" | "Upsample" => out_elems(),
        "Det" => det_flops(op_type, inputs),
        other => Err(FlopsError::UnknownOp(other.to_string())),
    }
}

/// FLOPs from MACs; saturating, like every product here, so absurd shapes cannot overflow.
fn double(macs: u64) -> u64 {
    macs.saturating_mul(2)
}

fn per_element(flops: u64, elements: u64) -> Result<u64, FlopsError> {
    Ok(elements.saturating_mul(flops))
}

fn operand<'a>(
    op: &str,
    shapes: &'a [TensorShape],
    index: usize,
    what: &'static str,
) -> Result<&'a TensorShape, FlopsError> {
    shapes.get(index).ok_or_else(|| FlopsError::MissingShape { op: op.to_string(), what })
}

fn first_elements(op: &str, shapes: &[TensorShape], what: &'static str) -> Result<u64, FlopsError> {
    operand(op, shapes, 0, what).map(TensorShape::elements)
}

fn missing(op: &str, what: &'static str) -> FlopsError {
    FlopsError::MissingShape { op: op.to_string(), what }
}

/// Conv MACs: output elements × (C_in/group) × prod(kernel), from the weight `[C_out, C_in/g, k…]`.
fn conv_macs(op: &str, inputs: &[TensorShape], outputs: &[TensorShape], weight_at: usize) -> Result<u64, FlopsError> {
    let weight = operand(op, inputs, weight_at, "weight shape")?;
    if weight.dims.len() < 3 {
        return Err(missing(op, "weight of rank ≥ 3"));
    }
    Ok(first_elements(op, outputs, "output shape")?.saturating_mul(product(&weight.dims[1..])))
}

/// ConvTranspose MACs: input elements × (C_out/group) × prod(kernel), from the weight
/// `[C_in, C_out/g, k…]` (each input element is scattered through one kernel per output channel).
fn conv_transpose_macs(op: &str, inputs: &[TensorShape]) -> Result<u64, FlopsError> {
    let weight = operand(op, inputs, 1, "weight shape")?;
    if weight.dims.len() < 3 {
        return Err(missing(op, "weight of rank ≥ 3"));
    }
    Ok(first_elements(op, inputs, "input shape")?.saturating_mul(product(&weight.dims[1..])))
}

/// MatMul-like MACs: output elements × K, K being A's dimension that is not the output's row count.
fn matmul_macs(op: &str, inputs: &[TensorShape], outputs: &[TensorShape], a_at: usize) -> Result<u64, FlopsError> {
    let a = &operand(op, inputs, a_at, "A shape")?.dims;
    let out = operand(op, outputs, 0, "output shape")?;
    let k = match a.as_slice() {
        [] => return Err(missing(op, "A of rank ≥ 1")),
        [k] => *k,
        [.., rows, cols] => {
            let m = out.dims.iter().rev().nth(1).copied().unwrap_or(1);
            // A is [M,K] or, transposed (Gemm transA, FusedMatMul transA), [K,M].
            if *rows == m {
                *cols
            } else {
                *rows
            }
        }
    };
    Ok(out.elements().saturating_mul(product(&[k])))
}

/// Einsum MACs = output elements × contraction size (see the module doc for the batch assumption).
fn einsum_macs(op: &str, inputs: &[TensorShape], outputs: &[TensorShape]) -> Result<u64, FlopsError> {
    let out = operand(op, outputs, 0, "output shape")?;
    match inputs {
        [single] => Ok(single.elements()),
        [a, b] => {
            let batch_rank =
                a.dims.iter().zip(&b.dims).zip(&out.dims).take_while(|((x, y), z)| x == y && y == z).count();
            let batch = product(&out.dims[..batch_rank]).max(1);
            let k_squared = (a.elements() as f64 * b.elements() as f64) / (out.elements().max(1) as f64 * batch as f64);
            Ok(out.elements().saturating_mul((k_squared.sqrt().round() as u64).max(1)))
        }
        _ => Err(missing(op, "one or two operand shapes")),
    }
}

/// `Attention` (com.microsoft): QKV projection + Q·Kᵀ + A·V, q/k/v hidden sizes equal.
fn attention_macs(op: &str, inputs: &[TensorShape]) -> Result<u64, FlopsError> {
    let input = &operand(op, inputs, 0, "input shape")?.dims;
    let weight = &operand(op, inputs, 1, "weight shape")?.dims;
    let (&[b, s, hidden_in], &[_, qkv]) = (input.as_slice(), weight.as_slice()) else {
        return Err(missing(op, "input [B,S,H] and weight [H,3H]"));
    };
    Ok(product(&[b, s, hidden_in, qkv]).saturating_add(double(product(&[b, s, s, (qkv / 3).max(1)]))))
}

/// Batch, sequence, query width and output width of an attention node with query `[B,S,D]`.
fn attention_dims(op: &str, inputs: &[TensorShape], outputs: &[TensorShape]) -> Result<[i64; 4], FlopsError> {
    let query = &operand(op, inputs, 0, "query shape")?.dims;
    let out = &operand(op, outputs, 0, "output shape")?.dims;
    match (query.as_slice(), out.last()) {
        (&[b, s, d], Some(&width)) => Ok([b, s, d, width]),
        _ => Err(missing(op, "query [B,S,D]")),
    }
}

/// `MultiHeadAttention`: Q·Kᵀ + A·V from query `[B,S,D]` and key/value `[B,L,D]` or `[B,N,L,H]`.
fn mha_macs(op: &str, inputs: &[TensorShape], outputs: &[TensorShape]) -> Result<u64, FlopsError> {
    let [b, s, d, dv] = attention_dims(op, inputs, outputs)?;
    let kv_len = match inputs.get(1).map(|k| k.dims.as_slice()) {
        Some(&[_, l, _]) => l,
        Some(&[_, _, l, _]) => l,
        _ => s,
    };
    Ok(product(&[b, s, kv_len]).saturating_mul(product(&[d]).saturating_add(product(&[dv]))))
}

/// `GroupQueryAttention`: Q·Kᵀ + A·V, attention length from `present_key` `[B,N_kv,L,H]`.
fn gqa_macs(op: &str, inputs: &[TensorShape], outputs: &[TensorShape]) -> Result<u64, FlopsError> {
    let [b, s, _, dq] = attention_dims(op, inputs, outputs)?;
    let kv_len = match outputs.get(1).map(|k| k.dims.as_slice()) {
        Some(&[_, _, l, _]) => l,
        _ => s,
    };
    Ok(double(product(&[b, s, kv_len, dq])))
}

/// LSTM/GRU/RNN: X `[S,B,I]`, W `[dirs, gates·H, I]`, R `[dirs, gates·H, H]`.
fn recurrent_macs(op: &str, inputs: &[TensorShape]) -> Result<u64, FlopsError> {
    let x = &operand(op, inputs, 0, "X shape")?.dims;
    let w = &operand(op, inputs, 1, "W shape")?.dims;
    let r = &operand(op, inputs, 2, "R shape")?.dims;
    let (&[seq, batch, _], &[dirs, gates_w, in_w], &[_, gates_r, hidden]) = (x.as_slice(), w.as_slice(), r.as_slice())
    else {
        return Err(missing(op, "X [S,B,I], W and R of rank 3"));
    };
    Ok(product(&[dirs, seq, batch])
        .saturating_mul(product(&[gates_w, in_w]).saturating_add(product(&[gates_r, hidden]))))
}

/// Det of `[…, n, n]`: ⅔·n³ per matrix (LU factorisation).
fn det_flops(op: &str, inputs: &[TensorShape]) -> Result<u64, FlopsError> {
    let x = &operand(op, inputs, 0, "input shape")?.dims;
    let [batch @ .., n, _] = x.as_slice() else {
        return Err(missing(op, "input [..., n, n]"));
    };
    let cube = product(&[*n, *n, *n]);
    Ok(product(batch).saturating_mul(double(cube).div_ceil(3)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The ops with a formula of their own (the arms of [`node_flops`] after the op lists).
    const FORMULA_OPS: &[&str] = &[
        "Conv",
        "NhwcConv",
        "ConvInteger",
        "FusedConv",
        "NhwcFusedConv",
        "QLinearConv",
        "ConvTranspose",
        "MatMul",
        "FusedMatMul",
        "MatMulInteger",
        "DynamicQuantizeMatMul",
        "MatMulNBits",
        "Gemm",
        "MatMulIntegerToFloat",
        "FusedGemm",
        "QLinearMatMul",
        "QGemm",
        "Einsum",
        "Attention",
        "MultiHeadAttention",
        "GroupQueryAttention",
        "LSTM",
        "GRU",
        "RNN",
        "Softmax",
        "LogSoftmax",
        "QLinearSoftmax",
        "LayerNormalization",
        "InstanceNormalization",
        "GroupNormalization",
        "GroupNorm",
        "SkipLayerNormalization",
        "SimplifiedLayerNormalization",
        "SkipSimplifiedLayerNormalization",
        "RMSNormalization",
        "BatchNormalization",
        "Resize",
        "Upsample",
        "Det",
    ];

    /// The ops whose weight (at the given input) is `[C_out, C_in/g, k…]`-like: rank ≥ 3 or refused.
    const WEIGHTED_OPS: &[(&str, usize)] = &[
        ("Conv", 1),
        ("NhwcConv", 1),
        ("ConvInteger", 1),
        ("FusedConv", 1),
        ("NhwcFusedConv", 1),
        ("QLinearConv", 3),
        ("ConvTranspose", 1),
    ];

    /// Every op with a formula: the lists and the formulas of their own.
    fn every_counted_op() -> Vec<&'static str> {
        [KNOWN_ZERO_OPS, ELEMENTWISE_OPS, VARIADIC_OPS, POOL_REDUCE_OPS, FORMULA_OPS].concat()
    }

    /// A shape as a profile may give it: any rank up to 6, dims from -2 (dynamic, garbage) up.
    fn any_shape() -> impl Strategy<Value = TensorShape> {
        prop::collection::vec(-2i64..40, 0..=6).prop_map(|dims| TensorShape { dtype: "float".into(), dims })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2048, failure_persistence: None, ..ProptestConfig::default() })]

        /// Whatever shapes a profile records, every formula answers (a count or the missing shape),
        /// never a panic and never "unknown op" for an op it counts.
        #[test]
        fn every_formula_takes_any_shapes(
            // The formulas of their own drawn most: they read operands by position and rank.
            op in prop_oneof![3 => prop::sample::select(FORMULA_OPS), 1 => prop::sample::select(every_counted_op())],
            inputs in prop::collection::vec(any_shape(), 0..9),
            outputs in prop::collection::vec(any_shape(), 0..3),
        ) {
            let flops = node_flops(op, &inputs, &outputs);
            prop_assert!(!matches!(flops, Err(FlopsError::UnknownOp(_))), "{op}: {flops:?}");
        }

        /// A conv-like weight of rank below 3 (a scalar, a vector, a matrix) is a missing shape, not
        /// a slice out of range; rank ≥ 3 is counted.
        #[test]
        fn conv_weights_of_every_rank(
            (op, weight_at) in prop::sample::select(WEIGHTED_OPS),
            weight in prop::collection::vec(1i64..8, 0..=6),
            input in prop::collection::vec(1i64..8, 0..=5),
        ) {
            let mut inputs = vec![TensorShape { dtype: "float".into(), dims: input }; weight_at + 1];
            let rank = weight.len();
            inputs[weight_at] = TensorShape { dtype: "float".into(), dims: weight };
            let outputs = [TensorShape { dtype: "float".into(), dims: vec![1, 4, 3, 3] }];
            match node_flops(op, &inputs, &outputs) {
                Ok(_) => prop_assert!(rank >= 3, "{op} counted a weight of rank {rank}"),
                Err(FlopsError::MissingShape { what, .. }) => prop_assert_eq!((rank < 3, what), (true, "weight of rank ≥ 3")),
                Err(other) => prop_assert!(false, "{op}: {other}"),
            }
        }
    }

    #[test]
    fn a_scalar_conv_transpose_weight_is_a_missing_shape() {
        let error = node_flops("ConvTranspose", &[s(&[1, 4, 3, 3]), s(&[])], &[s(&[1, 2, 5, 5])]).unwrap_err();
        assert_eq!(error.to_string(), "FLOPs unknown for ConvTranspose: weight of rank ≥ 3");
        // [C_in, C_out/g, kH, kW]: 36 input elements × 2 × 9.
        let f = node_flops("ConvTranspose", &[s(&[1, 4, 3, 3]), s(&[4, 2, 3, 3])], &[s(&[1, 2, 5, 5])]).unwrap();
        assert_eq!(f, 2 * 36 * 2 * 9);
    }

    fn s(dims: &[i64]) -> TensorShape {
        TensorShape { dtype: "float".into(), dims: dims.to_vec() }
    }

    #[test]
    fn conv_counts_grouped_and_depthwise() {
        // 3x3 conv 64->64 on 56x56: 56*56*64*64*9 MACs.
        let f = node_flops("Conv", &[s(&[1, 64, 56, 56]), s(&[64, 64, 3, 3])], &[s(&[1, 64, 56, 56])]).unwrap();
        assert_eq!(f, 2 * 56 * 56 * 64 * 64 * 9);
        // depthwise: group = 64 / weight[1] = 64 → 9 MACs per output element.
        let f = node_flops("Conv", &[s(&[1, 64, 56, 56]), s(&[64, 1, 3, 3])], &[s(&[1, 64, 56, 56])]).unwrap();
        assert_eq!(f, 2 * 56 * 56 * 64 * 9);
        let q = [s(&[1, 8, 4, 4]), s(&[]), s(&[]), s(&[16, 8, 1, 1]), s(&[]), s(&[]), s(&[]), s(&[])];
        assert_eq!(node_flops("QLinearConv", &q, &[s(&[1, 16, 4, 4])]).unwrap(), 2 * 16 * 16 * 8);
    }

    #[test]
    fn matmul_gemm_and_transposed_a() {
        assert_eq!(node_flops("MatMul", &[s(&[2, 8, 16]), s(&[16, 4])], &[s(&[2, 8, 4])]).unwrap(), 2 * 64 * 16);
        assert_eq!(node_flops("Gemm", &[s(&[1, 2048]), s(&[1000, 2048])], &[s(&[1, 1000])]).unwrap(), 2 * 2048 * 1000);
        // transA: A is [K, M].
        assert_eq!(node_flops("Gemm", &[s(&[30, 5]), s(&[30, 7])], &[s(&[5, 7])]).unwrap(), 2 * 35 * 30);
    }

    #[test]
    fn einsum_attention_recurrent_det() {
        let f = node_flops("Einsum", &[s(&[2, 4, 8, 16]), s(&[2, 4, 10, 16])], &[s(&[2, 4, 8, 10])]).unwrap();
        assert_eq!(f, 2 * 2 * 4 * 8 * 10 * 16);
        let f = node_flops("LSTM", &[s(&[5, 1, 10]), s(&[1, 80, 10]), s(&[1, 80, 20])], &[]).unwrap();
        assert_eq!(f, 2 * 5 * (80 * 10 + 80 * 20));
        assert_eq!(node_flops("Det", &[s(&[1, 2, 2])], &[s(&[1])]).unwrap(), 6);
        let f =
            node_flops("MultiHeadAttention", &[s(&[1, 8, 32]), s(&[1, 12, 32]), s(&[1, 12, 32])], &[s(&[1, 8, 32])]);
        assert_eq!(f.unwrap(), 2 * 8 * 12 * 64);
    }

    #[test]
    fn zero_elementwise_and_unknown() {
        assert_eq!(node_flops("Reshape", &[s(&[1, 100])], &[s(&[10, 10])]).unwrap(), 0);
        assert_eq!(node_flops("DequantizeLinear", &[s(&[1, 100])], &[s(&[1, 100])]).unwrap(), 0);
        assert_eq!(node_flops("Relu", &[s(&[1, 100])], &[s(&[1, 100])]).unwrap(), 100);
        assert_eq!(node_flops("Sum", &[s(&[4]), s(&[4]), s(&[4])], &[s(&[4])]).unwrap(), 8);
        assert_eq!(node_flops("LayerNormalization", &[s(&[2, 8])], &[s(&[2, 8])]).unwrap(), 80);
        assert_eq!(node_flops("GlobalAveragePool", &[s(&[1, 64, 7, 7])], &[s(&[1, 64, 1, 1])]).unwrap(), 64 * 49);
        assert_eq!(node_flops("Frobnicate", &[], &[]), Err(FlopsError::UnknownOp("Frobnicate".into())));
        assert_eq!(node_flops("Frobnicate", &[], &[]).unwrap_err().to_string(), "FLOPs unknown for Frobnicate");
        assert!(matches!(
            node_flops("Conv", &[s(&[1, 3, 8, 8])], &[s(&[1, 4, 8, 8])]),
            Err(FlopsError::MissingShape { .. })
        ));
    }
}
