//! `numerics.json` (`npugate.numerics/1`): every matched layer of the model, compared on every
//! target with the fp32 reference, and the first divergence — the earliest layer whose SQNR falls
//! below the threshold while the layers feeding it were above it.

use npugate_gate::outputs::{OutputComparison, OutputMetrics};
use npugate_gate::Outcome;
#[cfg(test)]
use npugate_result::contract;
use npugate_result::contract::{Document, Schema};
use serde::{Deserialize, Serialize};

use super::matching::{LayerId, Matching, Unmatched};
use super::placement::Placement;

/// Schema identifier of [`NumericsReport`].
pub const NUMERICS_SCHEMA: &str = "npugate.numerics/1";

/// What every report says about instrumentation.
pub const INSTRUMENTATION_NOTE: &str = "Exposing intermediate tensors as graph outputs can change how an execution provider \
     partitions and fuses the graph (an exposed tensor must be materialized, so no fusion may swallow it and a partition may \
     end at it); each target's placement is that of the instrumented model. QDQ layers are read from their QuantizeLinear \
     outputs and dequantized on the host, which keeps ONNX Runtime's QDQ node groups intact.";

/// The per-layer comparison of a model with its fp32 reference on one or more targets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NumericsReport {
    /// Always [`NUMERICS_SCHEMA`].
    pub schema: String,
    /// What was compared, and how.
    #[serde(flatten)]
    pub header: Header,
    /// Every target, in order (the `results` of each layer follow this order).
    pub targets: Vec<TargetReport>,
    /// Matched layers in the model's graph order.
    pub layers: Vec<LayerReport>,
    /// The earliest divergence on any target, in graph order (`null` when there is none).
    pub first_divergence: Option<Divergence>,
    /// Targets compared with each other directly, layer by layer (one SoC under two QNN
    /// versions): where their outputs first differ and first diverge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub between_targets: Vec<TargetPair>,
    /// Tensors of either model that were not compared, with why.
    pub unmatched: Vec<Unmatched>,
    /// `pass` (no divergence), `fail` (a divergence) or `error` (a target or layer could not be judged).
    pub outcome: Outcome,
}

impl Document for NumericsReport {
    const SCHEMA: Schema = Schema::new(NUMERICS_SCHEMA);
}

/// A model file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRef {
    /// Path as given.
    pub path: String,
    /// sha256 of the file.
    pub sha256: String,
}

/// The instrumented copies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instrumentation {
    /// The instrumented model under test (relative to the report's directory).
    pub model: String,
    /// The instrumented reference model.
    pub reference: String,
    /// Tensors added as graph outputs of the model.
    pub exposed_in_model: usize,
    /// Tensors added as graph outputs of the reference.
    pub exposed_in_reference: usize,
    /// [`INSTRUMENTATION_NOTE`].
    pub note: String,
}

/// One target's run of the instrumented model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetReport {
    /// The target's name (`local`, a serial).
    pub name: String,
    /// The device (product model, or CPU model off Android).
    pub device: String,
    /// The SoC.
    pub soc: String,
    /// The EP the model was meant to run on.
    pub ep: String,
    /// Its result directory (relative to the report's directory).
    pub result_dir: Option<String>,
    /// Where the instrumented model's nodes ran.
    pub placement: Option<Placement>,
    /// Its first divergence.
    pub first_divergence: Option<Divergence>,
    /// The layer losing the most SQNR against the layers feeding it (finite values only): where
    /// gradual drift steepens, whether or not it crosses the threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest_drop: Option<SqnrDrop>,
    /// `pass`, `fail` or `error` on this target.
    pub outcome: Outcome,
    /// Why it could not be judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One matched layer on every target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerReport {
    /// Which layer.
    #[serde(flatten)]
    pub id: LayerId,
    /// Its shape (from the reference run).
    pub shape: Option<Vec<u64>>,
    /// One per target, in `targets` order.
    pub results: Vec<LayerResult>,
}

