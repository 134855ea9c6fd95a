//! Big models: a model is its `.onnx` and every file it refers to (ONNX external data, EPContext
//! context binaries). Deployed together into one directory per model on real adbds (the rig),
//! pushed once, identified by one digest over all files; traversal refused before anything moves.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use npugate_e2e::devices::{Device, Rig};
use npugate_e2e::{bin, describe, model, python, run, sample};
use npugate_result::RunResult;
use serde_json::Value;

const RUNTIME: &str = "ort-1.31.1-linux-x86_64";

/// Resaves `source` with its tensors as external data into `dir`: `one` puts every tensor of 1 KiB
/// or more (initializers and, with `convert_attribute`, Constant values) into `<stem>.weights`;
/// `each` writes one file per tensor. (Smaller ones stay inline, as `onnx.save` does by default:
/// ONNX Runtime's shape inference cannot read a Reshape's shape from an external Constant.)
fn resave_external(source: &Path, dir: &Path, layout: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let stem = source.file_stem().unwrap().to_string_lossy().into_owned();
    let out = dir.join(format!("{stem}.onnx"));
    let script = r#"
import sys, onnx
from onnx import numpy_helper
from onnx.external_data_helper import _get_all_tensors
source, out, stem, layout = sys.argv[1:5]
model = onnx.load(source)
# Only tensors held as raw bytes go external: rewrite float_data & co. as raw_data.
for tensor in _get_all_tensors(model):
    if not tensor.HasField("raw_data"):
        tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor), tensor.name))
one = layout == "one"
onnx.save(model, out, save_as_external_data=True, all_tensors_to_one_file=one,
          location=stem + ".weights" if one else None, size_threshold=1024, convert_attribute=True)
"#;
    let output = run(Command::new(python()).arg("-c").arg(script).arg(source).arg(&out).arg(&stem).arg(layout));
    assert!(output.status.success(), "{}", describe(&output));
    out
}

