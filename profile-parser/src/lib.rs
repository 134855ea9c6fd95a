//! Where the model ran: parses ONNX Runtime profiles (and QNN's profiling CSV), computes FLOPs from
//! shapes, joins them with the node→EP assignment and produces a [`report::PlacementReport`].
//!
//! Entry point: [`analyze_result_dir`]; lower-level pieces: [`profile::parse_profile`],
//! [`flops::node_flops`], [`placement::build_report`].

pub mod causes;
pub mod coverage;
pub mod event_stream;
pub mod flops;
pub mod graphs;
pub mod hints;
pub mod ort_log;
pub mod placement;
pub mod profile;
pub mod qnn_csv;
pub mod qnn_ops;
pub mod report;
pub mod result_dir;
pub mod shape;

pub use result_dir::{analyze_result_dir, analyze_run, AnalyzeError};
