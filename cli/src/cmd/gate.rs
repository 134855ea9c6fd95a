//! `npugate gate RESULT_DIR`: judges a harness output directory against the rules (and a baseline)
//! and writes the verdict in the requested formats. Exit code 0 pass, 1 a rule failed, 2 not judged.

use std::path::PathBuf;

use npugate_result::report::{Finished, Reporter};
use npugate_result::RunResult;

use super::options::GateArgs;
use npugate_engine::pipeline::{self, OutputsCheck};

/// Arguments of `npugate gate`.
#[derive(Debug, clap::Args)]
pub struct GateCommandArgs {
    /// Harness output directory (the one holding result.json).
    pub result_dir: PathBuf,
    /// Rules, baseline and output formats.
    #[command(flatten)]
    pub options: GateArgs,
}

/// Runs `npugate gate`; returns the verdict's exit code.
pub fn run(args: GateCommandArgs, console: &super::console::Console) -> anyhow::Result<u8> {
    let spec = args.options.spec()?;
    let result = RunResult::read(&args.result_dir)?;
    let verdict = pipeline::judge(&args.result_dir, &result, &OutputsCheck::saved_in(&args.result_dir), &spec);
    pipeline::save(&verdict, &args.result_dir)?;
    Ok(args.options.output.sinks(false, console.color).finished(&Finished::new(&verdict)))
}
