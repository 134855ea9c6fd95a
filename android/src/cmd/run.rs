//! `npugate run`: run the harness on a model on this machine (`--local`) or on devices over adb
//! (`--device`), check its outputs, judge it and report. Exit code 0 pass, 1 a rule failed, 2 the
//! run could not be judged.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use ed25519_dalek::SigningKey;
use npugate_gate::export::Format;
use npugate_settings::{EpKind, HarnessSettings};
use npugate_result::files;

use super::options::{DeviceRunArgs, EvidenceArgs, GateArgs, HealthArgs};
use crate::confirm::run_confirmed;
use crate::evidence::{Bundle, VerdictSummary};
use crate::layout::{default_out_dir, Placed};
use crate::output_check::ReferenceRequest;
use crate::pipeline::{GateSpec, OutputsCheck, Sinks};
use crate::run::{run_on, ReferenceSource, RunReport, RunSpec};
use crate::runtime::RuntimeManifest;
use crate::targets::adb::AdbTarget;
use crate::htp::compiled::CompiledFor;
use crate::htp::versions::QnnChoice;
use crate::htp::HostHtp;
use crate::targets::host::HostTarget;
use crate::targets::wine::{self, WineTarget};
use crate::targets::{Cancel, Execution, Job, Silent, Target};
use crate::{consistency, device_rack, devices, harnesses};

/// The runtime `--local` uses when none is given.
pub const HOST_RUNTIME: &str = "ort-1.31.1-linux-x86_64";
/// The longest a local harness run may take.
pub const LOCAL_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Arguments of `npugate run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The ONNX model.
    #[arg(long, value_name = "PATH")]
    pub model: PathBuf,
    /// Run on this machine (the embedded default; no device needed).
    #[arg(long)]
    pub local: bool,
    /// Runtime (library set) name or directory; `--local` defaults to the host ONNX Runtime, or
    /// to the pinned host runtime that has the `--ep` asked for (`--ep openvino`: openvino-1.24.1-linux-x86_64).
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,
    /// Result directory (default: npugate-results/<model>/local).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The harness binary (default: npugate-harness next to this executable; with `--local --ep
    /// qnn`, the Windows harness that runs Qualcomm's host HTP emulator under wine).
    #[arg(long, value_name = "PATH")]
    pub harness: Option<PathBuf>,
    /// With `--local --ep qnn`: the Snapdragon the host HTP emulator is configured as, e.g.
    /// SM8350 [default: SM8650]. Outputs are checked, latency is not judged.
    #[arg(long, value_name = "SOC", value_parser = crate::hexagon::find)]
    pub soc: Option<crate::hexagon::Soc>,
    /// With `--local --ep qnn`: the QNN version of the host HTP emulator, e.g. `2.49.40` or `2.51`
    /// (chooses its runtime; one version per run — a sweep plan's `qnn = [...]` runs several).
    #[arg(long = "qnn", value_name = "VERSION", conflicts_with = "runtime")]
    pub qnn: Vec<QnnChoice>,
    /// Only measure: skip placement analysis and the gate.
    #[arg(long)]
    pub no_gate: bool,
    /// Print the verdict as JSON (`npugate.verdict/1`) instead of the terminal report.
    #[arg(long)]
    pub json: bool,
    /// Model whose fp32 CPU outputs are the reference, e.g. the float model of a QDQ model
    /// (default: the model itself). Needs --check-outputs.
    #[arg(long, value_name = "PATH", requires = "check_outputs")]
    pub reference_model: Option<PathBuf>,
    /// When only latency rules fail, rerun K more times and fail only when most attempts fail;
    /// every attempt is kept (`attempt-N/`) and listed in the verdict.
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub confirm: u32,
    /// Measurement settings.
    #[command(flatten)]
    pub settings: HarnessSettings,
    /// Gate settings.
    #[command(flatten)]
    pub gate: GateArgs,
    /// Evidence bundle (`--evidence OUT`, `--signing-key FILE`).
    #[command(flatten)]
    pub evidence: EvidenceArgs,
    /// Devices over adb (`--device SERIAL|all`, `--adb`, `--adb-server`, `--work-dir`, `--retries`, …).
    #[command(flatten)]
    pub devices: DeviceRunArgs,
    /// Device health (`--skip-noisy`, `--history`).
    #[command(flatten)]
    pub health: HealthArgs,
}

