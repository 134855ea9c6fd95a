//! LLM model folders on the other targets: a folder deployed to a device of the adbd rig as one
//! model (its config, graphs and their files under `models/<digest>/`) and generated on there, and
//! the static prompt/token pipeline on Qualcomm's HTP emulator (wine), where the token generator's
//! int32 `Neg` is rejected by the HTP: the gate fails naming that graph and node, while the
//! emulated tokens equal the CPU's; per-graph preflight (a float prompt graph v68 cannot compile
//! beside a uint8 token graph it can); a folder's weight-shared compile, which the emulator refuses
//! to load, also of a model builder's folder (its one dynamic graph compiled once per phase); a
//! sweep of a folder, whose history keeps its median TTFT.

use std::path::Path;
use std::process::Command;

use npugate_e2e::devices::Rig;
use npugate_e2e::{bin, describe, model_folder, run};
use npugate_result::RunResult;

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

#[test]
fn a_model_folder_is_deployed_as_one_model_and_generates_on_a_rig_device() {
    let port = 6471;
    let rig = Rig::up(&[port]);
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("device");
    let folder = model_folder("tinyllm");
    let mut command = rig.command(bin("npugate"));
    command.args([
        "run",
        "--runtime",
        "ort-1.31.1-linux-x86_64",
        "--device",
        &Rig::serial(port),
        "--rule",
        "disable=[\"cv_pct\"]",
    ]);
    command
        .args(["--prompt-tokens", "16", "--gen-tokens", "8", "--generations", "3", "--profile-runs", "1", "--model"])
        .arg(&folder)
        .arg("--out")
        .arg(&out);
    let output = run(&mut command);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));

    let out = out.join(format!("127.0.0.1_{port}"));
    let result = RunResult::read(&out).unwrap();
    let generation = result.generation.as_ref().expect("a generation on the device");
    // 24 decode steps asked; whole generations more when steps waited for a CPU.
    let steps = npugate_e2e::runs_taken(&result, 24);
    assert_eq!(
        (generation.ttft_ns.len(), generation.decode_ns.iter().map(Vec::len).sum::<usize>()),
        (steps / 8, steps)
    );
    assert!(
        generation.prefill_tok_s > 0.0
            && generation.decode_tok_s > 0.0
            && generation.decode.as_ref().is_some_and(|d| d.n == steps)
    );
    assert_eq!(generation.kv.copies_per_step, 0.0);
    let deploy = &json(&out.join("device_run.json"))["deploy"];
    let remotes: Vec<String> =
        deploy["files"].as_array().unwrap().iter().map(|f| f["remote"].as_str().unwrap().to_string()).collect();
    let model_dir = format!("models/{}", result.model.digest);
    for name in ["genai_config.json", "model.onnx"] {
        assert!(remotes.contains(&format!("{model_dir}/{name}")), "{name} deployed into {model_dir}: {remotes:?}");
    }
    assert!(result.model.files.iter().any(|f| f.name == "model.onnx"), "the graph is one of the model's files");
}

