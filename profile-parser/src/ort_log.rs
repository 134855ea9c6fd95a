//! Rejection reasons from the verbose ORT log: the QNN EP's `Validation FAILED` blocks.
//!
//! A block is a header line followed by one line per node and one `REASON` line:
//! ```text
//! … LogNodeSupport: Validation FAILED for 1 nodes in OrtNodeUnit (Det) :
//! <TAB>Operator type: Det Node name: det Node index: 15
//! <TAB>REASON : Operators of type `Det` are not supported by QNN EP.…
//! ```
//! The header's prefix differs between loggers (`[V:onnxruntime:, file:line Func]`, `[ort Verbose] …`),
//! so lines are matched by their content only. GetCapability runs several times (before and after
//! the layout transformation), so the same node can be reported more than once: the first reason wins.

use std::collections::BTreeMap;
use std::io::BufRead;

/// Marker of a failed-validation header line.
const FAILED_MARKER: &str = "Validation FAILED for";
/// Marker of a node line inside a block.
const NODE_MARKER: &str = "Node name: ";
/// Marker of the reason line inside a block.
const REASON_MARKER: &str = "REASON :";

/// Rejection reasons per node name, in the EP's own words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RejectionReasons {
    /// Node name → the first reason the log gave for it.
    pub by_node: BTreeMap<String, String>,
}

impl RejectionReasons {
    /// The reason for a node, when the log has one.
    pub fn reason(&self, node: &str) -> Option<&str> {
        self.by_node.get(node).map(String::as_str)
    }
}

/// Reads every `Validation FAILED` block of a log.
pub fn parse_rejections<R: BufRead>(reader: R) -> std::io::Result<RejectionReasons> {
    let mut reasons = RejectionReasons::default();
    let mut block_nodes: Option<Vec<String>> = None;
    for line in reader.lines() {
        let line = line?;
        if line.contains(FAILED_MARKER) {
            block_nodes = Some(Vec::new());
            continue;
        }
        let Some(nodes) = block_nodes.as_mut() else { continue };
        if let Some(at) = line.find(NODE_MARKER) {
            let rest = &line[at + NODE_MARKER.len()..];
            let name = rest.split(" Node index:").next().unwrap_or(rest).trim();
            nodes.push(name.to_string());
        } else if let Some(at) = line.find(REASON_MARKER) {
            let reason = line[at + REASON_MARKER.len()..].trim().to_string();
            for node in nodes.drain(..) {
                reasons.by_node.entry(node).or_insert_with(|| reason.clone());
            }
            block_nodes = None;
        } else {
            block_nodes = None;
        }
    }
    Ok(reasons)
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
        assert_eq!(r.reason("det"), Some("Operators of type `Det` are not supported by QNN EP."));
        assert_eq!(r.reason("ln_2"), Some("QNN LayerNorm needs a constant scale"));
        assert_eq!(r.by_node.len(), 3);
    }
}
