//! LLM model folders: the genai config parsed and checked against the graphs it names.

use std::path::Path;

use npugate_onnx::genai::{config_path, Layout, LlmModel, GENAI_CONFIG};
use npugate_onnx::proto::tensor_proto::DataType;

use crate::support::{graph, model, node, tensor_value, typed_value};

/// A graph with `inputs` and `outputs` (float, dynamic dims; `input_ids` int64) wired through Identity nodes.
fn write_graph(path: &Path, inputs: &[&str], outputs: &[&str]) {
    let declared_inputs = inputs
        .iter()
        .map(|name| match *name {
            "input_ids" | "attention_mask" | "position_ids" => typed_value(name, DataType::Int64, Some(&["1", "s"])),
            _ => tensor_value(name, Some(&["1", "2", "p", "4"])),
        })
        .collect();
    let nodes = outputs
        .iter()
        .enumerate()
        .map(|(i, out)| node("Identity", &format!("n{i}"), &[inputs[i % inputs.len()]], &[out]))
        .collect();
    let declared_outputs = outputs.iter().map(|name| tensor_value(name, Some(&["1", "s", "9"]))).collect();
    model(graph("g", nodes, declared_inputs, declared_outputs)).write(path).unwrap();
}

const DECODER_INPUTS: &[&str] = &["input_ids", "attention_mask", "past_key_values.0.key", "past_key_values.0.value"];
const DECODER_OUTPUTS: &[&str] = &["logits", "present.0.key", "present.0.value"];

fn decoder_folder(dir: &Path) {
    write_graph(&dir.join("model.onnx"), DECODER_INPUTS, DECODER_OUTPUTS);
    let config = r#"{"model": {"type": "llama", "context_length": 16, "vocab_size": 9,
        "decoder": {"filename": "model.onnx", "num_hidden_layers": 1, "head_size": 4, "unknown_field": 3}},
        "search": {"max_length": 16}}"#;
    std::fs::write(dir.join(GENAI_CONFIG), config).unwrap();
}

fn pipeline_folder(dir: &Path, token_inputs: &str) {
    write_graph(
        &dir.join("prompt.onnx"),
        &["input_ids", "past_key_values.0.key", "past_key_values.0.value"],
        DECODER_OUTPUTS,
    );
    write_graph(
        &dir.join("token.onnx"),
        &["input_ids", "past_key_values.0.key", "past_key_values.0.value"],
        DECODER_OUTPUTS,
    );
    let config = format!(
        r#"{{"model": {{"type": "decoder-pipeline", "context_length": 32,
        "decoder": {{"num_hidden_layers": 1, "pipeline": [{{
            "token-generator": {{"filename": "token.onnx", "inputs": {token_inputs}, "outputs": ["logits", "present.0.key", "present.0.value"], "run_on_prompt": false}},
            "prompt-processor": {{"filename": "prompt.onnx", "inputs": ["input_ids", "past_key_values.0.key", "past_key_values.0.value"],
                                  "outputs": ["logits", "present.0.key", "present.0.value"], "run_on_token_gen": false}}
        }}]}}}}, "search": {{"past_present_share_buffer": true}}}}"#
    );
    std::fs::write(dir.join(GENAI_CONFIG), config).unwrap();
}

#[test]
fn a_decoder_folder_is_read_with_genai_defaults_for_the_names() {
    let dir = tempfile::tempdir().unwrap();
    decoder_folder(dir.path());
    assert_eq!(config_path(dir.path()), Some(dir.path().join(GENAI_CONFIG)));
    assert_eq!(config_path(&dir.path().join("model.onnx")), None);
    let llm = LlmModel::open(&dir.path().join(GENAI_CONFIG)).unwrap();
    assert_eq!((llm.layout, llm.context_length, llm.layers, llm.share_buffer), (Layout::Decoder, 16, 1, false));
    assert_eq!(llm.graphs.len(), 1);
    let inputs: Vec<&str> = llm.graphs[0].inputs.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(inputs, DECODER_INPUTS, "position_ids is optional: the graph has none");
    assert_eq!(
        llm.names.kv(0),
        ["past_key_values.0.key", "past_key_values.0.value", "present.0.key", "present.0.value"]
    );
    let files: Vec<String> = llm.files().into_iter().map(|(name, _)| name).collect();
    assert_eq!(files, [GENAI_CONFIG, "model.onnx"]);
    // The tokenizer and anything else below the folder identify it too.
    std::fs::write(dir.path().join("tokenizer.json"), "{}").unwrap();
    std::fs::create_dir(dir.path().join("extra")).unwrap();
    std::fs::write(dir.path().join("extra/chat_template.jinja"), "x").unwrap();
    let files: Vec<String> = llm.files().into_iter().map(|(name, _)| name).collect();
    assert_eq!(files, ["extra/chat_template.jinja", GENAI_CONFIG, "model.onnx", "tokenizer.json"], "sorted by name");
}