#[test]
fn a_graph_the_htp_rejects_in_the_token_generator_only_fails_the_gate_naming_graph_and_node() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("htp");
    let folder = model_folder("tinyllm_qnn_fallback");
    let mut command = Command::new(bin("npugate"));
    command.args([
        "run",
        "--local",
        "--ep",
        "qnn",
        "--soc",
        "SM8650",
        "--check-outputs",
        "--rule",
        "max_fallback_nodes=0",
    ]);
    command
        .args([
            "--prompt-tokens",
            "8",
            "--gen-tokens",
            "4",
            "--generations",
            "1",
            "--warmup-generations",
            "0",
            "--model",
        ])
        .arg(&folder)
        .arg("--out")
        .arg(&out);
    let output = run(&mut command);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("FAIL    max_fallback_nodes") && stdout.contains("token-generator:positions/neg1"),
        "{stdout}"
    );

    let verdict = json(&out.join("verdict.json"));
    let graphs: Vec<(String, u64)> = verdict["placement"]["graphs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["graph"].as_str().unwrap().to_string(), g["fallback_nodes"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        graphs,
        [("prompt-processor".to_string(), 0), ("token-generator".to_string(), 2)],
        "the prompt graph runs whole on the HTP"
    );
    let fallen: Vec<&str> =
        verdict["placement"]["fallback"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(fallen, ["token-generator:positions/neg1", "token-generator:positions/neg2"]);
    assert!(verdict["placement"]["fallback"][0]["reason"].as_str().unwrap().contains("INT_32"), "QNN's own reason");
    // The emulator's generated tokens are the fp32 CPU reference's (the step logits within fp16).
    let outputs = json(&out.join("outputs.json"));
    assert_eq!(outputs["tokens"]["agreement_pct"], 100.0);
    assert_eq!(outputs["outputs"][0]["name"], "step_logits");
    assert!(outputs["outputs"][0]["metrics"]["cosine"].as_f64().unwrap() > 0.999);
    let result = RunResult::read(&out).unwrap();
    assert!(result.execution.emulated.is_some());
    assert!(verdict["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["rule"] == "cv_pct" && c["status"] == "not_applicable"));
}

#[test]
fn preflight_of_a_folder_judges_each_graph_per_soc_in_one_line() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("preflight");
    let folder = model_folder("tinyllm_qnn_fallback");
    let output = run(Command::new(bin("npugate"))
        .args(["preflight", "--soc", "SM8650", "--model"])
        .arg(&folder)
        .arg("--out")
        .arg(&out));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("graph prompt-processor (prompt.onnx) on SM8650 (v75): pass: every node on the HTP, compiled"),
        "{stdout}"
    );
    assert!(stdout.contains("graph token-generator (token.onnx) on SM8650 (v75): fail: 2 node(s) left to the CPU (positions/neg1, positions/neg2)"), "{stdout}");
    for graph in ["prompt-processor", "token-generator"] {
        assert!(out.join(graph).join("preflight.json").is_file(), "{graph}'s report");
    }
    // `--json`: one typed document holding each graph's report, not the lines as strings.
    let output = run(Command::new(bin("npugate"))
        .args(["preflight", "--soc", "SM8650", "--no-execute", "--json", "--model"])
        .arg(&folder)
        .arg("--out")
        .arg(work.path().join("json")));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&output)));
    assert_eq!(report["schema"], "npugate.htp-folder-preflight/1");
    assert_eq!(report["exit_code"], 1);
    let graphs: Vec<(&str, &str, &str)> = report["graphs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["graph"].as_str().unwrap(),
                g["dir"].as_str().unwrap(),
                g["report"]["socs"][0]["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        graphs,
        [("prompt-processor", "prompt-processor", "pass"), ("token-generator", "token-generator", "fail")]
    );
    assert_eq!(report["graphs"][1]["report"]["schema"], "npugate.htp-preflight/2");
}

#[test]
fn preflight_names_a_prompt_graph_that_fails_v68_while_the_token_graph_compiles_there() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("preflight");
    let folder = model_folder("tinyllm_qnn_v68");
    let output = run(Command::new(bin("npugate"))
        .args(["preflight", "--soc", "SM8350", "--soc", "SM8650", "--model"])
        .arg(&folder)
        .arg("--out")
        .arg(&out));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let verdicts: Vec<&str> =
        stdout.lines().filter(|line| line.starts_with("graph ") && line.contains(") on SM")).collect();
    assert_eq!(verdicts.len(), 4, "one line per graph and SoC: {stdout}");
    // The float prompt processor cannot compile for v68 (no float HTP); the uint8 token generator can.
    let prompt_v68 = verdicts
        .iter()
        .find(|line| line.starts_with("graph prompt-processor (prompt.onnx) on SM8350 (v68): "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        prompt_v68.contains(": fail: cannot compile for SM8350 (v68)") && prompt_v68.contains("q::Gather"),
        "{prompt_v68}"
    );
    for passed in [
        "graph token-generator (token.onnx) on SM8350 (v68): pass: every node on the HTP, compiled",
        "graph prompt-processor (prompt.onnx) on SM8650 (v75): pass: every node on the HTP, compiled",
        "graph token-generator (token.onnx) on SM8650 (v75): pass: every node on the HTP, compiled",
    ] {
        assert!(verdicts.contains(&passed), "{passed}\n{stdout}");
    }
}

