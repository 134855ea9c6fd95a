//! The model a run uses, as a set of files. A model is its `.onnx` and every file it refers to
//! (external data, EPContext context binaries), located inside the model's folder and hashed
//! ([`ModelFiles`], host hashes remembered by [`HashCache`]); its digest over all of them is the
//! identity results, baselines and history key on.
//!
//! When the EP needs static dims (QNN) and `--shape` gives input shapes, the model's dynamic input
//! dims are fixed in the model itself (ONNX Runtime's QNN EP rejects every node of a model with
//! dynamic dims, and free-dimension overrides cannot give two dims sharing one symbolic name
//! different sizes) and the fixed model — written once into the cache, content-addressed, its
//! data files linked beside it — is what is deployed, compiled and hashed; the result records the
//! original's sha256 too. A dynamic model without the shapes it needs is refused before anything
//! runs, with the exact flags to pass. So is a model whose tensors cannot fit the memory of the
//! machine its harness runs on ([`check_sizes`]), before the harness is launched.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use npugate_onnx::genai::{self, LlmModel};
use npugate_onnx::size::{Origin, Room, TensorRequest};
use npugate_onnx::{Model, ValueKind, ValueSignature};
use npugate_result::digest::model_digest;
use npugate_result::ModelFile;
use npugate_settings::{HarnessSettings, InputFile, ShapeSpec};
use sha2::{Digest, Sha256};

use npugate_host::hash_cache::HashCache;

/// A model on the host as a set of files, each hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFiles {
    /// sha256 of the `.onnx`.
    pub sha256: String,
    /// Size of the `.onnx` in bytes.
    pub bytes: u64,
    /// Every file the model refers to, sorted by name, with where it is on the host.
    pub referenced: Vec<(ModelFile, PathBuf)>,
    /// The model's identity over all of its files ([`model_digest`]).
    pub digest: String,
    /// How long locating and hashing took (near zero when the hash cache knew every file).
    pub hash_time: Duration,
}

impl ModelFiles {
    /// Locates and hashes the files of `model` (the `.onnx` at `path`): every referenced file must
    /// be inside the model's folder and long enough for its tensors (an error names the tensor
    /// and the path). Hashes come from `cache` when the files are unchanged.
    pub fn of(path: &Path, model: &Model, cache: &HashCache) -> Result<ModelFiles> {
        let started = Instant::now();
        let folder = path.parent().unwrap_or(Path::new("."));
        let located = model.locate_files(folder).map_err(|e| anyhow::anyhow!("model {}: {e}", path.display()))?;
        let (sha256, bytes) = cache.sha256(path).with_context(|| format!("cannot read model {}", path.display()))?;
        let mut referenced = Vec::new();
        for file in located {
            let (sha256, bytes) = cache
                .sha256(&file.path)
                .with_context(|| format!("model {}: cannot read {}", path.display(), file.path.display()))?;
            referenced.push((ModelFile { name: file.name, sha256, bytes }, file.path));
        }
        let listed: Vec<ModelFile> = referenced.iter().map(|(file, _)| file.clone()).collect();
        let digest = model_digest(&sha256, bytes, &listed);
        Ok(ModelFiles { sha256, bytes, referenced, digest, hash_time: started.elapsed() })
    }

    /// Reads the model at `path` and returns [`ModelFiles::of`] it; an LLM folder (or its
    /// `genai_config.json`) is [`ModelFiles::of_folder`].
    pub fn read(path: &Path, cache: &HashCache) -> Result<ModelFiles> {
        GivenModel::read(path, cache).map(|given| given.files)
    }

