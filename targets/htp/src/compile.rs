//! `npugate compile`: ahead-of-time compile a model for one Snapdragon on the host HTP. The session
//! writes an EPContext model with the context binary embedded (`ep.context_enable=1`,
//! `ep.context_embed_mode=1`) or, with `context_file`, as a `.bin` beside it (embed mode 0); nodes
//! the HTP rejects stay beside it as plain ONNX nodes. npugate
//! stamps what it was compiled for into its metadata ([`CompiledFor`]) and writes it atomically.
//! Same model, SoC and runtime: the same bytes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use npugate_onnx::Model;
use npugate_profile::ort_log::RejectionReasons;
use npugate_profile::placement::strip_token_suffix;
use npugate_profile::result_dir::read_rejections;
use npugate_result::contract::write_atomic;
use npugate_result::{files, QnnTrace, RunResult, UnsupportedNode};
use npugate_settings::{KeyValue, SessionSettings, ShapeSpec};

use super::preflight::{
    arch_hint, fallback_entries, locate_entries_in_bodies, placement_of, soc_settings, FallbackEntry,
};
use super::HostHtp;
use npugate_engine::compiled::{source_path_from, CompiledFor, EpContextCover};
use npugate_engine::layout::{check_file, written_by_npugate, Staging};
use npugate_engine::model::GivenModel;
use npugate_engine::progress::Progress;
use npugate_engine::targets::wine::WineTarget;
use npugate_engine::targets::{Cancel, Job, Target};
use npugate_host::runtime::manifest::qnn_sdk_version;
use npugate_result::hexagon::Soc;

/// The context model the session writes, inside the job's directory (the harness's working directory).
const CONTEXT_FILE: &str = "model_ctx.onnx";

/// What to compile.
#[derive(Debug, Clone)]
pub struct CompileRequest<'a> {
    /// The Windows harness and runtime.
    pub host: &'a HostHtp,
    /// The model.
    pub model: &'a GivenModel,
    /// The user's session flags the compile keeps (kept as preflight keeps them).
    pub session: &'a SessionSettings,
    /// Shapes of dynamic inputs.
    pub shapes: &'a [ShapeSpec],
    /// The SoC to compile for.
    pub soc: Soc,
    /// Float graphs in fp16.
    pub fp16: bool,
    /// Write the context binary as a file beside the model (`ep.context_embed_mode=0`, what large
    /// models and LLMs use) instead of embedding it.
    pub context_file: bool,
    /// The longest the compile may take (npugate_engine's `Timeouts::tool`).
    pub timeout: Duration,
}

/// A written context model.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Compiled {
    /// The `_ctx.onnx` written.
    pub path: PathBuf,
    /// The context binaries written beside it (with [`CompileRequest::context_file`]).
    pub context_files: Vec<PathBuf>,
    /// What it was compiled for (also in its metadata).
    pub compiled_for: CompiledFor,
    /// Nodes the HTP left to the CPU (they stay in the model as plain ONNX nodes).
    pub left_on_cpu: Vec<FallbackEntry>,
    /// The harness's result directory (`result.json`, `ort.log`).
    pub job_dir: PathBuf,
    /// What the compile changed to get around ONNX Runtime (a model with control flow), one
    /// sentence each.
    pub notes: Vec<String>,
}