#[test]
fn preflight_sizes_a_model_builder_folders_dynamic_graph_per_phase_from_its_config() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("preflight");
    let folder = model_folder("genai_builder_llama");
    let output = run(Command::new(bin("npugate"))
        .args(["preflight", "--soc", "SM8550", "--soc", "SM8650", "--no-execute"])
        .args(["--prompt-tokens", "16", "--context", "32", "--model"])
        .arg(&folder)
        .arg("--out")
        .arg(&out));
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The builder's CPU graph keeps its com.microsoft GroupQueryAttention and
    // SkipSimplifiedLayerNormalization, which the QNN EP does not take: each phase fails, judged.
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let verdicts: Vec<&str> = stdout
        .lines()
        .filter(|line| line.starts_with("graph decoder (model.onnx) ") && line.contains(" on SM"))
        .collect();
    assert_eq!(verdicts.len(), 4, "one line per phase and SoC: {stdout}");
    for phase in ["prompt", "token"] {
        for soc in ["SM8550 (v73)", "SM8650 (v75)"] {
            let line = format!("graph decoder (model.onnx) {phase} phase on {soc}: ");
            let left = "fail: 6 node(s) left to the CPU (/model/layers.0/attn/GroupQueryAttention, ";
            assert!(verdicts.iter().any(|v| v.starts_with(&line) && v.contains(left)), "{line}\n{stdout}");
        }
        assert!(out.join(format!("decoder.{phase}")).join("preflight.json").is_file(), "{phase}'s report");
    }
    // Sized as genai runs it: past_present_share_buffer binds the 32-position buffer in both phases.
    assert!(
        stdout.contains("prompt phase sized input_ids=1x16 attention_mask=1x16 past_key_values.0.key=1x2x32x16"),
        "{stdout}"
    );
    assert!(
        stdout.contains("token phase sized input_ids=1x1 attention_mask=1x32 past_key_values.0.key=1x2x32x16"),
        "{stdout}"
    );
    // The CPU reference job is fed as genai feeds (mask all ones, positions 0..n / the past length,
    // ids in the vocabulary): GroupQueryAttention runs, so every phase and SoC has its FLOPs.
    let printed = describe(&output);
    assert!(!printed.contains("FLOPs are unknown"), "{printed}");
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| (l.starts_with("SM8550 ") || l.starts_with("SM8650 ")) && l.contains(" v7"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    for row in rows {
        // SOC ARCH OUTCOME COMPILED RAN NODES-ON-HTP FLOPS-ON-HTP …
        let flops: f64 = row[6].trim_end_matches('%').parse().unwrap_or_else(|_| panic!("FLOPs shown: {row:?}"));
        assert!(flops > 50.0 && flops < 100.0, "the two attention nodes are left to the CPU: {row:?}");
    }
}

/// The FLOPS ON HTP cell of each SoC row of a preflight's table.
fn flops_on_htp(stdout: &str) -> Vec<f64> {
    stdout
        .lines()
        .filter(|l| (l.starts_with("SM8550 ") || l.starts_with("SM8650 ")) && l.contains(" v7"))
        .map(|l| l.split_whitespace().nth(6).and_then(|c| c.trim_end_matches('%').parse().ok()).expect(l))
        .collect()
}

