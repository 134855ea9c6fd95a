//! One model nobody here wrote: PP-OCRv4 text detection as exported by paddle2onnx
//! (`npugate model fetch ppocrv4-det`, run by `scripts/setup`). Outside CI a missing file skips
//! with a message; under CI (`CI` set) it fails.

use std::path::PathBuf;

use npugate_onnx::proto::tensor_proto::DataType;
use npugate_onnx::{Dim, ElementType, Model, ValueKind, ValueSignature};

/// `$NPUGATE_CACHE/models/ch_PP-OCRv4_det_infer.onnx` (default cache `~/.cache/npugate`), if present.
fn ppocr_det() -> Option<PathBuf> {
    let cache = match std::env::var_os("NPUGATE_CACHE") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(std::env::var_os("HOME")?).join(".cache/npugate"),
    };
    let path = cache.join("models/ch_PP-OCRv4_det_infer.onnx");
    if path.is_file() {
        return Some(path);
    }
    let missing = format!("{} is missing: run `npugate model fetch ppocrv4-det` (scripts/setup does)", path.display());
    assert!(std::env::var_os("CI").is_none(), "{missing}");
    eprintln!("SKIPPED: {missing}");
    None
}

fn named(name: &str) -> Dim {
    Dim::Named(name.to_string())
}

#[test]
fn ppocr_det_reads_fixes_and_writes_back() {
    let Some(path) = ppocr_det() else { return };
    let original_bytes = std::fs::read(&path).unwrap();
    let model = Model::read(&path).unwrap();

    // paddle2onnx serializes canonically: re-encoding gives the file back byte for byte.
    assert!(model.to_bytes().unwrap() == original_bytes, "re-encoding {} changed its bytes", path.display());

    let x = ValueSignature {
        name: "x".into(),
        kind: ValueKind::Tensor,
        element_type: ElementType::of(DataType::Float),
        dims: Some(vec![
            named("p2o.DynamicDimension.0"),
            Dim::Fixed(3),
            named("p2o.DynamicDimension.1"),
            named("p2o.DynamicDimension.2"),
        ]),
    };
    let expected = vec![x];
    assert_eq!(model.input_signatures(), expected);
    assert_eq!(model.dynamic_inputs(), expected);
    assert_eq!(model.dynamic_shape_flags(), ["--shape x=Nx3xNxN"]);

    // Its weights are Constant nodes, not initializers; no subgraphs, no external data.
    let index = model.index();
    assert_eq!(index.nodes().len(), 672);
    assert_eq!(index.graphs().len(), 1);
    assert_eq!(index.nodes().iter().filter(|n| n.op_type() == "Constant").count(), 342);
    assert_eq!(index.nodes().iter().filter(|n| n.op_type() == "Conv").count(), 62);
    let first_conv = index.nodes().iter().find(|n| n.op_type() == "Conv").unwrap();
    assert_eq!(index.consumers(&first_conv.inputs()[0]).next().unwrap().name(), first_conv.name());
    let output = &model.proto().graph.as_ref().unwrap().output[0];
    assert!(index.producer(output.name()).is_some());
    let references = model.file_references().unwrap();
    assert!(references.tensors.is_empty() && references.ep_contexts.is_empty());

    // Fix to 1x3x640x640, write, read back: only the input's dims differ from the original.
    let mut fixed = model.clone();
    let report = fixed.fix_input_shapes(&[("x".to_string(), vec![1, 3, 640, 640])]).unwrap();
    assert!(report.still_dynamic.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("det_1x3x640x640.onnx");
    fixed.write(&out).unwrap();
    let reread = Model::read(&out).unwrap();
    assert_eq!(
        reread.input_signatures()[0].dims.as_deref().unwrap(),
        [Dim::Fixed(1), Dim::Fixed(3), Dim::Fixed(640), Dim::Fixed(640)]
    );
    assert!(reread.dynamic_shape_flags().is_empty());
    let mut expected = model.into_proto();
    expected.graph.as_mut().unwrap().input = reread.proto().graph.as_ref().unwrap().input.clone();
    assert!(&expected == reread.proto(), "something besides the input dims changed");
}
