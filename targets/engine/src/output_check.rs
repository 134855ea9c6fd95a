//! `--check-outputs` on the host: the fp32 reference run (the host harness, CPU EP, same seed,
//! shapes and input files) and the comparison of a run's saved outputs with it
//! (`npugate.outputs/1`); an LLM folder's generation is compared as tokens, with the step logits
//! of the positions both runs reached from the same context. The comparison is computed here and handed on in memory; saving it as
//! `outputs.json` is the caller's step.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use npugate_gate::outputs::{
    compare_tensors, OutputComparison, OutputsReport, ReferenceSource, TokenComparison, OUTPUTS_SCHEMA,
};
use npugate_onnx::proto::tensor_proto::DataType;
use npugate_onnx::size::{Origin, TensorRequest};
use npugate_onnx::ElementType;
use npugate_result::RunResult;
use npugate_settings::{GenerationSettings, HarnessSettings, SessionSettings};

use crate::model::GivenModel;
use crate::progress::Progress;
use crate::targets::host::HostTarget;
use crate::targets::{Cancel, Job, Target};
use npugate_host::runtime::RuntimeManifest;

/// What the reference run needs: the host harness and runtime, and the float model.
#[derive(Debug, Clone, Copy)]
pub struct ReferenceRequest<'a> {
    /// The harness built for this machine.
    pub harness: &'a Path,
    /// The host runtime (CPU EP).
    pub runtime: &'a RuntimeManifest,
    /// The model whose fp32 CPU outputs are the reference, as its command looked at it.
    pub model: &'a GivenModel,
    /// The run's settings; only what decides the inputs carries over.
    pub settings: &'a HarnessSettings,
    /// The longest it may take ([`Timeouts::reference`](crate::timeouts::Timeouts::reference)).
    pub timeout: Duration,
}

/// A finished reference run.
#[derive(Debug, Clone)]
pub struct Reference {
    /// Its result directory.
    pub dir: PathBuf,
    /// Its result.
    pub result: RunResult,
}

impl ReferenceRequest<'_> {
    /// Runs the reference into `dir` (replaced): the host harness, CPU EP, one run, no profiling,
    /// `--check-outputs`, and the seed, shapes, input files and threads of the run.
    pub fn run(&self, dir: &Path, cancel: &Cancel) -> Result<Reference> {
        let session = SessionSettings {
            seed: self.settings.seed,
            shapes: self.settings.shapes.clone(),
            inputs: self.settings.inputs.clone(),
            intra_threads: self.settings.intra_threads,
            ..SessionSettings::default()
        };
        // An LLM folder's reference is one generation of the same prompt and length.
        let generation = match self.model.llm {
            Some(_) => GenerationSettings {
                prompt_tokens: self.settings.generation.prompt_tokens,
                gen_tokens: self.settings.generation.gen_tokens,
                warmup_generations: Some(0),
                generations: Some("1".parse().map_err(anyhow::Error::msg)?),
            },
            None => GenerationSettings::default(),
        };
        let settings = HarnessSettings {
            runs: 1,
            warmup: 0,
            profile_runs: 0,
            no_reference_pass: true,
            check_outputs: true,
            generation,
            ..HarnessSettings::from(session)
        };
        crate::layout::RESULT_DIR.replace(dir, "--out")?;
        let job = Job {
            given: Some(self.model),
            ..Job::new(self.harness, self.runtime, &self.model.path, &settings, self.timeout, cancel)
        };
        let execution = HostTarget::new().execute(&job, dir, &Progress::silent())?;
        if !execution.succeeded() {
            bail!(
                "the reference run of {} on the CPU EP failed ({}): {}",
                self.model.path.display(),
                execution.status(),
                execution.last_message()
            );
        }
        Ok(Reference { dir: dir.to_path_buf(), result: RunResult::read(dir)? })
    }
}

