//! The same model on several devices side by side: each output's distance from the fp32
//! reference (the `npugate.outputs/1` comparison of `run --check-outputs`), the outlier marked.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use npugate_gate::export::{consistency_markdown, consistency_text, DeviceOutputs};
use npugate_gate::fingerprint::Fingerprint;
use npugate_gate::outputs::OutputsReport;
use npugate_result::{files, RunResult};

use crate::pipeline::OutputsCheck;

/// Formats of the cross-device table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    /// Aligned text (coloured when asked).
    Terminal,
    /// GitHub-flavoured Markdown.
    Markdown,
}

/// The table of `runs` (each a result and its comparison); runs of different models are refused.
pub fn table(runs: &[(&RunResult, &OutputsReport)], format: TableFormat, color: bool) -> Result<String> {
    let Some((first, _)) = runs.first() else { bail!("no run with an output comparison to show") };
    let mut devices = Vec::new();
    for (run, report) in runs {
        if run.model.digest != first.model.digest {
            bail!(
                "{} ran another model than {} (digest {} vs {}); compare runs of the same model",
                run.model.path,
                first.model.path,
                run.model.digest,
                first.model.digest
            );
        }
        let fingerprint = Fingerprint::of(run);
        devices.push(DeviceOutputs { device: fingerprint.device, soc: fingerprint.soc, report: (*report).clone() });
    }
    let model =
        Path::new(&first.model.path).file_name().map_or(first.model.path.clone(), |n| n.to_string_lossy().into_owned());
    Ok(match format {
        TableFormat::Terminal => consistency_text(&model, &devices, color),
        TableFormat::Markdown => consistency_markdown(&model, &devices),
    })
}

/// The result and saved comparison of every result dir in (or one level below) `args`.
pub fn read_dirs(args: &[PathBuf]) -> Result<Vec<(RunResult, OutputsReport)>> {
    let mut runs = Vec::new();
    for dir in result_dirs(args)? {
        let run = RunResult::read(&dir)?;
        let report = match OutputsCheck::saved_in(&dir) {
            OutputsCheck::Compared(report) => *report,
            OutputsCheck::NotRequested => {
                bail!("{} has no {}; run it with `npugate run --check-outputs`", dir.display(), files::OUTPUTS)
            }
            OutputsCheck::Failed(error) => bail!("{error}"),
        };
        runs.push((run, report));
    }
    Ok(runs)
}

/// Each argument as a result dir, or its subdirectories that hold an `outputs.json` (sorted).
fn result_dirs(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for dir in args {
        if !dir.is_dir() {
            bail!("{} is not a directory; pass result directories of `npugate run --check-outputs`", dir.display());
        }
        if dir.join(files::RESULT).is_file() {
            dirs.push(dir.clone());
            continue;
        }
        let mut below: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.join(files::OUTPUTS).is_file())
            .collect();
        if below.is_empty() {
            bail!(
                "{} holds no result.json and no result dirs with {}; run with --check-outputs",
                dir.display(),
                files::OUTPUTS
            );
        }
        below.sort();
        dirs.extend(below);
    }
    Ok(dirs)
}
