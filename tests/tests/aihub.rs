//! Qualcomm AI Hub's hosted devices as targets, end to end against a loopback stand-in built from
//! the real `qai-hub` package's own messages (`scripts/aihub_standin.py`): first the official client
//! itself profiles a model through it (so the stand-in speaks the real protocol), then npugate,
//! configured by the file `qai-hub configure` wrote, runs on its devices. Nothing reaches the
//! network; nothing here was tried against Qualcomm's real service.

use std::path::Path;
use std::process::{Command, Output};

use npugate_e2e::aihub::{compare_models, compare_scenario, scenario, StandIn};
use npugate_e2e::{bin, describe, model, python, run};
use serde_json::Value;

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn npugate_run(standin: &StandIn, out: &Path, devices: &[&str]) -> Output {
    let mut command = standin.command(bin("npugate"));
    command.arg("run").arg("--model").arg(model("fallback_det.onnx")).arg("--runs").arg("40").arg("--out").arg(out);
    for device in devices {
        command.args(["--aihub", device]);
    }
    run(&mut command)
}

#[test]
fn the_official_client_profiles_a_model_through_the_standin() {
    let dir = tempfile::tempdir().unwrap();
    let standin = StandIn::start(dir.path(), &scenario());
    let script = r#"
import sys, qai_hub as hub
from qai_hub.client import Job
Job._polling_interval = 1  # the client's own poll interval (10 s), shortened for the test (whole seconds)
names = [d.name for d in hub.get_devices()]
assert "Samsung Galaxy S24 (Family)" in names, names
v75 = hub.get_devices(attributes="hexagon:v75")
assert [d.name for d in v75] == ["Samsung Galaxy S24 (Family)"], v75
job = hub.submit_inference_job(model=sys.argv[1], device=hub.Device("Samsung Galaxy S24 (Family)"), profile=True,
                               options="--max_profiler_iterations 40")
status = job.wait()
assert status.success, status
profile = job.download_profile()
print(job.job_id, profile["execution_summary"]["estimated_inference_time"],
      ",".join(layer["compute_unit"] for layer in profile["execution_detail"]))
failed = hub.submit_inference_job(model=sys.argv[1], device=hub.Device("QCS6490 (Proxy)"), profile=True).wait()
print("failed:", failed.message)
"#;
    let out = run(standin.command(python()).arg("-c").arg(script).arg(model("fallback_det.onnx")));
    assert!(out.status.success(), "the official client against the stand-in: {}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("j0001 1000 NPU,NPU,NPU,CPU,NPU"), "{stdout}");
    assert!(stdout.contains("failed: The model ran out of memory on the device"), "{stdout}");
    let jobs = standin.recorded("jobs.jsonl");
    assert_eq!(jobs[0]["options"], "--max_profiler_iterations 40");
    assert_eq!(jobs[0]["is_profiling_on"], true);
    assert_eq!(standin.uploaded("m0001"), std::fs::read(model("fallback_det.onnx")).unwrap(), "uploaded as it is");
    assert_eq!(standin.requests("PUT", "/upload/m0001/u-m0001/2"), 1, "three parts of 4 KiB");
    assert_eq!(standin.requests("POST", "/api/v1/jobs/"), 3, "the throttled submit was retried by the client");
}

#[test]
fn a_run_on_two_aihub_devices_fails_the_one_with_a_cpu_fallback_and_passes_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let standin = StandIn::start(dir.path(), &scenario());
    let out_dir = dir.path().join("out");
    let out = npugate_run(&standin, &out_dir, &["S24", "Samsung Galaxy S25 (Family)"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Det node det (12.9% of FLOPs) runs on CPUExecutionProvider"), "{stdout}");
    assert!(
        stdout.contains("FAIL    cv_pct") && stdout.contains("bimodal: 50% of runs at 1.00 ms, 50% at 1.61 ms"),
        "{stdout}"
    );
    assert!(stdout.contains("samsung-galaxy-s24-family\tgate failed"), "{stdout}");
    assert!(stdout.contains("samsung-galaxy-s25-family\tpass"), "{stdout}");
    assert!(stdout.contains("NOT Qualcomm's AI Hub service"), "every output names the service: {stdout}");
    let result = json(&out_dir.join("samsung-galaxy-s24-family/result.json"));
    assert_eq!(result["schema"], "npugate.run-result/1.2");
    let aihub = &result["aihub"];
    assert_eq!((aihub["api_url"].as_str(), aihub["qualcomm"].as_bool()), (Some(standin.url.as_str()), Some(false)));
    let job = aihub["job"]["id"].as_str().unwrap();
    assert_eq!(aihub["job"]["link"], format!("{}/jobs/{job}/", standin.url));
    assert_eq!(aihub["job"]["options"], "--max_profiler_iterations 40", "--runs 40 asks for 40 iterations");
    assert_eq!(aihub["layers"]["unmatched"], serde_json::json!(["graph_output_cast"]));
    assert_eq!((aihub["layers"]["matched"].as_u64(), aihub["layers"]["layers"].as_u64()), (Some(4), Some(5)));
    assert_eq!(result["timings"]["latencies_ns"][1], 1_000 * (1_000 + 600 + 7), "µs → ns, in order");
    assert_eq!(result["memory"]["peak_bytes"], 6_000_000, "the upper bound of the peak range");
    assert_eq!(result["fingerprint"]["soc"]["machine"], "qualcomm-snapdragon-8gen3");
    let verdict = json(&out_dir.join("samsung-galaxy-s24-family/verdict.json"));
    let warnings = verdict["warnings"].to_string();
    assert!(warnings.contains(job) && warnings.contains("NOT Qualcomm's AI Hub service"), "{warnings}");
    let model_id = aihub["model"]["id"].as_str().unwrap();
    assert_eq!(standin.uploaded(model_id), std::fs::read(model("fallback_det.onnx")).unwrap(), "uploaded as it is");
    assert_eq!(standin.requests("POST", "/api/v1/models/"), 1, "one upload for both devices");
    assert_eq!(standin.requests("POST", "/api/v1/jobs/"), 3, "two jobs, the throttled submit retried");
    // The same bytes again, with an evidence bundle: the upload cache names the model AI Hub has,
    // and the bundle holds the AI Hub run (its job and device in the result) and verifies.
    let key = dir.path().join("release.key");
    let keygen = run(Command::new(bin("npugate")).arg("keygen").arg("--out").arg(&key));
    assert!(keygen.status.success(), "{}", describe(&keygen));
    let bundle = dir.path().join("bundle");
    let mut command = standin.command(bin("npugate"));
    command.arg("run").arg("--model").arg(model("fallback_det.onnx")).args(["--runs", "40", "--aihub", "S25"]);
    command.arg("--out").arg(dir.path().join("again")).arg("--evidence").arg(&bundle).arg("--signing-key").arg(&key);
    let again = run(&mut command);
    assert_eq!(again.status.code(), Some(0), "{}", describe(&again));
    assert_eq!(standin.requests("POST", "/api/v1/models/"), 1, "not uploaded again");
    assert_eq!(
        json(&dir.path().join("again/samsung-galaxy-s25-family/result.json"))["aihub"]["model"]["uploaded_now"],
        false
    );
    let manifest = json(&bundle.join("manifest.json"));
    let runs = manifest["runs"].to_string();
    assert!(runs.contains("qualcomm-snapdragon-8-elite"), "the AI Hub device's fingerprint: {runs}");
    let bundled = json(&bundle.join("runs/samsung-galaxy-s25-family/result.json"));
    assert!(bundled["aihub"]["job"]["id"].is_string(), "{bundled}");
    let verify =
        run(Command::new(bin("npugate")).arg("verify").arg(&bundle).arg("--pubkey").arg(key.with_extension("key.pub")));
    assert_eq!(verify.status.code(), Some(0), "{}", describe(&verify));
}

#[test]
fn a_missing_or_rejected_token_and_a_failed_job_exit_2_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let standin = StandIn::start(dir.path(), &scenario());
    let missing =
        run(&mut npugate_run_command(&standin, dir.path().join("none.ini").as_path(), &dir.path().join("o1")));
    assert_eq!(missing.status.code(), Some(2), "{}", describe(&missing));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("qai-hub configure --api_token"),
        "{}",
        describe(&missing)
    );
    let rejected =
        run(&mut npugate_run_command(&standin, &standin.client_ini_with_token("wrong"), &dir.path().join("o2")));
    assert_eq!(rejected.status.code(), Some(2), "{}", describe(&rejected));
    assert!(String::from_utf8_lossy(&rejected.stderr).contains("the token was rejected"), "{}", describe(&rejected));
    assert!(!dir.path().join("o2").exists(), "nothing written");
    let failed = npugate_run(&standin, &dir.path().join("o3"), &["QCS6490"]);
    assert_eq!(failed.status.code(), Some(2), "{}", describe(&failed));
    let said = format!("{}{}", String::from_utf8_lossy(&failed.stdout), String::from_utf8_lossy(&failed.stderr));
    for part in [
        "The model ran out of memory on the device",
        "ION allocation of 512 MiB failed",
        "RUNTIME_DEVICE_OOM",
        "/jobs/j0001/",
    ] {
        assert!(said.contains(part), "{part}: {said}");
    }
    assert!(!dir.path().join("o3/qcs6490-proxy/result.json").exists(), "no result of a failed job");
    let windows = npugate_run(&standin, &dir.path().join("o4"), &["X Elite"]);
    assert_eq!(windows.status.code(), Some(2), "{}", describe(&windows));
    assert!(String::from_utf8_lossy(&windows.stderr).contains("does not run ONNX models"), "{}", describe(&windows));
}

