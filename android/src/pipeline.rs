//! From a harness result to a verdict, one way for every command (run, rack, sweep, gate): the
//! placement, the outputs check, the device's background load (`device_state.json`) and the rules
//! (with a baseline) are judged by one function; then the verdict goes to its sinks —
//! `verdict.json` and `report.html` next to the result, the formats the user asked for, evidence,
//! history — each taking the value in memory.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use gate::export::{write_all, Format};
use gate::outputs::OutputsReport;
use gate::{Baseline, Comparison, Rules, Verdict};
use npugate_result::{contract, files, RunResult};

use crate::device_state::DeviceStateRecord;

/// The rules a run is judged by, and the baseline it is compared with.
#[derive(Debug, Clone, Default)]
pub struct GateSpec {
    /// Gate rules (defaults, a file, overrides).
    pub rules: Rules,
    /// A saved baseline to compare against.
    pub baseline: Option<Baseline>,
    /// Compare with the baseline even when the fingerprints differ.
    pub force: bool,
}

impl GateSpec {
    /// Loads the rules file (defaults when `None`) with `NAME=VALUE` overrides, and the baseline.
    pub fn load(rules_file: Option<&Path>, overrides: &[String], baseline: Option<&Path>, force: bool) -> Result<GateSpec> {
        let rules = Rules::load(rules_file, overrides)?;
        let baseline = baseline.map(Baseline::read).transpose()?;
        Ok(GateSpec { rules, baseline, force })
    }
}

/// What the output check of a run produced.
#[derive(Debug, Clone)]
pub enum OutputsCheck {
    /// The run was not checked against a reference.
    NotRequested,
    /// The outputs compared with the reference.
    Compared(OutputsReport),
    /// The check could not be made (the reason; the output rules are then unjudged).
    Failed(String),
}

impl OutputsCheck {
    /// The comparison saved in a result directory (`outputs.json`), for judging a finished run.
    pub fn saved_in(dir: &Path) -> OutputsCheck {
        let file = dir.join(files::OUTPUTS);
        match std::fs::read_to_string(&file) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => OutputsCheck::NotRequested,
            Err(error) => OutputsCheck::Failed(format!("cannot read {}: {error}", file.display())),
            Ok(text) => match serde_json::from_str::<OutputsReport>(&text) {
                Ok(report) if report.schema == gate::outputs::OUTPUTS_SCHEMA => OutputsCheck::Compared(report),
                Ok(report) => OutputsCheck::Failed(format!("{} has schema {:?}", file.display(), report.schema)),
                Err(error) => OutputsCheck::Failed(format!("{} is not a valid outputs report: {error}", file.display())),
            },
        }
    }

    /// Saves a comparison as `outputs.json` in `dir` (nothing to save otherwise).
    pub fn save(&self, dir: &Path) -> Result<()> {
        if let OutputsCheck::Compared(report) = self {
            contract::write_json(&dir.join(files::OUTPUTS), report).with_context(|| format!("cannot write {}", dir.join(files::OUTPUTS).display()))?;
        }
        Ok(())
    }
}

/// Judges the run in `dir` (its result already read): placement from its profiles and log, the
/// outputs check, the background load of a device run, the rules and the baseline.
pub fn judge(dir: &Path, run: &RunResult, outputs: &OutputsCheck, spec: &GateSpec) -> Verdict {
    let placement = profile_parser::analyze_result_dir(dir);
    let comparison = spec.baseline.as_ref().map(|baseline| Comparison { baseline, force: spec.force });
    let mut verdict = gate::judge(run, placement.as_ref().ok(), &spec.rules, comparison);
    let report = match outputs {
        OutputsCheck::Compared(report) => Some(report),
        OutputsCheck::NotRequested => None,
        OutputsCheck::Failed(error) => {
            verdict.errors.push(error.clone());
            None
        }
    };
    gate::judge_outputs(&mut verdict, report);
    let background = match DeviceStateRecord::read_in(dir) {
        Ok(record) => record.and_then(|record| record.background()),
        Err(error) => {
            verdict.errors.push(format!("the background load is unknown: {error}"));
            None
        }
    };
    gate::background::judge_background(&mut verdict, background.as_ref());
    if let Err(error) = &placement {
        verdict.errors.push(format!("placement could not be computed: {error}"));
    }
    if !verdict.errors.is_empty() && verdict.outcome == gate::Outcome::Pass {
        verdict.outcome = gate::Outcome::Error;
    }
    verdict
}

/// Saves the verdict next to the result it judged: `verdict.json` and `report.html`.
pub fn save(verdict: &Verdict, dir: &Path) -> Result<()> {
    contract::write_json(&dir.join(files::VERDICT), verdict).with_context(|| format!("cannot write {}", dir.join(files::VERDICT).display()))?;
    write_all(verdict, &[Format::Html], Some(&dir.join(files::REPORT_HTML)))?;
    Ok(())
}

/// Where the formats the user asked for go.
#[derive(Debug, Clone)]
pub struct Sinks {
    /// Output formats (terminal, json, markdown, github, junit, html).
    pub formats: Vec<Format>,
    /// A file (one format) or directory (several) instead of stdout.
    pub report: Option<PathBuf>,
}

impl Sinks {
    /// Prints or writes the verdict in the requested formats.
    pub fn emit(&self, verdict: &Verdict) -> Result<()> {
        write_all(verdict, &self.formats, self.report.as_deref())?;
        Ok(())
    }

    /// For one device of a rack: writes `--report` into the device's result directory `dir`
    /// (under the report's file name, so devices do not overwrite each other) and returns the
    /// text still to print (empty when `--report` took the formats).
    pub fn render_for_device(&self, verdict: &Verdict, dir: &Path) -> Result<String> {
        Ok(match &self.report {
            Some(report) => {
                let name = report.file_name().map(PathBuf::from).unwrap_or_else(|| PathBuf::from("verdict"));
                write_all(verdict, &self.formats, Some(&dir.join(name)))?;
                String::new()
            }
            None => gate::export::render_for_stdout(verdict, &self.formats),
        })
    }
}
