//! A compiled (EPContext) model is a first-class model (issue 23, item 1): `npugate compile` →
//! `npugate run --local --ep qnn --soc SM8650` with default flags, its reference pass and output
//! check on the source model, its FLOPs counted in the source's nodes; a partially compiled model
//! naming its CPU nodes; and ONNX Runtime's own compiled output (`ep.context_enable`, embed mode 0
//! and 1); numerics of a compiled model against its source. Real ONNX Runtime 1.31.1 with
//! onnxruntime-qnn 2.7.0's x86_64 HTP backend under wine, on models made by
//! `scripts/make-test-models`.

use std::path::{Path, PathBuf};
use std::process::Output;

use npugate_e2e::devices::{Device, Rig};
use npugate_e2e::htp::{harness_under_wine, npugate, HTP_RUNTIME};
use npugate_e2e::{bin, describe, independent_count, model, run};
use npugate_onnx::Model;
use npugate_result::files;
use serde_json::Value;

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .expect("valid JSON")
}

/// `model` copied into `dir` (so that the source recorded at compile time is a file the test owns).
fn copy_model(name: &str, dir: &Path) -> PathBuf {
    let copy = dir.join(name);
    std::fs::copy(model(name), &copy).expect("copy the test model");
    copy
}

/// `smallcnn_qdq.onnx` copied into `dir` and compiled by `npugate compile --soc SM8650` into
/// `dir/compiled/` (so the recorded source is `../smallcnn_qdq.onnx`): the source and the compiled model.
/// `--out` names the folder (the documented `compile --out DIR` form): the model is its `<model>_ctx.onnx`.
fn compile_smallcnn(dir: &Path) -> (PathBuf, PathBuf) {
    let source = copy_model("smallcnn_qdq.onnx", dir);
    let folder = dir.join("compiled");
    std::fs::create_dir(&folder).unwrap();
    let ctx = folder.join("smallcnn_qdq_ctx.onnx");
    let compile =
        npugate(&["compile", "--soc", "SM8650"], &[Path::new("--model"), &source, Path::new("--out"), &folder]);
    assert_eq!(compile.status.code(), Some(0), "{}", describe(&compile));
    assert!(ctx.is_file(), "compile --out DIR writes <model>_ctx.onnx there: {}", describe(&compile));
    (source, ctx)
}

/// `npugate run --local --ep qnn --soc SM8650` of `model` into `out`, with `extra` flags.
fn emulate(model: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["run", "--local", "--ep", "qnn", "--soc", "SM8650"];
    args.extend(extra);
    npugate(&args, &[Path::new("--model"), model, Path::new("--out"), out])
}

/// The placement of the verdict in `dir`.
fn placement_in(dir: &Path) -> Value {
    read_json(&dir.join("verdict.json"))["placement"].clone()
}

/// The fallback entry named `name` of a placement.
fn fallback<'a>(placement: &'a Value, name: &str) -> &'a Value {
    placement["fallback"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("{name} is no fallback: {placement:#}"))
}

/// The names of a model's EPContext nodes.
fn ep_context_nodes(model: &Path) -> Vec<String> {
    let model = Model::read(model).unwrap();
    model.index().nodes().iter().filter(|n| n.op_type() == "EPContext").map(|n| n.name().to_string()).collect()
}

