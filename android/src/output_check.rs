//! `--check-outputs` on the host: the fp32 reference run (host harness, CPU EP, same seed, shapes
//! and input files), the comparison of a result directory's saved outputs with it (written as
//! `outputs.json`, `npugate.outputs/1`), and reading that comparison back for the gate.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use gate::outputs::{compare_tensors, OutputComparison, OutputsReport, ReferenceSource, OUTPUTS_SCHEMA};
use npugate_result::{contract, RunResult};

use crate::invocation::{HarnessSettings, TargetPaths};
use crate::runtime::RuntimeManifest;

/// The comparison written into a result directory.
pub const OUTPUTS_FILE: &str = "outputs.json";
/// Where the reference run is written, inside (`--local`) or next to (`--device`) the result dirs.
pub const REFERENCE_DIR: &str = "output-reference";

/// Options of the output check that stay on the host.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputCheckOptions {
    /// Model whose fp32 CPU outputs are the reference, e.g. the float model of a QDQ model
    /// (default: the model itself). Needs --check-outputs.
    #[arg(long, value_name = "PATH", requires = "check_outputs")]
    pub reference_model: Option<PathBuf>,
}

/// A finished reference run.
#[derive(Debug, Clone)]
pub struct Reference {
    /// Its result directory.
    pub dir: PathBuf,
}

