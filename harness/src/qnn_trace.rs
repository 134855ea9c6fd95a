//! The QNN EP's account of its graphs, read into `result.json` `qnn_trace`: its framework op trace
//! (`qnn_op_trace.json`: each QNN op's ONNX source nodes, the nodes it did not take and why) and
//! its JSON graph dump (each op's input and output tensors, which tie an op ONNX Runtime inserted —
//! a layout `Transpose` — to the ops beside it). The EP writes both while an account session
//! composes its graphs (see `QnnArgs::trace_options`); the dump is removed once read, the trace
//! kept as evidence. A compiled model composes no graph: its trace is the one `npugate compile`
//! recorded in it ([`QNN_TRACE_KEY`]).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use npugate_onnx::Model;
use npugate_result::{QnnGraphTrace, QnnTrace, QnnTraceOp, TraceSource, UnsupportedNode, QNN_TRACE_KEY};
use npugate_settings::qnn::{GRAPH_DUMP_DIR, OP_TRACE_FILE};
use serde::Deserialize;

/// `qnn_op_trace.json` as onnxruntime-qnn writes it (schema 2; schema 1 differs only in where it
/// keeps the compilation target, which is not read).
#[derive(Deserialize)]
struct TraceFile {
    #[serde(default = "legacy_schema")]
    schema_version: u32,
    #[serde(default)]
    subgraph_traces: Vec<SubgraphTrace>,
    #[serde(default)]
    unsupported_nodes: Vec<UnsupportedEntry>,
}

fn legacy_schema() -> u32 {
    1
}

#[derive(Deserialize)]
struct SubgraphTrace {
    graph_name: String,
    #[serde(default)]
    op_mappings: Vec<Mapping>,
}

#[derive(Deserialize)]
struct Mapping {
    dst_name: String,
    #[serde(default)]
    dst_qnn_op_type: String,
    #[serde(default)]
    node_group_type: String,
    #[serde(default)]
    sources: Vec<Source>,
}

#[derive(Deserialize)]
struct Source {
    name: String,
    #[serde(rename = "type", default)]
    kind: String,
}

#[derive(Deserialize)]
struct UnsupportedEntry {
    node_name: String,
    #[serde(default)]
    op_type: String,
    #[serde(default)]
    reason: String,
}

/// QNN's JSON graph dump: `graph.nodes.<op>.input_names|output_names`.
#[derive(Deserialize)]
struct GraphDump {
    graph: DumpedGraph,
}

#[derive(Deserialize)]
struct DumpedGraph {
    #[serde(default)]
    nodes: HashMap<String, DumpedOp>,
}

#[derive(Deserialize)]
struct DumpedOp {
    #[serde(default)]
    input_names: Vec<String>,
    #[serde(default)]
    output_names: Vec<String>,
}

/// The trace the EP wrote into `out` (with the ops' tensors from the graph dump, which is then
/// removed); `None` when it wrote none (another EP, an older onnxruntime-qnn, a session that
/// loaded a context binary).
pub fn read(out: &Path) -> Result<Option<QnnTrace>> {
    let dump_dir = out.join(GRAPH_DUMP_DIR);
    let trace = read_trace(&out.join(OP_TRACE_FILE), &dump_dir);
    let _ = std::fs::remove_dir_all(&dump_dir);
    trace
}

/// The trace the EP wrote into `out` so far, its graph dump left for [`read`]: what the quiet-first
/// account judges its session by (the EP's reason for a node it left, where no log has one yet).
pub fn peek(out: &Path) -> Option<QnnTrace> {
    read_trace(&out.join(OP_TRACE_FILE), &out.join(GRAPH_DUMP_DIR)).ok().flatten()
}

