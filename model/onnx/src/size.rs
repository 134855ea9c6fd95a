//! Sizes a model declares, checked before anything is allocated.
//!
//! A model can declare any dims — exporters write static maxima such as `[1048576, 1048576,
//! 1048576]` — and allocating such a tensor aborts the process. [`TensorRequest::check`] computes
//! a tensor's byte size with checked arithmetic (a product that overflows is too large, never a
//! wrapped number) and compares it with the memory the machine has ([`Room`]); a refusal
//! ([`TooLarge`]) is one line naming the tensor, its shape, its size and the fix. npugate makes
//! this check on the host before it launches a harness and the harness before each allocation,
//! both through this one function.

use std::fmt;

use crate::proto::tensor_proto::DataType;
use crate::value::ElementType;

/// Bytes ONNX Runtime's string element (a `std::string`) takes before its characters: a string
/// tensor takes at least this per element.
const STRING_ELEMENT_BYTES: u64 = 32;

/// Bits one element of `ty` takes in a tensor (sub-byte types are packed). Element types the
/// schema does not know count as a byte: a tensor of them cannot be allocated anyway.
pub fn element_bits(ty: ElementType) -> u64 {
    use DataType as T;
    match ty.data_type() {
        Some(T::Int2 | T::Uint2) => 2,
        Some(T::Int4 | T::Uint4 | T::Float4e2m1) => 4,
        Some(T::Float6e2m3 | T::Float6e3m2) => 6,
        Some(T::Int16 | T::Uint16 | T::Float16 | T::Bfloat16) => 16,
        Some(T::Int32 | T::Uint32 | T::Float) => 32,
        Some(T::Int64 | T::Uint64 | T::Double | T::Complex64) => 64,
        Some(T::Complex128) => 128,
        Some(T::String) => STRING_ELEMENT_BYTES * 8,
        _ => 8,
    }
}

/// The number of elements of a tensor of `dims`: `None` when a dim is negative (not a size) or
/// the product overflows 64 bits (a zero dim makes it 0, whatever the others are).
pub fn element_count(dims: &[i64]) -> Option<u64> {
    let sizes = dims.iter().map(|&dim| u64::try_from(dim).ok()).collect::<Option<Vec<u64>>>()?;
    if sizes.contains(&0) {
        return Some(0);
    }
    sizes.into_iter().try_fold(1u64, u64::checked_mul)
}

/// Bytes a tensor of `ty` and `dims` takes: `None` when it overflows 64 bits or a dim is negative.
pub fn tensor_bytes(ty: ElementType, dims: &[i64]) -> Option<u64> {
    // In bits a 64-bit count can overflow where its bytes do not: counted in 128 bits, exact.
    let bits = u128::from(element_count(dims)?) * u128::from(element_bits(ty));
    u64::try_from(bits.div_ceil(8)).ok()
}

/// Where a tensor's dims come from; it decides the fix a refusal names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A model input whose dims the model itself fixes.
    DeclaredInput,
    /// A model input shaped by `--shape`.
    ShapeFlag,
    /// A model input read from this `--input` file.
    InputFile(String),
    /// A model output whose dims the model fixes.
    DeclaredOutput,
    /// A buffer of an LLM folder's generation (KV cache, ids, positions, mask, logits), sized by
    /// the prompt and generation lengths and the folder's context length.
    Generation,
    /// A tensor a run saved, read back from this `.npy` file (a reference output).
    Saved(String),
}

