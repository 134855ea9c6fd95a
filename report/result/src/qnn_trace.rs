//! The QNN EP's own account of how it built its graphs (`result.json` `qnn_trace`): which ONNX
//! nodes each QNN op came from and which nodes it could not take, and why. Read by the harness from
//! the EP's framework op trace (`qnn_op_trace.json`, onnxruntime-qnn ≥ 2.7 with
//! `enable_framework_op_trace`) and QNN's graph dump (the ops' input and output tensors), or, for a
//! compiled model, from the trace `npugate compile` recorded in it.

use serde::{Deserialize, Serialize};

/// Metadata key (`metadata_props`) under which `npugate compile` records the op trace of the
/// compile (a [`QnnTrace`] as JSON): loading a context binary composes no graph, so the EP writes
/// no trace then.
pub const QNN_TRACE_KEY: &str = "npugate.compiled_for.qnn_trace";

/// Where a run's op trace came from.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TraceSource {
    /// Written by the EP while this run's account session composed its graphs.
    #[default]
    Session,
    /// Recorded by `npugate compile` when the model was compiled (a compiled model's run).
    Compile,
}

/// The QNN EP's trace of one session.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct QnnTrace {
    /// Where it came from.
    pub source: TraceSource,
    /// `schema_version` of the EP's file (2 in onnxruntime-qnn 2.7; absent in 1, read the same).
    pub schema_version: u32,
    /// One entry per QNN graph (a fused partition of the QNN EP, named as the profile names it).
    pub graphs: Vec<QnnGraphTrace>,
    /// Nodes the EP did not take, with its reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsupported: Vec<UnsupportedNode>,
}

/// The QNN ops of one graph.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct QnnGraphTrace {
    /// The graph's name: the fused node's (`QNNExecutionProvider_QNNExecutionProvider_<hash>_<id>_<n>`).
    pub name: String,
    /// Its ops in the EP's order.
    pub ops: Vec<QnnTraceOp>,
}

/// One QNN op and the ONNX nodes it came from.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct QnnTraceOp {
    /// The QNN op's name (as QNN's profile names it before `:OpId_<n>`).
    pub name: String,
    /// Its QNN type (`Conv2d`, `FullyConnected`, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub qnn_type: String,
    /// How the EP built it: `OrtNodeUnit` (one ONNX node with its Q/DQ), or a fusion
    /// (`GeluFusion`, `ReshapeGemmFusionGroup`, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The ONNX nodes it came from, as the graph the EP was given names them (after ONNX Runtime's
    /// optimizations and layout transformation: `conv1_token_1`, `MatMul_6/MatMulAddFusion`).
    pub sources: Vec<String>,
    /// Its input tensors (from QNN's graph dump; empty without it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
    /// Its output tensors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<String>,
}

/// A node the EP did not take.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct UnsupportedNode {
    /// The node's name in the graph the EP was given.
    pub node: String,
    /// Its operator type.
    pub op_type: String,
    /// The EP's reason.
    pub reason: String,
}

impl QnnTrace {
    /// The EP's reason for not taking `node`, when it gave one.
    pub fn reason(&self, node: &str) -> Option<&str> {
        self.unsupported.iter().find(|u| u.node == node).map(|u| u.reason.as_str())
    }

    /// The graph an op of this name belongs to, and the op.
    pub fn op(&self, name: &str) -> Option<(&QnnGraphTrace, &QnnTraceOp)> {
        self.graphs.iter().find_map(|g| g.ops.iter().find(|o| o.name == name).map(|o| (g, o)))
    }
}