/// One layer on one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerResult {
    /// The target.
    pub target: String,
    /// The EP that ran the layer's node there (when the assignment names it).
    pub ep: Option<String>,
    /// Distances from the reference: `sqnr_db`, `cosine`, `max_abs_err`, … (absent when not compared).
    #[serde(flatten)]
    pub metrics: Option<OutputMetrics>,
    /// SQNR below the threshold (NaN counts as below).
    pub below_threshold: bool,
    /// Below the threshold while every layer feeding it was above it: where drift starts.
    pub divergence_origin: bool,
    /// Of a bool tensor: the elements whose raw byte on this target was neither 0 nor 1 (compared
    /// as true; reported, never a failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_binary_bools: Option<usize>,
    /// Why it could not be compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where the numbers start to go wrong.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// The model's node that computed the layer.
    pub node: String,
    /// The float tensor.
    pub tensor: String,
    /// The node's operator.
    pub op_type: String,
    /// Its SQNR, dB (the lowest among `targets`).
    #[serde(with = "npugate_gate::outputs::non_finite")]
    pub sqnr_db: f64,
    /// Its cosine similarity there.
    #[serde(with = "npugate_gate::outputs::non_finite")]
    pub cosine: f64,
    /// Its largest absolute error there.
    #[serde(with = "npugate_gate::outputs::non_finite")]
    pub max_abs_err: f64,
    /// The layers feeding it, each with its SQNR there (all above the threshold).
    pub inputs: Vec<InputSqnr>,
    /// The targets where this layer is a divergence origin.
    pub targets: Vec<String>,
}

/// Two targets' runs of the model compared with each other (the second against the first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetPair {
    /// The first target (e.g. `SM8650-qnn-2.49.40`).
    pub from: String,
    /// The second (e.g. `SM8650-qnn-2.51.0`).
    pub to: String,
    /// Layers compared, and how many of them were bit-identical.
    pub compared_layers: usize,
    /// Of those, bit-identical on both.
    pub identical_layers: usize,
    /// The first layer, in graph order, whose values differ at all.
    pub first_difference: Option<PairLayer>,
    /// The first layer, in graph order, whose SQNR (second against first) falls below the threshold.
    pub first_divergence: Option<PairLayer>,
    /// Why the two could not be compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A layer of a [`TargetPair`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairLayer {
    /// The model's node that computed the layer.
    pub node: String,
    /// The float tensor.
    pub tensor: String,
    /// The node's operator.
    pub op_type: String,
    /// SQNR of the second target against the first, dB.
    #[serde(with = "npugate_gate::outputs::non_finite")]
    pub sqnr_db: f64,
    /// Largest absolute difference.
    #[serde(with = "npugate_gate::outputs::non_finite")]
    pub max_abs_err: f64,
}

impl TargetPair {
    /// The pair judged from its per-layer comparisons (in [`Matching::layers`] order) against
    /// `threshold` dB, or the error that kept them apart.
    pub fn judge(
        from: &str,
        to: &str,
        matching: &Matching,
        compared: Result<Vec<Result<OutputComparison, String>>, String>,
        threshold: f64,
    ) -> TargetPair {
        let mut pair = TargetPair {
            from: from.into(),
            to: to.into(),
            compared_layers: 0,
            identical_layers: 0,
            first_difference: None,
            first_divergence: None,
            error: None,
        };
        let layers = match compared {
            Ok(layers) => layers,
            Err(error) => {
                pair.error = Some(error);
                return pair;
            }
        };
        let at = |i: usize, m: &OutputMetrics| {
            let id = &matching.layers[i].id;
            PairLayer {
                node: id.node.clone(),
                tensor: id.tensor.clone(),
                op_type: id.op_type.clone(),
                sqnr_db: m.sqnr_db,
                max_abs_err: m.max_abs_err,
            }
        };
        for (i, layer) in layers.iter().enumerate() {
            let Ok(compared) = layer else { continue };
            let m = &compared.metrics;
            pair.compared_layers += 1;
            if m.max_abs_err == 0.0 {
                pair.identical_layers += 1;
            } else if pair.first_difference.is_none() {
                pair.first_difference = Some(at(i, m));
            }
            if pair.first_divergence.is_none() && below(m.sqnr_db, threshold) {
                pair.first_divergence = Some(at(i, m));
            }
        }
        if let Some(Err(error)) = layers.iter().find(|l| l.is_err()) {
            pair.error = Some(format!(
                "{} of {} layers could not be compared, e.g.: {error}",
                layers.len() - pair.compared_layers,
                layers.len()
            ));
        }
        pair
    }
}

