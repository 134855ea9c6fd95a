//! Fixture access and result-directory builders shared by the integration tests.
#![allow(dead_code)] // each test binary uses a subset

use std::path::{Path, PathBuf};

use npugate_profile::profile::Profile;
use npugate_profile::result_dir::read_profile;
use npugate_result::Assignment;

/// Path of a fixture file under `tests/fixtures`.
pub fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(relative)
}

/// A parsed fixture profile.
pub fn profile(relative: &str) -> Profile {
    read_profile(&fixture(relative)).unwrap()
}

/// A fixture assignment (`RunResult.assignment` format).
pub fn assignment(relative: &str) -> Assignment {
    serde_json::from_slice(&std::fs::read(fixture(relative)).unwrap()).unwrap()
}

/// Writes a minimal valid `result.json` for the given assignment into `dir`.
pub fn write_result_json(dir: &Path, preferred_ep: &str, assignment: &Assignment, input_shape: &[i64]) {
    let result = serde_json::json!({
        "schema": npugate_result::RUN_RESULT_SCHEMA,
        "status": "complete",
        "tool": {"name": "test", "version": "0", "target": "test"},
        "model": {"path": "m.onnx", "sha256": "abc", "bytes": 1,
                  "inputs": [{"name": "input", "element_type": "float32", "shape": input_shape, "dim_names": []}],
                  "outputs": []},
        "runtime": {"ort_version": "1.31.1", "ort_build_info": "", "libraries": []},
        "execution": {"requested_ep": "cpu", "preferred_ep": preferred_ep, "attach": "cpu", "ep_options": {},
                      "session_config": {}, "optimization_level": "all", "intra_op_threads": 0},
        "settings": {"warmup": 0, "runs": 0, "profile_runs": 3, "reference_pass": true, "seed": 42},
        "inputs": [{"name": "input", "element_type": "float32", "shape": input_shape, "source": "random", "sha256": ""}],
        "timings": {"ort_init_ns": 0, "ep_register_ns": 0, "session_create_ns": 0, "first_inference_ns": 0,
                    "latencies_ns": [], "loop_wall_ns": 0, "profiled_pass_ns": 0, "reference_pass_ns": 0},
        "assignment": assignment,
        "artifacts": {"ort_log": "ort.log"},
        "fingerprint": {"logical_cores": 1, "memory_bytes": 1, "arch": "x86_64"},
    });
    std::fs::write(dir.join("result.json"), serde_json::to_vec(&result).unwrap()).unwrap();
}
