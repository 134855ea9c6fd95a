//! LLM model folders in onnxruntime-genai's format: a `genai_config.json` and the graphs it names.
//!
//! The field names are onnxruntime-genai's own (`src/config.h` / `src/config.cpp` of
//! microsoft/onnxruntime-genai): `model.type`, `model.context_length`, `model.vocab_size`,
//! `model.decoder.{filename, num_hidden_layers, inputs, outputs, pipeline}`, the name templates
//! `past_key_values.%d.key` / `present.%d.key`, and `search.past_present_share_buffer`. Two layouts:
//!
//! - **decoder**: one graph (`model.decoder.filename`) runs the prompt and every generated token,
//!   its KV cache growing step by step (`past_key_values.%d.*` in, `present.%d.*` out);
//! - **pipeline** (`model.type = "decoder-pipeline"`, what the QNN models use): several graphs
//!   (`model.decoder.pipeline`, each with `filename`, `inputs`, `outputs`, `run_on_prompt`,
//!   `run_on_token_gen`), e.g. a prompt processor and a token generator over one shared context
//!   binary; a graph's inputs are the model's inputs (ids, positions, KV cache) or an earlier
//!   graph's outputs.
//!
//! [`LlmModel::open`] parses the config once and checks it against the graphs, each error one
//! line naming the file and the field. Provider options in the config are not applied: the
//! run's own EP settings decide; of the session options, the thread counts are read
//! ([`ConfigThreads`], resolved as onnxruntime-genai does).

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::located::LocatedFile;
use crate::model::Model;
use crate::value::{ElementType, ValueSignature};

/// The config file of a model folder.
pub const GENAI_CONFIG: &str = "genai_config.json";

/// The config file a `--model` path stands for when it names an LLM folder: the folder's
/// `genai_config.json`, or the path itself when it is a `.json` file. `None` for anything else
/// (an `.onnx` file).
pub fn config_path(model: &Path) -> Option<PathBuf> {
    if model.is_dir() {
        return Some(model.join(GENAI_CONFIG));
    }
    model.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")).then(|| model.to_path_buf())
}

/// Why a model folder cannot be used: the file, the field and what is wrong, on one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenaiError {
    /// The file at fault (the config, or a graph it names).
    pub file: PathBuf,
    /// The config field, e.g. `model.decoder.pipeline[1].inputs[2]`; empty for the file as a whole.
    pub field: String,
    /// What is wrong and the fix.
    pub message: String,
}

impl fmt::Display for GenaiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.field.is_empty() {
            true => write!(f, "{}: {}", self.file.display(), self.message),
            false => write!(f, "{}: {}: {}", self.file.display(), self.field, self.message),
        }
    }
}

impl std::error::Error for GenaiError {}

/// The names the generation loop feeds and reads, from `model.decoder.inputs` / `outputs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoNames {
    /// Token ids, `[batch, sequence]`.
    pub input_ids: String,
    /// Which positions are real, `[batch, total]` (fed only to graphs that have it).
    pub attention_mask: String,
    /// Position of each token, `[batch, sequence]` (fed only to graphs that have it).
    pub position_ids: String,
    /// Template of the past keys (`past_key_values.%d.key`).
    pub past_key: String,
    /// Template of the past values.
    pub past_value: String,
    /// The logits output, `[batch, sequence, vocab]`.
    pub logits: String,
    /// Template of the present keys (`present.%d.key`).
    pub present_key: String,
    /// Template of the present values.
    pub present_value: String,
}

impl IoNames {
    /// The past-key, past-value, present-key and present-value names of `layer`.
    pub fn kv(&self, layer: u32) -> [String; 4] {
        [&self.past_key, &self.past_value, &self.present_key, &self.present_value]
            .map(|template| layer_name(template, layer))
    }
}

/// `past_key_values.%d.key` with `%d` replaced by the layer.
pub fn layer_name(template: &str, layer: u32) -> String {
    template.replacen("%d", &layer.to_string(), 1)
}

/// Which way a folder's graphs are arranged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One graph for prompt and tokens (`model.decoder.filename`).
    Decoder,
    /// Several graphs (`model.decoder.pipeline`).
    Pipeline,
}