    /// An LLM model folder as one model: its `genai_config.json` stands where a model's `.onnx`
    /// does, every graph and the files each graph refers to are its referenced files (named
    /// relative to the folder), all in one digest.
    pub fn of_folder(llm: &LlmModel, cache: &HashCache) -> Result<ModelFiles> {
        let started = Instant::now();
        let (sha256, bytes) =
            cache.sha256(&llm.config).with_context(|| format!("cannot read {}", llm.config.display()))?;
        let mut referenced = Vec::new();
        for (name, path) in llm.files().into_iter().filter(|(_, path)| *path != llm.config) {
            let (sha256, bytes) = cache
                .sha256(&path)
                .with_context(|| format!("model {}: cannot read {}", llm.folder.display(), path.display()))?;
            referenced.push((ModelFile { name, sha256, bytes }, path));
        }
        let listed: Vec<ModelFile> = referenced.iter().map(|(file, _)| file.clone()).collect();
        let digest = model_digest(&sha256, bytes, &listed);
        Ok(ModelFiles { sha256, bytes, referenced, digest, hash_time: started.elapsed() })
    }

    /// The referenced files as the harness's `--model-file` hints.
    pub fn hints(&self) -> Vec<ModelFile> {
        self.referenced.iter().map(|(file, _)| file.clone()).collect()
    }
}

/// A model as its command looked at it once — the plan's subject: where the user named it, its
/// LLM folder when it is one, its files hashed, and the command's one hash cache. Every run,
/// compile and bundle of the command takes it from here instead of reading and hashing again.
#[derive(Debug, Clone)]
pub struct GivenModel {
    /// The model as the user named it (an `.onnx`, an LLM folder or its `genai_config.json`).
    pub path: PathBuf,
    /// The LLM folder, when it is one.
    pub llm: Option<LlmModel>,
    /// Its files, hashed.
    pub files: ModelFiles,
    /// The command's hash cache (a fixed copy of the model is hashed with it).
    pub hashes: HashCache,
}

impl GivenModel {
    /// Looks at the model at `path` (an LLM folder is opened) and hashes its files with `hashes`:
    /// for what is not handed a plan's model.
    pub fn read(path: &Path, hashes: &HashCache) -> Result<GivenModel> {
        let llm = genai::config_path(path).map(|config| open_folder(&config)).transpose()?;
        GivenModel::of(path, llm, None, hashes)
    }

    /// The model at `path` whose kind was found already: `llm` its folder when it is one, else
    /// `onnx` the `.onnx` as read (read now when `None`); its files hashed with `hashes`.
    pub fn of(path: &Path, llm: Option<LlmModel>, onnx: Option<&Model>, hashes: &HashCache) -> Result<GivenModel> {
        let files = match (&llm, onnx) {
            (Some(llm), _) => ModelFiles::of_folder(llm, hashes)?,
            (None, Some(onnx)) => ModelFiles::of(path, onnx, hashes)?,
            (None, None) => ModelFiles::of(path, &Model::read(path).map_err(|e| anyhow::anyhow!("{e}"))?, hashes)?,
        };
        Ok(GivenModel { path: path.to_path_buf(), llm, files, hashes: hashes.clone() })
    }
}

/// A model ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedModel {
    /// The file the harness loads: the model as given, or its fixed copy in the cache.
    pub path: PathBuf,
    /// The model as given, when `path` is a fixed copy of it.
    pub fixed_from: Option<FixedFrom>,
    /// The files of the model at `path`, hashed.
    pub files: ModelFiles,
}

/// The original of a model whose input shapes were fixed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedFrom {
    /// The model as the user gave it.
    pub path: PathBuf,
    /// Its `.onnx`'s sha256.
    pub sha256: String,
}

/// A model read and checked against the run's shapes.
struct Checked {
    /// The model with the `--shape`s applied.
    model: Model,
    /// The shapes as text, when they changed the model (it must be written as a fixed copy).
    changed: Option<String>,
}