impl Reference {
    /// Compares the outputs `run` saved in `dir` with the reference outputs. Refuses runs whose
    /// inputs differ from the reference's (by sha256), naming the input.
    pub fn compare(&self, dir: &Path, run: &RunResult) -> Result<OutputsReport> {
        let reference = &self.result;
        check_same_inputs(run, dir, reference, &self.dir)?;
        if run.artifacts.outputs.len() != run.model.outputs.len() {
            bail!(
                "{} lists {} saved output(s) for {} model output(s); rerun with --check-outputs (the run may have stopped before saving them)",
                dir.join(npugate_result::files::RESULT).display(),
                run.artifacts.outputs.len(),
                run.model.outputs.len()
            );
        }
        if run.generation.is_some() {
            return self.compare_generation(dir, run);
        }
        let outputs = run
            .model
            .outputs
            .iter()
            .zip(&run.artifacts.outputs)
            .map(|(signature, file)| {
                let reference_file = saved_output(reference, &self.dir, &signature.name)?;
                let output = read_npy(&dir.join(file))?;
                let reference = read_npy(&reference_file)?;
                let comparison = compare_tensors(
                    &signature.name,
                    (&reference.shape, &reference.values),
                    (&output.shape, &output.values),
                )
                .with_context(|| format!("output {:?} cannot be compared with the reference", signature.name))?;
                Ok(OutputComparison { non_binary_bools: output.non_binary_bools, ..comparison })
            })
            .collect::<Result<Vec<OutputComparison>>>()?;
        Ok(OutputsReport { schema: OUTPUTS_SCHEMA.into(), reference: self.source(dir), outputs, tokens: None })
    }

    /// An LLM folder's generation against the reference generation: the greedy tokens position
    /// by position, and the step logits (`step_logits`) of the positions up to and including the
    /// first divergence, where both runs had seen the same tokens.
    fn compare_generation(&self, dir: &Path, run: &RunResult) -> Result<OutputsReport> {
        let read = |result: &RunResult, result_dir: &Path, name: &str| {
            read_npy(&saved_output(result, result_dir, name)?).map(|tensor| (tensor.shape, tensor.values))
        };
        let as_tokens = |values: Vec<f64>| values.into_iter().map(|v| v as i64).collect::<Vec<i64>>();
        let (_, tokens) = read(run, dir, GENERATED_TOKENS)?;
        let (_, reference_tokens) = read(&self.result, &self.dir, GENERATED_TOKENS)?;
        let mut tokens = TokenComparison::compare(&as_tokens(reference_tokens), &as_tokens(tokens));
        let (shape, logits) = read(run, dir, STEP_LOGITS)?;
        let (reference_shape, reference_logits) = read(&self.result, &self.dir, STEP_LOGITS)?;
        let (rows_of, vocab_of) = (|s: &[u64]| s.first().copied().unwrap_or(0), |s: &[u64]| s.get(1).copied());
        if vocab_of(&shape) != vocab_of(&reference_shape) {
            bail!(
                "the step logits of {} ({shape:?}) and of the reference in {} ({reference_shape:?}) have different vocabularies; pass a --reference-model folder of the same model",
                dir.display(),
                self.dir.display()
            );
        }
        let rows = (tokens.same_context_positions() as u64).min(rows_of(&shape)).min(rows_of(&reference_shape));
        let head = [rows, vocab_of(&shape).unwrap_or(0)];
        let length = usize::try_from(head[0] * head[1])?;
        let mut outputs = Vec::new();
        if length > 0 {
            outputs.push(compare_tensors(
                STEP_LOGITS,
                (&head, &reference_logits[..length]),
                (&head, &logits[..length]),
            )?);
            tokens.logit_positions = rows as usize;
        }
        Ok(OutputsReport { schema: OUTPUTS_SCHEMA.into(), reference: self.source(dir), outputs, tokens: Some(tokens) })
    }

    /// The reference as recorded in a comparison saved in `dir`.
    fn source(&self, dir: &Path) -> ReferenceSource {
        let model = &self.result.model;
        ReferenceSource {
            model: model.path.clone(),
            model_sha256: model.sha256.clone(),
            model_digest: model.digest.clone(),
            ep: self.result.execution.preferred_ep.clone(),
            result_dir: relative_to(&self.dir, dir),
        }
    }
}

/// The saved output of a generation's greedy tokens.
const GENERATED_TOKENS: &str = "generated_tokens";
/// The saved output of a generation's step logits (`[rows, vocab]`, row `i` chose token `i`).
const STEP_LOGITS: &str = "step_logits";

