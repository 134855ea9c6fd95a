//! Exposing intermediate tensors as graph outputs.

use npugate_onnx::{Dim, Model, OutputError, ValueKind};

use crate::support::nested_model;

#[test]
fn intermediate_tensors_are_the_main_graph_node_outputs_not_yet_outputs() {
    assert_eq!(nested_model().intermediate_tensors(), ["a", "loop_out", "scan_out", "beam_out"]);
}

#[test]
fn outputs_are_added_with_their_value_info_or_by_name() {
    let mut model = nested_model();
    let added = model.add_outputs(&["a", "scan_out", "a", "y"]).unwrap();
    assert_eq!(added.len(), 2, "{added:?}");
    assert_eq!(added[0].to_string(), "a: float32[batch, 8]");
    assert_eq!(added[1].name, "scan_out");
    assert_eq!(added[1].kind, ValueKind::Untyped);
    let outputs: Vec<String> =
        model.proto().graph.as_ref().unwrap().output.iter().map(|o| o.name().to_string()).collect();
    assert_eq!(outputs, ["y", "a", "scan_out"]);
    // Adding again changes nothing; what was added survives a round trip.
    assert!(model.add_outputs(&["a"]).unwrap().is_empty());
    let back = Model::from_bytes(model.to_bytes().unwrap()).unwrap();
    let a = back.index().graph(npugate_onnx::GraphId::MAIN).unwrap().outputs().remove(1);
    assert_eq!(a.dims.unwrap(), [Dim::Named("batch".into()), Dim::Fixed(8)]);
    assert_eq!(back.intermediate_tensors(), ["loop_out", "beam_out"]);
}

#[test]
fn every_intermediate_tensor_can_be_exposed_at_once() {
    let mut model = nested_model();
    let all = model.intermediate_tensors();
    assert_eq!(model.add_outputs(&all).unwrap().len(), all.len());
    assert!(model.intermediate_tensors().is_empty());
}

#[test]
fn a_subgraph_tensor_or_an_unknown_name_is_refused_and_nothing_changes() {
    let mut model = nested_model();
    let before = model.clone();
    let error = model.add_outputs(&["a", "s"]).unwrap_err();
    assert_eq!(error, OutputError::InSubgraph { name: "s".into(), graph: "main > loop.body".into() });
    assert!(error.to_string().contains("main > loop.body"), "{error}");
    let error = model.add_outputs(&["nope"]).unwrap_err();
    assert!(matches!(error, OutputError::NotProduced { .. }));
    let error = model.add_outputs(&["x"]).unwrap_err();
    assert!(error.to_string().contains("\"x\"") && error.to_string().contains("graph input"), "{error}");
    assert_eq!(model, before);
    let mut graphless = Model::from(npugate_onnx::proto::ModelProto::default());
    assert!(graphless.add_outputs(&["a"]).is_err());
}