/// Opens the LLM folder whose config is `config` (every error one line naming the file and field).
pub fn open_folder(config: &Path) -> Result<LlmModel> {
    LlmModel::open(config).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Checks the model a run, a comparison or a sweep cell loads, before anything runs, against the
/// run's settings: an LLM folder (`llm`) for its `--prompt-tokens` and `--gen-tokens` against its
/// context length; a single `.onnx` is [`check`]ed with the shapes and inputs. What a kind of model
/// refuses outright (`--shape` for a folder, generation flags for a file) is the plan's one rule.
pub fn check_run(model: &Path, llm: Option<&LlmModel>, settings: &HarnessSettings) -> Result<()> {
    match llm {
        Some(llm) => check_lengths(llm, settings),
        None => check(model, &settings.shapes, &settings.inputs).map(drop),
    }
}

/// An LLM folder's prompt and generation lengths (given or default) against its context length.
fn check_lengths(llm: &LlmModel, settings: &HarnessSettings) -> Result<()> {
    let lengths = &settings.generation;
    let defaults =
        (npugate_settings::generation::DEFAULT_PROMPT_TOKENS, npugate_settings::generation::DEFAULT_GEN_TOKENS);
    llm.lengths(lengths.prompt_tokens.map(|c| c.get()), lengths.gen_tokens.map(|c| c.get()), defaults)
        .map(drop)
        .map_err(anyhow::Error::msg)
}

/// Reads `model`, checks that every file it refers to is usable ([`Model::locate_files`]) and
/// returns it with `shapes` applied (see [`apply_shapes`]). Nothing is written.
pub fn check(model: &Path, shapes: &[ShapeSpec], inputs: &[InputFile]) -> Result<Model> {
    let onnx = Model::read(model).map_err(|e| anyhow::anyhow!("{e}"))?;
    onnx.locate_files(model.parent().unwrap_or(Path::new(".")))
        .map_err(|e| anyhow::anyhow!("model {}: {e}", model.display()))?;
    Ok(apply_shapes(onnx, model, shapes, inputs)?.model)
}

/// Applies `shapes` to `onnx` (read from `model`): checks every shape against the model's inputs
/// (a name that is no input, a rank mismatch, a dim the model fixes otherwise: an error naming
/// the input and the fix) and refuses a model left with dynamic inputs that neither `shapes` nor
/// an `--input` file gives a size.
fn apply_shapes(mut onnx: Model, model: &Path, shapes: &[ShapeSpec], inputs: &[InputFile]) -> Result<Checked> {
    let given: Vec<(String, Vec<i64>)> = shapes.iter().map(|s| (s.input.clone(), s.dims.clone())).collect();
    let fixed = onnx.fix_input_shapes(&given).map_err(|e| anyhow::anyhow!("model {}: {e}", model.display()))?;
    let missing: Vec<String> = fixed
        .still_dynamic
        .iter()
        .filter(|input| !inputs.iter().any(|file| file.input == input.name))
        .map(|input| input.shape_flag())
        .collect();
    if !missing.is_empty() {
        bail!(
            "model {} has dynamic input dims (a run needs sizes, and accelerator EPs such as QNN reject dynamic dims node by node); pass {} (N = the size to run with)",
            model.display(),
            missing.join(" ")
        );
    }
    let changed = fixed
        .fixed
        .iter()
        .any(|input| input.before.as_ref().is_none_or(|dims| dims.iter().any(|d| d.fixed().is_none())));
    let text = shapes.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ");
    Ok(Checked { model: onnx, changed: changed.then_some(text) })
}

/// The model a run with `settings` loads: fixed by its `--shape`s when its EP needs static dims
/// ([`prepare`]), else the model as given, checked; either way with its files located and hashed
/// and its tensors' sizes checked against `memory` ([`check_sizes`]; an LLM folder's buffers are
/// checked by its harness, which sizes them).
pub fn for_run(given: &GivenModel, settings: &HarnessSettings, cache: &Path, memory: Memory) -> Result<PreparedModel> {
    if let Some(llm) = &given.llm {
        check_lengths(llm, settings)?;
        return Ok(PreparedModel { path: llm.config.clone(), fixed_from: None, files: given.files.clone() });
    }
    if settings.ep.needs_static_shapes() {
        return prepare(given, &settings.shapes, &settings.inputs, cache, memory);
    }
    let model = &given.path;
    let onnx = Model::read(model).map_err(|e| anyhow::anyhow!("{e}"))?;
    let checked = apply_shapes(onnx, model, &settings.shapes, &settings.inputs)?;
    check_sizes(&checked.model, model, &settings.shapes, &settings.inputs, memory)?;
    Ok(PreparedModel { path: model.clone(), fixed_from: None, files: given.files.clone() })
}

/// Checks `model` (its shapes, then its sizes against `memory`, see [`check_sizes`]) and, when
/// `shapes` change it, writes the fixed model into `cache` (`<cache>/<key>/<file name>`, the key
/// a digest of the original's files, its name and the shapes) unless it is there already; the
/// model's external data files are linked (or copied) beside it.
pub fn prepare(
    given: &GivenModel,
    shapes: &[ShapeSpec],
    inputs: &[InputFile],
    cache: &Path,
    memory: Memory,
) -> Result<PreparedModel> {
    let (model, hashes) = (given.path.as_path(), &given.hashes);
    let original = Model::read(model).map_err(|e| anyhow::anyhow!("{e}"))?;
    let given = given.files.clone();
    let Checked { model: fixed, changed } = apply_shapes(original, model, shapes, inputs)?;
    check_sizes(&fixed, model, shapes, inputs, memory)?;
    let Some(shape_text) = changed else {
        return Ok(PreparedModel { path: model.to_path_buf(), fixed_from: None, files: given });
    };
    let name = model.file_name().context("the model path names no file")?;
    let mut key = Sha256::new();
    key.update(name.as_encoded_bytes());
    key.update(format!("\n{}\n{shape_text}\n", given.digest));
    let dir = cache.join(format!("{:x}", key.finalize()));
    let path = dir.join(name);
    if !path.is_file() {
        std::fs::create_dir_all(cache).with_context(|| format!("cannot create {}", cache.display()))?;
        let staging = tempfile::Builder::new()
            .prefix(".fixing-")
            .tempdir_in(cache)
            .with_context(|| format!("cannot write into {}", cache.display()))?;
        write_with_data(&fixed, model, staging.path())?;
        match std::fs::rename(staging.path(), &dir) {
            Ok(()) => {
                let _ = staging.keep();
            }
            // Another run fixed the same model with the same shapes first: use theirs.
            Err(_) if path.is_file() => {}
            Err(error) => {
                return Err(error).with_context(|| format!("cannot move the fixed model into {}", dir.display()))
            }
        }
    }
    let files = ModelFiles::of(&path, &fixed, hashes)?;
    Ok(PreparedModel { path, fixed_from: Some(FixedFrom { path: model.to_path_buf(), sha256: given.sha256 }), files })
}

/// Where a run's harness allocates its tensors, as the host knows it before launching it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// This machine's: the harness runs here (natively, under qemu-user or wine).
    Here,
    /// Another machine's (a device over adb), unknown here: only sizes no machine holds are
    /// refused before launching; the harness checks the rest against the device's own memory.
    Remote,
}

