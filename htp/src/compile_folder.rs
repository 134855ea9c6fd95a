//! `npugate compile` of an LLM model folder: every graph compiled for one Snapdragon into ONE
//! weight-shared QNN context, as Qualcomm's prompt-processor / token-generator models ship. One
//! harness process creates a session per graph in the config's order, all with
//! `ep.share_ep_contexts=1` and the last with `ep.stop_share_ep_contexts=1` (ONNX Runtime's
//! "EPContext with weight sharing": the group compiles into one context, the last session writes
//! its one `.bin`), each writing its EPContext graph (`<graph stem>_ctx.onnx`, embed mode 0).
//! The compiled folder — a copy of the config naming the EPContext graphs, the graphs, stamped
//! with what they were compiled for ([`CompiledFor`]), and the one `.bin` they all name — deploys
//! and runs as one model.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use npugate_onnx::genai::LlmModel;
use npugate_onnx::Model;
use npugate_result::contract::write_atomic;
use npugate_result::{files, RunResult};

use super::compile::{ep_context_covers, CompileOutcome, CompileSession};
use super::compiled::CompiledFor;
use super::preflight::{fallback_entries, placement_of, soc_settings, FallbackEntry};
use super::HostHtp;
use npugate_engine::targets::Cancel;
use npugate_host::hexagon::Soc;
use npugate_host::runtime::manifest::qnn_sdk_version;

/// What to compile: an LLM folder for one SoC.
#[derive(Debug, Clone)]
pub struct FolderCompileRequest<'a> {
    /// The Windows harness and runtime.
    pub host: &'a HostHtp,
    /// The folder's `genai_config.json`.
    pub config: &'a Path,
    /// The SoC to compile for.
    pub soc: Soc,
    /// Float graphs in fp16.
    pub fp16: bool,
}

/// One graph of a compiled folder.
#[derive(Debug, Clone)]
pub struct CompiledGraph {
    /// The graph's id in the config.
    pub id: String,
    /// Its EPContext model in the compiled folder.
    pub path: PathBuf,
    /// What it was compiled for (also in its metadata).
    pub compiled_for: CompiledFor,
    /// Its nodes the HTP left to the CPU (plain ONNX nodes beside its EPContext nodes).
    pub left_on_cpu: Vec<FallbackEntry>,
}

/// A written compiled folder.
#[derive(Debug, Clone)]
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
        let llm = npugate_engine::model::open_folder(self.config)?;
        let prepared = npugate_engine::model::for_run(
            self.config,
            &soc_settings(&[], self.fp16),
            &npugate_engine::model::default_cache(),
            npugate_engine::model::Memory::Here,
        )?;
        let session =
            CompileSession { host: self.host, soc: self.soc, what: &llm.folder, prepared: &prepared, embed_mode: "0" };
        let CompileOutcome { result, rejections, job_dir } = session.run(soc_settings(&[], self.fp16), out, cancel)?;
        let generation = result
            .generation
            .as_ref()
            .context("the compile's result.json has no graphs (a harness without LLM folders?)")?;
        let build = self.host.runtime.qnn_build().context("the runtime's QnnHtp.dll names no QNN build")?;
        let mut compiled = Vec::new();
        let mut binaries: Vec<(String, PathBuf)> = Vec::new();
        for (graph, run) in llm.graphs.iter().zip(&generation.graphs) {
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
            let source = Model::read(&graph.path).map_err(|e| anyhow!("{e}"))?;
            let graph_result = RunResult {
                assignment: run.assignment.clone(),
                graph: run.graph.clone(),
                generation: None,
                ..result.clone()
            };
            let compiled_for = CompiledFor {
                soc: self.soc.model.into(),
                htp_arch: self.soc.arch.into(),
                qnn_soc_model: self.soc.qnn_soc_model,
                qnn_sdk: qnn_sdk_version(&build).to_string(),
                qnn_backend_build: build.clone(),
                ort_version: result.runtime.ort_version.clone(),
                runtime: self.host.runtime.name.clone(),
                source_model_sha256: run.sha256.clone(),
                source_model_digest: npugate_engine::model::ModelFiles::read(
                    &graph.path,
                    &npugate_host::hash_cache::HashCache::default_cache(),
                )?
                .digest,
                source_model: super::compiled::source_path_from(&out.join(&name), &graph.path),
                ep_context_nodes: ep_context_covers(&model, &source, &run.assignment),
                source_shapes: String::new(),
                fp16: if self.fp16 { "1" } else { "0" }.into(),
            };
            compiled_for.stamp(&mut model);
            let placement = placement_of(&graph_result, &rejections, None, self.soc);
            let left_on_cpu = fallback_entries(&placement).into_iter().filter(|node| !node.expected).collect();
            compiled.push((graph.id.clone(), name, model, compiled_for, left_on_cpu));
        }
        let [(binary_name, binary)] = binaries.as_slice() else {
            let names: Vec<&str> = binaries.iter().map(|(name, _)| name.as_str()).collect();
            bail!("the graphs of {} were not compiled into one context binary: their EPContext nodes name {names:?} (log: {})", llm.folder.display(), job_dir.join(files::ORT_LOG).display());
        };
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
        // The binary first, then the graphs that name it, then the config that names them.
        let context_binary = out.join(binary_name);
        let bytes = std::fs::read(binary).with_context(|| format!("cannot read {}", binary.display()))?;
        write_atomic(&context_binary, &bytes).with_context(|| format!("cannot write {}", context_binary.display()))?;
        let mut graphs = Vec::new();
        for (id, name, model, compiled_for, left_on_cpu) in compiled {
            let path = out.join(&name);
            let bytes =
                model.to_bytes().map_err(|e| anyhow!("cannot encode the EPContext model of graph {id}: {e}"))?;
            write_atomic(&path, &bytes).with_context(|| format!("cannot write {}", path.display()))?;
            graphs.push(CompiledGraph { id, path, compiled_for, left_on_cpu });
        }
        write_config(&llm, out)?;
        Ok(CompiledFolder { dir: out.to_path_buf(), graphs, context_binary, job_dir })
    }
}

/// The context binary several graphs of `llm` name (a weight-shared context, as [`FolderCompileRequest`]
/// writes), if any.
pub fn shared_context_binary(llm: &LlmModel) -> Option<&str> {
    let named: Vec<&str> = llm
        .graphs
        .iter()
        .flat_map(|graph| graph.files.iter().filter(|f| f.name.ends_with(".bin")).map(|f| f.name.as_str()))
        .collect();
    named.iter().enumerate().find(|(index, name)| named[..*index].contains(name)).map(|(_, name)| *name)
}

/// Refuses to run a weight-shared compiled folder on the host HTP emulator: Qualcomm's x86_64 HTP
/// backend compiles such a context but cannot load it under any QNN version measured (its own
/// words: "Shared weights buffer isn't supported on this platform"; QNN 2.47.0 and 2.49.40 then
/// fail with `QNN_COMMON_ERROR_NOT_SUPPORTED`, 2.50.40 and 2.51.0 crash with a page fault).
pub fn refuse_on_emulator(llm: &LlmModel) -> Result<()> {
    match shared_context_binary(llm) {
        Some(binary) => bail!(
            "{}: its graphs share one weight-shared context ({binary}), which Qualcomm's host HTP emulator cannot load (its x86_64 backend does not support shared weights: QNN 2.47.0 to 2.49.40 refuse the context, 2.50.40 and 2.51.0 crash loading it); run it on a device, or emulate the folder it was compiled from",
            llm.folder.display()
        ),
        None => Ok(()),
    }
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
