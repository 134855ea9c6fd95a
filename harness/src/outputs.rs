//! `--check-outputs`: after the timed loop (never inside it), the outputs its last run left in the
//! binding — or, for a session that runs once, the outputs of that one inference — each output
//! tensor written to `outputs/<name>.npy` for comparison with a reference.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use npyz::WriterBuilder;
use ort::session::SessionOutputs;
use ort::value::{DynValue, PrimitiveTensorElementType, TensorElementType, ValueType};

use crate::measure::BoundSession;

/// Directory inside the result directory that holds the saved outputs.
pub const OUTPUTS_DIR: &str = "outputs";

/// Runs the bound session once and writes every output as `.npy` under `out/outputs/`.
/// Returns the paths relative to `out`, one per model output, in the model's output order.
pub fn save(bound: &mut BoundSession, out: &Path) -> Result<Vec<String>> {
    let outputs: SessionOutputs<'_> = bound.run_with_outputs().context("--check-outputs: the inference failed")?;
    write_all(outputs.iter(), out)
}

/// Writes the outputs the bound session's last run left in its binding, as [`save`] does.
pub fn save_last(bound: &BoundSession, out: &Path) -> Result<Vec<String>> {
    let outputs = bound.last_outputs().context("--check-outputs: cannot read the last timed run's outputs")?;
    write_all(outputs.iter().map(|(name, value)| (name.as_str(), value.view())), out)
}

/// Writes each `(name, value)` as `.npy` under `out/outputs/`; returns the paths relative to `out`.
fn write_all<'v>(
    outputs: impl Iterator<Item = (&'v str, ort::value::DynValueRef<'v>)>,
    out: &Path,
) -> Result<Vec<String>> {
    let dir = out.join(OUTPUTS_DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut used = BTreeSet::new();
    let mut written = Vec::new();
    for (name, value) in outputs {
        let file = unique_file_name(name, &mut used);
        let path = dir.join(&file);
        write_npy(name, &value, &path).with_context(|| format!("--check-outputs: cannot save output {name:?}"))?;
        written.push(format!("{OUTPUTS_DIR}/{file}"));
    }
    Ok(written)
}

/// `<name>.npy` with characters outside `[A-Za-z0-9._-]` replaced by `_`, made unique.
fn unique_file_name(name: &str, used: &mut BTreeSet<String>) -> String {
    let base: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    let base = if base.is_empty() || base.starts_with('.') { format!("output{base}") } else { base };
    let mut file = format!("{base}.npy");
    let mut n = 2;
    while !used.insert(file.clone()) {
        file = format!("{base}-{n}.npy");
        n += 1;
    }
    file
}

/// Writes one output tensor in its own dtype (C order).
fn write_npy(name: &str, value: &DynValue, path: &Path) -> Result<()> {
    let ValueType::Tensor { ty, .. } = value.dtype() else {
        bail!("output {name:?} is a {:?}, not a tensor; .npy holds tensors only", value.dtype());
    };
    use TensorElementType as T;
    match ty {
        T::Float32 => write_typed::<f32>(value, path),
        T::Float64 => write_typed::<f64>(value, path),
        T::Int8 => write_typed::<i8>(value, path),
        T::Uint8 => write_typed::<u8>(value, path),
        T::Int16 => write_typed::<i16>(value, path),
        T::Uint16 => write_typed::<u16>(value, path),
        T::Int32 => write_typed::<i32>(value, path),
        T::Uint32 => write_typed::<u32>(value, path),
        T::Int64 => write_typed::<i64>(value, path),
        T::Uint64 => write_typed::<u64>(value, path),
        T::Bool => write_typed::<bool>(value, path),
        other => bail!("element type {other:?} is not supported by --check-outputs"),
    }
}

fn write_typed<E>(value: &DynValue, path: &Path) -> Result<()>
where
    E: PrimitiveTensorElementType + npyz::AutoSerialize + Copy,
{
    let (shape, data) = value.try_extract_tensor::<E>().map_err(|e| anyhow!("cannot read the tensor: {e}"))?;
    let dims: Vec<u64> = shape.iter().map(|&d| d.max(0) as u64).collect();
    write_array(path, &dims, data.iter().copied())
}

/// Writes `values` as a C-order `.npy` array of shape `dims` in `E`'s own dtype.
pub fn write_array<E>(path: &Path, dims: &[u64], values: impl IntoIterator<Item = E>) -> Result<()>
where
    E: npyz::AutoSerialize + Copy,
{
    let file = std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut writer = npyz::WriteOptions::<E>::new()
        .default_dtype()
        .shape(dims)
        .writer(std::io::BufWriter::new(file))
        .begin_nd()
        .with_context(|| format!("cannot write {}", path.display()))?;
    writer.extend(values).with_context(|| format!("cannot write {}", path.display()))?;
    writer.finish().with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_safe_and_distinct() {
        let mut used = BTreeSet::new();
        assert_eq!(unique_file_name("logits", &mut used), "logits.npy");
        assert_eq!(unique_file_name("a/b:0", &mut used), "a_b_0.npy");
        assert_eq!(unique_file_name("a_b_0", &mut used), "a_b_0-2.npy");
        assert_eq!(unique_file_name("../x", &mut used), "output.._x.npy");
    }
}