fn read_trace(path: &Path, dump_dir: &Path) -> Result<Option<QnnTrace>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
    };
    let file: TraceFile =
        serde_json::from_str(&text).with_context(|| format!("{} is not the QNN EP's op trace", path.display()))?;
    let graphs = file
        .subgraph_traces
        .into_iter()
        .map(|subgraph| {
            let mut tensors = dumped_tensors(&dump_dir.join(format!("{}.json", subgraph.graph_name)));
            let ops = subgraph
                .op_mappings
                .into_iter()
                .map(|mapping| {
                    let mut sources: Vec<String> = Vec::new();
                    for source in mapping.sources.into_iter().filter(|s| s.kind == "OP") {
                        if !sources.contains(&source.name) {
                            sources.push(source.name);
                        }
                    }
                    let dumped = tensors.remove(&mapping.dst_name);
                    QnnTraceOp {
                        name: mapping.dst_name,
                        qnn_type: mapping.dst_qnn_op_type,
                        group: mapping.node_group_type,
                        sources,
                        inputs: dumped.as_ref().map(|d| d.input_names.clone()).unwrap_or_default(),
                        outputs: dumped.map(|d| d.output_names).unwrap_or_default(),
                    }
                })
                .collect();
            QnnGraphTrace { name: subgraph.graph_name, ops }
        })
        .collect();
    let unsupported = file
        .unsupported_nodes
        .into_iter()
        .map(|u| UnsupportedNode { node: u.node_name, op_type: u.op_type, reason: u.reason })
        .collect();
    Ok(Some(QnnTrace { source: TraceSource::Session, schema_version: file.schema_version, graphs, unsupported }))
}

/// The ops of one dumped QNN graph by name; empty when there is no dump or it cannot be read.
fn dumped_tensors(path: &Path) -> HashMap<String, DumpedOp> {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<GraphDump>(&bytes).ok())
        .map(|dump| dump.graph.nodes)
        .unwrap_or_default()
}

/// The trace `npugate compile` recorded in a compiled model, when it did.
pub fn recorded(model: &Model) -> Option<QnnTrace> {
    let json = model.metadata(QNN_TRACE_KEY)?;
    let trace: QnnTrace = serde_json::from_str(json).ok()?;
    Some(QnnTrace { source: TraceSource::Compile, ..trace })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eps_trace_and_graph_dump_become_ops_with_their_sources_and_tensors() {
        let dir = tempfile::tempdir().unwrap();
        let trace = r#"{"schema_version":2,"soc_traces":[],"subgraph_traces":[{"graph_name":"G","op_mappings":[
            {"dst_name":"Transpose","dst_qnn_op_type":"Transpose","node_group_type":"OrtNodeUnit",
             "sources":[{"name":"Transpose","type":"OP"},{"name":"Transpose","type":"TENSOR"}]},
            {"dst_name":"conv_token_1","dst_qnn_op_type":"Conv2d","node_group_type":"OrtNodeUnit",
             "sources":[{"name":"x_dq","type":"OP"},{"name":"conv_token_1","type":"OP"},{"name":"conv_token_1","type":"OP"}]}],
            "tensor_mappings":[]}],
            "unsupported_nodes":[{"node_index":3,"node_name":"neg","op_type":"Neg","reason":"Failed to add node."}],
            "summary":{}}"#;
        std::fs::write(dir.path().join(OP_TRACE_FILE), trace).unwrap();
        std::fs::create_dir(dir.path().join(GRAPH_DUMP_DIR)).unwrap();
        std::fs::write(
            dir.path().join(GRAPH_DUMP_DIR).join("G.json"),
            r#"{"graph":{"nodes":{"Transpose":{"input_names":["x"],"output_names":["t"],"type":"Transpose"}},"tensors":{}}}"#,
        )
        .unwrap();
        let read = read(dir.path()).unwrap().unwrap();
        assert_eq!(read.schema_version, 2);
        let ops = &read.graphs[0].ops;
        assert_eq!(
            (ops[0].inputs.as_slice(), ops[0].outputs.as_slice()),
            (&["x".to_string()][..], &["t".to_string()][..])
        );
        assert_eq!(ops[1].sources, ["x_dq", "conv_token_1"], "OP sources, each once");
        assert!(ops[1].inputs.is_empty());
        assert_eq!(read.reason("neg"), Some("Failed to add node."));
        assert!(!dir.path().join(GRAPH_DUMP_DIR).exists(), "the dump is removed once read");
        assert!(dir.path().join(OP_TRACE_FILE).is_file(), "the trace is kept");
        std::fs::remove_file(dir.path().join(OP_TRACE_FILE)).unwrap();
        assert_eq!(super::read(dir.path()).unwrap(), None);
        std::fs::write(dir.path().join(OP_TRACE_FILE), "{not json").unwrap();
        assert!(super::read(dir.path()).unwrap_err().to_string().contains("not the QNN EP's op trace"));
    }
}
