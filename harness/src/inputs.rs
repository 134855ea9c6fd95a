//! Model inputs: seeded random data for every ONNX element type, or real data from `.npy` files,
//! created once before any timed run. Each input's size is checked before it is allocated
//! ([`planned`] resolves its shape, [`crate::memory::check`] refuses what does not fit).

use std::path::Path;

use anyhow::{bail, Context, Result};
use npugate_onnx::size::{Origin, TensorRequest};
use npugate_result::{InputDescription, TensorSignature};
use npugate_settings::{InputFile, ShapeSpec};
use ort::memory::Allocator;
use ort::value::{DynValue, Outlet, Tensor, TensorElementType, ValueType};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

use crate::memory;

/// An input value ready to bind, with its description for the result.
pub struct PreparedInput {
    /// What was fed, for `result.json`.
    pub description: InputDescription,
    /// The ORT value.
    pub value: DynValue,
}

/// Describes a graph input or output as the model declares it.
pub fn signature(outlet: &Outlet) -> TensorSignature {
    match outlet.dtype() {
        ValueType::Tensor { ty, shape, dimension_symbols } => TensorSignature {
            name: outlet.name().to_string(),
            element_type: element_type_name(*ty),
            shape: shape.iter().map(|&d| (d >= 0).then_some(d)).collect(),
            dim_names: dimension_symbols.iter().map(|s| s.to_string()).collect(),
        },
        other => TensorSignature {
            name: outlet.name().to_string(),
            element_type: format!("{other:?}").to_lowercase(),
            shape: Vec::new(),
            dim_names: Vec::new(),
        },
    }
}

