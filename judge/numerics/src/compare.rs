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
use npugate_engine::output_check::{read_npy, NpyTensor};

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
            let from = read_exposed(layer, &from_files, "the first run")?;
            let to = read_exposed(layer, &to_files, "the second run")?;
            compare(layer, &from, &to)
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
    let reference = read_npy(reference_file).map_err(|e| format!("{e:#}"))?;
    let exposed = read_exposed(layer, run, "the run")?;
    compare(layer, &reference, &exposed)
}

/// The layer's tensor as a run of the model under test saved it, dequantized when its probe says so.
fn read_exposed(layer: &Layer, run: &HashMap<&str, PathBuf>, which: &str) -> Result<NpyTensor, String> {
    let exposed = layer.probe.exposed();
    let run_file = run.get(exposed).ok_or_else(|| format!("{which} saved no {exposed:?}"))?;
    let mut tensor = read_npy(run_file).map_err(|e| format!("{e:#}"))?;
    if let Probe::Dequantized { params, dequantize_node, .. } = &layer.probe {
        params
            .dequantize(&tensor.shape, &mut tensor.values)
            .map_err(|e| format!("cannot dequantize {exposed:?} as {dequantize_node:?} does: {e}"))?;
    }
    Ok(tensor)
}

/// `run` against `reference` for `layer`; the run's bool bytes other than 0/1 are counted, not failed.
fn compare(layer: &Layer, reference: &NpyTensor, run: &NpyTensor) -> Result<OutputComparison, String> {
    let mut comparison =
        compare_tensors(&layer.id.tensor, (&reference.shape, &reference.values), (&run.shape, &run.values))
            .map_err(|e| e.to_string())?;
    comparison.non_binary_bools = run.non_binary_bools;
    if !layer.model_output {
        // Top-1 agreement means something for class scores, not for feature maps.
        comparison.metrics.top1_agreement_pct = None;
    }
    Ok(comparison)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::{Matching, Selection};
    use crate::report::NumericsReport;
    use crate::testing::{float, header, run};
    use npyz::WriterBuilder;

    /// `values` as a `.npy` of dtype bool, raw bytes as given (an emulated run's true may be 12).
    fn bool_npy(path: &Path, values: &[u8]) {
        let mut bytes = Vec::new();
        let mut writer = npyz::WriteOptions::<u8>::new()
            .default_dtype()
            .shape(&[values.len() as u64])
            .writer(&mut bytes)
            .begin_nd()
            .unwrap();
        writer.extend(values.iter().copied()).unwrap();
        writer.finish().unwrap();
        let header = bytes.windows(3).position(|w| w == b"|u1").unwrap();
        bytes[header..header + 3].copy_from_slice(b"|b1");
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn bool_bytes_other_than_0_and_1_are_compared_as_true_counted_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let matching = Matching::build(&float(), &float(), &Selection::All).unwrap();
        let layer = &matching.layers[1];
        let (reference_file, run_file) = (dir.path().join("reference.npy"), dir.path().join("run.npy"));
        bool_npy(&reference_file, &[0, 1, 1, 0, 1]);
        bool_npy(&run_file, &[0, 12, 1, 0, 12]);
        let tensor = layer.probe.exposed();
        let reference = HashMap::from([(layer.id.tensor.as_str(), reference_file)]);
        let exposed = HashMap::from([(tensor, run_file)]);
        let compared = compare_layer(layer, &reference, &exposed).unwrap();
        assert_eq!((compared.metrics.max_abs_err, compared.non_binary_bools), (0.0, 2), "equal as truth values");

        let mut target = run("hex", [None; 3]);
        target.layers[1] = Ok(compared);
        let report = NumericsReport::assemble(header(), &matching, vec![target]);
        assert_eq!(report.layers[1].results[0].non_binary_bools, Some(2));
        assert_eq!(report.layers[0].results[0].non_binary_bools, None);
        assert_eq!(report.outcome, npugate_gate::Outcome::Pass, "reported, never a failure");
        let text = crate::render::text(&report, false);
        assert!(
            text.contains(&format!(
                "note: bool tensor {} on hex: 2 of 5 raw values were neither 0 nor 1 (compared as true)",
                layer.id.tensor
            )),
            "{text}"
        );
    }
}
