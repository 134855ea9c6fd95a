//! `npugate outputs compare DIR...`: the same model on every device side by side — each output's
//! distance from the fp32 reference (`outputs.json` of `run --check-outputs`), the outlier marked.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Subcommand, ValueEnum};
use gate::export::{consistency_markdown, consistency_text, DeviceOutputs};
use gate::fingerprint::Fingerprint;
use npugate_result::RunResult;

use crate::output_check::{read_report, OUTPUTS_FILE};

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
    #[arg(long, value_enum, default_value_t = TableFormat::Terminal)]
    pub format: TableFormat,
    /// Write the table to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

/// Formats of the cross-device table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TableFormat {
    /// Aligned text (coloured on a TTY unless `NO_COLOR` is set).
    Terminal,
    /// GitHub-flavoured Markdown.
    Markdown,
}

/// Runs `npugate outputs`.
pub fn run(command: OutputsCommand) -> Result<u8> {
    let OutputsCommand::Compare(args) = command;
    let color = args.report.is_none() && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let text = table(&args.dirs, args.format, color)?;
    match &args.report {
        Some(file) => std::fs::write(file, text).with_context(|| format!("cannot write {}", file.display()))?,
        None => print!("{text}"),
    }
    Ok(crate::EXIT_PASS)
}

/// The cross-device table of the result dirs in (or below) `args`.
pub fn table(args: &[PathBuf], format: TableFormat, color: bool) -> Result<String> {
    let dirs = result_dirs(args)?;
    let mut model: Option<(String, String, PathBuf)> = None;
    let mut devices = Vec::new();
    for dir in &dirs {
        let run = RunResult::read(dir)?;
        match &model {
            None => model = Some((run.model.path.clone(), run.model.sha256.clone(), dir.clone())),
            Some((_, sha256, first)) if *sha256 != run.model.sha256 => bail!(
                "{} ran another model than {} (sha256 {} vs {}); compare runs of the same model",
                dir.display(),
                first.display(),
                run.model.sha256,
                sha256
            ),
            Some(_) => {}
        }
        let report = read_report(dir)?.with_context(|| {
            format!("{} has no {OUTPUTS_FILE}; run it with `npugate run --check-outputs`", dir.display())
        })?;
        let fingerprint = Fingerprint::of(&run);
        devices.push(DeviceOutputs { device: fingerprint.device, soc: fingerprint.soc, report });
    }
    let model = model.map(|(path, _, _)| path).unwrap_or_default();
    let shown = Path::new(&model).file_name().map_or(model.clone(), |n| n.to_string_lossy().into_owned());
    Ok(match format {
        TableFormat::Terminal => consistency_text(&shown, &devices, color),
        TableFormat::Markdown => consistency_markdown(&shown, &devices),
    })
}

/// Each argument as a result dir, or its subdirectories that hold an `outputs.json` (sorted).
fn result_dirs(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for dir in args {
        if !dir.is_dir() {
            bail!("{} is not a directory; pass result directories of `npugate run --check-outputs`", dir.display());
        }
        if dir.join(npugate_result::files::RESULT).is_file() {
            dirs.push(dir.clone());
            continue;
        }
        let mut below: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.join(OUTPUTS_FILE).is_file())
            .collect();
        if below.is_empty() {
            bail!("{} holds no result.json and no result dirs with {OUTPUTS_FILE}; run with --check-outputs", dir.display());
        }
        below.sort();
        dirs.extend(below);
    }
    Ok(dirs)
}
