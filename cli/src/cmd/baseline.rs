//! `npugate baseline save RESULT_DIR --out B.json`: keeps a run's latencies, node placement and
//! fingerprint for later `npugate gate --baseline B.json`.

use std::path::PathBuf;

use npugate_gate::units::fmt_ms;
use npugate_gate::Baseline;
use npugate_result::contract::EXIT_PASS;
use npugate_result::report::{json_of, Finished, Report};
use npugate_result::RunResult;

use super::console::Console;
use super::options::JsonArg;

/// `npugate baseline …`.
#[derive(Debug, clap::Subcommand)]
pub enum BaselineCommand {
    /// Save a result directory as a baseline.
    Save(SaveArgs),
}

/// Arguments of `npugate baseline save`.
#[derive(Debug, clap::Args)]
pub struct SaveArgs {
    /// Harness output directory (the one holding result.json).
    pub result_dir: PathBuf,
    /// Baseline file to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// `--json`: what was saved (`npugate.baseline-saved/1`) on stdout.
    #[command(flatten)]
    pub json: JsonArg,
}

/// `npugate baseline save`'s finished result: what the baseline file holds. Its text is empty
/// (the sentence saying what was saved goes to stderr, where a command says where its files are).
#[derive(Debug, serde::Serialize)]
pub struct Saved {
    /// Always `npugate.baseline-saved/1`.
    schema: &'static str,
    /// The baseline file written.
    baseline: PathBuf,
    /// The result directory it was saved from.
    source: String,
    /// Timed runs kept.
    runs: usize,
    /// Their median, ns (`None` without runs).
    median_ns: Option<f64>,
    /// Placed nodes kept (0: saved without placement).
    placed_nodes: usize,
    /// The device and SoC of the fingerprint.
    device: String,
    /// The SoC.
    soc: String,
}

impl Report for Saved {
    fn schema(&self) -> &str {
        self.schema
    }
    fn exit_code(&self) -> u8 {
        EXIT_PASS
    }
    fn text(&self, _color: bool) -> String {
        String::new()
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// Runs `npugate baseline`; 0 when saved.
pub fn run(command: BaselineCommand, console: &Console) -> anyhow::Result<u8> {
    let BaselineCommand::Save(args) = command;
    let inputs = [args.result_dir.as_path(), &args.result_dir.join(npugate_result::files::RESULT)];
    npugate_engine::layout::check_file(&args.out, "--out", &inputs)?;
    let run = RunResult::read(&args.result_dir)?;
    let placement = match npugate_profile::analyze_result_dir(&args.result_dir) {
        Ok(report) => Some(report),
        Err(error) => {
            eprintln!(
                "npugate: warning: saving without placement (the baseline_placement rule will be unjudged): {error}"
            );
            None
        }
    };
    let source = args.result_dir.display().to_string();
    let baseline = Baseline::from_run(&run, placement.as_ref(), &source)?;
    baseline.write(&args.out)?;
    let saved = Saved {
        schema: "npugate.baseline-saved/1",
        baseline: args.out,
        source,
        runs: baseline.latencies_ns.len(),
        median_ns: npugate_gate::stats::LatencyStats::from_ns(&baseline.latencies_ns).map(|s| s.median_ns),
        placed_nodes: baseline.placement.as_ref().map_or(0, |p| p.nodes.len()),
        device: baseline.fingerprint.device,
        soc: baseline.fingerprint.soc,
    };
    let sentence = format!(
        "saved baseline {}: {} runs, median {}, {} placed nodes, {} on {}",
        saved.baseline.display(),
        saved.runs,
        saved.median_ns.map(fmt_ms).unwrap_or_default(),
        saved.placed_nodes,
        saved.device,
        saved.soc
    );
    Ok(console.finished(args.json.json, Finished::saved(&saved, sentence)))
}