/// One graph of a folder.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmGraph {
    /// Its id: the pipeline key (`prompt-processor`), or `decoder` for the decoder layout.
    pub id: String,
    /// Its file name, relative to the folder.
    pub file: String,
    /// Where it is.
    pub path: PathBuf,
    /// Runs while the prompt is processed.
    pub run_on_prompt: bool,
    /// Runs for each generated token.
    pub run_on_token_gen: bool,
    /// The inputs the loop binds (for a pipeline graph: the config's list, in its order).
    pub inputs: Vec<ValueSignature>,
    /// The outputs the loop binds.
    pub outputs: Vec<ValueSignature>,
    /// The files the graph refers to (external data, context binaries), located.
    pub files: Vec<LocatedFile>,
    /// The thread counts its `session_options` give (a pipeline graph's own, else the decoder's).
    pub threads: ConfigThreads,
}

impl LlmGraph {
    /// The input of that name.
    pub fn input(&self, name: &str) -> Option<&ValueSignature> {
        self.inputs.iter().find(|i| i.name == name)
    }

    /// The output of that name.
    pub fn output(&self, name: &str) -> Option<&ValueSignature> {
        self.outputs.iter().find(|o| o.name == name)
    }

    /// The number of tokens the graph takes at once when its `input_ids` has a fixed sequence
    /// dim (a static prompt processor: 128), else `None`.
    pub fn fixed_sequence(&self, names: &IoNames) -> Option<i64> {
        self.input(&names.input_ids)?.dims.as_ref()?.get(1)?.fixed()
    }
}

/// The thread counts a config's `session_options` give (`intra_op_num_threads`,
/// `inter_op_num_threads`; onnxruntime-genai's `Config::SessionOptions`), each unset when absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct ConfigThreads {
    /// `intra_op_num_threads` (0: ONNX Runtime's own default).
    #[serde(rename = "intra_op_num_threads")]
    pub intra_op: Option<u32>,
    /// `inter_op_num_threads`.
    #[serde(rename = "inter_op_num_threads")]
    pub inter_op: Option<u32>,
}

/// The thread counts a graph's session runs with, and where they come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionThreads {
    /// Intra-op threads (0: ONNX Runtime's own default).
    pub intra_op: u32,
    /// Inter-op threads, when set (else ONNX Runtime's default).
    pub inter_op: Option<u32>,
    /// Where the intra-op count comes from (`--intra-threads`, the config, genai's default).
    pub source: String,
}

/// onnxruntime-genai's cap on its default intra-op threads (`max_thread_nums`).
const GENAI_MAX_DEFAULT_THREADS: u32 = 16;

impl ConfigThreads {
    /// The threads as onnxruntime-genai sets them (`Model::CreateSessionOptionsFromConfig`,
    /// src/models/model.cpp): intra-op threads half the machine's hardware threads (at least 1, at
    /// most 16) unless the config gives `intra_op_num_threads`; inter-op threads only when the
    /// config gives them. `flag` (`--intra-threads`, 0 = not given) overrides the intra-op count.
    pub fn resolve(self, flag: u32, hardware_threads: u32) -> SessionThreads {
        let (intra_op, source) = match (flag, self.intra_op) {
            (flag, _) if flag > 0 => (flag, "--intra-threads".to_string()),
            (_, Some(given)) => (given, "genai_config.json session_options.intra_op_num_threads".to_string()),
            (_, None) => (
                (hardware_threads / 2).clamp(1, GENAI_MAX_DEFAULT_THREADS),
                format!("onnxruntime-genai's default: half the {hardware_threads} hardware threads, 1 to 16"),
            ),
        };
        SessionThreads { intra_op, inter_op: self.inter_op, source }
    }
}

/// One graph of a pipeline config [`LlmModel::pipeline_config`] writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineStage {
    /// The pipeline key (`decoder-prompt`).
    pub id: String,
    /// The graph's file, relative to the folder.
    pub filename: String,
    /// The inputs the loop binds, by name.
    pub inputs: Vec<String>,
    /// The outputs the loop binds, by name.
    pub outputs: Vec<String>,
    /// Runs while the prompt is processed.
    pub run_on_prompt: bool,
    /// Runs for each generated token.
    pub run_on_token_gen: bool,
}

/// An LLM model folder, parsed and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmModel {
    /// The `genai_config.json`.
    pub config: PathBuf,
    /// The folder holding it and the graphs.
    pub folder: PathBuf,
    /// `model.type` (`llama`, `phi3`, `decoder-pipeline`, …).
    pub model_type: String,
    /// The graphs' arrangement.
    pub layout: Layout,
    /// `model.context_length`: the most tokens (prompt + generated) a generation can hold.
    pub context_length: u32,
    /// `model.decoder.num_hidden_layers`: KV-cache layers.
    pub layers: u32,
    /// The names the loop feeds and reads.
    pub names: IoNames,
    /// `model.decoder.num_key_value_heads`, when given (the KV cache's second dim).
    pub kv_heads: Option<u32>,
    /// `model.decoder.head_size`, when given (the KV cache's last dim).
    pub head_size: Option<u32>,
    /// `search.past_present_share_buffer`: past and present KV share one buffer (static caches).
    pub share_buffer: bool,
    /// The graphs in run order.
    pub graphs: Vec<LlmGraph>,
}

