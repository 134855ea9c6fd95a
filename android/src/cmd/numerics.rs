//! `npugate numerics`: where the numbers go wrong — every layer of a model compared with its fp32
//! reference on this machine, on devices or on the host HTP emulator per Snapdragon; exit 0 no divergence, 1 a divergence, 2 could not
//! judge.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use npugate_settings::{EpKind, HarnessSettings};

use super::options::DeviceRunArgs;
use super::run::HOST_RUNTIME;
use crate::numerics::{self, NumericsRequest, TensorChoice, Targets, DEFAULT_MIN_SQNR_DB};
use crate::hexagon::Soc;
use crate::htp::versions::QnnChoice;
use crate::htp::HostHtp;
use crate::runtime::RuntimeManifest;
use crate::targets::adb::AdbTarget;
use crate::targets::host::HostTarget;
use crate::targets::wine::WineTarget;
use crate::targets::Target;
use crate::{devices, harnesses};

/// The longest a local harness run may take.
const LOCAL_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Arguments of `npugate numerics`.
#[derive(Debug, Args)]
pub struct NumericsArgs {
    /// The model under test (e.g. a QDQ model).
    #[arg(long, value_name = "PATH")]
    pub model: PathBuf,
    /// The float model whose fp32 CPU run is the reference (default: the model itself).
    #[arg(long, value_name = "PATH")]
    pub reference_model: Option<PathBuf>,
    /// Run on this machine.
    #[arg(long)]
    pub local: bool,
    /// With `--ep qnn`: run on Qualcomm's host HTP emulator configured as this Snapdragon
    /// (repeatable, e.g. `--soc SM8350 --soc SM8650`): per-chipset numerics without a device.
    #[arg(long = "soc", value_name = "SOC", value_parser = crate::hexagon::find, conflicts_with = "local")]
    pub socs: Vec<Soc>,
    /// With `--soc`: the QNN version of the host HTP emulator (repeatable, e.g. `--qnn 2.49.40 --qnn
    /// 2.51.0`, or `all`): each SoC runs under each version, and each version's outputs are also
    /// compared with the previous version's, naming the first layer where they diverge.
    #[arg(long = "qnn", value_name = "VERSION|all", requires = "socs", conflicts_with = "runtime")]
    pub qnn: Vec<QnnChoice>,
    /// Runtime (library set) of the target; `--local` defaults to the host ONNX Runtime.
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,
    /// The harness binary for the target (default: found next to this executable).
    #[arg(long, value_name = "PATH")]
    pub harness: Option<PathBuf>,
    /// Which tensors to expose: `all` (default), `boundaries` (those crossing a partition
    /// boundary in a plain run on the target) or tensor names.
    #[arg(long, value_name = "all|boundaries|NAME", num_args = 1..)]
    pub tensors: Vec<String>,
    /// A layer whose SQNR falls below this (dB) while its inputs were above it is a divergence.
    #[arg(long, value_name = "DB", default_value_t = DEFAULT_MIN_SQNR_DB)]
    pub min_sqnr_db: f64,
    /// Print `npugate.numerics/1` JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Output directory (default: npugate-numerics/<model>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// How the target runs the model (EP and its options, shapes, inputs, seed, threads); the
    /// timed-loop options do not apply: numerics runs one inference.
    #[command(flatten)]
    pub settings: HarnessSettings,
    /// Devices over adb (`--device SERIAL|all`, `--adb`, `--adb-server`, `--work-dir`, `--retries`, …).
    #[command(flatten)]
    pub devices: DeviceRunArgs,
}

