//! A second real accelerator on this machine: ONNX Runtime 1.24.1 with the OpenVINO EP
//! (`onnxruntime-openvino` 1.24.1, OpenVINO 2025.4, `device_type=CPU`). OpenVINO builds real
//! partitions, runs them, and leaves what it does not support (`Det`) to the CPU EP: two live EPs
//! with real partition times and real hand-overs between them. An NPU that this machine lacks is
//! an accelerator that did not start, never a silent CPU run. The adb rig's devices are x86_64
//! Linux, so a sweep there can put the OpenVINO and CPU runtimes side by side.

use std::path::Path;
use std::process::{Command, Output};

use npugate_e2e::devices::Rig;
use npugate_e2e::{bin, describe, model, run, runtime_file};
use npugate_result::RunResult;
use serde_json::Value;

const OPENVINO: &str = "OpenVINOExecutionProvider";
const CPU: &str = "CPUExecutionProvider";
const RUNTIME: &str = "openvino-1.24.1-linux-x86_64";

/// `npugate run --local --ep openvino` on a test model into `out`, timing noise not under test.
fn run_openvino(model_name: &str, out: &Path, extra: &[&str]) -> Output {
    runtime_file(RUNTIME, "libonnxruntime_providers_openvino.so");
    run(Command::new(bin("npugate"))
        .args(["run", "--local", "--ep", "openvino", "--model"])
        .arg(model(model_name))
        .arg("--out")
        .arg(out)
        .args(["--runs", "20", "--warmup", "3", "--profile-runs", "5", "--rule", "disable=[\"cv_pct\"]"])
        .args(extra))
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

fn num(value: &Value) -> f64 {
    value.as_f64().unwrap_or_else(|| panic!("not a number: {value}"))
}

#[test]
fn det_falls_back_from_openvino_to_the_cpu_with_both_eps_measured_and_the_gate_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mixed");
    let output =
        run_openvino("mixed.onnx", &out, &["--ep-option", "device_type=CPU", "--rule", "max_fallback_nodes=0"]);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));

    let result = RunResult::read(&out).unwrap();
    assert_eq!((result.execution.preferred_ep.as_str(), result.execution.attach.as_str()), (OPENVINO, "builtin"));
    assert_eq!(result.runtime.ort_version, "1.24.1");
    assert!(result
        .runtime
        .libraries
        .iter()
        .any(|l| l.role == "ep_provider" && l.path.ends_with("libonnxruntime_providers_openvino.so")));
    assert!(result.backend.as_ref().is_some_and(|b| b.started), "{:?}", result.backend);

    let verdict = json(&out.join("verdict.json"));
    let placement = &verdict["placement"];
    // Two live EPs, each with its own measured kernel time.
    let per_ep = placement["per_ep"].as_array().unwrap();
    let eps: Vec<&str> = per_ep.iter().map(|e| e["ep"].as_str().unwrap()).collect();
    assert_eq!(eps, [OPENVINO, CPU], "{placement}");
    for ep in per_ep {
        assert!(num(&ep["time_us_per_run"]) > 0.0, "{ep}");
    }
    let flops_pct = num(&placement["preferred_flops_pct"]);
    assert!(flops_pct > 99.99 && flops_pct < 100.0, "Det and Mul cost a few FLOPs: {flops_pct}");
    // Each OpenVINO partition with its original nodes and FLOPs, as ORT assigned them.
    let partitions = placement["partitions"].as_array().unwrap();
    let assigned: Vec<Vec<String>> = result
        .assignment
        .subgraphs
        .iter()
        .filter(|s| s.ep == OPENVINO)
        .map(|s| s.nodes.iter().map(|n| n.name.clone()).collect())
        .collect();
    assert_eq!(partitions.len(), assigned.len(), "{placement}");
    assert!(partitions.len() >= 2, "the Det splits the graph: {placement}");
    for (partition, nodes) in partitions.iter().zip(&assigned) {
        assert_eq!(partition["ep"], OPENVINO);
        let names: Vec<String> =
            partition["nodes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect();
        assert_eq!(&names, nodes);
        assert!(num(&partition["time"]["median_us"]) > 0.0, "{partition}");
    }
    assert!(partitions[0]["nodes"].as_array().unwrap().iter().any(|n| n == "conv1"));
    assert!(num(&partitions[0]["flops"]) > 1e7, "the conv partition carries the FLOPs: {}", partitions[0]);
    // The boundary counted, with the measured idle time around it.
    let boundaries = &placement["boundaries"];
    assert!(boundaries["per_run"].as_array().unwrap().iter().all(|n| num(n) >= 1.0), "{boundaries}");
    let into_cpu = boundaries["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["from_ep"] == OPENVINO && t["to_ep"] == CPU)
        .unwrap_or_else(|| panic!("no OpenVINO → CPU switch: {boundaries}"));
    assert!(num(&into_cpu["gap_us"]) >= 0.0, "{into_cpu}");
    assert!(num(&boundaries["gap_us_per_run"]) >= 0.0, "{boundaries}");
    // The fallback named, and the gate failing on it.
    let det = placement["fallback"].as_array().unwrap().iter().find(|f| f["name"] == "det").expect("det falls back");
    assert_eq!(
        (det["op_type"].as_str(), det["ep"].as_str(), det["expected"].as_bool()),
        (Some("Det"), Some(CPU), Some(false))
    );
    assert!(num(&det["time_us_per_run"]) > 0.0, "{det}");
    let check = verdict["checks"].as_array().unwrap().iter().find(|c| c["rule"] == "max_fallback_nodes").unwrap();
    assert_eq!(check["status"], "fail");
    let message = check["message"].as_str().unwrap();
    assert!(message.contains("Det node det") && message.contains("off OpenVINOExecutionProvider"), "{message}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("Det node det"), "the terminal report names it: {stdout}");
}

#[test]
fn a_model_openvino_fully_claims_passes_at_100_percent() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("smallcnn");
    let output = run_openvino("smallcnn.onnx", &out, &["--rule", "max_fallback_nodes=0", "--rule", "npu_time_pct=100"]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let placement = &json(&out.join("verdict.json"))["placement"];
    assert_eq!(placement["preferred_ep"], OPENVINO);
    for share in ["preferred_flops_pct", "preferred_nodes_pct", "preferred_time_pct"] {
        assert_eq!(num(&placement[share]), 100.0, "{share}: {placement}");
    }
    assert_eq!(placement["partitions"].as_array().unwrap().len(), 1);
    assert!(placement["fallback"].as_array().unwrap().is_empty());
}

#[test]
fn an_npu_this_machine_lacks_is_an_accelerator_that_did_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("npu");
    let output = run_openvino("smallcnn.onnx", &out, &["--ep-option", "device_type=NPU"]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("OpenVINOExecutionProvider did not start: Device NPU is not available"), "{stderr}");
    assert!(!out.join("result.json").exists(), "nothing ran, nothing is judged");

    // The harness itself says so with its own exit code: 3, infrastructure (a rack retries it).
    let harness = run(Command::new(bin("npugate-harness"))
        .arg("--ort-lib")
        .arg(runtime_file(RUNTIME, "libonnxruntime.so.1.24.1"))
        .arg("--model")
        .arg(model("smallcnn.onnx"))
        .arg("--out")
        .arg(dir.path().join("harness"))
        .args(["--ep", "openvino", "--ep-option", "device_type=NPU", "--runs", "2"]));
    assert_eq!(harness.status.code(), Some(3), "{}", describe(&harness));

    let preflight = run(Command::new(bin("npugate"))
        .args(["preflight", "--ep", "openvino", "--ep-option", "device_type=NPU", "--model"])
        .arg(model("smallcnn.onnx"))
        .arg("--out")
        .arg(dir.path().join("preflight")));
    assert_eq!(preflight.status.code(), Some(2), "{}", describe(&preflight));
    assert!(String::from_utf8_lossy(&preflight.stderr).contains("did not start: Device NPU is not available"));
}

#[test]
fn an_ep_the_runtime_does_not_contain_is_one_error_naming_what_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let output = run_openvino("smallcnn.onnx", &dir.path().join("out"), &["--runtime", "ort-1.31.1-linux-x86_64"]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("OpenVINOExecutionProvider is not in this ONNX Runtime"), "{stderr}");
    assert!(
        stderr.contains("libonnxruntime.so.1.31.1), which contains AzureExecutionProvider, CPUExecutionProvider"),
        "{stderr}"
    );
    assert!(!stderr.contains("did not start"), "a runtime without the EP is bad input, not a dead device: {stderr}");
}