#[test]
fn devices_aihub_lists_the_services_devices_with_chipset_hexagon_and_frameworks() {
    let dir = tempfile::tempdir().unwrap();
    let standin = StandIn::start(dir.path(), &scenario());
    let out = run(standin.command(bin("npugate")).args(["devices", "--aihub"]));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("NOT Qualcomm's AI Hub service"), "{stdout}");
    let row =
        stdout.lines().find(|l| l.starts_with("Samsung Galaxy S24 (Family)")).unwrap_or_else(|| panic!("{stdout}"));
    let cells: Vec<&str> = row.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
    assert_eq!(cells, ["Samsung Galaxy S24 (Family)", "14", "qualcomm-snapdragon-8gen3", "v75", "onnx,qnn"]);
    let listed = run(standin.command(bin("npugate")).args(["devices", "--aihub", "--json"]));
    let listing: Value =
        serde_json::from_slice(&listed.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&listed)));
    assert_eq!(listing["schema"], "npugate.aihub-devices/1");
    assert_eq!(listing["devices"][3]["frameworks"], serde_json::json!(["qnn"]));
    let rejected = run(standin
        .command(bin("npugate"))
        .env("QAIHUB_CLIENT_INI", standin.client_ini_with_token("x"))
        .args(["devices", "--aihub"]));
    assert_eq!(rejected.status.code(), Some(2), "{}", describe(&rejected));
}

