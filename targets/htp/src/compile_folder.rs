//! `npugate compile` of an LLM model folder: every graph compiled for one Snapdragon into ONE
//! weight-shared QNN context, as Qualcomm's prompt-processor / token-generator models ship. One
//! harness process creates a session per graph in the config's order, all with
//! `ep.share_ep_contexts=1` and the last with `ep.stop_share_ep_contexts=1` (ONNX Runtime's
//! "EPContext with weight sharing": the group compiles into one context, the last session writes
//! its one `.bin`), each writing its EPContext graph (`<graph stem>_ctx.onnx`, embed mode 0).
//! The compiled folder — a copy of the config naming the EPContext graphs, the graphs, stamped
//! with what they were compiled for ([`CompiledFor`]), and the one `.bin` they all name — deploys
//! and runs as one model.
//!
//! A graph with dynamic dims (onnxruntime-genai's model builder writes one `model.onnx` for the
//! prompt and every token) is sized per phase it runs in by [`phase_shapes`] — the one resolution
//! preflight uses, from the folder's config and `--prompt-tokens`/`--context` — and compiled once
//! per phase: the session loads a staged pipeline of static graphs (`model_prompt.onnx`,
//! `model_token.onnx`, ids `decoder-prompt`, `decoder-token`), and the compiled folder's config is
//! that pipeline (`model.type = "decoder-pipeline"`), each graph an EPContext model of the one context.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use npugate_onnx::genai::{LlmGraph, LlmModel, PipelineStage};
use npugate_onnx::llm_shapes::{phase_shapes, GenerationLengths, GenerationPhase};
use npugate_onnx::Model;
use npugate_result::contract::write_atomic;
use npugate_result::{files, RunResult};
use npugate_settings::{SessionSettings, ShapeSpec};

use super::compile::{ep_context_covers, CompileOutcome, CompileSession};
use super::preflight::{fallback_entries, placement_of, soc_settings, FallbackEntry};
use super::HostHtp;
use npugate_engine::compiled::CompiledFor;
use npugate_engine::model::GivenModel;
use npugate_engine::targets::Cancel;
use npugate_host::runtime::manifest::qnn_sdk_version;
use npugate_result::hexagon::Soc;

/// What to compile: an LLM folder for one SoC.
#[derive(Debug, Clone)]
pub struct FolderCompileRequest<'a> {
    /// The Windows harness and runtime.
    pub host: &'a HostHtp,
    /// The LLM folder, as the command looked at it.
    pub model: &'a GivenModel,
    /// The user's session flags the compile keeps (kept as preflight keeps them).
    pub session: &'a SessionSettings,
    /// The SoC to compile for.
    pub soc: Soc,
    /// Float graphs in fp16.
    pub fp16: bool,
    /// What graphs with dynamic dims are sized for (`--prompt-tokens`, `--context`).
    pub lengths: GenerationLengths,
    /// The longest the compile may take (npugate_engine's `Timeouts::tool`).
    pub timeout: Duration,
}

/// One graph of a compiled folder.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CompiledGraph {
    /// The graph's id in the config.
    pub id: String,
    /// Its EPContext model in the compiled folder.
    pub path: PathBuf,
    /// What it was compiled for (also in its metadata).
    pub compiled_for: CompiledFor,
    /// Its nodes the HTP left to the CPU (plain ONNX nodes beside its EPContext nodes).
    pub left_on_cpu: Vec<FallbackEntry>,
    /// The shapes a graph with dynamic dims was sized with (`input_ids=1x16 …`), else empty.
    pub shapes: String,
}

/// A written compiled folder.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CompiledFolder {
    /// The folder written.
    pub dir: PathBuf,
    /// Every graph, in the config's order.
    pub graphs: Vec<CompiledGraph>,
    /// The one context binary every graph's EPContext nodes name.
    pub context_binary: PathBuf,
    /// The harness's result directory (`result.json`, `ort.log`).
    pub job_dir: PathBuf,
}