impl Memory {
    /// The memory to check against, as it is now.
    pub fn room(self) -> Room {
        match self {
            Memory::Here => Room::this_machine("on this machine"),
            Memory::Remote => Room::unknown("on the device"),
        }
    }
}

/// Refuses a model whose tensors cannot fit `memory`, before anything is allocated or launched:
/// each real input (its dims as declared with `shapes` applied — `onnx` is the checked model — or
/// as its `--input` file's header holds them) and each output whose dims the model fixes. One
/// line names the model, the tensor, its shape, its size and the fix ([`TensorRequest::check`],
/// the check the harness makes too). An `--input` file's tensor is sized by its `.npy` header.
pub fn check_sizes(
    onnx: &Model,
    model: &Path,
    shapes: &[ShapeSpec],
    inputs: &[InputFile],
    memory: Memory,
) -> Result<()> {
    let room = memory.room();
    let refuse = |e: Box<npugate_onnx::size::TooLarge>| anyhow::anyhow!("model {}: {e}", model.display());
    for input in onnx.input_signatures() {
        let tensor = match inputs.iter().find(|file| file.input == input.name) {
            Some(file) => file_tensor(&input, &file.path),
            None => {
                let origin = if shapes.iter().any(|s| s.input == input.name) {
                    Origin::ShapeFlag
                } else {
                    Origin::DeclaredInput
                };
                static_tensor(&input, origin)
            }
        };
        if let Some(tensor) = tensor {
            tensor.check(&room).map_err(refuse)?;
        }
    }
    let outputs = onnx.proto().graph.iter().flat_map(|graph| &graph.output).map(ValueSignature::from_value_info);
    for tensor in outputs.filter_map(|output| static_tensor(&output, Origin::DeclaredOutput)) {
        tensor.check(&room).map_err(refuse)?;
    }
    Ok(())
}