impl LlmModel {
    /// Reads the config at `config` (see [`config_path`]) and checks it against its graphs:
    /// every graph file exists inside the folder and is an ONNX model, every name the config
    /// gives is an input or output of the graph it is given for, the KV cache has a past input
    /// and a present output per layer, and some graph yields the logits in each phase.
    pub fn open(config: &Path) -> Result<LlmModel, GenaiError> {
        let folder = config.parent().unwrap_or(Path::new(".")).to_path_buf();
        let error =
            |field: &str, message: String| GenaiError { file: config.to_path_buf(), field: field.into(), message };
        if !config.exists() && config.file_name().is_some_and(|n| n == GENAI_CONFIG) {
            let message = "is missing: the model is a directory, and a directory is a model only as an onnxruntime-genai folder with its genai_config.json; pass an .onnx file or such a folder";
            return Err(error("", message.into()));
        }
        let text = std::fs::read_to_string(config).map_err(|e| {
            let what = if config.file_name().is_some_and(|n| n == GENAI_CONFIG) {
                "a model folder needs its genai_config.json"
            } else {
                "pass a model folder or its genai_config.json"
            };
            error("", format!("cannot be read ({e}); {what}"))
        })?;
        let file: ConfigFile =
            serde_json::from_str(&text).map_err(|e| error("", format!("is not a valid genai config: {e}")))?;
        let model = file.model.ok_or_else(|| {
            error("model", "is missing; a genai_config.json describes its model under \"model\"".into())
        })?;
        let decoder = model.decoder.ok_or_else(|| {
            error(
                "model.decoder",
                "is missing; npugate runs decoder LLMs (the \"decoder\" section names the graphs)".into(),
            )
        })?;
        let context_length = positive(model.context_length)
            .ok_or_else(|| error("model.context_length", "must be a positive number of tokens".into()))?;
        let layers = positive(decoder.num_hidden_layers)
            .ok_or_else(|| error("model.decoder.num_hidden_layers", "must be a positive number of layers".into()))?;
        let names = decoder.names();
        for (field, template) in [
            ("inputs.past_key_names", &names.past_key),
            ("inputs.past_value_names", &names.past_value),
            ("outputs.present_key_names", &names.present_key),
            ("outputs.present_value_names", &names.present_value),
        ] {
            if !template.contains("%d") {
                return Err(error(
                    &format!("model.decoder.{field}"),
                    format!("{template:?} has no %d for the layer number (e.g. \"past_key_values.%d.key\")"),
                ));
            }
        }
        let (layout, entries) = match (decoder.filename.as_deref().filter(|f| !f.is_empty()), decoder.pipeline) {
            (_, Some(pipeline)) if !pipeline.0.is_empty() => (Layout::Pipeline, pipeline.0),
            (Some(filename), _) => {
                let entry = PipelineEntry {
                    filename: Some(filename.into()),
                    inputs: None,
                    outputs: None,
                    run_on_prompt: true,
                    run_on_token_gen: true,
                    session_options: None,
                };
                (Layout::Decoder, vec![("decoder".to_string(), entry)])
            }
            (None, _) => {
                return Err(error(
                    "model.decoder.filename",
                    "is missing (and there is no model.decoder.pipeline): name the decoder graph".into(),
                ))
            }
        };
        let threads = decoder.session_options;
        let folder_config = FolderConfig { config, folder: &folder, names: &names, layers, layout, threads };
        let mut graphs = Vec::new();
        for (index, (id, entry)) in entries.into_iter().enumerate() {
            let field = match layout {
                Layout::Decoder => "model.decoder".to_string(),
                Layout::Pipeline => format!("model.decoder.pipeline[{index}] ({id})"),
            };
            graphs.push(read_graph(&folder_config, &field, id, entry)?);
        }
        let (kv_heads, head_size) = (positive(decoder.num_key_value_heads), positive(decoder.head_size));
        let llm = LlmModel {
            config: config.to_path_buf(),
            folder,
            model_type: model.kind,
            layout,
            context_length,
            layers,
            names,
            kv_heads,
            head_size,
            share_buffer: file.search.past_present_share_buffer,
            graphs,
        };
        llm.check_flow()?;
        Ok(llm)
    }

