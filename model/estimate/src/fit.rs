//! The latency model of one SoC and its fit: a non-negative least-squares fit of the published
//! latency on a few terms of the graph, in relative error (each row weighted by 1 / its
//! latency), and its error measured by leaving one model out at a time.
//!
//! latency_ms ≈ c₀ + c₁·layers + c₂·fp16 conv GFLOPs + c₃·int16 conv GFLOPs + c₄·int8 conv GFLOPs
//!              + c₅·grouped conv GFLOPs + c₆·matmul GFLOPs + c₇·other GFLOPs + c₈·MB moved
//!              + c₉·activation MB × activation bytes per weight byte
//!
//! (conv = dense convolutions at the model's precision; grouped = grouped and depthwise ones;
//! MB moved = weights + every layer's outputs). The last term is the cost of feature maps that
//! dwarf the weights — detectors and segmenters at 512–640 px, whose time the other terms placed at
//! a third to a half of AI Hub's (YOLO11n: 1.6 ms for 4.5 ms published).
//!
//! Every coefficient is ≥ 0 (a cost), so no term can buy accuracy with a negative time.

use serde::{Deserialize, Serialize};

pub use npugate_result::estimate::HeldOutError;

use crate::features::{GraphFeatures, MacClass};

/// The terms of the latency model, in coefficient order, with their units.
pub const TERMS: [&str; 10] = [
    "ms",
    "ms per layer",
    "ms per fp16 conv GFLOP",
    "ms per int16 conv GFLOP",
    "ms per int8 conv GFLOP",
    "ms per grouped conv GFLOP",
    "ms per matmul GFLOP",
    "ms per other GFLOP",
    "ms per MB moved",
    "ms per activation MB × activation bytes per weight byte / 100",
];

/// The fewest reference models a SoC needs for a fit (more than the terms, with room to leave one out).
pub const MIN_MODELS: usize = 11;

/// The values of [`TERMS`] for a graph.
pub fn terms(features: &GraphFeatures) -> [f64; 10] {
    let giga = |flops: u64| flops as f64 / 1e9;
    let conv = giga(features.conv_flops);
    let class = features.precision.mac_class();
    let conv_of = |c: MacClass| if class == c { conv } else { 0.0 };
    let activation_mb = features.activation_bytes as f64 / 1e6;
    [
        1.0,
        features.layers as f64,
        conv_of(MacClass::Fp16),
        conv_of(MacClass::Int16),
        conv_of(MacClass::Int8),
        giga(features.grouped_conv_flops),
        giga(features.matmul_flops),
        giga(features.other_flops),
        (features.weight_bytes + features.activation_bytes) as f64 / 1e6,
        activation_mb * activation_mb / (features.weight_bytes.max(1) as f64 / 1e6) / 100.0,
    ]
}

/// A fitted latency model: one coefficient per term.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyModel {
    /// Coefficients in [`TERMS`] order.
    pub coefficients: Vec<f64>,
}

impl LatencyModel {
    /// Fits the model on `(features, published ms)` rows, minimizing the squared relative error
    /// with every coefficient ≥ 0.
    pub fn fit(rows: &[(&GraphFeatures, f64)]) -> LatencyModel {
        let design: Vec<Vec<f64>> = rows.iter().map(|(f, ms)| terms(f).iter().map(|t| t / ms).collect()).collect();
        let target = vec![1.0; rows.len()];
        LatencyModel { coefficients: nnls(&design, &target) }
    }

    /// The predicted latency of a graph, ms.
    pub fn predict(&self, features: &GraphFeatures) -> f64 {
        terms(features).iter().zip(&self.coefficients).map(|(t, c)| t * c).sum()
    }
}

/// One reference row predicted with its model left out of the fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldOutPrediction {
    /// AI Hub's model id.
    pub model: String,
    /// Its precision.
    pub precision: String,
    /// The device whose row it is.
    pub device: String,
    /// Published latency, ms.
    pub published_ms: f64,
    /// Predicted by the model fitted without this model, ms.
    pub predicted_ms: f64,
}

impl HeldOutPrediction {
    /// |predicted − published| / published.
    pub fn relative_error(&self) -> f64 {
        (self.predicted_ms - self.published_ms).abs() / self.published_ms
    }
}

/// Each row of `rows` (model id, precision, device, features, published ms) predicted by a fit
/// on the rows of every other model.
pub fn leave_one_model_out(rows: &[(&str, &str, &str, &GraphFeatures, f64)]) -> Vec<HeldOutPrediction> {
    let mut predictions = Vec::new();
    for &(model, precision, device, features, published_ms) in rows {
        let others: Vec<(&GraphFeatures, f64)> =
            rows.iter().filter(|r| r.0 != model).map(|&(_, _, _, f, ms)| (f, ms)).collect();
        let fitted = LatencyModel::fit(&others);
        predictions.push(HeldOutPrediction {
            model: model.into(),
            precision: precision.into(),
            device: device.into(),
            published_ms,
            predicted_ms: fitted.predict(features),
        });
    }
    predictions
}

