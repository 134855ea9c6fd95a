//! The harness's one check before it allocates a tensor — an input, an output binding, a buffer
//! of the generation loop: its size ([`npugate_onnx::size`], checked arithmetic) against the
//! memory the machine it runs on has available now. Too large: one line naming the tensor, its
//! shape, its size and the fix, instead of an aborted allocation.

use anyhow::Result;
use npugate_onnx::proto::tensor_proto::DataType;
use npugate_onnx::size::{Origin, Room, TensorRequest};
use npugate_onnx::ElementType;
use ort::value::{Outlet, TensorElementType, ValueType};

/// Whose memory the harness checks against, as its messages say.
const WHOSE: &str = "where the harness runs";

/// The tensor's size in bytes when it fits the memory available now, else the one-line refusal.
pub fn check(tensor: &TensorRequest) -> Result<u64> {
    Ok(tensor.check(&Room::this_machine(WHOSE))?)
}

/// The ONNX element type of an ONNX Runtime element type, by name: the numbering of the newest
/// types differs between ONNX's schema and the `ort` crate's.
pub fn element_type(ty: TensorElementType) -> ElementType {
    use DataType as D;
    use TensorElementType as T;
    ElementType::of(match ty {
        T::Float32 => D::Float,
        T::Uint8 => D::Uint8,
        T::Int8 => D::Int8,
        T::Uint16 => D::Uint16,
        T::Int16 => D::Int16,
        T::Int32 => D::Int32,
        T::Int64 => D::Int64,
        T::String => D::String,
        T::Bool => D::Bool,
        T::Float16 => D::Float16,
        T::Float64 => D::Double,
        T::Uint32 => D::Uint32,
        T::Uint64 => D::Uint64,
        T::Bfloat16 => D::Bfloat16,
        T::Complex64 => D::Complex64,
        T::Complex128 => D::Complex128,
        T::Float8E4M3FN => D::Float8e4m3fn,
        T::Float8E4M3FNUZ => D::Float8e4m3fnuz,
        T::Float8E5M2 => D::Float8e5m2,
        T::Float8E5M2FNUZ => D::Float8e5m2fnuz,
        T::Uint4 => D::Uint4,
        T::Int4 => D::Int4,
        T::Float4E2M1 => D::Float4e2m1,
        T::Uint2 => D::Uint2,
        T::Int2 => D::Int2,
        T::Float8E8M0 => D::Float8e8m0,
        _ => D::Undefined,
    })
}

/// Checks every output whose dims the model fixes before it is bound: ONNX Runtime allocates it
/// on the first run (outputs with a dynamic dim are sized by the inputs, checked already).
pub fn check_outputs(outputs: &[Outlet]) -> Result<()> {
    for output in outputs {
        if let ValueType::Tensor { ty, shape, .. } = output.dtype() {
            if shape.iter().all(|&d| d >= 0) {
                check(&TensorRequest {
                    name: output.name().to_string(),
                    element_type: element_type(*ty),
                    dims: shape.to_vec(),
                    origin: Origin::DeclaredOutput,
                })?;
            }
        }
    }
    Ok(())
}
