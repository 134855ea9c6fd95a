//! Rejection reasons from the verbose ORT log: the QNN EP's `Validation FAILED` blocks, the QNN
//! backend's own `<E>` messages for the node it refused, and the backend's errors while it
//! finalized (compiled) a graph.
//!
//! A block is a header line followed by one line per node and one `REASON` line:
//! ```text
//! … LogNodeSupport: Validation FAILED for 1 nodes in OrtNodeUnit (Det) :
//! <TAB>Operator type: Det Node name: det Node index: 15
//! <TAB>REASON : Operators of type `Det` are not supported by QNN EP.…
//! ```
//! When the backend validates ops itself (the HTP backend, on a device or Qualcomm's host build),
//! its `<E>` messages (some spanning several lines: the datatypes requested and the sets
//! supported) come first, then the EP's `QNN.backendValidateOpConfig() failed for node `X``.
//!
//! The backend names the QNN op it refused (`dense_3/MatMulAddFusion_2`, `p_re_lu_10_2`: the
//! node's name, maybe a suffix, and a counter the EP appends on every validation pass), not the
//! ONNX node; its account is given to the nodes of the EP's `Validation FAILED` block that follows
//! when one of them is the start of that QNN name.
//!
//! A message starts at a line beginning with `[` (the logger's prefix differs between loggers:
//! `[V:onnxruntime:, file:line Func]`, `[ort Verbose] …`); the lines after it up to the next such
//! line belong to it. GetCapability runs several times (before and after the layout
//! transformation), so the same node can be reported more than once: the first reason wins.

use std::collections::BTreeMap;
use std::io::BufRead;

use npugate_result::ModelGraph;

use crate::coverage::{strip_token_suffix, Coverage};

/// Marker of a failed-validation header line.
const FAILED_MARKER: &str = "Validation FAILED for";
/// Marker of a node line inside a block.
const NODE_MARKER: &str = "Node name: ";
/// Marker of the operator type inside a node line.
const OP_MARKER: &str = "Operator type: ";
/// Marker of the reason line inside a block.
const REASON_MARKER: &str = "REASON :";
/// QNN's error tag inside a log message.
const QNN_ERROR: &str = "<E> ";
/// The HTP backend's own error lines while it prepares a graph (`file.cc:211::ERROR:message`).
const PREPARE_ERROR: &str = "::ERROR:";
/// Start of the backend's validation of one op: errors before it belong to another op.
const VALIDATION_START: &str = "QnnBackend_validateOpConfig started";
/// The EP's line naming the node the backend refused.
const BACKEND_REFUSED: &str = "backendValidateOpConfig() failed for node `";
/// Start and end of the backend's graph finalization (compile).
const FINALIZE_START: &str = "QnnGraph_finalize started";
const FINALIZE_DONE: &str = "QnnGraph_finalize done";
/// QNN error messages that carry no reason of their own (or are harmless noise on every run).
const GENERIC_ERRORS: &[&str] = &[
    "Please refer to the",
    "QnnBackend_validateOpConfig failed",
    "Failed to validate op ",
    "unexpected GraphHtpSettings option",
];
/// At most this many of the backend's finalize errors are kept.
const MAX_FINALIZE_ERRORS: usize = 8;

/// Rejection reasons per node name, in the EP's and the backend's own words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RejectionReasons {
    /// Node name → the first reason the EP gave for it (`REASON : …`).
    pub by_node: BTreeMap<String, String>,
    /// Node name → its operator type, from the same blocks.
    pub op_types: BTreeMap<String, String>,
    /// Node name → the QNN backend's own account of why it refused the node (its `<E>` messages,
    /// condensed), for nodes the backend's op validation rejected.
    pub backend: BTreeMap<String, String>,
    /// The backend's errors while it finalized (compiled) a graph, in log order, deduplicated.
    pub finalize_errors: Vec<String>,
}