/// Builds one value per session input: from `--input` files where given, else seeded random data
/// shaped by the model's fixed dimensions and `--shape` overrides.
pub fn prepare(
    session_inputs: &[Outlet],
    shapes: &[ShapeSpec],
    files: &[InputFile],
    seed: u64,
) -> Result<Vec<PreparedInput>> {
    let known: Vec<&str> = session_inputs.iter().map(|o| o.name()).collect();
    for name in shapes.iter().map(|s| &s.input).chain(files.iter().map(|f| &f.input)) {
        if !known.contains(&name.as_str()) {
            bail!("the model has no input named {name:?}; its inputs are {known:?}");
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    session_inputs
        .iter()
        .map(|outlet| {
            let ValueType::Tensor { ty, shape: declared, dimension_symbols } = outlet.dtype() else {
                bail!(
                    "input {:?} is a {:?}, not a tensor; npugate-harness feeds tensors only",
                    outlet.name(),
                    outlet.dtype()
                );
            };
            let name = outlet.name();
            let requested = shapes.iter().find(|s| s.input == name).map(|s| s.dims.as_slice());
            let file = files.iter().find(|f| f.input == name).map(|f| f.path.as_path());
            let symbols: Vec<String> = dimension_symbols.iter().map(|s| s.to_string()).collect();
            match file {
                Some(path) => from_npy(name, *ty, declared, requested, path),
                None => {
                    let tensor = planned(name, memory::element_type(*ty), declared, &symbols, requested)?;
                    memory::check(&tensor)?;
                    random(name, *ty, tensor.dims, &mut rng, seed)
                }
            }
        })
        .collect()
}

/// The tensor a random input will be, before anything is allocated: its shape from `--shape` if
/// given, else the model's ([`resolve_shape`]), and so the fix a size refusal names.
pub fn planned(
    name: &str,
    element_type: npugate_onnx::ElementType,
    declared: &[i64],
    symbols: &[String],
    requested: Option<&[i64]>,
) -> Result<TensorRequest> {
    let dims = resolve_shape(name, declared, symbols, requested)?;
    let origin = if requested.is_some() { Origin::ShapeFlag } else { Origin::DeclaredInput };
    Ok(TensorRequest { name: name.to_string(), element_type, dims, origin })
}

/// The concrete shape of an input: `--shape` if given (checked against fixed dims), else the
/// declared shape, which must then have no dynamic dimension.
fn resolve_shape(name: &str, declared: &[i64], symbols: &[String], requested: Option<&[i64]>) -> Result<Vec<i64>> {
    if let Some(requested) = requested {
        check_compatible(name, declared, requested, "--shape")?;
        return Ok(requested.to_vec());
    }
    if let Some(index) = declared.iter().position(|&d| d < 0) {
        let symbol = symbols.get(index).filter(|s| !s.is_empty()).map(|s| format!(" ({s:?})")).unwrap_or_default();
        let example: Vec<String> = declared.iter().map(|&d| if d < 0 { "N".into() } else { d.to_string() }).collect();
        bail!(
            "input {name:?} has dynamic dimension {index}{symbol} in shape {declared:?}; \
             pass --shape {name}={} with N replaced by a concrete size",
            example.join("x")
        );
    }
    Ok(declared.to_vec())
}

fn check_compatible(name: &str, declared: &[i64], actual: &[i64], source: &str) -> Result<()> {
    let mismatch = declared.len() != actual.len() || declared.iter().zip(actual).any(|(&d, &a)| d >= 0 && d != a);
    if mismatch {
        bail!("{source} gives input {name:?} shape {actual:?}, but the model declares {declared:?} (-1 = dynamic)");
    }
    Ok(())
}

fn random(
    name: &str,
    ty: TensorElementType,
    shape: Vec<i64>,
    rng: &mut ChaCha8Rng,
    seed: u64,
) -> Result<PreparedInput> {
    let count = element_count(&shape)?;
    let source = format!("random(seed={seed})");
    if ty == TensorElementType::String {
        let strings: Vec<String> = (0..count).map(|_| format!("npugate-{}", rng.next_u32() % 1000)).collect();
        let digest = Sha256::digest(strings.join("\0").as_bytes());
        let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
        let array = ndarray::ArrayD::from_shape_vec(dims, strings).context("string input shape")?;
        let value = Tensor::from_string_array(&array).map_err(|e| anyhow::anyhow!("input {name:?}: {e}"))?;
        return Ok(PreparedInput {
            description: describe(name, ty, shape, source, format!("{digest:x}")),
            value: value.into_dyn(),
        });
    }
    let bytes = random_bytes(ty, count, rng)?;
    tensor_from_bytes(name, ty, shape, &bytes, source)
}

/// Little-endian bytes of `count` random elements: floats uniform in [0, 1), integers uniform in
/// [0, 16), booleans a fair coin, other types (float8, int4, …) random bit patterns.
fn random_bytes(ty: TensorElementType, count: usize, rng: &mut ChaCha8Rng) -> Result<Vec<u8>> {
    use TensorElementType as T;
    let unit = |rng: &mut ChaCha8Rng| (rng.next_u32() >> 8) as f32 / (1u32 << 24) as f32;
    let small = |rng: &mut ChaCha8Rng| (rng.next_u32() % 16) as u64;
    let mut out = Vec::with_capacity(ty.byte_size(count).unwrap_or(count));
    for _ in 0..count {
        match ty {
            T::Float32 => out.extend_from_slice(&unit(rng).to_le_bytes()),
            T::Float64 => out.extend_from_slice(&(unit(rng) as f64).to_le_bytes()),
            T::Float16 => out.extend_from_slice(&half::f16::from_f32(unit(rng)).to_le_bytes()),
            T::Bfloat16 => out.extend_from_slice(&half::bf16::from_f32(unit(rng)).to_le_bytes()),
            T::Bool => out.push((rng.next_u32() & 1) as u8),
            T::Int8 | T::Uint8 => out.push(small(rng) as u8),
            T::Int16 | T::Uint16 => out.extend_from_slice(&(small(rng) as u16).to_le_bytes()),
            T::Int32 | T::Uint32 => out.extend_from_slice(&(small(rng) as u32).to_le_bytes()),
            T::Int64 | T::Uint64 => out.extend_from_slice(&small(rng).to_le_bytes()),
            _ => break,
        }
    }
    if out.is_empty() && count > 0 {
        let size = ty.byte_size(count).with_context(|| format!("cannot size a tensor of element type {ty:?}"))?;
        out.resize(size, 0);
        rng.fill_bytes(&mut out);
    }
    Ok(out)
}

fn from_npy(
    name: &str,
    ty: TensorElementType,
    declared: &[i64],
    requested: Option<&[i64]>,
    path: &Path,
) -> Result<PreparedInput> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read --input file {} for input {name:?}", path.display()))?;
    let npy = npyz::NpyFile::new(bytes.as_slice())
        .with_context(|| format!("{} is not a valid .npy file (input {name:?})", path.display()))?;
    let found = match npy.header().dtype() {
        npyz::DType::Plain(type_str) => type_str.to_string(),
        other => other.descr(),
    };
    let expected = npy_descr(ty)
        .with_context(|| format!("input {name:?} has element type {ty:?}, which .npy input does not support"))?;
    if found != expected {
        bail!(
            "{} holds dtype {found}, but input {name:?} is {} (numpy dtype {expected}); save the array with that dtype",
            path.display(),
            element_type_name(ty)
        );
    }
    if npy.header().order() == npyz::Order::Fortran && npy.header().shape().len() > 1 {
        bail!("{} is in Fortran order; save it C-contiguous (np.ascontiguousarray)", path.display());
    }
    let shape: Vec<i64> = npy.header().shape().iter().map(|&d| d as i64).collect();
    check_compatible(name, declared, &shape, &format!("{}", path.display()))?;
    if let Some(requested) = requested {
        if requested != shape.as_slice() {
            bail!("--shape gives input {name:?} shape {requested:?}, but {} holds {shape:?}", path.display());
        }
    }
    memory::check(&TensorRequest {
        name: name.to_string(),
        element_type: memory::element_type(ty),
        dims: shape.clone(),
        origin: Origin::InputFile(path.display().to_string()),
    })?;
    let size = ty.byte_size(element_count(&shape)?).context("tensor size")?;
    if bytes.len() < size {
        bail!("{} is truncated: {size} data bytes expected for shape {shape:?}", path.display());
    }
    // The payload of a C-order .npy is the last `size` bytes of the file.
    let data = &bytes[bytes.len() - size..];
    tensor_from_bytes(name, ty, shape, data, format!("npy:{}", path.display()))
}

fn tensor_from_bytes(
    name: &str,
    ty: TensorElementType,
    shape: Vec<i64>,
    bytes: &[u8],
    source: String,
) -> Result<PreparedInput> {
    let mut tensor = ort::value::DynTensor::new(&Allocator::default(), ty, shape.clone())
        .map_err(|e| anyhow::anyhow!("cannot allocate input {name:?} of shape {shape:?}: {e}"))?;
    let destination = tensor.data_ptr_mut().cast::<u8>();
    if !bytes.is_empty() {
        // SAFETY: ORT allocated exactly `byte_size(element_count(shape))` CPU bytes for this tensor,
        // which is `bytes.len()` by construction (random_bytes / the .npy size check).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), destination, bytes.len()) };
    }
    let digest = Sha256::digest(bytes);
    Ok(PreparedInput {
        description: describe(name, ty, shape, source, format!("{digest:x}")),
        value: tensor.into_dyn(),
    })
}

fn describe(name: &str, ty: TensorElementType, shape: Vec<i64>, source: String, sha256: String) -> InputDescription {
    InputDescription { name: name.to_string(), element_type: element_type_name(ty), shape, source, sha256 }
}

/// The element count of a shape that passed the size check.
fn element_count(shape: &[i64]) -> Result<usize> {
    npugate_onnx::size::element_count(shape)
        .and_then(|count| usize::try_from(count).ok())
        .with_context(|| format!("shape {shape:?} has no element count"))
}

/// The lowercase ONNX name of an element type (`float32`, `uint8`, …).
pub fn element_type_name(ty: TensorElementType) -> String {
    format!("{ty:?}").to_lowercase()
}

fn npy_descr(ty: TensorElementType) -> Option<&'static str> {
    use TensorElementType as T;
    Some(match ty {
        T::Float32 => "<f4",
        T::Float64 => "<f8",
        T::Float16 => "<f2",
        T::Int8 => "|i1",
        T::Uint8 => "|u1",
        T::Int16 => "<i2",
        T::Uint16 => "<u2",
        T::Int32 => "<i4",
        T::Uint32 => "<u4",
        T::Int64 => "<i8",
        T::Uint64 => "<u8",
        T::Bool => "|b1",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use npugate_onnx::size::Room;
    use proptest::prelude::*;

    use super::*;

    /// A declared or requested dim: dynamic, zero, one, small, huge, the largest, negative.
    fn dim() -> impl Strategy<Value = i64> {
        prop_oneof![Just(-1i64), Just(0), Just(1), 2i64..64, 1i64 << 20..1i64 << 40, Just(i64::MAX), i64::MIN..-1]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// What input preparation plans is what it allocates, and it allocates only what fits: a
        /// planned input the check accepts against 1 MiB gets exactly that many random bytes.
        #[test]
        fn a_planned_input_is_allocated_only_when_it_fits_and_exactly_as_sized(
            ty in prop::sample::select(vec![
                TensorElementType::Float32, TensorElementType::Float16, TensorElementType::Int64,
                TensorElementType::Bool, TensorElementType::Int4, TensorElementType::Uint2,
                TensorElementType::Float8E4M3FN, TensorElementType::Complex128,
            ]),
            declared in prop::collection::vec(dim(), 0..5),
            requested in prop::option::of(prop::collection::vec(dim(), 0..5)),
        ) {
            let room = Room { available: Some(1 << 20), whose: "in this test".into(), source: "a fixed budget" };
            let symbols = vec![String::new(); declared.len()];
            let Ok(tensor) = planned("x", memory::element_type(ty), &declared, &symbols, requested.as_deref()) else {
                return Ok(());
            };
            match tensor.check(&room) {
                Ok(bytes) => {
                    let count = element_count(&tensor.dims).unwrap();
                    let data = random_bytes(ty, count, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
                    prop_assert_eq!(data.len() as u64, bytes);
                }
                Err(refused) => prop_assert!(!refused.to_string().contains('\n'), "{}", refused),
            }
        }
    }

    #[test]
    fn dynamic_dimension_without_shape_names_the_fix() {
        let err = resolve_shape("x", &[1, 3, -1, -1], &["".into(), "".into(), "height".into(), "width".into()], None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("dynamic dimension 2 (\"height\")"), "{err}");
        assert!(err.contains("--shape x=1x3xNxN"), "{err}");
    }

    #[test]
    fn shape_override_must_match_fixed_dims() {
        assert_eq!(resolve_shape("x", &[1, 3, -1], &[], Some(&[1, 3, 8])).unwrap(), vec![1, 3, 8]);
        assert!(resolve_shape("x", &[1, 3, -1], &[], Some(&[1, 4, 8])).is_err());
        assert!(resolve_shape("x", &[1, 3, -1], &[], Some(&[1, 3])).is_err());
    }

    #[test]
    fn random_bytes_are_seeded_and_sized() {
        let a = random_bytes(TensorElementType::Float32, 10, &mut ChaCha8Rng::seed_from_u64(7)).unwrap();
        let b = random_bytes(TensorElementType::Float32, 10, &mut ChaCha8Rng::seed_from_u64(7)).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 40);
        let int4 = random_bytes(TensorElementType::Int4, 5, &mut ChaCha8Rng::seed_from_u64(7)).unwrap();
        assert_eq!(int4.len(), 3);
    }
}