/// Runs the reference: `harness` on this machine with the host runtime, the CPU EP, one run, no
/// profiling, `--check-outputs`, and the seed, shapes and input files of `settings`.
pub fn run_reference(
    harness: &Path,
    runtime: &RuntimeManifest,
    model: &Path,
    settings: &HarnessSettings,
    dir: &Path,
) -> Result<Reference> {
    if !model.is_file() {
        bail!("reference model {} not found; pass --reference-model with the float .onnx model", model.display());
    }
    // Only what decides the inputs carries over; EP, QNN and session options stay at the defaults.
    let reference = HarnessSettings {
        runs: 1,
        warmup: 0,
        profile_runs: 0,
        no_reference_pass: true,
        check_outputs: true,
        seed: settings.seed,
        shapes: settings.shapes.clone(),
        inputs: settings.inputs.clone(),
        intra_threads: settings.intra_threads,
        ..HarnessSettings::default()
    };
    let paths = TargetPaths {
        ort_lib: runtime.ort_library_path().display().to_string(),
        ep_library: None,
        model: model.display().to_string(),
        out: dir.display().to_string(),
        input_files: settings.input_files().iter().map(|p| p.display().to_string()).collect(),
    };
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    let output = Command::new(harness)
        .args(reference.harness_args(&paths, Some(&runtime.name)))
        .output()
        .with_context(|| format!("cannot start the harness {} for the reference run", harness.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().last().unwrap_or("no message");
        bail!("the reference run of {} on the CPU EP failed ({}): {last}", model.display(), output.status);
    }
    Ok(Reference { dir: dir.to_path_buf() })
}

/// The reference for a run of `model`: `--reference-model` (or `model`) run by the host `harness`
/// on the host runtime into `dir`.
pub fn reference_for(
    options: &OutputCheckOptions,
    model: &Path,
    harness: &Path,
    settings: &HarnessSettings,
    dir: &Path,
) -> Result<Reference> {
    let runtime = RuntimeManifest::load(crate::cmd::run::HOST_RUNTIME)?;
    run_reference(harness, &runtime, options.reference_model.as_deref().unwrap_or(model), settings, dir)
}

/// `--check-outputs` after a local run in `out`: the reference into `out/output-reference`, then the
/// comparison; prints why either failed and returns false then.
pub fn check_local(options: &OutputCheckOptions, model: &Path, harness: &Path, settings: &HarnessSettings, out: &Path) -> bool {
    match reference_for(options, model, harness, settings, &out.join(REFERENCE_DIR)) {
        Ok(reference) => reference.compare_reporting(out),
        Err(error) => {
            eprintln!("npugate: error: --check-outputs: {error:#}");
            false
        }
    }
}

impl Reference {
    /// [`Reference::compare`], printing why the comparison failed; true when it succeeded.
    pub fn compare_reporting(&self, dir: &Path) -> bool {
        self.compare(dir).map_err(|error| eprintln!("npugate: error: --check-outputs: {error:#}")).is_ok()
    }

    /// Compares the outputs saved in `dir` with the reference outputs and writes `dir/outputs.json`.
    /// Refuses runs whose inputs differ from the reference's (by sha256), naming the input.
    pub fn compare(&self, dir: &Path) -> Result<OutputsReport> {
        let run = RunResult::read(dir)?;
        let reference = RunResult::read(&self.dir)?;
        check_same_inputs(&run, dir, &reference, &self.dir)?;
        if run.artifacts.outputs.len() != run.model.outputs.len() {
            bail!(
                "{} lists {} saved output(s) for {} model output(s); rerun with --check-outputs (the run may have stopped before saving them)",
                dir.join(npugate_result::files::RESULT).display(),
                run.artifacts.outputs.len(),
                run.model.outputs.len()
            );
        }
        let outputs = run
            .model
            .outputs
            .iter()
            .zip(&run.artifacts.outputs)
            .map(|(signature, file)| {
                let reference_file = reference_output(&reference, &self.dir, &signature.name)?;
                let (shape, values) = read_npy_f64(&dir.join(file))?;
                let (reference_shape, reference_values) = read_npy_f64(&reference_file)?;
                compare_tensors(&signature.name, (&reference_shape, &reference_values), (&shape, &values))
                    .with_context(|| format!("output {:?} cannot be compared with the reference", signature.name))
            })
            .collect::<Result<Vec<OutputComparison>>>()?;
        let report = OutputsReport {
            schema: OUTPUTS_SCHEMA.into(),
            reference: ReferenceSource {
                model: reference.model.path.clone(),
                model_sha256: reference.model.sha256.clone(),
                ep: reference.execution.preferred_ep.clone(),
                result_dir: relative_to(&self.dir, dir),
            },
            outputs,
        };
        let file = dir.join(OUTPUTS_FILE);
        contract::write_json(&file, &report).with_context(|| format!("cannot write {}", file.display()))?;
        Ok(report)
    }
}

/// The reference's saved file of output `name` (the reference model must have that output).
fn reference_output(reference: &RunResult, dir: &Path, name: &str) -> Result<PathBuf> {
    let names: Vec<&str> = reference.model.outputs.iter().map(|o| o.name.as_str()).collect();
    let index = names.iter().position(|n| *n == name).with_context(|| {
        format!("the reference model {} has no output {name:?} (its outputs: {names:?}); pass a --reference-model with the same outputs", reference.model.path)
    })?;
    let file = reference.artifacts.outputs.get(index).with_context(|| format!("the reference run in {} saved no outputs", dir.display()))?;
    Ok(dir.join(file))
}

/// Both runs must have fed the same tensors: same input names, same sha256 of the bytes.
fn check_same_inputs(run: &RunResult, dir: &Path, reference: &RunResult, reference_dir: &Path) -> Result<()> {
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

/// A `.npy` file as its shape and values converted to f64 (floats, integers and booleans).
pub fn read_npy_f64(path: &Path) -> Result<(Vec<u64>, Vec<f64>)> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let npy = npyz::NpyFile::new(bytes.as_slice()).with_context(|| format!("{} is not a valid .npy file", path.display()))?;
    if npy.order() == npyz::Order::Fortran && npy.shape().len() > 1 {
        bail!("{} is in Fortran order; npugate writes and reads C order", path.display());
    }
    let shape = npy.shape().to_vec();
    let descr = match npy.dtype() {
        npyz::DType::Plain(type_str) => type_str.to_string(),
        other => other.descr(),
    };
    let unreadable = |e: std::io::Error| anyhow::anyhow!("cannot read the data of {}: {e}", path.display());
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
        "|b1" => npy.into_vec::<bool>().map_err(unreadable)?.into_iter().map(|v| f64::from(u8::from(v))).collect(),
        other => bail!("{} holds dtype {other}, which the output check does not read", path.display()),
    };
    Ok((shape, values))
}

/// The comparison in `dir/outputs.json`, when there is one.
pub fn read_report(dir: &Path) -> Result<Option<OutputsReport>> {
    Ok(contract::read_if_present(&dir.join(OUTPUTS_FILE))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use npyz::WriterBuilder;

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
            let mut writer = npyz::WriteOptions::<i64>::new()
                .default_dtype()
                .shape(&[2, 2])
                .writer(&mut out)
                .begin_nd()
                .unwrap();
            writer.extend([1i64, -2, 3, 4]).unwrap();
            writer.finish().unwrap();
        }
        std::fs::write(&path, out).unwrap();
        assert_eq!(read_npy_f64(&path).unwrap(), (vec![2, 2], vec![1.0, -2.0, 3.0, 4.0]));
        std::fs::write(&path, b"not npy").unwrap();
        assert!(read_npy_f64(&path).unwrap_err().to_string().contains("x.npy"));
    }
}