impl RejectionReasons {
    /// The reason for a node, when the log has one: the backend's own (`QNN HTP: …`) followed by
    /// the EP's, or either alone. A node the layout transformation renamed (`conv_token_3`) is
    /// also found by its model name.
    pub fn reason(&self, node: &str) -> Option<String> {
        let lookup = |map: &'_ BTreeMap<String, String>| -> Option<String> {
            map.get(node).or_else(|| map.iter().find(|(k, _)| strip_token_suffix(k) == node).map(|(_, v)| v)).cloned()
        };
        match (lookup(&self.backend), lookup(&self.by_node)) {
            (Some(backend), Some(ep)) => Some(format!("QNN backend: {backend} (EP: {ep})")),
            (Some(backend), None) => Some(format!("QNN backend: {backend}")),
            (None, Some(ep)) => Some(ep),
            (None, None) => None,
        }
    }

    /// The model nodes the log gives a reason for, each with its op type and reason, in model
    /// order: the names the EP and the backend used (layout-renamed nodes, nodes of the graph ONNX
    /// Runtime partitions) traced to the model's own nodes; QNN's internal op names are no model node.
    pub fn model_nodes(&self, graph: &ModelGraph) -> Vec<RefusedNode> {
        let coverage = Coverage::new(
            graph.nodes.iter().map(|n| n.name.as_str()),
            graph.partitioned.iter().flat_map(|p| &p.groups),
        );
        let mut refused: Vec<(usize, Option<String>)> = Vec::new();
        for name in self.nodes() {
            for node in coverage.model_nodes(name) {
                match refused.iter_mut().find(|(n, _)| *n == node) {
                    Some((_, reason)) => {
                        if reason.is_none() {
                            *reason = self.reason(name);
                        }
                    }
                    None => refused.push((node, self.reason(&graph.nodes[node].name).or_else(|| self.reason(name)))),
                }
            }
        }
        refused.sort_by_key(|(node, _)| *node);
        refused
            .into_iter()
            .map(|(node, reason)| RefusedNode {
                name: graph.nodes[node].name.clone(),
                op_type: graph.nodes[node].op_type.clone(),
                reason,
            })
            .collect()
    }

    /// Every node with a reason, in name order.
    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        let mut names: Vec<&str> = self.by_node.keys().chain(self.backend.keys()).map(String::as_str).collect();
        names.sort_unstable();
        names.dedup();
        names.into_iter()
    }
}

/// A model node the log gives a reason for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedNode {
    /// The model node's name.
    pub name: String,
    /// Its operator type.
    pub op_type: String,
    /// The backend's and the EP's reason.
    pub reason: Option<String>,
}

/// One log message: its first line and the lines that continue it.
struct Message {
    first: String,
    rest: Vec<String>,
}

/// Reads every rejection of a log: `Validation FAILED` blocks, backend refusals, finalize errors.
pub fn parse_rejections<R: BufRead>(reader: R) -> std::io::Result<RejectionReasons> {
    let mut reasons = RejectionReasons::default();
    let mut pending: Vec<Message> = Vec::new();
    let mut finalizing = false;
    let mut current: Option<Message> = None;
    // The QNN op the backend refused last and its account, for the EP's block that follows.
    let mut refused: Option<(String, String)> = None;
    let mut handle = |message: Message, reasons: &mut RejectionReasons| {
        let line = &message.first;
        if line.contains(FAILED_MARKER) {
            read_block(&message.rest, reasons, refused.take());
        } else if line.contains(VALIDATION_START) {
            pending.clear();
        } else if let Some((node, op_type)) = refused_node(line) {
            let summary = summarize(&pending);
            pending.clear();
            if !summary.is_empty() {
                reasons.backend.entry(node.to_string()).or_insert(summary.clone());
                refused = Some((node.to_string(), summary));
            }
            if let Some(op_type) = op_type {
                reasons.op_types.entry(node.to_string()).or_insert_with(|| op_type.to_string());
            }
        } else if line.contains(FINALIZE_START) {
            finalizing = true;
        } else if line.contains(FINALIZE_DONE) {
            finalizing = false;
        } else if line.contains(QNN_ERROR) || line.contains(PREPARE_ERROR) {
            if finalizing {
                let text = error_text(line);
                let generic = GENERIC_ERRORS.iter().any(|g| text.contains(g));
                if !generic
                    && !reasons.finalize_errors.contains(&text)
                    && reasons.finalize_errors.len() < MAX_FINALIZE_ERRORS
                {
                    reasons.finalize_errors.push(text);
                }
            } else if line.contains(QNN_ERROR) {
                pending.push(message);
            }
        }
    };
    for line in reader.lines() {
        let line = line?;
        if line.starts_with('[') {
            if let Some(done) = current.take() {
                handle(done, &mut reasons);
            }
            current = Some(Message { first: line, rest: Vec::new() });
        } else if let Some(message) = current.as_mut() {
            message.rest.push(line);
        }
    }
    if let Some(done) = current.take() {
        handle(done, &mut reasons);
    }
    Ok(reasons)
}