    /// The config's text with each graph's `filename` replaced by `rename(graph id)` (the decoder's
    /// id is `decoder`), every other field kept as written: the config of a folder whose graphs were
    /// rewritten (e.g. compiled into EPContext graphs). A graph `rename` gives no new name keeps its own.
    pub fn renamed_config(&self, rename: impl Fn(&str) -> Option<String>) -> Result<String, GenaiError> {
        let error = |message: String| GenaiError { file: self.config.clone(), field: "model.decoder".into(), message };
        let text = std::fs::read_to_string(&self.config).map_err(|e| error(format!("cannot be read ({e})")))?;
        let mut config: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| error(format!("is not valid JSON: {e}")))?;
        let decoder = config.pointer_mut("/model/decoder").ok_or_else(|| error("is missing".into()))?;
        let mut entries: Vec<(String, &mut serde_json::Value)> = match self.layout {
            Layout::Decoder => vec![("decoder".to_string(), decoder)],
            Layout::Pipeline => decoder
                .get_mut("pipeline")
                .and_then(serde_json::Value::as_array_mut)
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_object_mut)
                .flat_map(|stage| stage.iter_mut().map(|(id, entry)| (id.clone(), entry)))
                .collect(),
        };
        for (id, entry) in &mut entries {
            if let (Some(name), Some(object)) = (rename(id), entry.as_object_mut()) {
                object.insert("filename".into(), serde_json::Value::String(name));
            }
        }
        serde_json::to_string_pretty(&config).map_err(|e| error(format!("cannot be written: {e}")))
    }

    /// The config's text as a pipeline of `stages` (`model.type = "decoder-pipeline"`,
    /// `model.decoder.pipeline` one `{id: graph}` object per stage in order, `model.decoder.filename`
    /// removed), every other field kept as written: the config of a folder whose graphs were split
    /// by phase (a builder's one dynamic decoder sized once for the prompt and once for a token).
    pub fn pipeline_config(&self, stages: &[PipelineStage]) -> Result<String, GenaiError> {
        let error = |message: String| GenaiError { file: self.config.clone(), field: "model.decoder".into(), message };
        let text = std::fs::read_to_string(&self.config).map_err(|e| error(format!("cannot be read ({e})")))?;
        let mut config: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| error(format!("is not valid JSON: {e}")))?;
        let model = config.pointer_mut("/model").and_then(serde_json::Value::as_object_mut);
        let model = model.ok_or_else(|| error("has no \"model\" object".into()))?;
        model.insert("type".into(), "decoder-pipeline".into());
        let decoder = model.get_mut("decoder").and_then(serde_json::Value::as_object_mut);
        let decoder = decoder.ok_or_else(|| error("is missing".into()))?;
        decoder.remove("filename");
        let pipeline = stages
            .iter()
            .map(|stage| {
                serde_json::json!({ stage.id.clone(): {
                    "filename": stage.filename,
                    "inputs": stage.inputs,
                    "outputs": stage.outputs,
                    "run_on_prompt": stage.run_on_prompt,
                    "run_on_token_gen": stage.run_on_token_gen,
                }})
            })
            .collect();
        decoder.insert("pipeline".into(), serde_json::Value::Array(pipeline));
        serde_json::to_string_pretty(&config).map_err(|e| error(format!("cannot be written: {e}")))
    }

    /// Every file of the model: the config, each graph, the files each graph refers to and every
    /// other file below the folder (tokenizer, chat template, …: a folder is identified by all of
    /// them), as (name relative to the folder, `/`-separated, path), sorted by name, each once.
    pub fn files(&self) -> Vec<(String, PathBuf)> {
        let mut seen = BTreeSet::new();
        let mut files = Vec::new();
        let config_name =
            self.config.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| GENAI_CONFIG.into());
        let mut below = Vec::new();
        files_below(&self.folder, "", &mut below);
        for (name, path) in std::iter::once((config_name, self.config.clone()))
            .chain(self.graphs.iter().map(|g| (g.file.clone(), g.path.clone())))
            .chain(self.graphs.iter().flat_map(|g| g.files.iter().map(|f| (f.name.clone(), f.path.clone()))))
            .chain(below)
        {
            if seen.insert(name.clone()) {
                files.push((name, path));
            }
        }
        files.sort();
        files
    }

    /// The vocabulary size: the fixed last dim of the logits (`None` when no graph fixes it).
    pub fn vocabulary(&self) -> Option<usize> {
        self.graphs
            .iter()
            .find_map(|g| g.output(&self.names.logits)?.dims.as_ref()?.last()?.fixed())
            .and_then(|v| usize::try_from(v).ok())
            .filter(|&v| v > 0)
    }

    /// The most tokens a generation can hold: the context length, and a static KV cache's length.
    pub fn capacity(&self) -> u32 {
        let past_key = layer_name(&self.names.past_key, 0);
        let fixed = self
            .graphs
            .iter()
            .filter_map(|g| g.input(&past_key)?.dims.as_ref()?.get(2)?.fixed())
            .filter_map(|n| u32::try_from(n).ok());
        fixed.fold(self.context_length, u32::min)
    }

    /// Tokens per prompt run of a static prompt graph (its fixed input_ids length), else `None`.
    pub fn prompt_chunk(&self) -> Option<u32> {
        self.phase(true)
            .find_map(|g| g.fixed_sequence(&self.names))
            .and_then(|s| u32::try_from(s).ok())
            .filter(|&s| s > 0)
    }

    /// The prompt and generated lengths of a generation: `prompt` and `gen` as asked, or the
    /// defaults shortened to what the model holds. Refused in one line: a prompt that is no
    /// multiple of a static prompt graph's length, or more tokens than the context (or cache) holds.
    pub fn lengths(&self, prompt: Option<u32>, gen: Option<u32>, defaults: (u32, u32)) -> Result<(u32, u32), String> {
        let capacity = self.capacity();
        let chunk = self.prompt_chunk().unwrap_or(1);
        let prompt = prompt.unwrap_or_else(|| self.default_prompt(defaults.0, capacity));
        let gen = gen.unwrap_or_else(|| defaults.1.min(capacity.saturating_sub(prompt)).max(1));
        let config = self.config.display();
        if !prompt.is_multiple_of(chunk) {
            return Err(format!("--prompt-tokens {prompt}: the prompt graph of {config} takes {chunk} tokens at a time (its input_ids is static); pass a multiple of {chunk}"));
        }
        if prompt + gen > capacity {
            let what = if capacity < self.context_length {
                "model.context_length and the static KV cache"
            } else {
                "model.context_length"
            };
            return Err(format!("--prompt-tokens {prompt} + --gen-tokens {gen} = {} tokens, more than {config} holds ({capacity}: {what}); pass fewer", prompt + gen));
        }
        Ok((prompt, gen))
    }

    /// The prompt length when none is asked for: `default`, at most half of `context`, in whole
    /// chunks of a static prompt graph (at least one).
    pub fn default_prompt(&self, default: u32, context: u32) -> u32 {
        let chunk = self.prompt_chunk().unwrap_or(1);
        ((default.min(context / 2).max(1)) / chunk * chunk).max(chunk)
    }

    /// The graphs that run in the prompt phase and in the token phase, in order.
    pub fn phase(&self, prompt: bool) -> impl Iterator<Item = &LlmGraph> {
        self.graphs.iter().filter(move |g| if prompt { g.run_on_prompt } else { g.run_on_token_gen })
    }

    /// The element type of the KV cache (of layer 0's past key in the first graph that has it).
    pub fn kv_element_type(&self) -> Option<ElementType> {
        let name = layer_name(&self.names.past_key, 0);
        self.graphs.iter().find_map(|g| g.input(&name)).map(|s| s.element_type)
    }

    /// Each phase needs graphs that produce the logits, and every graph input must be a model
    /// input the loop feeds or the output of an earlier graph of the same phase.
    fn check_flow(&self) -> Result<(), GenaiError> {
        let managed = self.managed_inputs();
        for (prompt, phase) in [(true, "prompt (run_on_prompt)"), (false, "token generation (run_on_token_gen)")] {
            let mut available: BTreeSet<&str> = managed.iter().map(String::as_str).collect();
            let mut logits = false;
            for graph in self.phase(prompt) {
                for input in &graph.inputs {
                    if !available.contains(input.name.as_str()) {
                        return Err(GenaiError {
                            file: self.config.clone(),
                            field: format!("model.decoder.pipeline ({})", graph.id),
                            message: format!("input {:?} of {} is neither a model input (ids, mask, positions, KV cache) nor an output of an earlier graph of the {phase} phase", input.name, graph.file),
                        });
                    }
                }
                available.extend(graph.outputs.iter().map(|o| o.name.as_str()));
                logits |= graph.output(&self.names.logits).is_some();
            }
            if !logits {
                return Err(GenaiError {
                    file: self.config.clone(),
                    field: "model.decoder.pipeline".into(),
                    message: format!(
                        "no graph of the {phase} phase outputs {:?} (model.decoder.outputs.logits)",
                        self.names.logits
                    ),
                });
            }
        }
        Ok(())
    }

    /// The inputs the generation loop feeds: ids, mask, positions and every past KV name.
    pub fn managed_inputs(&self) -> Vec<String> {
        let mut names =
            vec![self.names.input_ids.clone(), self.names.attention_mask.clone(), self.names.position_ids.clone()];
        for layer in 0..self.layers {
            let [past_key, past_value, _, _] = self.names.kv(layer);
            names.extend([past_key, past_value]);
        }
        names
    }
}

