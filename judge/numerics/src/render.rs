//! The numerics report for people: a terminal table (one target: every layer with its metrics;
//! several: layers × targets, so "conv4 drifts on SM8750 only" reads at a glance) and a
//! self-contained HTML page with the per-layer SQNR plot.

use std::collections::BTreeMap;
use std::path::Path;

use maud::{html, Markup};
use npugate_gate::export::{outcome_style, paint, text_table, BOLD, RED};
use npugate_gate::outputs::fmt_metric;
use npugate_gate::page::{self, Plot, Px};
use npugate_gate::Outcome;
use npugate_result::report::{json_of, Report};

use super::matching::{Side, UnmatchedReason};
use super::placement::Placement;
use super::report::{Divergence, LayerReport, NumericsReport, TargetReport};

/// Marks a divergence origin in tables.
const ORIGIN_MARK: &str = "◀ divergence starts";
/// How many names of unmatched tensors a summary line shows.
const NAMES_SHOWN: usize = 8;

/// `CPUExecutionProvider` → `CPU`.
fn short_ep(ep: &str) -> &str {
    ep.strip_suffix("ExecutionProvider").unwrap_or(ep)
}

/// `40 nodes on QNN, 2 nodes on CPU (1 accelerator partition)`.
fn placement_text(placement: &Placement) -> String {
    let eps: Vec<String> =
        placement.nodes_by_ep.iter().map(|(ep, n)| format!("{n} nodes on {}", short_ep(ep))).collect();
    let partitions = match placement.accelerator_partitions {
        0 => String::new(),
        1 => " (1 accelerator partition)".into(),
        n => format!(" ({n} accelerator partitions)"),
    };
    format!("{}{partitions}", eps.join(", "))
}

/// `conv2 (Conv)`, or `(Conv)` for a node without a name.
fn node_label(layer: &LayerReport) -> String {
    if layer.id.node.is_empty() {
        format!("({})", layer.id.op_type)
    } else {
        format!("{} ({})", layer.id.node, layer.id.op_type)
    }
}