fn npugate_on(rig: &Rig, args: &[&str], model: &Path, out: &Path) -> Output {
    let mut command = rig.command(bin("npugate"));
    command.args([
        "run",
        "--runtime",
        RUNTIME,
        "--rule",
        "cv_pct=100000",
        "--runs",
        "20",
        "--warmup",
        "0",
        "--profile-runs",
        "1",
    ]);
    command.args(args).arg("--model").arg(model).arg("--out").arg(out);
    run(&mut command)
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// The device's deploy report of a run: (files pushed, bytes pushed, remote names pushed).
fn pushed(dir: &Path) -> (u64, u64, Vec<String>) {
    let deploy = &json(&dir.join("device_run.json"))["deploy"];
    let names = deploy["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["pushed"] == true)
        .map(|f| f["remote"].as_str().unwrap().to_string())
        .collect();
    (deploy["files_pushed"].as_u64().unwrap(), deploy["bytes_pushed"].as_u64().unwrap(), names)
}

#[test]
fn external_data_models_run_on_a_rack_are_pushed_once_and_a_weights_change_is_a_new_model() {
    let work = tempfile::tempdir().unwrap();
    let one = resave_external(&model("smallcnn.onnx"), &work.path().join("one"), "one");
    let each = resave_external(&model("smallcnn.onnx"), &work.path().join("each"), "each");
    assert!(std::fs::read_dir(work.path().join("each")).unwrap().count() > 3, "one file per tensor");
    let ports = [6301u16, 6302];
    let rig = Rig::up(&ports);
    let serials: Vec<String> = ports.iter().map(|p| Rig::serial(*p)).collect();
    let rack = ["--device", &serials[0], "--device", &serials[1]];

    // The all-in-one model on a rack: both devices run it; the result lists the weights file.
    let first = work.path().join("first");
    let output = npugate_on(&rig, &rack, &one, &first);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let weights = std::fs::metadata(work.path().join("one/smallcnn.weights")).unwrap().len();
    for port in ports {
        let dir = first.join(format!("127.0.0.1_{port}"));
        let result = RunResult::read(&dir).unwrap();
        assert_eq!(result.model.files.len(), 1, "{:?}", result.model);
        assert_eq!((result.model.files[0].name.as_str(), result.model.files[0].bytes), ("smallcnn.weights", weights));
        assert_ne!(result.model.digest, result.model.sha256, "the digest covers the weights");
        let (files, _, names) = pushed(&dir);
        assert!(
            files >= 2 && names.iter().any(|n| n.ends_with(&format!("{}/smallcnn.weights", result.model.digest))),
            "{names:?}"
        );
        // On the device the model and its weights sit together in the model's own directory.
        let model_dir = rig.device_data(port).join(format!("local/tmp/npugate/models/{}", result.model.digest));
        assert!(model_dir.join("smallcnn.onnx").is_file() && model_dir.join("smallcnn.weights").is_file());
    }
    let before = RunResult::read(&first.join("127.0.0.1_6301")).unwrap();

    // A second deploy of the unchanged model pushes nothing.
    let second = work.path().join("second");
    let output = npugate_on(&rig, &["--device", &serials[0]], &one, &second);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let second = second.join("127.0.0.1_6301");
    assert_eq!(pushed(&second), (0, 0, vec![]), "an unchanged model pushes 0 bytes");
    // Linking it again leaves nothing beside it (toybox's `ln -f` over a link of the same file
    // would leave its `<name>_XXXXXX` temp link behind).
    let model_dir = rig.device_data(6301).join(format!("local/tmp/npugate/models/{}", before.model.digest));
    let mut names: Vec<String> =
        std::fs::read_dir(&model_dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["smallcnn.onnx", "smallcnn.weights"], "{}", model_dir.display());

    // Changing only the weights (same size) makes it another model, and pushes only the weights.
    let baseline = work.path().join("baseline.json");
    let save = run(Command::new(bin("npugate")).args(["baseline", "save"]).arg(&second).arg("--out").arg(&baseline));
    assert!(save.status.success(), "{}", describe(&save));
    let weights_path = work.path().join("one/smallcnn.weights");
    let mut bytes = std::fs::read(&weights_path).unwrap();
    for byte in bytes.iter_mut().take(64) {
        *byte ^= 0x01;
    }
    std::fs::write(&weights_path, bytes).unwrap();
    let changed = work.path().join("changed");
    let output = npugate_on(&rig, &["--device", &serials[0]], &one, &changed);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let changed = changed.join("127.0.0.1_6301");
    let after = RunResult::read(&changed).unwrap();
    assert_eq!(after.model.sha256, before.model.sha256, "the .onnx is the same");
    assert_ne!(after.model.digest, before.model.digest, "the model is not");
    let (files, bytes_pushed, names) = pushed(&changed);
    assert_eq!((files, bytes_pushed), (1, weights), "only the weights crossed the cable: {names:?}");
    assert!(names[0].ends_with("/smallcnn.weights"), "{names:?}");
    // A baseline saved before the change does not silently match.
    let gate = run(Command::new(bin("npugate"))
        .args(["gate"])
        .arg(&changed)
        .args(["--rule", "cv_pct=100000", "--baseline"])
        .arg(&baseline));
    assert_eq!(gate.status.code(), Some(2), "{}", describe(&gate));
    assert!(String::from_utf8_lossy(&gate.stdout).contains("model digest"), "{}", describe(&gate));

    // One file per tensor runs the same way.
    let per_file = work.path().join("per-file");
    let output = npugate_on(&rig, &["--device", &serials[1]], &each, &per_file);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let result = RunResult::read(&per_file.join("127.0.0.1_6302")).unwrap();
    assert!(result.model.files.len() > 3, "{:?}", result.model.files);
}

#[test]
fn a_real_model_resaved_with_external_data_in_constants_runs_on_a_device() {
    let work = tempfile::tempdir().unwrap();
    // PP-OCR's direction classifier keeps its 308 weights in Constant nodes: convert_attribute moves
    // them into the data file; `--shape` fixes its dynamic dims in a copy that still finds them.
    let cls = resave_external(&sample("ppocr-cls"), work.path(), "one");
    let port = 6311;
    let rig = Rig::up(&[port]);
    let out = work.path().join("cls");
    let output = npugate_on(&rig, &["--device", &Rig::serial(port), "--shape", "x=1x3x48x192"], &cls, &out);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let result = RunResult::read(&out.join(format!("127.0.0.1_{port}"))).unwrap();
    assert_eq!(result.model.files.len(), 1, "{:?}", result.model);
    assert!(result.model.files[0].bytes > 400_000, "{:?}", result.model.files);

    // The same model on the host: the same digest.
    let local = work.path().join("local");
    let output = run(Command::new(bin("npugate"))
        .args([
            "run",
            "--local",
            "--runtime",
            RUNTIME,
            "--no-gate",
            "--runs",
            "2",
            "--warmup",
            "0",
            "--profile-runs",
            "0",
            "--shape",
            "x=1x3x48x192",
            "--model",
        ])
        .arg(&cls)
        .arg("--out")
        .arg(&local));
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert_eq!(RunResult::read(&local).unwrap().model.digest, result.model.digest);
}

#[test]
fn a_path_out_of_the_model_folder_is_refused_before_anything_is_pushed() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("model");
    let one = resave_external(&model("smallcnn.onnx"), &dir, "one");
    let port = 6321;
    let rig = Rig::up(&[port]);
    let blobs = rig.device_data(port).join("local/tmp/npugate/blobs");
    let serial = Rig::serial(port);
    let device = ["--device", serial.as_str()];

    // `location` climbing out of the folder.
    let script = r#"
import sys, onnx
m = onnx.load(sys.argv[1], load_external_data=False)
for t in m.graph.initializer:
    for e in t.external_data:
        if e.key == "location": e.value = sys.argv[2]
onnx.save(m, sys.argv[3])
"#;
    let climbing = dir.join("climbing.onnx");
    let output = run(Command::new(python()).arg("-c").arg(script).arg(&one).arg("../../etc/passwd").arg(&climbing));
    assert!(output.status.success(), "{}", describe(&output));
    let refused = npugate_on(&rig, &device, &climbing, &work.path().join("climbing"));
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("climbing.onnx") && stderr.contains("../../etc/passwd") && stderr.contains("climbs out"),
        "{}",
        describe(&refused)
    );

    // A symlink in the folder that leads out of it.
    std::os::unix::fs::symlink("/etc/passwd", dir.join("escape.weights")).unwrap();
    let linked = dir.join("linked.onnx");
    let output = run(Command::new(python()).arg("-c").arg(script).arg(&one).arg("escape.weights").arg(&linked));
    assert!(output.status.success(), "{}", describe(&output));
    let refused = npugate_on(&rig, &device, &linked, &work.path().join("linked"));
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("outside the model's folder"), "{}", describe(&refused));

    // A truncated data file.
    let weights = dir.join("smallcnn.weights");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let refused = npugate_on(&rig, &device, &one, &work.path().join("short"));
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("truncated"), "{}", describe(&refused));
    assert!(!blobs.exists() || std::fs::read_dir(&blobs).unwrap().next().is_none(), "nothing was pushed");
}