fn positive(value: Option<i64>) -> Option<u32> {
    value.filter(|v| *v > 0).and_then(|v| u32::try_from(v).ok())
}

/// What every graph of a folder is read against: the config, the folder and the config's names.
struct FolderConfig<'a> {
    /// The `genai_config.json`, named in errors.
    config: &'a Path,
    /// The model folder the graphs are in.
    folder: &'a Path,
    /// The input and output names the config gives.
    names: &'a IoNames,
    /// `model.decoder.num_hidden_layers`.
    layers: u32,
    /// How the folder's graphs are arranged.
    layout: Layout,
    /// `model.decoder.session_options`' thread counts (a pipeline graph's own replace them).
    threads: ConfigThreads,
}

/// Reads one graph (the config's `field`, graph `id`) and checks the names the config gives it.
fn read_graph(
    folder_config: &FolderConfig<'_>,
    field: &str,
    id: String,
    entry: PipelineEntry,
) -> Result<LlmGraph, GenaiError> {
    let FolderConfig { config, folder, names, layers, layout, threads } = *folder_config;
    let (file, path) = locate_graph(config, folder, field, entry.filename)?;
    let (model, files) = read_graph_model(&path, Path::new(&file), folder)?;
    let declared = DeclaredSignatures {
        config,
        file: &file,
        inputs: model.input_signatures(),
        outputs: output_signatures(&model),
    };
    let (inputs, outputs) = match layout {
        Layout::Pipeline => declared.pipeline_signatures(field, entry.inputs, entry.outputs)?,
        Layout::Decoder => declared.decoder_signatures(names, layers)?,
    };
    Ok(LlmGraph {
        id,
        file,
        path,
        run_on_prompt: entry.run_on_prompt,
        run_on_token_gen: entry.run_on_token_gen,
        inputs,
        outputs,
        files,
        threads: entry.session_options.unwrap_or(threads),
    })
}