impl Origin {
    /// What the tensor is, for the message (`input`, `output`, …).
    fn role(&self) -> &'static str {
        match self {
            Origin::DeclaredInput | Origin::ShapeFlag | Origin::InputFile(_) => "input",
            Origin::DeclaredOutput => "output",
            Origin::Generation => "generation buffer",
            Origin::Saved(_) => "saved tensor",
        }
    }

    /// How to make the tensor smaller.
    fn fix(&self, name: &str) -> String {
        match self {
            Origin::DeclaredInput => format!(
                "the model itself fixes these dims (an exporter's static maximum?), so no flag can shrink them: export it \
                 with smaller or dynamic dims for {name:?}, then pass --shape {name}=… with a size that fits"
            ),
            Origin::ShapeFlag => format!("pass a smaller --shape {name}=…"),
            Origin::InputFile(path) => format!("pass a smaller --input {name}=FILE than {path}"),
            Origin::DeclaredOutput => format!(
                "the model fixes the dims of output {name:?}: export it with smaller or dynamic output dims (and a \
                 smaller --shape for its inputs)"
            ),
            Origin::Generation => "pass a smaller --prompt-tokens and --gen-tokens, or a model folder with a shorter \
                                   context (context_length in genai_config.json, a static cache's length)"
                .to_string(),
            Origin::Saved(path) => {
                format!("{path} claims more data than fits: it is damaged or not a tensor npugate saved; run again")
            }
        }
    }
}

/// A tensor about to be allocated: its name, element type, dims and where they come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorRequest {
    /// The tensor's name (an input's, an output's, `KV cache`, …).
    pub name: String,
    /// Its element type.
    pub element_type: ElementType,
    /// Its dims, each ≥ 0 (a negative dim is refused: it is no size).
    pub dims: Vec<i64>,
    /// Where the dims come from.
    pub origin: Origin,
}

impl TensorRequest {
    /// Its size in bytes (`None`: it overflows 64 bits, or a dim is negative).
    pub fn bytes(&self) -> Option<u64> {
        tensor_bytes(self.element_type, &self.dims)
    }

    /// Its size in bytes when it fits `room`, else why not: too large for the memory available,
    /// or for any memory at all (overflow).
    pub fn check(&self, room: &Room) -> Result<u64, Box<TooLarge>> {
        let refuse = |bytes| Box::new(TooLarge { tensor: self.clone(), bytes, room: room.clone() });
        let bytes = self.bytes().ok_or_else(|| refuse(None))?;
        match room.available {
            Some(available) if bytes > available => Err(refuse(Some(bytes))),
            _ => Ok(bytes),
        }
    }
}

/// The memory a tensor must fit into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Room {
    /// Bytes available; `None` when unknown (then only sizes no machine holds are refused).
    pub available: Option<u64>,
    /// Whose memory it is, for the message (`on this machine`).
    pub whose: String,
    /// Where the figure comes from, for the message (`MemAvailable`).
    pub source: &'static str,
}

impl Room {
    /// The memory available now on the machine this process runs on: Linux's and Android's
    /// `MemAvailable` (`/proc/meminfo`), Windows' available physical memory (under wine: the
    /// host's); unknown where the system does not say.
    pub fn this_machine(whose: &str) -> Room {
        let mut system = sysinfo::System::new();
        system.refresh_memory();
        let available = (system.total_memory() > 0).then(|| system.available_memory());
        let source = if cfg!(windows) { "available physical memory" } else { "MemAvailable" };
        Room { available, whose: whose.to_string(), source }
    }

    /// Memory of unknown size (a device the host cannot see into): only sizes no machine holds
    /// are refused.
    pub fn unknown(whose: &str) -> Room {
        Room { available: None, whose: whose.to_string(), source: "unknown" }
    }
}

/// A tensor too large to allocate: one line naming it, its shape, its size and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct TooLarge {
    /// The tensor.
    pub tensor: TensorRequest,
    /// Its size; `None` when it overflows 64 bits (or a dim is negative).
    pub bytes: Option<u64>,
    /// The memory it was checked against.
    pub room: Room,
}

impl fmt::Display for TooLarge {
    /// `input "x" is float32[1048576, 1048576, 1048576]: 4611686018427387904 bytes (4.0 EiB), more
    /// than the 22.9 GiB available on this machine (MemAvailable); pass a smaller --shape x=…`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tensor = &self.tensor;
        let dims: Vec<String> = tensor.dims.iter().map(i64::to_string).collect();
        write!(f, "{} {:?} is {}[{}]: ", tensor.origin.role(), tensor.name, tensor.element_type, dims.join(", "))?;
        match (self.bytes, self.room.available) {
            (Some(bytes), Some(available)) => write!(
                f,
                "{bytes} bytes ({}), more than the {} available {} ({})",
                human_bytes(bytes),
                human_bytes(available),
                self.room.whose,
                self.room.source
            )?,
            _ if tensor.dims.iter().any(|&d| d < 0) => f.write_str("a negative dim is no size")?,
            _ => f.write_str("more than 2^64 bytes (the product of its dims overflows): no machine holds it")?,
        }
        write!(f, "; {}", tensor.origin.fix(&tensor.name))
    }
}