/// The node lines and the reason of one `Validation FAILED` block; `refused` (the QNN op the
/// backend refused just before, and its account) is given to the block's nodes when one of their
/// names starts that QNN op's name.
fn read_block(lines: &[String], reasons: &mut RejectionReasons, refused: Option<(String, String)>) {
    let mut nodes: Vec<(String, Option<String>)> = Vec::new();
    for line in lines {
        if let Some(at) = line.find(NODE_MARKER) {
            let rest = &line[at + NODE_MARKER.len()..];
            let name = rest.split(" Node index:").next().unwrap_or(rest).trim();
            let op = line.find(OP_MARKER).map(|o| line[o + OP_MARKER.len()..at].trim().to_string());
            nodes.push((name.to_string(), op));
        } else if let Some(at) = line.find(REASON_MARKER) {
            let reason = line[at + REASON_MARKER.len()..].trim().to_string();
            let backend = refused
                .filter(|(op, _)| nodes.iter().any(|(node, _)| !node.is_empty() && op.starts_with(node.as_str())));
            for (node, op) in nodes.drain(..) {
                if let Some((_, account)) = &backend {
                    reasons.backend.entry(node.clone()).or_insert_with(|| account.clone());
                }
                if let Some(op) = op {
                    reasons.op_types.insert(node.clone(), op);
                }
                reasons.by_node.entry(node).or_insert_with(|| reason.clone());
            }
            return;
        } else if !line.trim().is_empty() {
            return;
        }
    }
}

/// The node and its type of `QNN.backendValidateOpConfig() failed for node `X` of type `T` …`.
fn refused_node(line: &str) -> Option<(&str, Option<&str>)> {
    let start = line.find(BACKEND_REFUSED)? + BACKEND_REFUSED.len();
    let mut quoted = line[start..].split('`');
    let name = quoted.next().filter(|name| !name.is_empty())?;
    let op_type = quoted.nth(1).filter(|op| !op.is_empty());
    Some((name, op_type))
}

/// The text of an error line from its `<E>` or `::ERROR:` tag on.
fn error_text(line: &str) -> String {
    let text = match (line.find(QNN_ERROR), line.find(PREPARE_ERROR)) {
        (Some(at), _) => &line[at + QNN_ERROR.len()..],
        (None, Some(at)) => &line[at + PREPARE_ERROR.len()..],
        (None, None) => line,
    };
    text.trim().to_string()
}