#[test]
fn an_int4_builder_folder_preflights_per_phase_and_its_attention_moves_to_the_htp_with_the_op_affinity_the_hint_names()
{
    let work = tempfile::tempdir().unwrap();
    let folder = model_folder("genai_builder_qwen2_int4");
    let preflight = |out: &str, extra: &[&str]| {
        run(Command::new(bin("npugate"))
            .args(["preflight", "--soc", "SM8550", "--soc", "SM8650", "--no-execute"])
            .args(["--prompt-tokens", "16", "--context", "32"])
            .args(extra)
            .arg("--model")
            .arg(&folder)
            .arg("--out")
            .arg(work.path().join(out)))
    };
    let output = preflight("plain", &[]);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    // One line per phase and SoC; the tied embedding's GatherBlockQuantized is named with its reason.
    for phase in ["prompt", "token"] {
        for soc in ["SM8550 (v73)", "SM8650 (v75)"] {
            let line = format!("graph decoder (model.onnx) {phase} phase on {soc}: fail: ");
            assert!(
                stdout.lines().any(|l| l.starts_with(&line) && l.contains("/model/embed_tokens/GatherBlockQuantized")),
                "{line}\n{stdout}"
            );
        }
    }
    // onnxruntime-qnn keeps GroupQueryAttention on the CPU by default; the fix is a flag preflight takes.
    assert!(
        stdout
            .contains("(GroupQueryAttention): GroupQueryAttention filtered off QNN by the op_affinity provider option"),
        "{stdout}"
    );
    let fix = "fix: onnxruntime-qnn keeps GroupQueryAttention off the HTP unless its op_affinity config pins it there: pass --ep-option op_affinity=FILE";
    assert!(stdout.contains(fix), "{stdout}");
    let before = flops_on_htp(&stdout);
    assert_eq!(before.len(), 4, "{stdout}");

    let affinity = work.path().join("affinity.json");
    std::fs::write(&affinity, r#"{"op_type": {"GroupQueryAttention": "htp"}}"#).unwrap();
    let option = format!("op_affinity={}", affinity.display());
    let output = preflight("pinned", &["--ep-option", &option]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "SkipSimplifiedLayerNormalization stays on the CPU: {}",
        describe(&output)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        !stdout.contains("attn/GroupQueryAttention (GroupQueryAttention)"),
        "the attention runs on the HTP: {stdout}"
    );
    let after = flops_on_htp(&stdout);
    assert_eq!(after.len(), 4, "{stdout}");
    for (before, after) in before.iter().zip(&after) {
        assert!(after > before, "FLOPs on the HTP {before}% → {after}%: {stdout}");
    }
}

#[test]
fn a_builder_folder_run_on_the_htp_hints_the_preflight_sizing_never_the_refused_shape_flag() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("qnn");
    let folder = model_folder("genai_builder_llama");
    let output = run(Command::new(bin("npugate"))
        .args(["run", "--local", "--ep", "qnn", "--soc", "SM8650", "--prompt-tokens", "8", "--gen-tokens", "2"])
        .args(["--generations", "1", "--warmup-generations", "0", "--model"])
        .arg(&folder)
        .arg("--out")
        .arg(&out));
    // Its dynamic dims leave most nodes to the CPU ("Cannot get shape"): the gate fails.
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let printed = describe(&output);
    let verdict = std::fs::read_to_string(out.join("verdict.json")).unwrap();
    for text in [printed.as_str(), verdict.as_str()] {
        assert!(!text.contains("--shape"), "--shape is refused for a folder, so never hinted: {text}");
    }
    // The fix it hints is the one `preflight_sizes_a_model_builder_folders_dynamic_graph_per_phase_…` runs.
    let verdict = json(&out.join("verdict.json"));
    let causes = verdict["placement"]["rejections"].as_array().unwrap();
    let shape = causes.iter().find(|c| c["reason"] == "Cannot get shape").expect("a shape cause");
    let hint = shape["hint"].as_str().unwrap();
    assert!(hint.contains("npugate preflight --soc S --model FOLDER --prompt-tokens P --context C"), "{hint}");
}

/// Every EPContext node of the given EPContext models, read with the onnx package: (file, node,
/// embed_mode, main_context, the context binary it names: empty for a node that is not its graph's
/// main context, which names none).
const EP_CONTEXT_NODES: &str = r#"
import json, sys, onnx
nodes = []
for path in sys.argv[1:]:
    for node in onnx.load(path, load_external_data=False).graph.node:
        if node.op_type == "EPContext":
            a = {x.name: onnx.helper.get_attribute_value(x) for x in node.attribute}
            nodes.append([path.rsplit("/", 1)[-1], node.name, a.get("embed_mode"), a.get("main_context"), a.get("ep_cache_context", b"").decode()])
