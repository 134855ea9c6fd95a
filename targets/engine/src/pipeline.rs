//! From a harness result to a verdict, one way for every command (run, rack, sweep, gate): the
//! placement, the outputs check, the device's background load (`device_state.json`) and energy
//! (`energy.json`), and the rules
//! (with a baseline) are judged by one function; then the verdict goes to its sinks —
//! `verdict.json` and `report.html` next to the result, the formats the user asked for (the
//! [`Sinks`] reporter), evidence, history — each taking the value in memory.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use npugate_estimate::{GraphFeatures, SocEstimate};
use npugate_gate::outputs::OutputsReport;
use npugate_gate::{Baseline, Comparison, Evidence, OutputsEvidence, Rules, Verdict};
use npugate_profile::report::PlacementReport;
use npugate_result::energy::EnergyRecord;
use npugate_result::report::{render_all, write_all, Finished, Format, Report, Reporter};
use npugate_result::{contract, files, RunResult};

use npugate_android::device_state::DeviceStateRecord;

/// The rules a run is judged by, and the baseline it is compared with.
#[derive(Debug, Clone, Default)]
pub struct GateSpec {
    /// Gate rules (defaults, a file, overrides).
    pub rules: Rules,
    /// A saved baseline to compare against.
    pub baseline: Option<Baseline>,
    /// Compare with the baseline even when the fingerprints differ.
    pub force: bool,
    /// The `npugate numerics` command line that finds the first diverging layer of this run's
    /// model on its target: named by a failed output rule (`None`: a generic one).
    pub numerics_command: Option<String>,
}

impl GateSpec {
    /// Loads the rules file (defaults when `None`) with `NAME=VALUE` overrides, and the baseline.
    pub fn load(
        rules_file: Option<&Path>,
        overrides: &[String],
        baseline: Option<&Path>,
        force: bool,
    ) -> Result<GateSpec> {
        let rules = Rules::load(rules_file, overrides)?;
        let baseline = baseline.map(Baseline::read).transpose()?;
        Ok(GateSpec { rules, baseline, force, numerics_command: None })
    }

    /// No rule and no baseline: the run is measured, not judged (`npugate run --no-gate`), its
    /// verdict's outcome `measured` and its report the measurement.
    pub fn measure_only() -> GateSpec {
        GateSpec { rules: Rules::none(), ..GateSpec::default() }
    }
}

/// What the output check of a run produced.
#[derive(Debug, Clone)]
pub enum OutputsCheck {
    /// The run was not checked against a reference.
    NotRequested,
    /// The outputs compared with the reference.
    Compared(Box<OutputsReport>),
    /// The check could not be made (the reason; the output rules are then unjudged).
    Failed(String),
}

impl OutputsCheck {
    /// The comparison saved in a result directory (`outputs.json`), for judging a finished run.
    pub fn saved_in(dir: &Path) -> OutputsCheck {
        match contract::read_if_present::<OutputsReport>(&dir.join(files::OUTPUTS)) {
            Ok(None) => OutputsCheck::NotRequested,
            Ok(Some(report)) => OutputsCheck::Compared(Box::new(report)),
            Err(error) => OutputsCheck::Failed(error.to_string()),
        }
    }

    /// Saves a comparison as `outputs.json` in `dir` (nothing to save otherwise).
    pub fn save(&self, dir: &Path) -> Result<()> {
        if let OutputsCheck::Compared(report) = self {
            contract::write_json(&dir.join(files::OUTPUTS), report)
                .with_context(|| format!("cannot write {}", dir.join(files::OUTPUTS).display()))?;
        }
        Ok(())
    }
}

/// Judges the run in `dir` (its result already read): placement from its profiles and log, the
/// outputs check, the background load of a device run, the rules and the baseline — one pure
/// judgement that computes the outcome once.
pub fn judge(dir: &Path, run: &RunResult, outputs: &OutputsCheck, spec: &GateSpec) -> Verdict {
    let placement = npugate_profile::analyze_run(dir, run);
    let background = DeviceStateRecord::read_in(dir).map(|record| record.and_then(|record| record.background()));
    let energy = contract::read_if_present::<EnergyRecord>(&dir.join(files::ENERGY));
    let estimate = match (&placement, spec.rules.max_estimated_ms) {
        (Ok(report), Some(_)) => Some(estimate_of(run, report)),
        (Err(_), Some(_)) => Some(Err("the placement could not be computed".to_string())),
        (_, None) => None,
    };
    let evidence = Evidence {
        run,
        placement: placement.as_ref().map_err(ToString::to_string),
        outputs: match outputs {
            OutputsCheck::NotRequested => OutputsEvidence::NotChecked,
            OutputsCheck::Compared(report) => OutputsEvidence::Compared(report),
            OutputsCheck::Failed(error) => OutputsEvidence::Failed(error.clone()),
        },
        baseline: spec.baseline.as_ref().map(|baseline| Comparison { baseline, force: spec.force }),
        background: background.as_ref().map(Option::as_ref).map_err(|error| format!("{error:#}")),
        energy: energy.as_ref().map(Option::as_ref).map_err(ToString::to_string),
        estimate: estimate.as_ref().map(|estimate| estimate.as_ref().map_err(Clone::clone)),
        numerics_command: spec.numerics_command.as_deref(),
    };
    npugate_gate::judge(&evidence, &spec.rules)
}