/// An error in the config `config` at `field`.
fn config_error(config: &Path, field: String, message: String) -> GenaiError {
    GenaiError { file: config.to_path_buf(), field, message }
}

/// The graph's file name (as the config gives it) and its path: a file inside `folder`.
fn locate_graph(
    config: &Path,
    folder: &Path,
    field: &str,
    filename: Option<String>,
) -> Result<(String, PathBuf), GenaiError> {
    let error = |field: String, message: String| config_error(config, field, message);
    let file = filename
        .filter(|f| !f.is_empty())
        .ok_or_else(|| error(format!("{field}.filename"), "is missing: name the graph's .onnx file".into()))?;
    let relative = Path::new(&file);
    if relative.is_absolute() || relative.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
        return Err(error(format!("{field}.filename"), format!("{file:?} must be a path inside the model folder")));
    }
    let path = folder.join(relative);
    if !path.is_file() {
        return Err(error(
            format!("{field}.filename"),
            format!(
                "names {file}, which is not in {}; copy the graph into the folder or fix the name",
                folder.display()
            ),
        ));
    }
    Ok((file, path))
}

/// Reads the graph at `path` and locates its files, named relative to the model folder.
fn read_graph_model(path: &Path, relative: &Path, folder: &Path) -> Result<(Model, Vec<LocatedFile>), GenaiError> {
    let model = Model::read(path).map_err(|e| GenaiError {
        file: path.to_path_buf(),
        field: String::new(),
        message: e.to_string(),
    })?;
    let files = model.locate_files(path.parent().unwrap_or(folder)).map_err(|e| GenaiError {
        file: path.to_path_buf(),
        field: String::new(),
        message: e.to_string(),
    })?;
    let prefix = relative.parent().filter(|p| !p.as_os_str().is_empty());
    let files = files
        .into_iter()
        .map(|f| LocatedFile {
            name: prefix.map_or(f.name.clone(), |p| p.join(&f.name).to_string_lossy().into_owned()),
            ..f
        })
        .collect();
    Ok((model, files))
}