/// A tensor value whose every dim is fixed, as the tensor it will be.
fn static_tensor(value: &ValueSignature, origin: Origin) -> Option<TensorRequest> {
    let dims = value.dims.as_ref()?.iter().map(|dim| dim.fixed()).collect::<Option<Vec<i64>>>()?;
    (value.kind == ValueKind::Tensor).then(|| TensorRequest {
        name: value.name.clone(),
        element_type: value.element_type,
        dims,
        origin,
    })
}

/// The tensor an `--input` file will be, from its `.npy` header (its data is not read); `None`
/// when the file cannot be read as one: the harness, which reads it, says what is wrong with it.
fn file_tensor(input: &ValueSignature, path: &Path) -> Option<TensorRequest> {
    let npy = npyz::NpyFile::new(std::io::BufReader::new(std::fs::File::open(path).ok()?)).ok()?;
    let dims = npy.shape().iter().map(|&d| i64::try_from(d).unwrap_or(-1)).collect();
    let origin = Origin::InputFile(path.display().to_string());
    Some(TensorRequest { name: input.name.clone(), element_type: input.element_type, dims, origin })
}

/// Writes `rewritten` (a changed copy of the model file `original`) into the existing directory
/// `dir` under `original`'s file name, with `original`'s external data files linked (or copied)
/// beside it so that their relative paths still hold. Returns the written model's path.
pub fn write_with_data(rewritten: &Model, original: &Path, dir: &Path) -> Result<PathBuf> {
    let name = original.file_name().context("the model path names no file")?;
    let path = dir.join(name);
    write_with_data_as(rewritten, original, &path)?;
    Ok(path)
}