fn npugate_run_command(standin: &StandIn, client_ini: &Path, out: &Path) -> std::process::Command {
    let mut command = standin.command(bin("npugate"));
    command.env("QAIHUB_CLIENT_INI", client_ini);
    command.arg("run").arg("--model").arg(model("fallback_det.onnx")).args(["--aihub", "S24"]).arg("--out").arg(out);
    command
}

fn npugate_compare(standin: &StandIn, baseline: &Path, candidate: &Path, out: &Path) -> Output {
    let mut command = standin.command(bin("npugate"));
    command.arg("compare").arg("--baseline-model").arg(baseline).arg("--model").arg(candidate);
    command.args(["--aihub", "S25", "--rounds", "2", "--runs-per-round", "20"]).arg("--out").arg(out);
    run(&mut command)
}

#[test]
fn compare_on_an_aihub_device_fails_a_slower_candidate_and_passes_an_identical_one() {
    let dir = tempfile::tempdir().unwrap();
    let standin = StandIn::start(dir.path(), &compare_scenario());
    let [a, a_copy, b] = compare_models(dir.path());
    let out = npugate_compare(&standin, &a, &b, &dir.path().join("slower"));
    let slower = dir.path().join("slower/samsung-galaxy-s25-family");
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let verdict = json(&slower.join("compare.json"));
    let ratio = verdict["paired"]["ratio"].as_f64().unwrap();
    assert!((ratio - 1.25).abs() < 0.01, "B/A of the scripted series: {ratio}");
    let jobs = standin.recorded("jobs.jsonl");
    // Compare keeps adding rounds until its interval decides (2 asked, more at later looks).
    let rounds = verdict["rounds"].as_array().unwrap().len();
    assert!(rounds >= 2, "{verdict:#}");
    assert_eq!(jobs.len(), 2 + 2 * rounds, "a placement job per model, then one per model per round: {jobs:?}");
    assert!(jobs.iter().all(|j| j["device"] == "Samsung Galaxy S25 (Family)"), "{jobs:?}");
    assert_eq!(jobs[2]["options"], "--max_profiler_iterations 20", "--runs-per-round 20");
    let round = json(&slower.join("candidate/round-01/result.json"));
    let aihub = &round["aihub"];
    assert_eq!((aihub["api_url"].as_str(), aihub["qualcomm"].as_bool()), (Some(standin.url.as_str()), Some(false)));
    let job = aihub["job"]["id"].as_str().unwrap();
    assert!(jobs.iter().any(|j| j["id"] == job), "{job}");
    assert_eq!(aihub["job"]["link"], format!("{}/jobs/{job}/", standin.url));
    assert_eq!(standin.requests("POST", "/api/v1/models/"), 2, "each model uploaded once, reused by every round");

    let out = npugate_compare(&standin, &a, &a_copy, &dir.path().join("identical"));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        json(&dir.path().join("identical/samsung-galaxy-s25-family/compare.json"))["paired"]["ratio"].as_f64(),
        Some(1.0)
    );
    assert_eq!(standin.requests("POST", "/api/v1/models/"), 2, "the copy's bytes were uploaded before");
}