/// A graph's declared inputs and outputs, against which the config's names are checked.
struct DeclaredSignatures<'a> {
    /// The config file, named in errors.
    config: &'a Path,
    /// The graph's file name as the config gives it.
    file: &'a str,
    /// The graph's declared inputs.
    inputs: Vec<ValueSignature>,
    /// The graph's declared outputs.
    outputs: Vec<ValueSignature>,
}

impl DeclaredSignatures<'_> {
    /// The error for a `kind` (`input`/`output`) named `name` at `list_field` that the graph lacks.
    fn lacks(&self, kind: &str, name: &str, list_field: String) -> GenaiError {
        let declared = if kind == "input" { &self.inputs } else { &self.outputs };
        let known: Vec<&str> = declared.iter().map(|s| s.name.as_str()).collect();
        config_error(
            self.config,
            list_field,
            format!("{name:?}: graph {} has no {kind} of that name; its {kind}s are {}", self.file, known.join(", ")),
        )
    }

    /// The declared input named `name`, else the error naming `list_field`.
    fn input(&self, name: &str, list_field: String) -> Result<ValueSignature, GenaiError> {
        self.inputs.iter().find(|s| s.name == name).cloned().ok_or_else(|| self.lacks("input", name, list_field))
    }

    /// The declared output named `name`, else the error naming `list_field`.
    fn output(&self, name: &str, list_field: String) -> Result<ValueSignature, GenaiError> {
        self.outputs.iter().find(|s| s.name == name).cloned().ok_or_else(|| self.lacks("output", name, list_field))
    }

    /// A pipeline graph's inputs and outputs: the ones its entry lists, in their order.
    fn pipeline_signatures(
        &self,
        field: &str,
        listed_inputs: Option<Vec<String>>,
        listed_outputs: Option<Vec<String>>,
    ) -> Result<(Vec<ValueSignature>, Vec<ValueSignature>), GenaiError> {
        let listed = |list: Option<Vec<String>>, kind: &str| {
            list.ok_or_else(|| {
                config_error(
                    self.config,
                    format!("{field}.{kind}s"),
                    format!("is missing: list the graph's {kind} names"),
                )
            })
        };
        let mut inputs = Vec::new();
        for (i, name) in listed(listed_inputs, "input")?.iter().enumerate() {
            inputs.push(self.input(name, format!("{field}.inputs[{i}]"))?);
        }
        let mut outputs = Vec::new();
        for (i, name) in listed(listed_outputs, "output")?.iter().enumerate() {
            outputs.push(self.output(name, format!("{field}.outputs[{i}]"))?);
        }
        Ok((inputs, outputs))
    }

    /// A decoder graph's inputs and outputs: ids, mask, positions, logits and the KV cache of
    /// `layers` layers; an input the config does not name is an error.
    fn decoder_signatures(
        &self,
        names: &IoNames,
        layers: u32,
    ) -> Result<(Vec<ValueSignature>, Vec<ValueSignature>), GenaiError> {
        let need_input = |name: &String, config_field: &str| self.input(name, format!("model.decoder.{config_field}"));
        let need_output =
            |name: &String, config_field: &str| self.output(name, format!("model.decoder.{config_field}"));
        let mut inputs = vec![need_input(&names.input_ids, "inputs.input_ids")?];
        inputs.extend(
            [&names.attention_mask, &names.position_ids]
                .into_iter()
                .filter_map(|n| self.inputs.iter().find(|s| &s.name == n).cloned()),
        );
        let mut outputs = vec![need_output(&names.logits, "outputs.logits")?];
        for layer in 0..layers {
            let [past_key, past_value, present_key, present_value] = names.kv(layer);
            inputs.push(need_input(&past_key, "inputs.past_key_names")?);
            inputs.push(need_input(&past_value, "inputs.past_value_names")?);
            outputs.push(need_output(&present_key, "outputs.present_key_names")?);
            outputs.push(need_output(&present_value, "outputs.present_value_names")?);
        }
        let extra: Vec<&str> =
            self.inputs.iter().filter(|d| !inputs.iter().any(|i| i.name == d.name)).map(|d| d.name.as_str()).collect();
        if let Some(first) = extra.first() {
            return Err(config_error(
                self.config,
                "model.decoder.inputs".into(),
                format!("graph {} has inputs the config does not name ({}); npugate feeds ids, mask, positions and the KV cache of model.decoder.num_hidden_layers = {layers} layers", self.file, if extra.len() == 1 { first.to_string() } else { extra.join(", ") }),
            ));
        }
        Ok((inputs, outputs))
    }
}

