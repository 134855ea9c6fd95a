//! A loopback stand-in for Qualcomm AI Hub (`scripts/aihub_standin.py`, built from the real
//! `qai-hub` package's messages) with the official client configured against it by its own
//! `qai-hub configure`: what the AI Hub tests run the official client and npugate against. Nothing
//! leaves 127.0.0.1.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

use crate::{cache_dir, describe, python, run};

/// The token the stand-in accepts.
pub const TOKEN: &str = "standin-token";

/// A running stand-in, its record and the client's file `qai-hub configure` wrote for it.
pub struct StandIn {
    child: Child,
    /// Its API URL (`http://127.0.0.1:PORT`).
    pub url: String,
    /// Where it records what it received.
    pub record: PathBuf,
    /// The official client's file for it (`QAIHUB_CLIENT_INI`).
    pub client_ini: PathBuf,
    /// npugate's cache for the tests' commands: the real runtimes, a fresh upload cache.
    pub cache: PathBuf,
    dir: PathBuf,
}

/// The devices of the scripted scenario: the S24 runs the Det on the CPU with a bimodal series,
/// the S25 runs everything on the NPU with a tight one, the QCS6490 fails out of memory, and a
/// Windows laptop has no ONNX framework.
pub fn scenario() -> Value {
    let layers = |det_unit: &str| {
        json!([
            ["conv", "Conv", "NPU"],
            ["relu", "Relu", "NPU"],
            ["to_matrices", "Reshape", "NPU"],
            ["det", "Det", det_unit],
            ["graph_output_cast", "Cast", "NPU"]
        ])
    };
    let bimodal: Vec<u64> = (0..40).map(|i| 1000 + if i % 2 == 1 { 600 } else { 0 } + (i * 7) % 13).collect();
    let tight: Vec<u64> = (0..40).map(|i| 800 + (i * 5) % 9).collect();
    let tools = json!({"onnx_runtime": "1.22.0", "qairt": "2.37.0"});
    json!({
        "token": TOKEN,
        "part_size": 4096,
        "throttle": {"POST jobs": 1},
        "devices": [
            {"name": "Samsung Galaxy S24 (Family)", "os": "14", "soc_description": "Snapdragon 8 Gen 3",
             "attributes": ["chipset:qualcomm-snapdragon-8gen3", "hexagon:v75", "os:android", "framework:onnx", "framework:qnn"]},
            {"name": "Samsung Galaxy S25 (Family)", "os": "15",
             "attributes": ["chipset:qualcomm-snapdragon-8-elite", "hexagon:v79", "os:android", "framework:onnx", "framework:qnn"]},
            {"name": "QCS6490 (Proxy)", "os": "12",
             "attributes": ["chipset:qualcomm-qcs6490", "hexagon:v68", "os:android", "framework:onnx"]},
            {"name": "Snapdragon X Elite CRD", "os": "11",
             "attributes": ["chipset:qualcomm-snapdragon-x-elite", "hexagon:v73", "os:windows", "framework:qnn"]}
        ],
        "profiles": {
            "Samsung Galaxy S24 (Family)": {"times_us": bimodal, "layers": layers("CPU"), "tool_versions": tools,
                                            "peak": [2_000_000, 6_000_000], "running_polls": 1},
            "Samsung Galaxy S25 (Family)": {"times_us": tight, "layers": layers("NPU"), "tool_versions": tools,
                                            "peak": [1_000_000, 3_000_000], "running_polls": 1},
            "QCS6490 (Proxy)": {"fail": {"reason": "The model ran out of memory on the device",
                                         "details": "ION allocation of 512 MiB failed", "type": "RUNTIME_DEVICE_OOM"}}
        }
    })
}