/// The error of `predictions`; `None` when there are none.
pub fn held_out_error(predictions: &[HeldOutPrediction]) -> Option<HeldOutError> {
    let errors: Vec<f64> = predictions.iter().map(HeldOutPrediction::relative_error).collect();
    let models: std::collections::BTreeSet<&str> = predictions.iter().map(|p| p.model.as_str()).collect();
    Some(HeldOutError {
        median_rel: npugate_result::stats::median(&errors)?,
        p90_rel: npugate_result::stats::percentile(&errors, 90.0)?,
        rows: errors.len(),
        models: models.len(),
    })
}

/// Non-negative least squares, min ‖A·x − b‖ with x ≥ 0 (Lawson and Hanson's active-set method).
/// `a` is row-major; columns are scaled to unit norm inside, so terms of any unit are fair.
pub fn nnls(a: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let n = a.first().map_or(0, Vec::len);
    let norms: Vec<f64> = (0..n)
        .map(|j| a.iter().map(|row| row[j] * row[j]).sum::<f64>().sqrt())
        .map(|norm| if norm > 0.0 { norm } else { 1.0 })
        .collect();
    let scaled: Vec<Vec<f64>> = a.iter().map(|row| row.iter().zip(&norms).map(|(v, s)| v / s).collect()).collect();
    let mut x = vec![0.0; n];
    let mut passive = vec![false; n];
    for _ in 0..(3 * n + 10) {
        let residual: Vec<f64> = scaled.iter().zip(b).map(|(row, bi)| bi - dot(row, &x)).collect();
        let gradient: Vec<f64> =
            (0..n).map(|j| scaled.iter().zip(&residual).map(|(row, r)| row[j] * r).sum()).collect();
        let Some(entering) =
            (0..n).filter(|&j| !passive[j] && gradient[j] > 1e-12).max_by(|&i, &j| gradient[i].total_cmp(&gradient[j]))
        else {
            break;
        };
        passive[entering] = true;
        loop {
            let z = solve_on(&scaled, b, &passive);
            if (0..n).all(|j| !passive[j] || z[j] > 0.0) {
                x = z;
                break;
            }
            // Step towards z until the first passive coefficient reaches zero; it leaves the set.
            let alpha = (0..n)
                .filter(|&j| passive[j] && z[j] <= 0.0)
                .map(|j| x[j] / (x[j] - z[j]))
                .fold(f64::INFINITY, f64::min);
            for j in 0..n {
                x[j] += alpha * (z[j] - x[j]);
                if passive[j] && x[j] <= 1e-15 {
                    passive[j] = false;
                    x[j] = 0.0;
                }
            }
        }
    }
    x.iter().zip(&norms).map(|(v, s)| v / s).collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Unconstrained least squares on the passive columns (normal equations, Gaussian elimination
/// with partial pivoting and a tiny ridge for rank-deficient sets); 0 elsewhere.
fn solve_on(a: &[Vec<f64>], b: &[f64], passive: &[bool]) -> Vec<f64> {
    let columns: Vec<usize> = (0..passive.len()).filter(|&j| passive[j]).collect();
    let k = columns.len();
    let mut m = vec![vec![0.0; k + 1]; k];
    for (r, &i) in columns.iter().enumerate() {
        for (c, &j) in columns.iter().enumerate() {
            m[r][c] = a.iter().map(|row| row[i] * row[j]).sum::<f64>() + if r == c { 1e-12 } else { 0.0 };
        }
        m[r][k] = a.iter().zip(b).map(|(row, bi)| row[i] * bi).sum();
    }
    for col in 0..k {
        let pivot = (col..k).max_by(|&p, &q| m[p][col].abs().total_cmp(&m[q][col].abs())).unwrap_or(col);
        m.swap(col, pivot);
        let diagonal = m[col][col];
        if diagonal.abs() < 1e-300 {
            continue;
        }
        let pivot_row = m[col].clone();
        for (r, row) in m.iter_mut().enumerate() {
            if r != col {
                let factor = row[col] / diagonal;
                for (value, pivot) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *value -= factor * pivot;
                }
            }
        }
    }
    let mut x = vec![0.0; passive.len()];
    for (r, &j) in columns.iter().enumerate() {
        x[j] = if m[r][r].abs() < 1e-300 { 0.0 } else { m[r][k] / m[r][r] };
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nnls_recovers_non_negative_coefficients_and_clamps_negative_ones() {
        // b = 2·x₀ + 3·x₁ exactly.
        let a: Vec<Vec<f64>> = (1..8).map(|i| vec![i as f64, (i * i) as f64 % 5.0 + 1.0]).collect();
        let b: Vec<f64> = a.iter().map(|r| 2.0 * r[0] + 3.0 * r[1]).collect();
        let x = nnls(&a, &b);
        assert!((x[0] - 2.0).abs() < 1e-9 && (x[1] - 3.0).abs() < 1e-9, "{x:?}");
        // The best unconstrained fit wants a negative second coefficient: NNLS sets it to 0.
        let b: Vec<f64> = a.iter().map(|r| 2.0 * r[0] - 1.0 * r[1]).collect();
        let x = nnls(&a, &b);
        assert_eq!(x[1], 0.0);
        assert!(x[0] > 0.0);
    }
}
