//! Walking the graph and its subgraphs (`If`/`Loop`/`Scan` bodies and any other graph-valued
//! attribute, recursively), and looking nodes and values up by name.

use std::collections::HashMap;
use std::fmt;

use crate::model::Model;
use crate::proto::{AttributeProto, GraphProto, NodeProto};
use crate::value::{ValueKind, ValueSignature};

/// Where a graph sits: the main graph (or a model-local function's body), then graph-valued
/// attributes of nodes, recursively.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct GraphPath {
    /// `None` for the main graph and its subgraphs; `domain:name` of a model-local function for
    /// its body and their subgraphs.
    pub function: Option<String>,
    /// The attributes leading from the root to this graph; empty for the root itself.
    pub steps: Vec<SubgraphStep>,
}

/// One step into a subgraph: a node's graph-valued attribute.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubgraphStep {
    /// The node's name, or `<op_type>#<index in its graph>` when it has none.
    pub node: String,
    /// The attribute (`then_branch`, `else_branch`, `body`, …).
    pub attribute: String,
    /// The position in a graph-list attribute (`graphs`); `None` for a single graph (`g`).
    pub index: Option<usize>,
}

impl GraphPath {
    /// True for the main graph.
    pub fn is_main(&self) -> bool {
        self.function.is_none() && self.steps.is_empty()
    }

    /// The body of model-local function `domain:name`.
    pub(crate) fn function(domain: &str, name: &str) -> GraphPath {
        GraphPath { function: Some(format!("{domain}:{name}")), steps: Vec::new() }
    }

    /// The path of a subgraph of this graph.
    pub(crate) fn child(
        &self,
        node_index: usize,
        node: &NodeProto,
        attribute: &AttributeProto,
        index: Option<usize>,
    ) -> GraphPath {
        let mut steps = self.steps.clone();
        steps.push(SubgraphStep { node: node_label(node_index, node), attribute: attribute.name().to_string(), index });
        GraphPath { function: self.function.clone(), steps }
    }
}

impl fmt::Display for GraphPath {
    /// `main`, `main > loop_0.body`, `main > loop_0.body > if_3.then_branch`, `main > beam.graphs[1]`,
    /// `function local:MyFn > if_0.then_branch`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.function {
            Some(function) => write!(f, "function {function}")?,
            None => f.write_str("main")?,
        }
        for step in &self.steps {
            write!(f, " > {}.{}", step.node, step.attribute)?;
            if let Some(index) = step.index {
                write!(f, "[{index}]")?;
            }
        }
        Ok(())
    }
}

/// How paths and errors name a node: its name, or `<op_type>#<index in its graph>` without one.
pub(crate) fn node_label(index: usize, node: &NodeProto) -> String {
    if node.name().is_empty() {
        format!("{}#{index}", node.op_type())
    } else {
        node.name().to_string()
    }
}

/// The subgraphs of one node: each graph-valued attribute (`g`, and every entry of `graphs`).
pub(crate) fn subgraphs(node: &NodeProto) -> impl Iterator<Item = (&AttributeProto, Option<usize>, &GraphProto)> {
    node.attribute.iter().flat_map(|attribute| {
        let single = attribute.g.iter().map(move |g| (attribute, None, g));
        let list = attribute.graphs.iter().enumerate().map(move |(i, g)| (attribute, Some(i), g));
        single.chain(list)
    })
}

/// Calls `visit` for `graph` and every subgraph in it, depth first: a graph, then for each node
/// in order its subgraphs (with theirs). Recursion is bounded: decoding refuses nesting deeper
/// than prost's recursion limit.
pub(crate) fn walk_graphs<'m>(
    graph: &'m GraphProto,
    path: &GraphPath,
    visit: &mut dyn FnMut(&GraphPath, &'m GraphProto),
) {
    visit(path, graph);
    for (index, node) in graph.node.iter().enumerate() {
        for (attribute, position, subgraph) in subgraphs(node) {
            walk_graphs(subgraph, &path.child(index, node, attribute, position), visit);
        }
    }
}

/// Identifies a graph within a [`ModelIndex`] ([`GraphId::MAIN`] for the main graph).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GraphId(pub usize);

impl GraphId {
    /// The main graph.
    pub const MAIN: GraphId = GraphId(0);
}

/// One graph of the model: the main graph or a subgraph.
#[derive(Debug, Clone)]
pub struct GraphInfo<'m> {
    /// Where it sits.
    pub path: GraphPath,
    /// The graph itself.
    pub proto: &'m GraphProto,
}

impl<'m> GraphInfo<'m> {
    /// Its inputs as declared (for a subgraph: the body's formal inputs).
    pub fn inputs(&self) -> Vec<ValueSignature> {
        self.proto.input.iter().map(ValueSignature::from_value_info).collect()
    }

    /// Its outputs as declared.
    pub fn outputs(&self) -> Vec<ValueSignature> {
        self.proto.output.iter().map(ValueSignature::from_value_info).collect()
    }