#[test]
fn a_pipeline_keeps_the_file_order_and_each_graph_its_phase() {
    let dir = tempfile::tempdir().unwrap();
    pipeline_folder(dir.path(), r#"["input_ids", "past_key_values.0.key", "past_key_values.0.value"]"#);
    let llm = LlmModel::open(&dir.path().join(GENAI_CONFIG)).unwrap();
    assert_eq!(llm.layout, Layout::Pipeline);
    let ids: Vec<&str> = llm.graphs.iter().map(|g| g.id.as_str()).collect();
    assert_eq!(ids, ["token-generator", "prompt-processor"], "the config's order, not sorted");
    assert_eq!(llm.phase(true).map(|g| g.id.as_str()).collect::<Vec<_>>(), ["prompt-processor"]);
    assert_eq!(llm.phase(false).map(|g| g.id.as_str()).collect::<Vec<_>>(), ["token-generator"]);
    assert!(llm.share_buffer);
}

#[test]
fn bad_folders_are_one_line_naming_the_file_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join(GENAI_CONFIG);
    let error = LlmModel::open(&config).unwrap_err().to_string();
    assert!(
        error.contains(GENAI_CONFIG)
            && error.contains("is missing")
            && error.contains("pass an .onnx file or such a folder"),
        "{error}"
    );

    pipeline_folder(dir.path(), r#"["input_ids", "past_key_values.0.key", "hidden_states"]"#);
    let error = LlmModel::open(&config).unwrap_err().to_string();
    assert!(
        error.contains("model.decoder.pipeline[0] (token-generator).inputs[2]")
            && error.contains("\"hidden_states\": graph token.onnx has no input"),
        "{error}"
    );

    decoder_folder(dir.path());
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("model.onnx", "missing.onnx")).unwrap();
    let error = LlmModel::open(&config).unwrap_err().to_string();
    assert!(
        error.contains("model.decoder.filename") && error.contains("names missing.onnx, which is not in"),
        "{error}"
    );
    std::fs::write(&config, text.replace("\"num_hidden_layers\": 1", "\"num_hidden_layers\": 2")).unwrap();
    let error = LlmModel::open(&config).unwrap_err().to_string();
    assert!(
        error.contains("model.decoder.inputs.past_key_names") && error.contains("\"past_key_values.1.key\""),
        "{error}"
    );
    std::fs::write(&config, text.replace("\"context_length\": 16,", "")).unwrap();
    assert!(LlmModel::open(&config).unwrap_err().to_string().contains("model.context_length: must be a positive"));
    std::fs::write(&config, "{\"model\": ").unwrap();
    assert!(LlmModel::open(&config).unwrap_err().to_string().contains("is not a valid genai config"));
    assert!(!LlmModel::open(&config).unwrap_err().to_string().contains('\n'));
}

#[test]
fn a_renamed_config_names_new_graph_files_and_keeps_every_other_field() {
    let dir = tempfile::tempdir().unwrap();
    pipeline_folder(dir.path(), r#"["input_ids", "past_key_values.0.key", "past_key_values.0.value"]"#);
    let llm = LlmModel::open(&dir.path().join(GENAI_CONFIG)).unwrap();
    let text = llm.renamed_config(|id| (id == "token-generator").then(|| "token_ctx.onnx".to_string())).unwrap();
    let renamed: serde_json::Value = serde_json::from_str(&text).unwrap();
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(GENAI_CONFIG)).unwrap()).unwrap();
    let stages = &renamed["model"]["decoder"]["pipeline"][0];
    assert_eq!(stages["token-generator"]["filename"], "token_ctx.onnx");
    assert_eq!(stages["prompt-processor"]["filename"], "prompt.onnx", "a graph given no new name keeps its own");
    let mut expected = original.clone();
    expected["model"]["decoder"]["pipeline"][0]["token-generator"]["filename"] = "token_ctx.onnx".into();
    assert_eq!(renamed, expected, "nothing else changed");

    let decoder = tempfile::tempdir().unwrap();
    decoder_folder(decoder.path());
    let llm = LlmModel::open(&decoder.path().join(GENAI_CONFIG)).unwrap();
    let renamed: serde_json::Value =
        serde_json::from_str(&llm.renamed_config(|id| Some(format!("{id}_ctx.onnx"))).unwrap()).unwrap();
    assert_eq!(renamed["model"]["decoder"]["filename"], "decoder_ctx.onnx");
    assert_eq!(renamed["model"]["decoder"]["unknown_field"], 3);
}

