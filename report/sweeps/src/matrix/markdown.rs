//! `matrix.md`: the same content as the HTML report as Markdown tables, device trends as
//! sparklines, emulated cells by their gate outcome night by night (never their host time).

use std::fmt::Write as _;

use npugate_gate::export::markdown::table;

use super::report::{cell_row, emulated_header, emulated_row, Matrix, CELL_HEADER};
use crate::history::chart::outcomes_by_night;
use crate::history::trend::{sparkline, HistoryReport, Series};
use crate::sweep::cell::EMULATED_NOTE;

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
    if s.finished().any(|r| r.is_emulated()) {
        let _ = writeln!(out, "{EMULATED_NOTE}\n");
    }
    for model in &s.models {
        let _ = writeln!(out, "## {model}\n");
        let (devices, emulated) = m.model_cells(model);
        if !devices.is_empty() || emulated.is_empty() {
            out.push_str(&table(&CELL_HEADER, &devices.into_iter().map(cell_row).collect::<Vec<_>>()));
            out.push('\n');
        }
        if !emulated.is_empty() {
            out.push_str("On the host HTP emulator:\n\n");
            out.push_str(&table(&emulated_header(), &emulated.into_iter().map(emulated_row).collect::<Vec<_>>()));
            out.push('\n');
        }
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
        out.push_str(&trend_tables(trends));
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

/// The trend tables: device series with a sparkline of their medians; emulated series with their
/// gate outcome night by night.
fn trend_tables(trends: &HistoryReport) -> String {
    let (devices, emulated): (Vec<&Series>, Vec<&Series>) = trends.series.iter().partition(|s| !s.emulated);
    let row = |series: &Series, by_night: String| {
        vec![
            series.soc.clone(),
            series.model.clone(),
            series.device.clone(),
            series.runtime.clone(),
            by_night,
            series.change.as_ref().map(|c| c.sentence()).unwrap_or_else(|| "first night".into()),
        ]
    };
    let mut out = String::new();
    if !devices.is_empty() {
        let rows: Vec<Vec<String>> =
            devices.iter().map(|s| row(s, sparkline(&s.medians_by_night(&trends.nights)))).collect();
        out.push_str(&table(
            &["SoC", "model", "device", "runtime", "median by night", "since the night before"],
            &rows,
        ));
    }
    if !emulated.is_empty() {
        let rows: Vec<Vec<String>> = emulated.iter().map(|s| row(s, outcomes_by_night(s, &trends.nights))).collect();
        out.push_str("\nOn the host HTP emulator (host time is not a device latency: not trended):\n\n");
        out.push_str(&table(
            &["SoC", "model", "emulator", "runtime", "gate by night", "since the night before"],
            &rows,
        ));
    }
    out
}
