//! Markdown for `$GITHUB_STEP_SUMMARY` or a pull-request comment (GitHub-flavoured tables), and
//! the cross-device output consistency table as Markdown.

use super::consistency::{self, DeviceOutputs};
use super::{
    compare_estimate_rows, difference_rows, ep_rows, fallback_rows, latency_rows, limit_text, measured_text,
    placement_side_rows, qnn_op_rows, qnn_ops_line, resource_rows, round_rows, shape_lines, COMPARE_ESTIMATE_HEADER,
    DIFFERENCE_HEADER, EP_HEADER, FALLBACK_HEADER, PLACEMENT_SIDE_HEADER, QNN_OP_HEADER, RESOURCE_HEADER, ROUND_HEADER,
};
use crate::compare::CompareVerdict;
use crate::confirm::{Confirmation, ATTEMPT_HEADER};
use crate::verdict::{Check, CheckStatus, Outcome, Verdict, NO_RULES};

/// Escapes a table cell: pipes, newlines.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', "<br>")
}

/// A GitHub-flavoured table; cells are escaped (pipes, newlines). Also used by the sweep's
/// `matrix.md`.
pub fn table<R: AsRef<[String]>>(header: &[&str], rows: &[R]) -> String {
    let mut out = format!("| {} |\n|{}\n", header.join(" | "), "---|".repeat(header.len()));
    for row in rows {
        let cells: Vec<String> = row.as_ref().iter().map(|c| cell(c)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

/// The cross-device output table as GitHub-flavoured Markdown; the outlier's rows in bold.
pub fn consistency_markdown(model: &str, devices: &[DeviceOutputs]) -> String {
    consistency_section("##", model, devices)
}

/// The output table under a heading of the given level (`##`, `###`).
fn consistency_section(heading: &str, model: &str, devices: &[DeviceOutputs]) -> String {
    let (rows, outlier) = consistency::rows(devices, |cell| format!("**{cell}**"));
    format!(
        "{heading} Output consistency: `{}` against the reference\n\n{}{}{}",
        cell(model),
        table(&consistency::HEADER, &rows),
        consistency::token_lines("\n", devices),
        consistency::outlier_line("\n", devices, outlier)
    )
}

/// The heading icon of an outcome.
fn icon(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Pass => "✅",
        Outcome::Fail => "❌",
        Outcome::Error => "⚠️",
        Outcome::NotJudged => "⏸️",
        Outcome::Measured => "📏",
    }
}

/// The rules table, then the errors and warnings.
fn rules_and_notes(checks: &[Check], errors: &[String], warnings: &[String]) -> String {
    let rows: Vec<[String; 5]> = checks
        .iter()
        .map(|c| {
            let status = match c.status {
                CheckStatus::Pass => "✅ pass",
                CheckStatus::Fail => "❌ fail",
                CheckStatus::Unjudged => "⚠️ unjudged",
                CheckStatus::NotJudged => "⏸️ not judged",
                CheckStatus::NotApplicable => "➖ not applicable",
            };
            [status.to_string(), format!("`{}`", c.rule), measured_text(c), limit_text(c), c.message.clone()]
        })
        .collect();
    table(&["status", "rule", "measured", "limit", "detail"], &rows) + &notes(errors, warnings)
}

/// The errors (quoted) and the warnings (a list) under a report's rules.
fn notes(errors: &[String], warnings: &[String]) -> String {
    let mut out: String = errors.iter().map(|error| format!("\n> **Error:** {}\n", cell(error))).collect();
    if !warnings.is_empty() {
        out.push('\n');
        for warning in warnings {
            out.push_str(&format!("- ⚠️ {}\n", cell(warning)));
        }
    }
    out
}

/// The attempts of a confirmed run, with the decision.
fn confirmation_section(confirmation: &Confirmation) -> String {
    format!(
        "**Confirmation:** {}\n\n{}\n",
        cell(&confirmation.sentence()),
        table(&ATTEMPT_HEADER, &confirmation.rows())
    )
}

/// A run's verdict as Markdown.
pub(super) fn verdict(v: &Verdict) -> String {
    let (icon, title, outcome) = (icon(v.outcome), v.title(), v.outcome.label());
    let mut out = format!("## {icon} {title}: {outcome}\n\n{}\n\n", cell(&v.subject.summary()));
    if let Some(confirmation) = &v.confirmation {
        out.push_str(&confirmation_section(confirmation));
    }
    match v.outcome {
        Outcome::Measured => out.push_str(&format!("**Rules:** {}\n{}", cell(NO_RULES), notes(&v.errors, &v.warnings))),
        _ => out.push_str(&rules_and_notes(&v.checks, &v.errors, &v.warnings)),
    }
    if let Some(s) = &v.latency {
        let (names, values): (Vec<&str>, Vec<String>) = latency_rows(v, s).into_iter().unzip();
        out.push_str(&format!("\n### Latency\n\n{}", table(&names, &[values])));
        for line in shape_lines(s) {
            out.push_str(&format!("\n- {}", cell(&line)));
        }
        out.push('\n');
    }
    let resources = resource_rows(v);
    if !resources.is_empty() {
        out.push_str(&format!("\n### Memory and energy\n\n{}", table(&RESOURCE_HEADER, &resources)));
    }
    if let Some(report) = &v.placement {
        out.push_str(&format!("\n### Placement (preferred EP `{}`)\n\n", report.preferred_ep));
        out.push_str(&table(&EP_HEADER, &ep_rows(report)));
        out.push_str(&format!("\n{}\n", cell(&super::terminal::flops_coverage(&report.totals))));
        if let Some(line) = qnn_ops_line(report) {
            out.push_str(&format!("\n<details><summary>QNN ops: {}</summary>\n\n", cell(&line)));
            out.push_str(&table(&QNN_OP_HEADER, &qnn_op_rows(report, usize::MAX, usize::MAX)));
            out.push_str("\n</details>\n");
        }
        if !report.fallback.is_empty() {
            out.push_str(&format!(
                "\n<details><summary>{} node(s) off {}</summary>\n\n",
                report.fallback.len(),
                report.preferred_ep
            ));
            for cause in &report.rejections {
                out.push_str(&format!("- {}\n", cause.describe()));
            }
            if !report.rejections.is_empty() {
                out.push('\n');
            }
            out.push_str(&table(&FALLBACK_HEADER, &fallback_rows(report, &v.rules)));
            out.push_str("\n</details>\n");
        }
    }
    if let Some((model, devices)) = consistency::verdict_outputs(v) {
        out.push('\n');
        out.push_str(&consistency_section("###", &model, &devices));
    }
    if let Some(b) = &v.baseline {
        out.push_str(&format!("\n### Baseline `{}`\n\n", cell(&b.source)));
        if let Some(r) = &b.median_ratio {
            out.push_str(&format!("- median ratio {:.3}× (95% CI {:.3}–{:.3}×)\n", r.ratio, r.ci.lower, r.ci.upper));
        }
        for d in &b.fingerprint_differences {
            out.push_str(&format!("- fingerprint: {}\n", cell(d)));
        }
        for node in &b.moved_off_preferred {
            out.push_str(&format!("- {}\n", cell(&node.describe())));
        }
    }
    out
}

/// A comparison of two models as Markdown.
pub(super) fn compare(v: &CompareVerdict) -> String {
    let mut out = format!(
        "## {} npugate compare: {}\n\n{}\n\n**{}**\n\n",
        icon(v.outcome),
        v.outcome.label(),
        cell(&v.summary()),
        cell(&v.paired_sentence())
    );
    if let Some(confirmation) = &v.confirmation {
        out.push_str(&confirmation_section(confirmation));
    }
    out.push_str(&rules_and_notes(&v.checks, &v.errors, &v.warnings));
    out.push_str("\n### Rounds (ABBA order, each a fresh harness session)\n\n");
    out.push_str(&table(&ROUND_HEADER, &round_rows(v)));
    out.push_str("\n### Latency (the clean timed runs of every round)\n\n");
    out.push_str(&table(&COMPARE_ESTIMATE_HEADER, &compare_estimate_rows(v)));
    out.push_str("\n### Placement\n\n");
    out.push_str(&table(&PLACEMENT_SIDE_HEADER, &placement_side_rows(v)));
    if v.placement_differences.is_empty() {
        out.push_str("\nEvery node runs on the same EP in both.\n");
    } else {
        out.push_str(&format!("\n{} node(s) run on another EP in the candidate:\n\n", v.placement_differences.len()));
        out.push_str(&table(&DIFFERENCE_HEADER, &difference_rows(v)));
    }
    out
}
