//! The domain of a SoC's latency model: the graphs it was fitted on, in the quantities that decide
//! whether its error holds for another graph. The error is measured on the reference models
//! ([`crate::fit::leave_one_model_out`]); a graph unlike all of them — larger than every one, or
//! with another mix of work — is an extrapolation whose error nobody measured. SegFormer-b0 at
//! 512×512 (AI Hub: 82.4 ms on the Galaxy S24) has 66× more activation bytes than weight bytes
//! where the reference's 33 models have 0.3–31× (YOLO11n and Depth-Anything near 30), and the fit,
//! which never saw such a graph, says 17.6 ms (it said 3.8 ms before detectors were added).

use serde::{Deserialize, Serialize};

use crate::features::GraphFeatures;

/// How far past the fitted range a graph may lie and still get an estimate: 1.5× the largest
/// (and, for a ratio, 1/1.5 of the smallest) fitted value.
pub const MARGIN: f64 = 1.5;

/// One quantity of a graph the domain is checked on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Measure {
    /// All counted GFLOPs: checked above only (a smaller graph is bounded by the fitted constant).
    GFlops,
    /// MB of weights and activations: checked above only.
    MegabytesMoved,
    /// Layers: checked above only.
    Layers,
    /// Activation bytes per weight byte — feature maps against parameters, the mix of memory-bound
    /// and compute-bound work: checked both ways.
    ActivationsPerWeight,
}

impl Measure {
    const ALL: [Measure; 4] =
        [Measure::GFlops, Measure::MegabytesMoved, Measure::Layers, Measure::ActivationsPerWeight];

    fn name(self) -> &'static str {
        match self {
            Measure::GFlops => "GFLOPs",
            Measure::MegabytesMoved => "MB moved (weights and activations)",
            Measure::Layers => "layers",
            Measure::ActivationsPerWeight => "activation bytes per weight byte",
        }
    }

    fn of(self, features: &GraphFeatures) -> f64 {
        match self {
            Measure::GFlops => {
                (features.conv_flops + features.grouped_conv_flops + features.matmul_flops + features.other_flops)
                    as f64
                    / 1e9
            }
            Measure::MegabytesMoved => (features.weight_bytes + features.activation_bytes) as f64 / 1e6,
            Measure::Layers => features.layers as f64,
            Measure::ActivationsPerWeight => features.activation_bytes as f64 / features.weight_bytes.max(1) as f64,
        }
    }

    fn checks_below(self) -> bool {
        self == Measure::ActivationsPerWeight
    }
}

/// The fitted range of one quantity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FittedRange {
    /// What it measures.
    pub measure: String,
    /// The smallest fitted value.
    pub low: f64,
    /// The largest fitted value.
    pub high: f64,
}

/// The graphs a latency model was fitted on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Domain {
    /// One range per quantity checked.
    pub ranges: Vec<FittedRange>,
    /// How many reference graphs it spans.
    pub graphs: usize,
}

impl Domain {
    /// The domain of `fitted`, the features of the rows a latency model was fitted on.
    pub fn of(fitted: &[&GraphFeatures]) -> Domain {
        let ranges = Measure::ALL
            .iter()
            .map(|measure| {
                let values = fitted.iter().map(|f| measure.of(f));
                FittedRange {
                    measure: measure.name().into(),
                    low: values.clone().fold(f64::INFINITY, f64::min),
                    high: values.fold(0.0, f64::max),
                }
            })
            .collect();
        Domain { ranges, graphs: fitted.len() }
    }

    /// Why `features` lie outside the domain (each quantity past the margin, with the model's
    /// value and the fitted range), or `None` inside it.
    pub fn outside(&self, features: &GraphFeatures) -> Option<String> {
        let reasons: Vec<String> = Measure::ALL
            .iter()
            .zip(&self.ranges)
            .filter_map(|(measure, range)| {
                let value = measure.of(features);
                let above = value > range.high * MARGIN;
                let below = measure.checks_below() && value < range.low / MARGIN;
                (above || below).then(|| {
                    format!("{} {} (fitted on {}–{})", range.measure, short(value), short(range.low), short(range.high))
                })
            })
            .collect();
        (!reasons.is_empty()).then(|| {
            format!(
                "the model is unlike the {} reference graphs the latency model was fitted on, so its error is unknown: {}",
                self.graphs,
                reasons.join("; ")
            )
        })
    }
}

/// A value with three significant digits.
fn short(value: f64) -> String {
    match value.abs() {
        v if v >= 100.0 => format!("{value:.0}"),
        v if v >= 10.0 => format!("{value:.1}"),
        v if v >= 1.0 => format!("{value:.2}"),
        _ => format!("{value:.3}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::Precision;

    fn graph(conv_gflops: f64, weight_mb: f64, activation_mb: f64, layers: usize) -> GraphFeatures {
        GraphFeatures {
            precision: Precision::float(),
            conv_flops: (conv_gflops * 1e9) as u64,
            grouped_conv_flops: 0,
            matmul_flops: 0,
            other_flops: 0,
            unknown_flops_nodes: 0,
            weight_bytes: (weight_mb * 1e6) as u64,
            activation_bytes: (activation_mb * 1e6) as u64,
            layers,
        }
    }

    #[test]
    fn a_graph_past_the_fitted_range_is_outside_and_named_a_smaller_one_is_not() {
        let fitted = [graph(4.0, 25.0, 10.0, 50), graph(16.0, 90.0, 80.0, 240), graph(0.1, 5.0, 4.5, 120)];
        let domain = Domain::of(&fitted.iter().collect::<Vec<_>>());
        assert_eq!(domain.graphs, 3);
        assert!(domain.outside(&graph(8.0, 40.0, 30.0, 100)).is_none(), "inside");
        assert!(domain.outside(&graph(0.01, 1.0, 0.5, 10)).is_none(), "smaller than every fitted graph");
        // SegFormer-b0 at 512×512 as npugate reads it: 10.8 conv GFLOPs, 7.5 MB weights, 494 MB activations.
        let segformer = domain.outside(&graph(10.8, 7.5, 494.1, 456)).unwrap();
        assert!(segformer.contains("activation bytes per weight byte 65.9 (fitted on 0.400–0.900)"), "{segformer}");
        assert!(segformer.contains("MB moved (weights and activations) 502 (fitted on 9.50–170)"), "{segformer}");
        assert!(segformer.contains("layers 456"), "{segformer}");
        // Weights with almost no activations (an MLP) is another mix: outside below.
        assert!(domain
            .outside(&graph(0.01, 1.0, 0.01, 10))
            .unwrap()
            .contains("activation bytes per weight byte 0.010"));
    }
}
