//! Files a model refers to: tensors whose bytes live in external data files
//! (`data_location = EXTERNAL`) and EPContext nodes whose compiled context is a separate file
//! (`embed_mode = 0`). Read from the protobuf alone; no tensor bytes are read or copied.
//!
//! Every path must stay inside the model's folder: relative, and never climbing out with `..`
//! (ONNX and ONNX Runtime refuse the same).

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use crate::graph::{node_label, subgraphs, walk_graphs, GraphPath};
use crate::model::Model;
use crate::proto::tensor_proto::DataLocation;
use crate::proto::{AttributeProto, GraphProto, NodeProto, TensorProto};

/// Where a tensor proto sits in the model.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TensorHolder {
    /// A graph's initializer.
    Initializer {
        /// The graph.
        graph: GraphPath,
    },
    /// The `values` or `indices` tensor of a graph's sparse initializer.
    SparseInitializer {
        /// The graph.
        graph: GraphPath,
    },
    /// A tensor-valued node attribute (`Constant`'s `value`, …), or a tensor inside a sparse or
    /// list attribute.
    Attribute {
        /// The graph holding the node (a model-local function's body, too).
        graph: GraphPath,
        /// The node's name, or `<op_type>#<index>` when it has none.
        node: String,
        /// The attribute's name.
        attribute: String,
    },
}

impl fmt::Display for TensorHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TensorHolder::Initializer { graph } => write!(f, "initializer in {graph}"),
            TensorHolder::SparseInitializer { graph } => write!(f, "sparse initializer in {graph}"),
            TensorHolder::Attribute { graph, node, attribute } => {
                write!(f, "attribute {attribute:?} of node {node:?} in {graph}")
            }
        }
    }
}

/// A tensor whose bytes are stored in an external file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExternalTensor {
    /// The tensor's name (may be empty for an attribute tensor).
    pub name: String,
    /// Where the tensor proto sits.
    pub holder: TensorHolder,
    /// The data file, relative to the model's folder (checked: never absolute, never outside).
    pub location: String,
    /// Byte offset of the tensor's data in the file (0 when not given).
    pub offset: u64,
    /// Byte length of the data; `None` means up to the end of the file.
    pub length: Option<u64>,
}

/// An EPContext node (`com.microsoft` `EPContext`, `embed_mode = 0`) whose compiled context
/// (`ep_cache_context`) is a file next to the model.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EpContextFile {
    /// The graph holding the node.
    pub graph: GraphPath,
    /// The node's name, or `EPContext#<index>` when it has none.
    pub node: String,
    /// The context file, relative to the model's folder (checked like [`ExternalTensor::location`]).
    pub path: String,
    /// The EP that wrote it (the `source` attribute, e.g. `QNN`), when recorded.
    pub source: Option<String>,
}

/// Why a model's file references are unusable. Each names the tensor or node and the path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExternalDataError {
    /// A path that is absolute.
    #[error(
        "{site} refers to the absolute path {path:?}; ONNX allows only paths relative to the model's folder: \
         re-save the model with a relative location"
    )]
    Absolute {
        /// The tensor or node.
        site: String,
        /// The path.
        path: String,
    },
    /// A path that leads out of the model's folder.
    #[error(
        "{site} refers to {path:?}, which climbs out of the model's folder; keep data files in the model's \
         folder (or a folder below it) and refer to them relatively"
    )]
    OutsideModelFolder {
        /// The tensor or node.
        site: String,
        /// The path.
        path: String,
    },
    /// An empty path or a reference without one.
    #[error("{site} refers to an external file but names none (empty or missing `location` / `ep_cache_context`); re-save the model")]
    NoPath {
        /// The tensor or node.
        site: String,
    },
    /// `offset` or `length` that is not a byte count.
    #[error("{site} has external_data {key} = {value:?}, not a byte count; re-save the model")]
    BadNumber {
        /// The tensor.
        site: String,
        /// `offset` or `length`.
        key: String,
        /// What it says.
        value: String,
    },
    /// An `ep_cache_context` that is not UTF-8 text.
    #[error("{site} has embed_mode 0 but its ep_cache_context is not a UTF-8 path; re-compile the model")]
    NotUtf8 {
        /// The node.
        site: String,
    },
}

/// Every file a model refers to, read from the protobuf.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileReferences {
    /// Tensors stored in external data files, in walk order.
    pub tensors: Vec<ExternalTensor>,
    /// EPContext nodes whose context is a file, in walk order.
    pub ep_contexts: Vec<EpContextFile>,
}

