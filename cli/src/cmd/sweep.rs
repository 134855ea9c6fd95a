//! `npugate sweep --plan sweep.toml [--shard I/N]`: run (or resume) a matrix of devices × runtimes ×
//! models — all of it, or one shard — record it in the history, and write the matrix report.
//! `npugate sweep merge DIR…`: put shard results back together into one sweep, history night and
//! matrix report. Exit 0 every cell passed, 1 a gate rule failed somewhere, 2 a cell or device could
//! not be judged, a shard is missing (or the plan is wrong).

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Args, Subcommand};

use npugate_result::contract::EXIT_ERROR;

use super::options::{DeviceRunArgs, EvidenceArgs, HarnessArg, HistoryArg, OutArg};
use crate::sweep::{self, SweepOptions, SweepPlan, SweepTarget};
use npugate_engine::targets::Target;
use npugate_engine::timeouts::Timeouts;
use npugate_sweeps::history::{self, HistoryFilter, HistoryReport, HistoryStore};
use npugate_sweeps::matrix::{self, Matrix};
use npugate_sweeps::sweep::{Cut, Shard, SweepSummary};

/// Nights of history the matrix report's trends show.
const TREND_NIGHTS: usize = 30;

/// Arguments of `npugate sweep`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
#[command(mut_arg("out", |out| out.help("The sweep directory; running again with the same one resumes [default: npugate-sweeps/<name>/<night>, a shard's …/<night>-shard-I-of-N]. A directory that exists is replaced only when it holds npugate's own sweep")))]
pub struct SweepArgs {
    /// `npugate sweep merge`: put shard results together.
    #[command(subcommand)]
    pub command: Option<SweepCommand>,
    /// The sweep plan (TOML): devices, runtimes, models with their rules, settings.
    #[arg(long, value_name = "FILE", required = true)]
    pub plan: Option<PathBuf>,
    /// Run shard I of N: the plan's units (a [[device]] entry, a host-HTP SoC, a --device serial)
    /// at positions I, I+N, I+2N, … in plan order, so N shards run every cell once [default: all].
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// `--out`: the sweep directory; running again with the same one resumes [default:
    /// npugate-sweeps/<name>/<night>, a shard's …/<night>-shard-I-of-N].
    #[command(flatten)]
    pub out: OutArg,
    /// The night this sweep belongs to (default: today, UTC).
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = npugate_sweeps::sweep::parse_night)]
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

/// Subcommands of `npugate sweep`.
#[derive(Debug, Subcommand)]
pub enum SweepCommand {
    /// Merge shard results (`npugate sweep --shard I/N`) into one sweep directory, history night and
    /// matrix report; a missing shard's cells are named absent (exit 2).
    Merge(MergeArgs),
}

/// Arguments of `npugate sweep merge`.
#[derive(Debug, Args)]
#[command(mut_arg("out", |out| out.help("The merged sweep directory: missing, empty, or an earlier merge, which is replaced [default: npugate-sweeps/<name>/<night>]")))]
pub struct MergeArgs {
    /// The shard results: the --out folders of `npugate sweep --shard I/N`, one per shard.
    #[arg(value_name = "DIR", required = true)]
    pub shards: Vec<PathBuf>,
    /// `--out`: the merged sweep directory (missing, empty, or an earlier merge, which is replaced)
    /// [default: npugate-sweeps/<name>/<night>].
    #[command(flatten)]
    pub out: OutArg,
    /// `--history`: the store the merged night is recorded in.
    #[command(flatten)]
    pub history: HistoryArg,
}

/// Runs `npugate sweep` or `npugate sweep merge`.
pub fn run(args: SweepArgs, console: &super::console::Console) -> Result<u8> {
    match (&args.command, &args.plan) {
        (Some(SweepCommand::Merge(merge)), _) => run_merge(merge),
        (None, Some(plan)) => run_plan(plan, &args, console),
        (None, None) => anyhow::bail!("give --plan sweep.toml, or `npugate sweep merge DIR…`"),
    }
}

