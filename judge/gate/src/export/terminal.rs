//! Aligned text for a terminal, coloured only when asked (the caller decides: TTY and no `NO_COLOR`).
//! Also renders a placement report alone, for `npugate placement`, and the cross-device output
//! consistency table, for `npugate outputs compare`.

use comfy_table::{presets, CellAlignment, Table};
use npugate_profile::report::{PlacementReport, Totals};

use super::consistency::{self, DeviceOutputs};
use super::{
    compare_estimate_rows, difference_rows, ep_rows, fallback_rows, latency_rows, limit_text, measured_text,
    placement_side_rows, qnn_op_rows, qnn_ops_line, resource_rows, round_rows, shape_lines, COMPARE_ESTIMATE_HEADER,
    DIFFERENCE_HEADER, EP_HEADER, FALLBACK_HEADER, PLACEMENT_SIDE_HEADER, QNN_OP_HEADER, RESOURCE_HEADER, ROUND_HEADER,
};
use crate::compare::CompareVerdict;
use crate::confirm::{Confirmation, ATTEMPT_HEADER};
use crate::rules::Rules;
use crate::units::{fmt_ms, fmt_ms_from_us, fmt_pct};
use crate::verdict::{Check, CheckStatus, GenerationSummary, Outcome, Verdict, NO_RULES};

/// ANSI style of failures ([`paint`]).
pub const RED: &str = "31";
/// ANSI style of passes.
pub const GREEN: &str = "32";
/// ANSI style of warnings and unjudged checks.
pub const YELLOW: &str = "33";
/// ANSI style of headings.
pub const BOLD: &str = "1";
/// ANSI style of table headers.
pub const DIM: &str = "2";