/// What every target of one `npugate run` shares.
struct Common {
    gate: Option<GateSpec>,
    sinks: Sinks,
    bundle: Option<(PathBuf, SigningKey)>,
    cancel: Cancel,
}

/// Runs `npugate run`.
pub fn run(mut args: RunArgs) -> Result<u8> {
    if args.json {
        args.gate.formats = vec![Format::Json];
    }
    let common = Common {
        gate: (!args.no_gate).then(|| args.gate.spec()).transpose()?,
        sinks: args.gate.sinks(),
        bundle: args.evidence.bundle()?,
        cancel: super::options::interrupt_flag(),
    };
    // A model that cannot run anywhere (its data missing or out of its folder, a bad --shape) is
    // one error before any device is touched, not one infrastructure failure per device.
    crate::model::check(&args.model, &args.settings.shapes, &args.settings.inputs)?;
    if !args.local && args.devices.devices.wanted() {
        return on_devices(&args, &common);
    }
    if !args.local {
        bail!("choose where to run: --local (this machine) or --device SERIAL|all (over adb)");
    }
    local(&args, &common)
}

/// `--local`: one run on this machine into `--out` — natively, or with `--ep qnn` on the host
/// HTP emulator under wine.
fn local(args: &RunArgs, common: &Common) -> Result<u8> {
    let emulated = emulated_htp(args)?;
    let (runtime, harness, target): (RuntimeManifest, PathBuf, Box<dyn Target>) = match emulated {
        Some((host, wine)) => (host.runtime, host.harness, Box::new(wine)),
        None => {
            let runtime = match &args.runtime {
                Some(name) => RuntimeManifest::load(name)?,
                None => RuntimeManifest::load(&local_runtime(&args.settings)?)?,
            };
            let harness = match &args.harness {
                Some(path) => path.clone(),
                None => harnesses::host()?,
            };
            (runtime, harness, Box::new(HostTarget::new()))
        }
    };
    let out = args.out.clone().unwrap_or_else(|| default_out_dir(&args.model, "local"));
    let (host_runtime, host_harness);
    let reference = if args.settings.check_outputs {
        host_runtime = RuntimeManifest::load(HOST_RUNTIME)?;
        // The fp32 reference runs natively on this machine, also for a run on the HTP emulator.
        host_harness = if runtime.target == crate::targets::host_triple() { harness.clone() } else { harnesses::host()? };
        Some(ReferenceSource::RunInside(reference_request(args, &host_harness, &host_runtime)))
    } else {
        None
    };
    let job = job(args, &harness, &runtime, LOCAL_TIMEOUT, &common.cancel);
    let spec = RunSpec { job, gate: common.gate.as_ref(), reference };
    let report = run_confirmed(args.confirm, &out, |dir| run_on(target.as_ref(), &spec, dir, &Silent))?;
    report_problems(&report.execution, &report.outputs, &report.placed);
    if let Some(verdict) = &report.verdict {
        common.sinks.emit(verdict)?;
        eprintln!("npugate: result, verdict and report in {}", report.placed.dir().display());
    } else {
        eprintln!("npugate: result in {}", report.placed.dir().display());
    }
    if let Some((bundle_dir, key)) = &common.bundle {
        let verdict = report.verdict.as_ref().map(VerdictSummary::of);
        let bundle = Bundle::new()
            .run("local", report.placed.dir(), &report.result, verdict)
            .subject(&args.model, args.reference_model.as_deref(), &harness, &runtime, &args.settings)?;
        write_evidence(bundle, bundle_dir, key)?;
    }
    Ok(report.exit_code)
}

