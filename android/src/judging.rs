//! From a result directory to a verdict: placement analysis, rules, optional baseline, judge; the
//! verdict JSON and HTML report are written next to the result.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use gate::export::{write_all, Format};
use gate::{Baseline, Comparison, Evidence, OutputsEvidence, Rules, Verdict};
use npugate_result::RunResult;

/// File names the host writes into a result directory.
pub mod files {
    /// The verdict (`npugate.verdict/1`).
    pub const VERDICT: &str = "verdict.json";
    /// The self-contained HTML report.
    pub const REPORT_HTML: &str = "report.html";
}

/// Gate options shared by every command that judges a run.
#[derive(Debug, Clone, Args)]
pub struct GateOptions {
    /// Gate rules file (TOML); defaults: cv_pct <= 8, npu_flops_pct >= 98.
    #[arg(long = "gate", value_name = "FILE")]
    pub rules_file: Option<PathBuf>,
    /// Override one rule, `name=value` (repeatable), e.g. `--rule median_ms=12`.
    #[arg(long = "rule", value_name = "NAME=VALUE")]
    pub rule_overrides: Vec<String>,
    /// Baseline to compare against (from `npugate baseline save`).
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Compare against a baseline even when the fingerprints differ.
    #[arg(long)]
    pub force: bool,
    /// Output format (repeatable): terminal, json, markdown, github, junit, html.
    #[arg(long = "format", value_name = "FORMAT", default_value = "terminal")]
    pub formats: Vec<Format>,
    /// Write the formats to this file (one format) or directory (several) instead of stdout.
    #[arg(long = "report", value_name = "PATH")]
    pub report: Option<PathBuf>,
}

/// Analyzes and judges the result in `dir`. A placement that cannot be computed leaves the
/// placement rules unjudged (exit 2) and says why.
pub fn judge_dir(dir: &Path, options: &GateOptions) -> Result<Verdict> {
    let rules = Rules::load(options.rules_file.as_deref(), &options.rule_overrides)?;
    let baseline = options.baseline.as_deref().map(Baseline::read).transpose()?;
    judge_dir_with(dir, &rules, baseline.as_ref().map(|baseline| Comparison { baseline, force: options.force }))
}

/// [`judge_dir`] with rules (and a baseline comparison) already loaded, e.g. from a sweep plan.
pub fn judge_dir_with(dir: &Path, rules: &Rules, comparison: Option<Comparison>) -> Result<Verdict> {
    let run = RunResult::read(dir)?;
    let placement = profile_parser::analyze_result_dir(dir);
    let outputs = crate::output_check::read_report(dir);
    let evidence = Evidence {
        run: &run,
        placement: placement.as_ref().map_err(ToString::to_string),
        outputs: OutputsEvidence::from_read(&outputs),
        baseline: comparison,
    };
    let verdict = gate::judge(&evidence, rules);
    verdict.write(&dir.join(files::VERDICT)).with_context(|| format!("cannot write {}", dir.join(files::VERDICT).display()))?;
    write_all(&verdict, &[Format::Html], Some(&dir.join(files::REPORT_HTML)))?;
    Ok(verdict)
}

/// Prints or writes the verdict in the requested formats; returns its exit code.
pub fn emit(verdict: &Verdict, options: &GateOptions) -> Result<u8> {
    write_all(verdict, &options.formats, options.report.as_deref())?;
    Ok(verdict.outcome.exit_code())
}

/// For one device of a rack: writes `--report` into the device's result directory `dir` (under the
/// report's file name, so devices do not overwrite each other) and returns the exit code with the
/// text still to print (empty when `--report` took the formats), so judging can run in parallel
/// and only printing waits its turn.
pub fn emit_for_device(verdict: &Verdict, options: &GateOptions, dir: &Path) -> Result<(u8, String)> {
    let text = match &options.report {
        Some(report) => {
            let name = report.file_name().map(PathBuf::from).unwrap_or_else(|| PathBuf::from("verdict"));
            write_all(verdict, &options.formats, Some(&dir.join(name)))?;
            String::new()
        }
        None => gate::export::render_for_stdout(verdict, &options.formats),
    };
    Ok((verdict.outcome.exit_code(), text))
}