/// A layer's SQNR against the lowest SQNR of the layers feeding it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SqnrDrop {
    /// The model's node that computed the layer.
    pub node: String,
    /// The float tensor.
    pub tensor: String,
    /// The node's operator.
    pub op_type: String,
    /// The lowest SQNR among its inputs, dB.
    pub from_db: f64,
    /// Its own SQNR, dB.
    pub to_db: f64,
}

/// A layer feeding a divergence, and its SQNR.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputSqnr {
    /// The float tensor.
    pub tensor: String,
    /// Its SQNR, dB.
    #[serde(with = "npugate_gate::outputs::non_finite")]
    pub sqnr_db: f64,
}

/// What one target produced, for [`NumericsReport::assemble`].
#[derive(Debug, Clone)]
pub struct TargetRun {
    /// The target without its layers and divergence.
    pub target: TargetReport,
    /// Per layer (in [`Matching::layers`] order), the comparison, or why there is none; empty
    /// when the run failed.
    pub layers: Vec<Result<OutputComparison, String>>,
    /// The EP of each layer's node.
    pub eps: Vec<Option<String>>,
}

/// What was compared and how: the parts of a report that do not depend on the targets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The model under test.
    pub model: ModelRef,
    /// The float reference model.
    pub reference: ModelRef,
    /// The reference run (host CPU EP, fp32, same inputs): its directory.
    pub reference_run: String,
    /// The SQNR threshold of a divergence, dB.
    pub min_sqnr_db: f64,
    /// Which tensors were exposed: `all`, `boundaries` or `names`.
    pub tensors: String,
    /// How the models were instrumented.
    pub instrumentation: Instrumentation,
}

/// True when `sqnr` is below `threshold` (NaN is).
fn below(sqnr: f64, threshold: f64) -> bool {
    sqnr.is_nan() || sqnr < threshold
}

impl NumericsReport {
    /// Judges every target's layers: which are below the threshold, which start a divergence,
    /// each target's first divergence and outcome, and the report's.
    pub fn assemble(header: Header, matching: &Matching, runs: Vec<TargetRun>) -> NumericsReport {
        let threshold = header.min_sqnr_db;
        let mut layers: Vec<LayerReport> = matching
            .layers
            .iter()
            .map(|l| LayerReport { id: l.id.clone(), shape: None, results: Vec::new() })
            .collect();
        let mut targets = Vec::new();
        for run in runs {
            let mut target = run.target;
            let sqnr: Vec<Option<f64>> = (0..layers.len())
                .map(|i| run.layers.get(i).and_then(|r| r.as_ref().ok()).map(|c| c.metrics.sqnr_db))
                .collect();
            let is_below: Vec<bool> = sqnr.iter().map(|s| s.is_some_and(|v| below(v, threshold))).collect();
            let origin: Vec<bool> = (0..layers.len())
                .map(|i| is_below[i] && matching.layers[i].inputs.iter().all(|&j| !is_below[j]))
                .collect();
            for (i, layer) in layers.iter_mut().enumerate() {
                let compared = run.layers.get(i);
                if let Some(Ok(c)) = compared {
                    layer.shape.get_or_insert_with(|| c.shape.clone());
                }
                let error = match compared {
                    Some(Err(e)) => Some(e.clone()),
                    None if target.error.is_none() => Some("not compared".into()),
                    _ => None,
                };
                layer.results.push(LayerResult {
                    target: target.name.clone(),
                    ep: run.eps.get(i).cloned().flatten(),
                    metrics: compared.and_then(|r| r.as_ref().ok()).map(|c| c.metrics),
                    below_threshold: is_below[i],
                    divergence_origin: origin[i],
                    non_binary_bools: compared
                        .and_then(|r| r.as_ref().ok())
                        .map(|c| c.non_binary_bools)
                        .filter(|&n| n > 0),
                    error,
                });
            }
            target.largest_drop = largest_drop(&layers, matching, &sqnr);
            let t = targets.len();
            target.first_divergence =
                origin.iter().position(|&o| o).map(|i| divergence(&layers, matching, i, &[t], &[target.name.clone()]));
            let unjudged = target.error.is_some() || run.layers.is_empty() || run.layers.iter().any(Result::is_err);
            target.outcome = match (&target.first_divergence, unjudged) {
                (Some(_), _) if target.error.is_none() => Outcome::Fail,
                (None, false) => Outcome::Pass,
                _ => Outcome::Error,
            };
            targets.push(target);
        }
        let first = (0..layers.len()).find_map(|i| {
            let at: Vec<usize> = (0..targets.len()).filter(|&t| layers[i].results[t].divergence_origin).collect();
            let names: Vec<String> = at.iter().map(|&t| targets[t].name.clone()).collect();
            (!at.is_empty()).then(|| divergence(&layers, matching, i, &at, &names))
        });
        let outcome = targets.iter().map(|t| t.outcome).max_by_key(|o| o.exit_code()).unwrap_or(Outcome::Error);
        NumericsReport {
            schema: NUMERICS_SCHEMA.into(),
            header,
            targets,
            layers,
            first_divergence: first,
            between_targets: Vec::new(),
            unmatched: matching.unmatched.clone(),
            outcome,
        }
    }
}

