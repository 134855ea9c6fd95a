//! `npugate placement`: where the model in a result directory ran — per EP nodes, FLOPs and time,
//! partitions, boundaries and the fallback list — as a table or as `npugate.placement/1` JSON.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use npugate_profile::report::PlacementReport;
use npugate_result::contract::EXIT_PASS;
use npugate_result::report::{json_of, Finished, Report};

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
    let rules = npugate_gate::Rules::load(args.rules.rules_file.as_deref(), &args.rules.rule_overrides)?;
    Ok(console.finished(args.json.json, Finished::new(&Placed { report: &report, rules: &rules })))
}

/// `npugate placement`'s finished result: the placement table, its nodes marked by the rules'
/// allow-lists; it judges nothing (exit 0).
struct Placed<'a> {
    /// Where the model ran.
    report: &'a PlacementReport,
    /// The rules whose allow-lists mark nodes as allowed.
    rules: &'a npugate_gate::Rules,
}

impl Report for Placed<'_> {
    fn schema(&self) -> &str {
        &self.report.schema
    }
    fn exit_code(&self) -> u8 {
        EXIT_PASS
    }
    fn text(&self, color: bool) -> String {
        npugate_gate::export::placement_text(self.report, self.rules, color)
    }
    fn json(&self) -> String {
        json_of(self.report)
    }
}