impl CompileRequest<'_> {
    /// Compiles into `out` (the `_ctx.onnx`); the harness's own files go to `<out>.compile/`.
    /// A model the HTP cannot compile is an error saying so for the SoC.
    pub fn run(&self, out: &Path, cancel: &Cancel) -> Result<Compiled> {
        check_file(out, "--out", &[&self.model.path])?;
        let prepared = crate::prepare_here(self.model, self.shapes, &[])?;
        let embed_mode = if self.context_file { "0" } else { "1" };
        let settings = soc_settings(self.session, self.shapes, self.fp16);
        let control_flow = ControlFlowCopy::write(self, &prepared, out, cancel)?;
        let notes: Vec<String> = control_flow.iter().map(|_| CONTROL_FLOW_NOTE.to_string()).collect();
        let loaded = control_flow.as_ref().map_or(&prepared, |copy| &copy.prepared);
        let session = CompileSession {
            host: self.host,
            soc: self.soc,
            what: &self.model.path,
            prepared: loaded,
            embed_mode,
            timeout: self.timeout,
        };
        let CompileOutcome { mut result, rejections, job_dir } = session.run(settings, out, cancel)?;
        if let Some(graph) = control_flow.as_ref().and_then(|copy| copy.graph.clone()) {
            // The model's own nodes, as preflight sets the session's against them.
            result.graph = Some(graph);
        }
        let context = job_dir.join(CONTEXT_FILE);
        let mut model =
            Model::read(&context).map_err(|e| anyhow::anyhow!("the session wrote no usable context model: {e}"))?;
        if let Some(copy) = &control_flow {
            model.remove_outputs(&copy.exposed);
        }
        let build = self.host.runtime.qnn_build().context("the runtime's QnnHtp.dll names no QNN build")?;
        let source = Model::read(&prepared.path).map_err(|e| anyhow::anyhow!("{e}"))?;
        let compiled_for = CompiledFor {
            soc: self.soc.model.into(),
            htp_arch: self.soc.arch.into(),
            qnn_soc_model: self.soc.qnn_soc_model,
            qnn_sdk: qnn_sdk_version(&build).to_string(),
            qnn_backend_build: build,
            ort_version: result.runtime.ort_version.clone(),
            runtime: self.host.runtime.name.clone(),
            source_model_sha256: self.model.files.sha256.clone(),
            source_model_digest: self.model.files.digest.clone(),
            source_model: source_path_from(out, &self.model.path),
            ep_context_nodes: ep_context_covers(&model, &source, &result.assignment),
            source_shapes: self.shapes.iter().map(ToString::to_string).collect::<Vec<_>>().join(" "),
            fp16: if self.fp16 { "1" } else { "0" }.into(),
        };
        compiled_for.stamp(&mut model);
        // Loading a context binary composes no graph, so the EP traces none: the compile's trace,
        // in the source model's node names and with the compile's reasons, goes with the model.
        if let (Some(trace), Some(graph)) = (&result.qnn_trace, &result.graph) {
            let recorded =
                with_compile_reasons(npugate_profile::qnn_ops::resolve_sources(trace, graph), &rejections, self.soc);
            model.set_metadata(npugate_result::QNN_TRACE_KEY, &serde_json::to_string(&recorded)?);
        }
        let context_files = write_with_context_files(model, &job_dir, out)?;
        let placement = placement_of(&result, &rejections, None, self.soc);
        // Graph-I/O Q/DQ on the CPU by design are never "left on the CPU" (the placement's one rule).
        let mut left_on_cpu: Vec<FallbackEntry> =
            fallback_entries(&placement).into_iter().filter(|node| !node.expected).collect();
        locate_entries_in_bodies(left_on_cpu.iter_mut(), &self.model.path);
        Ok(Compiled { path: out.to_path_buf(), context_files, compiled_for, left_on_cpu, job_dir, notes })
    }
}

/// What `compile` says of a model with control flow (see [`ControlFlowCopy`]).
const CONTROL_FLOW_NOTE: &str = "the model has control flow: its subgraphs were compiled as a CPU session of ONNX Runtime optimized them (a session run first), so that the compile's optimizers change none — ONNX Runtime's EP-context writer writes a subgraph as loaded beside what they made in it (a folded node twice); the main graph had the default optimizations, and the CPU/HTP split is preflight's";

/// The model a compile of a model with control flow loads, in a temporary folder beside `--out`
/// (removed when the compile ends). ONNX Runtime's EP-context writer writes each subgraph as
/// loaded, beside the initializers its optimizers made or dropped there (a subgraph node folded
/// into a constant is defined twice: *Duplicate definition of name*), so the copy's subgraphs are
/// those of the graph ONNX Runtime partitions, saved by a CPU session of the same runtime first
/// (`--keep-partitioned-graph`): the compile session's optimizers find nothing left to change in
/// them. Its main graph stays the model's own — the writer writes it as optimized, and its
/// optimization decides what the EP takes, as in preflight. The writer also drops the
/// initializers only subgraphs read, so the copy makes them graph outputs (see `npugate_onnx`'s
/// `control_flow` module); the written model gets its own outputs back.
struct ControlFlowCopy {
    /// The copy as the harness loads it.
    prepared: npugate_engine::model::PreparedModel,
    /// The outputs added, to remove from the compile's model.
    exposed: Vec<String>,
    /// The model's nodes and the graph ONNX Runtime partitions set against them (the CPU
    /// session's account): the compile's placement names the model's nodes with it, as
    /// preflight's does, not the copy's (a subgraph's fused `MatMul.1/MatMulAddFusion`).
    graph: Option<npugate_result::ModelGraph>,
    /// The folder holding the copy, removed when the compile ends.
    _folder: tempfile::TempDir,
}

