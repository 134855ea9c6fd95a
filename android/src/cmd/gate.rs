//! `npugate gate RESULT_DIR`: judges a harness output directory against the rules (and a baseline)
//! and writes the verdict in the requested formats. Exit code 0 pass, 1 a rule failed, 2 not judged.

use std::path::PathBuf;

use crate::judging::{emit, judge_dir, GateOptions};

/// Arguments of `npugate gate`.
#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// Harness output directory (the one holding result.json).
    pub result_dir: PathBuf,
    /// Rules, baseline and output formats.
    #[command(flatten)]
    pub options: GateOptions,
}

/// Runs `npugate gate`; returns the verdict's exit code.
pub fn run(args: GateArgs) -> anyhow::Result<u8> {
    let verdict = judge_dir(&args.result_dir, &args.options)?;
    emit(&verdict, &args.options)
}
