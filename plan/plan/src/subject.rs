//! The model a command is about, looked at once: what it is ([`ModelKind`]: a single `.onnx`, one
//! compiled into EPContext nodes, or an onnxruntime-genai LLM folder), what it was compiled for,
//! which model is its fp32 reference, its files hashed ([`Subject::given`], once, with the command's
//! one hash cache), and the one rule of what each kind refuses ([`Subject::refuse`]).
//! [`Plan::resolve`](crate::Plan::resolve) builds it; the commands, the run and the sweep read it,
//! and hand [`Subject::given`] on to whatever runs, compiles or bundles the model.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{bail, Result};
use npugate_engine::compiled::{CompiledFor, ReferenceChoice};
use npugate_engine::model::{GivenModel, ModelFiles};
use npugate_host::hash_cache::HashCache;
use npugate_onnx::genai::{self, LlmModel};
use npugate_onnx::Model;
use npugate_settings::{GenerationSettings, SessionSettings, ShapeSpec};

use crate::Command;

/// What a model is.
#[derive(Debug, Clone)]
pub enum ModelKind {
    /// A single `.onnx` whose nodes the CPU EP can run.
    Onnx,
    /// A single `.onnx` with EPContext nodes (compiled ahead of time); what it was compiled for
    /// when `npugate compile` wrote it.
    Compiled(Option<Box<CompiledFor>>),
    /// An onnxruntime-genai folder (its `genai_config.json` and the graphs it names), run as token
    /// generation; what its graphs were compiled for, when npugate compiled them.
    LlmFolder(Box<LlmModel>, Option<Box<CompiledFor>>),
}

/// The model of a command as the plan resolved it.
#[derive(Debug, Clone)]
pub struct Subject {
    /// The model as the user named it (an `.onnx`, an LLM folder or its `genai_config.json`).
    pub path: PathBuf,
    /// What it is.
    pub kind: ModelKind,
    /// Its fp32 reference: `--reference-model`, a compiled model's recorded source, or itself.
    pub reference: ReferenceChoice,
    /// The command's hash cache.
    hashes: HashCache,
    /// The model with its files hashed, once asked for.
    given: OnceLock<GivenModel>,
    /// The outputs' reference model (when it is another model) with its files hashed, once asked
    /// for (a compiled model's recorded source: when its digest was checked).
    reference_given: OnceLock<GivenModel>,
}

/// The flags that shape a model's run, as given (for [`Subject::refuse`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelFlags {
    /// `--shape` was given.
    pub shapes: bool,
    /// `--input` was given.
    pub inputs: bool,
    /// `compile --context-file` was given.
    pub context_file: bool,
    /// The generation flags given (`--prompt-tokens`, …).
    pub generation: Vec<String>,
    /// `--context-cache` was given.
    pub context_cache: bool,
    /// The QNN flags given that the host HTP emulator's `--soc` sets itself
    /// ([`npugate_settings::QnnArgs::soc_flags`]).
    pub soc_flags: Vec<&'static str>,
}

impl ModelFlags {
    /// The flags a session's settings (and a run's generation settings) give.
    pub fn of(session: &SessionSettings, generation: Option<&GenerationSettings>) -> ModelFlags {
        ModelFlags {
            shapes: !session.shapes.is_empty(),
            inputs: !session.inputs.is_empty(),
            context_file: false,
            generation: generation.map(GenerationSettings::given_flags).unwrap_or_default(),
            context_cache: session.context_cache.is_some(),
            soc_flags: session.qnn.soc_flags(),
        }
    }
}