#[test]
fn compile_then_run_with_default_flags_counts_the_source_flops_and_checks_outputs_against_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let (source, ctx) = compile_smallcnn(dir.path());
    let recorded = Model::read(&ctx).unwrap().metadata("npugate.compiled_for.source_model").map(str::to_string);
    assert_eq!(
        recorded.as_deref(),
        Some("../smallcnn_qdq.onnx"),
        "the source is recorded relative to the compiled model"
    );

    // Default flags (plus --check-outputs): the reference pass and the output check run the source.
    let out = dir.path().join("run");
    let run = emulate(&ctx, &out, &["--check-outputs"]);
    assert_eq!(run.status.code(), Some(0), "{}", describe(&run));
    assert!(!stderr(&run).contains("no reference pass"), "{}", describe(&run));
    let placement = placement_in(&out);
    assert!(placement["preferred_flops_pct"].as_f64().unwrap() >= 98.0, "{placement:#}");
    assert_eq!(placement["compiled"]["attribution"], "compile_record", "{placement:#}");
    let source_sha256 = npugate_result::digest::sha256_file(&source).unwrap().0;
    assert_eq!(placement["compiled"]["source_sha256"], source_sha256.as_str());
    // Counted in the source's own nodes, Conv/Gemm FLOPs equal to the independent count, all on the HTP.
    let nodes = placement["nodes"].as_array().unwrap();
    let source_nodes = Model::read(&source).unwrap().index().nodes().len();
    assert_eq!(placement["totals"]["model_nodes"].as_u64(), Some(source_nodes as u64), "{placement:#}");
    let heavy: Vec<&Value> = nodes.iter().filter(|n| n["op_type"] == "Conv" || n["op_type"] == "Gemm").collect();
    assert!(heavy.iter().all(|n| n["ep"] == "QNNExecutionProvider"), "{heavy:#?}");
    let counted: u64 = heavy.iter().map(|n| n["flops"].as_u64().unwrap()).sum();
    assert_eq!(counted, independent_count(&source, &[])["flops"].as_u64().unwrap());
    // Graph-I/O Q/DQ the EP leaves to the CPU are by design; nothing else is off the HTP.
    let off: Vec<(&str, bool)> = placement["fallback"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap(), f["expected"].as_bool().unwrap()))
        .collect();
    assert_eq!(off.len(), 2, "{off:?}");
    assert!(off.iter().all(|&(_, expected)| expected), "{off:?}");
    let outputs = read_json(&out.join("outputs.json"));
    assert_eq!(
        outputs["reference"]["model_sha256"],
        source_sha256.as_str(),
        "outputs checked against the source: {outputs:#}"
    );
    assert!(outputs["outputs"][0]["metrics"]["cosine"].as_f64().unwrap() > 0.99, "{outputs:#}");
    assert!(out.join(files::REFERENCE_PROFILE).is_file(), "the harness's reference pass ran the source");

    // The source moved away: one line says why there is no reference pass and what to pass.
    let moved = dir.path().join("elsewhere.onnx");
    std::fs::rename(&source, &moved).unwrap();
    let quick = ["--runs", "3", "--warmup", "0", "--profile-runs", "1"];
    let without = emulate(&ctx, &dir.path().join("without"), &quick);
    let text = stderr(&without);
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("no reference pass and no output check")).collect();
    assert_eq!(lines.len(), 1, "{}", describe(&without));
    assert!(lines[0].contains("is not there") && lines[0].contains("pass --reference-model"), "{}", lines[0]);
    assert!(
        String::from_utf8_lossy(&without.stdout).contains("EPContext nodes attributed by nothing"),
        "{}",
        describe(&without)
    );
    assert_eq!(placement_in(&dir.path().join("without"))["compiled"]["attribution"], "unattributed");
    // Given again with --reference-model, wherever it is.
    let given = emulate(
        &ctx,
        &dir.path().join("given"),
        &[&quick[..], &["--reference-model", moved.to_str().unwrap()]].concat(),
    );
    assert_eq!(given.status.code(), Some(0), "{}", describe(&given));
    let placement = placement_in(&dir.path().join("given"));
    assert_eq!(
        (placement["compiled"]["attribution"].as_str(), placement["preferred_flops_pct"].as_f64()),
        (Some("compile_record"), Some(100.0))
    );
}