    /// Its initializers, dense then sparse.
    pub fn initializers(&self) -> Vec<ValueSignature> {
        let dense = self.proto.initializer.iter().map(ValueSignature::from_tensor);
        dense.chain(self.proto.sparse_initializer.iter().map(ValueSignature::from_sparse_tensor)).collect()
    }

    /// Its `value_info` entries: the shapes of intermediate values an exporter or shape inference
    /// recorded.
    pub fn value_info(&self) -> Vec<ValueSignature> {
        self.proto.value_info.iter().map(ValueSignature::from_value_info).collect()
    }
}

/// One node, borrowed from the model.
#[derive(Debug, Clone, Copy)]
pub struct NodeInfo<'m> {
    /// The graph it belongs to.
    pub graph: GraphId,
    /// Its position in that graph's node list.
    pub index: usize,
    /// The node itself (attributes and all).
    pub proto: &'m NodeProto,
}

impl<'m> NodeInfo<'m> {
    /// Its name (may be empty: ONNX does not require one).
    pub fn name(&self) -> &'m str {
        self.proto.name()
    }

    /// Its operator (`Conv`, `If`, `EPContext`, …).
    pub fn op_type(&self) -> &'m str {
        self.proto.op_type()
    }

    /// Its operator domain; empty means the default domain `ai.onnx`.
    pub fn domain(&self) -> &'m str {
        self.proto.domain()
    }

    /// Its input value names; an empty name is an omitted optional input.
    pub fn inputs(&self) -> &'m [String] {
        &self.proto.input
    }

    /// Its output value names; an empty name is an omitted optional output.
    pub fn outputs(&self) -> &'m [String] {
        &self.proto.output
    }

    /// Whether it is a compiled partition: an `EPContext` node (what an EP's AOT compile, e.g.
    /// QNN's context binary, leaves in the graph).
    pub fn is_ep_context(&self) -> bool {
        self.op_type() == "EPContext"
    }
}

/// Where a value is declared in a graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueRole {
    /// A graph input.
    Input,
    /// A graph output.
    Output,
    /// A `value_info` entry.
    ValueInfo,
    /// A dense initializer.
    Initializer,
    /// A sparse initializer.
    SparseInitializer,
}

/// One declaration of a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueDecl {
    /// The graph declaring it.
    pub graph: GraphId,
    /// As what.
    pub role: ValueRole,
    /// What it declares.
    pub signature: ValueSignature,
}

/// Every graph and node of a model in walk order (depth first: a node's subgraphs right after it),
/// with lookups by name that cost one hash probe. Built once by [`Model::index`]; it borrows the
/// model, so it can never be stale.
///
/// Model-local functions (`ModelProto.functions`) are templates that ONNX Runtime inlines under
/// new names and are not listed; neither are training graphs (`training_info`).
#[derive(Debug)]
pub struct ModelIndex<'m> {
    graphs: Vec<GraphInfo<'m>>,
    nodes: Vec<NodeInfo<'m>>,
    nodes_by_name: HashMap<&'m str, Vec<usize>>,
    producers: HashMap<&'m str, usize>,
    consumers: HashMap<&'m str, Vec<usize>>,
    values: HashMap<&'m str, Vec<ValueDecl>>,
}

impl<'m> ModelIndex<'m> {
    fn build(model: &'m Model) -> ModelIndex<'m> {
        let mut index = ModelIndex {
            graphs: Vec::new(),
            nodes: Vec::new(),
            nodes_by_name: HashMap::new(),
            producers: HashMap::new(),
            consumers: HashMap::new(),
            values: HashMap::new(),
        };
        if let Some(main) = model.proto().graph.as_ref() {
            index.add_graph(GraphPath::default(), main);
        }
        index
    }

    /// Adds a graph, then each of its nodes followed by that node's subgraphs (recursion bounded
    /// as in [`walk_graphs`]).
    fn add_graph(&mut self, path: GraphPath, graph: &'m GraphProto) {
        let id = GraphId(self.graphs.len());
        self.graphs.push(GraphInfo { path: path.clone(), proto: graph });
        self.declare_values(id, graph);
        for (index, node) in graph.node.iter().enumerate() {
            let position = self.nodes.len();
            self.nodes.push(NodeInfo { graph: id, index, proto: node });
            if !node.name().is_empty() {
                self.nodes_by_name.entry(node.name()).or_default().push(position);
            }
            for output in node.output.iter().filter(|o| !o.is_empty()) {
                self.producers.entry(output.as_str()).or_insert(position);
            }
            for input in node.input.iter().filter(|i| !i.is_empty()) {
                self.consumers.entry(input.as_str()).or_default().push(position);
            }
            for (attribute, position, subgraph) in subgraphs(node) {
                self.add_graph(path.child(index, node, attribute, position), subgraph);
            }
        }
    }

    fn declare_values(&mut self, id: GraphId, graph: &'m GraphProto) {
        let mut declare = |name: &'m str, role, signature| {
            self.values.entry(name).or_default().push(ValueDecl { graph: id, role, signature });
        };
        for input in &graph.input {
            declare(input.name(), ValueRole::Input, ValueSignature::from_value_info(input));
        }
        for output in &graph.output {
            declare(output.name(), ValueRole::Output, ValueSignature::from_value_info(output));
        }
        for info in &graph.value_info {
            declare(info.name(), ValueRole::ValueInfo, ValueSignature::from_value_info(info));
        }
        for tensor in &graph.initializer {
            declare(tensor.name(), ValueRole::Initializer, ValueSignature::from_tensor(tensor));
        }
        for sparse in &graph.sparse_initializer {
            let name = sparse.values.as_ref().map(|v| v.name()).unwrap_or_default();
            declare(name, ValueRole::SparseInitializer, ValueSignature::from_sparse_tensor(sparse));
        }
    }

