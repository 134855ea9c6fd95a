//! `npugate compare --baseline-model A --model B`: both models interleaved on the same device in
//! one session (ABBA rounds), judged on the paired ratio B/A and on their placements. Exit 0 pass,
//! 1 a rule failed, 2 could not judge.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use npugate_gate::compare::CompareRules;
use npugate_gate::export::Format;
use npugate_settings::HarnessSettings;

use super::options::{DeviceRunArgs, HealthArgs};
use super::run::{HOST_RUNTIME, LOCAL_TIMEOUT};
use crate::compare::{compare_on, CompareReport, CompareSpec};
use crate::confirm::run_confirmed;
use crate::layout::default_out_dir;
use crate::pipeline::Sinks;
use crate::runtime::RuntimeManifest;
use crate::targets::adb::AdbTarget;
use crate::targets::host::HostTarget;
use crate::targets::{Job, Silent, Target};
use crate::{device_rack, devices, harnesses};

/// Arguments of `npugate compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline model A (e.g. the one on the main branch).
    #[arg(long, value_name = "PATH")]
    pub baseline_model: PathBuf,
    /// The candidate model B (the one under review).
    #[arg(long, value_name = "PATH")]
    pub model: PathBuf,
    /// Run on this machine (no device needed).
    #[arg(long)]
    pub local: bool,
    /// Runtime (library set) name or directory; `--local` defaults to the host ONNX Runtime.
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,
    /// Comparison directory (default: npugate-results/<model>/compare); a rack puts each device in <out>/<serial>/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The harness binary (default: the one built for the target).
    #[arg(long, value_name = "PATH")]
    pub harness: Option<PathBuf>,
    /// Rounds: each model runs once per round, in ABBA order (AB, BA, AB, …).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=99))]
    pub rounds: u32,
    /// Timed runs of each model in each round (instead of --runs).
    #[arg(long, default_value_t = 20, conflicts_with = "runs", value_parser = clap::value_parser!(u32).range(1..))]
    pub runs_per_round: u32,
    /// When only the slowdown fails, run the whole comparison K more times and fail only when most
    /// attempts fail; every attempt is kept (`attempt-N/`) and listed.
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub confirm: u32,
    /// Compare rules file (TOML): max_slowdown_pct (default 5), placement_must_match (default true), disable.
    #[arg(long = "gate", value_name = "FILE")]
    pub rules_file: Option<PathBuf>,
    /// Override one compare rule, `name=value` (repeatable), e.g. `--rule max_slowdown_pct=2`.
    #[arg(long = "rule", value_name = "NAME=VALUE")]
    pub rule_overrides: Vec<String>,
    /// Output format (repeatable): terminal, json, markdown, github, junit, html.
    #[arg(long = "format", value_name = "FORMAT", default_value = "terminal")]
    pub formats: Vec<Format>,
    /// Write the formats to this file (one format) or directory (several) instead of stdout.
    #[arg(long = "report", value_name = "PATH")]
    pub report: Option<PathBuf>,
    /// Print `npugate.compare/1` JSON instead of the terminal report.
    #[arg(long)]
    pub json: bool,
    /// Measurement settings, the same for both models (`--runs` is `--runs-per-round` here).
    #[command(flatten)]
    pub settings: HarnessSettings,
    /// Devices over adb (`--device SERIAL|all`, `--adb`, `--work-dir`, `--retries`, `--cooldown-until`, …).
    #[command(flatten)]
    pub devices: DeviceRunArgs,
    /// Device health (`--skip-noisy`, `--history`).
    #[command(flatten)]
    pub health: HealthArgs,
}

/// Runs `npugate compare`.
pub fn run(mut args: CompareArgs) -> Result<u8> {
    if args.json {
        args.formats = vec![Format::Json];
    }
    if args.settings.check_outputs {
        bail!("compare does not check outputs; check each model with `npugate run --check-outputs`");
    }
    for model in [&args.baseline_model, &args.model] {
        anyhow::ensure!(model.is_file(), "model {} not found", model.display());
    }
    let rules = CompareRules::load(args.rules_file.as_deref(), &args.rule_overrides)?;
    let sinks = Sinks { formats: args.formats.clone(), report: args.report.clone() };
    let cancel = super::options::interrupt_flag();
    let wanted_devices = !args.local && args.devices.devices.wanted();
    if !args.local && !wanted_devices {
        bail!("choose where to compare: --local (this machine) or --device SERIAL|all (over adb)");
    }
    let runtime = match (&args.runtime, wanted_devices) {
        (Some(name), _) => RuntimeManifest::load(name)?,
        (None, false) => RuntimeManifest::load(HOST_RUNTIME)?,
        (None, true) => bail!("--device needs --runtime NAME (a runtime built for the device)"),
    };
    let harness = match (&args.harness, wanted_devices) {
        (Some(path), _) => path.clone(),
        (None, false) => harnesses::host()?,
        (None, true) => harnesses::for_target(&runtime.target)?,
    };
    let out = args.out.clone().unwrap_or_else(|| default_out_dir(&args.model, "compare"));
    let timeout = if wanted_devices { args.devices.run_timeout() } else { LOCAL_TIMEOUT };
    let job = Job { harness: &harness, runtime: &runtime, model: &args.model, prepared: None, settings: &args.settings, env: &[], timeout, cancel: &cancel };
    let spec = CompareSpec {
        job,
        baseline: &args.baseline_model,
        candidate: &args.model,
        rounds: args.rounds as usize,
        runs_per_round: args.runs_per_round,
        rules: &rules,
    };
    if !wanted_devices {
        let report = run_confirmed(args.confirm, &out, |dir| compare_on(&HostTarget::new(), &spec, dir, &Silent))?;
        sinks.emit(&report.verdict)?;
        eprintln!("npugate: comparison, every run and report in {}", report.dir.display());
        return Ok(report.verdict.exit_code());
    }
    let adb = args.devices.devices.adb()?;
    let serials = args.health.keep_healthy(devices::select(&adb, &args.devices.devices.devices)?)?;
    let targets: Vec<AdbTarget> =
        serials.iter().map(|serial| AdbTarget::new(&adb, serial, &args.devices.adb_settings())).collect();
    let on_done = |target: &AdbTarget, report: &CompareReport| match sinks.render_for_device(&report.verdict, &report.dir) {
        Ok(text) => print!("{text}"),
        Err(error) => eprintln!("npugate: {}: error: {error:#}", target.name()),
    };
    let work = |target: &AdbTarget, dir: &std::path::Path, progress: &dyn crate::targets::Progress| {
        run_confirmed(args.confirm, dir, |d| compare_on(target, &spec, d, progress))
    };
    let rack = device_rack::on_devices(&targets, &out, &args.devices.policy(&cancel), work, &on_done)
        .with_context(|| format!("comparing on {}", serials.join(", ")))?;
    for device in &rack.report.devices {
        let dir = device.result_dir.as_ref().map(|d| d.display().to_string()).unwrap_or_else(|| "-".into());
        println!("{}\t{}\t{dir}", device.serial, device.summary());
    }
    Ok(rack.report.exit_code)
}
