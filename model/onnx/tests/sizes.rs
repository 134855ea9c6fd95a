//! Property test: models declaring random shapes — 0, 1, huge, negative, dynamic, products that
//! overflow 64 bits — of random element types go through the reader, `--shape` fixing and the
//! size check without a panic; every size the check accepts is exact (against a 128-bit count
//! here) and within the memory it was checked against, and every refusal is one line naming the
//! tensor.

mod support;

use npugate_onnx::proto::tensor_proto::DataType;
use npugate_onnx::proto::type_proto::{Tensor, Value as TypeValue};
use npugate_onnx::proto::{TensorShapeProto, TypeProto, ValueInfoProto};
use npugate_onnx::size::{Origin, Room, TensorRequest};
use npugate_onnx::{Model, ValueSignature};
use proptest::prelude::*;

use support::*;

/// One declared dim as the support builder writes it: a number (any `i64`), a name, or nothing.
fn declared_dim() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("1".to_string()),
        (2i64..4096).prop_map(|d| d.to_string()),
        (1i64 << 20..1i64 << 40).prop_map(|d| d.to_string()),
        Just(i64::MAX.to_string()),
        Just("-1".to_string()),
        (i64::MIN..-1).prop_map(|d| d.to_string()),
        Just("batch".to_string()),
        Just(String::new()),
    ]
}

/// A dim as `--shape` gives it (the shape check refuses what is not positive).
fn given_dim() -> impl Strategy<Value = i64> {
    prop_oneof![Just(0i64), Just(1), 2i64..4096, 1i64 << 20..1i64 << 40, Just(i64::MAX), Just(-1)]
}

/// Known element types, numbers past the schema, and undefined.
fn element_type() -> impl Strategy<Value = i32> {
    prop_oneof![Just(DataType::Float as i32), Just(DataType::Int4 as i32), Just(DataType::String as i32), 0i32..40]
}

/// A value declaration of element type number `elem_type` and `dims` (`None`: no shape).
fn value(name: &str, elem_type: i32, dims: Option<&[String]>) -> ValueInfoProto {
    let shape = dims.map(|dims| TensorShapeProto { dim: dims.iter().map(|d| dim(d)).collect() });
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            value: Some(TypeValue::TensorType(Tensor { elem_type: Some(elem_type), shape })),
            denotation: None,
        }),
        ..Default::default()
    }
}

/// The bytes of a tensor counted in 128 bits, for the few types whose bits are known here.
fn expected_bytes(elem_type: i32, dims: &[i64]) -> Option<Option<u64>> {
    let bits: u128 = match DataType::try_from(elem_type).ok()? {
        DataType::Float => 32,
        DataType::Int4 => 4,
        DataType::String => 256,
        _ => return None,
    };
    if dims.iter().any(|&d| d < 0) {
        return Some(None);
    }
    if dims.contains(&0) {
        return Some(Some(0));
    }
    let count = dims.iter().try_fold(1u128, |n, &d| n.checked_mul(d as u128)).filter(|&n| n <= u128::from(u64::MAX));
    Some(count.and_then(|n| u64::try_from((n * bits).div_ceil(8)).ok()))
}

/// Checks every statically shaped tensor of `declared` against `room`, as npugate and the harness do.
fn check_all(declared: &[ValueSignature], origin: &Origin, room: &Room) -> Result<(), TestCaseError> {
    for value in declared {
        let Some(dims) = value.dims.as_ref().and_then(|d| d.iter().map(|d| d.fixed()).collect::<Option<Vec<i64>>>())
        else {
            continue;
        };
        let tensor = TensorRequest {
            name: value.name.clone(),
            element_type: value.element_type,
            dims: dims.clone(),
            origin: origin.clone(),
        };
        match tensor.check(room) {
            Ok(bytes) => {
                prop_assert!(room.available.is_none_or(|available| bytes <= available));
                if let Some(expected) = expected_bytes(value.element_type.0, &dims) {
                    prop_assert_eq!(Some(bytes), expected);
                }
            }
            Err(refused) => {
                let line = refused.to_string();
                prop_assert!(!line.contains('\n') && line.contains(&format!("{:?}", value.name)), "{}", line);
                if let (Some(Some(bytes)), Some(available)) =
                    (expected_bytes(value.element_type.0, &dims), room.available)
                {
                    prop_assert!(bytes > available, "{} refused at {} ≤ {} available", line, bytes, available);
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn declared_sizes_never_panic_and_every_accepted_size_is_exact_and_fits(
        inputs in prop::collection::vec((element_type(), prop::option::of(prop::collection::vec(declared_dim(), 0..6))), 1..4),
        given in prop::collection::vec(prop::collection::vec(given_dim(), 0..6), 4),
        available in prop_oneof![Just(None), any::<u64>().prop_map(Some), (0u64..1 << 30).prop_map(Some)],
    ) {
        let mut main = graph("g", vec![], vec![], vec![]);
        for (i, (elem_type, dims)) in inputs.iter().enumerate() {
            main.input.push(value(&format!("in{i}"), *elem_type, dims.as_deref()));
            main.output.push(value(&format!("out{i}"), *elem_type, dims.as_deref()));
            main.node.push(node("Identity", &format!("id{i}"), &[&format!("in{i}")], &[&format!("out{i}")]));
        }
        let bytes = Model::from(model_proto(main)).to_bytes().unwrap();
        let model = Model::from_bytes(bytes).unwrap();
        let room = Room { available, whose: "in this test".into(), source: "a random figure" };

        check_all(&model.input_signatures(), &Origin::DeclaredInput, &room)?;
        let outputs: Vec<ValueSignature> =
            model.proto().graph.iter().flat_map(|g| &g.output).map(ValueSignature::from_value_info).collect();
        check_all(&outputs, &Origin::DeclaredOutput, &room)?;

        // The same with `--shape` given for each input: refused, or fixed and then checked.
        let mut fixed = model.clone();
        let shapes: Vec<(String, Vec<i64>)> =
            (0..inputs.len()).map(|i| (format!("in{i}"), given[i].clone())).collect();
        if fixed.fix_input_shapes(&shapes).is_ok() {
            check_all(&fixed.input_signatures(), &Origin::ShapeFlag, &room)?;
        }
    }
}
