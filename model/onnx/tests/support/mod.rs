//! Builds small ONNX models in code (no Python): dims written as strings, nodes, graphs.
#![allow(dead_code)] // each test binary uses a different part

use npugate_onnx::proto::tensor_proto::{DataLocation, DataType};
use npugate_onnx::proto::tensor_shape_proto::dimension::Value as DimValue;
use npugate_onnx::proto::tensor_shape_proto::Dimension;
use npugate_onnx::proto::type_proto::{Tensor, Value as TypeValue};
use npugate_onnx::proto::{
    attribute_proto::AttributeType, AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, SparseTensorProto, StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto,
    ValueInfoProto,
};
use npugate_onnx::Model;

/// A dim: `"3"` → dim_value 3, `""` → neither value nor param, anything else → dim_param.
pub fn dim(text: &str) -> Dimension {
    let value = match text.parse::<i64>() {
        Ok(number) => Some(DimValue::DimValue(number)),
        Err(_) if text.is_empty() => None,
        Err(_) => Some(DimValue::DimParam(text.to_string())),
    };
    Dimension { value, denotation: None }
}

/// A float tensor value declaration with these dims (`None`: no shape at all).
pub fn tensor_value(name: &str, dims: Option<&[&str]>) -> ValueInfoProto {
    typed_value(name, DataType::Float, dims)
}

/// A tensor value declaration of element type `data_type`.
pub fn typed_value(name: &str, data_type: DataType, dims: Option<&[&str]>) -> ValueInfoProto {
    let shape = dims.map(|dims| TensorShapeProto { dim: dims.iter().map(|d| dim(d)).collect() });
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            value: Some(TypeValue::TensorType(Tensor { elem_type: Some(data_type as i32), shape })),
            denotation: None,
        }),
        ..Default::default()
    }
}

/// A node.
pub fn node(op_type: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op_type.to_string()),
        name: Some(name.to_string()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// A graph-valued attribute.
pub fn graph_attribute(name: &str, graph: GraphProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Graph as i32),
        g: Some(graph),
        ..Default::default()
    }
}

/// An int attribute.
pub fn int_attribute(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(value),
        ..Default::default()
    }
}

/// A string attribute.
pub fn string_attribute(name: &str, value: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::String as i32),
        s: Some(value.as_bytes().to_vec().into()),
        ..Default::default()
    }
}

/// A float initializer with inline raw bytes.
pub fn initializer(name: &str, dims: &[i64]) -> TensorProto {
    let count: i64 = dims.iter().product();
    TensorProto {
        name: Some(name.to_string()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Float as i32),
        raw_data: Some(vec![0u8; 4 * count.max(0) as usize].into()),
        ..Default::default()
    }
}

/// A float tensor whose data is external: `location`, and `offset`/`length` when given.
pub fn external_tensor(name: &str, location: &str, offset: Option<&str>, length: Option<&str>) -> TensorProto {
    let entry = |key: &str, value: &str| StringStringEntryProto { key: Some(key.into()), value: Some(value.into()) };
    let mut external_data = vec![entry("location", location)];
    external_data.extend(offset.map(|o| entry("offset", o)));
    external_data.extend(length.map(|l| entry("length", l)));
    TensorProto {
        name: Some(name.to_string()),
        dims: vec![4],
        data_type: Some(DataType::Float as i32),
        external_data,
        data_location: Some(DataLocation::External as i32),
        ..Default::default()
    }
}

/// A graph.
pub fn graph(
    name: &str,
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
) -> GraphProto {
    GraphProto { name: Some(name.to_string()), node: nodes, input: inputs, output: outputs, ..Default::default() }
}

/// A model (IR 10, opset 17) around `graph`.
pub fn model_proto(graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: Some(10),
        producer_name: Some("npugate-onnx tests".into()),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(graph),
        ..Default::default()
    }
}

/// The same, as a [`Model`].
pub fn model(graph: GraphProto) -> Model {
    Model::from(model_proto(graph))
}

/// One `Relu` from `x` to `y`, with `x` declared as `dims`.
pub fn relu_model(dims: &[&str]) -> Model {
    model(graph(
        "relu",
        vec![node("Relu", "relu", &["x"], &["y"])],
        vec![tensor_value("x", Some(dims))],
        vec![tensor_value("y", Some(dims))],
    ))
}