/// `512 B`, `1.5 KiB`, `22.9 GiB`, `4.0 EiB`: binary units, one decimal.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(dims: &[i64], origin: Origin) -> TensorRequest {
        TensorRequest { name: "x".into(), element_type: ElementType::of(DataType::Float), dims: dims.to_vec(), origin }
    }

    fn room(available: u64) -> Room {
        Room { available: Some(available), whose: "on this machine".into(), source: "MemAvailable" }
    }

    #[test]
    fn sizes_use_checked_arithmetic_and_pack_sub_byte_types() {
        assert_eq!(tensor_bytes(ElementType::of(DataType::Float), &[1, 3, 224, 224]), Some(602_112));
        assert_eq!(tensor_bytes(ElementType::of(DataType::Float), &[]), Some(4), "a scalar is one element");
        assert_eq!(tensor_bytes(ElementType::of(DataType::Float), &[0, 3]), Some(0));
        assert_eq!(tensor_bytes(ElementType::of(DataType::Float), &[1 << 40, 1 << 40, 0]), Some(0), "no elements");
        assert_eq!(tensor_bytes(ElementType::of(DataType::Int4), &[5]), Some(3));
        assert_eq!(tensor_bytes(ElementType::of(DataType::Uint2), &[5]), Some(2));
        assert_eq!(tensor_bytes(ElementType::of(DataType::Float), &[1 << 20; 3]), Some(1 << 62));
        assert_eq!(tensor_bytes(ElementType::of(DataType::Float), &[1 << 21; 3]), None, "2^63 elements × 32 bits");
        assert_eq!(tensor_bytes(ElementType::of(DataType::Double), &[i64::MAX, i64::MAX]), None);
        assert_eq!(tensor_bytes(ElementType::of(DataType::Float), &[2, -1]), None);
    }

    #[test]
    fn a_refusal_is_one_line_with_the_tensor_its_size_and_the_fix() {
        let huge = float(&[1 << 20; 3], Origin::DeclaredInput);
        let error = huge.check(&room(24 << 30)).unwrap_err().to_string();
        assert!(
            error.starts_with(
                "input \"x\" is float32[1048576, 1048576, 1048576]: 4611686018427387904 bytes (4.0 EiB), more than the \
                 24.0 GiB available on this machine (MemAvailable); the model itself fixes these dims"
            ),
            "{error}"
        );
        assert!(error.contains("--shape x=…") && !error.contains('\n'), "{error}");
        let overflow =
            float(&[1 << 40, 1 << 40], Origin::ShapeFlag).check(&Room::unknown("on the device")).unwrap_err();
        assert_eq!(
            overflow.to_string(),
            "input \"x\" is float32[1099511627776, 1099511627776]: more than 2^64 bytes (the product of its dims \
             overflows): no machine holds it; pass a smaller --shape x=…"
        );
        assert_eq!(float(&[1, 3, 8, 8], Origin::ShapeFlag).check(&room(768)), Ok(768), "exactly what is available");
        assert!(float(&[1, 3, 8, 8], Origin::ShapeFlag).check(&room(767)).is_err());
        assert_eq!(float(&[1 << 20; 3], Origin::DeclaredInput).check(&Room::unknown("on the device")), Ok(1 << 62));
    }

    #[test]
    fn bytes_read_in_binary_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(1 << 62), "4.0 EiB");
        assert_eq!(human_bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn this_machine_has_some_memory() {
        let room = Room::this_machine("on this machine");
        assert!(room.available.is_some_and(|bytes| bytes > 0), "{room:?}");
    }
}