/// The layer with the largest finite SQNR loss against its lowest input, when one loses any.
fn largest_drop(layers: &[LayerReport], matching: &Matching, sqnr: &[Option<f64>]) -> Option<SqnrDrop> {
    let finite = |i: usize| sqnr[i].filter(|v| v.is_finite());
    let drops = matching.layers.iter().enumerate().filter_map(|(i, layer)| {
        let to = finite(i)?;
        let inputs: Option<Vec<f64>> = layer.inputs.iter().map(|&j| finite(j)).collect();
        let from = inputs?.into_iter().reduce(f64::min)?;
        (from > to).then_some((i, from, to))
    });
    let (i, from_db, to_db) = drops.max_by(|a, b| (a.1 - a.2).total_cmp(&(b.1 - b.2)))?;
    let id = &layers[i].id;
    Some(SqnrDrop { node: id.node.clone(), tensor: id.tensor.clone(), op_type: id.op_type.clone(), from_db, to_db })
}

/// The divergence at layer `i` on targets `at` (indices) named `names`: the worst SQNR among them.
fn divergence(layers: &[LayerReport], matching: &Matching, i: usize, at: &[usize], names: &[String]) -> Divergence {
    let metric = |layer: usize, t: usize| layers[layer].results.get(t).and_then(|r| r.metrics);
    let worst = at.iter().filter_map(|&t| metric(i, t).map(|m| (t, m))).min_by(|a, b| {
        (!a.1.sqnr_db.is_nan(), a.1.sqnr_db)
            .partial_cmp(&(!b.1.sqnr_db.is_nan(), b.1.sqnr_db))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let (t, m) = worst.expect("a divergence origin was compared");
    let layer = &layers[i];
    Divergence {
        node: layer.id.node.clone(),
        tensor: layer.id.tensor.clone(),
        op_type: layer.id.op_type.clone(),
        sqnr_db: m.sqnr_db,
        cosine: m.cosine,
        max_abs_err: m.max_abs_err,
        inputs: matching.layers[i]
            .inputs
            .iter()
            .map(|&j| InputSqnr {
                tensor: layers[j].id.tensor.clone(),
                sqnr_db: metric(j, t).map_or(f64::NAN, |m| m.sqnr_db),
            })
            .collect(),
        targets: names.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::Selection;
    use crate::testing::{compared, float, header, run, three_targets};

    #[test]
    fn drift_starts_where_a_layer_falls_below_while_its_inputs_were_above() {
        let report = three_targets();
        let origins = |t: usize| report.layers.iter().map(|l| l.results[t].divergence_origin).collect::<Vec<_>>();
        assert_eq!(origins(0), [false, false, false]);
        assert_eq!(origins(1), [false, true, false], "y follows r down: not an origin");
        assert_eq!(origins(2), [false, false, true], "NaN is below any threshold");
        assert!(report.layers[2].results[1].below_threshold);
        let outcomes: Vec<Outcome> = report.targets.iter().map(|t| t.outcome).collect();
        assert_eq!(outcomes, [Outcome::Pass, Outcome::Fail, Outcome::Fail]);
        let first = report.first_divergence.as_ref().unwrap();
        assert_eq!((first.tensor.as_str(), first.node.as_str(), first.op_type.as_str()), ("r", "relu", "Relu"));
        assert!((first.sqnr_db - 8.0).abs() < 1e-6, "{}", first.sqnr_db);
        assert_eq!(first.targets, ["b"]);
        assert_eq!(first.inputs.len(), 1);
        assert_eq!((first.inputs[0].tensor.as_str(), first.inputs[0].sqnr_db), ("c", f64::INFINITY));
        assert_eq!(report.targets[2].first_divergence.as_ref().unwrap().tensor, "y");
        assert_eq!(report.outcome, Outcome::Fail);
        assert_eq!(report.layers[0].shape, Some(vec![100]));
        let drop = report.targets[0].largest_drop.as_ref().expect("y loses 5 dB against r on a");
        assert_eq!((drop.tensor.as_str(), drop.from_db.round(), drop.to_db.round()), ("y", 40.0, 35.0));
        assert!(report.targets[1].largest_drop.is_none(), "r's input is exact, y gains on r");
    }

    #[test]
    fn two_targets_compared_directly_name_their_first_difference_and_divergence() {
        let matching = Matching::build(&float(), &float(), &Selection::All).unwrap();
        let layers = vec![compared("c", None), compared("r", Some(45.0)), compared("y", Some(12.0))];
        let pair = TargetPair::judge("SM8650-qnn2.49.40", "SM8650-qnn2.51.0", &matching, Ok(layers), 20.0);
        assert_eq!((pair.compared_layers, pair.identical_layers), (3, 1));
        assert_eq!(
            pair.first_difference.as_ref().map(|l| l.tensor.as_str()),
            Some(matching.layers[1].id.tensor.as_str())
        );
        assert_eq!(
            pair.first_divergence.as_ref().map(|l| l.tensor.as_str()),
            Some(matching.layers[2].id.tensor.as_str())
        );
        let failed = TargetPair::judge("a", "b", &matching, Err("the run on b failed".into()), 20.0);
        assert_eq!((failed.error.as_deref(), failed.compared_layers), (Some("the run on b failed"), 0));
    }

    #[test]
    fn a_target_that_could_not_run_makes_the_report_unjudged_and_the_json_round_trips() {
        let matching = Matching::build(&float(), &float(), &Selection::All).unwrap();
        let mut failed = run("gone", [None; 3]);
        failed.layers.clear();
        failed.target.error = Some("device gone".into());
        let mut odd = run("odd", [None, None, None]);
        odd.layers[1] = Err("shape [2] differs".into());
        let report = NumericsReport::assemble(header(), &matching, vec![run("a", [None; 3]), failed, odd]);
        let outcomes: Vec<Outcome> = report.targets.iter().map(|t| t.outcome).collect();
        assert_eq!(outcomes, [Outcome::Pass, Outcome::Error, Outcome::Error]);
        assert_eq!(report.outcome, Outcome::Error);
        assert!(report.first_divergence.is_none());
        assert_eq!(report.layers[1].results[2].error.as_deref(), Some("shape [2] differs"));
        assert_eq!(report.layers[1].results[1].error, None, "the target's own error says it all");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("numerics.json");
        contract::write_json(&path, &report).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"schema\": \"npugate.numerics/1\"") && text.contains("\"sqnr_db\": \"inf\""), "{text}");
        assert!(text.contains("\"first_divergence\": null"), "{text}");
        // serde_json parses floats to within an ulp, so compare what is not a metric.
        let read = contract::read::<NumericsReport>(&path).unwrap();
        assert_eq!((&read.targets, read.outcome, &read.first_divergence), (&report.targets, report.outcome, &None));
        let ids = |r: &NumericsReport| r.layers.iter().map(|l| l.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&read), ids(&report));
        assert_eq!(read.layers[0].results[0].metrics.map(|m| m.sqnr_db), Some(f64::INFINITY));
    }
}
