//! One-line remedies for nodes that fell back from the preferred EP.

/// Remedies keyed by op type, for ops the QNN HTP backend commonly rejects.
const OP_HINTS: &[(&str, &str)] = &[
    ("Det", "not supported by QNN: compute it outside the model or replace it with supported ops"),
    (
        "LayerNormalization",
        "decompose it (ReduceMean/Sub/Mul/Sqrt/Div) or use a newer QNN SDK whose HTP supports it for this dtype",
    ),
    ("Einsum", "rewrite it as MatMul with Transpose/Reshape"),
    ("NonMaxSuppression", "post-processing: keep it on CPU by design or move it out of the model"),
    ("TopK", "move TopK after the model, or use a QNN SDK that supports it for this dtype"),
    ("Loop", "control flow runs on CPU: unroll it or move it out of the model"),
    ("If", "control flow runs on CPU: fold the branch or move it out of the model"),
    ("Scan", "control flow runs on CPU: unroll it or move it out of the model"),
    ("GridSample", "replace it with Resize/Gather or keep it on CPU"),
    ("ScatterND", "rewrite the update with Where/Concat, which QNN supports"),
];

/// The hint for a fallback node: by design, by the EP's reason, or by op type.
pub fn fallback_hint(op_type: &str, reason: Option<&str>, input_shapes: &[String], expected: bool) -> Option<String> {
    if expected {
        return Some(
            "by design: offload_graph_io_quantization=1 runs graph-I/O Q/DQ on CPU; set it to 0 to keep them on the NPU"
                .to_string(),
        );
    }
    let reason = reason.unwrap_or_default().to_ascii_lowercase();
    if reason.contains("dynamic") || input_shapes.iter().any(|s| s.contains("-1")) {
        return Some("dynamic shape: fix it (npugate-harness --shape, or make the model's input dims static)".to_string());
    }
    if reason.contains("int64") {
        return Some("QNN HTP has no int64 tensors: cast to int32 in the model".to_string());
    }
    OP_HINTS.iter().find(|(op, _)| *op == op_type).map(|(_, hint)| (*hint).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_expected_then_reason_then_op() {
        assert!(fallback_hint("QuantizeLinear", None, &[], true).unwrap().contains("offload_graph_io_quantization"));
        assert!(fallback_hint("Det", Some("Dynamic shape not supported"), &[], false).unwrap().contains("--shape"));
        assert!(fallback_hint("Det", None, &[], false).unwrap().contains("not supported by QNN"));
        assert!(fallback_hint("LayerNormalization", None, &[], false).unwrap().contains("newer QNN SDK"));
        assert_eq!(fallback_hint("Relu", None, &[], false), None);
    }
}
