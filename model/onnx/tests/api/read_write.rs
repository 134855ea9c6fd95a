//! Reading (every failure a clear error naming the file), writing (atomic, deterministic),
//! metadata.

use bytes::Bytes;
use npugate_onnx::{Model, ReadError, MAX_PROTOBUF_BYTES};

use crate::support::*;

#[test]
fn a_model_round_trips_through_a_file_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("relu.onnx");
    let model = relu_model(&["batch", "3", "?", ""]);
    model.write(&path).unwrap();
    let read = Model::read(&path).unwrap();
    assert_eq!(read, model);
    let again = dir.path().join("again.onnx");
    read.write(&again).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(&again).unwrap());
    assert_eq!(read.to_bytes().unwrap(), std::fs::read(&path).unwrap());
    // The atomic write leaves no temporary file behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn tensor_bytes_are_slices_of_the_buffer_read() {
    let mut proto = model_proto(graph("g", vec![], vec![], vec![]));
    proto.graph.as_mut().unwrap().initializer.push(initializer("w", &[256]));
    let bytes = Bytes::from(prost::Message::encode_to_vec(&proto));
    let model = Model::from_bytes(bytes.clone()).unwrap();
    let raw = model.proto().graph.as_ref().unwrap().initializer[0].raw_data.as_ref().unwrap();
    let buffer = bytes.as_ptr_range();
    assert_eq!(raw.len(), 1024);
    assert!(buffer.contains(&raw.as_ptr()), "raw_data was copied out of the buffer");
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let error = Model::read("/nonexistent/model.onnx").unwrap_err();
    assert!(matches!(error, ReadError::Io { .. }));
    assert!(error.to_string().contains("/nonexistent/model.onnx"), "{error}");
}

#[test]
fn a_truncated_model_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.onnx");
    let bytes = relu_model(&["1", "3"]).to_bytes().unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
    let error = Model::read(&path).unwrap_err();
    assert!(matches!(error, ReadError::Decode { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("cut.onnx") && message.contains("truncated or corrupt"), "{message}");
}

#[test]
fn text_is_not_a_model() {
    let error = Model::from_bytes(&b"{\"not\": \"onnx\"}"[..]).unwrap_err();
    assert!(matches!(error, ReadError::Decode { .. }), "{error:?}");
    assert!(error.to_string().contains("<memory>"), "{error}");
}

#[test]
fn an_empty_file_decodes_but_is_not_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.onnx");
    std::fs::write(&path, b"").unwrap();
    let error = Model::read(&path).unwrap_err();
    assert!(matches!(error, ReadError::NoGraph { .. }), "{error:?}");
    assert!(error.to_string().contains("empty.onnx") && error.to_string().contains("no graph"), "{error}");
}

#[test]
fn a_file_over_2_gib_is_refused_before_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.onnx");
    // Sparse: takes no disk space, and is never read.
    std::fs::File::create(&path).unwrap().set_len(MAX_PROTOBUF_BYTES + 1).unwrap();
    let error = Model::read(&path).unwrap_err();
    assert!(matches!(error, ReadError::TooLarge { bytes, .. } if bytes == MAX_PROTOBUF_BYTES + 1), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("huge.onnx") && message.contains("2 GiB") && message.contains("external data"),
        "{message}"
    );
}

#[test]
fn writing_into_a_missing_folder_names_the_file() {
    let error = relu_model(&["1"]).write("/nonexistent/dir/out.onnx").unwrap_err();
    assert!(error.to_string().contains("/nonexistent/dir/out.onnx"), "{error}");
}

#[test]
fn metadata_is_read_set_and_replaced_in_place() {
    let mut model = relu_model(&["1"]);
    assert_eq!(model.metadata("npugate.compiled_for"), None);
    model.set_metadata("author", "someone");
    model.set_metadata("npugate.compiled_for", "SM8650");
    model.set_metadata("npugate.compiled_for", "SM8750");
    assert_eq!(model.metadata("npugate.compiled_for"), Some("SM8750"));
    let entries: Vec<(&str, &str)> = model.metadata_entries().collect();
    assert_eq!(entries, [("author", "someone"), ("npugate.compiled_for", "SM8750")]);

    // A file with a duplicated key: setting keeps the first position and drops the rest.
    let mut proto = model.clone().into_proto();
    proto
        .metadata_props
        .push(npugate_onnx::proto::StringStringEntryProto { key: Some("author".into()), value: Some("dup".into()) });
    let mut model = Model::from(proto);
    model.set_metadata("author", "one");
    let entries: Vec<(&str, &str)> = model.metadata_entries().collect();
    assert_eq!(entries, [("author", "one"), ("npugate.compiled_for", "SM8750")]);

    let back = Model::from_bytes(model.to_bytes().unwrap()).unwrap();
    assert_eq!(back.metadata("author"), Some("one"));
}

#[test]
fn subgraphs_nested_past_the_decoder_limit_are_an_error_not_a_stack_overflow() {
    let nest = |depth: usize| {
        let mut inner = graph("leaf", vec![node("Relu", "leaf", &["a"], &["b"])], vec![], vec![]);
        for level in 0..depth {
            let mut iff = node("If", &format!("if{level}"), &["c"], &["d"]);
            iff.attribute = vec![graph_attribute("then_branch", inner)];
            inner = graph("g", vec![iff], vec![], vec![]);
        }
        prost::Message::encode_to_vec(&model_proto(inner))
    };
    // Each level is three messages deep (graph, node, attribute); prost stops at 100.
    let shallow = Model::from_bytes(nest(30)).unwrap();
    assert_eq!(shallow.index().graphs().len(), 31);
    let error = Model::from_bytes(nest(40)).unwrap_err();
    assert!(matches!(error, ReadError::Decode { .. }), "{error:?}");
    assert!(error.to_string().contains("recursion limit"), "{error}");
}