/// The ESTIMATED latency of the run's graph on its SoC (the emulator's `soc_model`), or why there
/// is none: an unknown SoC, nodes off the NPU (the estimate covers graphs that run whole on it).
fn estimate_of(run: &RunResult, placement: &PlacementReport) -> Result<SocEstimate, String> {
    let soc_model: Option<u32> = run.execution.ep_options.get("soc_model").and_then(|id| id.parse().ok());
    let soc = soc_model
        .and_then(|id| npugate_result::hexagon::all().iter().find(|soc| soc.qnn_soc_model == id))
        .ok_or("the run's SoC is unknown (an estimate needs the SoC the host HTP emulator was configured as: --soc)")?;
    let left = placement.fallback.iter().filter(|node| !node.expected).count();
    if left > 0 {
        return Err(format!("{left} node(s) run off the NPU; the estimate covers graphs that run whole on it"));
    }
    let path = crate::targets::wine::host_path(&run.model.path);
    let model = npugate_onnx::Model::read(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let reference = npugate_estimate::Reference::embedded().map_err(|error| error.to_string())?;
    Ok(npugate_estimate::Estimator::new(reference).estimate(soc.model, &GraphFeatures::of_report(placement, &model)))
}

/// Saves the verdict next to the result it judged: `verdict.json` and `report.html`.
pub fn save(verdict: &Verdict, dir: &Path) -> Result<()> {
    verdict
        .write(&dir.join(files::VERDICT))
        .with_context(|| format!("cannot write {}", dir.join(files::VERDICT).display()))?;
    write_all(verdict, &[Format::Html], &dir.join(files::REPORT_HTML))?;
    Ok(())
}

/// The reporter of `run`, `compare` and `gate` ([`Reporter`]): the formats the user asked for
/// (`--format`, `--json`), on stdout or in `--report`, coloured or not; a rack's devices as they
/// finish and its summary.
#[derive(Debug, Clone)]
pub struct Sinks {
    /// Output formats (terminal, json, markdown, github, junit, html).
    pub formats: Vec<Format>,
    /// A file (one format) or directory (several) instead of stdout.
    pub report: Option<PathBuf>,
    /// Colour the terminal format on stdout.
    pub color: bool,
}

/// Writes `--report` (a file for one format, a folder of one file per format for several), each
/// file only where nothing of the user's is in the way ([`crate::layout::check_file`]).
fn write_report(verdict: &dyn Report, formats: &[Format], out: &Path) -> Result<()> {
    match formats {
        [_] => crate::layout::check_file(out, "--report", &[])?,
        many => {
            if out.exists() && !out.is_dir() {
                anyhow::bail!(
                    "--report {} is a file; with several --format it names a folder; nothing was changed",
                    out.display()
                );
            }
            for format in many {
                crate::layout::check_file(&out.join(format.file_name(verdict.stem())), "--report", &[])?;
            }
        }
    }
    write_all(verdict, formats, out)?;
    Ok(())
}

impl Sinks {
    /// Shows `report` in the formats asked for: printed on stdout, or written to `--report`.
    fn show(&self, report: &dyn Report) -> Result<()> {
        match &self.report {
            Some(out) => write_report(report, &self.formats, out)?,
            None => {
                let text = render_all(report, &self.formats, self.color)?;
                std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes())
                    .map_err(|e| anyhow::anyhow!("cannot write the {} report to stdout: {e}", report.schema()))?;
            }
        }
        Ok(())
    }

    /// For one device of a rack: writes `--report` into the device's result directory `dir`
    /// (under the report's file name, so devices do not overwrite each other) and returns the
    /// text still to print (empty when `--report` took the formats, and when standard output is
    /// JSON: the rack then prints one document, its summary).
    pub fn render_for_device(&self, verdict: &dyn Report, dir: &Path) -> Result<String> {
        Ok(match &self.report {
            Some(report) => {
                let name = report.file_name().map(PathBuf::from).unwrap_or_else(|| PathBuf::from("verdict"));
                write_report(verdict, &self.formats, &dir.join(name))?;
                String::new()
            }
            None if self.json_on_stdout() => String::new(),
            None => render_all(verdict, &self.formats, self.color)?,
        })
    }

    /// Shows the report of the device `name` of a rack as it finishes ([`Sinks::render_for_device`]
    /// into its result directory `dir`); a report that cannot be shown is said on stderr, and the
    /// rack goes on.
    pub fn device_finished(&self, name: &str, report: &dyn Report, dir: &Path) {
        match self.render_for_device(report, dir) {
            Ok(text) => print!("{text}"),
            Err(error) => eprintln!("npugate: {name}: error: {error:#}"),
        }
    }

    /// Whether standard output is one JSON document (`--json`, or `--format json` alone).
    pub fn json_on_stdout(&self) -> bool {
        self.report.is_none() && self.formats == [Format::Json]
    }

    /// A rack's summary for standard output: its `rack.json` (`npugate.rack/1`, every target's
    /// outcome and result directory) when standard output is JSON, one line per target otherwise.
    pub fn rack_summary(&self, rack: &crate::rack::RackReport) -> String {
        match self.json_on_stdout() {
            true => rack.json(),
            false => rack.text(self.color),
        }
    }

    /// Ends a rack whose devices were shown as they finished: prints its summary
    /// ([`Sinks::rack_summary`]); returns the rack's exit code.
    pub fn rack_finished(&self, rack: &crate::rack::RackReport) -> u8 {
        print!("{}", self.rack_summary(rack));
        rack.exit_code()
    }

    /// Prints `text` that goes beside the report (a rack's cross-target output table): on stdout,
    /// or on stderr when standard output is one JSON document.
    pub fn aside(&self, text: &str) {
        match self.json_on_stdout() {
            true => eprint!("{text}"),
            false => print!("{text}"),
        }
    }
}

