//! Real inputs, dynamic dims, `--shape` flags and rewriting input dims — every error path.

use npugate_onnx::proto::tensor_proto::DataType;
use npugate_onnx::proto::type_proto::{Sequence, Value as TypeValue};
use npugate_onnx::proto::{TypeProto, ValueInfoProto};
use npugate_onnx::{Dim, ElementType, ShapeError, ValueKind};

use crate::support::*;

fn shape(name: &str, dims: &[i64]) -> (String, Vec<i64>) {
    (name.to_string(), dims.to_vec())
}

/// PP-OCR's classifier: `x: float32[?, 3, ?, ?]` — one symbolic name for three different sizes.
fn cls_like() -> npugate_onnx::Model {
    relu_model(&["?", "3", "?", "?"])
}

#[test]
fn signatures_read_named_unknown_and_fixed_dims() {
    let model = relu_model(&["p2o.DynamicDimension.0", "3", "", "-1", "?"]);
    let inputs = model.input_signatures();
    assert_eq!(inputs.len(), 1);
    assert_eq!(inputs[0].name, "x");
    assert_eq!(inputs[0].kind, ValueKind::Tensor);
    assert_eq!(inputs[0].element_type, ElementType::of(DataType::Float));
    assert_eq!(
        inputs[0].dims.as_deref().unwrap(),
        [
            Dim::Named("p2o.DynamicDimension.0".into()),
            Dim::Fixed(3),
            Dim::Unknown,
            Dim::Unknown,
            Dim::Named("?".into())
        ]
    );
    assert_eq!(model.dynamic_shape_flags(), ["--shape x=Nx3xNxNxN"]);
}

#[test]
fn initializer_backed_inputs_are_not_inputs() {
    let mut model = relu_model(&["1", "3"]);
    let graph = model.proto_mut().graph.as_mut().unwrap();
    graph.input.push(tensor_value("w", Some(&["batch"])));
    graph.initializer.push(initializer("w", &[4]));
    let names: Vec<String> = model.input_signatures().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["x"]);
    assert!(model.dynamic_inputs().is_empty(), "a weight's dynamic dim is not the caller's to fix");
    let error = model.fix_input_shapes(&[shape("w", &[4])]).unwrap_err();
    assert!(matches!(error, ShapeError::Initializer { .. }));
    let message = error.to_string();
    assert!(
        message.contains("\"w\"") && message.contains("initializer") && message.contains("inputs are: x"),
        "{message}"
    );
}

#[test]
fn fixing_gives_each_dim_its_own_size_even_when_names_are_shared() {
    let mut model = cls_like();
    let before = model.clone();
    let fixed = model.fix_input_shapes(&[shape("x", &[1, 3, 48, 192])]).unwrap();
    assert_eq!(fixed.fixed.len(), 1);
    assert_eq!(fixed.fixed[0].after, [1, 3, 48, 192]);
    assert_eq!(fixed.fixed[0].before.as_ref().unwrap()[2], Dim::Named("?".into()));
    assert!(fixed.still_dynamic.is_empty());
    assert_eq!(
        model.input_signatures()[0].dims.as_deref().unwrap(),
        [Dim::Fixed(1), Dim::Fixed(3), Dim::Fixed(48), Dim::Fixed(192)]
    );
    assert!(model.dynamic_shape_flags().is_empty());
    // Only the input changed: the output keeps its symbolic dims for ORT's shape inference.
    let mut expected = before.into_proto();
    expected.graph.as_mut().unwrap().input = model.proto().graph.as_ref().unwrap().input.clone();
    assert_eq!(&expected, model.proto());
}

#[test]
fn fixing_keeps_denotations_and_fills_an_unknown_rank() {
    let mut model = relu_model(&["N", "3"]);
    let graph = model.proto_mut().graph.as_mut().unwrap();
    if let Some(TypeValue::TensorType(tensor)) = graph.input[0].r#type.as_mut().unwrap().value.as_mut() {
        tensor.shape.as_mut().unwrap().dim[0].denotation = Some("DATA_BATCH".into());
    }
    graph.input.push(tensor_value("unranked", None));
    assert_eq!(model.dynamic_shape_flags(), ["--shape x=Nx3", "--shape unranked=N…"]);
    let fixed = model.fix_input_shapes(&[shape("x", &[2, 3])]).unwrap();
    assert_eq!(fixed.still_dynamic.len(), 1);
    assert_eq!(fixed.still_dynamic[0].name, "unranked");
    model.fix_input_shapes(&[shape("unranked", &[5, 6, 7])]).unwrap();
    let graph = model.proto().graph.as_ref().unwrap();
    let Some(TypeValue::TensorType(tensor)) = graph.input[0].r#type.as_ref().unwrap().value.as_ref() else { panic!() };
    assert_eq!(tensor.shape.as_ref().unwrap().dim[0].denotation.as_deref(), Some("DATA_BATCH"));
    assert_eq!(model.input_signatures()[1].dims.as_deref().unwrap(), [Dim::Fixed(5), Dim::Fixed(6), Dim::Fixed(7)]);
}