print(json.dumps(nodes))
"#;

#[test]
fn a_folder_compiles_into_one_weight_shared_context_whose_two_graphs_name_one_bin() {
    let work = tempfile::tempdir().unwrap();
    let compiled = work.path().join("tinyllm_qnn_ctx");
    let folder = model_folder("tinyllm_qnn");
    let output = run(Command::new(bin("npugate"))
        .args(["compile", "--soc", "SM8650", "--model"])
        .arg(&folder)
        .arg("--out")
        .arg(&compiled));
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("graph prompt-processor compiled for SM8650")
            && stdout.contains("graph token-generator compiled for SM8650"),
        "{stdout}"
    );
    let mut written: Vec<String> =
        std::fs::read_dir(&compiled).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    written.sort();
    let binaries: Vec<&String> = written.iter().filter(|name| name.ends_with(".bin")).collect();
    assert_eq!(binaries.len(), 1, "one context binary: {written:?}");
    for name in ["genai_config.json", "prompt_ctx.onnx", "token_ctx.onnx"] {
        assert!(written.contains(&name.to_string()), "{name} in {written:?}");
    }
    // Both graphs load from that one .bin (the onnx package's reading of their EPContext nodes).
    let graphs = [compiled.join("prompt_ctx.onnx"), compiled.join("token_ctx.onnx")];
    let output = run(Command::new(npugate_e2e::python()).arg("-c").arg(EP_CONTEXT_NODES).args(&graphs));
    assert!(output.status.success(), "{}", describe(&output));
    let nodes: Vec<(String, String, i64, i64, String)> = serde_json::from_slice(&output.stdout).unwrap();
    for graph in ["prompt_ctx.onnx", "token_ctx.onnx"] {
        assert!(nodes.iter().any(|n| n.0 == graph), "{graph} has an EPContext node: {nodes:?}");
    }
    assert!(
        nodes.iter().all(|n| n.2 == 0 && &n.4 == binaries[0]),
        "every EPContext node names {}: {nodes:?}",
        binaries[0]
    );
    let config = json(&compiled.join("genai_config.json"));
    let pipeline = &config["model"]["decoder"]["pipeline"][0];
    assert_eq!(
        (pipeline["prompt-processor"]["filename"].as_str(), pipeline["token-generator"]["filename"].as_str()),
        (Some("prompt_ctx.onnx"), Some("token_ctx.onnx"))
    );

    // QNN prepared both graphs with weight sharing on (its own words in the compile's log).
    let log = std::fs::read_to_string(work.path().join("tinyllm_qnn_ctx.compile").join("ort.log")).unwrap();
    let shared: Vec<&str> =
        log.lines().filter(|line| line.contains("init graph option: weight_sharing_enabled = 1")).collect();
    assert_eq!(shared.len(), 2, "both graphs prepared with weight sharing: {shared:?}");

    // The emulator cannot load a weight-shared context under any QNN version measured (Qualcomm's
    // x86_64 HTP: "Shared weights buffer isn't supported on this platform"): one line, exit 2, nothing run.
    let out = work.path().join("run");
    let mut command = Command::new(bin("npugate"));
    command
        .args([
            "run",
            "--local",
            "--ep",
            "qnn",
            "--soc",
            "SM8650",
            "--prompt-tokens",
            "8",
            "--gen-tokens",
            "4",
            "--model",
        ])
        .arg(&compiled)
        .arg("--out")
        .arg(&out);
    let output = run(&mut command);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("share one weight-shared context ({})", binaries[0]))
            && stderr.contains("does not support shared weights")
            && stderr.contains("emulate the folder it was compiled from"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing ran");
}

