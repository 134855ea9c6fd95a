//! End to end: `npugate keygen`, `npugate run --local --evidence` on a real run, and `npugate
//! verify`: a bundle verifies; one changed byte in any file, the manifest or the signature fails
//! verification naming that file (exit 1); unusable input is exit 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use npugate_e2e::devices::Rig;
use npugate_e2e::{bin, describe, model, run};

fn text(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

fn npugate(args: &[&str]) -> Output {
    run(Command::new(bin("npugate")).args(args))
}

/// A key pair in `dir`: (private key, public key).
fn keygen(dir: &Path) -> (PathBuf, PathBuf) {
    let key = dir.join("signing.key");
    let out = npugate(&["keygen", "--out", text(&key)]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let public = dir.join("signing.key.pub");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        std::fs::read_to_string(&public).unwrap(),
        "keygen prints the public key"
    );
    (key, public)
}

/// Flips one bit of one byte in the middle of `file`.
fn flip_a_byte(file: &Path) {
    let mut bytes = std::fs::read(file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(file, bytes).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn a_bundle_verifies_and_any_changed_byte_is_named() {
    let work = tempfile::tempdir().unwrap();
    let (key, public) = keygen(work.path());
    let bundle = work.path().join("bundle");
    let result = work.path().join("result");
    let qdq = model("smallcnn_qdq.onnx");
    let float = model("smallcnn.onnx");
    let out = npugate(&[
        "run",
        "--local",
        "--model",
        text(&qdq),
        "--out",
        text(&result),
        "--runs",
        "5",
        "--rule",
        "disable=[\"cv_pct\"]",
        "--check-outputs",
        "--reference-model",
        text(&float),
        "--evidence",
        text(&bundle),
        "--signing-key",
        text(&key),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["schema"], "npugate.evidence/1");
    let files: Vec<(String, String)> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap().to_string(), f["role"].as_str().unwrap().to_string()))
        .collect();
    for role in ["model", "reference_model", "harness", "runtime", "result", "profile", "log", "outputs", "report"] {
        assert!(files.iter().any(|(_, r)| r == role), "no {role} file in {files:?}");
    }
    assert!(files.windows(2).all(|w| w[0].0 < w[1].0), "files are in path order");
    assert_eq!(manifest["runs"][0]["label"], "local");
    assert_eq!(manifest["runs"][0]["verdict"]["outcome"], "pass");
    assert!(manifest["runs"][0]["fingerprint"]["arch"].is_string());

    let valid = npugate(&["verify", text(&bundle), "--pubkey", text(&public)]);
    assert_eq!(valid.status.code(), Some(0), "{}", describe(&valid));

    let mut targets: Vec<String> = files.iter().map(|(path, _)| path.clone()).collect();
    targets.extend(["manifest.json".to_string(), "signature.json".to_string()]);
    for target in &targets {
        let copy = work.path().join("tampered");
        if copy.exists() {
            std::fs::remove_dir_all(&copy).unwrap();
        }
        copy_dir(&bundle, &copy);
        flip_a_byte(&copy.join(target));
        let checked = npugate(&["verify", text(&copy), "--pubkey", text(&public)]);
        assert_eq!(checked.status.code(), Some(1), "{target}: {}", describe(&checked));
        let stdout = String::from_utf8_lossy(&checked.stdout);
        assert!(stdout.contains(&format!("TAMPERED  {target}: ")), "{target} not named: {}", describe(&checked));
    }
    let checked = npugate(&["verify", text(&work.path().join("tampered")), "--pubkey", text(&public), "--json"]);
    assert_eq!(checked.status.code(), Some(1), "{}", describe(&checked));
    let document: serde_json::Value = serde_json::from_slice(&checked.stdout).unwrap();
    assert_eq!((&document["schema"], &document["valid"]), (&"npugate.verify/1".into(), &false.into()), "{document}");
    let problems = document["problems"].as_array().unwrap();
    assert!(problems.iter().any(|p| p.as_str().unwrap().starts_with("signature.json: ")), "{document}");

    // Another signer's key, a file added after signing, and unusable input.
    let other = work.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let (_, other_public) = keygen(&other);
    let wrong_key = npugate(&["verify", text(&bundle), "--pubkey", text(&other_public)]);
    assert_eq!(wrong_key.status.code(), Some(1), "{}", describe(&wrong_key));
    assert!(String::from_utf8_lossy(&wrong_key.stdout)
        .contains("signature.json: does not verify with the given public key"));
    std::fs::write(bundle.join("runs/local/extra.txt"), "added").unwrap();
    let added = npugate(&["verify", text(&bundle), "--pubkey", text(&public)]);
    assert_eq!(added.status.code(), Some(1), "{}", describe(&added));
    assert!(String::from_utf8_lossy(&added.stdout).contains("runs/local/extra.txt: is not in the manifest"));
    for not_a_bundle in [work.path().join("missing"), result.clone()] {
        let refused = npugate(&["verify", text(&not_a_bundle), "--pubkey", text(&public)]);
        assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    }
    let bad_key = npugate(&["verify", text(&bundle), "--pubkey", text(&qdq)]);
    assert_eq!(bad_key.status.code(), Some(2), "{}", describe(&bad_key));
    assert!(
        String::from_utf8_lossy(&bad_key.stderr).contains("is not an ed25519 public key"),
        "{}",
        describe(&bad_key)
    );
}

#[test]
fn evidence_without_a_key_is_refused_before_running() {
    let work = tempfile::tempdir().unwrap();
    let result = work.path().join("result");
    let mut command = Command::new(bin("npugate"));
    command.env_remove("NPUGATE_SIGNING_KEY").args(["run", "--local", "--model", text(&model("smallcnn.onnx"))]);
    command.args(["--out", text(&result), "--evidence", text(&work.path().join("bundle"))]);
    let out = run(&mut command);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--evidence needs a signing key"), "{}", describe(&out));
    assert!(!result.exists(), "nothing ran");
}

#[test]
fn the_signing_key_can_come_from_the_environment() {
    let work = tempfile::tempdir().unwrap();
    let (key, public) = keygen(work.path());
    let bundle = work.path().join("bundle");
    let mut command = Command::new(bin("npugate"));
    command.env("NPUGATE_SIGNING_KEY", std::fs::read_to_string(&key).unwrap());
    command.args(["run", "--local", "--no-gate", "--runs", "3", "--model", text(&model("smallcnn.onnx"))]);
    command.args(["--out", text(&work.path().join("result")), "--evidence", text(&bundle)]);
    let out = run(&mut command);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let valid = npugate(&["verify", text(&bundle), "--pubkey", text(&public)]);
    assert_eq!(valid.status.code(), Some(0), "{}", describe(&valid));
}

#[test]
fn a_sweep_bundle_holds_every_finished_cell_and_verifies() {
    let rig = Rig::up(&[6161]);
    let work = tempfile::tempdir().unwrap();
    let (key, public) = keygen(work.path());
    let plan = work.path().join("sweep.toml");
    let serial = Rig::serial(6161);
    let smallcnn = model("smallcnn.onnx");
    let text_plan = format!(
        "name = \"evidence\"\nruntimes = [\"ort-1.31.1-linux-x86_64\"]\n\n[settings]\nruns = 20\nprofile_runs = 1\n\n\
         [[device]]\nserial = {serial:?}\n\n[[model]]\npath = {:?}\nrules = {{ cv_pct = 100000 }}\n",
        text(&smallcnn)
    );
    std::fs::write(&plan, text_plan).unwrap();
    let (sweep_dir, bundle) = (work.path().join("sweep"), work.path().join("bundle"));
    let mut command = rig.command(bin("npugate"));
    command.args(["sweep", "--plan", text(&plan), "--out", text(&sweep_dir), "--night", "2026-01-01"]);
    command.args(["--history", text(&work.path().join("history.sqlite"))]);
    command.args(["--evidence", text(&bundle), "--signing-key", text(&key)]);
    let out = run(&mut command);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("manifest.json")).unwrap()).unwrap();
    let runs = manifest["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{manifest}");
    let cell = format!("runs/{}/ort-1.31.1-linux-x86_64/smallcnn", serial.replace(':', "_"));
    assert_eq!(runs[0]["dir"], cell.as_str());
    assert_eq!(runs[0]["verdict"]["outcome"], "pass");
    let paths: Vec<&str> = manifest["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    for expected in ["plan/sweep.toml", "sweep.json", "model/smallcnn/smallcnn.onnx", &format!("{cell}/result.json")] {
        assert!(paths.contains(&expected), "{expected} missing from {paths:?}");
    }
    assert!(paths.iter().any(|p| p.starts_with("harness/x86_64-unknown-linux-gnu/")), "{paths:?}");
    let valid = npugate(&["verify", text(&bundle), "--pubkey", text(&public)]);
    assert_eq!(valid.status.code(), Some(0), "{}", describe(&valid));
}

