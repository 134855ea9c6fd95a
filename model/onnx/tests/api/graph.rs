//! Walking the main graph and every subgraph, and lookups by name.

use npugate_onnx::{Dim, GraphId, ValueRole};

use crate::support::*;

#[test]
fn every_node_of_every_subgraph_in_walk_order() {
    let model = nested_model();
    let index = model.index();
    let walked: Vec<(String, &str, &str)> =
        index.nodes().iter().map(|n| (index.graph(n.graph).unwrap().path.to_string(), n.name(), n.op_type())).collect();
    let expected = [
        ("main", "pre", "Relu"),
        ("main", "loop", "Loop"),
        ("main > loop.body", "inner_add", "Add"),
        ("main > loop.body", "inner_if", "If"),
        ("main > loop.body > inner_if.then_branch", "then_relu", "Relu"),
        ("main > loop.body > inner_if.else_branch", "else_neg", "Neg"),
        ("main", "scan", "Scan"),
        ("main > scan.body", "scan_mul", "Mul"),
        ("main", "beam", "BeamSearch"),
        ("main > beam.graphs[0]", "g0_node", "Relu"),
        ("main > beam.graphs[1]", "g1_node", "Relu"),
        ("main", "", "Relu"),
    ];
    let expected: Vec<(String, &str, &str)> = expected.iter().map(|&(g, n, o)| (g.to_string(), n, o)).collect();
    assert_eq!(walked, expected);
    assert_eq!(index.graphs().len(), 7);
    assert!(index.graph(GraphId::MAIN).unwrap().path.is_main());
}

#[test]
fn nodes_and_values_are_found_by_name() {
    let model = nested_model();
    let index = model.index();
    let then_relu = index.node("then_relu").unwrap();
    assert_eq!(then_relu.inputs(), ["s"]);
    assert_eq!(then_relu.outputs(), ["t"]);
    assert_eq!(then_relu.domain(), "");
    assert_eq!(then_relu.index, 0);
    let path = &index.graph(then_relu.graph).unwrap().path;
    assert_eq!(path.steps.len(), 2);
    assert_eq!(path.steps[1].node, "inner_if");
    assert_eq!(path.steps[1].attribute, "then_branch");
    assert_eq!(index.node("beam").unwrap().domain(), "com.microsoft");
    assert!(index.node("absent").is_none());

    assert_eq!(index.producer("s").unwrap().name(), "inner_add");
    assert_eq!(index.producer("y").unwrap().op_type(), "Relu");
    let readers: Vec<&str> = index.consumers("s").map(|n| n.name()).collect();
    assert_eq!(readers, ["then_relu", "else_neg"]);
    let readers: Vec<&str> = index.consumers("beam_in").map(|n| n.name()).collect();
    assert_eq!(readers, ["g0_node", "g1_node"]);
    assert!(index.consumers("").next().is_none(), "an omitted optional input is no value");

    // `s` is declared in the loop body's value_info.
    let s = index.signature("s").unwrap();
    assert_eq!(s.dims.as_deref().unwrap(), [Dim::Fixed(1), Dim::Fixed(8)]);
    // `M` is an input and an initializer: the initializer's fixed (scalar) shape says as much.
    let roles: Vec<ValueRole> = index.value_decls("M").iter().map(|d| d.role).collect();
    assert_eq!(roles, [ValueRole::Input, ValueRole::Initializer]);
    // `loop_out` has a value_info without a shape: the best it has.
    assert_eq!(index.signature("loop_out").unwrap().dims, None);
    assert!(index.signature("absent").is_none());
}

#[test]
fn graphs_list_their_inputs_outputs_initializers_and_value_info() {
    let model = nested_model();
    let index = model.index();
    let main = index.graph(GraphId::MAIN).unwrap();
    let names = |signatures: Vec<npugate_onnx::ValueSignature>| {
        signatures.into_iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(names(main.inputs()), ["x: float32[batch, 8]", "M: float32[]"]);
    assert_eq!(names(main.outputs()), ["y: float32[batch, 8]"]);
    assert_eq!(names(main.initializers()), ["M: float32[]"]);
    assert_eq!(names(main.value_info()), ["a: float32[batch, 8]", "loop_out: float32[rank unknown]"]);
    let body = &index.graphs()[1];
    assert_eq!(body.path.to_string(), "main > loop.body");
    assert_eq!(names(body.value_info()), ["s: float32[1, 8]"]);
}

#[test]
fn an_unnamed_node_holding_a_subgraph_is_named_by_op_and_position() {
    let mut unnamed_if = node("If", "", &["c"], &["o"]);
    unnamed_if.attribute =
        vec![graph_attribute("then_branch", graph("t", vec![node("Relu", "r", &["c"], &["o2"])], vec![], vec![]))];
    let model = model(graph("m", vec![node("Relu", "first", &["c"], &["d"]), unnamed_if], vec![], vec![]));
    let index = model.index();
    assert_eq!(index.graphs()[1].path.to_string(), "main > If#1.then_branch");
}

#[test]
fn the_nodes_between_a_cut_are_what_a_compiled_node_replaced() {
    // x → q → a → b → c → dq → y, with b also reading the initializer w through wdq; c is cut out.
    let mut cut = graph(
        "cut",
        vec![
            node("QuantizeLinear", "q", &["x"], &["xq"]),
            node("Relu", "a", &["xq"], &["ta"]),
            node("DequantizeLinear", "wdq", &["w"], &["wf"]),
            node("Add", "b", &["ta", "wf"], &["tb"]),
            node("Relu", "c", &["tb"], &["tc"]),
            node("DequantizeLinear", "dq", &["tc"], &["y"]),
        ],
        vec![tensor_value("x", Some(&["1"]))],
        vec![tensor_value("y", Some(&["1"]))],
    );
    cut.initializer.push(initializer("w", &[1]));
    let model = model(cut);
    let index = model.index();
    let names =
        |nodes: Vec<&npugate_onnx::NodeInfo<'_>>| nodes.iter().map(|n| n.name().to_string()).collect::<Vec<_>>();
    assert_eq!(
        names(index.nodes_between(&["xq"], &["tb"])),
        ["a", "wdq", "b"],
        "weights' DQ inside, the graph-input Q outside"
    );
    assert_eq!(names(index.nodes_between(&["x"], &["y"])), ["q", "a", "wdq", "b", "c", "dq"]);
    assert!(index.nodes_between(&["tb"], &["tb"]).is_empty());
    assert!(index.nodes_between(&[], &["no_such_value"]).is_empty());
}
