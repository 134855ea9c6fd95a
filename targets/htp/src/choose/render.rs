//! `npugate choose`'s report as text: the SoC × variant grid with the chosen cell marked, then each
//! SoC's choice and why — for the terminal, Markdown and an HTML page.

use maud::{html, Markup, DOCTYPE};

use npugate_result::report::{json_of, Report};

use super::report::{Cell, ChooseReport};

/// One cell of the grid: `* ~1.20 ms, top-1 100%` for the chosen one, `✗ 2 nodes off the HTP`, ….
fn cell_text(cell: &Cell, chosen: bool) -> String {
    let mark = if chosen { "* " } else { "" };
    if cell.not_judged {
        return "not judged".into();
    }
    if !cell.compiled {
        return "✗ does not compile".into();
    }
    if !cell.off_htp.is_empty() {
        return format!("✗ {} node(s) off the HTP", cell.off_htp.len());
    }
    if !cell.whole {
        return format!("✗ {}", cell.error.as_deref().unwrap_or("did not run"));
    }
    let accuracy = match &cell.accuracy {
        Some(accuracy) => {
            let figures: Vec<String> = accuracy
                .outputs
                .iter()
                .map(|o| {
                    let sqnr = o.sqnr_db.map_or_else(|| "exact".into(), |db| format!("{db:.1} dB"));
                    match o.top1_pct {
                        Some(top1) => format!("{sqnr} top-1 {top1:.0}%"),
                        None => sqnr,
                    }
                })
                .collect();
            let verdict = if accuracy.meets { "" } else { "✗ " };
            format!("{verdict}{}", figures.join(" "))
        }
        None => "outputs not compared".into(),
    };
    let speed = cell.estimate_ms.map_or_else(|| "no estimate".into(), |ms| format!("~{ms:.2} ms"));
    format!("{mark}{speed}, {accuracy}")
}

/// The grid's rows: a header of variants, then one row per SoC.
fn grid(report: &ChooseReport) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header = vec!["SOC".to_string()];
    header.extend(report.variants.iter().map(|v| format!("{} ({})", v.name, human_size(v.bytes))));
    let rows = report
        .choices
        .iter()
        .map(|choice| {
            let mut row = vec![format!("{} ({})", choice.soc, choice.htp_arch)];
            for variant in &report.variants {
                let cell = report.cells.iter().find(|c| c.soc == choice.soc && c.variant == variant.name);
                let chosen = choice.variant.as_deref() == Some(variant.name.as_str());
                row.push(cell.map_or_else(|| "-".into(), |cell| cell_text(cell, chosen)));
            }
            row
        })
        .collect();
    (header, rows)
}

/// `12.3 MB`.
fn human_size(bytes: u64) -> String {
    npugate_onnx::size::human_bytes(bytes)
}

/// The lines under the grid: each SoC's choice, the rule, the inputs and what the figures are.
fn notes(report: &ChooseReport) -> Vec<String> {
    let mut lines: Vec<String> = report
        .choices
        .iter()
        .map(|c| format!("{}: {} — {}", c.soc, c.variant.as_deref().unwrap_or("none"), c.why))
        .collect();
    lines.push(format!("accuracy rule: {}, against {} on this machine's CPU", report.rule.describe(), report.float));
    lines.push(format!("inputs: {}", report.inputs));
    lines.push(format!(
        "outputs and placement: Qualcomm's HTP backend (QNN {}) on its x86_64 emulator per SoC; latency: {}",
        report.qnn_sdk, report.estimate_label
    ));
    let cached = report.cells.iter().filter(|c| c.cached).count();
    if cached > 0 {
        lines.push(format!(
            "{cached} of {} cell(s) read from the cache (unchanged variant, SoC and QNN build)",
            report.cells.len()
        ));
    }
    lines
}

/// `npugate choose`'s finished result: [`terminal`], then each change since the baseline as a
/// `FAIL` line; its exit code its own.
impl Report for ChooseReport {
    fn schema(&self) -> &str {
        &self.schema
    }
    fn exit_code(&self) -> u8 {
        self.exit_code
    }
    fn text(&self, _color: bool) -> String {
        let changes = self.changes.iter().map(|change| format!("FAIL  since the baseline: {change}\n"));
        terminal(self) + &changes.collect::<String>()
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// The terminal text.
pub fn terminal(report: &ChooseReport) -> String {
    let (header, rows) = grid(report);
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut text = npugate_result::table::plain(&header, rows);
    text.push('\n');
    for line in notes(report) {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// The Markdown text.
pub fn markdown(report: &ChooseReport) -> String {
    let (header, rows) = grid(report);
    let escape = |cell: &str| cell.replace('|', "\\|");
    let mut text = format!("## npugate choose\n\n| {} |\n|{}\n", header.join(" | "), "---|".repeat(header.len()));
    for row in rows {
        text.push_str(&format!("| {} |\n", row.iter().map(|c| escape(c)).collect::<Vec<_>>().join(" | ")));
    }
    text.push_str("\n`*` chosen\n\n");
    for line in notes(report) {
        text.push_str(&format!("- {}\n", escape(&line)));
    }
    text
}

/// The HTML page.
pub fn html(report: &ChooseReport) -> Markup {
    let (header, rows) = grid(report);
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "npugate choose" }
                style { (STYLE) }
            }
            body {
                h1 { "npugate choose" }
                table {
                    thead { tr { @for cell in &header { th { (cell) } } } }
                    tbody {
                        @for row in &rows {
                            tr {
                                @for (i, cell) in row.iter().enumerate() {
                                    @let class = if cell.starts_with("* ") { "chosen" } else if cell.starts_with('✗') { "off" } else { "" };
                                    @if i == 0 { th { (cell) } } @else { td class=(class) { (cell) } }
                                }
                            }
                        }
                    }
                }
                p { "* chosen" }
                ul { @for line in notes(report) { li { (line) } } }
            }
        }
    }
}

/// The page's style: a grid that wraps within a 1280-px page.
const STYLE: &str = "body{font-family:sans-serif;max-width:1240px;margin:1em auto}\
table{border-collapse:collapse;table-layout:fixed;width:100%}\
th,td{border:1px solid #ccc;padding:4px 6px;overflow-wrap:anywhere;text-align:left;font-size:14px}\
td.chosen{background:#d9f2d9;font-weight:bold}td.off{color:#a33}";