/// Runs `npugate numerics`.
pub fn run(args: NumericsArgs) -> Result<u8> {
    if !args.min_sqnr_db.is_finite() {
        bail!("--min-sqnr-db {} is not a number of dB; pass e.g. --min-sqnr-db 20", args.min_sqnr_db);
    }
    let defaults = HarnessSettings::default();
    let s = &args.settings;
    if (s.runs, s.warmup, s.profile_runs, s.check_outputs, s.no_reference_pass) != (defaults.runs, defaults.warmup, defaults.profile_runs, false, false) {
        eprintln!("npugate: numerics runs one inference and saves every exposed tensor; --runs, --warmup, --profile-runs, --check-outputs and --no-reference-pass do not apply");
    }
    for path in std::iter::once(&args.model).chain(&args.reference_model) {
        if !path.is_file() {
            bail!("model {} not found", path.display());
        }
    }
    let cancel = super::options::interrupt_flag();
    let host_harness = harnesses::host()?;
    let host_runtime = RuntimeManifest::load(HOST_RUNTIME)?;
    let mut emulator_harness = None;
    let mut pairs = Vec::new();
    let (runtimes, targets): (Vec<RuntimeManifest>, Vec<Box<dyn Target>>) = if !args.socs.is_empty() {
        if args.settings.ep != EpKind::Qnn || args.devices.devices.wanted() {
            bail!("--soc runs the model on the host HTP emulator: it needs --ep qnn and no --device");
        }
        let hosts = HostHtp::for_versions(args.runtime.as_deref(), &args.qnn, args.harness.as_deref())?;
        let several = hosts.len() > 1;
        let (mut runtimes, mut targets): (Vec<RuntimeManifest>, Vec<Box<dyn Target>>) = (Vec::new(), Vec::new());
        for soc in &args.socs {
            for (version, host) in hosts.iter().enumerate() {
                if version > 0 {
                    pairs.push((targets.len() - 1, targets.len()));
                }
                let name = if several { format!("{}-qnn{}", soc.model, host.qnn_sdk()) } else { soc.model.to_string() };
                targets.push(Box::new(WineTarget::for_soc(*soc).named(&name)));
                runtimes.push(host.runtime.clone());
            }
        }
        emulator_harness = hosts.into_iter().next().map(|host| host.harness);
        (runtimes, targets)
    } else if !args.local && args.devices.devices.wanted() {
        let adb = args.devices.devices.adb()?;
        let serials = devices::select(&adb, &args.devices.devices.devices)?;
        let name = args.runtime.as_deref().context("--device needs --runtime NAME (a runtime built for the device)")?;
        let targets = serials
            .iter()
            .map(|serial| Box::new(AdbTarget::new(&adb, serial, &args.devices.adb_settings())) as Box<dyn Target>)
            .collect();
        (vec![RuntimeManifest::load(name)?], targets)
    } else if args.local {
        (vec![RuntimeManifest::load(args.runtime.as_deref().unwrap_or(HOST_RUNTIME))?], vec![Box::new(HostTarget::new())])
    } else {
        bail!("choose where to run: --local (this machine), --device SERIAL|all (over adb) or --ep qnn --soc SOC (the host HTP emulator)");
    };
    let harness = match (emulator_harness, &args.harness) {
        (Some(path), _) => path,
        (None, Some(path)) => path.clone(),
        (None, None) => harnesses::for_target(&runtimes[0].target)?,
    };
    let timeout = if args.local || !args.socs.is_empty() { LOCAL_TIMEOUT } else { args.devices.run_timeout() };
    let out = args.out.clone().unwrap_or_else(|| {
        let stem = args.model.file_stem().map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned());
        PathBuf::from("npugate-numerics").join(stem)
    });
    let tensors = TensorChoice::parse(&args.tensors);
    let request = NumericsRequest {
        model: &args.model,
        reference_model: args.reference_model.as_deref().unwrap_or(&args.model),
        tensors: &tensors,
        min_sqnr_db: args.min_sqnr_db,
        settings: &args.settings,
        host_harness: &host_harness,
        host_runtime: &host_runtime,
        out: &out,
        cancel: &cancel,
    };
    let target_refs: Vec<&dyn Target> = targets.iter().map(Box::as_ref).collect();
    let policy = args.devices.policy(&cancel);
    let runtime_refs: Vec<&RuntimeManifest> = runtimes.iter().collect();
    let on = Targets { targets: &target_refs, harness: &harness, runtimes: &runtime_refs, pairs: &pairs, env: &[], timeout, policy: &policy };
    let report = numerics::run(&request, &on)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        print!("{}", numerics::render::text(&report, color));
    }
    eprintln!("npugate: numerics.json and numerics.html in {}", out.display());
    Ok(report.outcome.exit_code())
}
