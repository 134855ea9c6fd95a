//! What a named value is declared as: its kind, element type and dims, read from a graph input,
//! output, `value_info` entry or initializer.

use std::fmt;

use crate::proto::tensor_proto::DataType;
use crate::proto::tensor_shape_proto::dimension::Value as DimValue;
use crate::proto::tensor_shape_proto::Dimension;
use crate::proto::type_proto::Value as TypeValue;
use crate::proto::{SparseTensorProto, TensorProto, TensorShapeProto, ValueInfoProto};

/// One dimension of a declared shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A concrete size (`dim_value` ≥ 0).
    Fixed(i64),
    /// A symbolic size (`dim_param`), e.g. `batch`, `p2o.DynamicDimension.0` or `?`. Dims sharing
    /// a name are not necessarily equal at run time (PP-OCR's `?` stands for both H and W).
    Named(String),
    /// No size at all: neither `dim_value` nor `dim_param`, an empty `dim_param`, or a negative
    /// `dim_value` (some exporters write `-1`).
    Unknown,
}

impl Dim {
    /// Reads one `TensorShapeProto.Dimension`.
    pub fn from_proto(dim: &Dimension) -> Dim {
        match &dim.value {
            Some(DimValue::DimValue(value)) if *value >= 0 => Dim::Fixed(*value),
            Some(DimValue::DimParam(name)) if !name.is_empty() => Dim::Named(name.clone()),
            _ => Dim::Unknown,
        }
    }

    /// The concrete size, if the model fixes it.
    pub fn fixed(&self) -> Option<i64> {
        match self {
            Dim::Fixed(value) => Some(*value),
            _ => None,
        }
    }
}

impl fmt::Display for Dim {
    /// `3`, the symbolic name, or `?` for an unknown dim.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(value) => write!(f, "{value}"),
            Dim::Named(name) => f.write_str(name),
            Dim::Unknown => f.write_str("?"),
        }
    }
}

/// An ONNX element type (`TensorProto.DataType`), kept as its number so that types newer than
/// the vendored schema survive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ElementType(pub i32);

impl ElementType {
    /// The element type of `data_type`.
    pub fn of(data_type: DataType) -> ElementType {
        ElementType(data_type as i32)
    }

    /// The schema's enum value, when the schema knows this number.
    pub fn data_type(self) -> Option<DataType> {
        DataType::try_from(self.0).ok()
    }
}

impl fmt::Display for ElementType {
    /// The lowercase name the harness and `result.json` use (`float32`, `float64`, `uint8`,
    /// `bfloat16`, …), `undefined`, or `data_type N` for a number the schema does not know.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.data_type() {
            Some(DataType::Float) => f.write_str("float32"),
            Some(DataType::Double) => f.write_str("float64"),
            Some(known) => f.write_str(&known.as_str_name().to_ascii_lowercase()),
            None => write!(f, "data_type {}", self.0),
        }
    }
}

/// What kind of value a declaration describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueKind {
    /// A dense tensor.
    Tensor,
    /// A sparse tensor.
    SparseTensor,
    /// A sequence of values.
    Sequence,
    /// A map.
    Map,
    /// An optional value.
    Optional,
    /// An opaque value.
    Opaque,
    /// No type recorded (a `ValueInfoProto` with only a name).
    Untyped,
}

impl fmt::Display for ValueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ValueKind::Tensor => "tensor",
            ValueKind::SparseTensor => "sparse tensor",
            ValueKind::Sequence => "sequence",
            ValueKind::Map => "map",
            ValueKind::Optional => "optional",
            ValueKind::Opaque => "opaque value",
            ValueKind::Untyped => "value without a type",
        })
    }
}

/// A named value as declared: name, kind, element type and dims.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ValueSignature {
    /// The value's name.
    pub name: String,
    /// Tensor, sparse tensor, sequence, …
    pub kind: ValueKind,
    /// The element type of a (sparse) tensor; `ElementType(0)` (undefined) for other kinds.
    pub element_type: ElementType,
    /// The dims of a (sparse) tensor; `None` when the rank is unknown (no shape recorded) or the
    /// value is not a tensor.
    pub dims: Option<Vec<Dim>>,
}

