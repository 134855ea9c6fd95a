//! The layer-by-layer comparison of one target's run with the reference run, tensor by tensor as
//! they are read: two tensors in memory at a time, never a full copy of every activation.
//!
//! A saved tensor is found by its position in `result.json` (`model.outputs[i]` was saved as
//! `artifacts.outputs[i]`), never by file name: the harness turns every character outside
//! `[A-Za-z0-9._-]` into `_`, so `a/b:0` and `a_b_0` would both claim `a_b_0.npy`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use npugate_gate::outputs::{compare_tensors, OutputComparison};
use npugate_result::RunResult;

use super::matching::{Layer, Probe};
use npugate_engine::output_check::read_npy_f64;

/// A finished run's saved graph outputs.
#[derive(Debug, Clone, Copy)]
pub struct Saved<'a> {
    /// Its result directory.
    pub dir: &'a Path,
    /// Its result.
    pub result: &'a RunResult,
}

impl Saved<'_> {
    /// Output name → saved file; refuses a run that did not save every output.
    fn files(&self) -> Result<HashMap<&str, PathBuf>> {
        let (outputs, files) = (&self.result.model.outputs, &self.result.artifacts.outputs);
        if outputs.len() != files.len() {
            bail!(
                "{} lists {} saved tensors for {} graph outputs; the run stopped before saving them (see its harness.stderr)",
                self.dir.join(npugate_result::files::RESULT).display(),
                files.len(),
                outputs.len()
            );
        }
        Ok(outputs.iter().zip(files).map(|(o, f)| (o.name.as_str(), self.dir.join(f))).collect())
    }
}

/// Compares every layer of `run` with `reference`, in layer order; a layer that cannot be
/// compared (missing, another shape, an unreadable file) gets its reason. Refuses runs fed other
/// inputs than the reference.
pub fn compare_run(
    layers: &[Layer],
    reference: Saved<'_>,
    run: Saved<'_>,
) -> Result<Vec<Result<OutputComparison, String>>> {
    npugate_engine::output_check::check_same_inputs(run.result, run.dir, reference.result, reference.dir)?;
    let (reference_files, run_files) = (reference.files()?, run.files()?);
    Ok(layers.iter().map(|layer| compare_layer(layer, &reference_files, &run_files)).collect())
}

/// Compares every layer of run `to` with run `from`, both runs of the model under test (e.g. one
/// SoC under two QNN versions): the model's own tensors against each other, dequantized alike.
/// Refuses runs fed different inputs.
pub fn compare_runs(layers: &[Layer], from: Saved<'_>, to: Saved<'_>) -> Result<Vec<Result<OutputComparison, String>>> {
    npugate_engine::output_check::check_same_inputs(to.result, to.dir, from.result, from.dir)?;
    let (from_files, to_files) = (from.files()?, to.files()?);
    Ok(layers
        .iter()
        .map(|layer| {
            let (from_shape, from_values) = read_exposed(layer, &from_files, "the first run")?;
            let (shape, values) = read_exposed(layer, &to_files, "the second run")?;
            compare(layer, (&from_shape, &from_values), (&shape, &values))
        })
        .collect())
}

/// One layer: read both tensors, dequantize the run's when its probe says so, compare.
fn compare_layer(
    layer: &Layer,
    reference: &HashMap<&str, PathBuf>,
    run: &HashMap<&str, PathBuf>,
) -> Result<OutputComparison, String> {
    let reference_file = reference
        .get(layer.id.tensor.as_str())
        .ok_or_else(|| format!("the reference run saved no {:?}", layer.id.tensor))?;
    let (reference_shape, reference_values) = read_npy_f64(reference_file).map_err(|e| format!("{e:#}"))?;
    let (shape, values) = read_exposed(layer, run, "the run")?;
    compare(layer, (&reference_shape, &reference_values), (&shape, &values))
}

/// The layer's tensor as a run of the model under test saved it, dequantized when its probe says so.
fn read_exposed(layer: &Layer, run: &HashMap<&str, PathBuf>, which: &str) -> Result<(Vec<u64>, Vec<f64>), String> {
    let exposed = layer.probe.exposed();
    let run_file = run.get(exposed).ok_or_else(|| format!("{which} saved no {exposed:?}"))?;
    let (shape, mut values) = read_npy_f64(run_file).map_err(|e| format!("{e:#}"))?;
    if let Probe::Dequantized { params, dequantize_node, .. } = &layer.probe {
        params
            .dequantize(&shape, &mut values)
            .map_err(|e| format!("cannot dequantize {exposed:?} as {dequantize_node:?} does: {e}"))?;
    }
    Ok((shape, values))
}

/// `run` against `reference` for `layer`.
fn compare(layer: &Layer, reference: (&[u64], &[f64]), run: (&[u64], &[f64])) -> Result<OutputComparison, String> {
    let mut comparison = compare_tensors(&layer.id.tensor, reference, run).map_err(|e| e.to_string())?;
    if !layer.model_output {
        // Top-1 agreement means something for class scores, not for feature maps.
        comparison.metrics.top1_agreement_pct = None;
    }
    Ok(comparison)
}
