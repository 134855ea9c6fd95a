//! Models, comparisons and reports with known truth, shared by the unit tests of this module.

use npugate_gate::outputs::{compare_tensors, OutputComparison};
use npugate_onnx::proto::{GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto};
use npugate_onnx::Model;

use super::matching::{Matching, Selection};
use super::report::{Header, Instrumentation, ModelRef, NumericsReport, TargetRun, INSTRUMENTATION_NOTE};

/// A named node.
pub fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        name: Some(name.into()),
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// A scalar initializer of `data_type` with raw bytes `raw`.
fn scalar(name: &str, data_type: i32, raw: Vec<u8>) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        data_type: Some(data_type),
        raw_data: Some(raw.into()),
        ..Default::default()
    }
}

/// A model of `nodes` with graph input `x`, output `y` and the QDQ constants `s`/`z`
/// (scale 0.5, zero point 10) and weight `w_q`.
pub fn graph(nodes: Vec<NodeProto>) -> Model {
    let value = |name: &str| ValueInfoProto { name: Some(name.into()), ..Default::default() };
    let initializer =
        vec![scalar("s", 1, 0.5f32.to_le_bytes().to_vec()), scalar("z", 2, vec![10]), scalar("w_q", 2, vec![3])];
    let graph = GraphProto {
        node: nodes,
        input: vec![value("x")],
        output: vec![value("y")],
        initializer,
        ..Default::default()
    };
    Model::from(ModelProto { graph: Some(graph), ..Default::default() })
}

/// float: conv → c, relu → r, pool → y.
pub fn float() -> Model {
    graph(vec![
        node("conv", "Conv", &["x", "w"], &["c"]),
        node("relu", "Relu", &["c"], &["r"]),
        node("pool", "MaxPool", &["r"], &["y"]),
    ])
}

/// QDQ as onnxruntime.quantization writes it: the Relu folded away, `r` the raw Conv output.
pub fn qdq() -> Model {
    graph(vec![
        node("x_q", "QuantizeLinear", &["x", "s", "z"], &["x_qo"]),
        node("x_dq", "DequantizeLinear", &["x_qo", "s", "z"], &["x_dqo"]),
        node("w_dq", "DequantizeLinear", &["w_q", "s", "z"], &["w"]),
        node("conv", "Conv", &["x_dqo", "w"], &["r"]),
        node("r_q", "QuantizeLinear", &["r", "s", "z"], &["r_qo"]),
        node("r_dq", "DequantizeLinear", &["r_qo", "s", "z"], &["r_dqo"]),
        node("pool", "MaxPool", &["r_dqo"], &["y_in"]),
        node("y_q", "QuantizeLinear", &["y_in", "s", "z"], &["y_qo"]),
        node("y_dq", "DequantizeLinear", &["y_qo", "s", "z"], &["y"]),
        node("extra", "Identity", &["r_dqo"], &["spare"]),
    ])
}

/// A comparison of `tensor` with the given SQNR (dB), `None` for identical tensors.
pub fn compared(tensor: &str, sqnr_db: Option<f64>) -> Result<OutputComparison, String> {
    let reference: Vec<f64> = (1..=100).map(|i| (i as f64).sin() + 2.0).collect();
    let power = reference.iter().map(|r| r * r).sum::<f64>() / reference.len() as f64;
    let output: Vec<f64> = match sqnr_db {
        // A constant offset e with e² = power / 10^(dB/10).
        Some(db) => reference.iter().map(|r| r + (power / 10f64.powf(db / 10.0)).sqrt()).collect(),
        None => reference.clone(),
    };
    Ok(compare_tensors(tensor, (&[100], &reference), (&[100], &output)).unwrap())
}

/// Target `name` with the given SQNR (dB) of layers c, r and y (`None`: identical).
pub fn run(name: &str, sqnr: [Option<f64>; 3]) -> TargetRun {
    let mut target = super::blank_target(name, Some(name), None);
    target.soc = format!("{name}-soc");
    TargetRun {
        target,
        layers: ["c", "r", "y"].iter().zip(sqnr).map(|(t, s)| compared(t, s)).collect(),
        eps: vec![None; 3],
    }
}

/// The report header of the float test model against itself.
pub fn header() -> Header {
    let model = ModelRef { path: "m.onnx".into(), sha256: "0".into() };
    Header {
        model: model.clone(),
        reference: model,
        reference_run: "reference".into(),
        min_sqnr_db: 20.0,
        tensors: "all".into(),
        instrumentation: Instrumentation {
            model: "instrumented/model/m.onnx".into(),
            reference: "instrumented/model/m.onnx".into(),
            exposed_in_model: 2,
            exposed_in_reference: 2,
            note: INSTRUMENTATION_NOTE.into(),
        },
    }
}

/// The float test model (c → r → y) on targets `a` (clean), `b` (r drifts, y follows) and
/// `c` (only y drifts).
pub fn three_targets() -> NumericsReport {
    let matching = Matching::build(&float(), &float(), &Selection::All).unwrap();
    let runs = vec![
        run("a", [None, Some(40.0), Some(35.0)]),
        run("b", [None, Some(8.0), Some(9.0)]),
        run("c", [Some(50.0), Some(45.0), Some(f64::NAN)]),
    ];
    NumericsReport::assemble(header(), &matching, runs)
}