    /// Every graph: the main graph first ([`GraphId::MAIN`]), then subgraphs depth first.
    pub fn graphs(&self) -> &[GraphInfo<'m>] {
        &self.graphs
    }

    /// The graph with id `id`.
    pub fn graph(&self, id: GraphId) -> Option<&GraphInfo<'m>> {
        self.graphs.get(id.0)
    }

    /// Every node of every graph, in walk order.
    pub fn nodes(&self) -> &[NodeInfo<'m>] {
        &self.nodes
    }

    /// The first node named `name` in walk order (names are unique in a valid model).
    pub fn node(&self, name: &str) -> Option<&NodeInfo<'m>> {
        self.nodes_named(name).next()
    }

    /// Every node named `name`, in walk order.
    pub fn nodes_named<'s>(&'s self, name: &str) -> impl Iterator<Item = &'s NodeInfo<'m>> {
        self.positions(&self.nodes_by_name, name)
    }

    /// The node that outputs value `name`, in any graph.
    pub fn producer(&self, name: &str) -> Option<&NodeInfo<'m>> {
        self.producers.get(name).map(|&position| &self.nodes[position])
    }

    /// Every node that reads value `name`, in any graph, in walk order.
    pub fn consumers<'s>(&'s self, name: &str) -> impl Iterator<Item = &'s NodeInfo<'m>> {
        self.positions(&self.consumers, name)
    }

    /// Every declaration of value `name` (input, output, `value_info`, initializer), graph by graph.
    pub fn value_decls(&self, name: &str) -> &[ValueDecl] {
        self.values.get(name).map(Vec::as_slice).unwrap_or_default()
    }

    /// What is known of value `name`: of its declarations, the one that says most (a type over
    /// none, a shape over none, more fixed dims over fewer).
    pub fn signature(&self, name: &str) -> Option<&ValueSignature> {
        let informative = |s: &ValueSignature| {
            let fixed = s.dims.as_ref().map_or(0, |dims| dims.iter().filter(|d| d.fixed().is_some()).count());
            (s.kind != ValueKind::Untyped, s.dims.is_some(), fixed)
        };
        // `max_by_key` keeps the last of equals; reversing keeps the first declaration instead.
        self.value_decls(name).iter().rev().map(|decl| &decl.signature).max_by_key(|s| informative(s))
    }

    /// The main-graph nodes that compute `outputs` from `inputs`: walking back from each output
    /// through the nodes that produce it, stopping at `inputs` (and at graph inputs and
    /// initializers, which no node produces). This is the part of a source model that one compiled
    /// node (an `EPContext` node with these inputs and outputs) replaced. In graph order.
    pub fn nodes_between(&self, inputs: &[&str], outputs: &[&str]) -> Vec<&NodeInfo<'m>> {
        let mut taken: Vec<usize> = Vec::new();
        let mut pending: Vec<&str> = outputs.to_vec();
        let mut seen: std::collections::HashSet<&str> = inputs.iter().copied().collect();
        while let Some(value) = pending.pop() {
            if !seen.insert(value) {
                continue;
            }
            let Some(&position) = self.producers.get(value) else { continue };
            let node = &self.nodes[position];
            if node.graph != GraphId::MAIN || taken.contains(&position) {
                continue;
            }
            taken.push(position);
            pending.extend(node.proto.input.iter().map(String::as_str).filter(|i| !i.is_empty()));
        }
        taken.sort_unstable();
        taken.into_iter().map(|position| &self.nodes[position]).collect()
    }

    fn positions<'s>(
        &'s self,
        map: &'s HashMap<&'m str, Vec<usize>>,
        name: &str,
    ) -> impl Iterator<Item = &'s NodeInfo<'m>> {
        map.get(name).into_iter().flatten().map(|&position| &self.nodes[position])
    }
}

impl Model {
    /// The index of every graph and node, for lookups by name.
    pub fn index(&self) -> ModelIndex<'_> {
        ModelIndex::build(self)
    }
}