impl Subject {
    /// Looks at `path` once: an LLM folder is opened (every error one line naming the file and
    /// field), a single model read for its EPContext nodes and compile record; `reference` is
    /// `--reference-model`, `name_it` how the command's user names a compiled model's source; its
    /// files are to be hashed with `hashes` (the command's one cache).
    pub fn classify_in(path: &Path, reference: Option<&Path>, name_it: &str, hashes: HashCache) -> Result<Subject> {
        let kind = match genai::config_path(path) {
            Some(config) => {
                let llm = npugate_engine::model::open_folder(&config)?;
                let compiled = CompiledFor::of_folder(&llm)?.map(Box::new);
                ModelKind::LlmFolder(Box::new(llm), compiled)
            }
            None => {
                let onnx = Model::read(path).map_err(|e| anyhow::anyhow!("{e}"))?;
                match onnx.index().nodes().iter().any(|n| n.is_ep_context()) {
                    false => ModelKind::Onnx,
                    true => ModelKind::Compiled(
                        CompiledFor::of(&onnx)
                            .map_err(|e| e.context(format!("model {}", path.display())))?
                            .map(Box::new),
                    ),
                }
            }
        };
        let compiled = match &kind {
            ModelKind::Compiled(record) => Some(record.as_deref()),
            _ => None,
        };
        let (reference, source) = reference_choice(path, compiled, reference, name_it, &hashes);
        let reference_given = OnceLock::new();
        if let Some(source) = source {
            let _ = reference_given.set(source);
        }
        Ok(Subject { path: path.to_path_buf(), kind, reference, hashes, given: OnceLock::new(), reference_given })
    }

    /// The subject with `given`, the model as its command looked at it already (its files
    /// hashed), handed out by [`Subject::given`] instead of hashing it again.
    pub fn looked_at(self, given: GivenModel) -> Subject {
        let _ = self.given.set(given);
        self
    }

    /// The model with its files located and hashed — done on the first call, handed out after:
    /// what runs, compiles and bundles it takes this instead of reading and hashing it again.
    pub fn given(&self) -> Result<&GivenModel> {
        if let Some(given) = self.given.get() {
            return Ok(given);
        }
        let given = GivenModel::of(&self.path, self.llm().cloned(), None, &self.hashes)?;
        Ok(self.given.get_or_init(|| given))
    }

    /// The outputs' reference model ([`ReferenceChoice::outputs`]) with its files located and
    /// hashed with the command's cache — once, on the first call (the model itself when it is
    /// its own reference); `None` when it has none. One that cannot be read is refused before
    /// anything runs, naming it and the fix.
    pub fn reference_model(&self) -> Result<Option<&GivenModel>> {
        let Some(reference) = self.reference.outputs.as_deref() else { return Ok(None) };
        if reference == self.path {
            return self.given().map(Some);
        }
        if let Some(given) = self.reference_given.get() {
            return Ok(Some(given));
        }
        let fix = "pass --reference-model with the float .onnx model";
        let given = GivenModel::read(reference, &self.hashes).map_err(|error| match reference.exists() {
            false => anyhow::anyhow!("reference model {} not found; {fix}", reference.display()),
            true => error.context(format!("reference model {} cannot be read; {fix}", reference.display())),
        })?;
        Ok(Some(self.reference_given.get_or_init(|| given)))
    }

    /// A compiled model's source model ([`ReferenceChoice::source`], which is its outputs'
    /// reference), as [`Subject::reference_model`] looked at it; `None` for a model not compiled.
    pub fn source_model(&self) -> Result<Option<&GivenModel>> {
        match self.reference.source {
            Some(_) => self.reference_model(),
            None => Ok(None),
        }
    }

    /// The reference model the evidence bundle holds beside the model: the outputs' reference
    /// when it is another model.
    pub fn other_reference(&self) -> Result<Option<&GivenModel>> {
        Ok(self.reference_model()?.filter(|reference| reference.path != self.path))
    }

    /// What npugate compiled it for, if it did.
    pub fn compiled(&self) -> Option<&CompiledFor> {
        match &self.kind {
            ModelKind::Compiled(record) | ModelKind::LlmFolder(_, record) => record.as_deref(),
            ModelKind::Onnx => None,
        }
    }

    /// The LLM folder, when it is one.
    pub fn llm(&self) -> Option<&LlmModel> {
        match &self.kind {
            ModelKind::LlmFolder(llm, _) => Some(llm),
            _ => None,
        }
    }

