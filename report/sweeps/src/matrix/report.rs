//! What the matrix report shows: the sweep's cells, the placement moves between runtimes, the
//! trends; computed here, rendered by the HTML and Markdown modules.

use std::path::Path;

use npugate_profile::report::PlacementReport;

use crate::history::HistoryReport;

use crate::sweep::summary::{CellEntry, CellState};
use crate::sweep::{CellRecord, SweepSummary};

/// Everything the matrix report shows.
pub struct Matrix<'a> {
    /// The sweep.
    pub summary: &'a SweepSummary,
    /// Nodes whose EP differs between a runtime and the plan's first runtime on the same device.
    pub moves: Vec<PlacementMove>,
    /// The history of this sweep's cells up to its night (absent when it could not be read).
    pub trends: Option<HistoryReport>,
}

/// One node that runs on another EP under `runtime` than under `reference_runtime`, same device.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacementMove {
    /// Model name.
    pub model: String,
    /// Device directory name.
    pub device: String,
    /// The plan's first runtime.
    pub reference_runtime: String,
    /// The runtime where the node sits elsewhere.
    pub runtime: String,
    /// Node name.
    pub node: String,
    /// Operator type.
    pub op_type: String,
    /// EP under the reference runtime.
    pub reference_ep: String,
    /// EP under `runtime`.
    pub ep: String,
}

impl PlacementMove {
    /// `on ort-1.24.4 /model.10/norm (LayerNormalization) moved to CPUExecutionProvider (QNNExecutionProvider on ort-1.31.1)`.
    pub fn sentence(&self) -> String {
        format!(
            "on {} {} ({}) moved to {} ({} on {})",
            self.runtime, self.node, self.op_type, self.ep, self.reference_ep, self.reference_runtime
        )
    }
}

/// Nodes present in both placements whose EP differs, in the graph order of `other`.
pub fn placement_differences(
    reference: &PlacementReport,
    other: &PlacementReport,
) -> Vec<(String, String, String, String)> {
    other
        .nodes
        .iter()
        .filter_map(|node| {
            let before = reference.nodes.iter().find(|n| n.name == node.name)?;
            (before.ep != node.ep)
                .then(|| (node.name.clone(), node.op_type.clone(), before.ep.clone(), node.ep.clone()))
        })
        .collect()
}

