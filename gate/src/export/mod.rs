//! Exporters: one trait, one file per output format (as hyperfine does), and the rows every
//! human-facing format shares so they cannot disagree.

use std::fmt;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use profile_parser::report::PlacementReport;

use crate::outputs::fmt_metric;
use crate::stats::LatencyStats;
use crate::units::{fmt_limit, fmt_ms, fmt_ms_from_us, fmt_pct, Unit};
use crate::verdict::{Check, Verdict};

mod consistency;
mod github;
mod html;
mod json;
mod junit;
pub mod markdown;
mod terminal;

pub use consistency::DeviceOutputs;
pub use github::GithubExporter;
pub use html::HtmlExporter;
pub use json::JsonExporter;
pub use junit::JunitExporter;
pub use markdown::{consistency_markdown, MarkdownExporter};
pub use terminal::{consistency_text, paint, placement_text, text_table, TerminalExporter, BOLD, DIM, GREEN, RED, YELLOW};

/// Renders a verdict in one format.
pub trait Exporter {
    /// The complete document.
    fn render(&self, verdict: &Verdict) -> String;
}

/// The output formats of `npugate gate --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned text, coloured on a TTY.
    Terminal,
    /// `npugate.verdict/1` JSON.
    Json,
    /// Markdown for `$GITHUB_STEP_SUMMARY` or a PR comment.
    Markdown,
    /// GitHub Actions workflow commands (`::error title=…::…`).
    Github,
    /// JUnit XML, one test case per rule.
    Junit,
    /// Self-contained HTML report with inline SVG charts.
    Html,
}

impl Format {
    /// Every format, in documentation order.
    pub const ALL: [Format; 6] =
        [Format::Terminal, Format::Json, Format::Markdown, Format::Github, Format::Junit, Format::Html];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Terminal => "terminal",
            Format::Json => "json",
            Format::Markdown => "markdown",
            Format::Github => "github",
            Format::Junit => "junit",
            Format::Html => "html",
        }
    }

    /// File name used when several formats go to one directory.
    pub fn file_name(self) -> &'static str {
        match self {
            Format::Terminal => "verdict.txt",
            Format::Json => "verdict.json",
            Format::Markdown => "verdict.md",
            Format::Github => "verdict.github.txt",
            Format::Junit => "verdict.junit.xml",
            Format::Html => "verdict.html",
        }
    }

    /// The exporter for this format; `color` only affects the terminal format.
    pub fn exporter(self, color: bool) -> Box<dyn Exporter> {
        match self {
            Format::Terminal => Box::new(TerminalExporter { color }),
            Format::Json => Box::new(JsonExporter),
            Format::Markdown => Box::new(MarkdownExporter),
            Format::Github => Box::new(GithubExporter),
            Format::Junit => Box::new(JunitExporter),
            Format::Html => Box::new(HtmlExporter),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Format, String> {
        Format::ALL.into_iter().find(|f| f.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
            format!("unknown format {s:?}; use one of {}", names.join(", "))
        })
    }
}

/// Errors writing reports.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {source}")]
pub struct ExportError {
    /// Where the write failed (`<stdout>` for standard output).
    pub path: String,
    /// Cause.
    pub source: std::io::Error,
}

/// Every requested format rendered as one text for standard output, the terminal format coloured
/// when stdout is a TTY and `NO_COLOR` is unset.
pub fn render_for_stdout(verdict: &Verdict, formats: &[Format]) -> String {
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    formats.iter().map(|format| format.exporter(color).render(verdict)).collect()
}

/// Writes every requested format. Without `out` all go to standard output (the terminal format
/// coloured when stdout is a TTY and `NO_COLOR` is unset). With `out` and one format, `out` is the
/// file; with several, `out` is a directory that receives [`Format::file_name`] for each.
/// Returns the files written.
pub fn write_all(verdict: &Verdict, formats: &[Format], out: Option<&Path>) -> Result<Vec<PathBuf>, ExportError> {
    let Some(out) = out else {
        std::io::stdout()
            .lock()
            .write_all(render_for_stdout(verdict, formats).as_bytes())
            .map_err(|source| ExportError { path: "<stdout>".into(), source })?;
        return Ok(Vec::new());
    };
    let targets: Vec<(Format, PathBuf)> = match formats {
        [single] => vec![(*single, out.to_path_buf())],
        many => {
            std::fs::create_dir_all(out).map_err(|source| ExportError { path: out.display().to_string(), source })?;
            many.iter().map(|f| (*f, out.join(f.file_name()))).collect()
        }
    };
    for (format, path) in &targets {
        std::fs::write(path, format.exporter(false).render(verdict))
            .map_err(|source| ExportError { path: path.display().to_string(), source })?;
    }
    Ok(targets.into_iter().map(|(_, p)| p).collect())
}

