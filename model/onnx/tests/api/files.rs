//! External-data tensors and EPContext context files: found everywhere, paths checked, rewritten.

use npugate_onnx::{ExternalDataError, GraphPath, LocateError, Model, TensorHolder};

use crate::support::*;

#[test]
fn external_tensors_are_found_everywhere_with_offset_and_length() {
    let references = model_with_files().file_references().unwrap();
    let found: Vec<(String, String, &str, u64, Option<u64>)> = references
        .tensors
        .iter()
        .map(|t| (t.name.clone(), t.holder.to_string(), t.location.as_str(), t.offset, t.length))
        .collect();
    let expected = [
        ("w", "initializer in main", "weights.bin", 0, Some(4096)),
        ("sparse_w", "sparse initializer in main", "sparse.bin", 0, None),
        ("", "attribute \"value\" of node \"const\" in main", "weights.bin", 4096, None),
        ("table", "attribute \"tables\" of node \"list\" in main", "weights.bin", 8192, Some(16)),
        (
            "branch_w",
            "attribute \"value\" of node \"branch_const\" in main > if.then_branch",
            "sub/branch.bin",
            0,
            None,
        ),
        ("function_w", "attribute \"value\" of node \"Constant#0\" in function local:MyFn", "function.bin", 0, None),
        (
            "fn_branch_w",
            "attribute \"value\" of node \"fn_branch_const\" in function local:MyFn > fn_if.then_branch",
            "function.bin",
            64,
            None,
        ),
    ];
    let expected: Vec<(String, String, &str, u64, Option<u64>)> =
        expected.iter().map(|&(n, h, l, o, len)| (n.to_string(), h.to_string(), l, o, len)).collect();
    assert_eq!(found, expected);
    assert_eq!(
        references.tensors[4].holder,
        TensorHolder::Attribute {
            graph: GraphPath {
                function: None,
                steps: vec![npugate_onnx::SubgraphStep {
                    node: "if".into(),
                    attribute: "then_branch".into(),
                    index: None
                }]
            },
            node: "branch_const".into(),
            attribute: "value".into(),
        }
    );

    assert_eq!(references.ep_contexts.len(), 1, "embedded and shared contexts name no file");
    let context = &references.ep_contexts[0];
    assert_eq!(
        (context.node.as_str(), context.path.as_str(), context.source.as_deref()),
        ("qnn_ctx", "model_qnn.bin", Some("QNN"))
    );
    assert!(context.graph.is_main());

    let files: Vec<&str> = references.files().into_iter().collect();
    assert_eq!(files, ["function.bin", "model_qnn.bin", "sparse.bin", "sub/branch.bin", "weights.bin"]);
}

#[test]
fn a_model_without_external_data_refers_to_no_file() {
    let references = relu_model(&["1"]).file_references().unwrap();
    assert!(references.tensors.is_empty() && references.ep_contexts.is_empty());
}

fn with_initializer_location(location: &str) -> Model {
    let mut main = graph("main", vec![], vec![], vec![]);
    main.initializer.push(external_tensor("conv.weight", location, None, None));
    model(main)
}

