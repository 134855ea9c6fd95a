//! `npugate outputs compare DIR...`: the same model on every device side by side — each output's
//! distance from the fp32 reference (`outputs.json` of `run --check-outputs`), the outlier marked.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Subcommand, ValueEnum};
use npugate_gate::outputs::OutputsReport;
use npugate_result::contract::EXIT_PASS;
use npugate_result::report::{json_of, Finished, Report};
use serde::Serialize;

use npugate_engine::consistency::{self, TableFormat};

use super::options::JsonArg;

/// `npugate outputs …`.
#[derive(Debug, Subcommand)]
pub enum OutputsCommand {
    /// Cross-device table of output consistency: result dirs of `run --check-outputs` (or a
    /// `run --device` output dir holding one per device).
    Compare(CompareArgs),
}

/// Arguments of `npugate outputs compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// Result directories (each with `outputs.json`), or directories holding them one level down.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Table format.
    #[arg(long, value_enum, default_value_t = FormatArg::Terminal)]
    pub format: FormatArg,
    /// Write the table to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// `--json`: every run's comparison (`npugate.outputs-compare/1`) on stdout instead of the table.
    #[command(flatten)]
    pub json: JsonArg,
}

/// `npugate outputs compare`'s finished result: every run's comparison with the reference, and
/// the table of them, which is its text.
#[derive(Debug, Serialize)]
pub struct Compared {
    /// Always `npugate.outputs-compare/1`.
    schema: &'static str,
    /// Each run: the device and SoC it ran on and its `outputs.json`.
    runs: Vec<RunOutputs>,
    /// The table in the format asked for.
    #[serde(skip)]
    table: String,
}

/// One run's outputs compared with the fp32 reference.
#[derive(Debug, Serialize)]
pub struct RunOutputs {
    /// The device as its result names it.
    device: String,
    /// Its SoC.
    soc: String,
    /// The comparison (`npugate.outputs/1`).
    outputs: OutputsReport,
}

impl Report for Compared {
    fn schema(&self) -> &str {
        self.schema
    }
    fn exit_code(&self) -> u8 {
        EXIT_PASS
    }
    fn text(&self, _color: bool) -> String {
        self.table.clone()
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// Formats of the cross-device table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Aligned text (coloured on a TTY unless `NO_COLOR` is set).
    Terminal,
    /// GitHub-flavoured Markdown.
    Markdown,
}

/// Runs `npugate outputs`.
pub fn run(command: OutputsCommand, console: &super::console::Console) -> Result<u8> {
    let OutputsCommand::Compare(args) = command;
    let color = args.report.is_none() && console.color;
    let runs = consistency::read_dirs(&args.dirs)?;
    let pairs: Vec<_> = runs.iter().map(|(run, report)| (run, report)).collect();
    let format = match args.format {
        FormatArg::Terminal => TableFormat::Terminal,
        FormatArg::Markdown => TableFormat::Markdown,
    };
    let table = consistency::table(&pairs, format, color)?;
    if let Some(file) = &args.report {
        std::fs::write(file, &table).with_context(|| format!("cannot write {}", file.display()))?;
        if !args.json.json {
            return Ok(EXIT_PASS);
        }
    }
    let runs = runs
        .into_iter()
        .map(|(run, outputs)| {
            let fingerprint = npugate_gate::fingerprint::Fingerprint::of(&run);
            RunOutputs { device: fingerprint.device, soc: fingerprint.soc, outputs }
        })
        .collect();
    let compared = Compared { schema: "npugate.outputs-compare/1", runs, table };
    Ok(console.finished(args.json.json, Finished::new(&compared)))
}