impl ControlFlowCopy {
    /// The copy of `prepared` for `request`'s compile into `out`; `None` for a model without
    /// control flow.
    fn write(
        request: &CompileRequest<'_>,
        prepared: &npugate_engine::model::PreparedModel,
        out: &Path,
        cancel: &Cancel,
    ) -> Result<Option<ControlFlowCopy>> {
        let source = Model::read(&prepared.path).map_err(|e| anyhow::anyhow!("{e}"))?;
        if !source.has_control_flow() {
            return Ok(None);
        }
        let beside = out.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let folder = tempfile::Builder::new()
            .prefix(".npugate-control-flow-")
            .tempdir_in(beside)
            .with_context(|| format!("cannot write into {}", beside.display()))?;
        let (optimized, graph) = request.partitioned_graph(prepared, &folder.path().join("optimized"), cancel)?;
        let mut model = source;
        model.take_subgraphs_from(&Model::read(&optimized).map_err(|e| anyhow::anyhow!("{e}"))?);
        let exposed = model.expose_outer_scope_initializers();
        let path = npugate_engine::model::write_with_data(&model, &prepared.path, folder.path())?;
        let files = npugate_engine::model::ModelFiles::of(&path, &model, &request.model.hashes)?;
        let copy = npugate_engine::model::PreparedModel { path, fixed_from: prepared.fixed_from.clone(), files };
        Ok(Some(ControlFlowCopy { prepared: copy, exposed, graph, _folder: folder }))
    }
}

impl CompileRequest<'_> {
    /// The graph ONNX Runtime partitions for `prepared` on the CPU (its level-1 optimizations, at
    /// most the user's `--optimization`), saved into `dir` by a CPU session of the compile's
    /// runtime on the host (session only); returns its path and the model's nodes with it set
    /// against them (the session's `graph`).
    fn partitioned_graph(
        &self,
        prepared: &npugate_engine::model::PreparedModel,
        dir: &Path,
        cancel: &Cancel,
    ) -> Result<(PathBuf, Option<npugate_result::ModelGraph>)> {
        let session = SessionSettings {
            shapes: self.shapes.to_vec(),
            optimization: self.session.optimization,
            session_config: self.session.session_config.clone(),
            ..SessionSettings::default()
        };
        let settings = npugate_settings::HarnessSettings {
            session_only: true,
            no_reference_pass: true,
            ..npugate_settings::HarnessSettings::from(session)
        };
        let job = Job {
            prepared: Some(prepared),
            keep_partitioned_graph: true,
            ..Job::new(&self.host.harness, &self.host.runtime, &prepared.path, &settings, self.timeout, cancel)
        };
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let execution = WineTarget::new().execute(&job, dir, &Progress::silent())?;
        let path = dir.join(files::PARTITIONED_GRAPH);
        let result = RunResult::read(dir).ok();
        if !path.is_file() {
            let why = result.iter().flat_map(|r| &r.warnings).find(|w| w.contains("partition")).cloned();
            bail!(
                "cannot compile {}: ONNX Runtime's CPU session saved no optimized graph of it ({}: {})",
                self.model.path.display(),
                execution.status(),
                why.unwrap_or_else(|| execution.last_message())
            );
        }
        Ok((path, result.and_then(|r| r.graph)))
    }
}

