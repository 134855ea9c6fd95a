//! Where the model ran: parses ONNX Runtime profiles (and QNN's profiling CSV), computes FLOPs from
//! shapes, joins them with the node→EP assignment and produces a [`report::PlacementReport`].

pub mod report;
