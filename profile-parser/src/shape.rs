//! Tensor shapes as ONNX Runtime prints them (`{"float":[1,3,224,224]}`), read by the profile
//! parser and the FLOP formulas.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

/// A tensor's element type and dimensions, as ORT prints it in `input_type_shape`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorShape {
    /// Element type (`float`, `uint8`, `int64`, …).
    pub dtype: String,
    /// Dimensions (empty for a scalar).
    pub dims: Vec<i64>,
}

impl TensorShape {
    /// Number of elements (1 for a scalar, saturating); negative (unknown) dimensions count as 0.
    pub fn elements(&self) -> u64 {
        product(&self.dims)
    }
}

impl fmt::Display for TensorShape {
    /// Formats the dimensions as `[1,3,224,224]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.dims.iter().map(i64::to_string).collect();
        write!(f, "[{}]", dims.join(","))
    }
}

/// Product of dimensions (1 for none, saturating); negative (unknown) dimensions count as 0.
pub fn product(dims: &[i64]) -> u64 {
    dims.iter().map(|&d| u64::try_from(d).unwrap_or(0)).fold(1, u64::saturating_mul)
}

/// One `{"float":[1,3,224,224]}` entry of `input_type_shape`.
impl<'de> Deserialize<'de> for TensorShape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TensorShape;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a one-entry object like {"float":[1,3,224,224]}"#)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TensorShape, A::Error> {
                let Some((dtype, dims)) = map.next_entry::<String, Vec<i64>>()? else {
                    return Err(de::Error::custom("empty type/shape object"));
                };
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(TensorShape { dtype, dims })
            }
        }
        d.deserialize_map(V)
    }
}