impl<'a> Matrix<'a> {
    /// Reads the finished cells' placements from their verdicts and diffs every runtime against
    /// the plan's first on each device.
    pub fn build(
        summary: &'a SweepSummary,
        sweep_dir: &Path,
        trends: Option<HistoryReport>,
    ) -> anyhow::Result<Matrix<'a>> {
        let placement = |record: &CellRecord| -> anyhow::Result<Option<PlacementReport>> {
            Ok(CellRecord::read_verdict(&record.key.dir(sweep_dir))?.placement)
        };
        let mut moves = Vec::new();
        let Some(reference_runtime) = summary.runtimes.first() else { return Ok(Matrix { summary, moves, trends }) };
        for reference in summary.finished().filter(|r| &r.key.runtime == reference_runtime) {
            let Some(base) = placement(reference)? else { continue };
            let others = summary.finished().filter(|r| {
                r.key.device == reference.key.device
                    && r.key.model == reference.key.model
                    && &r.key.runtime != reference_runtime
            });
            for other in others {
                let Some(current) = placement(other)? else { continue };
                for (node, op_type, reference_ep, ep) in placement_differences(&base, &current) {
                    moves.push(PlacementMove {
                        model: other.key.model.clone(),
                        device: other.key.device.clone(),
                        reference_runtime: reference_runtime.clone(),
                        runtime: other.key.runtime.clone(),
                        node,
                        op_type,
                        reference_ep,
                        ep,
                    });
                }
            }
        }
        Ok(Matrix { summary, moves, trends })
    }

    /// Cells of `model` that finished, in summary order: those on devices, and those on an
    /// emulator (whose time is host time, shown apart).
    pub(super) fn model_cells(&self, model: &str) -> (Vec<&CellRecord>, Vec<&CellRecord>) {
        self.summary.finished().filter(|r| r.key.model == model).partition(|r| !r.is_emulated())
    }

    /// Counts of finished cells by outcome, plus unfinished cells: (pass, fail, error or not judged,
    /// unfinished); a cell judged by no rule (measured: a sweep's cells have their plan's rules, so
    /// none is) counts with the passes, as its exit code does; absent cells (see
    /// [`Matrix::absent`]) are not counted.
    pub(super) fn counts(&self) -> (usize, usize, usize, usize) {
        let outcomes: Vec<npugate_gate::Outcome> = self.summary.finished().map(|r| r.outcome).collect();
        let count = |o: npugate_gate::Outcome| outcomes.iter().filter(|&&x| x == o).count();
        let unfinished = self.unfinished().count();
        (
            count(npugate_gate::Outcome::Pass) + count(npugate_gate::Outcome::Measured),
            count(npugate_gate::Outcome::Fail),
            count(npugate_gate::Outcome::Error) + count(npugate_gate::Outcome::NotJudged),
            unfinished,
        )
    }

    /// Cells that did not finish (and are not absent), in summary order.
    pub(super) fn unfinished(&self) -> impl Iterator<Item = &CellEntry> {
        self.summary.cells.iter().filter(|c| !matches!(c.state, CellState::Finished | CellState::Absent))
    }

    /// What a merge of shards lacks: one line per absent cell (`device / runtime / model: absent (shard
    /// 2/3 was not merged)`), and per unit of a missing shard whose devices only that shard knows (a SoC class).
    pub(super) fn absent(&self) -> Vec<String> {
        let cells = self.summary.cells.iter().filter(|c| c.state == CellState::Absent);
        let mut lines: Vec<String> = cells
            .map(|c| {
                format!("{}: absent ({})", c.key.label(), c.error.as_deref().unwrap_or("its shard was not merged"))
            })
            .collect();
        if let Some(merged) = &self.summary.merged {
            for missing in &merged.missing {
                for unit in missing.units.iter().filter(|unit| unit.known_dir().is_none()) {
                    lines.push(format!(
                        "{}, every runtime and model: absent (shard {}/{} was not merged)",
                        unit.label(),
                        missing.index,
                        merged.count
                    ));
                }
            }
        }
        lines
    }

    /// `shard 2/3 missing` (`shards 1/3, 2/3 missing`) when a merge lacks shards, for the headline.
    pub(super) fn missing_shards(&self) -> Option<String> {
        let merged = self.summary.merged.as_ref().filter(|merged| !merged.missing.is_empty())?;
        let shards: Vec<String> = merged.missing.iter().map(|m| format!("{}/{}", m.index, merged.count)).collect();
        Some(format!("{} {} missing", if shards.len() == 1 { "shard" } else { "shards" }, shards.join(", ")))
    }

    /// `cells finished 2026-01-01T02:00:03Z – 2026-01-01T02:41:17Z`: when the sweep ran, from its
    /// cells alone, so a merge of shards and an unsharded run with the same cells say the same.
    pub(super) fn when(&self) -> String {
        let times = || self.summary.finished().map(|r| r.finished_at.as_str());
        match (times().min(), times().max()) {
            (Some(first), Some(last)) => format!("cells finished {first} – {last}"),
            _ => "no cell finished".into(),
        }
    }
}

/// A record as a table row: device (SoC), runtime, verdict, median [CI], CV, NPU FLOPs, fallback,
/// peak memory, energy per inference, failed rules.
pub(super) fn cell_row(record: &CellRecord) -> Vec<String> {
    let ms = |ns: f64| npugate_gate::units::ms_number(ns / 1e6);
    let median = match (&record.median_ns, &record.median_ci) {
        (Some(m), Some(ci)) => format!("{} [{}–{}]", ms(*m), ms(ci.lower), ms(ci.upper)),
        (Some(m), None) => ms(*m),
        _ => "–".into(),
    };
    vec![
        format!("{} ({})", record.key.device, record.device.soc),
        record.key.runtime.clone(),
        record.outcome.label().to_string(),
        median,
        record.cv_pct.map(|cv| format!("{cv:.1}")).unwrap_or_else(|| "–".into()),
        record.npu_flops_pct.map(|p| format!("{p:.1}")).unwrap_or_else(|| "–".into()),
        record.fallback_nodes.map(|n| n.to_string()).unwrap_or_else(|| "–".into()),
        record.peak_memory_mb.map(|m| format!("{m:.1}")).unwrap_or_else(|| "–".into()),
        record.energy_mj.map(|e| format!("{e:.3}")).unwrap_or_else(|| "–".into()),
        record.failed_rules.join(", "),
    ]
}

