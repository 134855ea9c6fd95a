//! Property tests: no bytes make reading (or anything done with what was read) panic, and
//! fixing input shapes changes exactly the input dims asked for — byte for byte, nothing else.

mod support;

use npugate_onnx::proto::tensor_shape_proto::dimension::Value as DimValue;
use npugate_onnx::proto::type_proto::Value as TypeValue;
use npugate_onnx::proto::{ModelProto, StringStringEntryProto};
use npugate_onnx::{Dim, Model};
use proptest::prelude::*;

use support::*;

/// Uses every read-only part of the API on a model, and a few edits; none may panic.
fn exercise(model: &Model) {
    let _ = model.to_bytes();
    let index = model.index();
    for node in index.nodes() {
        let _ = (
            node.name(),
            node.op_type(),
            node.domain(),
            index.producer(node.name()),
            index.consumers(node.name()).count(),
        );
        let _ = index
            .graph(node.graph)
            .map(|g| (g.path.to_string(), g.inputs(), g.outputs(), g.initializers(), g.value_info()));
        for output in node.outputs() {
            let _ = index.signature(output);
        }
    }
    let _ = (model.input_signatures(), model.dynamic_shape_flags());
    let _ = model.file_references().map(|refs| refs.files().len());
    let mut copy = model.clone();
    let shapes: Vec<(String, Vec<i64>)> =
        model.input_signatures().into_iter().map(|s| (s.name, s.dims.map_or(vec![1], |d| vec![1; d.len()]))).collect();
    let _ = copy.fix_input_shapes(&shapes);
    let _ = copy.add_outputs(&model.intermediate_tensors());
    let _ = copy.rewrite_file_references(|path| Some(format!("moved/{path}")));
}

/// A model with a bit of everything: subgraphs, a graph list, external data, an EPContext node.
fn rich_model_bytes() -> Vec<u8> {
    let mut proto = nested_model().into_proto();
    let with_files = model_with_files().into_proto();
    let graph = proto.graph.as_mut().unwrap();
    let files_graph = with_files.graph.unwrap();
    graph.node.extend(files_graph.node);
    graph.initializer.extend(files_graph.initializer);
    graph.sparse_initializer.extend(files_graph.sparse_initializer);
    proto.functions = with_files.functions;
    proto.metadata_props.push(StringStringEntryProto { key: Some("k".into()), value: Some("v".into()) });
    Model::from(proto).to_bytes().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(model) = Model::from_bytes(bytes) {
            exercise(&model);
        }
    }

    #[test]
    fn truncated_models_never_panic(cut in any::<prop::sample::Index>()) {
        let bytes = rich_model_bytes();
        let cut = cut.index(bytes.len());
        match Model::from_bytes(bytes[..cut].to_vec()) {
            Ok(model) => exercise(&model),
            Err(error) => prop_assert!(!error.to_string().contains('\n'), "{error}"),
        }
    }

    #[test]
    fn mutated_models_never_panic(mutations in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..12)) {
        let mut bytes = rich_model_bytes();
        for (position, byte) in mutations {
            let position = position.index(bytes.len());
            bytes[position] = byte;
        }
        if let Ok(model) = Model::from_bytes(bytes) {
            exercise(&model);
        }
    }
}