/// Wraps text in an ANSI style (`31` red, `1` bold, …) when colour is on.
pub fn paint(color: bool, style: &str, text: &str) -> String {
    if color {
        format!("\x1b[{style}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// Columns two spaces apart, indented by two, right-aligned where `numeric`, sized by display
/// width (wide characters count double, colour codes not at all); the header dimmed when `color`.
/// Every terminal table of npugate is drawn by it.
pub fn text_table<R: AsRef<[String]>>(header: &[&str], rows: &[R], numeric: &[bool], color: bool) -> String {
    let mut table = Table::new();
    table.load_preset(presets::NOTHING).force_no_tty().set_header(header);
    for row in rows {
        table.add_row(row.as_ref().iter().map(String::as_str));
    }
    for (column, &right) in table.column_iter_mut().zip(numeric) {
        column.set_padding((0, 2));
        if right {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = String::new();
    for (index, line) in table.lines().enumerate() {
        let line = format!("  {}", line.trim_end());
        out.push_str(&if index == 0 { paint(color, DIM, &line) } else { line });
        out.push('\n');
    }
    out
}

/// The cross-device output table as aligned terminal text; the outlier's rows in red when `color`.
pub fn consistency_text(model: &str, devices: &[DeviceOutputs], color: bool) -> String {
    let (rows, outlier) = consistency::rows(devices, |cell| paint(color, RED, cell));
    format!(
        "{} {model} against the reference\n{}{}{}",
        paint(color, BOLD, "Output consistency"),
        text_table(&consistency::HEADER, &rows, &consistency::NUMERIC, color),
        consistency::token_lines("  ", devices),
        consistency::outlier_line("  ", devices, outlier)
    )
}

/// The placement report as text: per-EP table, partitions, boundaries and the fallback list with hints.
pub fn placement_text(report: &PlacementReport, rules: &Rules, color: bool) -> String {
    let mut out = placement_summary_text(report, color);
    out.push_str(&text_table(&EP_HEADER, &ep_rows(report), &[false, true, true, true, true, true, true], color));
    out.push_str(&partitions_text(report, color));
    out.push_str(&qnn_ops_text(report, color));
    out.push_str(&boundaries_text(report, color));
    out.push_str(&fallback_text(report, rules, color));
    for warning in &report.warnings {
        out.push_str(&format!("  {}\n", paint(color, YELLOW, &format!("warning: {warning}"))));
    }
    out
}

/// The placement heading: preferred EP's shares, FLOPs coverage, compiled-model and prediction notes.
fn placement_summary_text(report: &PlacementReport, color: bool) -> String {
    let mut out = format!(
        "{} preferred EP {}: {:.1}% of FLOPs, {:.1}% of nodes{}\n",
        paint(color, BOLD, "Placement"),
        report.preferred_ep,
        report.preferred_flops_pct,
        report.preferred_nodes_pct,
        report.preferred_time_pct.map(|t| format!(", {t:.1}% of kernel time")).unwrap_or_default()
    );
    out.push_str(&format!("  {}\n", flops_coverage(&report.totals)));
    if let Some(compiled) = &report.compiled {
        let line = match &compiled.source_model {
            Some(source) => format!(
                "compiled model, counted in the nodes of its source model {source}; EPContext nodes attributed by {}",
                compiled.attribution.describe()
            ),
            None => format!("compiled model; EPContext nodes attributed by {}", compiled.attribution.describe()),
        };
        let unattributed = compiled.attribution == npugate_result::Attribution::Unattributed;
        out.push_str(&format!("  {}\n", if unattributed { paint(color, YELLOW, &line) } else { line }));
    }
    if let Some(predicted) = &report.predicted {
        out.push_str(&format!("  {}\n", paint(color, YELLOW, predicted)));
    }
    out
}

/// The partitions section: one line per partition with its EP, size, FLOPs, time and first/last node.
fn partitions_text(report: &PlacementReport, color: bool) -> String {
    let mut out = format!("\n{} ({})\n", paint(color, BOLD, "Partitions"), report.partitions.len());
    for (i, p) in report.partitions.iter().enumerate() {
        let time = p.time.as_ref().map(|t| format!(", {}/run", fmt_ms_from_us(t.median_us))).unwrap_or_default();
        let span = match (p.nodes.first(), p.nodes.last()) {
            (Some(first), Some(last)) if p.nodes.len() > 1 => format!(": {first} … {last}"),
            (Some(only), _) => format!(": {only}"),
            _ => String::new(),
        };
        let label = match (&p.graph, &p.phase) {
            (Some(graph), Some(phase)) => format!(" [{graph}, {phase}]"),
            _ => String::new(),
        };
        out.push_str(&format!(
            "  #{}{label} {} — {} nodes, {:.3} GFLOPs{time}{span}\n",
            i + 1,
            p.ep,
            p.nodes.len(),
            p.flops as f64 / 1e9
        ));
    }
    out
}

/// The boundaries section: EP switches per run, the idle time at them, and each transition.
fn boundaries_text(report: &PlacementReport, color: bool) -> String {
    let b = &report.boundaries;
    let per_run = b.per_run.iter().copied().max().unwrap_or(b.transitions.len());
    let cost = match (b.gap_us_per_run, b.same_ep_gap_us) {
        (Some(gap), Some(same)) => format!(
            ", {} idle at them (consecutive kernels of one EP: {} apart)",
            fmt_ms_from_us(gap),
            fmt_ms_from_us(same)
        ),
        (Some(gap), None) => format!(", {} idle at them", fmt_ms_from_us(gap)),
        (None, _) => String::new(),
    };
    let mut out = format!("\n{} {per_run} EP switch(es) per run{cost}\n", paint(color, BOLD, "Boundaries"));
    for t in &b.transitions {
        let gap = t.gap_us.map(|us| format!(" ({} idle)", fmt_ms_from_us(us))).unwrap_or_default();
        out.push_str(&format!("  {} → {} between {} and {}{gap}\n", t.from_ep, t.to_ep, t.after, t.before));
    }
    out
}

/// The fallback section: the count, the rejection causes, the fallback table and the first reasons/hints.
fn fallback_text(report: &PlacementReport, rules: &Rules, color: bool) -> String {
    let expected = report.fallback.iter().filter(|f| f.expected).count();
    let mut out = format!(
        "\n{} {} node(s) off {}, {expected} expected by design\n",
        paint(color, BOLD, "Fallback"),
        report.fallback.len(),
        report.preferred_ep
    );
    for cause in &report.rejections {
        let ops = if cause.op_types.len() > 3 {
            format!("{}, …", cause.op_types[..3].join(", "))
        } else {
            cause.op_types.join(", ")
        };
        out.push_str(&format!("  {} ({ops})\n", paint(color, YELLOW, &cause.describe())));
    }
    if report.fallback.is_empty() {
        return out;
    }
    let rows: Vec<[String; 6]> = fallback_rows(report, rules)
        .into_iter()
        .map(|r| [r[0].clone(), r[1].clone(), r[2].clone(), r[3].clone(), r[4].clone(), r[5].clone()])
        .collect();
    let header = [0, 1, 2, 3, 4, 5].map(|i| FALLBACK_HEADER[i]);
    out.push_str(&text_table(&header, &rows, &[false, false, false, true, true, false], color));
    // The causes above sum up the rest of a long list.
    const EXPLAINED: usize = 10;
    let explained: Vec<_> = report.fallback.iter().filter(|f| f.reason.is_some() || f.hint.is_some()).collect();
    if explained.len() > EXPLAINED {
        out.push_str(&format!(
            "  (reasons of the first {EXPLAINED} of {} nodes; the causes above cover them all)\n",
            explained.len()
        ));
    }
    for f in explained.into_iter().take(EXPLAINED) {
        out.push_str(&format!("  {}:\n", f.name));
        if let Some(reason) = &f.reason {
            out.push_str(&format!("    reason: {reason}\n"));
        }
        if let Some(hint) = &f.hint {
            out.push_str(&format!("    {}\n", paint(color, YELLOW, &format!("hint: {hint}"))));
        }
    }
    out
}

/// The QNN ops, most expensive first: the model nodes each came from and its time (the first
/// [`SHOWN_OPS`]; `placement.json` and the HTML report list them all).
fn qnn_ops_text(report: &PlacementReport, color: bool) -> String {
    const SHOWN_OPS: usize = 12;
    let Some(line) = qnn_ops_line(report) else { return String::new() };
    let ops = report.qnn_ops.as_ref().map_or(0, |s| s.ops);
    let mut out = format!("\n{} {line}\n", paint(color, BOLD, "QNN ops"));
    out.push_str(&text_table(
        &QNN_OP_HEADER,
        &qnn_op_rows(report, SHOWN_OPS, 3),
        &[false, false, false, true, true],
        color,
    ));
    if ops > SHOWN_OPS {
        out.push_str(&format!("  … {} more in placement.json and report.html\n", ops - SHOWN_OPS));
    }
    out
}

/// `FLOPs: 2.507 G in 69 of 69 model nodes; the shares cover 100.0% of them` — and what is
/// outside the shares: unattributed FLOPs, nodes of unknown FLOPs, nodes folded away or not run.
pub(crate) fn flops_coverage(t: &Totals) -> String {
    let nodes = match t.model_nodes {
        Some(model) => format!("{} of {model} model nodes", t.nodes),
        None => format!("{} nodes", t.nodes),
    };
    let mut line = format!(
        "FLOPs: {:.3} G in {nodes}; the shares cover {:.1}% of the model's FLOPs",
        t.flops as f64 / 1e9,
        t.flops_covered_pct
    );
    if t.unattributed_nodes > 0 {
        line.push_str(&format!(
            "; {:.3} GFLOPs in {} node(s) could not be attributed to an EP",
            t.unattributed_flops as f64 / 1e9,
            t.unattributed_nodes
        ));
    }
    if t.flops_unknown_nodes > 0 {
        line.push_str(&format!("; FLOPs unknown for {} node(s)", t.flops_unknown_nodes));
        if let Some(estimate) = t.flops_unknown_estimate {
            line.push_str(&format!(
                " (about {:.3} G at the model's rate in the CPU reference pass, counted in the coverage)",
                estimate as f64 / 1e9
            ));
        }
    }
    if t.folded_nodes > 0 {
        line.push_str(&format!("; {} node(s) folded away at load", t.folded_nodes));
    }
    if t.not_run_nodes > 0 {
        line.push_str(&format!("; {} node(s) in branches not taken", t.not_run_nodes));
    }
    line
}

/// A run's verdict as terminal text.
pub(super) fn verdict(v: &Verdict, color: bool) -> String {
    let c = color;
    let mut out = format!(
        "{} {} — {}\n\n",
        paint(c, BOLD, &format!("{}:", v.title())),
        paint(c, &format!("{BOLD};{}", outcome_style(v.outcome)), v.outcome.label()),
        v.subject.summary()
    );
    if let Some(confirmation) = &v.confirmation {
        out.push_str(&confirmation_text(confirmation, c));
    }
    if let Some(generation) = &v.generation {
        out.push_str(&generation_text(generation, v.placement.as_ref(), c));
    }
    if let Some(s) = &v.latency {
        let title = if v.generation.is_some() { "Latency (each decode step)" } else { "Latency" };
        out.push_str(&format!("{}\n", paint(c, BOLD, title)));
        let rows: Vec<[String; 2]> = latency_rows(v, s).into_iter().map(|(k, val)| [k.to_string(), val]).collect();
        out.push_str(&text_table(&["estimate", "value"], &rows, &[false, true], c));
        for line in shape_lines(s) {
            out.push_str(&format!("  {line}\n"));
        }
        out.push('\n');
    }
    let resources = resource_rows(v);
    if !resources.is_empty() {
        out.push_str(&format!("{}\n", paint(c, BOLD, "Memory and energy")));
        out.push_str(&text_table(&RESOURCE_HEADER, &resources, &[false, false], c));
        out.push('\n');
    }
    if let Some(report) = &v.placement {
        out.push_str(&placement_text(report, &v.rules, c));
        if let Some(note) = super::profiled_time_note(v, report) {
            out.push_str(&format!("{}\n", paint(c, DIM, &note)));
        }
        out.push('\n');
    }
    if let Some((model, devices)) = consistency::verdict_outputs(v) {
        out.push_str(&consistency_text(&model, &devices, c));
        out.push('\n');
    }
    if let Some(b) = &v.baseline {
        out.push_str(&format!("{} {}", paint(c, BOLD, "Baseline"), b.source));
        if let Some(r) = &b.median_ratio {
            out.push_str(&format!(": median {:.3}× (95% CI {:.3}–{:.3}×)", r.ratio, r.ci.lower, r.ci.upper));
        }
        if b.forced {
            out.push_str(&format!(" — {}", paint(c, YELLOW, "forced across different fingerprints")));
        }
        out.push_str("\n\n");
    }
    match v.outcome {
        Outcome::Measured => {
            out.push_str(&format!("{}\n  {NO_RULES}\n{}", paint(c, BOLD, "Rules"), notes(&v.errors, &v.warnings, c)))
        }
        _ => out.push_str(&rules_and_notes(&v.checks, &v.errors, &v.warnings, c)),
    }
    out
}

/// A comparison of two models as terminal text.
pub(super) fn compare(v: &CompareVerdict, color: bool) -> String {
    let c = color;
    let ttft = v.ttft_sentence().map(|s| format!("  {s}\n")).unwrap_or_default();
    let mut out = format!(
        "{} {} — {}\n  {}\n{ttft}\n",
        paint(c, BOLD, "npugate compare:"),
        paint(c, &format!("{BOLD};{}", outcome_style(v.outcome)), v.outcome.label()),
        v.summary(),
        v.paired_sentence()
    );
    if let Some(confirmation) = &v.confirmation {
        out.push_str(&confirmation_text(confirmation, c));
    }
    out.push_str(&format!(
        "{} (ABBA order; each round a fresh harness session, cold runs excluded)\n",
        paint(c, BOLD, "Rounds")
    ));
    out.push_str(&text_table(&ROUND_HEADER, &round_rows(v), &[true, false, true, true, true], c));
    out.push_str(&format!("\n{} the clean timed runs of every round\n", paint(c, BOLD, "Latency")));
    out.push_str(&text_table(&COMPARE_ESTIMATE_HEADER, &compare_estimate_rows(v), &[false, true, true], c));
    out.push_str(&format!("\n{}\n", paint(c, BOLD, "Placement")));
    out.push_str(&text_table(&PLACEMENT_SIDE_HEADER, &placement_side_rows(v), &[false, true, true], c));
    if v.placement_differences.is_empty() {
        out.push_str("  every node runs on the same EP in both\n");
    } else {
        out.push_str(&format!("  {} node(s) run on another EP in the candidate:\n", v.placement_differences.len()));
        out.push_str(&text_table(
            &DIFFERENCE_HEADER,
            &difference_rows(v),
            &[false, false, false, false, true, false],
            c,
        ));
    }
    out.push('\n');
    out.push_str(&rules_and_notes(&v.checks, &v.errors, &v.warnings, c));
    out
}

/// An LLM folder's generation: TTFT, tokens per second, the KV cache and each graph's share.
fn generation_text(g: &GenerationSummary, placement: Option<&PlacementReport>, c: bool) -> String {
    let mut out = format!(
        "{} ({}, {}-token prompt, {} decode steps, {} generations)\n",
        paint(c, BOLD, "Generation"),
        g.layout,
        g.prompt_tokens,
        g.gen_tokens,
        g.generations
    );
    let stats = |s: &Option<crate::stats::LatencyStats>| {
        s.as_ref().map_or("—".into(), |s| {
            format!(
                "median {} (95% CI {}–{}), CV {}",
                fmt_ms(s.median_ns),
                fmt_ms(s.median_ci.lower),
                fmt_ms(s.median_ci.upper),
                fmt_pct(s.cv_pct)
            )
        })
    };
    let mut rows = vec![
        ["time to first token".to_string(), stats(&g.ttft)],
        ["decode step".to_string(), stats(&g.decode)],
        ["prefill".to_string(), format!("{:.1} tok/s", g.prefill_tok_s)],
        ["decode".to_string(), format!("{:.1} tok/s", g.decode_tok_s)],
        [
            "KV cache".to_string(),
            format!("{} bytes at the end ({}, {} copies per step)", g.kv.bytes, g.kv.mode, g.kv.copies_per_step),
        ],
    ];
    if let Some(threads) = &g.threads {
        let inter = threads.inter_op.map_or(String::new(), |n| format!(", {n} inter-op"));
        let intra = match threads.intra_op {
            0 => "ONNX Runtime's default intra-op".to_string(),
            n => format!("{n} intra-op"),
        };
        rows.push(["threads".to_string(), format!("{intra}{inter} ({})", threads.source)]);
    }
    if let Some(rss) = g.peak_rss_bytes {
        rows.push(["peak RSS".to_string(), format!("{:.1} MiB", rss as f64 / (1024.0 * 1024.0))]);
    }
    for graph in placement.map(|p| p.graphs.as_slice()).unwrap_or_default() {
        rows.push([
            format!("{} ({}, ×{})", graph.graph, graph.phase, graph.runs),
            format!(
                "{} of FLOPs, {} of nodes on the preferred EP; {} fallback node(s)",
                fmt_pct(graph.preferred_flops_pct),
                fmt_pct(graph.preferred_nodes_pct),
                graph.fallback_nodes
            ),
        ]);
    }
    out.push_str(&text_table(&["measure", "value"], &rows, &[false, false], c));
    out.push('\n');
    out
}

/// The terminal colour of an outcome's label.
pub fn outcome_style(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Pass => GREEN,
        Outcome::Fail => RED,
        Outcome::Error | Outcome::NotJudged => YELLOW,
        Outcome::Measured => DIM,
    }
}

/// The attempts of a confirmed run, with the decision.
fn confirmation_text(confirmation: &Confirmation, c: bool) -> String {
    let style = outcome_style(confirmation.outcome);
    format!(
        "{} {}\n{}\n",
        paint(c, BOLD, "Confirmation"),
        paint(c, style, &confirmation.sentence()),
        text_table(&ATTEMPT_HEADER, &confirmation.rows(), &[false; 5], c)
    )
}

/// The rules table, then the errors and warnings.
fn rules_and_notes(checks: &[Check], errors: &[String], warnings: &[String], c: bool) -> String {
    let mut out = format!("{}\n", paint(c, BOLD, "Rules"));
    let rows: Vec<[String; 5]> = checks
        .iter()
        .map(|ch| {
            let style = match ch.status {
                CheckStatus::Pass => GREEN,
                CheckStatus::Fail => RED,
                CheckStatus::Unjudged | CheckStatus::NotJudged => YELLOW,
                CheckStatus::NotApplicable => DIM,
            };
            let label = paint(c, style, ch.status.label());
            [label, ch.rule.to_string(), measured_text(ch), limit_text(ch), ch.message.clone()]
        })
        .collect();
    out.push_str(&text_table(
        &["status", "rule", "measured", "limit", "detail"],
        &rows,
        &[false, false, true, true, false],
        c,
    ));
    out + &notes(errors, warnings, c)
}

/// The errors and warnings under a report's rules, one line each.
fn notes(errors: &[String], warnings: &[String], c: bool) -> String {
    let errors = errors.iter().map(|error| format!("{}\n", paint(c, RED, &format!("error: {error}"))));
    let warnings = warnings.iter().map(|warning| format!("{}\n", paint(c, YELLOW, &format!("warning: {warning}"))));
    errors.chain(warnings).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_by_display_width_ignoring_colour_codes() {
        let rows = [["小米 14".to_string(), "1".into()], [paint(true, RED, "ab"), "22".into()]];
        let text = text_table(&["device", "n"], &rows, &[false, true], false);
        assert_eq!(text, "  device    n\n  小米 14   1\n  \x1b[31mab\x1b[0m       22\n");
    }
}