#[test]
fn a_partially_compiled_model_names_its_cpu_nodes_and_graph_io_quantization_is_by_design() {
    let dir = tempfile::tempdir().unwrap();
    let source = copy_model("compiled_split_qdq.onnx", dir.path());
    let ctx = dir.path().join("split_ctx.onnx");
    let compile = npugate(&["compile", "--soc", "SM8650"], &[Path::new("--model"), &source, Path::new("--out"), &ctx]);
    assert_eq!(compile.status.code(), Some(1), "nodes left on the CPU: {}", describe(&compile));
    assert!(String::from_utf8_lossy(&compile.stdout).contains("left on the CPU: det (Det)"), "{}", describe(&compile));
    let compiled = Model::read(&ctx).unwrap();
    let ops: Vec<&str> = compiled.index().nodes().iter().map(|n| n.op_type()).collect();
    assert_eq!(ops.iter().filter(|op| **op == "EPContext").count(), 2, "{ops:?}");
    let det = ops.iter().position(|op| *op == "Det").expect("the Det stays a plain node");
    assert!(
        ops[..det].contains(&"EPContext") && ops[det..].contains(&"EPContext"),
        "the Det sits between the two EPContext nodes: {ops:?}"
    );

    let out = dir.path().join("run");
    let run = emulate(&ctx, &out, &["--runs", "3", "--warmup", "0", "--profile-runs", "1"]);
    assert_eq!(run.status.code(), Some(1), "the Det fails the FLOPs rule: {}", describe(&run));
    let placement = placement_in(&out);
    assert_eq!(placement["compiled"]["attribution"], "compile_record");
    assert_eq!(placement["partitions"].as_array().unwrap().len(), 2, "{placement:#}");
    let det = fallback(&placement, "det");
    assert_eq!((det["op_type"].as_str(), det["expected"].as_bool()), (Some("Det"), Some(false)), "{det:#}");
    assert_eq!(fallback(&placement, "x_QuantizeLinear")["expected"], true, "graph-input quantization is by design");
    let blamed: Vec<&str> = placement["fallback"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["expected"] == false)
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(blamed, ["det"]);
    let gate = String::from_utf8_lossy(&run.stdout);
    assert!(gate.contains("FAIL    npu_flops_pct") && gate.contains("Det node det"), "{}", describe(&run));
}