impl StandIn {
    /// Starts the stand-in in `dir` with `scenario` and configures the official client for it
    /// with `qai-hub configure --api_token … --api_url …`.
    pub fn start(dir: &Path, scenario: &Value) -> StandIn {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/aihub_standin.py");
        let record = dir.join("record");
        std::fs::create_dir_all(&record).unwrap();
        let scenario_file = dir.join("scenario.json");
        std::fs::write(&scenario_file, scenario.to_string()).unwrap();
        let mut child = Command::new(python())
            .arg(&script)
            .arg("--scenario")
            .arg(&scenario_file)
            .arg("--record")
            .arg(&record)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the stand-in starts (scripts/setup installs qai-hub into the venv)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().strip_prefix("PORT ").unwrap_or_else(|| panic!("the stand-in said {line:?}"));
        let url = format!("http://127.0.0.1:{port}");
        let client_ini = dir.join("client.ini");
        let qai_hub = python().with_file_name("qai-hub");
        let configured = run(Command::new(&qai_hub).env("QAIHUB_CLIENT_INI", &client_ini).args([
            "configure",
            "--api_token",
            TOKEN,
            "--api_url",
            &url,
            "--web_url",
            &url,
        ]));
        assert!(configured.status.success() && client_ini.is_file(), "qai-hub configure: {}", describe(&configured));
        let cache = dir.join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        std::os::unix::fs::symlink(cache_dir().join("runtimes"), cache.join("runtimes")).unwrap();
        StandIn { child, url, record, client_ini, cache, dir: dir.to_path_buf() }
    }

    /// A command with the official client's file and the tests' npugate cache in its environment.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command.env("QAIHUB_CLIENT_INI", &self.client_ini).env("NPUGATE_CACHE", &self.cache);
        command
    }

    /// A copy of the client's file with another token, for a rejected one.
    pub fn client_ini_with_token(&self, token: &str) -> PathBuf {
        let text = std::fs::read_to_string(&self.client_ini).unwrap().replace(TOKEN, token);
        let file = self.dir.join(format!("client-{token}.ini"));
        std::fs::write(&file, text).unwrap();
        file
    }

    /// The lines of a record file (`requests.jsonl`, `jobs.jsonl`).
    pub fn recorded(&self, file: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(self.record.join(file)).unwrap_or_default();
        text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
    }

    /// How many requests of `method` to `path` it received.
    pub fn requests(&self, method: &str, path: &str) -> usize {
        self.recorded("requests.jsonl").iter().filter(|r| r["method"] == method && r["path"] == path).count()
    }

    /// The bytes of a completed upload.
    pub fn uploaded(&self, model_id: &str) -> Vec<u8> {
        std::fs::read(self.record.join("uploads").join(format!("{model_id}.bin"))).unwrap()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The names of the models of [`compare_scenario`]: the baseline, its byte-identical copy and a
/// candidate with other bytes (the same graph, another doc string).
pub const COMPARE_MODELS: [&str; 3] = ["a.onnx", "a_copy.onnx", "b.onnx"];

/// [`scenario`] with the S25 profiling the convstack models of [`compare_models`]: every layer on
/// the NPU, `a.onnx` (and its copy, the same upload) around 0.80 ms, `b.onnx` 25% slower.
pub fn compare_scenario() -> Value {
    let layers: Vec<Value> = (0..10)
        .flat_map(|i| [json!([format!("conv{i}"), "Conv", "NPU"]), json!([format!("relu{i}"), "Relu", "NPU"])])
        .collect();
    let series = |base: u64| -> Vec<u64> { (0..20).map(|i| base + (i * 5) % 9).collect() };
    let mut scenario = scenario();
    scenario["throttle"] = json!({});
    scenario["profiles"]["Samsung Galaxy S25 (Family)"]["models"] = json!({
        "a.onnx": {"times_us": series(800), "layers": layers, "running_polls": 0},
        "b.onnx": {"times_us": series(1000), "layers": layers, "running_polls": 0},
    });
    scenario
}

/// Writes the models of [`COMPARE_MODELS`] into `dir` from the test model `convstack.onnx`;
/// their paths in that order.
pub fn compare_models(dir: &Path) -> [PathBuf; 3] {
    let [a, a_copy, b] = COMPARE_MODELS.map(|name| dir.join(name));
    std::fs::copy(crate::model("convstack.onnx"), &a).unwrap();
    std::fs::copy(&a, &a_copy).unwrap();
    let script =
        "import sys, onnx\nm = onnx.load(sys.argv[1])\nm.doc_string = 'the candidate'\nonnx.save(m, sys.argv[2])";
    let wrote = run(Command::new(python()).arg("-c").arg(script).arg(&a).arg(&b));
    assert!(wrote.status.success(), "{}", describe(&wrote));
    [a, a_copy, b]
}