#[test]
fn a_shape_for_no_input_lists_the_inputs() {
    let mut model = relu_model(&["N", "3"]);
    let error = model.fix_input_shapes(&[shape("images", &[1, 3])]).unwrap_err();
    assert_eq!(error.to_string(), "--shape images=…: the model has no input \"images\"; its inputs are: x");
}

#[test]
fn a_rank_mismatch_shows_the_flag_to_pass() {
    let mut model = relu_model(&["p2o.DynamicDimension.0", "3", "p2o.DynamicDimension.1", "p2o.DynamicDimension.2"]);
    let error = model.fix_input_shapes(&[shape("x", &[1, 3, 640])]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "--shape x=1x3x640 gives 3 dims, but input \"x\" has 4 (x: float32[p2o.DynamicDimension.0, 3, \
         p2o.DynamicDimension.1, p2o.DynamicDimension.2]); pass --shape x=Nx3xNxN"
    );
}

#[test]
fn zero_and_negative_dims_are_refused() {
    let mut model = relu_model(&["N", "3"]);
    for (dims, index, value) in [(&[0, 3][..], 0, 0), (&[1, -3][..], 1, -3)] {
        let error = model.fix_input_shapes(&[shape("x", dims)]).unwrap_err();
        assert_eq!(
            error,
            ShapeError::NotPositive { name: "x".into(), given: format!("{}x{}", dims[0], dims[1]), index, value }
        );
        assert!(error.to_string().contains("must be a positive integer"), "{error}");
    }
}

#[test]
fn a_dim_the_model_fixes_otherwise_is_refused_with_the_corrected_flag() {
    let mut model = relu_model(&["N", "3", "H", "W"]);
    let error = model.fix_input_shapes(&[shape("x", &[1, 4, 640, 640])]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "--shape x=1x4x640x640: dim 1 is 4, but the model fixes it to 3; pass --shape x=1x3x640x640"
    );
    // Giving the fixed value again is fine.
    model.fix_input_shapes(&[shape("x", &[1, 3, 640, 640])]).unwrap();
}

#[test]
fn the_same_input_twice_is_refused() {
    let mut model = relu_model(&["N"]);
    let error = model.fix_input_shapes(&[shape("x", &[1]), shape("x", &[2])]).unwrap_err();
    assert_eq!(error, ShapeError::Repeated { name: "x".into() });
}

#[test]
fn a_sequence_input_has_no_shape() {
    let mut model = relu_model(&["N"]);
    model.proto_mut().graph.as_mut().unwrap().input.push(ValueInfoProto {
        name: Some("seq".into()),
        r#type: Some(TypeProto {
            value: Some(TypeValue::SequenceType(Box::new(Sequence { elem_type: None }))),
            denotation: None,
        }),
        ..Default::default()
    });
    let error = model.fix_input_shapes(&[shape("seq", &[1])]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "--shape seq=…: input \"seq\" is a sequence, not a tensor; only tensor inputs have a shape"
    );
    assert_eq!(model.dynamic_shape_flags(), ["--shape x=N"], "a sequence needs no --shape");
}

#[test]
fn an_error_in_any_shape_changes_nothing() {
    let mut model = relu_model(&["N", "3"]);
    model.proto_mut().graph.as_mut().unwrap().input.push(tensor_value("mask", Some(&["N"])));
    let before = model.clone();
    assert!(model.fix_input_shapes(&[shape("x", &[1, 3]), shape("mask", &[0])]).is_err());
    assert_eq!(model, before);
}

#[test]
fn a_model_without_inputs_says_so() {
    let mut model = model(graph("empty", vec![], vec![], vec![]));
    let error = model.fix_input_shapes(&[shape("x", &[1])]).unwrap_err();
    assert!(error.to_string().ends_with("its inputs are: (none)"), "{error}");
}