#[test]
fn preflight_on_openvino_reports_the_assignment_without_timing() {
    let dir = tempfile::tempdir().unwrap();
    let preflight = |model_name: &str| {
        let out = dir.path().join(model_name);
        let output = run(Command::new(bin("npugate"))
            .args(["preflight", "--ep", "openvino", "--model"])
            .arg(model(model_name))
            .arg("--out")
            .arg(&out));
        (output, out)
    };
    let (mixed, out) = preflight("mixed.onnx");
    assert_eq!(mixed.status.code(), Some(1), "{}", describe(&mixed));
    let stdout = String::from_utf8_lossy(&mixed.stdout);
    assert!(stdout.contains("preferred EP OpenVINOExecutionProvider") && stdout.contains("det"), "{stdout}");
    let report = json(&out.join("placement.json"));
    assert_eq!(report["fallback"].as_array().unwrap().iter().filter(|f| f["op_type"] == "Det").count(), 1);
    assert_eq!(RunResult::read(&out).unwrap().timings.latencies_ns.len(), 1, "one inference, no timing statistics");

    let (smallcnn, _) = preflight("smallcnn.onnx");
    assert_eq!(smallcnn.status.code(), Some(0), "{}", describe(&smallcnn));
}

#[test]
fn the_openvino_plugin_ep_offers_no_device_on_this_cpu_and_did_not_start() {
    // onnxruntime-ep-openvino 1.8.1 skips CPUs whose vendor is not Intel (0x8086): on this AMD host
    // it registers and offers no device. Asked for one explicitly, it did not start — no silent
    // fallback to another device or to the CPU EP.
    let plugin = "openvino-plugin-1.8.1-ort-1.31.1-linux-x86_64";
    runtime_file(plugin, "libonnxruntime_providers_openvino_plugin.so");
    let cpu_vendor = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if cpu_vendor.contains("GenuineIntel") {
        eprintln!("an Intel host: the plugin offers devices here, so this test's premise does not hold");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let output = run_openvino("smallcnn.onnx", &dir.path().join("out"), &["--runtime", plugin, "--ep-device", "npu"]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr
            .contains("OpenVINOExecutionProvider did not start: the OpenVINOExecutionProvider plugin offers no device"),
        "{stderr}"
    );
    assert!(!dir.path().join("out/result.json").exists());
}

#[test]
fn openvino_and_cpu_runtimes_are_two_columns_of_one_sweep_matrix_on_the_rig() {
    let rig = Rig::up(&[6161]);
    let work = tempfile::tempdir().unwrap();
    let (cpu, openvino) = ("ort-1.31.1-linux-x86_64", "openvino-1.24.1-linux-x86_64");
    npugate_e2e::runtime_file(openvino, "libonnxruntime_providers_openvino.so");
    let plan = work.path().join("sweep.toml");
    let text = format!(
        "name = \"eps\"\nruntimes = [{cpu:?}, {openvino:?}]\n\n[settings]\nruns = 20\nwarmup = 2\nprofile_runs = 2\n\n\
         [runtime_ep.{openvino:?}]\nep = \"openvino\"\nep_options = [\"device_type=CPU\"]\n\n[[device]]\nserial = {:?}\n\n\
         [[model]]\npath = {:?}\nrules = {{ cv_pct = 100000, max_fallback_nodes = 0 }}\n",
        Rig::serial(6161),
        npugate_e2e::model("mixed.onnx").display().to_string()
    );
    std::fs::write(&plan, text).unwrap();
    let out = work.path().join("night");
    let done = run(rig
        .command(bin("npugate"))
        .arg("sweep")
        .arg("--plan")
        .arg(&plan)
        .arg("--out")
        .arg(&out)
        .arg("--history")
        .arg(work.path().join("h.sqlite"))
        .args(["--night", "2026-02-01"]));
    // The CPU column passes (no fallback on the CPU EP); the OpenVINO column fails on its Det.
    let summary = json(&out.join("sweep.json"));
    assert_eq!(done.status.code(), Some(1), "{}\n{summary:#}", describe(&done));
    let cells = summary["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for cell in cells {
        assert_eq!(cell["state"], "finished", "{cell}");
        let dir = out.join(cell["dir"].as_str().unwrap());
        let result = json(&dir.join("result.json"));
        let placement = &json(&dir.join("verdict.json"))["placement"];
        let eps: Vec<&str> =
            placement["per_ep"].as_array().unwrap().iter().map(|e| e["ep"].as_str().unwrap()).collect();
        if cell["key"]["runtime"] == openvino {
            assert_eq!(result["execution"]["preferred_ep"], "OpenVINOExecutionProvider");
            assert_eq!(result["runtime"]["ort_version"], "1.24.1");
            assert_eq!(eps, ["OpenVINOExecutionProvider", "CPUExecutionProvider"], "{placement}");
            assert_eq!(cell["record"]["outcome"], "fail", "{cell}");
        } else {
            assert_eq!(result["execution"]["preferred_ep"], "CPUExecutionProvider");
            assert_eq!(eps, ["CPUExecutionProvider"], "{placement}");
            assert_eq!(cell["record"]["outcome"], "pass", "{cell}");
        }
    }
    let markdown = std::fs::read_to_string(out.join("matrix.md")).unwrap();
    assert!(markdown.contains(openvino) && markdown.contains(cpu), "{markdown}");
    assert!(
        markdown.contains(
            "conv1 (Conv) moved to OpenVINOExecutionProvider (CPUExecutionProvider on ort-1.31.1-linux-x86_64)"
        ),
        "{markdown}"
    );
}