/// The names of the nodes a report leaves to the CPU: preflight's SoC entry (`fallback`, the
/// graph-I/O quantization it expects there left out) or a compiled model's (`left_on_cpu`).
fn left_to_cpu(entries: &Value) -> std::collections::BTreeSet<String> {
    let entries = entries.as_array().unwrap_or_else(|| panic!("a list: {entries}"));
    entries.iter().filter(|e| e["expected"] != true).map(|e| e["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn models_with_control_flow_compile_with_the_if_and_the_loop_left_where_the_ep_leaves_them() {
    let dir = tempfile::tempdir().unwrap();
    // An If whose branch reads an outer initializer; a Loop whose body folds a constant.
    for (name, control_flow) in [("if_outer_weight.onnx", "If"), ("loop_folds_constant.onnx", "Loop")] {
        let source = copy_model(name, dir.path());
        let ctx = dir.path().join(name.replace(".onnx", "_ctx.onnx"));
        let compile = npugate(
            &["compile", "--soc", "SM8650", "--json"],
            &[Path::new("--model"), &source, Path::new("--out"), &ctx],
        );
        assert!(matches!(compile.status.code(), Some(0 | 1)), "{name}: {}", describe(&compile));
        let compiled = Model::read(&ctx).unwrap();
        let main: Vec<&str> = compiled
            .index()
            .nodes()
            .iter()
            .filter(|n| n.graph == npugate_onnx::GraphId::MAIN)
            .map(|n| n.op_type())
            .collect();
        assert!(main.contains(&"EPContext") && main.contains(&control_flow), "{name}: {main:?}");
        // The outer initializers exposed for the compile are not outputs of the compiled model.
        let outputs = |model: &Model| model.proto().graph.as_ref().unwrap().output.len();
        assert_eq!(outputs(&compiled), outputs(&Model::read(&source).unwrap()), "{name}");
        let leftovers = std::fs::read_dir(dir.path()).unwrap().flatten();
        assert!(leftovers.into_iter().all(|e| !e.file_name().to_string_lossy().starts_with(".npugate-control-flow")));

        // Compiled with the graph optimizations a session of the model gets (the Loop body's
        // Squeeze folded away), the EP splits the Loop model as it does in preflight, and the
        // compile names what preflight names. (An If's untaken branch is none of preflight's: it
        // counts the nodes its CPU reference pass ran.)
        let job_dir = dir.path().join(format!("{}.compile", ctx.file_name().unwrap().to_string_lossy()));
        let job = read_json(&job_dir.join(files::RESULT));
        assert_eq!(job["execution"]["optimization_level"], "all", "{name}: {}", job["execution"]);
        if control_flow == "Loop" {
            let out = dir.path().join("preflight");
            let preflight =
                npugate(&["preflight", "--soc", "SM8650"], &[Path::new("--model"), &source, Path::new("--out"), &out]);
            assert!(matches!(preflight.status.code(), Some(0 | 1)), "{name}: {}", describe(&preflight));
            assert_eq!(split(&job), split(&read_json(&out.join("SM8650").join(files::RESULT))), "{name}");
            let report: Value = serde_json::from_slice(&compile.stdout).unwrap_or_else(|e| panic!("{name}: {e}"));
            let expected = left_to_cpu(&read_json(&out.join("preflight.json"))["socs"][0]["fallback"]);
            assert!(expected.contains("steps_loop") && !expected.contains("squeeze_constant"), "{expected:?}");
            assert_eq!(left_to_cpu(&report["compiled"][0]["left_on_cpu"]), expected, "{name}: {report:#}");
        }
    }
}

/// Which EP a session gave each node (`assignment` of a harness's result.json).
fn split(result: &Value) -> std::collections::BTreeSet<(String, String)> {
    let subgraphs = result["assignment"]["subgraphs"].as_array().unwrap_or_else(|| panic!("{result:#}"));
    let nodes = subgraphs.iter().flat_map(|s| s["nodes"].as_array().unwrap().iter().map(move |n| (s, n)));
    nodes.map(|(s, n)| (s["ep"].as_str().unwrap().to_string(), n["name"].as_str().unwrap().to_string())).collect()
}

#[test]
fn onnx_runtimes_own_compiled_output_runs_the_same_way_in_embed_mode_0_and_1() {
    let dir = tempfile::tempdir().unwrap();
    let source = copy_model("smallcnn_qdq.onnx", dir.path());
    for embed in ["0", "1"] {
        // ONNX Runtime's own compile (the real ORT + QNN plugin under wine, no npugate in between).
        let made = dir.path().join(format!("ort-embed{embed}"));
        let embed_mode = format!("ep.context_embed_mode={embed}");
        let args = [
            "--session-only",
            "--soc-model",
            "57",
            "--session-config",
            "ep.context_enable=1",
            "--session-config",
            &embed_mode,
            "--session-config",
            "ep.context_file_path=ort_ctx.onnx",
        ];
        let compiled = harness_under_wine(HTP_RUNTIME, &source, &made, &args);
        assert!(compiled.status.success(), "{}", describe(&compiled));
        let ctx = made.join("ort_ctx.onnx");
        assert_eq!(ep_context_nodes(&ctx).len(), 1);
        let files = Model::read(&ctx).unwrap().file_references().unwrap().ep_contexts.len();
        assert_eq!(files, if embed == "0" { 1 } else { 0 }, "embed mode {embed}");

        // Without npugate's record: attributed by the source model's graph, and the run says so.
        let out = dir.path().join(format!("run-embed{embed}"));
        let run = emulate(
            &ctx,
            &out,
            &[
                "--runs",
                "3",
                "--warmup",
                "0",
                "--profile-runs",
                "1",
                "--check-outputs",
                "--reference-model",
                source.to_str().unwrap(),
            ],
        );
        assert_eq!(run.status.code(), Some(0), "{}", describe(&run));
        assert!(
            String::from_utf8_lossy(&run.stdout).contains("EPContext nodes attributed by the source model's graph"),
            "{}",
            describe(&run)
        );
        let placement = placement_in(&out);
        assert_eq!(placement["compiled"]["attribution"], "source_model", "{placement:#}");
        assert!(placement["preferred_flops_pct"].as_f64().unwrap() >= 98.0, "{placement:#}");
        assert_eq!(
            read_json(&out.join("outputs.json"))["outputs"][0]["metrics"]["cosine"].as_f64().map(|c| c > 0.99),
            Some(true)
        );
    }
    // Without a source: unattributed, said once on the terminal and in the placement.
    let ctx = dir.path().join("ort-embed1/ort_ctx.onnx");
    let out = dir.path().join("run-unattributed");
    let run = emulate(&ctx, &out, &["--runs", "3", "--warmup", "0", "--profile-runs", "1"]);
    assert_eq!(stderr(&run).matches("no reference pass and no output check").count(), 1, "{}", describe(&run));
    assert!(stderr(&run).contains("names no source model"), "{}", describe(&run));
    assert_eq!(placement_in(&out)["compiled"]["attribution"], "unattributed");
    // No FLOPs known: the share and the by-design Q/DQ both count by nodes, and the gate says so.
    assert_eq!(run.status.code(), Some(0), "no fake 33% share: {}", describe(&run));
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("npu_flops_pct 100.0% >= 98% (no FLOPs known: counted by nodes)"),
        "{}",
        describe(&run)
    );
}

#[test]
fn a_sweep_cell_of_a_compiled_model_counts_the_source_flops_and_its_evidence_holds_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let (source, ctx) = compile_smallcnn(dir.path());
    // A host-HTP cell of the compiled model, no reference_model in the plan: the source npugate compile recorded.
    let plan = dir.path().join("sweep.toml");
    let entry = format!(
        "[[model]]\nname = \"ctx\"\npath = {:?}\nrules = {{ npu_flops_pct = 98 }}\n",
        ctx.display().to_string()
    );
    std::fs::write(
        &plan,
        format!(
            "name = \"compiled\"\nsocs = [\"SM8650\"]\n[settings]\nruns = 3\nwarmup = 0\nprofile_runs = 1\n{entry}"
        ),
    )
    .unwrap();
    let key = dir.path().join("signing.key");
    let keygen = npugate(&["keygen"], &[Path::new("--out"), &key]);
    assert_eq!(keygen.status.code(), Some(0), "{}", describe(&keygen));
    let (out, bundle) = (dir.path().join("sweep"), dir.path().join("bundle"));
    let sweep = npugate(
        &["sweep", "--night", "2026-11-23"],
        &[
            Path::new("--plan"),
            &plan,
            Path::new("--out"),
            &out,
            Path::new("--history"),
            &dir.path().join("history.sqlite"),
            Path::new("--evidence"),
            &bundle,
            Path::new("--signing-key"),
            &key,
        ],
    );
    assert_eq!(sweep.status.code(), Some(0), "{}", describe(&sweep));
    assert!(!stderr(&sweep).contains("no reference pass"), "{}", describe(&sweep));
    let cell = out.join(format!("htp-SM8650/{HTP_RUNTIME}/ctx"));
    let placement = placement_in(&cell);
    assert_eq!(placement["compiled"]["attribution"], "compile_record", "{placement:#}");
    assert!(placement["preferred_flops_pct"].as_f64().unwrap() >= 98.0, "{placement:#}");
    let source_sha256 = npugate_result::digest::sha256_file(&source).unwrap().0;
    assert_eq!(
        placement["compiled"]["source_sha256"],
        source_sha256.as_str(),
        "counted in the source's nodes: {placement:#}"
    );
    assert!(cell.join(files::REFERENCE_PROFILE).is_file(), "the cell's reference pass ran the source");
    let bundled = bundle.join("reference-model/ctx/smallcnn_qdq.onnx");
    assert_eq!(
        npugate_result::digest::sha256_file(&bundled).map(|d| d.0).ok(),
        Some(source_sha256),
        "the evidence holds the source model"
    );
}