/// The main graph's declared outputs.
fn output_signatures(model: &Model) -> Vec<ValueSignature> {
    model
        .proto()
        .graph
        .as_ref()
        .map(|g| g.output.iter().map(ValueSignature::from_value_info).collect())
        .unwrap_or_default()
}

#[derive(Deserialize)]
struct ConfigFile {
    model: Option<ModelSection>,
    #[serde(default)]
    search: SearchSection,
}

#[derive(Deserialize)]
struct ModelSection {
    #[serde(rename = "type", default)]
    kind: String,
    context_length: Option<i64>,
    decoder: Option<DecoderSection>,
}

#[derive(Deserialize, Default)]
struct SearchSection {
    #[serde(default)]
    past_present_share_buffer: bool,
}

#[derive(Deserialize)]
struct DecoderSection {
    filename: Option<String>,
    num_hidden_layers: Option<i64>,
    num_key_value_heads: Option<i64>,
    head_size: Option<i64>,
    #[serde(default)]
    inputs: InputNames,
    #[serde(default)]
    outputs: OutputNames,
    pipeline: Option<Pipeline>,
    #[serde(default)]
    session_options: ConfigThreads,
}

impl DecoderSection {
    fn names(&self) -> IoNames {
        IoNames {
            input_ids: self.inputs.input_ids.clone(),
            attention_mask: self.inputs.attention_mask.clone(),
            position_ids: self.inputs.position_ids.clone(),
            past_key: self.inputs.past_key_names.clone(),
            past_value: self.inputs.past_value_names.clone(),
            logits: self.outputs.logits.clone(),
            present_key: self.outputs.present_key_names.clone(),
            present_value: self.outputs.present_value_names.clone(),
        }
    }
}

/// `model.decoder.inputs`, with onnxruntime-genai's defaults (`Config::Defaults`).
#[derive(Deserialize)]
#[serde(default)]
struct InputNames {
    input_ids: String,
    attention_mask: String,
    position_ids: String,
    past_key_names: String,
    past_value_names: String,
}

impl Default for InputNames {
    fn default() -> Self {
        InputNames {
            input_ids: "input_ids".into(),
            attention_mask: "attention_mask".into(),
            position_ids: "position_ids".into(),
            past_key_names: "past_key_values.%d.key".into(),
            past_value_names: "past_key_values.%d.value".into(),
        }
    }
}

/// `model.decoder.outputs`, with onnxruntime-genai's defaults.
#[derive(Deserialize)]
#[serde(default)]
struct OutputNames {
    logits: String,
    present_key_names: String,
    present_value_names: String,
}

impl Default for OutputNames {
    fn default() -> Self {
        OutputNames {
            logits: "logits".into(),
            present_key_names: "present.%d.key".into(),
            present_value_names: "present.%d.value".into(),
        }
    }
}

/// One graph of `model.decoder.pipeline`.
#[derive(Deserialize)]
struct PipelineEntry {
    filename: Option<String>,
    inputs: Option<Vec<String>>,
    outputs: Option<Vec<String>>,
    #[serde(default = "yes")]
    run_on_prompt: bool,
    #[serde(default = "yes")]
    run_on_token_gen: bool,
    session_options: Option<ConfigThreads>,
}

fn yes() -> bool {
    true
}

/// `model.decoder.pipeline`: a list of `{id: graph}` objects, or one such object (both forms
/// onnxruntime-genai reads), kept in the file's order.
struct Pipeline(Vec<(String, PipelineEntry)>);

impl<'de> Deserialize<'de> for Pipeline {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Pipeline, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Vec<(String, PipelineEntry)>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of {\"id\": {graph}} objects, or one such object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some((id, entry)) = map.next_entry::<String, PipelineEntry>()? {
                    entries.push((id, entry));
                }
                Ok(entries)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(Ordered(mut more)) = seq.next_element::<Ordered>()? {
                    entries.append(&mut more);
                }
                Ok(entries)
            }
        }
        struct Ordered(Vec<(String, PipelineEntry)>);
        impl<'de> Deserialize<'de> for Ordered {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Ordered, D::Error> {
                deserializer.deserialize_map(Entries).map(Ordered)
            }
        }
        deserializer.deserialize_any(Entries).map(Pipeline)
    }
}

/// Every regular file below `dir` (following links), as (`prefix` + its `/`-separated name, path);
/// unreadable directories are skipped (hashing names the unreadable file).
fn files_below(dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => files_below(&path, &format!("{name}/"), out),
            Ok(meta) if meta.is_file() => out.push((name, path)),
            _ => {}
        }
    }
}