impl FileReferences {
    /// Every distinct file referred to, sorted: what must travel with the model.
    pub fn files(&self) -> BTreeSet<&str> {
        let tensors = self.tensors.iter().map(|t| t.location.as_str());
        tensors.chain(self.ep_contexts.iter().map(|c| c.path.as_str())).collect()
    }
}

/// A reference to a file, as found: not yet checked.
enum Reference<'m> {
    Tensor { tensor: &'m TensorProto, holder: TensorHolder },
    EpContext { graph: GraphPath, node: String, context: &'m [u8], source: Option<String> },
}

impl Reference<'_> {
    /// How errors name it.
    fn site(&self) -> String {
        match self {
            Reference::Tensor { tensor, holder } => format!("tensor {:?} ({holder})", tensor.name()),
            Reference::EpContext { graph, node, .. } => format!("EPContext node {node:?} in {graph}"),
        }
    }
}

impl Model {
    /// Every external-data tensor and every EPContext context file, with their paths checked.
    pub fn file_references(&self) -> Result<FileReferences, ExternalDataError> {
        let mut found = FileReferences::default();
        for reference in references(self) {
            let site = reference.site();
            match reference {
                Reference::Tensor { tensor, holder } => {
                    let entries = external_entries(tensor);
                    let location = entries.get("location").copied().unwrap_or_default();
                    check_path(location, &site)?;
                    let number = |key: &str| -> Result<Option<u64>, ExternalDataError> {
                        entries.get(key).map(|value| parse_count(&site, key, value)).transpose()
                    };
                    found.tensors.push(ExternalTensor {
                        name: tensor.name().to_string(),
                        holder,
                        location: location.to_string(),
                        offset: number("offset")?.unwrap_or(0),
                        length: number("length")?,
                    });
                }
                Reference::EpContext { graph, node, context, source } => {
                    let path =
                        std::str::from_utf8(context).map_err(|_| ExternalDataError::NotUtf8 { site: site.clone() })?;
                    check_path(path, &site)?;
                    found.ep_contexts.push(EpContextFile { graph, node, path: path.to_string(), source });
                }
            }
        }
        Ok(found)
    }

    /// Rewrites file references: `rewrite` is called once per distinct path (external-data
    /// `location`s and EPContext context paths, checked or not) and returns the new path, or
    /// `None` to keep it. Every new path is checked first; on an error nothing changes. Returns
    /// how many references changed.
    pub fn rewrite_file_references(
        &mut self,
        mut rewrite: impl FnMut(&str) -> Option<String>,
    ) -> Result<usize, ExternalDataError> {
        let mut renames: HashMap<String, String> = HashMap::new();
        for reference in references(self) {
            let old = match &reference {
                Reference::Tensor { tensor, .. } => {
                    external_entries(tensor).get("location").copied().unwrap_or_default()
                }
                Reference::EpContext { context, .. } => match std::str::from_utf8(context) {
                    Ok(path) => path,
                    Err(_) => return Err(ExternalDataError::NotUtf8 { site: reference.site() }),
                },
            };
            if old.is_empty() {
                return Err(ExternalDataError::NoPath { site: reference.site() });
            }
            if !renames.contains_key(old) {
                let new = rewrite(old).unwrap_or_else(|| old.to_string());
                renames.insert(old.to_string(), new);
            }
            check_path(&renames[old], &reference.site())?;
        }
        renames.retain(|old, new| old != new);
        let mut changed = 0;
        for_each_reference_mut(self, &mut |path: &mut String| {
            if let Some(new) = renames.get(path.as_str()) {
                path.clone_from(new);
                changed += 1;
            }
        });
        Ok(changed)
    }
}

/// Every external-data tensor and EPContext-with-file node, in walk order: the main graph and its
/// subgraphs depth first, then each model-local function's body and its subgraphs.
fn references(model: &Model) -> Vec<Reference<'_>> {
    let mut found = Vec::new();
    if let Some(main) = model.proto().graph.as_ref() {
        walk_graphs(main, &GraphPath::default(), &mut |path, graph| graph_references(path, graph, &mut found));
    }
    for function in &model.proto().functions {
        let path = GraphPath::function(function.domain(), function.name());
        for (index, node) in function.node.iter().enumerate() {
            node_references(&path, index, node, &mut found);
            for (attribute, position, subgraph) in subgraphs(node) {
                let subgraph_path = path.child(index, node, attribute, position);
                walk_graphs(subgraph, &subgraph_path, &mut |path, graph| graph_references(path, graph, &mut found));
            }
        }
    }
    found
}