#[test]
fn a_sweep_with_aihub_cells_judges_each_device_and_records_it_in_the_matrix_and_history() {
    let dir = tempfile::tempdir().unwrap();
    let standin = StandIn::start(dir.path(), &scenario());
    std::fs::copy(model("fallback_det.onnx"), dir.path().join("fallback_det.onnx")).unwrap();
    let plan = dir.path().join("sweep.toml");
    let text = "name = \"aihub-nightly\"\naihub = [\"S24\", \"Samsung Galaxy S25 (Family)\"]\n\
                [settings]\nruns = 40\n[[model]]\npath = \"fallback_det.onnx\"\n";
    std::fs::write(&plan, text).unwrap();
    let (out, history) = (dir.path().join("night"), dir.path().join("history.sqlite"));
    let mut command = standin.command(bin("npugate"));
    command.arg("sweep").arg("--plan").arg(&plan).arg("--out").arg(&out).arg("--history").arg(&history);
    let swept = run(command.args(["--night", "2026-03-01"]));
    assert_eq!(swept.status.code(), Some(1), "the S24's CPU fallback fails its cell: {}", describe(&swept));
    let summary = json(&out.join("sweep.json"));
    let devices: Vec<(&str, &str, &str)> = summary["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["serial"].as_str().unwrap(), d["dir"].as_str().unwrap(), d["soc"].as_str().unwrap()))
        .collect();
    assert_eq!(
        devices,
        [
            ("Samsung Galaxy S24 (Family)", "samsung-galaxy-s24-family", "qualcomm-snapdragon-8gen3"),
            ("Samsung Galaxy S25 (Family)", "samsung-galaxy-s25-family", "qualcomm-snapdragon-8-elite"),
        ]
    );
    assert_eq!(summary["runtimes"], serde_json::json!(["aihub"]));
    for (device, exit) in [("samsung-galaxy-s24-family", 1), ("samsung-galaxy-s25-family", 0)] {
        let cell = out.join(device).join("aihub/fallback_det");
        assert_eq!(json(&cell.join("cell.json"))["exit_code"], exit, "{device}");
        let result = json(&cell.join("result.json"));
        let job = result["aihub"]["job"]["id"].as_str().unwrap();
        assert!(standin.recorded("jobs.jsonl").iter().any(|j| j["id"] == job), "{device}: {job}");
        assert_eq!(result["aihub"]["api_url"], standin.url.as_str());
    }
    let matrix = std::fs::read_to_string(out.join("matrix.md")).unwrap();
    assert!(matrix.contains("samsung-galaxy-s24-family") && matrix.contains("| FAIL |"), "{matrix}");
    let asked = run(Command::new(bin("npugate")).arg("history").arg("--history").arg(&history).args([
        "--model",
        "fallback_det",
        "--json",
    ]));
    assert!(asked.status.success(), "{}", describe(&asked));
    let report: Value = serde_json::from_slice(&asked.stdout).unwrap();
    let mut keyed: Vec<String> =
        report["series"].as_array().unwrap().iter().map(|s| format!("{} {}", s["device"], s["runtime"])).collect();
    keyed.sort();
    assert_eq!(keyed, ["\"samsung-galaxy-s24-family\" \"aihub\"", "\"samsung-galaxy-s25-family\" \"aihub\""]);
}