/// File name of a model path, for headings.
fn file_name(path: &str) -> String {
    Path::new(path).file_name().map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

/// `local`, or `R5CX21 (SM8650)` when the SoC is known.
fn target_label(target: &TargetReport) -> String {
    if target.soc.is_empty() || target.soc == "unknown" {
        target.name.clone()
    } else {
        format!("{} ({})", target.name, target.soc)
    }
}

/// One sentence on a divergence: node, tensor, SQNR, threshold and the inputs that were above it.
fn divergence_sentence(d: &Divergence, threshold: f64) -> String {
    let inputs = if d.inputs.is_empty() {
        "its inputs are the graph's inputs".to_string()
    } else {
        let list: Vec<String> =
            d.inputs.iter().map(|i| format!("{} {} dB", i.tensor, fmt_metric(i.sqnr_db, 1))).collect();
        format!("its inputs were above: {}", list.join(", "))
    };
    format!(
        "{} ({}) → {}: {} dB < {threshold} dB (cosine {}, max abs err {:.3e}) while {inputs}",
        d.node,
        d.op_type,
        d.tensor,
        fmt_metric(d.sqnr_db, 1),
        fmt_metric(d.cosine, 6),
        d.max_abs_err
    )
}

/// The verdict lines: each target's first divergence, or that there is none, or why it was not judged.
fn verdict_lines(report: &NumericsReport) -> Vec<(Outcome, String)> {
    report
        .targets
        .iter()
        .map(|target| {
            let on = if report.targets.len() > 1 { format!(" on {}", target_label(target)) } else { String::new() };
            let text = match (&target.first_divergence, &target.error) {
                (_, Some(error)) => format!("not judged{on}: {error}"),
                (Some(d), None) => {
                    format!("first divergence{on}: {}", divergence_sentence(d, report.header.min_sqnr_db))
                }
                (None, None) if target.outcome == Outcome::Error => {
                    format!("not judged{on}: some layers could not be compared (see the table)")
                }
                (None, None) => {
                    format!("no divergence{on}: every compared layer at or above {} dB", report.header.min_sqnr_db)
                }
            };
            (target.outcome, text)
        })
        .collect()
}

/// `largest drop on local: conv2 (Conv) → r2: 45.3 → 6.0 dB`.
fn drop_line(target: &TargetReport) -> Option<String> {
    let drop = target.largest_drop.as_ref()?;
    Some(format!(
        "largest drop on {}: {} ({}) → {}: {:.1} → {:.1} dB",
        target.name, drop.node, drop.op_type, drop.tensor, drop.from_db, drop.to_db
    ))
}

/// Every target's [`drop_line`].
fn drop_lines(report: &NumericsReport) -> Vec<String> {
    report.targets.iter().filter_map(drop_line).collect()
}

/// One line per pair of targets compared directly: where the second first differs from and
/// first diverges from the first.
fn pair_lines(report: &NumericsReport) -> Vec<String> {
    let at = |l: &super::report::PairLayer| {
        format!(
            "{} ({}) → {} (SQNR {} dB, max abs err {:.3e})",
            l.node,
            l.op_type,
            l.tensor,
            fmt_metric(l.sqnr_db, 1),
            l.max_abs_err
        )
    };
    report
        .between_targets
        .iter()
        .map(|pair| {
            let head = format!("{} against {}", pair.to, pair.from);
            if let (Some(error), 0) = (&pair.error, pair.compared_layers) {
                return format!("{head}: not compared: {error}");
            }
            let difference = match &pair.first_difference {
                None => format!("identical at every one of {} compared layers", pair.compared_layers),
                Some(first) => format!(
                    "{} of {} layers identical; first difference at {}",
                    pair.identical_layers,
                    pair.compared_layers,
                    at(first)
                ),
            };
            let divergence = match &pair.first_divergence {
                Some(first) => format!("; first divergence (below {} dB) at {}", report.header.min_sqnr_db, at(first)),
                None if pair.first_difference.is_some() => {
                    format!("; no layer below {} dB against each other", report.header.min_sqnr_db)
                }
                None => String::new(),
            };
            let error = pair.error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default();
            format!("{head}: {difference}{divergence}{error}")
        })
        .collect()
}

/// Unmatched tensors by side and reason, with up to [`NAMES_SHOWN`] names each.
fn unmatched_lines(report: &NumericsReport) -> Vec<String> {
    let mut groups: BTreeMap<UnmatchedReason, Vec<&str>> = BTreeMap::new();
    for u in &report.unmatched {
        groups.entry(u.reason).or_default().push(&u.tensor);
    }
    groups
        .into_iter()
        .map(|(reason, names)| {
            let shown: Vec<&str> = names.iter().take(NAMES_SHOWN).copied().collect();
            let more = names.len().saturating_sub(NAMES_SHOWN);
            let tail = if more > 0 { format!(" … and {more} more (numerics.json)") } else { String::new() };
            format!("{} {}: {}{tail}", names.len(), reason.describe(), shown.join(", "))
        })
        .collect()
}

/// `model` or `reference`.
fn side_label(side: Side) -> &'static str {
    match side {
        Side::Model => "model",
        Side::Reference => "reference",
    }
}