impl FolderCompileRequest<'_> {
    /// Compiles the folder into `out` (a directory, replaced file by file); the harness's own
    /// files go to `<out>.compile/`. A graph the HTP cannot compile is an error naming the graph
    /// and the SoC; graphs that did not land in one context binary are an error naming the binaries.
    pub fn run(&self, out: &Path, cancel: &Cancel) -> Result<CompiledFolder> {
        let source = self.model.llm.as_ref().context("compile_folder compiles an LLM folder")?;
        npugate_engine::layout::check_model_folder(out, "--out", &[&source.folder])?;
        let staging =
            tempfile::Builder::new().prefix("npugate-staged-").tempdir().context("cannot create a staging folder")?;
        let (config, staged) = stage(source, self.lengths, staging.path())?;
        let llm = npugate_engine::model::open_folder(&config)?;
        let hashes = &self.model.hashes;
        let prepared = npugate_engine::model::for_run(
            &GivenModel::of(&config, Some(llm.clone()), None, hashes)?,
            &soc_settings(self.session, &[], self.fp16),
            &npugate_engine::model::default_cache(),
            npugate_engine::model::Memory::Here,
        )?;
        let session = CompileSession {
            host: self.host,
            soc: self.soc,
            what: &source.folder,
            prepared: &prepared,
            embed_mode: "0",
            timeout: self.timeout,
        };
        // The staged graphs are gone when this returns: an error names them by file name alone.
        let staged_prefix = format!("{}{}", staging.path().display(), std::path::MAIN_SEPARATOR);
        let CompileOutcome { result, rejections, job_dir } = session
            .run(soc_settings(self.session, &[], self.fp16), out, cancel)
            .map_err(|e| anyhow!("{}", format!("{e:#}").replace(&staged_prefix, "")))?;
        let generation = result
            .generation
            .as_ref()
            .context("the compile's result.json has no graphs (a harness without LLM folders?)")?;
        let build = self.host.runtime.qnn_build().context("the runtime's QnnHtp.dll names no QNN build")?;
        let mut compiled = Vec::new();
        let mut binaries: Vec<(String, PathBuf)> = Vec::new();
        for ((graph, run), staged) in llm.graphs.iter().zip(&generation.graphs).zip(&staged) {
            let name = context_name(&graph.file);
            let written = job_dir.join(&name);
            let mut model = Model::read(&written).map_err(|e| {
                anyhow!("graph {} ({}): the session wrote no usable EPContext model: {e}", graph.id, graph.file)
            })?;
            for file in model.locate_files(&job_dir).map_err(|e| anyhow!("graph {} ({}): {e}", graph.id, graph.file))? {
                if !binaries.iter().any(|(known, _)| *known == file.name) {
                    binaries.push((file.name, file.path));
                }
            }
            let sized = Model::read(&graph.path).map_err(|e| anyhow!("{e}"))?;
            let graph_result = RunResult {
                assignment: run.assignment.clone(),
                graph: run.graph.clone(),
                generation: None,
                ..result.clone()
            };
            let original = staged.source;
            let source_files = npugate_engine::model::ModelFiles::read(&original.path, hashes)?;
            let compiled_for = CompiledFor {
                soc: self.soc.model.into(),
                htp_arch: self.soc.arch.into(),
                qnn_soc_model: self.soc.qnn_soc_model,
                qnn_sdk: qnn_sdk_version(&build).to_string(),
                qnn_backend_build: build.clone(),
                ort_version: result.runtime.ort_version.clone(),
                runtime: self.host.runtime.name.clone(),
                source_model_sha256: source_files.sha256,
                source_model_digest: source_files.digest,
                source_model: npugate_engine::compiled::source_path_from(&out.join(&name), &original.path),
                ep_context_nodes: ep_context_covers(&model, &sized, &run.assignment),
                source_shapes: staged.shapes.clone(),
                fp16: if self.fp16 { "1" } else { "0" }.into(),
            };
            compiled_for.stamp(&mut model);
            let placement = placement_of(&graph_result, &rejections, None, self.soc);
            let left_on_cpu = fallback_entries(&placement).into_iter().filter(|node| !node.expected).collect();
            compiled.push((graph.id.clone(), name, model, compiled_for, left_on_cpu, staged.shapes.clone()));
        }
        let [(binary_name, binary)] = binaries.as_slice() else {
            let names: Vec<&str> = binaries.iter().map(|(name, _)| name.as_str()).collect();
            bail!("the graphs of {} were not compiled into one context binary: their EPContext nodes name {names:?} (log: {})", source.folder.display(), job_dir.join(files::ORT_LOG).display());
        };
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
        // The binary first, then the graphs that name it, then the config that names them.
        let context_binary = out.join(binary_name);
        let bytes = std::fs::read(binary).with_context(|| format!("cannot read {}", binary.display()))?;
        write_atomic(&context_binary, &bytes).with_context(|| format!("cannot write {}", context_binary.display()))?;
        let mut graphs = Vec::new();
        for (id, name, model, compiled_for, left_on_cpu, shapes) in compiled {
            let path = out.join(&name);
            let bytes =
                model.to_bytes().map_err(|e| anyhow!("cannot encode the EPContext model of graph {id}: {e}"))?;
            write_atomic(&path, &bytes).with_context(|| format!("cannot write {}", path.display()))?;
            graphs.push(CompiledGraph { id, path, compiled_for, left_on_cpu, shapes });
        }
        write_config(&llm, out)?;
        Ok(CompiledFolder { dir: out.to_path_buf(), graphs, context_binary, job_dir })
    }
}

/// A phase's inputs as (name, dims), as [`phase_shapes`] sizes them.
type SizedInputs = Vec<(String, Vec<i64>)>;