    /// The one rule of what a model's kind refuses, before anything runs: an LLM folder takes no
    /// `--shape`, `--input` or `--context-file` (its graphs declare their own shapes and inputs,
    /// a generation feeds its own ids, positions and KV cache, and its context binary is always a
    /// file beside them) and no `numerics`; a single model takes no generation flags.
    pub fn refuse(&self, command: Command, flags: &ModelFlags) -> Result<()> {
        let shown = self.path.display();
        match self.llm() {
            Some(llm) => {
                if command == Command::Numerics {
                    bail!("{shown} is an LLM model folder; numerics takes a single .onnx model (one of its graphs)");
                }
                let given =
                    [("--shape", flags.shapes), ("--input", flags.inputs), ("--context-file", flags.context_file)];
                if let Some((flag, _)) = given.iter().find(|(_, given)| *given) {
                    // The flags that size the folder's generation for this command.
                    let lengths = match command {
                        Command::Preflight | Command::Compile => "--prompt-tokens, --context",
                        _ => "--prompt-tokens, --gen-tokens",
                    };
                    bail!(
                        "{flag} does not apply to the LLM model folder {}: its graphs declare their own shapes and inputs (a generation feeds its own ids, positions and KV cache: {lengths}), and its context binary is always a file beside them",
                        llm.folder.display()
                    );
                }
            }
            None => {
                if let Some(flag) = flags.generation.first() {
                    bail!("{flag} applies to an LLM model folder (a directory with genai_config.json), but {shown} is a single model; drop it");
                }
            }
        }
        Ok(())
    }

    /// Refuses what the host HTP emulator cannot run: a weight-shared compiled LLM folder.
    pub fn refuse_on_emulator(&self) -> Result<()> {
        match self.llm() {
            Some(llm) => npugate_engine::compiled::refuse_on_emulator(llm),
            None => Ok(()),
        }
    }
}

/// The reference choice for `model` with `--reference-model` `given`: `compiled` is `None` for a model
/// the CPU EP can run (an LLM folder's graphs are checked by the generation itself), else
/// what the compiled model's record says (`Some(None)`: EPContext nodes without npugate's
/// record); `name_it` is how the command's user names a source (the fix the skip line gives).
/// A recorded source is hashed with `hashes` (the command's cache) to check its digest, and
/// handed back as looked at, so that nothing hashes it again.
fn reference_choice(
    model: &Path,
    compiled: Option<Option<&CompiledFor>>,
    given: Option<&Path>,
    name_it: &str,
    hashes: &HashCache,
) -> (ReferenceChoice, Option<GivenModel>) {
    let Some(record) = compiled else {
        let choice =
            ReferenceChoice { outputs: Some(given.unwrap_or(model).to_path_buf()), ..ReferenceChoice::default() };
        return (choice, None);
    };
    let shapes = match record {
        Some(record) => record
            .source_shapes
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<Vec<ShapeSpec>, String>>()
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let source = match given {
        Some(given) => Ok((given.to_path_buf(), None)),
        None => recorded_source(model, record, hashes).map(|source| (source.path.clone(), Some(source))),
    };
    let choice = match source {
        Ok((path, looked)) => {
            let choice =
                ReferenceChoice { source: Some(path.clone()), outputs: Some(path), source_shapes: shapes, skipped: None };
            return (choice, looked);
        }
        Err(why) => ReferenceChoice {
            skipped: Some(format!(
                "no reference pass and no output check for {}: it is compiled (EPContext nodes, which the CPU EP cannot run) and {why}; \
                 {name_it} to count its FLOPs and check its outputs",
                model.display()
            )),
            ..ReferenceChoice::default()
        },
    };
    (choice, None)
}

/// The source model `record` names, relative to `model`'s folder, when it is there and still the
/// model that was compiled (same digest, hashed with `hashes`), as looked at; else why not.
fn recorded_source(
    model: &Path,
    record: Option<&CompiledFor>,
    hashes: &HashCache,
) -> std::result::Result<GivenModel, String> {
    let Some(record) = record.filter(|r| !r.source_model.is_empty()) else {
        return Err("names no source model (it was not compiled by npugate compile, or before it recorded one)".into());
    };
    let recorded = model.parent().unwrap_or(Path::new("")).join(&record.source_model);
    let Ok(path) =
        recorded.canonicalize().map_err(drop).and_then(|path| if path.is_file() { Ok(path) } else { Err(()) })
    else {
        return Err(format!("its source model {} (recorded at compile time) is not there", recorded.display()));
    };
    match GivenModel::read(&path, hashes) {
        Ok(source) if source.files.digest == record.source_model_digest => Ok(source),
        Ok(GivenModel { files: ModelFiles { digest, .. }, .. }) => Err(format!(
            "its source model {} changed since it was compiled (digest {digest}, compiled from {})",
            path.display(),
            record.source_model_digest
        )),
        Err(error) => Err(format!("its source model {} cannot be read ({error:#})", path.display())),
    }
}
