//! The values of constant tensors — initializers and `Constant` nodes — as numbers, for what a
//! host tool must compute itself (e.g. dequantizing with a `DequantizeLinear` node's scale and
//! zero point). Meant for small tensors: the values are copied into a `Vec<f64>`.

use half::{bf16, f16};

use crate::model::Model;
use crate::proto::tensor_proto::{DataLocation, DataType};
use crate::proto::TensorProto;
use crate::value::ElementType;

/// Why a tensor's values cannot be read as numbers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataError {
    /// The values live in an external data file.
    #[error("tensor {name:?} keeps its values in an external data file")]
    External {
        /// The tensor.
        name: String,
    },
    /// An element type that is not a plain number (strings, complex, packed 4-bit, 8-bit floats).
    #[error("tensor {name:?} has element type {element_type}, which is not read as numbers")]
    Unsupported {
        /// The tensor.
        name: String,
        /// Its element type (`string`, `int4`, …).
        element_type: String,
    },
    /// The data holds another number of values than the dims say.
    #[error("tensor {name:?} holds {found} values where its dims {dims:?} say {expected}")]
    Count {
        /// The tensor.
        name: String,
        /// Its dims.
        dims: Vec<i64>,
        /// Elements by the dims.
        expected: usize,
        /// Elements in the data.
        found: usize,
    },
}

/// The values of `tensor`, in C order, converted to f64: from `raw_data` (little-endian) or the
/// typed fields, for float64/32/16, bfloat16, every integer type and bool.
pub fn tensor_values(tensor: &TensorProto) -> Result<Vec<f64>, DataError> {
    let name = || tensor.name().to_string();
    if tensor.data_location == Some(DataLocation::External as i32) {
        return Err(DataError::External { name: name() });
    }
    let element_type = ElementType(tensor.data_type());
    let unsupported = || DataError::Unsupported { name: name(), element_type: element_type.to_string() };
    let data_type = element_type.data_type().ok_or_else(unsupported)?;
    let values = match &tensor.raw_data {
        Some(raw) => from_raw(data_type, raw).ok_or_else(unsupported)?,
        None => from_typed_fields(data_type, tensor).ok_or_else(unsupported)?,
    };
    let expected = tensor.dims.iter().try_fold(1usize, |n, &d| usize::try_from(d).ok().and_then(|d| n.checked_mul(d)));
    match expected {
        Some(expected) if expected == values.len() => Ok(values),
        _ => Err(DataError::Count {
            name: name(),
            dims: tensor.dims.clone(),
            expected: expected.unwrap_or(usize::MAX),
            found: values.len(),
        }),
    }
}

/// Little-endian fixed-width values.
fn from_raw(data_type: DataType, raw: &[u8]) -> Option<Vec<f64>> {
    fn chunks<const N: usize>(raw: &[u8], convert: impl Fn([u8; N]) -> f64) -> Option<Vec<f64>> {
        let chunks = raw.chunks_exact(N);
        chunks
            .remainder()
            .is_empty()
            .then(|| chunks.map(|c| convert(c.try_into().expect("chunk of N bytes"))).collect())
    }
    match data_type {
        DataType::Float => chunks(raw, |b| f64::from(f32::from_le_bytes(b))),
        DataType::Double => chunks(raw, f64::from_le_bytes),
        DataType::Float16 => chunks(raw, |b| f64::from(f16::from_le_bytes(b))),
        DataType::Bfloat16 => chunks(raw, |b| f64::from(bf16::from_le_bytes(b))),
        DataType::Int8 => chunks(raw, |b| f64::from(i8::from_le_bytes(b))),
        DataType::Uint8 | DataType::Bool => chunks(raw, |b: [u8; 1]| f64::from(b[0])),
        DataType::Int16 => chunks(raw, |b| f64::from(i16::from_le_bytes(b))),
        DataType::Uint16 => chunks(raw, |b| f64::from(u16::from_le_bytes(b))),
        DataType::Int32 => chunks(raw, |b| f64::from(i32::from_le_bytes(b))),
        DataType::Uint32 => chunks(raw, |b| f64::from(u32::from_le_bytes(b))),
        DataType::Int64 => chunks(raw, |b| i64::from_le_bytes(b) as f64),
        DataType::Uint64 => chunks(raw, |b| u64::from_le_bytes(b) as f64),
        _ => None,
    }
}

/// The type-specific fields: 16-bit floats travel as their bits in `int32_data`.
fn from_typed_fields(data_type: DataType, tensor: &TensorProto) -> Option<Vec<f64>> {
    let ints = || tensor.int32_data.iter().map(|&v| f64::from(v)).collect();
    Some(match data_type {
        DataType::Float => tensor.float_data.iter().map(|&v| f64::from(v)).collect(),
        DataType::Double => tensor.double_data.clone(),
        DataType::Float16 => tensor.int32_data.iter().map(|&v| f64::from(f16::from_bits(v as u16))).collect(),
        DataType::Bfloat16 => tensor.int32_data.iter().map(|&v| f64::from(bf16::from_bits(v as u16))).collect(),
        DataType::Int8 | DataType::Uint8 | DataType::Int16 | DataType::Uint16 | DataType::Int32 | DataType::Bool => {
            ints()
        }
        DataType::Int64 => tensor.int64_data.iter().map(|&v| v as f64).collect(),
        DataType::Uint32 | DataType::Uint64 => tensor.uint64_data.iter().map(|&v| v as f64).collect(),
        _ => return None,
    })
}