#[test]
fn an_absolute_location_is_refused_naming_the_tensor_and_path() {
    let error = with_initializer_location("/data/weights.bin").file_references().unwrap_err();
    assert!(matches!(error, ExternalDataError::Absolute { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "tensor \"conv.weight\" (initializer in main) refers to the absolute path \"/data/weights.bin\"; ONNX allows \
         only paths relative to the model's folder: re-save the model with a relative location"
    );
}

#[test]
fn a_location_climbing_out_of_the_model_folder_is_refused() {
    let error = with_initializer_location("../x").file_references().unwrap_err();
    assert!(matches!(error, ExternalDataError::OutsideModelFolder { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("\"conv.weight\"") && message.contains("\"../x\"") && message.contains("climbs out"),
        "{message}"
    );
}

#[test]
fn an_ep_context_path_climbing_out_is_refused_naming_the_node() {
    let mut context = node("EPContext", "ctx", &[], &[]);
    context.domain = Some("com.microsoft".into());
    context.attribute = vec![int_attribute("embed_mode", 0), string_attribute("ep_cache_context", "../../etc/ctx.bin")];
    let error = model(graph("m", vec![context], vec![], vec![])).file_references().unwrap_err();
    assert!(error.to_string().starts_with("EPContext node \"ctx\" in main refers to \"../../etc/ctx.bin\""), "{error}");
}

#[test]
fn a_main_context_without_a_path_is_refused() {
    let mut context = node("EPContext", "ctx", &[], &[]);
    context.domain = Some("com.microsoft".into());
    context.attribute = vec![int_attribute("embed_mode", 0)];
    let error = model(graph("m", vec![context], vec![], vec![])).file_references().unwrap_err();
    assert!(matches!(error, ExternalDataError::NoPath { .. }), "{error:?}");
}

#[test]
fn a_non_utf8_context_path_is_refused() {
    let mut context = node("EPContext", "ctx", &[], &[]);
    context.domain = Some("com.microsoft".into());
    let mut path = string_attribute("ep_cache_context", "");
    path.s = Some(vec![0xff, 0xfe].into());
    context.attribute = vec![int_attribute("embed_mode", 0), path];
    let error = model(graph("m", vec![context], vec![], vec![])).file_references().unwrap_err();
    assert!(matches!(error, ExternalDataError::NotUtf8 { .. }), "{error:?}");
}

#[test]
fn missing_location_and_bad_numbers_are_refused() {
    let mut main = graph("main", vec![], vec![], vec![]);
    let mut tensor = external_tensor("w", "x.bin", None, None);
    tensor.external_data.clear();
    main.initializer.push(tensor);
    let error = model(main).file_references().unwrap_err();
    assert!(matches!(error, ExternalDataError::NoPath { .. }), "{error:?}");
    assert!(error.to_string().contains("\"w\""), "{error}");

    let mut main = graph("main", vec![], vec![], vec![]);
    main.initializer.push(external_tensor("w", "x.bin", Some("-5"), None));
    let error = model(main).file_references().unwrap_err();
    assert_eq!(
        error,
        ExternalDataError::BadNumber {
            site: "tensor \"w\" (initializer in main)".into(),
            key: "offset".into(),
            value: "-5".into()
        }
    );
}

#[test]
fn file_references_are_rewritten_everywhere() {
    let mut model = model_with_files();
    let changed = model
        .rewrite_file_references(|path| (path != "sparse.bin").then(|| format!("fixed/{}", path.replace('/', "_"))))
        .unwrap();
    assert_eq!(changed, 7, "3 × weights.bin, sub/branch.bin, 2 × function.bin, model_qnn.bin; sparse.bin kept");
    let references = model.file_references().unwrap();
    let files: Vec<&str> = references.files().into_iter().collect();
    assert_eq!(
        files,
        ["fixed/function.bin", "fixed/model_qnn.bin", "fixed/sub_branch.bin", "fixed/weights.bin", "sparse.bin"]
    );
    // Offsets, lengths and everything else stay.
    assert_eq!(references.tensors[3].offset, 8192);
    assert_eq!(references.tensors[3].length, Some(16));
}

#[test]
fn a_rewrite_to_a_bad_path_changes_nothing() {
    let mut model = model_with_files();
    let before = model.clone();
    let error = model
        .rewrite_file_references(|path| (path == "model_qnn.bin").then(|| "/abs/ctx.bin".to_string()))
        .unwrap_err();
    assert!(error.to_string().contains("qnn_ctx") && error.to_string().contains("/abs/ctx.bin"), "{error}");
    assert_eq!(model, before);
}

#[test]
fn a_rewrite_can_repair_a_bad_path() {
    let mut model = with_initializer_location("../shared/w.bin");
    assert_eq!(model.rewrite_file_references(|_| Some("w.bin".into())).unwrap(), 1);
    assert_eq!(model.file_references().unwrap().tensors[0].location, "w.bin");
}

/// `model_with_files()`'s files in a fresh folder, each `size` bytes long.
fn folder_with_files(size: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["function.bin", "model_qnn.bin", "sparse.bin", "sub/branch.bin", "weights.bin"] {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, vec![0u8; size]).unwrap();
    }
    dir
}

#[test]
fn referenced_files_are_located_with_their_sizes() {
    let dir = folder_with_files(9000);
    let located = model_with_files().locate_files(dir.path()).unwrap();
    let names: Vec<(&str, u64)> = located.iter().map(|f| (f.name.as_str(), f.bytes)).collect();
    assert_eq!(
        names,
        [
            ("function.bin", 9000),
            ("model_qnn.bin", 9000),
            ("sparse.bin", 9000),
            ("sub/branch.bin", 9000),
            ("weights.bin", 9000)
        ]
    );
    assert_eq!(located[3].path, dir.path().join("sub/branch.bin"));
    assert!(relu_model(&["1"]).locate_files(std::path::Path::new("/nonexistent")).unwrap().is_empty());
}

#[test]
fn a_missing_or_short_file_is_named_with_its_tensor() {
    let dir = folder_with_files(9000);
    std::fs::remove_file(dir.path().join("sparse.bin")).unwrap();
    let error = model_with_files().locate_files(dir.path()).unwrap_err();
    assert!(matches!(error, LocateError::Missing { .. }), "{error:?}");
    assert!(error.to_string().contains("\"sparse_w\"") && error.to_string().contains("sparse.bin"), "{error}");

    // `table` reads 8192..8208 of weights.bin.
    let dir = folder_with_files(8200);
    let error = model_with_files().locate_files(dir.path()).unwrap_err();
    assert!(matches!(error, LocateError::Short { end: 8208, bytes: 8200, .. }), "{error:?}");
    assert!(error.to_string().contains("\"table\""), "{error}");
}

#[test]
fn a_symlink_out_of_the_model_folder_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), vec![0u8; 9000]).unwrap();
    let dir = folder_with_files(9000);
    std::fs::remove_file(dir.path().join("weights.bin")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("weights.bin")).unwrap();
    let error = model_with_files().locate_files(dir.path()).unwrap_err();
    assert!(matches!(error, LocateError::Outside { .. }), "{error:?}");
    assert!(error.to_string().contains("outside the model's folder"), "{error}");

    // A symlink that stays inside is fine.
    let dir = folder_with_files(9000);
    std::fs::rename(dir.path().join("weights.bin"), dir.path().join("real.bin")).unwrap();
    std::os::unix::fs::symlink("real.bin", dir.path().join("weights.bin")).unwrap();
    assert_eq!(model_with_files().locate_files(dir.path()).unwrap().len(), 5);
}

#[test]
fn a_traversal_is_refused_before_any_file_is_touched() {
    let error = with_initializer_location("../../etc/passwd").locate_files(std::path::Path::new("/tmp")).unwrap_err();
    assert!(matches!(error, LocateError::Reference(ExternalDataError::OutsideModelFolder { .. })), "{error:?}");
}