#[test]
fn a_decoder_config_written_as_a_pipeline_of_phases_opens_with_both_graphs() {
    use npugate_onnx::genai::PipelineStage;
    let dir = tempfile::tempdir().unwrap();
    decoder_folder(dir.path());
    std::fs::copy(dir.path().join("model.onnx"), dir.path().join("model_prompt.onnx")).unwrap();
    std::fs::copy(dir.path().join("model.onnx"), dir.path().join("model_token.onnx")).unwrap();
    let llm = LlmModel::open(&dir.path().join(GENAI_CONFIG)).unwrap();
    let stage = |phase: &str, prompt: bool| PipelineStage {
        id: format!("decoder-{phase}"),
        filename: format!("model_{phase}.onnx"),
        inputs: DECODER_INPUTS.iter().map(ToString::to_string).collect(),
        outputs: DECODER_OUTPUTS.iter().map(ToString::to_string).collect(),
        run_on_prompt: prompt,
        run_on_token_gen: !prompt,
    };
    let text = llm.pipeline_config(&[stage("prompt", true), stage("token", false)]).unwrap();
    let written: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(written["model"]["type"], "decoder-pipeline");
    assert!(written["model"]["decoder"].get("filename").is_none(), "{text}");
    assert_eq!(written["model"]["decoder"]["unknown_field"], 3, "every other field kept");
    assert_eq!(written["model"]["decoder"]["pipeline"][1]["decoder-token"]["run_on_prompt"], false);
    std::fs::write(dir.path().join(GENAI_CONFIG), text).unwrap();
    let pipeline = LlmModel::open(&dir.path().join(GENAI_CONFIG)).unwrap();
    assert_eq!(pipeline.layout, Layout::Pipeline);
    let graphs: Vec<(&str, &str, bool, bool)> =
        pipeline.graphs.iter().map(|g| (g.id.as_str(), g.file.as_str(), g.run_on_prompt, g.run_on_token_gen)).collect();
    assert_eq!(
        graphs,
        [("decoder-prompt", "model_prompt.onnx", true, false), ("decoder-token", "model_token.onnx", false, true)]
    );
    assert_eq!(pipeline.graphs[1].inputs.len(), DECODER_INPUTS.len());
}

#[test]
fn a_dynamic_decoder_is_sized_per_phase_from_its_config() {
    use npugate_onnx::llm_shapes::{phase_shapes, GenerationLengths, GenerationPhase};
    let dir = tempfile::tempdir().unwrap();
    decoder_folder(dir.path());
    let llm = LlmModel::open(&dir.path().join(GENAI_CONFIG)).unwrap();
    let phases = phase_shapes(&llm, &llm.graphs[0], GenerationLengths { prompt: 6, context: 16 }).unwrap();
    let sized = |phase: usize| -> Vec<(&str, Vec<i64>)> {
        phases[phase].inputs.iter().map(|(name, dims)| (name.as_str(), dims.clone())).collect()
    };
    assert_eq!((phases[0].phase, phases[1].phase), (GenerationPhase::Prompt, GenerationPhase::Token));
    // No shared buffer: the prompt runs over an empty past, the context's last token over 15 positions.
    assert_eq!(
        sized(0),
        [
            ("input_ids", vec![1, 6]),
            ("attention_mask", vec![1, 6]),
            ("past_key_values.0.key", vec![1, 2, 0, 4]),
            ("past_key_values.0.value", vec![1, 2, 0, 4])
        ]
    );
    assert_eq!(sized(1)[1..3], [("attention_mask", vec![1, 16]), ("past_key_values.0.key", vec![1, 2, 15, 4])]);
    let too_long = phase_shapes(&llm, &llm.graphs[0], GenerationLengths { prompt: 6, context: 17 }).unwrap_err();
    assert!(
        too_long.to_string().contains("--context 17: the folder holds 16 positions; pass at most 16"),
        "{too_long}"
    );
    let no_room = phase_shapes(&llm, &llm.graphs[0], GenerationLengths { prompt: 16, context: 16 }).unwrap_err();
    assert!(no_room.to_string().contains("--prompt-tokens 16 leaves no room"), "{no_room}");
}