impl ValueSignature {
    /// Reads a `ValueInfoProto` (a graph input, output or `value_info` entry).
    pub fn from_value_info(info: &ValueInfoProto) -> ValueSignature {
        let name = info.name().to_string();
        let (kind, element_type, shape) = match info.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(TypeValue::TensorType(tensor)) => (ValueKind::Tensor, tensor.elem_type(), tensor.shape.as_ref()),
            Some(TypeValue::SparseTensorType(sparse)) => {
                (ValueKind::SparseTensor, sparse.elem_type(), sparse.shape.as_ref())
            }
            Some(TypeValue::SequenceType(_)) => (ValueKind::Sequence, 0, None),
            Some(TypeValue::MapType(_)) => (ValueKind::Map, 0, None),
            Some(TypeValue::OptionalType(_)) => (ValueKind::Optional, 0, None),
            Some(TypeValue::OpaqueType(_)) => (ValueKind::Opaque, 0, None),
            None => (ValueKind::Untyped, 0, None),
        };
        ValueSignature { name, kind, element_type: ElementType(element_type), dims: shape.map(dims_of) }
    }

    /// Reads an initializer or a tensor attribute: every dim is fixed.
    pub fn from_tensor(tensor: &TensorProto) -> ValueSignature {
        ValueSignature {
            name: tensor.name().to_string(),
            kind: ValueKind::Tensor,
            element_type: ElementType(tensor.data_type()),
            dims: Some(tensor.dims.iter().map(|&d| Dim::Fixed(d)).collect()),
        }
    }

    /// Reads a sparse initializer (named by its `values` tensor).
    pub fn from_sparse_tensor(sparse: &SparseTensorProto) -> ValueSignature {
        let values = sparse.values.as_ref();
        ValueSignature {
            name: values.map(|v| v.name()).unwrap_or_default().to_string(),
            kind: ValueKind::SparseTensor,
            element_type: ElementType(values.map(|v| v.data_type()).unwrap_or_default()),
            dims: Some(sparse.dims.iter().map(|&d| Dim::Fixed(d)).collect()),
        }
    }

    /// True when the value is a tensor whose every dim is fixed.
    pub fn is_static(&self) -> bool {
        matches!(&self.dims, Some(dims) if dims.iter().all(|d| d.fixed().is_some()))
    }

    /// The dims as `AxBxC`: fixed sizes as numbers, anything else as `N`; `N…` (any rank) when
    /// the rank is unknown. `""` for a scalar.
    pub fn shape_pattern(&self) -> String {
        match &self.dims {
            Some(dims) => {
                dims.iter().map(|d| d.fixed().map_or("N".to_string(), |v| v.to_string())).collect::<Vec<_>>().join("x")
            }
            None => "N…".to_string(),
        }
    }

    /// The flag that fixes this input: `--shape x=Nx3xNxN` (replace each `N` with a size).
    pub fn shape_flag(&self) -> String {
        format!("--shape {}={}", self.name, self.shape_pattern())
    }
}

impl fmt::Display for ValueSignature {
    /// `x: float32[p2o.DynamicDimension.0, 3, ?, 640]`; `[rank unknown]` without a shape;
    /// the kind for anything but a tensor.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ValueKind::Tensor | ValueKind::SparseTensor => {
                let sparse = if self.kind == ValueKind::SparseTensor { "sparse " } else { "" };
                write!(f, "{}: {sparse}{}", self.name, self.element_type)?;
                match &self.dims {
                    Some(dims) => {
                        let dims: Vec<String> = dims.iter().map(Dim::to_string).collect();
                        write!(f, "[{}]", dims.join(", "))
                    }
                    None => f.write_str("[rank unknown]"),
                }
            }
            other => write!(f, "{}: {other}", self.name),
        }
    }
}

/// The dims of a shape.
fn dims_of(shape: &TensorShapeProto) -> Vec<Dim> {
    shape.dim.iter().map(Dim::from_proto).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dim(value: Option<DimValue>) -> Dimension {
        Dimension { value, denotation: None }
    }

    #[test]
    fn dims_read_every_way_exporters_write_them() {
        assert_eq!(Dim::from_proto(&dim(Some(DimValue::DimValue(3)))), Dim::Fixed(3));
        assert_eq!(Dim::from_proto(&dim(Some(DimValue::DimValue(0)))), Dim::Fixed(0));
        assert_eq!(Dim::from_proto(&dim(Some(DimValue::DimValue(-1)))), Dim::Unknown);
        assert_eq!(Dim::from_proto(&dim(Some(DimValue::DimParam("?".into())))), Dim::Named("?".into()));
        assert_eq!(Dim::from_proto(&dim(Some(DimValue::DimParam(String::new())))), Dim::Unknown);
        assert_eq!(Dim::from_proto(&dim(None)), Dim::Unknown);
    }

    #[test]
    fn element_types_use_the_harness_names() {
        assert_eq!(ElementType::of(DataType::Float).to_string(), "float32");
        assert_eq!(ElementType::of(DataType::Double).to_string(), "float64");
        assert_eq!(ElementType::of(DataType::Uint8).to_string(), "uint8");
        assert_eq!(ElementType::of(DataType::Bfloat16).to_string(), "bfloat16");
        assert_eq!(ElementType(9999).to_string(), "data_type 9999");
    }

    #[test]
    fn flags_use_fixed_sizes_and_n_elsewhere() {
        let x = ValueSignature {
            name: "x".into(),
            kind: ValueKind::Tensor,
            element_type: ElementType::of(DataType::Float),
            dims: Some(vec![Dim::Named("batch".into()), Dim::Fixed(3), Dim::Unknown, Dim::Named("?".into())]),
        };
        assert_eq!(x.shape_flag(), "--shape x=Nx3xNxN");
        assert_eq!(x.to_string(), "x: float32[batch, 3, ?, ?]");
        assert!(!x.is_static());
        let unranked = ValueSignature { dims: None, ..x };
        assert_eq!(unranked.shape_flag(), "--shape x=N…");
        assert_eq!(unranked.to_string(), "x: float32[rank unknown]");
    }
}