/// [`write_with_data`] under another name: `rewritten` written to `path`, `original`'s external
/// data files linked (or copied) into `path`'s directory under their own names; a data file
/// already there (linked for another rewritten copy of the same original) is kept.
pub fn write_with_data_as(rewritten: &Model, original: &Path, path: &Path) -> Result<()> {
    let folder = original.parent().unwrap_or(Path::new("."));
    let dir = path.parent().unwrap_or(Path::new("."));
    rewritten.write(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    for file in rewritten.locate_files(folder).map_err(|e| anyhow::anyhow!("model {}: {e}", original.display()))? {
        let to = dir.join(&file.name);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        if to.exists() {
            continue;
        }
        if std::fs::hard_link(&file.path, &to).is_err() {
            std::fs::copy(&file.path, &to)
                .with_context(|| format!("cannot copy {} beside {}", file.path.display(), path.display()))?;
        }
    }
    Ok(())
}

/// Where fixed models are kept: `<npugate cache>/fixed-models`.
pub fn default_cache() -> PathBuf {
    npugate_host::paths::cache_dir().join("fixed-models")
}

/// Tiny models for the tests of the layers above.
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use std::path::Path;

    use npugate_onnx::proto::tensor_shape_proto::dimension::Value as DimValue;
    use npugate_onnx::proto::tensor_shape_proto::Dimension;
    use npugate_onnx::proto::type_proto::{Tensor, Value};
    use npugate_onnx::proto::{
        GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto,
    };
    use npugate_onnx::Model;

    /// `y = Identity(x)` with `x` float32 of `dims` (`None`: a dim named `?`), written to `path`.
    pub fn identity_model(path: &Path, dims: &[Option<i64>]) {
        let value = |name: &str| ValueInfoProto {
            name: Some(name.into()),
            r#type: Some(TypeProto {
                value: Some(Value::TensorType(Tensor {
                    elem_type: Some(1),
                    shape: Some(TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|d| Dimension {
                                value: Some(match d {
                                    Some(size) => DimValue::DimValue(*size),
                                    None => DimValue::DimParam("?".into()),
                                }),
                                ..Default::default()
                            })
                            .collect(),
                    }),
                })),
                ..Default::default()
            }),
            ..Default::default()
        };
        let node = NodeProto {
            name: Some("id".into()),
            op_type: Some("Identity".into()),
            input: vec!["x".into()],
            output: vec!["y".into()],
            ..Default::default()
        };
        let graph = GraphProto {
            name: Some("g".into()),
            node: vec![node],
            input: vec![value("x")],
            output: vec![value("y")],
            ..Default::default()
        };
        let proto = ModelProto {
            ir_version: Some(8),
            opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
            graph: Some(graph),
            ..Default::default()
        };
        Model::from(proto).write(path).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::testing::identity_model;
    use super::*;

    fn shape(text: &str) -> ShapeSpec {
        text.parse().unwrap()
    }

    /// [`super::prepare`] of the model at `model`, looked at now.
    fn prepare(
        model: &Path,
        shapes: &[ShapeSpec],
        inputs: &[InputFile],
        cache: &Path,
        memory: Memory,
    ) -> Result<PreparedModel> {
        super::prepare(&GivenModel::read(model, &HashCache::default_cache())?, shapes, inputs, cache, memory)
    }

    /// [`super::for_run`] of the model at `model`, looked at now.
    fn for_run(model: &Path, settings: &HarnessSettings, cache: &Path, memory: Memory) -> Result<PreparedModel> {
        super::for_run(&GivenModel::read(model, &HashCache::default_cache())?, settings, cache, memory)
    }

    #[test]
    fn two_dims_sharing_a_name_get_their_own_sizes_and_the_fixed_copy_is_reused() {
        let work = tempfile::tempdir().unwrap();
        let model = work.path().join("cls.onnx");
        identity_model(&model, &[Some(1), Some(3), None, None]);
        let cache = work.path().join("cache");
        let prepared = prepare(&model, &[shape("x=1x3x48x192")], &[], &cache, Memory::Here).unwrap();
        let original = prepared.fixed_from.clone().unwrap();
        assert_eq!(original.sha256, npugate_result::digest::sha256_file(&model).unwrap().0);
        let fixed = Model::read(&prepared.path).unwrap();
        let dims: Vec<String> =
            fixed.input_signatures()[0].dims.clone().unwrap().iter().map(ToString::to_string).collect();
        assert_eq!(dims, ["1", "3", "48", "192"]);
        assert_eq!(prepared.path.file_name().unwrap(), "cls.onnx");
        let again = prepare(&model, &[shape("x=1x3x48x192")], &[], &cache, Memory::Here).unwrap();
        assert_eq!(
            (&again.path, &again.fixed_from, &again.files.digest),
            (&prepared.path, &prepared.fixed_from, &prepared.files.digest),
            "the same shapes reuse the same fixed copy"
        );
        let other = prepare(&model, &[shape("x=1x3x48x320")], &[], &cache, Memory::Here).unwrap();
        assert_ne!(other.path, prepared.path);
        // An identical copy under another name (an A/B comparison of a model with itself).
        let copy = work.path().join("cls_copy.onnx");
        std::fs::copy(&model, &copy).unwrap();
        let copied = prepare(&copy, &[shape("x=1x3x48x192")], &[], &cache, Memory::Here).unwrap();
        assert_eq!(copied.path.file_name().unwrap(), "cls_copy.onnx");
        assert!(copied.path.is_file() && prepared.path.is_file());
    }

    #[test]
    fn static_models_run_as_given_and_dynamic_ones_need_the_flags() {
        let work = tempfile::tempdir().unwrap();
        let (fixed, dynamic) = (work.path().join("fixed.onnx"), work.path().join("dyn.onnx"));
        identity_model(&fixed, &[Some(1), Some(3)]);
        identity_model(&dynamic, &[None, Some(3)]);
        let cache = work.path().join("cache");
        assert_eq!(prepare(&fixed, &[], &[], &cache, Memory::Here).unwrap().path, fixed);
        assert_eq!(
            prepare(&fixed, &[shape("x=1x3")], &[], &cache, Memory::Here).unwrap().path,
            fixed,
            "nothing to fix"
        );
        let error = prepare(&dynamic, &[], &[], &cache, Memory::Here).unwrap_err().to_string();
        assert!(error.contains("dyn.onnx") && error.contains("pass --shape x=Nx3"), "{error}");
        let npy: InputFile = "x=/data/x.npy".parse().unwrap();
        assert_eq!(
            prepare(&dynamic, &[], &[npy], &cache, Memory::Here).unwrap().path,
            dynamic,
            "an --input file gives the size"
        );
        for (bad, needle) in [("y=1x3", "no input"), ("x=1x3x3", "3 dims"), ("x=2x4", "fixes it to 3")] {
            let error = prepare(&dynamic, &[shape(bad)], &[], &cache, Memory::Here).unwrap_err().to_string();
            assert!(error.to_lowercase().contains(needle) || error.contains(needle), "{bad}: {error}");
        }
        assert!(!cache.exists(), "nothing is written for a refused shape");
    }

    /// `identity_model` with its `x`-sized weights `w` stored in `location` beside it.
    fn with_external_weights(path: &Path, location: &str, dims: &[Option<i64>]) {
        use npugate_onnx::proto::tensor_proto::DataLocation;
        use npugate_onnx::proto::{StringStringEntryProto, TensorProto};
        identity_model(path, dims);
        let mut model = Model::read(path).unwrap();
        let entry =
            |key: &str, value: &str| StringStringEntryProto { key: Some(key.into()), value: Some(value.into()) };
        let weights = TensorProto {
            name: Some("w".into()),
            dims: vec![4],
            data_type: Some(1),
            data_location: Some(DataLocation::External as i32),
            external_data: vec![entry("location", location), entry("offset", "0"), entry("length", "16")],
            ..Default::default()
        };
        model.proto_mut().graph.as_mut().unwrap().initializer.push(weights);
        model.write(path).unwrap();
    }

    #[test]
    fn a_model_is_its_onnx_and_its_data_and_a_fixed_copy_keeps_the_data_beside_it() {
        let work = tempfile::tempdir().unwrap();
        let model = work.path().join("ext.onnx");
        with_external_weights(&model, "ext.weights", &[None, Some(3)]);
        std::fs::write(work.path().join("ext.weights"), [1u8; 16]).unwrap();
        let settings = HarnessSettings::from(npugate_settings::SessionSettings {
            shapes: vec![shape("x=2x3")],
            ..Default::default()
        });
        let given = for_run(&model, &settings, &work.path().join("cache"), Memory::Here).unwrap();
        assert_eq!(given.files.referenced.len(), 1);
        assert_eq!(given.files.referenced[0].0.name, "ext.weights");
        assert_ne!(given.files.digest, given.files.sha256, "the digest covers the weights");

        let fixed = prepare(&model, &[shape("x=2x3")], &[], &work.path().join("cache"), Memory::Here).unwrap();
        assert_eq!(
            fixed.path.parent().unwrap().join("ext.weights").metadata().unwrap().len(),
            16,
            "the data sits beside the fixed copy"
        );
        assert_eq!(fixed.files.referenced[0].0, given.files.referenced[0].0);

        // Changing the weights alone changes the identity.
        std::fs::write(work.path().join("ext.weights"), [2u8; 16]).unwrap();
        let changed = for_run(&model, &settings, &work.path().join("cache"), Memory::Here).unwrap();
        assert_eq!(changed.files.sha256, given.files.sha256);
        assert_ne!(changed.files.digest, given.files.digest);

        // Truncated and missing data, and a location out of the folder, are named before anything runs.
        std::fs::write(work.path().join("ext.weights"), [2u8; 8]).unwrap();
        let error = for_run(&model, &settings, work.path(), Memory::Here).unwrap_err().to_string();
        assert!(error.contains("ext.onnx") && error.contains("\"w\"") && error.contains("only 8 bytes"), "{error}");
        std::fs::remove_file(work.path().join("ext.weights")).unwrap();
        let error = check(&model, &[shape("x=2x3")], &[]).unwrap_err().to_string();
        assert!(error.contains("ext.weights") && error.contains("cannot be read"), "{error}");
        let escaping = work.path().join("escaping.onnx");
        with_external_weights(&escaping, "../../etc/passwd", &[Some(1), Some(3)]);
        let error = for_run(&escaping, &settings, work.path(), Memory::Here).unwrap_err().to_string();
        assert!(error.contains("climbs out"), "{error}");
    }

    #[test]
    fn sizes_beyond_the_memory_are_refused_before_anything_runs_naming_the_tensor_and_the_fix() {
        let work = tempfile::tempdir().unwrap();
        let (huge, dynamic) = (work.path().join("huge.onnx"), work.path().join("dyn.onnx"));
        identity_model(&huge, &[Some(1 << 20), Some(1 << 20), Some(1 << 20)]);
        identity_model(&dynamic, &[None, Some(1 << 40)]);
        let cache = work.path().join("cache");
        let error = prepare(&huge, &[], &[], &cache, Memory::Here).unwrap_err().to_string();
        assert!(
            error.starts_with("model ")
                && error.contains(
                    "huge.onnx: input \"x\" is float32[1048576, 1048576, 1048576]: 4611686018427387904 bytes (4.0 EiB)"
                ),
            "{error}"
        );
        assert!(error.contains("available on this machine (MemAvailable)"), "{error}");
        // A device's memory is its harness's to check; what overflows fits no machine.
        assert!(prepare(&huge, &[], &[], &cache, Memory::Remote).is_ok());
        let error =
            prepare(&dynamic, &[shape("x=1099511627776x1099511627776")], &[], &cache, Memory::Remote).unwrap_err();
        assert!(error.to_string().contains("overflows): no machine holds it; pass a smaller --shape x=…"), "{error}");
        assert!(!cache.exists(), "nothing is written for a refused size");

        // An output the model fixes, and an --input file whose header claims a huge array.
        let mut model = Model::read(&dynamic).unwrap();
        let output = &mut model.proto_mut().graph.as_mut().unwrap().output[0];
        let Some(npugate_onnx::proto::type_proto::Value::TensorType(tensor)) =
            output.r#type.as_mut().and_then(|t| t.value.as_mut())
        else {
            unreachable!()
        };
        tensor.shape.as_mut().unwrap().dim[0].value =
            Some(npugate_onnx::proto::tensor_shape_proto::dimension::Value::DimValue(1 << 40));
        let checked = apply_shapes(model, &dynamic, &[shape("x=1x1099511627776")], &[]).unwrap().model;
        let here = |inputs: &[InputFile]| check_sizes(&checked, &dynamic, &[], inputs, Memory::Here).unwrap_err();
        let error = here(&[]).to_string();
        assert!(error.contains("input \"x\" is float32[1, 1099511627776]: 4398046511104 bytes (4.0 TiB)"), "{error}");
        let npy = work.path().join("x.npy");
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 1099511627776), }";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend((header.len() as u16 + 1).to_le_bytes());
        bytes.extend(header.bytes().chain(*b"\n"));
        std::fs::write(&npy, bytes).unwrap();
        let error = here(&[format!("x={}", npy.display()).parse().unwrap()]).to_string();
        assert!(
            error.contains("[3, 1099511627776]") && error.contains("pass a smaller --input x=FILE than"),
            "{error}"
        );
        let mut output_only = Model::read(&dynamic).unwrap();
        output_only.proto_mut().graph.as_mut().unwrap().output[0] =
            checked.proto().graph.as_ref().unwrap().output[0].clone();
        let error = check_sizes(&output_only, &dynamic, &[], &[], Memory::Here).unwrap_err().to_string();
        assert!(
            error.contains("output \"y\" is float32[1099511627776, 1099511627776]: more than 2^64 bytes"),
            "{error}"
        );
    }

    #[test]
    fn a_file_that_is_no_model_is_named() {
        let work = tempfile::tempdir().unwrap();
        let broken = work.path().join("broken.onnx");
        std::fs::write(&broken, b"\x08\x07\x12\xff\xff").unwrap();
        let error = prepare(&broken, &[], &[], work.path(), Memory::Here).unwrap_err().to_string();
        assert!(error.contains("broken.onnx"), "{error}");
    }
}
