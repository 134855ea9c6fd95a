//! Dequantizing a saved quantized tensor on the host the way a `DequantizeLinear` node would:
//! `(q − zero_point) × scale`, per tensor or per axis, with the node's constant scale and zero
//! point. Exposing the `QuantizeLinear` output (integers) and dequantizing here, instead of
//! exposing the `DequantizeLinear` output, keeps the DQ node consumed by its layer alone, so the
//! QDQ node groups that ONNX Runtime fuses (into `QLinearConv` on the CPU, into one quantized op
//! on QNN) stay intact.

use npugate_onnx::proto::NodeProto;
use npugate_onnx::{tensor_values, Model};

/// The constants of one `DequantizeLinear` node.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantParams {
    /// One scale (per tensor) or one per index along `axis`.
    pub scale: Vec<f64>,
    /// Zero points, as many as scales (zeros when the node has none).
    pub zero_point: Vec<f64>,
    /// The axis of per-axis parameters (may be negative, counted from the end); `None` per tensor.
    pub axis: Option<i64>,
}

impl QuantParams {
    /// The parameters of `DequantizeLinear` node `node` in `model`. An error (one phrase) when
    /// they are not constants, not numbers, or blocked (`block_size`).
    pub fn of_dequantize(model: &Model, node: &NodeProto) -> Result<QuantParams, String> {
        let constant = |position: usize, what: &str| -> Result<Option<Vec<f64>>, String> {
            match node.input.get(position).filter(|name| !name.is_empty()) {
                None => Ok(None),
                Some(name) => {
                    let tensor =
                        model.constant(name).ok_or_else(|| format!("its {what} {name:?} is not a constant"))?;
                    tensor_values(tensor).map(Some).map_err(|e| e.to_string())
                }
            }
        };
        let attribute = |name: &str| node.attribute.iter().find(|a| a.name() == name).and_then(|a| a.i);
        if attribute("block_size").is_some_and(|size| size > 0) {
            return Err("it dequantizes in blocks (block_size)".into());
        }
        let scale = constant(1, "scale")?.ok_or("it has no scale")?;
        let zero_point = constant(2, "zero point")?.unwrap_or_else(|| vec![0.0; scale.len()]);
        if scale.is_empty() || zero_point.len() != scale.len() {
            return Err(format!("its scale has {} values and its zero point {}", scale.len(), zero_point.len()));
        }
        let axis = (scale.len() > 1).then(|| attribute("axis").unwrap_or(1));
        Ok(QuantParams { scale, zero_point, axis })
    }

    /// Dequantizes `values` (a tensor of `shape`, C order) in place.
    pub fn dequantize(&self, shape: &[u64], values: &mut [f64]) -> Result<(), String> {
        let Some(axis) = self.axis else {
            let (scale, zero_point) = (self.scale[0], self.zero_point[0]);
            values.iter_mut().for_each(|v| *v = (*v - zero_point) * scale);
            return Ok(());
        };
        let rank = shape.len() as i64;
        let axis = if axis < 0 { axis + rank } else { axis };
        let Some(channels) = usize::try_from(axis).ok().and_then(|a| shape.get(a)) else {
            return Err(format!("axis {axis} is outside the tensor's shape {shape:?}"));
        };
        if *channels as usize != self.scale.len() {
            return Err(format!(
                "{} scales for the {channels} entries of axis {axis} of shape {shape:?}",
                self.scale.len()
            ));
        }
        let inner: u64 = shape[axis as usize + 1..].iter().product();
        let inner = inner.max(1) as usize;
        for (block, chunk) in values.chunks_mut(inner).enumerate() {
            let channel = block % self.scale.len();
            let (scale, zero_point) = (self.scale[channel], self.zero_point[channel]);
            chunk.iter_mut().for_each(|v| *v = (*v - zero_point) * scale);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_tensor_and_per_axis_dequantization() {
        let per_tensor = QuantParams { scale: vec![0.5], zero_point: vec![128.0], axis: None };
        let mut values = vec![128.0, 130.0, 0.0];
        per_tensor.dequantize(&[3], &mut values).unwrap();
        assert_eq!(values, [0.0, 1.0, -64.0]);

        // Shape [1, 2, 2]: channel 0 scale 1, channel 1 scale 10 and zero point 1.
        let per_axis = QuantParams { scale: vec![1.0, 10.0], zero_point: vec![0.0, 1.0], axis: Some(1) };
        let mut values = vec![1.0, 2.0, 1.0, 2.0];
        per_axis.dequantize(&[1, 2, 2], &mut values).unwrap();
        assert_eq!(values, [1.0, 2.0, 0.0, 10.0]);
        let last = QuantParams { axis: Some(-1), ..per_axis.clone() };
        let mut values = vec![1.0, 2.0, 1.0, 2.0];
        last.dequantize(&[2, 2], &mut values).unwrap();
        assert_eq!(values, [1.0, 10.0, 1.0, 10.0]);
        assert!(per_axis.dequantize(&[1, 3], &mut [0.0; 3]).unwrap_err().contains("2 scales"));
    }
}
