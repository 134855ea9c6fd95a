//! The model as every session loads it, and its own nodes as the result records them.
//!
//! Unnamed nodes are named as ONNX Runtime shows them (`<op_type>_<index>`, see
//! `npugate_onnx::Model::name_nodes_as_onnx_runtime`) before any session loads the model, so
//! that ONNX Runtime's node→EP assignment, its profiles and the EP's log name every node as the
//! result's [`ModelGraph`] does: a model with unnamed nodes is loaded from memory, its external
//! data read from the model's folder.
//!
//! The graph ONNX Runtime partitions is the model after its load-time, EP-independent
//! optimizations (level 1): a CPU session at that level saves it, and it is set against the
//! model (see [`crate::fusions`]) so each node the assignment lists is traced to the model nodes
//! it stands for.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use npugate_onnx::{GraphId, Model, CONSTANT};
use npugate_result::{
    Attribution, CompiledGraph, EpContextCover, FusionGroup, Fusions, GraphNode, ModelGraph, EP_CONTEXT_NODES_KEY,
};

use crate::fusions;

/// Operator type of the nodes that hold a compiled model's context binary.
const EP_CONTEXT: &str = "EPContext";

/// The model as the sessions load it.
pub struct LoadedModel {
    /// The model, its unnamed nodes named.
    pub model: Model,
    /// The encoded model to load from memory when nodes were named; `None`: load the file as given.
    pub renamed: Option<Arc<[u8]>>,
    /// How many nodes were named.
    pub named: usize,
    /// True for a compiled model: it has `EPContext` nodes.
    pub compiled: bool,
}

/// A compiled model's source model, as the harness was given it (`--reference-model`).
pub struct SourceModel<'a> {
    /// The source model, read and named as ONNX Runtime names its nodes.
    pub loaded: &'a LoadedModel,
    /// Its path, as given.
    pub path: &'a Path,
    /// Its sha256.
    pub sha256: String,
}

impl LoadedModel {
    /// Reads the model and names its unnamed nodes. A compiled model (`EPContext` nodes) is loaded
    /// as given: its context binaries are found relative to its file.
    pub fn read(path: &Path) -> Result<LoadedModel> {
        let mut model = Model::read(path).map_err(|e| anyhow!("{e}"))?;
        let compiled = model.index().nodes().iter().any(|n| n.op_type() == EP_CONTEXT);
        let named = if compiled { 0 } else { model.name_nodes_as_onnx_runtime() };
        let renamed = match named {
            0 => None,
            _ => Some(Arc::from(model.to_bytes().map_err(|e| anyhow!("{e}"))?)),
        };
        Ok(LoadedModel { model, renamed, named, compiled })
    }

    /// The model's nodes, without the partitioned graph.
    pub fn graph(&self) -> ModelGraph {
        let index = self.model.index();
        let nodes = index
            .nodes()
            .iter()
            .filter(|n| n.op_type() != CONSTANT)
            .map(|n| GraphNode {
                name: n.name().to_string(),
                op_type: n.op_type().to_string(),
                domain: n.domain().to_string(),
                subgraph: n.graph != GraphId::MAIN,
            })
            .collect();
        let io_quantization = index.io_quantization().into_iter().map(|n| n.name().to_string()).collect();
        ModelGraph { nodes, named: self.named, partitioned: None, io_quantization, compiled: None }
    }

    /// A compiled model's graph counted in its source model's nodes: each `EPContext` node is a
    /// group standing for the source nodes it replaced — the compile's record
    /// ([`EP_CONTEXT_NODES_KEY`], written by `npugate compile`: the nodes of each QNN partition)
    /// when it names this model's `EPContext` nodes and nodes of this source, completed by the
    /// source nodes between the `EPContext` node's input and output tensors (the Q/DQ nodes a QDQ
    /// node unit absorbed, which the partition does not list); without a record, those alone. The
    /// nodes the compile left outside keep their source names. Without the source model the
    /// compiled model's own nodes are counted, each `EPContext` node one node of unknown FLOPs.
    pub fn compiled_graph(&self, source: Option<&SourceModel<'_>>) -> ModelGraph {
        let Some(source) = source else {
            return ModelGraph { compiled: Some(CompiledGraph::default()), ..self.graph() };
        };
        let index = self.model.index();
        let source_index = source.loaded.model.index();
        let contexts: Vec<_> =
            index.nodes().iter().filter(|n| n.graph == GraphId::MAIN && n.op_type() == EP_CONTEXT).collect();
        let recorded: Option<Vec<EpContextCover>> = self
            .model
            .metadata(EP_CONTEXT_NODES_KEY)
            .and_then(|json| serde_json::from_str::<Vec<EpContextCover>>(json).ok())
            .filter(|covers| {
                covers.len() == contexts.len()
                    && covers.iter().zip(&contexts).all(|(cover, node)| cover.ep_context == node.name())
            })
            .filter(|covers| covers.iter().flat_map(|c| &c.source_nodes).any(|name| source_index.node(name).is_some()));
        let attribution = if recorded.is_some() { Attribution::CompileRecord } else { Attribution::SourceModel };
        let covers: Vec<EpContextCover> = contexts
            .iter()
            .enumerate()
            .map(|(position, node)| {
                let (inputs, outputs): (Vec<&str>, Vec<&str>) = (
                    node.inputs().iter().map(String::as_str).collect(),
                    node.outputs().iter().map(String::as_str).collect(),
                );
                let recorded_nodes = recorded
                    .as_ref()
                    .map(|covers| covers[position].source_nodes.iter().map(String::as_str))
                    .into_iter()
                    .flatten();
                let between = source_index.nodes_between(&inputs, &outputs);
                let mut source_nodes: Vec<String> = Vec::new();
                for name in recorded_nodes.chain(between.iter().map(|n| n.name())) {
                    if source_index.node(name).is_some() && !source_nodes.iter().any(|n| n == name) {
                        source_nodes.push(name.to_string());
                    }
                }
                EpContextCover { ep_context: node.name().to_string(), source_nodes }
            })
            .collect();
        let mut graph = source.loaded.graph();
        graph.partitioned = Some(Fusions {
            groups: covers
                .iter()
                .map(|cover| FusionGroup { kernels: vec![cover.ep_context.clone()], nodes: cover.source_nodes.clone() })
                .collect(),
        });
        for node in index.io_quantization() {
            if !graph.io_quantization.iter().any(|n| n == node.name()) {
                graph.io_quantization.push(node.name().to_string());
            }
        }
        graph.compiled = Some(CompiledGraph {
            attribution,
            source_model: Some(source.path.display().to_string()),
            source_sha256: Some(source.sha256.clone()),
            ep_context_nodes: covers,
        });
        graph
    }

    /// Sets the partitioned graph ONNX Runtime saved at `optimized` against the model and adds it
    /// (and its graph-I/O quantization nodes) to `graph`.
    pub fn add_partitioned(&self, graph: &mut ModelGraph, optimized: &Path) -> Result<()> {
        let partitioned = Model::read(optimized).map_err(|e| anyhow!("{e}")).context("the partitioned graph")?;
        let (Some(original), Some(optimized)) = (self.model.proto().graph.as_ref(), partitioned.proto().graph.as_ref())
        else {
            return Ok(());
        };
        graph.partitioned = Some(fusions::groups(original, optimized));
        for node in partitioned.index().io_quantization() {
            if !graph.io_quantization.iter().any(|n| n == node.name()) {
                graph.io_quantization.push(node.name().to_string());
            }
        }
        Ok(())
    }
}