/// With `--ep qnn` and no runtime of another target: the host HTP (its harness and runtime) and
/// the wine target configured as `--soc`; a compiled model is checked against that SoC first.
fn emulated_htp(args: &RunArgs) -> Result<Option<(HostHtp, WineTarget)>> {
    let wine_runtime = match &args.runtime {
        None => true,
        Some(name) => RuntimeManifest::load(name).is_ok_and(|r| r.target == wine::TRIPLE),
    };
    if args.settings.ep != EpKind::Qnn || !wine_runtime {
        if args.soc.is_some() || !args.qnn.is_empty() {
            bail!("--soc and --qnn choose the SoC and QNN version of the host HTP emulator: they need --ep qnn (and a Windows x64 runtime, the default)");
        }
        return Ok(None);
    }
    if args.soc.is_some() && args.settings.qnn.soc_model.is_some() {
        bail!("--soc and --soc-model both choose the SoC; drop --soc-model");
    }
    let soc = match args.soc {
        Some(soc) => soc,
        None => crate::hexagon::find(crate::htp::DEFAULT_SOC).map_err(anyhow::Error::msg)?,
    };
    let host = match HostHtp::for_versions(args.runtime.as_deref(), &args.qnn, args.harness.as_deref())?.as_slice() {
        [one] => one.clone(),
        several => bail!(
            "--qnn names {} QNN versions ({}); a run takes one (a sweep plan's qnn = [...] runs several)",
            several.len(),
            several.iter().map(HostHtp::qnn_sdk).collect::<Vec<_>>().join(", ")
        ),
    };
    if let Some(compiled) = CompiledFor::read(&args.model)? {
        let name = format!("the host HTP emulator as {}", soc.model);
        for warning in compiled.check(&args.model, &name, Some(soc.model), Some(soc.arch), &host.runtime.name, host.runtime.qnn_build().as_deref())? {
            eprintln!("npugate: warning: {warning}");
        }
    }
    Ok(Some((host, WineTarget::for_soc(soc))))
}

/// Refuses devices a model compiled by `npugate compile` does not fit (another Hexagon arch, a
/// runtime with another QNN), naming both sides, before anything is pushed.
fn check_compiled_model(args: &RunArgs, adb: &crate::adb::Adb, serials: &[String], runtime: &RuntimeManifest) -> Result<()> {
    let Some(compiled) = CompiledFor::read(&args.model)? else {
        return Ok(());
    };
    let build = runtime.qnn_build();
    for serial in serials {
        let device = devices::probe(adb, serial).with_context(|| format!("cannot probe device {serial}"))?;
        let name = format!("device {serial}");
        for warning in compiled.check(&args.model, &name, device.soc.as_deref(), device.hexagon_arch.as_deref(), &runtime.name, build.as_deref())? {
            eprintln!("npugate: warning: {warning}");
        }
    }
    Ok(())
}

/// `--device …`: the same run on each chosen device; results in `<out>/<serial>/`.
fn on_devices(args: &RunArgs, common: &Common) -> Result<u8> {
    let adb = args.devices.devices.adb()?;
    let serials = args.health.keep_healthy(devices::select(&adb, &args.devices.devices.devices)?)?;
    let runtime = match args.runtime.as_deref() {
        Some(name) => RuntimeManifest::load(name)?,
        None => {
            let target = devices::common_target(&adb, &serials)?;
            let runtime = crate::runtime::choose::newest_for(&target, args.settings.ep.ort_name(), &crate::runtime::choose::fetched())?;
            eprintln!("npugate: no --runtime given: using {} (the newest fetched runtime for {target})", runtime.name);
            runtime
        }
    };
    if args.soc.is_some() || !args.qnn.is_empty() {
        bail!("--soc and --qnn choose the SoC and QNN version of the host HTP emulator (--local --ep qnn); a device is the SoC it is and runs the --runtime it gets");
    }
    check_compiled_model(args, &adb, &serials, &runtime)?;
    let harness = match &args.harness {
        Some(path) => path.clone(),
        None => harnesses::for_target(&runtime.target)?,
    };
    let out = args.out.clone().unwrap_or_else(|| default_out_dir(&args.model, "devices"));
    let (host_harness, host_runtime) = match args.settings.check_outputs {
        true => (Some(harnesses::host()?), Some(RuntimeManifest::load(HOST_RUNTIME)?)),
        false => (None, None),
    };
    let reference = match (&host_harness, &host_runtime) {
        (Some(host_harness), Some(host_runtime)) => {
            let request = reference_request(args, host_harness, host_runtime);
            Some(request.run(&out.join(files::OUTPUT_REFERENCE_DIR), &common.cancel)?)
        }
        _ => None,
    };
    let targets: Vec<AdbTarget> =
        serials.iter().map(|serial| AdbTarget::new(&adb, serial, &args.devices.adb_settings())).collect();
    let job = job(args, &harness, &runtime, args.devices.run_timeout(), &common.cancel);
    let spec = RunSpec { job, gate: common.gate.as_ref(), reference: reference.as_ref().map(ReferenceSource::Ready) };
    let on_done = |target: &AdbTarget, report: &RunReport| {
        for warning in &report.execution.warnings {
            eprintln!("npugate: {}: warning: {warning}", crate::targets::Target::name(target));
        }
        report_problems(&report.execution, &report.outputs, &report.placed);
        if let Some(verdict) = &report.verdict {
            match common.sinks.render_for_device(verdict, report.placed.dir()) {
                Ok(text) => print!("{text}"),
                Err(error) => eprintln!("npugate: error: {error:#}"),
            }
        }
    };
    let rack = device_rack::run_on_devices(&targets, &spec, args.confirm, &out, &args.devices.policy(&common.cancel), &on_done)?;
    for device in &rack.report.devices {
        let dir = device.result_dir.as_ref().map(|d| d.display().to_string()).unwrap_or_else(|| "-".into());
        println!("{}\t{}\t{dir}", device.serial, device.summary());
    }
    let finished: Vec<&RunReport> = rack.results.iter().flatten().collect();
    if reference.is_some() {
        let compared: Vec<_> = finished
            .iter()
            .filter_map(|report| match &report.outputs {
                OutputsCheck::Compared(outputs) => Some((&report.result, outputs)),
                _ => None,
            })
            .collect();
        match consistency::table(&compared, consistency::TableFormat::Terminal, false) {
            Ok(table) => print!("{table}"),
            Err(error) => eprintln!("npugate: no cross-device output table: {error:#}"),
        }
    }
    if let Some((bundle_dir, key)) = &common.bundle {
        let mut bundle = Bundle::new();
        for report in &finished {
            let label = report.placed.dir().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            bundle = bundle.run(&label, report.placed.dir(), &report.result, report.verdict.as_ref().map(VerdictSummary::of));
        }
        bundle = bundle
            .file("device", files::RACK, &out.join(files::RACK))
            .subject(&args.model, args.reference_model.as_deref(), &harness, &runtime, &args.settings)?;
        if let (Some(reference), Some(host_harness), Some(host_runtime)) = (&reference, &host_harness, &host_runtime) {
            bundle = bundle
                .run(files::OUTPUT_REFERENCE_DIR, &reference.dir, &reference.result, None)
                .runtime(host_runtime)
                .file("harness", "harness/host/npugate-harness", host_harness);
        }
        write_evidence(bundle, bundle_dir, key)?;
    }
    Ok(rack.report.exit_code)
}