/// A graph's own references: its initializers, sparse initializers and nodes (not its subgraphs).
fn graph_references<'m>(path: &GraphPath, graph: &'m GraphProto, found: &mut Vec<Reference<'m>>) {
    let external = |tensor: &&'m TensorProto| is_external(tensor);
    for tensor in graph.initializer.iter().filter(external) {
        found.push(Reference::Tensor { tensor, holder: TensorHolder::Initializer { graph: path.clone() } });
    }
    for sparse in &graph.sparse_initializer {
        for tensor in sparse.values.iter().chain(sparse.indices.iter()).filter(external) {
            found.push(Reference::Tensor { tensor, holder: TensorHolder::SparseInitializer { graph: path.clone() } });
        }
    }
    for (index, node) in graph.node.iter().enumerate() {
        node_references(path, index, node, found);
    }
}

/// A node's own references: tensors in its attributes and its EPContext file (not its subgraphs).
fn node_references<'m>(path: &GraphPath, index: usize, node: &'m NodeProto, found: &mut Vec<Reference<'m>>) {
    for attribute in &node.attribute {
        let holder = || TensorHolder::Attribute {
            graph: path.clone(),
            node: node_label(index, node),
            attribute: attribute.name().to_string(),
        };
        attribute_references(attribute, &holder, found);
    }
    if let Some((context, source)) = ep_context_file(node) {
        found.push(Reference::EpContext { graph: path.clone(), node: node_label(index, node), context, source });
    }
}

/// The external-data tensors inside one attribute (not inside its subgraphs: those are walked as
/// graphs).
fn attribute_references<'m>(
    attribute: &'m AttributeProto,
    holder: &dyn Fn() -> TensorHolder,
    found: &mut Vec<Reference<'m>>,
) {
    for tensor in attribute_tensors(attribute).filter(|tensor| is_external(tensor)) {
        found.push(Reference::Tensor { tensor, holder: holder() });
    }
}

/// Every tensor proto an attribute holds directly: `t`, `tensors`, and the values and indices of
/// `sparse_tensor` and `sparse_tensors`.
fn attribute_tensors(attribute: &AttributeProto) -> impl Iterator<Item = &TensorProto> {
    let sparse = attribute.sparse_tensor.iter().chain(attribute.sparse_tensors.iter());
    let sparse_parts = sparse.flat_map(|s| s.values.iter().chain(s.indices.iter()));
    attribute.t.iter().chain(attribute.tensors.iter()).chain(sparse_parts)
}

/// The same as [`attribute_tensors`], mutably.
fn attribute_tensors_mut(attribute: &mut AttributeProto) -> impl Iterator<Item = &mut TensorProto> {
    let sparse = attribute.sparse_tensor.iter_mut().chain(attribute.sparse_tensors.iter_mut());
    let sparse_parts = sparse.flat_map(|s| s.values.iter_mut().chain(s.indices.iter_mut()));
    attribute.t.iter_mut().chain(attribute.tensors.iter_mut()).chain(sparse_parts)
}

fn is_external(tensor: &TensorProto) -> bool {
    tensor.data_location == Some(DataLocation::External as i32)
}

/// The `external_data` key/value entries of a tensor (the first entry of a repeated key wins).
fn external_entries(tensor: &TensorProto) -> HashMap<&str, &str> {
    let mut entries = HashMap::new();
    for entry in &tensor.external_data {
        entries.entry(entry.key()).or_insert(entry.value());
    }
    entries
}

/// For an EPContext node whose context is a file (`embed_mode = 0`, and a main context, or any
/// node naming one): the path bytes and the `source` attribute.
fn ep_context_file(node: &NodeProto) -> Option<(&[u8], Option<String>)> {
    if node.op_type() != "EPContext" || node.domain() != "com.microsoft" {
        return None;
    }
    let attribute = |name: &str| node.attribute.iter().find(|a| a.name() == name);
    let embed_mode = attribute("embed_mode").map_or(1, |a| a.i());
    if embed_mode != 0 {
        return None;
    }
    // A node with main_context = 0 shares another node's context and may name no file.
    let context = attribute("ep_cache_context").and_then(|a| a.s.as_deref());
    let main_context = attribute("main_context").map_or(1, |a| a.i());
    let context = match context {
        Some(context) => context,
        None if main_context == 0 => return None,
        None => &[],
    };
    let source = attribute("source").and_then(|a| a.s.as_deref()).map(|s| String::from_utf8_lossy(s).into_owned());
    Some((context, source))
}