#[test]
fn run_on_two_devices_checks_outputs_prints_the_table_and_bundles_both_devices() {
    let rig = Rig::up(&[6163, 6164]);
    let work = tempfile::tempdir().unwrap();
    let (key, public) = keygen(work.path());
    let (out_dir, bundle) = (work.path().join("out"), work.path().join("bundle"));
    let (qdq, float) = (model("smallcnn_qdq.onnx"), model("smallcnn.onnx"));
    let mut command = rig.command(bin("npugate"));
    command.args(["run", "--runtime", "ort-1.31.1-linux-x86_64", "--runs", "20", "--rule", "cv_pct=100000"]);
    command.args(["--model", text(&qdq), "--out", text(&out_dir), "--device", "all"]);
    command.args(["--check-outputs", "--reference-model", text(&float), "--rule", "min_sqnr_db=20"]);
    command.args(["--evidence", text(&bundle), "--signing-key", text(&key)]);
    let out = run(&mut command);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Output consistency") && stdout.contains("no outlier device"), "{}", describe(&out));
    for port in [6163, 6164] {
        let dir = out_dir.join(Rig::serial(port).replace(':', "_"));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("outputs.json")).unwrap()).unwrap();
        assert_eq!(report["reference"]["result_dir"], "../output-reference");
        assert!(report["outputs"][0]["metrics"]["sqnr_db"].as_f64().is_some_and(|db| db > 20.0), "{report}");
    }

    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("manifest.json")).unwrap()).unwrap();
    let labels: Vec<&str> = manifest["runs"].as_array().unwrap().iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["127.0.0.1_6163", "127.0.0.1_6164", "output-reference"]);
    let paths: Vec<&str> = manifest["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"rack.json") && paths.contains(&"harness/host/npugate-harness"), "{paths:?}");
    let valid = npugate(&["verify", text(&bundle), "--pubkey", text(&public)]);
    assert_eq!(valid.status.code(), Some(0), "{}", describe(&valid));
}