/// The runtime `--local` runs without `--runtime`: the pinned host runtime with the `--ep`
/// asked for, else the host ONNX Runtime (whose harness then names the EPs it has).
pub(crate) fn local_runtime(settings: &HarnessSettings) -> Result<String> {
    let with_ep = match settings.ep.ort_name().filter(|_| settings.ep.is_accelerator()) {
        Some(name) => crate::runtime::catalog::with_ep(&crate::targets::host_triple(), name)?,
        None => None,
    };
    Ok(with_ep.unwrap_or_else(|| HOST_RUNTIME.to_string()))
}

/// The harness job of this command on one kind of target.
fn job<'a>(args: &'a RunArgs, harness: &'a Path, runtime: &'a RuntimeManifest, timeout: Duration, cancel: &'a Cancel) -> Job<'a> {
    Job { harness, runtime, model: &args.model, prepared: None, settings: &args.settings, env: &[], timeout, cancel }
}

/// The output check's reference run: `--reference-model` (or the model) on the host.
fn reference_request<'a>(args: &'a RunArgs, harness: &'a Path, runtime: &'a RuntimeManifest) -> ReferenceRequest<'a> {
    ReferenceRequest { harness, runtime, model: args.reference_model.as_deref().unwrap_or(&args.model), settings: &args.settings }
}

/// Says what went wrong besides the verdict: a harness that failed after measuring, an output
/// check that could not be made, a result kept beside a complete one.
fn report_problems(execution: &Execution, outputs: &OutputsCheck, placed: &Placed) {
    if !execution.succeeded() {
        eprintln!("npugate: error: the harness failed ({}) after measuring: {}", execution.status(), execution.last_message());
    }
    if let OutputsCheck::Failed(error) = outputs {
        eprintln!("npugate: error: {error}");
    }
    if let Placed::Beside(dir) = placed {
        eprintln!("npugate: the run is incomplete and was kept in {}; the complete result before it stays in place", dir.display());
    }
}

/// Writes and signs an evidence bundle.
fn write_evidence(bundle: Bundle, out: &Path, key: &SigningKey) -> Result<()> {
    let manifest = bundle.write(out, key)?;
    eprintln!("npugate: evidence bundle of {} files signed in {}", manifest.files.len(), out.display());
    Ok(())
}