/// Condenses the backend's `<E>` messages about one op: its own sentences, the datatypes requested
/// and the configurations it supports (`BF16, FP16, INT16, INT8`).
fn summarize(messages: &[Message]) -> String {
    let mut sentences: Vec<String> = Vec::new();
    let mut requested: Vec<String> = Vec::new();
    let mut supported: Vec<String> = Vec::new();
    for message in messages {
        let text = error_text(&message.first);
        if text.starts_with("Requested I/O datatype set") {
            requested = message
                .rest
                .iter()
                .filter_map(|l| l.trim().split_once(':'))
                .filter(|(_, dtype)| dtype.starts_with("QNN_DATATYPE_"))
                .map(|(slot, dtype)| format!("{slot} {}", dtype.trim_start_matches("QNN_DATATYPE_")))
                .collect();
        } else if let Some(config) = text.strip_prefix("Supported I/O datatype sets for the configuration:") {
            let config = config.trim().trim_end_matches("(continued)").trim().to_string();
            if !supported.contains(&config) {
                supported.push(config);
            }
        } else if !GENERIC_ERRORS.iter().any(|g| text.contains(g)) && !sentences.contains(&text) {
            sentences.push(text);
        }
    }
    let mut summary = sentences.join(" ");
    if !requested.is_empty() {
        summary.push_str(&format!("; requested {}", requested.join(", ")));
    }
    if !supported.is_empty() {
        summary.push_str(&format!("; supported configurations: {}", supported.join(", ")));
    }
    summary.trim_start_matches("; ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_logger_formats_and_keeps_first_reason() {
        let log = "\
[ort Verbose] [onnxruntime] [] qnn_execution_provider.cc:1713 LogNodeSupport: Validation FAILED for 1 nodes in OrtNodeUnit (Det) :
\tOperator type: Det Node name: det Node index: 15
\tREASON : Operators of type `Det` are not supported by QNN EP.
[V:onnxruntime:, qnn_execution_provider.cc:1713 LogNodeSupport] Validation FAILED for 2 nodes in OrtNodeUnit (LayerNormalization) :
\tOperator type: LayerNormalization Node name: ln_1 Node index: 3
\tOperator type: LayerNormalization Node name: ln_2 Node index: 4
\tREASON : QNN LayerNorm needs a constant scale
[V:onnxruntime:, qnn_execution_provider.cc:1713 LogNodeSupport] Validation FAILED for 1 nodes in OrtNodeUnit (Det) :
\tOperator type: Det Node name: det Node index: 40
\tREASON : a later pass
";
        let r = parse_rejections(log.as_bytes()).unwrap();
        assert_eq!(r.reason("det").as_deref(), Some("Operators of type `Det` are not supported by QNN EP."));
        assert_eq!(r.reason("ln_2").as_deref(), Some("QNN LayerNorm needs a constant scale"));
        assert_eq!(r.op_types.get("ln_1").map(String::as_str), Some("LayerNormalization"));
        assert_eq!(r.by_node.len(), 3);
    }

    /// The shape of Qualcomm's HTP backend log (QNN 2.51, x86_64 host build) around a refused op.
    const HTP_REFUSAL: &str = "\
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <I> QnnBackend_validateOpConfig started, backend = 0x1
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> Unsupported input/output datatypes requested for the HTP Op 'MatMul' in the node 'mm'. There is a mismatch for the combination of inputs and outputs.

[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> Requested I/O datatype set:

   in[0]:QNN_DATATYPE_INT_32
   in[1]:QNN_DATATYPE_INT_32
   in[2]: (optional)
   out[0]:QNN_DATATYPE_INT_32

[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> Supported I/O datatype sets for the configuration: FP16
   1:
   in[0]:QNN_DATATYPE_FLOAT_16
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> Supported I/O datatype sets for the configuration: INT8
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> Supported I/O datatype sets for the configuration: INT8 (continued)
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> Please refer to the 'HTP Backend Op Definition Supplement' section of QNN SDK for more details
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> QnnBackend_validateOpConfig failed 3110
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> Failed to validate op mm with error 0xc26
[W:onnxruntime:timed, qnn_model_wrapper.cc:565 CreateQnnNode] QNN.backendValidateOpConfig() failed for node `mm` of type `MatMul` with error code 3110
[V:onnxruntime:timed, qnn_execution_provider.cc:1713 LogNodeSupport] Validation FAILED for 1 nodes in OrtNodeUnit (MatMul) :
\tOperator type: MatMul Node name: mm Node index: 2
\tREASON : Failed to add fused Matmul node.
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <I> QnnBackend_validateOpConfig started, backend = 0x1
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> [4294967295] has incorrect Value 68, expected >= 73.
[W:onnxruntime:timed, qnn_model_wrapper.cc:565 CreateQnnNode] QNN.backendValidateOpConfig() failed for node `conv1_token_1` of type `Conv` with error code 3110
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <I> QnnGraph_finalize started, graph = 0x1
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> unexpected GraphHtpSettings option 66
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging] C:\\src\\graph_prepare.cc:211::ERROR:could not create op: q::flat_from_vtcm
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> \"p2o.Div.2\" generated: could not create op
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> RouterX86 graph prepare failed 12
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <I> QnnGraph_finalize done. status 0x3ea
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> outside any window
";

    #[test]
    fn the_backends_own_refusal_is_condensed_and_put_before_the_eps() {
        let r = parse_rejections(HTP_REFUSAL.as_bytes()).unwrap();
        assert_eq!(
            r.reason("mm").as_deref(),
            Some(
                "QNN backend: Unsupported input/output datatypes requested for the HTP Op 'MatMul' in the node 'mm'. There is a \
                 mismatch for the combination of inputs and outputs.; requested in[0] INT_32, in[1] INT_32, out[0] INT_32; \
                 supported configurations: FP16, INT8 (EP: Failed to add fused Matmul node.)"
            )
        );
        assert_eq!(
            r.reason("conv1_token_1").as_deref(),
            Some("QNN backend: [4294967295] has incorrect Value 68, expected >= 73.")
        );
        assert_eq!(r.nodes().collect::<Vec<_>>(), ["conv1_token_1", "mm"]);
        assert_eq!(r.op_types.get("conv1_token_1").map(String::as_str), Some("Conv"), "from the EP's refusal line");
    }

    /// The backend names QNN ops (`mm/MatMulAddFusion_2`: the node's name and the EP's counter);
    /// the EP's block that follows names the ONNX nodes.
    const FUSED_REFUSAL: &str = "\
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <I> QnnBackend_validateOpConfig started, backend = 0x1
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> Unsupported datatypes for the HTP Op 'FullyConnected' in the node 'mm/MatMulAddFusion_2'.
[W:onnxruntime:timed, qnn_model_wrapper.cc:565 CreateQnnNode] QNN.backendValidateOpConfig() failed for node `mm/MatMulAddFusion_2` of type `FullyConnected` with error code 3110
[V:onnxruntime:timed, qnn_execution_provider.cc:1713 LogNodeSupport] Validation FAILED for 1 nodes in OrtNodeUnit (Gemm) :
\tOperator type: Gemm Node name: mm/MatMulAddFusion Node index: 9
\tREASON : Failed to add node.
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <I> QnnBackend_validateOpConfig started, backend = 0x1
[V:onnxruntime:npugate, qnn_backend_manager.cc:519 QnnLogging]  <E> Unsupported datatypes for the HTP Op 'Prelu' in the node 'prelu_2'.
[W:onnxruntime:timed, qnn_model_wrapper.cc:565 CreateQnnNode] QNN.backendValidateOpConfig() failed for node `prelu_2` of type `Prelu` with error code 3110
[V:onnxruntime:timed, qnn_execution_provider.cc:1713 LogNodeSupport] Validation FAILED for 1 nodes in OrtNodeUnit (Erf) :
\tOperator type: Erf Node name: erf Node index: 4
\tREASON : Operators of type `Erf` are not supported by QNN EP.
";

    #[test]
    fn the_backends_account_of_a_qnn_op_goes_to_the_onnx_nodes_of_the_block_that_follows() {
        let r = parse_rejections(FUSED_REFUSAL.as_bytes()).unwrap();
        let gemm = r.reason("mm/MatMulAddFusion").unwrap();
        assert!(
            gemm.starts_with("QNN backend: Unsupported datatypes for the HTP Op 'FullyConnected'")
                && gemm.ends_with("(EP: Failed to add node.)"),
            "{gemm}"
        );
        assert_eq!(
            r.reason("erf").as_deref(),
            Some("Operators of type `Erf` are not supported by QNN EP."),
            "prelu_2 does not start with erf"
        );
        // Traced to the model: the fused Gemm stands for the model's MatMul and Add; QNN's op names are no model node.
        let graph = ModelGraph {
            nodes: ["mm", "add", "erf", "prelu"]
                .iter()
                .map(|n| npugate_result::GraphNode { name: n.to_string(), op_type: "X".into(), ..Default::default() })
                .collect(),
            partitioned: Some(npugate_result::Fusions {
                groups: vec![npugate_result::FusionGroup {
                    kernels: vec!["mm/MatMulAddFusion".into()],
                    nodes: vec!["mm".into(), "add".into()],
                }],
            }),
            ..Default::default()
        };
        let refused: Vec<(String, bool)> = r
            .model_nodes(&graph)
            .into_iter()
            .map(|n| (n.name, n.reason.is_some_and(|r| r.starts_with("QNN backend"))))
            .collect();
        assert_eq!(refused, [("mm".to_string(), true), ("add".to_string(), true), ("erf".to_string(), false)]);
    }

    #[test]
    fn finalize_errors_are_kept_in_order_without_noise() {
        let r = parse_rejections(HTP_REFUSAL.as_bytes()).unwrap();
        assert_eq!(
            r.finalize_errors,
            [
                "could not create op: q::flat_from_vtcm",
                "\"p2o.Div.2\" generated: could not create op",
                "RouterX86 graph prepare failed 12"
            ]
        );
    }
}