/// A graph the compile session loads: a graph of the source folder, or one phase of it sized static.
struct StagedGraph<'a> {
    /// The source folder's graph.
    source: &'a LlmGraph,
    /// The shapes its phase was sized with (`input_ids=1x16 …`); empty for a graph as given.
    shapes: String,
}

/// The config the compile session loads, and its graphs in order: `llm`'s own when no graph has
/// dynamic dims; else a pipeline written into `dir` with every graph of `llm` once per phase it
/// runs in, a dynamic one sized for that phase by [`phase_shapes`] (`model.onnx` →
/// `model_prompt.onnx`, id `decoder-prompt`; its data files linked beside it). Refused in one line:
/// a dynamic folder without `search.past_present_share_buffer` (a static token graph over a
/// growing past would run at one length only), and whatever [`phase_shapes`] refuses.
fn stage<'a>(llm: &'a LlmModel, lengths: GenerationLengths, dir: &Path) -> Result<(PathBuf, Vec<StagedGraph<'a>>)> {
    let mut phases = Vec::new();
    for graph in &llm.graphs {
        phases.push(phase_shapes(llm, graph, lengths).map_err(|e| anyhow!("{e}"))?);
    }
    if phases.iter().all(Vec::is_empty) {
        let staged = llm.graphs.iter().map(|source| StagedGraph { source, shapes: String::new() }).collect();
        return Ok((llm.config.clone(), staged));
    }
    if !llm.share_buffer {
        bail!("{}: search.past_present_share_buffer is false, so its dynamic graphs take a past KV cache that grows every token, which a static compiled graph cannot: compile needs the shared KV buffer (set \"past_present_share_buffer\": true, as onnxruntime-genai's model builder writes for GroupQueryAttention models)", llm.config.display());
    }
    let mut stages = Vec::new();
    let mut staged = Vec::new();
    for (graph, sized) in llm.graphs.iter().zip(phases) {
        let original = Model::read(&graph.path).map_err(|e| anyhow!("{e}"))?;
        let stage_of = |id: String, filename: String, (run_on_prompt, run_on_token_gen): (bool, bool)| PipelineStage {
            id,
            filename,
            inputs: graph.inputs.iter().map(|i| i.name.clone()).collect(),
            outputs: graph.outputs.iter().map(|o| o.name.clone()).collect(),
            run_on_prompt,
            run_on_token_gen,
        };
        let runs: Vec<(PipelineStage, SizedInputs)> = match sized.is_empty() {
            true => {
                let runs_in = (graph.run_on_prompt, graph.run_on_token_gen);
                vec![(stage_of(graph.id.clone(), graph.file.clone(), runs_in), Vec::new())]
            }
            false => sized
                .into_iter()
                .map(|phase| {
                    let name = phase.phase.name();
                    let stem = Path::new(&graph.file).file_stem().unwrap_or_default().to_string_lossy().into_owned();
                    let prompt = phase.phase == GenerationPhase::Prompt;
                    (
                        stage_of(format!("{}-{name}", graph.id), format!("{stem}_{name}.onnx"), (prompt, !prompt)),
                        phase.inputs,
                    )
                })
                .collect(),
        };
        for (stage, inputs) in runs {
            let mut model = original.clone();
            model.fix_input_shapes(&inputs).map_err(|e| anyhow!("graph {} ({}): {e}", graph.id, graph.file))?;
            npugate_engine::model::write_with_data_as(&model, &graph.path, &dir.join(&stage.filename))?;
            let shapes = inputs.into_iter().map(|(input, dims)| ShapeSpec { input, dims }.to_string());
            staged.push(StagedGraph { source: graph, shapes: shapes.collect::<Vec<_>>().join(" ") });
            stages.push(stage);
        }
    }
    let config = dir.join(npugate_onnx::genai::GENAI_CONFIG);
    let text = llm.pipeline_config(&stages).map_err(|e| anyhow!("{e}"))?;
    write_atomic(&config, text.as_bytes()).with_context(|| format!("cannot write {}", config.display()))?;
    Ok((config, staged))
}

/// The EPContext model the harness writes for a graph file: `token.onnx` → `token_ctx.onnx`.
fn context_name(file: &str) -> String {
    let stem =
        Path::new(file).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| file.to_string());
    format!("{stem}_ctx.onnx")
}

/// The compiled folder's `genai_config.json`: the source's, each graph's `filename` its EPContext model.
fn write_config(llm: &LlmModel, out: &Path) -> Result<()> {
    let text = llm
        .renamed_config(|id| llm.graphs.iter().find(|graph| graph.id == id).map(|graph| context_name(&graph.file)))
        .map_err(|e| anyhow!("{e}"))?;
    let path = out.join(npugate_onnx::genai::GENAI_CONFIG);
    write_atomic(&path, text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_graph_file_names_its_context_model() {
        assert_eq!(context_name("token.onnx"), "token_ctx.onnx");
        assert_eq!(context_name("graphs/prompt.onnx"), "prompt_ctx.onnx");
    }
}