/// `trace` with the compile log's reason for each node the EP or the HTP backend rejected — what
/// `compile` shows: the backend's own (`Unsupported input/output datatypes … supported
/// configurations …`, logged only at VERBOSE) where the trace has just the EP's ("Failed to add
/// node."). A run of the compiled model composes no graph and logs no rejection: these are its
/// reasons.
fn with_compile_reasons(mut trace: QnnTrace, rejections: &RejectionReasons, soc: Soc) -> QnnTrace {
    for name in rejections.nodes() {
        let Some(reason) = rejections.reason(name).map(|r| arch_hint(&r, soc)) else { continue };
        match trace.unsupported.iter_mut().find(|u| u.node == name) {
            Some(node) => node.reason = reason,
            None => trace.unsupported.push(UnsupportedNode {
                node: name.into(),
                op_type: rejections.op_types.get(name).cloned().unwrap_or_default(),
                reason,
            }),
        }
    }
    trace
}

/// One compile session on the host HTP: the harness creates the session with `ep.context_enable`
/// (the EPContext model at [`CONTEXT_FILE`] in the job's directory, `<out>.compile/`) and exits.
/// Shared by a model's compile and an LLM folder's.
pub(super) struct CompileSession<'a> {
    /// The Windows harness and runtime.
    pub host: &'a HostHtp,
    /// The SoC to compile for.
    pub soc: Soc,
    /// What is compiled, as errors name it (the model, or the folder).
    pub what: &'a Path,
    /// The model as the harness loads it.
    pub prepared: &'a npugate_engine::model::PreparedModel,
    /// `ep.context_embed_mode`: `1` the binary inside the model, `0` a `.bin` beside it.
    pub embed_mode: &'a str,
    /// The longest the session may take.
    pub timeout: Duration,
}

/// What a [`CompileSession`] left: the harness's result, QNN's reasons from its log, its directory.
pub(super) struct CompileOutcome {
    /// The harness's `result.json`.
    pub result: RunResult,
    /// What the QNN EP and the HTP rejected, and why.
    pub rejections: npugate_profile::ort_log::RejectionReasons,
    /// The job's directory (`result.json`, `ort.log`, the context model).
    pub job_dir: PathBuf,
}

impl CompileSession<'_> {
    /// Runs the session with `settings` (the SoC's) for `out`; a session ONNX Runtime or QNN
    /// refused, or a backend that did not start, is an error naming the SoC and QNN's reasons.
    pub fn run(
        &self,
        mut settings: npugate_settings::HarnessSettings,
        out: &Path,
        cancel: &Cancel,
    ) -> Result<CompileOutcome> {
        settings.session_config.extend(
            [
                ("ep.context_enable", "1"),
                ("ep.context_file_path", CONTEXT_FILE),
                ("ep.context_embed_mode", self.embed_mode),
            ]
            .map(|(key, value)| KeyValue { key: key.into(), value: value.into() }),
        );
        let job_dir =
            out.with_file_name(format!("{}.compile", out.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()));
        let staging = Staging::next_to(&job_dir)?;
        let job = Job {
            prepared: Some(self.prepared),
            ..Job::new(&self.host.harness, &self.host.runtime, &self.prepared.path, &settings, self.timeout, cancel)
        };
        let execution = WineTarget::for_soc(self.soc).execute(&job, staging.path(), &Progress::silent())?;
        let job_dir = staging.commit(true)?.dir().to_path_buf();
        let result = RunResult::read(&job_dir).map_err(|_| {
            anyhow::anyhow!("the harness ended ({}) without a result: {}", execution.status(), execution.last_message())
        })?;
        let rejections = read_rejections(&job_dir.join(files::ORT_LOG)).unwrap_or_default();
        if let Some(abi) = result
            .session_error
            .as_deref()
            .and_then(|refused| npugate_engine::ep_plugin::refusal(refused, &self.host.runtime))
        {
            bail!("nothing was compiled: {abi}");
        }
        if let Some(refused) = &result.session_error {
            let finalize = match rejections.finalize_errors.is_empty() {
                true => String::new(),
                false => format!("; QNN: {}", rejections.finalize_errors.join("; ")),
            };
            // The copy a control-flow model is compiled from is named as the user's model.
            let refused = refused.replace(&self.prepared.path.display().to_string(), &self.what.display().to_string());
            bail!(
                "cannot compile {} for {} ({}): {refused}{finalize} (log: {})",
                self.what.display(),
                self.soc.model,
                self.soc.arch,
                job_dir.join(files::ORT_LOG).display()
            );
        }
        if let Some(backend) = result.backend.as_ref().filter(|b| !b.started) {
            bail!(
                "the HTP backend did not start, nothing was compiled: {}",
                backend.reason.as_deref().unwrap_or("no reason in the log")
            );
        }
        Ok(CompileOutcome { result, rejections, job_dir })
    }
}

