//! The matrix report of a sweep (`matrix.html` with inline SVG, and `matrix.md`): per cell median,
//! CV, NPU FLOP share, fallback count and verdict; per model the placement differences between
//! runtimes on the same device; per device class the trend against previous nights from the history.
//! A kind of the one report stream ([`Report`]): its documents are the Markdown and the HTML, its
//! JSON the sweep's `sweep.json` (`npugate.sweep/1`).

mod html;
mod markdown;
mod report;

use std::path::{Path, PathBuf};

use npugate_result::contract::EXIT_ERROR;
use npugate_result::report::{json_of, write_all, Format, Report};

pub use report::{placement_differences, Matrix, PlacementMove};

/// The formats a sweep writes into its directory: `matrix.html` and `matrix.md`.
const MATRIX_FORMATS: [Format; 2] = [Format::Html, Format::Markdown];

/// A sweep's matrix: Markdown (also its text) and HTML; its JSON is the sweep's summary.
impl Report for Matrix<'_> {
    fn schema(&self) -> &str {
        &self.summary.schema
    }
    fn exit_code(&self) -> u8 {
        self.summary.exit_code.unwrap_or(EXIT_ERROR)
    }
    fn text(&self, _color: bool) -> String {
        markdown::render(self)
    }
    fn json(&self) -> String {
        json_of(self.summary)
    }
    fn document(&self, format: Format) -> Option<String> {
        match format {
            Format::Markdown => Some(markdown::render(self)),
            Format::Html => Some(html::render(self)),
            _ => None,
        }
    }
    fn stem(&self) -> &str {
        "matrix"
    }
}

/// Writes `matrix.html` and `matrix.md` of `matrix` into `sweep_dir`; returns their paths.
pub fn write(matrix: &Matrix<'_>, sweep_dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    Ok(write_all(matrix, &MATRIX_FORMATS, sweep_dir)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::device_and_emulator;
    use crate::history::trend;
    use crate::history::HistoryFilter;
    use crate::sweep::SweepSummary;

    /// A night of one device cell (4 ms) and one host-HTP cell (84 ms of host time).
    fn summary() -> SweepSummary {
        let record = |device: &str, soc: &str, median_ms: f64, emulated: Option<&str>| {
            serde_json::json!({
                "schema": "npugate.sweep-cell/1",
                "key": {"device": device, "runtime": "rt", "model": "m"},
                "device": {"serial": device, "soc": soc},
                "ort_version": "1.31.1", "model_digest": "abc", "outcome": "pass", "exit_code": 0,
                "failed_rules": [], "runs": 3, "median_ns": median_ms * 1e6, "cv_pct": 45.0, "npu_flops_pct": 100.0,
                "fallback_nodes": 0, "emulated": emulated, "npu_nodes_pct": 93.5,
                "outputs": {"output": "probs", "sqnr_db": "inf", "cosine": 1.0},
                "finished_at": "2026-11-27T02:00:00Z", "seconds": 9.0
            })
        };
        let entry = |record: serde_json::Value| {
            let key = record["key"].clone();
            serde_json::json!({"key": key, "dir": "d", "state": "finished", "record": record})
        };
        serde_json::from_value(serde_json::json!({
            "schema": "npugate.sweep/1", "name": "nightly", "plan": "sweep.toml", "night": "2026-11-27",
            "started_at": "2026-11-27T01:00:00Z", "runtimes": ["rt"], "models": ["m"],
            "devices": [
                {"serial": "dev", "dir": "dev", "soc": "SM8650", "chosen_by": "serial"},
                {"serial": "htp-SM8650", "dir": "htp-SM8650", "soc": "SM8650", "chosen_by": "socs"}
            ],
            "cells": [
                entry(record("dev", "SM8650", 4.0, None)),
                entry(record("htp-SM8650", "SM8650", 84.0, Some("Qualcomm's HTP emulator")))
            ],
            "exit_code": 0
        }))
        .unwrap()
    }

    #[test]
    fn emulated_cells_are_tabled_by_placement_compile_and_outputs_never_charted_as_latency() {
        let summary = summary();
        let cells = device_and_emulator([56, 84]);
        let trends = trend::build(&HistoryFilter { nights: 30, ..Default::default() }, cells, 10.0);
        let matrix = Matrix { summary: &summary, moves: Vec::new(), trends: Some(trends) };

        let page = html::render(&matrix);
        let charts: Vec<&str> = page.split("<svg").skip(1).map(|svg| &svg[..svg.find("</svg>").unwrap()]).collect();
        assert_eq!(charts.len(), 2, "the device cell's median bars and its trend, nothing else");
        assert!(charts.iter().all(|svg| !svg.contains("htp-SM8650")), "no chart shows the emulator");
        assert_eq!(page.matches("<polyline").count(), 1, "one trend line: the device's");
        assert!(page.contains("host time ms (not a device latency)") && page.contains(">84.0<"), "host time, labelled");
        assert!(
            page.contains("m on the host HTP emulator") && page.contains("pass · pass"),
            "emulated trend by outcome"
        );
        assert!(page.contains("Emulated: Qualcomm's HTP emulator"), "the page says what emulated numbers are");

        let text = markdown::render(&matrix);
        let median_table = text.split("| median by night |").nth(1).unwrap().split("\n\n").next().unwrap();
        assert!(!median_table.contains("htp-SM8650"), "no sparkline of host time: {text}");
        assert!(
            text.contains("| htp-SM8650 (SM8650) | rt | PASS | compiled | 93.5 | 100.0 | 0 | probs ∞ | 84.0 | – |  |"),
            "{text}"
        );
        assert!(
            text.contains("| pass · pass | unchanged since 2026-11-26 (emulated: host time not compared) |"),
            "{text}"
        );
    }
}