/// Header of the per-model matrix tables of devices.
pub(super) const CELL_HEADER: [&str; 10] = [
    "device (SoC)",
    "runtime",
    "verdict",
    "median ms [95% CI]",
    "CV %",
    "NPU FLOPs %",
    "fallback",
    "peak MiB",
    "mJ/inference",
    "failed rules",
];

/// An emulated cell as a table row: emulator (SoC), runtime, verdict, the findings (compile,
/// placement, outputs), host time, the estimated device latency (`max_estimated_ms`'s ESTIMATE from
/// the graph, never measured), failed rules — no device latency measured.
pub(super) fn emulated_row(record: &CellRecord) -> Vec<String> {
    let mut row = vec![
        format!("{} ({})", record.key.device, record.device.soc),
        record.key.runtime.clone(),
        record.outcome.label().to_string(),
    ];
    row.extend(record.findings.columns(record.npu_flops_pct, record.fallback_nodes, record.median_ns));
    row.push(record.estimated_ms.map(|ms| format!("~{ms:.2}")).unwrap_or_else(|| "–".into()));
    row.push(record.failed_rules.join(", "));
    row
}

/// Header of [`emulated_row`].
pub(super) fn emulated_header() -> Vec<&'static str> {
    let mut header =
        crate::sweep::cell::emulated_header(["emulator (SoC)", "runtime", "verdict"], "est. ms (ESTIMATE)");
    header.push("failed rules");
    header
}

#[cfg(test)]
mod tests {
    use super::*;
    use npugate_profile::report::NodePlacement;

    fn placement(eps: &[(&str, &str)]) -> PlacementReport {
        let mut report: PlacementReport = serde_json::from_value(serde_json::json!({
            "schema": "npugate.placement/1", "model_sha256": "x", "preferred_ep": "QNNExecutionProvider",
            "runs_profiled": 0, "totals": {"nodes": 0, "flops": 0, "flops_unknown_nodes": 0}, "per_ep": [],
            "preferred_flops_pct": 0.0, "preferred_nodes_pct": 0.0, "partitions": [], "boundaries": {"per_run": [], "transitions": []},
            "fallback": [], "nodes": []
        }))
        .unwrap();
        report.nodes = eps
            .iter()
            .map(|(name, ep)| NodePlacement {
                name: name.to_string(),
                op_type: "LayerNormalization".into(),
                domain: String::new(),
                ep: ep.to_string(),
                not_placed: None,
                input_shapes: vec![],
                output_shapes: vec![],
                flops: None,
                profile_ep: None,
                time_us_per_run: None,
                backend_time: None,
            })
            .collect();
        report
    }

    #[test]
    fn placement_differences_name_the_nodes_that_moved() {
        let qnn = "QNNExecutionProvider";
        let cpu = "CPUExecutionProvider";
        let old = placement(&[("/model.9/conv", qnn), ("/model.10/norm", qnn), ("/model.11/act", qnn)]);
        let new =
            placement(&[("/model.9/conv", qnn), ("/model.10/norm", cpu), ("/model.11/act", qnn), ("/extra", cpu)]);
        let moved = placement_differences(&old, &new);
        assert_eq!(
            moved,
            [("/model.10/norm".to_string(), "LayerNormalization".to_string(), qnn.to_string(), cpu.to_string())]
        );
        let sentence = PlacementMove {
            model: "m".into(),
            device: "d".into(),
            reference_runtime: "qnn-2.41".into(),
            runtime: "qnn-2.42".into(),
            node: moved[0].0.clone(),
            op_type: moved[0].1.clone(),
            reference_ep: moved[0].2.clone(),
            ep: moved[0].3.clone(),
        }
        .sentence();
        assert_eq!(sentence, "on qnn-2.42 /model.10/norm (LayerNormalization) moved to CPUExecutionProvider (QNNExecutionProvider on qnn-2.41)");
        assert!(placement_differences(&old, &old).is_empty());
    }
}
