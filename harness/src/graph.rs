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
use npugate_result::{GraphNode, ModelGraph};

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
        Ok(LoadedModel { model, renamed, named })
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
        ModelGraph { nodes, named: self.named, partitioned: None, io_quantization }
    }

    /// Sets the partitioned graph ONNX Runtime saved at `optimized` against the model and adds it
    /// (and its graph-I/O quantization nodes) to `graph`.
    pub fn add_partitioned(&self, graph: &mut ModelGraph, optimized: &Path) -> Result<()> {
        let partitioned = Model::read(optimized).map_err(|e| anyhow!("{e}")).context("the partitioned graph")?;
        let (Some(original), Some(optimized)) = (self.model.proto().graph.as_ref(), partitioned.proto().graph.as_ref()) else {
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
