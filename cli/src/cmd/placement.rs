//! `npugate placement`: where the model in a result directory ran — per EP nodes, FLOPs and time,
//! partitions, boundaries and the fallback list — as a table or as `npugate.placement/1` JSON.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use npugate_result::contract::EXIT_PASS;

use super::options::{JsonArg, RulesArgs};

/// Arguments of `npugate placement`.
#[derive(Debug, Args)]
pub struct PlacementArgs {
    /// A result directory (as written by `npugate run` or `npugate-harness`).
    pub result_dir: PathBuf,
    /// `--json`: `npugate.placement/1` instead of the table.
    #[command(flatten)]
    pub json: JsonArg,
    /// Rules (`--gate FILE`, `--rule NAME=VALUE`) whose allow-lists mark nodes as allowed in the table.
    #[command(flatten)]
    pub rules: RulesArgs,
}

/// Runs `npugate placement`.
pub fn run(args: PlacementArgs, console: &super::console::Console) -> Result<u8> {
    let report = npugate_profile::analyze_result_dir(&args.result_dir)?;
    if args.json.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let rules = npugate_gate::Rules::load(args.rules.rules_file.as_deref(), &args.rules.rule_overrides)?;
        print!("{}", npugate_gate::export::placement_text(&report, &rules, console.color));
    }
    Ok(EXIT_PASS)
}
