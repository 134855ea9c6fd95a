//! `npugate outputs compare DIR...`: the same model on every device side by side — each output's
//! distance from the fp32 reference (`outputs.json` of `run --check-outputs`), the outlier marked.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Subcommand, ValueEnum};
use npugate_result::contract::EXIT_PASS;

use npugate_engine::consistency::{self, TableFormat};

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
    let text = consistency::table(&pairs, format, color)?;
    match &args.report {
        Some(file) => std::fs::write(file, text).with_context(|| format!("cannot write {}", file.display()))?,
        None => print!("{text}"),
    }
    Ok(EXIT_PASS)
}