#[test]
fn a_compiled_model_with_its_context_file_is_deployed_as_a_set_and_runs_alone_under_the_host_htp() {
    let work = tempfile::tempdir().unwrap();
    let ctx = work.path().join("compiled/smallcnn_qdq_ctx.onnx");
    std::fs::create_dir_all(ctx.parent().unwrap()).unwrap();
    let compile = run(Command::new(bin("npugate"))
        .args(["compile", "--soc", "SM8650", "--context-file", "--model"])
        .arg(model("smallcnn_qdq.onnx"))
        .arg("--out")
        .arg(&ctx));
    assert_eq!(compile.status.code(), Some(0), "{}", describe(&compile));
    let references = npugate_onnx::Model::read(&ctx).unwrap().file_references().unwrap();
    let names: Vec<&str> = references.ep_contexts.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(names, ["smallcnn_qdq_ctx.bin"], "the context binary is a file beside the model, named after it");

    // From a directory that holds nothing else, the host HTP runs it.
    let alone = work.path().join("alone");
    std::fs::create_dir_all(&alone).unwrap();
    for name in ["smallcnn_qdq_ctx.onnx", "smallcnn_qdq_ctx.bin"] {
        std::fs::copy(ctx.with_file_name(name), alone.join(name)).unwrap();
    }
    let model_path = alone.join("smallcnn_qdq_ctx.onnx");
    let emulated = work.path().join("emulated");
    let output = run(Command::new(bin("npugate"))
        .args([
            "run",
            "--local",
            "--ep",
            "qnn",
            "--soc",
            "SM8650",
            "--runs",
            "2",
            "--warmup",
            "0",
            "--profile-runs",
            "0",
            "--no-reference-pass",
            "--no-gate",
            "--model",
        ])
        .arg(&model_path)
        .arg("--out")
        .arg(&emulated));
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let result = RunResult::read(&emulated).unwrap();
    assert_eq!(result.model.files.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["smallcnn_qdq_ctx.bin"]);
    assert!(result
        .assignment
        .subgraphs
        .iter()
        .any(|s| s.ep == "QNNExecutionProvider" && s.nodes.iter().any(|n| n.op_type == "EPContext")));

    // On a board (an SM8650 by its kernel's chip id) the .bin is deployed beside the model.
    let port = 6331;
    let rig = Rig::up_with(&[Device::new(port).soc_id(557)]);
    let device = work.path().join("device");
    let output = npugate_on(&rig, &["--device", &Rig::serial(port), "--no-gate"], &model_path, &device);
    let model_dir = rig.device_data(port).join(format!("local/tmp/npugate/models/{}", result.model.digest));
    assert!(
        model_dir.join("smallcnn_qdq_ctx.onnx").is_file() && model_dir.join("smallcnn_qdq_ctx.bin").is_file(),
        "{}",
        describe(&output)
    );
}