#[test]
fn a_device_run_deploys_the_source_beside_the_compiled_model_and_names_a_runtime_that_cannot_load_it() {
    let dir = tempfile::tempdir().unwrap();
    let (source, ctx) = compile_smallcnn(dir.path());
    // A board whose kernel reads SM8650 (chip id 557). The rig's runtime is a CPU-only ONNX Runtime:
    // it cannot load an EPContext model, so the run can prove only the deployment and the refusal.
    let port = 6213;
    let rig = Rig::up_with(&[Device::new(port).soc_id(557)]);
    let on_device = run(rig
        .command(bin("npugate"))
        .args([
            "run",
            "--device",
            &Rig::serial(port),
            "--runtime",
            "ort-1.31.1-linux-x86_64",
            "--ep",
            "qnn",
            "--runs",
            "3",
            "--warmup",
            "0",
            "--model",
        ])
        .arg(&ctx)
        .arg("--out")
        .arg(dir.path().join("device")));
    assert_eq!(on_device.status.code(), Some(2), "{}", describe(&on_device));
    let text = stdout_and_stderr(&on_device);
    assert!(
        text.contains("before measuring anything") && text.contains("QNNExecutionProvider is not in this ONNX Runtime"),
        "{}",
        describe(&on_device)
    );
    assert!(!text.contains("no reference pass"), "the recorded source was found: {}", describe(&on_device));
    // The source model was deployed beside the compiled one, as the reference pass's model.
    let models = rig.device_data(port).join("local/tmp/npugate/models");
    let deployed: Vec<PathBuf> = std::fs::read_dir(&models)
        .unwrap()
        .flatten()
        .map(|d| d.path().join("smallcnn_qdq.onnx"))
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(deployed.len(), 1, "{}", models.display());
    assert_eq!(
        std::fs::read(&deployed[0]).unwrap(),
        std::fs::read(&source).unwrap(),
        "the source's bytes on the device"
    );
    let compiled: Vec<PathBuf> = std::fs::read_dir(&models)
        .unwrap()
        .flatten()
        .map(|d| d.path().join("smallcnn_qdq_ctx.onnx"))
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(compiled.len(), 1, "the compiled model beside it: {}", models.display());
}