/// `pre` → `loop` (body: `inner_add`, `inner_if` with `then_relu` / `else_neg`) → `scan` (body:
/// `scan_mul`) → `beam` (a graph-list attribute: `g0_node`, `g1_node`) → an unnamed `Relu`.
pub fn nested_model() -> Model {
    let then_branch =
        graph("then", vec![node("Relu", "then_relu", &["s"], &["t"])], vec![], vec![tensor_value("t", None)]);
    let else_branch =
        graph("else", vec![node("Neg", "else_neg", &["s"], &["e"])], vec![], vec![tensor_value("e", None)]);
    let mut inner_if = node("If", "inner_if", &["cond_in"], &["if_out"]);
    inner_if.attribute = vec![graph_attribute("then_branch", then_branch), graph_attribute("else_branch", else_branch)];
    let mut body = graph(
        "body",
        vec![node("Add", "inner_add", &["a", "iter"], &["s"]), inner_if],
        vec![tensor_value("iter", Some(&[])), tensor_value("cond_in", Some(&[]))],
        vec![tensor_value("if_out", None)],
    );
    body.value_info.push(tensor_value("s", Some(&["1", "8"])));
    let mut looped = node("Loop", "loop", &["M", "", "a"], &["loop_out"]);
    looped.attribute = vec![graph_attribute("body", body)];

    let mut scan = node("Scan", "scan", &["loop_out"], &["scan_out"]);
    scan.attribute = vec![
        int_attribute("num_scan_inputs", 1),
        graph_attribute("body", graph("scan_body", vec![node("Mul", "scan_mul", &["u", "u"], &["v"])], vec![], vec![])),
    ];
    let mut beam = node("BeamSearch", "beam", &["scan_out"], &["beam_out"]);
    beam.domain = Some("com.microsoft".into());
    beam.attribute = vec![AttributeProto {
        name: Some("graphs".into()),
        r#type: Some(AttributeType::Graphs as i32),
        graphs: vec![
            graph("g0", vec![node("Relu", "g0_node", &["beam_in"], &["g0_out"])], vec![], vec![]),
            graph("g1", vec![node("Relu", "g1_node", &["beam_in"], &["g1_out"])], vec![], vec![]),
        ],
        ..Default::default()
    }];
    let mut main = graph(
        "main",
        vec![node("Relu", "pre", &["x"], &["a"]), looped, scan, beam, node("Relu", "", &["beam_out"], &["y"])],
        vec![tensor_value("x", Some(&["batch", "8"])), tensor_value("M", Some(&[]))],
        vec![tensor_value("y", Some(&["batch", "8"]))],
    );
    main.value_info.push(tensor_value("a", Some(&["batch", "8"])));
    main.value_info.push(tensor_value("loop_out", None));
    main.initializer.push(initializer("M", &[]));
    model(main)
}

/// External data in every place a tensor can be: an initializer (with offset and length), a
/// sparse initializer, a `Constant` in the main graph and inside an `If` branch, a list attribute,
/// a model-local function and an `If` inside it; plus an EPContext node with its context in a file,
/// one embedded, and one sharing another's context.
pub fn model_with_files() -> Model {
    let mut constant = node("Constant", "const", &[], &["c"]);
    constant.attribute = vec![AttributeProto {
        name: Some("value".into()),
        r#type: Some(AttributeType::Tensor as i32),
        t: Some(external_tensor("", "weights.bin", Some("4096"), None)),
        ..Default::default()
    }];
    let mut branch_constant = node("Constant", "branch_const", &[], &["bc"]);
    branch_constant.attribute = vec![AttributeProto {
        name: Some("value".into()),
        r#type: Some(AttributeType::Tensor as i32),
        t: Some(external_tensor("branch_w", "sub/branch.bin", None, None)),
        ..Default::default()
    }];
    let mut iff = node("If", "if", &["cond"], &["if_out"]);
    iff.attribute = vec![graph_attribute("then_branch", graph("then", vec![branch_constant], vec![], vec![]))];
    let mut listing = node("Custom", "list", &[], &["l"]);
    listing.attribute = vec![AttributeProto {
        name: Some("tables".into()),
        r#type: Some(AttributeType::Tensors as i32),
        tensors: vec![initializer("inline", &[2]), external_tensor("table", "weights.bin", Some("8192"), Some("16"))],
        ..Default::default()
    }];

    let mut context = node("EPContext", "qnn_ctx", &["x"], &["y"]);
    context.domain = Some("com.microsoft".into());
    context.attribute = vec![
        int_attribute("embed_mode", 0),
        string_attribute("ep_cache_context", "model_qnn.bin"),
        string_attribute("source", "QNN"),
    ];
    let mut embedded = node("EPContext", "embedded_ctx", &["x"], &["y2"]);
    embedded.domain = Some("com.microsoft".into());
    embedded.attribute = vec![int_attribute("embed_mode", 1), string_attribute("ep_cache_context", "<binary>")];
    let mut shared = node("EPContext", "shared_ctx", &["x"], &["y3"]);
    shared.domain = Some("com.microsoft".into());
    shared.attribute = vec![int_attribute("embed_mode", 0), int_attribute("main_context", 0)];

    let mut main = graph("main", vec![constant, iff, listing, context, embedded, shared], vec![], vec![]);
    main.initializer.push(external_tensor("w", "weights.bin", Some("0"), Some("4096")));
    main.initializer.push(initializer("inline_w", &[2]));
    main.sparse_initializer.push(SparseTensorProto {
        values: Some(external_tensor("sparse_w", "sparse.bin", None, None)),
        indices: Some(initializer("sparse_w_indices", &[1])),
        dims: vec![100],
    });
    let mut proto = model_proto(main);
    let mut function_constant = node("Constant", "", &[], &["fc"]);
    function_constant.attribute = vec![AttributeProto {
        name: Some("value".into()),
        r#type: Some(AttributeType::Tensor as i32),
        t: Some(external_tensor("function_w", "function.bin", None, None)),
        ..Default::default()
    }];
    let mut function_branch_constant = node("Constant", "fn_branch_const", &[], &["fbc"]);
    function_branch_constant.attribute = vec![AttributeProto {
        name: Some("value".into()),
        r#type: Some(AttributeType::Tensor as i32),
        t: Some(external_tensor("fn_branch_w", "function.bin", Some("64"), None)),
        ..Default::default()
    }];
    let mut function_if = node("If", "fn_if", &["fc"], &["fo"]);
    function_if.attribute =
        vec![graph_attribute("then_branch", graph("fn_then", vec![function_branch_constant], vec![], vec![]))];
    proto.functions.push(FunctionProto {
        name: Some("MyFn".into()),
        domain: Some("local".into()),
        node: vec![function_constant, function_if],
        ..Default::default()
    });
    Model::from(proto)
}