/// How a generated input declares one dim.
#[derive(Debug, Clone)]
enum DimSpec {
    Fixed(i64),
    Named(&'static str),
    Unset,
    MinusOne,
}

impl DimSpec {
    fn text(&self) -> String {
        match self {
            DimSpec::Fixed(v) => v.to_string(),
            DimSpec::Named(name) => name.to_string(),
            DimSpec::Unset => String::new(),
            DimSpec::MinusOne => "-1".to_string(),
        }
    }
}

fn dim_spec() -> impl Strategy<Value = DimSpec> {
    prop_oneof![
        (1i64..64).prop_map(DimSpec::Fixed),
        prop::sample::select(vec!["?", "batch", "p2o.DynamicDimension.0", "N"]).prop_map(DimSpec::Named),
        Just(DimSpec::Unset),
        Just(DimSpec::MinusOne),
    ]
}

/// Inputs (rank 0–5), some of them also initializers, plus metadata, value_info and outputs that
/// share the inputs' symbolic dims — all of which must survive unchanged.
fn inputs_and_model() -> impl Strategy<Value = (Vec<Vec<DimSpec>>, Vec<bool>, ModelProto)> {
    let inputs = prop::collection::vec(prop::collection::vec(dim_spec(), 0..5), 1..4);
    (inputs, prop::collection::vec(any::<bool>(), 4)).prop_map(|(inputs, backed)| {
        let mut main = graph("g", vec![], vec![], vec![]);
        for (i, dims) in inputs.iter().enumerate() {
            let texts: Vec<String> = dims.iter().map(DimSpec::text).collect();
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            let name = format!("in{i}");
            main.input.push(tensor_value(&name, Some(&texts)));
            main.value_info.push(tensor_value(&format!("{name}_copy"), Some(&texts)));
            main.output.push(tensor_value(&format!("{name}_out"), Some(&texts)));
            main.node.push(node("Identity", &format!("id{i}"), &[&name], &[&format!("{name}_out")]));
            if backed[i] && i > 0 {
                main.initializer.push(initializer(&name, &vec![1; dims.len()]));
            }
        }
        let mut proto = model_proto(main);
        proto.metadata_props.push(StringStringEntryProto { key: Some("k".into()), value: Some("v".into()) });
        (inputs, backed, proto)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn fixing_shapes_changes_exactly_the_input_dims(
        (inputs, backed, proto) in inputs_and_model(),
        sizes in prop::collection::vec(1i64..1000, 20),
    ) {
        let original = Model::from(proto.clone());
        // A valid shape for every real input: the model's fixed sizes, a chosen size elsewhere.
        let shapes: Vec<(String, Vec<i64>)> = inputs
            .iter()
            .enumerate()
            .filter(|(i, _)| !(backed[*i] && *i > 0))
            .map(|(i, dims)| {
                let chosen = dims.iter().enumerate().map(|(d, spec)| match spec {
                    DimSpec::Fixed(v) => *v,
                    _ => sizes[(i * 5 + d) % sizes.len()],
                });
                (format!("in{i}"), chosen.collect())
            })
            .collect();
        let mut model = original.clone();
        let fixed = model.fix_input_shapes(&shapes).unwrap();
        prop_assert!(fixed.still_dynamic.is_empty());
        prop_assert!(model.dynamic_shape_flags().is_empty());

        let reread = Model::from_bytes(model.to_bytes().unwrap()).unwrap();
        for (name, dims) in &shapes {
            let signature = reread.input_signatures().into_iter().find(|s| &s.name == name).unwrap();
            let expected: Vec<Dim> = dims.iter().map(|&v| Dim::Fixed(v)).collect();
            prop_assert_eq!(signature.dims.unwrap(), expected);
        }

        // Everything else is unchanged: put the requested dims into the original by hand, and
        // the two encode to the same bytes.
        let mut expected = proto;
        for input in &mut expected.graph.as_mut().unwrap().input {
            let Some((_, dims)) = shapes.iter().find(|(name, _)| name == input.name()) else { continue };
            let Some(TypeValue::TensorType(tensor)) = input.r#type.as_mut().unwrap().value.as_mut() else { unreachable!() };
            for (dim, &value) in tensor.shape.as_mut().unwrap().dim.iter_mut().zip(dims) {
                dim.value = Some(DimValue::DimValue(value));
            }
        }
        prop_assert_eq!(reread.to_bytes().unwrap(), Model::from(expected).to_bytes().unwrap());
        prop_assert_eq!(model.to_bytes().unwrap(), reread.to_bytes().unwrap(), "encoding is deterministic");
    }

    #[test]
    fn a_refused_shape_changes_nothing(
        (_, _, proto) in inputs_and_model(),
        name in prop::sample::select(vec!["in0", "in1", "in2", "absent"]),
        dims in prop::collection::vec(-2i64..70, 0..6),
    ) {
        let mut model = Model::from(proto);
        let before = model.to_bytes().unwrap();
        if let Err(error) = model.fix_input_shapes(&[(name.to_string(), dims)]) {
            prop_assert!(!error.to_string().contains('\n'), "{error}");
            prop_assert!(error.to_string().contains(name), "{error}");
            prop_assert_eq!(model.to_bytes().unwrap(), before);
        }
    }
}
