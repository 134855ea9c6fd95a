//! `matrix.md`: the same content as the HTML report as Markdown tables, trends as sparklines.

use std::fmt::Write as _;

use npugate_gate::export::markdown::table;

use super::report::{cell_row, Matrix, CELL_HEADER};
use crate::history::trend::sparkline;

/// The whole document.
pub fn render(m: &Matrix) -> String {
    let s = m.summary;
    let (pass, fail, error, unfinished) = m.counts();
    let mut out = format!(
        "# npugate sweep {} — night {}\n\n{} device(s) × {} runtime(s) × {} model(s): **{pass} passed, {fail} failed, {error} not judged, {unfinished} unfinished{}** ({}).\n\n",
        s.name,
        s.night,
        s.devices.len(),
        s.runtimes.len(),
        s.models.len(),
        m.missing_shards().map(|missing| format!(", {missing}")).unwrap_or_default(),
        m.when()
    );
    for model in &s.models {
        let _ = writeln!(out, "## {model}\n");
        let rows: Vec<Vec<String>> = m.model_cells(model).into_iter().map(cell_row).collect();
        out.push_str(&table(&CELL_HEADER, &rows));
        out.push('\n');
    }
    out.push_str("## Placement differences between runtimes\n\n");
    if m.moves.is_empty() {
        out.push_str("No node changed its EP between runtimes.\n\n");
    }
    for moved in &m.moves {
        let _ = writeln!(out, "- **{}** on {}: {}", moved.model, moved.device, moved.sentence());
    }
    if let Some(trends) = &m.trends {
        let _ = writeln!(out, "\n## Trend against previous nights ({} night(s))\n", trends.nights.len());
        let rows: Vec<Vec<String>> = trends
            .series
            .iter()
            .map(|series| {
                vec![
                    series.soc.clone(),
                    series.model.clone(),
                    series.device.clone(),
                    series.runtime.clone(),
                    sparkline(&series.medians_by_night(&trends.nights)),
                    series.change.as_ref().map(|c| c.sentence()).unwrap_or_else(|| "first night".into()),
                ]
            })
            .collect();
        out.push_str(&table(
            &["SoC", "model", "device", "runtime", "median by night", "since the night before"],
            &rows,
        ));
    }
    let unfinished: Vec<String> =
        m.unfinished().map(|c| format!("- {}: {}", c.key.label(), c.error.as_deref().unwrap_or("not run"))).collect();
    if !unfinished.is_empty() {
        let _ = writeln!(out, "\n## Unfinished cells\n\n{}", unfinished.join("\n"));
    }
    let absent = m.absent();
    if !absent.is_empty() {
        let _ = writeln!(
            out,
            "\n## Absent cells (their shard was not merged: run it, then merge again)\n\n- {}",
            absent.join("\n- ")
        );
    }
    out
}