#[test]
fn numerics_of_a_compiled_model_compares_what_the_context_shows_against_its_recorded_source() {
    let dir = tempfile::tempdir().unwrap();
    let (source, ctx) = compile_smallcnn(dir.path());
    // No --reference-model: the reference is the source npugate compile recorded, run on the CPU EP.
    let out = dir.path().join("numerics");
    let numerics = npugate(
        &["numerics", "--ep", "qnn", "--soc", "SM8650", "--json"],
        &[Path::new("--model"), &ctx, Path::new("--out"), &out],
    );
    assert_eq!(numerics.status.code(), Some(0), "the HTP runs the source's own quantization: {}", describe(&numerics));
    let report: Value =
        serde_json::from_slice(&numerics.stdout).unwrap_or_else(|e| panic!("JSON ({e}): {}", describe(&numerics)));
    let reference = std::fs::canonicalize(report["reference"]["path"].as_str().unwrap()).unwrap();
    assert_eq!(reference, std::fs::canonicalize(&source).unwrap(), "{:#}", report["reference"]);
    // What the compiled model shows — its graph outputs — is compared, on the emulated HTP.
    let source_outputs: Vec<String> = Model::read(&source)
        .unwrap()
        .proto()
        .graph
        .iter()
        .flat_map(|g| &g.output)
        .map(|o| o.name().to_string())
        .collect();
    let layers: Vec<&str> =
        report["layers"].as_array().unwrap().iter().map(|l| l["tensor"].as_str().unwrap()).collect();
    assert!(
        !layers.is_empty() && source_outputs.iter().all(|o| layers.contains(&o.as_str())),
        "{layers:?} vs outputs {source_outputs:?}"
    );
    let sqnr = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["results"][0]["sqnr_db"].as_f64().unwrap_or(f64::INFINITY))
        .fold(f64::INFINITY, f64::min);
    assert!(sqnr > 20.0, "HTP against the CPU on the same QDQ graph: {sqnr} dB");
    assert!(
        report["targets"][0]["placement"]["nodes_by_ep"]["QNNExecutionProvider"].as_u64().unwrap_or(0) >= 1,
        "{:#}",
        report["targets"][0]
    );
    // The source's inner tensors are named as inside the context, not as "fused away or renamed".
    let reasons: Vec<&str> = report["unmatched"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["side"] == "reference")
        .map(|u| u["reason"].as_str().unwrap())
        .collect();
    // (Copies of a weight — a Cast or Identity of an initializer — are matched as weights.)
    assert!(
        reasons.contains(&"inside_compiled_context")
            && reasons.iter().all(|r| ["inside_compiled_context", "weight_copy"].contains(r)),
        "{reasons:?}"
    );
    let text = npugate(
        &["numerics", "--ep", "qnn", "--soc", "SM8650"],
        &[Path::new("--model"), &ctx, Path::new("--out"), &dir.path().join("text")],
    );
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("inside the model's compiled context"),
        "{}",
        describe(&text)
    );
}

fn stdout_and_stderr(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), stderr(output))
}