/// The measured value of a check with its unit (`56.1%`, `8.10 ms`, `3 nodes`), or `—`.
fn measured_text(check: &Check) -> String {
    check.measured.map_or_else(|| "—".to_string(), |v| match check.unit {
        Unit::Percent => fmt_pct(v),
        Unit::Ms => fmt_ms(v * 1e6),
        Unit::Db => format!("{} dB", fmt_metric(v, 1)),
        Unit::Cosine | Unit::Abs => fmt_metric(v, 6),
        Unit::Runs | Unit::Nodes | Unit::Partitions | Unit::Switches => format!("{} {}", fmt_limit(v), check.unit),
    })
}

/// The limit of a check as configured (`8%`, `20 ms`, `1 partitions`).
fn limit_text(check: &Check) -> String {
    check.limit.map_or_else(|| "—".to_string(), |v| match check.unit {
        Unit::Percent => format!("{}%", fmt_limit(v)),
        Unit::Cosine | Unit::Abs => fmt_limit(v),
        Unit::Ms | Unit::Db | Unit::Runs | Unit::Nodes | Unit::Partitions | Unit::Switches => {
            format!("{} {}", fmt_limit(v), check.unit)
        }
    })
}

/// Named latency estimates in display order, shared by the terminal, Markdown and HTML reports.
fn latency_rows(v: &Verdict, s: &LatencyStats) -> Vec<(&'static str, String)> {
    vec![
        ("N", s.n.to_string()),
        ("median", fmt_ms(s.median_ns)),
        ("median 95% CI (bootstrap)", format!("{} – {}", fmt_ms(s.median_ci.lower), fmt_ms(s.median_ci.upper))),
        ("mean", fmt_ms(s.mean_ns)),
        ("stdev", fmt_ms(s.stdev_ns)),
        ("CV", fmt_pct(s.cv_pct)),
        ("MAD", fmt_ms(s.mad_ns)),
        ("min", fmt_ms(s.min_ns)),
        ("p90", fmt_ms(s.p90_ns)),
        ("p95", fmt_ms(s.p95_ns)),
        ("p99", fmt_ms(s.p99_ns)),
        ("max", fmt_ms(s.max_ns)),
        ("session creation", fmt_ms(v.session_create_ns as f64)),
        ("first inference (cold)", fmt_ms(v.first_inference_ns as f64)),
    ]
}

/// Shape lines: bimodality and drift, shared by the human-facing reports.
fn shape_lines(s: &LatencyStats) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(m) = &s.modality {
        let split = &m.split;
        let verdict = if m.bimodal { "bimodal" } else { "unimodal" };
        lines.push(format!(
            "{verdict}: best two-cluster split {:.0}% at {} / {:.0}% at {} (gap {}, Ashman's D {:.1}, bimodality coefficient {:.2})",
            split.fast.share_pct,
            fmt_ms(split.fast.median_ns),
            split.slow.share_pct,
            fmt_ms(split.slow.median_ns),
            fmt_ms(split.gap_ns),
            split.ashman_d,
            m.coefficient
        ));
    }
    if let Some(d) = &s.drift {
        lines.push(format!(
            "drift: last third {:+.1}% vs first third ({} → {}, {} runs each)",
            d.change_pct,
            fmt_ms(d.first_third_median_ns),
            fmt_ms(d.last_third_median_ns),
            d.runs_per_third
        ));
    }
    lines
}

/// Header of [`ep_rows`].
const EP_HEADER: [&str; 7] = ["EP", "nodes", "nodes %", "GFLOPs", "FLOPs %", "ms/run", "time %"];

/// Per-EP rows of a placement report, shared by the terminal, Markdown and HTML reports.
fn ep_rows(report: &PlacementReport) -> Vec<[String; 7]> {
    report
        .per_ep
        .iter()
        .map(|e| {
            [
                e.ep.clone(),
                e.nodes.to_string(),
                fmt_pct(e.nodes_pct),
                format!("{:.3}", e.flops as f64 / 1e9),
                fmt_pct(e.flops_pct),
                e.time_us_per_run.map_or_else(|| "—".into(), fmt_ms_from_us),
                e.time_pct.map_or_else(|| "—".into(), fmt_pct),
            ]
        })
        .collect()
}

/// Header of [`fallback_rows`].
const FALLBACK_HEADER: [&str; 8] = ["op type", "node", "EP", "FLOPs %", "ms/run", "status", "reason", "hint"];

/// Fallback rows of a placement report, shared by the terminal, Markdown and HTML reports.
fn fallback_rows(report: &PlacementReport, rules: &crate::rules::Rules) -> Vec<[String; 8]> {
    report
        .fallback
        .iter()
        .map(|f| {
            let status = if f.expected {
                "expected"
            } else if rules.allows(&f.name, &f.op_type) {
                "allowed"
            } else {
                "fallback"
            };
            [
                f.op_type.clone(),
                f.name.clone(),
                f.ep.clone(),
                fmt_pct(f.flops_pct),
                f.time_us_per_run.map_or_else(|| "—".into(), fmt_ms_from_us),
                status.to_string(),
                f.reason.clone().unwrap_or_default(),
                f.hint.clone().unwrap_or_default(),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_round_trip() {
        for f in Format::ALL {
            assert_eq!(f.name().parse::<Format>().unwrap(), f);
        }
        assert!("pdf".parse::<Format>().unwrap_err().contains("terminal"));
    }
}
