//! `npugate sweep --plan sweep.toml`: run (or resume) a matrix of devices × runtimes × models,
//! record it in the history, and write the matrix report. Exit 0 every cell passed, 1 a gate rule
//! failed somewhere, 2 a cell or device could not be judged (or the plan is wrong).

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;

use npugate_result::contract::EXIT_ERROR;

use super::options::{DeviceRunArgs, EvidenceArgs, HarnessArg, HistoryArg, OutArg};
use crate::history::{self, HistoryFilter, HistoryReport, HistoryStore};
use crate::matrix::{self, Matrix};
use crate::sweep::{self, SweepOptions, SweepPlan, SweepSummary, SweepTarget};
use crate::targets::Target;

/// Nights of history the matrix report's trends show.
const TREND_NIGHTS: usize = 30;

/// Arguments of `npugate sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The sweep plan (TOML): devices, runtimes, models with their rules, settings.
    #[arg(long, value_name = "FILE")]
    pub plan: PathBuf,
    /// `--out`: the sweep directory; running again with the same one resumes [default:
    /// npugate-sweeps/<name>/<night>].
    #[command(flatten)]
    pub out: OutArg,
    /// The night this sweep belongs to (default: today, UTC).
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = sweep::parse_night)]
    pub night: Option<String>,
    /// `--history`: the store the sweep is recorded in.
    #[command(flatten)]
    pub history: HistoryArg,
    /// `--harness` [default: the one built for each runtime's target].
    #[command(flatten)]
    pub harness: HarnessArg,
    /// adb, work dir, retries, cooldown and timeouts (`--device` only when the plan has no [[device]]).
    #[command(flatten)]
    pub devices: DeviceRunArgs,
    /// Evidence bundle of the finished cells (`--evidence OUT`, `--signing-key FILE`).
    #[command(flatten)]
    pub evidence: EvidenceArgs,
}

/// Runs `npugate sweep`.
pub fn run(args: SweepArgs) -> Result<u8> {
    let plan = SweepPlan::load(&args.plan)?;
    let bundle = args.evidence.bundle()?;
    let night = args.night.clone().unwrap_or_else(sweep::today);
    let out = args.out.out.clone().unwrap_or_else(|| PathBuf::from("npugate-sweeps").join(&plan.name).join(&night));
    let adb = args.devices.devices.adb()?;
    let mut devices: Vec<SweepTarget<Box<dyn Target>>> = sweep::resolve_devices(&plan, &adb, &args.devices.devices.devices, &args.devices.adb_settings())?
        .into_iter()
        .map(SweepTarget::boxed)
        .collect();
    devices.extend(sweep::host_htp_targets(&plan).into_iter().map(SweepTarget::boxed));
    let policy = args.devices.policy(&super::options::interrupt_flag());
    let options = SweepOptions {
        out: &out,
        night: args.night.as_deref(),
        harness: args.harness.harness.as_deref(),
        policy: &policy,
        run_timeout: args.devices.run_timeout(),
    };
    let summary = sweep::run_sweep(&plan, &devices, &options)?;
    let history_path = args.history.path();
    let (trends, history_ok) = match record_and_trend(&summary, &out, &history_path) {
        Ok(trends) => (Some(trends), true),
        Err(error) => {
            eprintln!("npugate sweep: error: the history was not updated: {error:#}");
            (None, false)
        }
    };
    let written = matrix::write(&Matrix::build(&summary, &out, trends)?, &out)?;
    let finished = summary.finished().count();
    eprintln!(
        "npugate sweep: {finished}/{} cells finished; sweep {} (night {}) in {}; matrix report {}; history {}",
        summary.cells.len(),
        summary.name,
        summary.night,
        out.display(),
        written.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
        history_path.display()
    );
    if let Some((bundle_dir, key)) = &bundle {
        let manifest = crate::evidence::for_sweep(&plan, &out, args.harness.harness.as_deref(), &written)?.write(bundle_dir, key)?;
        eprintln!("npugate sweep: evidence bundle of {} files signed in {}", manifest.files.len(), bundle_dir.display());
    }
    let code = summary.exit_code.unwrap_or(EXIT_ERROR);
    Ok(if history_ok { code } else { EXIT_ERROR })
}

/// Records the sweep, then reads the trends of its cells up to its night.
fn record_and_trend(summary: &SweepSummary, out: &Path, history_path: &Path) -> Result<HistoryReport> {
    let mut store = HistoryStore::open(history_path)?;
    store.record(summary, out)?;
    let filter = HistoryFilter { nights: TREND_NIGHTS, until: Some(summary.night.clone()), ..Default::default() };
    let in_sweep = |model: &str, device: &str, runtime: &str| {
        summary.finished().any(|r| r.key.model == model && r.key.device == device && r.key.runtime == runtime)
    };
    let cells = store.cells(&filter)?.into_iter().filter(|c| in_sweep(&c.model, &c.device, &c.runtime)).collect();
    Ok(history::trend::build(&filter, cells, history::trend::default_tolerance_pct()))
}