impl Model {
    /// The main graph's constant `name`: a dense initializer, or the `value` tensor of a
    /// `Constant` node that outputs it.
    pub fn constant(&self, name: &str) -> Option<&TensorProto> {
        let graph = self.proto().graph.as_ref()?;
        if let Some(initializer) = graph.initializer.iter().find(|t| t.name() == name) {
            return Some(initializer);
        }
        let node = graph
            .node
            .iter()
            .find(|n| n.op_type() == "Constant" && n.domain().is_empty() && n.output.iter().any(|o| o == name))?;
        node.attribute.iter().find(|a| a.name() == "value").and_then(|a| a.t.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{AttributeProto, GraphProto, ModelProto, NodeProto};

    fn tensor(data_type: DataType, dims: &[i64]) -> TensorProto {
        TensorProto {
            name: Some("t".into()),
            data_type: Some(data_type as i32),
            dims: dims.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn raw_and_typed_data_of_every_numeric_type_read_alike() {
        let mut scale = tensor(DataType::Float, &[2]);
        scale.raw_data = Some([0.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat().into());
        assert_eq!(tensor_values(&scale).unwrap(), [0.5, -2.0]);
        scale.raw_data = None;
        scale.float_data = vec![0.5, -2.0];
        assert_eq!(tensor_values(&scale).unwrap(), [0.5, -2.0]);

        let mut zero_point = tensor(DataType::Uint8, &[]);
        zero_point.raw_data = Some(vec![128u8].into());
        assert_eq!(tensor_values(&zero_point).unwrap(), [128.0], "a scalar has one value");
        let mut signed = tensor(DataType::Int8, &[3]);
        signed.raw_data = Some(vec![0xff, 0x80, 0x7f].into());
        assert_eq!(tensor_values(&signed).unwrap(), [-1.0, -128.0, 127.0]);
        signed.raw_data = None;
        signed.int32_data = vec![-1, -128, 127];
        assert_eq!(tensor_values(&signed).unwrap(), [-1.0, -128.0, 127.0]);

        let mut half = tensor(DataType::Float16, &[1]);
        half.int32_data = vec![i32::from(f16::from_f32(0.25).to_bits())];
        assert_eq!(tensor_values(&half).unwrap(), [0.25]);
        half.int32_data.clear();
        half.raw_data = Some(f16::from_f32(-1.5).to_le_bytes().to_vec().into());
        assert_eq!(tensor_values(&half).unwrap(), [-1.5]);

        let mut wide = tensor(DataType::Uint16, &[2]);
        wide.raw_data = Some([1u16.to_le_bytes(), 65535u16.to_le_bytes()].concat().into());
        assert_eq!(tensor_values(&wide).unwrap(), [1.0, 65535.0]);
    }

    #[test]
    fn what_cannot_be_read_is_named() {
        let mut short = tensor(DataType::Float, &[3]);
        short.float_data = vec![1.0];
        assert!(matches!(tensor_values(&short), Err(DataError::Count { expected: 3, found: 1, .. })));
        let mut ragged = tensor(DataType::Int16, &[1]);
        ragged.raw_data = Some(vec![1u8, 2, 3].into());
        assert!(matches!(tensor_values(&ragged), Err(DataError::Unsupported { .. })));
        let text = tensor(DataType::String, &[1]);
        assert_eq!(
            tensor_values(&text).unwrap_err().to_string(),
            "tensor \"t\" has element type string, which is not read as numbers"
        );
        let mut external = tensor(DataType::Float, &[1]);
        external.data_location = Some(DataLocation::External as i32);
        assert!(matches!(tensor_values(&external), Err(DataError::External { .. })));
    }

    #[test]
    fn constants_come_from_initializers_and_constant_nodes() {
        let mut init = tensor(DataType::Float, &[]);
        init.name = Some("s".into());
        init.float_data = vec![0.1];
        let mut value = tensor(DataType::Float, &[]);
        value.float_data = vec![0.2];
        let attribute = AttributeProto { name: Some("value".into()), t: Some(value), ..Default::default() };
        let constant = NodeProto {
            op_type: Some("Constant".into()),
            output: vec!["c".into()],
            attribute: vec![attribute],
            ..Default::default()
        };
        let relu = NodeProto {
            op_type: Some("Relu".into()),
            input: vec!["x".into()],
            output: vec!["r".into()],
            ..Default::default()
        };
        let graph = GraphProto { node: vec![constant, relu], initializer: vec![init], ..Default::default() };
        let model = Model::from(ModelProto { graph: Some(graph), ..Default::default() });
        assert_eq!(tensor_values(model.constant("s").unwrap()).unwrap(), [0.1f32 as f64]);
        assert_eq!(tensor_values(model.constant("c").unwrap()).unwrap(), [0.2f32 as f64]);
        assert!(model.constant("r").is_none() && model.constant("x").is_none());
    }
}