/// The formats asked for, on stdout or in `--report`, then where the command's files are on
/// stderr: the reporter of `run`, `compare` and `gate`.
impl Reporter for Sinks {
    fn finished(&self, finished: &Finished<'_>) -> u8 {
        if let Err(error) = self.show(finished.report) {
            eprintln!("npugate: error: {error:#}");
            return contract::EXIT_ERROR;
        }
        if let Some(saved) = &finished.saved {
            eprintln!("npugate: {saved}");
        }
        finished.report.exit_code()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rack::{DeviceOutcome, RackReport, RACK_SCHEMA};

    #[test]
    fn a_rack_on_json_stdout_is_one_document_its_summary_and_lines_otherwise() {
        let device = |serial: &str, exit_code| DeviceOutcome {
            serial: serial.into(),
            exit_code,
            result_dir: Some(PathBuf::from("out").join(serial)),
            infrastructure_error: None,
            attempts: 1,
            retried_errors: Vec::new(),
            seconds: 1.0,
        };
        let rack = RackReport {
            schema: RACK_SCHEMA.into(),
            devices: vec![device("a", 0), device("b", 1)],
            exit_code: 1,
            seconds: 2.0,
        };
        let sinks = |formats: Vec<Format>, report: Option<&str>| Sinks {
            formats,
            report: report.map(PathBuf::from),
            color: false,
        };
        let json = sinks(vec![Format::Json], None);
        assert!(json.json_on_stdout());
        let document: RackReport = serde_json::from_str(&json.rack_summary(&rack)).unwrap();
        assert_eq!(document, rack, "the summary is rack.json itself");
        for text in [sinks(vec![Format::Json, Format::Markdown], None), sinks(vec![Format::Json], Some("r.json"))] {
            assert!(!text.json_on_stdout());
            assert_eq!(text.rack_summary(&rack), "a\tpass\tout/a\nb\tgate failed\tout/b\n");
        }
    }

    #[test]
    fn sinks_as_a_reporter_write_report_files_and_return_the_reports_exit_code() {
        let rack = RackReport { schema: RACK_SCHEMA.into(), devices: Vec::new(), exit_code: 1, seconds: 0.5 };
        let work = tempfile::tempdir().unwrap();
        let to = |formats: Vec<Format>, out: &Path| Sinks { formats, report: Some(out.to_path_buf()), color: true };
        let folder = work.path().join("reports");
        let saved = Finished::saved(&rack, "the rack in out".into());
        assert_eq!(to(vec![Format::Terminal, Format::Json], &folder).finished(&saved), 1);
        let written: RackReport =
            serde_json::from_str(&std::fs::read_to_string(folder.join("report.json")).unwrap()).unwrap();
        assert_eq!(written, rack);
        assert_eq!(std::fs::read_to_string(folder.join("report.txt")).unwrap(), rack.text(false), "never coloured");

        let file = work.path().join("rack.json");
        assert_eq!(to(vec![Format::Json], &file).finished(&Finished::new(&rack)), 1);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), rack.json());
        // A format the kind lacks, and a file of the user's in the way: an error, exit 2, the
        // user's file kept.
        assert_eq!(to(vec![Format::Junit], &file).finished(&Finished::new(&rack)), contract::EXIT_ERROR);
        let users = work.path().join("notes.txt");
        std::fs::write(&users, "mine\n").unwrap();
        assert_eq!(to(vec![Format::Json], &users).finished(&Finished::new(&rack)), contract::EXIT_ERROR);
        assert_eq!(std::fs::read_to_string(&users).unwrap(), "mine\n");
    }
}