#[test]
fn each_phase_is_fed_as_genai_feeds_it() {
    use npugate_onnx::llm_shapes::{phase_feeds, GenerationPhase, PhaseShapes};
    let dir = tempfile::tempdir().unwrap();
    decoder_folder(dir.path());
    let llm = LlmModel::open(&dir.path().join(GENAI_CONFIG)).unwrap();
    let vocab = llm.vocabulary().map_or(1, |v| v as i64);
    let inputs = |ids: i64, total: i64| {
        vec![
            ("input_ids".to_string(), vec![1, ids]),
            ("attention_mask".to_string(), vec![1, total]),
            ("position_ids".to_string(), vec![1, ids]),
            ("past_key_values.0.key".to_string(), vec![1, 2, total - ids, 4]),
        ]
    };
    let prompt = phase_feeds(&llm, &PhaseShapes { phase: GenerationPhase::Prompt, inputs: inputs(3, 3) });
    let ids: Vec<i64> = (0..3).map(|i| i % vocab).collect();
    assert_eq!(
        prompt,
        [
            ("input_ids".to_string(), vec![1, 3], ids),
            ("attention_mask".to_string(), vec![1, 3], vec![1, 1, 1]),
            ("position_ids".to_string(), vec![1, 3], vec![0, 1, 2]),
        ],
        "the KV cache is not fed: any values of its shape do"
    );
    // The context's last token: one id, the mask over all 16 positions, its position the past length.
    let token = phase_feeds(&llm, &PhaseShapes { phase: GenerationPhase::Token, inputs: inputs(1, 16) });
    assert_eq!(token[1], ("attention_mask".to_string(), vec![1, 16], vec![1; 16]));
    assert_eq!(token[2], ("position_ids".to_string(), vec![1, 1], vec![15]));
}

#[test]
fn threads_are_genais_default_unless_the_config_or_the_flag_sets_them() {
    use npugate_onnx::genai::ConfigThreads;
    let dir = tempfile::tempdir().unwrap();
    decoder_folder(dir.path());
    let config = dir.path().join(GENAI_CONFIG);
    let text = std::fs::read_to_string(&config).unwrap();
    let unset = LlmModel::open(&config).unwrap().graphs[0].threads;
    assert_eq!(unset, ConfigThreads::default());
    // onnxruntime-genai: half the hardware threads, at least 1, at most 16.
    for (hardware, intra) in [(1, 1), (2, 1), (8, 4), (64, 16)] {
        let threads = unset.resolve(0, hardware);
        assert_eq!((threads.intra_op, threads.inter_op), (intra, None), "{hardware} hardware threads");
        assert!(threads.source.starts_with("onnxruntime-genai's default"), "{}", threads.source);
    }
    std::fs::write(
        &config,
        text.replace(
            "\"unknown_field\": 3",
            "\"session_options\": {\"intra_op_num_threads\": 3, \"inter_op_num_threads\": 2, \"log_id\": \"x\"}",
        ),
    )
    .unwrap();
    let given = LlmModel::open(&config).unwrap().graphs[0].threads;
    assert_eq!(given, ConfigThreads { intra_op: Some(3), inter_op: Some(2) });
    let threads = given.resolve(0, 64);
    assert_eq!((threads.intra_op, threads.inter_op), (3, Some(2)));
    assert_eq!(threads.source, "genai_config.json session_options.intra_op_num_threads");
    let flagged = given.resolve(5, 64);
    assert_eq!((flagged.intra_op, flagged.inter_op, flagged.source.as_str()), (5, Some(2), "--intra-threads"));
}