/// The saved file of output `name` of the run in `dir` (its model must have that output).
fn saved_output(result: &RunResult, dir: &Path, name: &str) -> Result<PathBuf> {
    let names: Vec<&str> = result.model.outputs.iter().map(|o| o.name.as_str()).collect();
    let index = names.iter().position(|n| *n == name).with_context(|| {
        format!("the model {} of the run in {} has no output {name:?} (its outputs: {names:?}); pass a --reference-model with the same outputs", result.model.path, dir.display())
    })?;
    let file = result
        .artifacts
        .outputs
        .get(index)
        .with_context(|| format!("the run in {} saved no outputs; rerun with --check-outputs", dir.display()))?;
    Ok(dir.join(file))
}

/// Both runs must have fed the same tensors: same input names, same sha256 of the bytes.
pub fn check_same_inputs(run: &RunResult, dir: &Path, reference: &RunResult, reference_dir: &Path) -> Result<()> {
    for input in &run.inputs {
        let Some(other) = reference.inputs.iter().find(|r| r.name == input.name) else {
            bail!(
                "the reference model {} has no input {:?}; pass a --reference-model with the same inputs",
                reference.model.path,
                input.name
            );
        };
        if other.sha256 != input.sha256 || other.shape != input.shape {
            bail!(
                "input {:?} differs between the run ({}: shape {:?}, sha256 {}) and the reference ({}: shape {:?}, sha256 {}); \
                 both must use the same --seed, --shape and --input, and the same input dtype",
                input.name,
                dir.display(),
                input.shape,
                input.sha256,
                reference_dir.display(),
                other.shape,
                other.sha256
            );
        }
    }
    Ok(())
}

/// `path` relative to `base` when `path` lies below `base` or next to it, else as given.
fn relative_to(path: &Path, base: &Path) -> String {
    if let Ok(inside) = path.strip_prefix(base) {
        return inside.display().to_string();
    }
    match (path.parent(), base.parent(), path.file_name()) {
        (Some(a), Some(b), Some(name)) if a == b => format!("../{}", name.to_string_lossy()),
        _ => path.display().to_string(),
    }
}

/// A `.npy` file read as f64 values.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyTensor {
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its values (booleans as 0 and 1).
    pub values: Vec<f64>,
    /// Of a bool tensor: the elements whose raw byte was neither 0 nor 1 (read as true).
    pub non_binary_bools: usize,
}

/// Writes integer values with `dims` as a C-order `.npy` of `int64`, or of `int32` when `int32`
/// (an input file the harness feeds as it is declared).
pub fn write_npy_ints(path: &Path, dims: &[u64], values: &[i64], int32: bool) -> Result<()> {
    let written = if int32 {
        write_npy(path, dims, values.iter().map(|&v| i32::try_from(v).unwrap_or(i32::MAX)))
    } else {
        write_npy(path, dims, values.iter().copied())
    };
    written.with_context(|| format!("cannot write {}", path.display()))
}

fn write_npy<T: npyz::AutoSerialize>(
    path: &Path,
    dims: &[u64],
    values: impl Iterator<Item = T>,
) -> std::io::Result<()> {
    use npyz::WriterBuilder;
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut npy = npyz::WriteOptions::<T>::new().default_dtype().shape(dims).writer(file).begin_nd()?;
    npy.extend(values)?;
    npy.finish()
}