/// `npugate numerics`' finished result: [`text`] on a terminal, exit 1 on a divergence.
impl Report for NumericsReport {
    fn schema(&self) -> &str {
        &self.schema
    }
    fn exit_code(&self) -> u8 {
        self.outcome.exit_code()
    }
    fn text(&self, color: bool) -> String {
        text(self, color)
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// The report as terminal text.
pub fn text(report: &NumericsReport, color: bool) -> String {
    let targets: Vec<String> = report.targets.iter().map(target_label).collect();
    let mut out = format!(
        "{} {} against {} (fp32, CPU) on {}: {} layers, threshold {} dB\n",
        paint(color, BOLD, "Numerics"),
        file_name(&report.header.model.path),
        file_name(&report.header.reference.path),
        targets.join(", "),
        report.layers.len(),
        report.header.min_sqnr_db
    );
    out.push_str(&layer_table(report, &targets, color));
    for (outcome, line) in verdict_lines(report) {
        out.push_str(&format!("{} {line}\n", paint(color, outcome_style(outcome), outcome.label())));
    }
    for target in &report.targets {
        if let Some(line) = drop_line(target) {
            out.push_str(&line);
            out.push('\n');
        }
        if let Some(placement) = &target.placement {
            out.push_str(&format!(
                "placement of the instrumented model on {}: {}\n",
                target.name,
                placement_text(placement)
            ));
        }
    }
    for line in pair_lines(report) {
        out.push_str(&format!("between targets: {line}\n"));
    }
    for line in unmatched_lines(report) {
        out.push_str(&format!("not compared: {line}\n"));
    }
    for line in non_binary_bool_lines(report) {
        out.push_str(&format!("note: {line}\n"));
    }
    out.push_str(&format!("note: {}\n", report.header.instrumentation.note));
    out
}

/// The layers as a table: one target's SQNR, cosine and error per layer, or every target's SQNR
/// per layer, the cell where divergence starts marked.
fn layer_table(report: &NumericsReport, targets: &[String], color: bool) -> String {
    let mark = |below: bool, origin: bool, cell: String| {
        let cell = if origin { format!("{cell} ◀") } else { cell };
        if below {
            paint(color, RED, &cell)
        } else {
            cell
        }
    };
    let compared = report.layers.iter().any(|l| l.results.iter().any(|r| r.metrics.is_some()));
    if !compared {
        "  no layer was compared\n".into()
    } else if report.targets.len() == 1 {
        let header = ["#", "tensor", "node (op)", "EP", "SQNR dB", "cosine", "max abs err", ""];
        let rows: Vec<Vec<String>> = report
            .layers
            .iter()
            .enumerate()
            .map(|(i, layer)| {
                let r = &layer.results[0];
                let m = r.metrics;
                vec![
                    (i + 1).to_string(),
                    layer.id.tensor.clone(),
                    node_label(layer),
                    r.ep.as_deref().map(short_ep).unwrap_or("-").to_string(),
                    mark(r.below_threshold, false, m.map_or_else(|| "-".into(), |m| fmt_metric(m.sqnr_db, 1))),
                    m.map_or_else(|| "-".into(), |m| fmt_metric(m.cosine, 6)),
                    m.map_or_else(|| "-".into(), |m| format!("{:.3e}", m.max_abs_err)),
                    match (&r.error, r.divergence_origin) {
                        (Some(e), _) => e.clone(),
                        (None, true) => paint(color, RED, ORIGIN_MARK),
                        (None, false) => String::new(),
                    },
                ]
            })
            .collect();
        text_table(&header, &rows, &[true, false, false, false, true, true, true, false], color)
    } else {
        let mut header = vec!["#", "tensor", "node (op)"];
        header.extend(targets.iter().map(String::as_str));
        let rows: Vec<Vec<String>> = report
            .layers
            .iter()
            .enumerate()
            .map(|(i, layer)| {
                let mut row = vec![(i + 1).to_string(), layer.id.tensor.clone(), node_label(layer)];
                row.extend(layer.results.iter().map(|r| {
                    let value = r.metrics.map_or_else(|| "-".into(), |m| fmt_metric(m.sqnr_db, 1));
                    mark(r.below_threshold, r.divergence_origin, value)
                }));
                row
            })
            .collect();
        let mut numeric = vec![true, false, false];
        numeric.extend(vec![true; report.targets.len()]);
        format!("  SQNR dB per target (◀ where divergence starts)\n{}", text_table(&header, &rows, &numeric, color))
    }
}

/// One line per bool layer whose raw bytes on a target were not all 0 or 1: compared as truth
/// values, reported.
fn non_binary_bool_lines(report: &NumericsReport) -> Vec<String> {
    let mut lines = Vec::new();
    for layer in &report.layers {
        for result in &layer.results {
            let (Some(count), Some(metrics)) = (result.non_binary_bools, result.metrics) else { continue };
            lines.push(format!(
                "bool tensor {} on {}: {count} of {} raw values were neither 0 nor 1 (compared as true)",
                layer.id.tensor, result.target, metrics.elements
            ));
        }
    }
    lines
}

/// The highest SQNR the plot's axis shows, dB; anything above sits on the top edge.
const PLOT_CAP_DB: f64 = 80.0;

/// The plot's y for an SQNR: above the axis (infinity too) at the top, NaN at the bottom.
fn plotted(sqnr: f64, top: f64, bottom: f64) -> f64 {
    if sqnr.is_nan() {
        bottom
    } else {
        sqnr.clamp(bottom, top)
    }
}

/// Per-layer SQNR, one series per target, the threshold and the first divergence marked.
fn sqnr_plot(report: &NumericsReport) -> Markup {
    let finite: Vec<f64> = report
        .layers
        .iter()
        .flat_map(|l| &l.results)
        .filter_map(|r| r.metrics)
        .map(|m| m.sqnr_db)
        .filter(|v| v.is_finite())
        .collect();
    // Near-exact layers (a reshape, ~150 dB) would flatten the rest: the axis ends at PLOT_CAP_DB.
    let high = finite.iter().copied().fold(report.header.min_sqnr_db, f64::max).min(PLOT_CAP_DB);
    let low = finite.iter().copied().fold(0.0f64, f64::min);
    let top = high + 10.0;
    let count = report.layers.len().max(1) as f64;
    let mut plot = Plot::new(page::WIDE, 300.0, (0.5, count + 0.5), (low, top));
    plot.axes("layer (graph order)", "SQNR dB", |x| format!("{x:.0}"), |y| format!("{:.0}", y + 0.0));
    plot.hline(
        0.5,
        count + 0.5,
        report.header.min_sqnr_db,
        page::CPU_COLOR,
        &format!("threshold {} dB", report.header.min_sqnr_db),
    );
    if let Some(d) = &report.first_divergence {
        if let Some(i) = report.layers.iter().position(|l| l.id.tensor == d.tensor) {
            plot.vline(i as f64 + 1.0, "#e03131", &format!("first divergence: {} ({})", d.node, d.op_type));
        }
    }
    for (t, target) in report.targets.iter().enumerate() {
        let color = page::series_color(t);
        let points: Vec<(f64, f64, bool)> = report
            .layers
            .iter()
            .enumerate()
            .filter_map(|(i, l)| {
                l.results
                    .get(t)?
                    .metrics
                    .map(|m| (plot.px(i as f64 + 1.0), plot.py(plotted(m.sqnr_db, top, low)), m.sqnr_db > top))
            })
            .collect();
        let path: Vec<String> = points.iter().map(|(x, y, _)| format!("{},{}", Px(*x), Px(*y))).collect();
        plot.draw(html! {
            polyline points=(path.join(" ")) fill="none" stroke=(color) stroke-width="1.5" {}
            @for (x, y, open) in &points {
                circle cx=(Px(*x)) cy=(Px(*y)) r="3" fill=(if *open { "#fff" } else { color }) stroke=(color) {}
            }
            text x=(Px(plot.width - plot.right - 4.0)) y=(Px(plot.top + 14.0 * (t as f64 + 1.0))) text-anchor="end" fill=(color) { (target_label(target)) }
        });
    }
    plot.finish("SQNR per layer")
}

/// The report as a self-contained HTML page.
pub fn html(report: &NumericsReport) -> String {
    let title = format!("npugate numerics: {}", file_name(&report.header.model.path));
    let single = report.targets.len() == 1;
    let mut header: Vec<String> = vec!["#".into(), "tensor".into(), "node".into(), "op".into()];
    if single {
        header.extend(["EP", "SQNR dB", "cosine", "max abs err", ""].map(String::from));
    } else {
        header.extend(report.targets.iter().map(|t| format!("SQNR dB {}", target_label(t))));
    }
    let rows: Vec<Vec<String>> = report
        .layers
        .iter()
        .enumerate()
        .map(|(i, layer)| {
            let mut row =
                vec![(i + 1).to_string(), layer.id.tensor.clone(), layer.id.node.clone(), layer.id.op_type.clone()];
            let cell = |r: &super::report::LayerResult| {
                let value = r
                    .metrics
                    .map_or_else(|| r.error.clone().unwrap_or_else(|| "-".into()), |m| fmt_metric(m.sqnr_db, 1));
                if r.divergence_origin {
                    format!("{value} ◀")
                } else {
                    value
                }
            };
            if single {
                let r = &layer.results[0];
                row.push(r.ep.as_deref().map(short_ep).unwrap_or("-").to_string());
                row.push(cell(r));
                row.push(r.metrics.map_or_else(|| "-".into(), |m| fmt_metric(m.cosine, 6)));
                row.push(r.metrics.map_or_else(|| "-".into(), |m| format!("{:.3e}", m.max_abs_err)));
                row.push(if r.divergence_origin { ORIGIN_MARK.into() } else { String::new() });
            } else {
                row.extend(layer.results.iter().map(cell));
            }
            row
        })
        .collect();
    let numeric: Vec<usize> =
        if single { vec![0, 5, 6, 7] } else { (0..header.len()).filter(|&c| c == 0 || c >= 4).collect() };
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let target_rows: Vec<Vec<String>> = report
        .targets
        .iter()
        .map(|t| {
            let placement = t.placement.as_ref().map_or_else(|| "-".into(), placement_text);
            let drop = t.largest_drop.as_ref().map_or_else(
                || "-".into(),
                |d| format!("{} ({}): {:.1} → {:.1} dB", d.node, d.op_type, d.from_db, d.to_db),
            );
            vec![
                t.name.clone(),
                t.device.clone(),
                t.soc.clone(),
                short_ep(&t.ep).to_string(),
                placement,
                drop,
                t.outcome.label().to_string(),
            ]
        })
        .collect();
    let unmatched_rows: Vec<Vec<String>> = report
        .unmatched
        .iter()
        .map(|u| {
            vec![
                side_label(u.side).into(),
                u.tensor.clone(),
                u.node.clone(),
                u.op_type.clone(),
                u.reason.describe().into(),
            ]
        })
        .collect();
    let body = html! {
        section {
            h1 { (page::badge(report.outcome)) "Where the numbers go wrong: " (file_name(&report.header.model.path)) }
            p { "Against " (file_name(&report.header.reference.path)) " (fp32, host CPU EP, same inputs); " (report.layers.len())
                " matched layers; divergence threshold " (report.header.min_sqnr_db) " dB SQNR." }
            ul {
                @for (outcome, line) in verdict_lines(report) { li class=[(outcome == Outcome::Fail).then_some("err")] { (outcome.label()) " " (line) } }
                @for line in drop_lines(report) { li { (line) } }
                @for line in pair_lines(report) { li { "between targets: " (line) } }
            }
        }
        section { h2 { "SQNR per layer" } figure { (sqnr_plot(report)) figcaption { "Open circles on the top edge: above the axis, or identical to the reference (∞ dB); NaN on the bottom edge." } } }
        section { h2 { "Layers" } (page::table(&header_refs, &rows, &numeric)) }
        section {
            h2 { "Targets" }
            (page::table(&["target", "device", "SoC", "EP", "placement of the instrumented model", "largest SQNR drop", "outcome"], &target_rows, &[]))
            p.muted { (report.header.instrumentation.note) }
        }
        @if !unmatched_rows.is_empty() {
            section { h2 { "Not compared" } (page::table(&["model", "tensor", "node", "op", "why"], &unmatched_rows, &[])) }
        }
    };
    page::page(&title, body, &format!("{} · generated by npugate numerics", report.schema))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::three_targets;

    #[test]
    fn the_cross_target_table_shows_where_each_target_drifts() {
        let report = three_targets();
        let text = text(&report, false);
        let row = |tensor: &str| {
            text.lines().find(|l| l.split_whitespace().nth(1) == Some(tensor)).unwrap_or_else(|| panic!("{text}"))
        };
        assert!(text.contains("a (a-soc)") && text.contains("c (c-soc)"), "{text}");
        assert_eq!(
            row("r").split_whitespace().collect::<Vec<_>>(),
            ["2", "r", "relu", "(Relu)", "40.0", "8.0", "◀", "45.0"]
        );
        assert!(row("y").ends_with("NaN ◀"), "{text}");
        assert!(text.contains("PASS no divergence on a (a-soc)"), "{text}");
        assert!(text.contains("FAIL first divergence on b (b-soc): relu (Relu) → r: 8.0 dB < 20 dB"), "{text}");
        assert!(text.contains("while its inputs were above: c ∞ dB"), "{text}");
    }

    #[test]
    fn the_page_plots_every_target_and_escapes_names() {
        let mut report = three_targets();
        report.layers[0].id.tensor = "a<b>/c:0".into();
        let html = html(&report);
        assert!(html.starts_with("<!DOCTYPE html>") && html.contains("a&lt;b&gt;/c:0"), "names are escaped");
        assert_eq!(html.matches("<polyline").count(), 3, "one series per target");
        assert!(html.contains("first divergence: relu (Relu)") && html.contains("threshold 20 dB"));
        assert!(html.contains("SQNR dB b (b-soc)"));
    }
}
