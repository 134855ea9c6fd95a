//! The committed Rust types (`src/generated/onnx.rs`) are exactly what `prost-build` makes of the
//! vendored schema (`proto/onnx-ml.proto`), and the schema is the file `proto/PROVENANCE.md` names.
//!
//! After changing the schema or bumping `prost-build`, regenerate with
//! `NPUGATE_REGENERATE_PROTO=1 cargo test -p npugate-onnx --test generated_code`.

use std::path::Path;

use sha2::{Digest, Sha256};

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// What `prost-build` generates from the vendored schema, compiled by `protox` (no `protoc`).
fn generate() -> String {
    let proto_dir = crate_dir().join("proto");
    let descriptors = protox::compile(["onnx-ml.proto"], [&proto_dir]).expect("the vendored schema compiles");
    let out = tempfile::tempdir().unwrap();
    prost_build::Config::new()
        .bytes(["."])
        .out_dir(out.path())
        .compile_fds(descriptors)
        .expect("prost-build generates the types");
    std::fs::read_to_string(out.path().join("onnx.rs")).unwrap()
}

#[test]
fn committed_types_match_the_vendored_schema() {
    let committed_path = crate_dir().join("src/generated/onnx.rs");
    let generated = generate();
    if std::env::var_os("NPUGATE_REGENERATE_PROTO").is_some() {
        std::fs::write(&committed_path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is not what prost-build generates from proto/onnx-ml.proto; regenerate with \
         NPUGATE_REGENERATE_PROTO=1 cargo test -p npugate-onnx --test generated_code",
        committed_path.display()
    );
}

#[test]
fn vendored_schema_is_the_one_provenance_names() {
    let schema = std::fs::read(crate_dir().join("proto/onnx-ml.proto")).unwrap();
    let digest: String = Sha256::digest(&schema).iter().map(|b| format!("{b:02x}")).collect();
    let provenance = std::fs::read_to_string(crate_dir().join("proto/PROVENANCE.md")).unwrap();
    assert!(provenance.contains(&digest), "proto/PROVENANCE.md does not record sha256 {digest} of proto/onnx-ml.proto");
}