/// A `.npy` file as its shape and values converted to f64 (floats, integers and booleans); the
/// values' size is checked against this machine's memory first.
pub fn read_npy(path: &Path) -> Result<NpyTensor> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let npy =
        npyz::NpyFile::new(bytes.as_slice()).with_context(|| format!("{} is not a valid .npy file", path.display()))?;
    if npy.order() == npyz::Order::Fortran && npy.shape().len() > 1 {
        bail!("{} is in Fortran order; npugate writes and reads C order", path.display());
    }
    let shape = npy.shape().to_vec();
    let values = TensorRequest {
        name: path.file_stem().unwrap_or_default().to_string_lossy().into_owned(),
        element_type: ElementType::of(DataType::Double),
        dims: shape.iter().map(|&d| i64::try_from(d).unwrap_or(-1)).collect(),
        origin: Origin::Saved(path.display().to_string()),
    };
    values.check(&crate::model::Memory::Here.room())?;
    let descr = match npy.dtype() {
        npyz::DType::Plain(type_str) => type_str.to_string(),
        other => other.descr(),
    };
    let unreadable = |e: std::io::Error| anyhow::anyhow!("cannot read the data of {}: {e}", path.display());
    let mut non_binary_bools = 0;
    let values: Vec<f64> = match descr.as_str() {
        "<f4" => npy.into_vec::<f32>().map_err(unreadable)?.into_iter().map(f64::from).collect(),
        "<f8" => npy.into_vec::<f64>().map_err(unreadable)?,
        "|i1" => npy.into_vec::<i8>().map_err(unreadable)?.into_iter().map(f64::from).collect(),
        "|u1" => npy.into_vec::<u8>().map_err(unreadable)?.into_iter().map(f64::from).collect(),
        "<i2" => npy.into_vec::<i16>().map_err(unreadable)?.into_iter().map(f64::from).collect(),
        "<u2" => npy.into_vec::<u16>().map_err(unreadable)?.into_iter().map(f64::from).collect(),
        "<i4" => npy.into_vec::<i32>().map_err(unreadable)?.into_iter().map(f64::from).collect(),
        "<u4" => npy.into_vec::<u32>().map_err(unreadable)?.into_iter().map(f64::from).collect(),
        "<i8" => npy.into_vec::<i64>().map_err(unreadable)?.into_iter().map(|v| v as f64).collect(),
        "<u8" => npy.into_vec::<u64>().map_err(unreadable)?.into_iter().map(|v| v as f64).collect(),
        // Truth values: a backend's bool byte may hold any non-zero value for true (the host HTP
        // writes 12), which is true, not an unreadable tensor.
        // The data is the file's last byte per element (npyz's bool reader refuses other bytes).
        "|b1" => {
            let count = usize::try_from(shape.iter().product::<u64>()).unwrap_or(usize::MAX);
            let data = bytes.len().checked_sub(count).map(|start| &bytes[start..]);
            let data = data.with_context(|| format!("{} holds fewer bool values than its shape", path.display()))?;
            non_binary_bools = data.iter().filter(|&&v| v > 1).count();
            data.iter().map(|&v| f64::from(u8::from(v != 0))).collect()
        }
        other => bail!("{} holds dtype {other}, which the output check does not read", path.display()),
    };
    Ok(NpyTensor { shape, values, non_binary_bools })
}

#[cfg(test)]
mod tests {
    use super::*;
    use npyz::WriterBuilder;

    #[test]
    fn bool_tensors_are_read_as_truth_values_whatever_byte_holds_true() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mask.npy");
        let mut bytes = Vec::new();
        let mut writer =
            npyz::WriteOptions::<u8>::new().default_dtype().shape(&[3]).writer(&mut bytes).begin_nd().unwrap();
        writer.extend([0u8, 1, 12]).unwrap();
        writer.finish().unwrap();
        // The same bytes declared bool, as an emulated run writes them.
        let header = bytes.windows(3).position(|w| w == b"|u1").unwrap();
        bytes[header..header + 3].copy_from_slice(b"|b1");
        std::fs::write(&path, &bytes).unwrap();
        let read = read_npy(&path).unwrap();
        assert_eq!((read.shape, read.values, read.non_binary_bools), (vec![3], vec![0.0, 1.0, 1.0], 1));
    }

    #[test]
    fn reference_dir_is_named_relative_to_the_result_dir() {
        assert_eq!(relative_to(Path::new("out/output-reference"), Path::new("out")), "output-reference");
        assert_eq!(relative_to(Path::new("out/output-reference"), Path::new("out/dev1")), "../output-reference");
    }

    #[test]
    fn npy_of_every_written_dtype_reads_as_f64() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.npy");
        let mut out = Vec::new();
        {
            let mut writer =
                npyz::WriteOptions::<i64>::new().default_dtype().shape(&[2, 2]).writer(&mut out).begin_nd().unwrap();
            writer.extend([1i64, -2, 3, 4]).unwrap();
            writer.finish().unwrap();
        }
        std::fs::write(&path, out).unwrap();
        let read = read_npy(&path).unwrap();
        assert_eq!((read.shape, read.values, read.non_binary_bools), (vec![2, 2], vec![1.0, -2.0, 3.0, 4.0], 0));
        std::fs::write(&path, b"not npy").unwrap();
        assert!(read_npy(&path).unwrap_err().to_string().contains("x.npy"));
    }
}