/// Which source nodes each EPContext node of `compiled` covers: the compile session's QNN
/// partitions (`assignment`, in order) each became one EPContext node (in graph order). The
/// partitions list the nodes as the EP saw them after ONNX Runtime's layout transformation
/// (`conv1_token_1` for `conv1`, plus Transposes and Q/DQ pairs it inserted): each is named by the
/// `source` node it came from, and the inserted ones — no node of the source — are left out. When
/// the counts of partitions and EPContext nodes differ the record would be a guess, so none is made.
pub(super) fn ep_context_covers(
    compiled: &Model,
    source: &Model,
    assignment: &npugate_result::Assignment,
) -> Vec<EpContextCover> {
    let partitions: Vec<&npugate_result::AssignedSubgraph> =
        assignment.subgraphs.iter().filter(|s| s.ep == "QNNExecutionProvider").collect();
    let index = compiled.index();
    let contexts: Vec<&str> = index
        .nodes()
        .iter()
        .filter(|n| n.graph == npugate_onnx::GraphId::MAIN && n.is_ep_context())
        .map(|n| n.name())
        .collect();
    if contexts.len() != partitions.len() {
        return Vec::new();
    }
    let source_index = source.index();
    let source_names: std::collections::HashSet<&str> =
        source_index.nodes().iter().filter(|n| n.graph == npugate_onnx::GraphId::MAIN).map(|n| n.name()).collect();
    let own_name = |name: &str| -> Option<String> {
        [name, strip_token_suffix(name)]
            .into_iter()
            .find(|candidate| source_names.contains(candidate))
            .map(str::to_string)
    };
    contexts
        .into_iter()
        .zip(partitions)
        .map(|(context, partition)| {
            let mut source_nodes: Vec<String> = Vec::new();
            for name in partition.nodes.iter().filter_map(|node| own_name(&node.name)) {
                if !source_nodes.contains(&name) {
                    source_nodes.push(name);
                }
            }
            EpContextCover { ep_context: context.to_string(), source_nodes }
        })
        .collect()
}

/// Writes `model` to `out` atomically, with its context binaries (files in `from` it refers to)
/// beside it, renamed after `out` (`<stem>.bin`, or `<stem>_<n>.bin` for several) so that two
/// compiled models in one folder never share one; the binaries land before the model that names
/// them.
fn write_with_context_files(mut model: Model, from: &Path, out: &Path) -> Result<Vec<PathBuf>> {
    let dir = match out.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let located =
        model.locate_files(from).map_err(|e| anyhow::anyhow!("the session wrote an unusable context model: {e}"))?;
    let stem = out.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    let mut renames = Vec::new();
    // A context binary in the way is replaced only beside the compiled model npugate wrote before.
    let replaceable = !out.exists() || written_by_npugate(out);
    for (index, file) in located.iter().enumerate() {
        let name = if located.len() == 1 { format!("{stem}.bin") } else { format!("{stem}_{index}.bin") };
        if dir.join(&name).exists() && !replaceable {
            bail!(
                "{} exists beside --out and npugate did not write it; nothing was changed — choose another --out",
                dir.join(&name).display()
            );
        }
        let bytes = std::fs::read(&file.path).with_context(|| format!("cannot read {}", file.path.display()))?;
        write_atomic(&dir.join(&name), &bytes)
            .with_context(|| format!("cannot write {}", dir.join(&name).display()))?;
        renames.push((file.name.clone(), name));
    }
    model
        .rewrite_file_references(|old| renames.iter().find(|(from, _)| from == old).map(|(_, to)| to.clone()))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let bytes = model.to_bytes().map_err(|e| anyhow::anyhow!("cannot encode the context model: {e}"))?;
    write_atomic(out, &bytes).with_context(|| format!("cannot write {}", out.display()))?;
    Ok(renames.into_iter().map(|(_, name)| dir.join(name)).collect())
}
