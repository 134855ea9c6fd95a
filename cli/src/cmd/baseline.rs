//! `npugate baseline save RESULT_DIR --out B.json`: keeps a run's latencies, node placement and
//! fingerprint for later `npugate gate --baseline B.json`.

use std::path::PathBuf;

use npugate_gate::units::fmt_ms;
use npugate_gate::Baseline;
use npugate_result::contract::EXIT_PASS;
use npugate_result::RunResult;

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
}

/// Runs `npugate baseline`; 0 when saved.
pub fn run(command: BaselineCommand) -> anyhow::Result<u8> {
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
    let median = npugate_gate::stats::LatencyStats::from_ns(&baseline.latencies_ns)
        .map(|s| fmt_ms(s.median_ns))
        .unwrap_or_default();
    eprintln!(
        "npugate: saved baseline {}: {} runs, median {median}, {} placed nodes, {} on {}",
        args.out.display(),
        baseline.latencies_ns.len(),
        baseline.placement.as_ref().map_or(0, |p| p.nodes.len()),
        baseline.fingerprint.device,
        baseline.fingerprint.soc
    );
    Ok(EXIT_PASS)
}