/// `npugate sweep --plan`.
fn run_plan(plan_file: &Path, args: &SweepArgs, console: &super::console::Console) -> Result<u8> {
    // Every flag becomes a typed value before the plan: after it, the sweep reads only the plan
    // and these.
    let bundle = args.evidence.bundle()?;
    let (night, shard, out) = (args.night.clone(), args.shard, args.out.out.clone());
    let devices_args = &args.devices;
    let (adb, selectors) = (devices_args.devices.adb()?, devices_args.devices.devices.clone());
    let (adb_settings, policy) = (devices_args.adb_settings(), devices_args.policy(console));
    let timeouts = Timeouts::LOCAL.with_run(devices_args.run_timeout());
    let (harness, history) = (args.harness.harness.clone(), args.history.path());
    let plan = SweepPlan::load(plan_file)?;
    for model in &plan.models {
        if let Some(skipped) = model.subject.reference.skipped_for(&model.settings) {
            eprintln!("npugate sweep: warning: model {}: {skipped}", model.name);
        }
    }
    let default_night = night.clone().unwrap_or_else(npugate_sweeps::sweep::today);
    let out = out.unwrap_or_else(|| {
        let folder = match shard {
            Some(shard) => format!("{default_night}-{}", shard.folder()),
            None => default_night.clone(),
        };
        PathBuf::from("npugate-sweeps").join(&plan.name).join(folder)
    });
    let cut = Cut { units: sweep::plan_units(&plan, &adb, &selectors)?, shard };
    let mut devices: Vec<SweepTarget<Box<dyn Target>>> =
        sweep::resolve_devices(&plan, &adb, &cut, &adb_settings)?.into_iter().map(SweepTarget::boxed).collect();
    devices.extend(sweep::host_htp_targets(&plan, &cut).into_iter().map(SweepTarget::boxed));
    if cut.taken().any(|(_, unit)| matches!(unit, npugate_sweeps::sweep::unit::Unit::AiHub(_))) {
        let session = std::sync::Arc::new(super::options::aihub_session()?);
        devices.extend(sweep::aihub_targets(&plan, &cut, &session)?.into_iter().map(SweepTarget::boxed));
    }
    let options = SweepOptions {
        out: &out,
        night: night.as_deref(),
        harness: harness.as_deref(),
        policy: &policy,
        timeouts,
        cut: &cut,
    };
    let summary = sweep::run_sweep(&plan, &devices, &options)?;
    let (written, history_ok) = report(&summary, &out, &history)?;
    if let Some((bundle_dir, key)) = &bundle {
        let manifest = sweep::evidence::for_sweep(&plan, &out, harness.as_deref(), &written)?.write(bundle_dir, key)?;
        eprintln!(
            "npugate sweep: evidence bundle of {} files signed in {}",
            manifest.files.len(),
            bundle_dir.display()
        );
    }
    let code = summary.exit_code.unwrap_or(EXIT_ERROR);
    Ok(if history_ok { code } else { EXIT_ERROR })
}

/// `npugate sweep merge`.
fn run_merge(args: &MergeArgs) -> Result<u8> {
    let out = match args.out.out.clone() {
        Some(out) => out,
        None => {
            let first = args.shards.first().and_then(|dir| SweepSummary::read(dir));
            let first = first.ok_or_else(|| {
                anyhow::anyhow!(
                    "{} holds no sweep; give the --out folders of `npugate sweep --shard I/N`",
                    args.shards[0].display()
                )
            })?;
            PathBuf::from("npugate-sweeps").join(&first.name).join(&first.night)
        }
    };
    let summary = npugate_sweeps::sweep::merge(&args.shards, &out)?;
    if let Some(merged) = &summary.merged {
        for missing in &merged.missing {
            let units: Vec<String> = missing.units.iter().map(|unit| unit.label()).collect();
            eprintln!(
                "npugate sweep merge: shard {}/{} is missing: its cells on {} are absent",
                missing.index,
                merged.count,
                units.join(", ")
            );
        }
    }
    let (_, history_ok) = report(&summary, &out, &args.history.path())?;
    let code = summary.exit_code.unwrap_or(EXIT_ERROR);
    Ok(if history_ok { code } else { EXIT_ERROR })
}

/// Records the sweep in the history, writes its matrix report and says where everything is;
/// returns the reports written and whether the history was updated.
fn report(summary: &SweepSummary, out: &Path, history_path: &Path) -> Result<(Vec<PathBuf>, bool)> {
    let (trends, history_ok) = match record_and_trend(summary, out, history_path) {
        Ok(trends) => (Some(trends), true),
        Err(error) => {
            eprintln!("npugate sweep: error: the history was not updated: {error:#}");
            (None, false)
        }
    };
    let written = matrix::write(&Matrix::build(summary, out, trends)?, out)?;
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
    Ok((written, history_ok))
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