/// Calls `visit` on every file path the model refers to, mutably: each external tensor's
/// `location` value and each EPContext file's `ep_cache_context`, in the graphs and functions
/// [`references`] walks.
fn for_each_reference_mut(model: &mut Model, visit: &mut dyn FnMut(&mut String)) {
    let proto = model.proto_mut();
    if let Some(main) = proto.graph.as_mut() {
        graph_references_mut(main, visit);
    }
    for function in &mut proto.functions {
        for node in &mut function.node {
            node_references_mut(node, visit);
        }
    }
}

fn graph_references_mut(graph: &mut GraphProto, visit: &mut dyn FnMut(&mut String)) {
    let sparse = graph.sparse_initializer.iter_mut().flat_map(|s| s.values.iter_mut().chain(s.indices.iter_mut()));
    for tensor in graph.initializer.iter_mut().chain(sparse) {
        tensor_location_mut(tensor, visit);
    }
    for node in &mut graph.node {
        node_references_mut(node, visit);
    }
}

/// A node's references — tensors in its attributes, its EPContext file — and its subgraphs'.
fn node_references_mut(node: &mut NodeProto, visit: &mut dyn FnMut(&mut String)) {
    let has_context_file = ep_context_file(node).is_some();
    for attribute in &mut node.attribute {
        for tensor in attribute_tensors_mut(attribute) {
            tensor_location_mut(tensor, visit);
        }
        if has_context_file && attribute.name() == "ep_cache_context" {
            if let Some(bytes) = attribute.s.as_mut() {
                if let Ok(text) = std::str::from_utf8(bytes) {
                    let mut path = text.to_string();
                    visit(&mut path);
                    *bytes = path.into_bytes().into();
                }
            }
        }
        for subgraph in attribute.g.iter_mut().chain(attribute.graphs.iter_mut()) {
            graph_references_mut(subgraph, visit);
        }
    }
}

fn tensor_location_mut(tensor: &mut TensorProto, visit: &mut dyn FnMut(&mut String)) {
    if !is_external(tensor) {
        return;
    }
    if let Some(entry) = tensor.external_data.iter_mut().find(|entry| entry.key() == "location") {
        visit(entry.value.get_or_insert_with(String::new));
    }
}

/// Refuses an empty path, an absolute one (`/x`, `\x`, `C:\x`, `C:x`), and one that climbs out of
/// the model's folder (`../x`, `a/../../x`); `a/../b` stays inside and is fine.
fn check_path(path: &str, site: &str) -> Result<(), ExternalDataError> {
    if path.is_empty() {
        return Err(ExternalDataError::NoPath { site: site.to_string() });
    }
    let bytes = path.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if path.starts_with('/') || path.starts_with('\\') || drive {
        return Err(ExternalDataError::Absolute { site: site.to_string(), path: path.to_string() });
    }
    let mut depth: i64 = 0;
    for component in path.split(['/', '\\']) {
        match component {
            "" | "." => {}
            ".." => depth -= 1,
            _ => depth += 1,
        }
        if depth < 0 {
            return Err(ExternalDataError::OutsideModelFolder { site: site.to_string(), path: path.to_string() });
        }
    }
    Ok(())
}

fn parse_count(site: &str, key: &str, value: &str) -> Result<u64, ExternalDataError> {
    value.trim().parse::<u64>().map_err(|_| ExternalDataError::BadNumber {
        site: site.to_string(),
        key: key.to_string(),
        value: value.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_inside_the_model_folder() {
        for fine in ["w.bin", "data/w.bin", "./w.bin", "a/../b.bin", "a\\b.bin", "x..y"] {
            assert!(check_path(fine, "t").is_ok(), "{fine}");
        }
        for absolute in ["/etc/passwd", "\\\\server\\share\\w", "C:\\w.bin", "c:w.bin"] {
            assert!(matches!(check_path(absolute, "t"), Err(ExternalDataError::Absolute { .. })), "{absolute}");
        }
        for outside in ["../w.bin", "a/../../w.bin", "..", "a\\..\\..\\w"] {
            assert!(matches!(check_path(outside, "t"), Err(ExternalDataError::OutsideModelFolder { .. })), "{outside}");
        }
        assert!(matches!(check_path("", "t"), Err(ExternalDataError::NoPath { .. })));
    }
}
