//! The public API on models built in the tests (no Python, no downloads).

mod support;

#[path = "api/files.rs"]
mod files;
#[path = "api/genai.rs"]
mod genai;
#[path = "api/graph.rs"]
mod graph;
#[path = "api/outputs.rs"]
mod outputs;
#[path = "api/read_write.rs"]
mod read_write;
#[path = "api/shapes.rs"]
mod shapes;