#[test]
fn a_model_builders_folder_compiles_per_phase_into_one_context_and_names_what_the_htp_rejects() {
    let work = tempfile::tempdir().unwrap();
    let compiled = work.path().join("qwen2_ctx");
    let folder = model_folder("genai_builder_qwen2_fp32");
    let compile = |soc: &str, out: &Path| {
        run(Command::new(bin("npugate"))
            .args(["compile", "--soc", soc, "--prompt-tokens", "16", "--context", "32", "--model"])
            .arg(&folder)
            .arg("--out")
            .arg(out))
    };
    let output = compile("SM8650", &compiled);
    // The builder's CPU graph keeps GroupQueryAttention and SkipSimplifiedLayerNormalization, which
    // the QNN EP leaves to the CPU: compiled, exit 1, each node named with the EP's reason.
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    for phase in ["prompt", "token"] {
        assert!(
            stdout.contains(&format!("model_{phase}_ctx.onnx: graph decoder-{phase} compiled for SM8650")),
            "{stdout}"
        );
    }
    assert!(stdout.contains("sized input_ids=1x16 attention_mask=1x16 past_key_values.0.key=1x2x32x16"), "{stdout}");
    assert!(stdout.contains("sized input_ids=1x1 attention_mask=1x32 past_key_values.0.key=1x2x32x16"), "{stdout}");
    assert!(
        stdout.contains("left on the CPU: /model/layers.0/attn/GroupQueryAttention (GroupQueryAttention): ")
            && stdout.contains("(SkipSimplifiedLayerNormalization): Operators of type `SkipSimplifiedLayerNormalization` are not supported by QNN EP"),
        "{stdout}"
    );
    let mut written: Vec<String> =
        std::fs::read_dir(&compiled).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    written.sort();
    assert_eq!(
        written,
        ["genai_config.json", "model_prompt_ctx.onnx", "model_prompt_ctx_qnn.bin", "model_token_ctx.onnx"]
    );
    let graphs = [compiled.join("model_prompt_ctx.onnx"), compiled.join("model_token_ctx.onnx")];
    let output = run(Command::new(npugate_e2e::python()).arg("-c").arg(EP_CONTEXT_NODES).args(&graphs));
    assert!(output.status.success(), "{}", describe(&output));
    let nodes: Vec<(String, String, i64, i64, String)> = serde_json::from_slice(&output.stdout).unwrap();
    // The CPU nodes split each graph into partitions: one EPContext node each, the graph's main
    // context naming the one .bin (the others name none: they are in the same context).
    for graph in ["model_prompt_ctx.onnx", "model_token_ctx.onnx"] {
        let main: Vec<&str> = nodes.iter().filter(|n| n.0 == graph && n.3 == 1).map(|n| n.4.as_str()).collect();
        assert_eq!(main, ["model_prompt_ctx_qnn.bin"], "{graph}: {nodes:?}");
    }
    assert!(nodes.iter().all(|n| n.2 == 0 && (n.3 == 1 || n.4.is_empty())), "{nodes:?}");
    // The config is the pipeline genai loads: the prompt graph, then the token graph.
    let config = json(&compiled.join("genai_config.json"));
    assert_eq!(config["model"]["type"], "decoder-pipeline");
    let pipeline = &config["model"]["decoder"]["pipeline"];
    assert_eq!(pipeline[0]["decoder-prompt"]["filename"], "model_prompt_ctx.onnx");
    assert_eq!(
        (&pipeline[1]["decoder-token"]["run_on_prompt"], &pipeline[1]["decoder-token"]["run_on_token_gen"]),
        (&serde_json::json!(false), &serde_json::json!(true))
    );
    let log = std::fs::read_to_string(work.path().join("qwen2_ctx.compile").join("ort.log")).unwrap();
    let shared = log.lines().filter(|line| line.contains("init graph option: weight_sharing_enabled = 1")).count();
    assert!(shared >= 2, "both phases prepared with weight sharing ({shared} graphs)");
    // npugate reads the compiled folder back: a weight-shared context, refused on the emulator.
    let output = run(Command::new(bin("npugate"))
        .args(["run", "--local", "--ep", "qnn", "--prompt-tokens", "16", "--gen-tokens", "4", "--model"])
        .arg(&compiled));
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("share one weight-shared context (model_prompt_ctx_qnn.bin)")
    );

    // v68 has no float HTP: the error names the graph, the phase's file and the op QNN could not create.
    let output = compile("SM8350", &work.path().join("qwen2_v68"));
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("for SM8350 (v68): graph decoder-prompt (model_prompt.onnx): ")
            && stderr.contains("could not create op: q::Gather")
            && stderr.contains("\"/model/embed_tokens/Gather\""),
        "{stderr}"
    );
    assert!(!stderr.contains("npugate-staged-"), "no path of a staging folder that is gone: {stderr}");
    assert!(!work.path().join("qwen2_v68").exists(), "nothing written");

    // --shape is refused for a folder with the flags compile takes instead.
    let output = run(Command::new(bin("npugate"))
        .args(["compile", "--soc", "SM8650", "--shape", "input_ids=1x16", "--model"])
        .arg(&folder)
        .arg("--out")
        .arg(work.path().join("shaped")));
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--prompt-tokens, --context") && !stderr.contains("--gen-tokens"), "{stderr}");
}

#[test]
fn a_sweep_of_a_model_folder_records_its_median_ttft_in_the_history() {
    let port = 6491;
    let rig = Rig::up(&[port]);
    let work = tempfile::tempdir().unwrap();
    let (out, history, plan) =
        (work.path().join("night"), work.path().join("history.sqlite"), work.path().join("sweep.toml"));
    let folder = model_folder("tinyllm");
    let text = format!(
        "name = \"llm\"\nruntimes = [\"ort-1.31.1-linux-x86_64\"]\n\n[settings]\nprompt_tokens = 16\ngen_tokens = 8\ngenerations = 3\nprofile_runs = 1\n\n\
         [[device]]\nserial = {:?}\n\n[[model]]\npath = {:?}\nrules = {{ cv_pct = 100000 }}\n",
        Rig::serial(port),
        folder.display().to_string()
    );
    std::fs::write(&plan, text).unwrap();
    let mut sweep = rig.command(bin("npugate"));
    sweep
        .arg("sweep")
        .arg("--plan")
        .arg(&plan)
        .arg("--out")
        .arg(&out)
        .arg("--history")
        .arg(&history)
        .args(["--night", "2026-03-01"]);
    let output = run(&mut sweep);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));

    // The stored TTFT is the cell verdict's median TTFT, beside the decode steps as latencies.
    let cells = npugate_e2e::sweeps::finished_cells(&out);
    assert_eq!(cells.len(), 1, "{cells:?}");
    assert!(cells[0].ends_with("tinyllm"), "the folder names its cells: {cells:?}");
    let verdict = json(&cells[0].join("verdict.json"));
    let query =
        |args: &[&str]| run(Command::new(bin("npugate")).arg("history").arg("--history").arg(&history).args(args));
    let answer = query(&["--json"]);
    assert!(answer.status.success(), "{}", describe(&answer));
    let report: serde_json::Value = serde_json::from_slice(&answer.stdout).unwrap();
    let point = &report["series"][0]["points"][0];
    // 3 generations × 8 decode steps, and whole generations more when steps waited for a CPU.
    let runs = point["runs"].as_u64().unwrap_or(0);
    assert!(runs >= 24 && runs.is_multiple_of(8), "3 generations × 8 decode steps: {point}");
    assert_eq!(point["generation"]["ttft_ns"], verdict["generation"]["ttft"]["median_ns"], "{point}");
    assert_eq!(point["generation"]["decode_tok_s"], verdict["generation"]["decode_tok_s"], "{point}");
    assert!(point["generation"]["prefill_tok_s"].as_f64().unwrap() > 0.0, "{point}");
    let table = query(&[]);
    let text = String::from_utf8_lossy(&table.stdout);
    let line = text.lines().find(|l| l.contains("ort-1.31.1-linux-x86_64")).unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains(" ms/token (pass), TTFT ") && line.contains(" ms, prefill ") && line.contains(" tok/s, decode "),
        "{line}"
    );
}
