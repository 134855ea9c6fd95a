//! `npugate run`: run the harness on a model (here with `--local`), pull nothing, then analyze
//! placement and gate. Exit code 0 pass, 1 a rule failed, 2 the run could not be judged.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;
use ed25519_dalek::SigningKey;

use crate::evidence::{self, Bundle, EvidenceOptions};
use crate::invocation::{HarnessSettings, TargetPaths};
use crate::judging::{self, GateOptions};
use crate::output_check::{self, OutputCheckOptions, REFERENCE_DIR};
use crate::runtime::RuntimeManifest;

/// The runtime `--local` uses when none is given.
pub const HOST_RUNTIME: &str = "ort-1.31.1-linux-x86_64";

/// Arguments of `npugate run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The ONNX model.
    #[arg(long, value_name = "PATH")]
    pub model: PathBuf,
    /// Run on this machine (the embedded default; no device needed).
    #[arg(long)]
    pub local: bool,
    /// Runtime (library set) name or directory; `--local` defaults to the host ONNX Runtime.
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,
    /// Result directory (default: npugate-results/<model>/local).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The harness binary (default: npugate-harness next to this executable).
    #[arg(long, value_name = "PATH")]
    pub harness: Option<PathBuf>,
    /// Only measure: skip placement analysis and the gate.
    #[arg(long)]
    pub no_gate: bool,
    /// Print the verdict as JSON (`npugate.verdict/1`) instead of the terminal report.
    #[arg(long)]
    pub json: bool,
    /// Measurement settings.
    #[command(flatten)]
    pub settings: HarnessSettings,
    /// Output check settings that stay on the host (`--reference-model`).
    #[command(flatten)]
    pub outputs: OutputCheckOptions,
    /// Gate settings.
    #[command(flatten)]
    pub gate: GateOptions,
    /// Evidence bundle (`--evidence OUT`, `--signing-key FILE`).
    #[command(flatten)]
    pub evidence: EvidenceOptions,
    /// Devices over adb (`--device SERIAL|all`, `--adb`, `--adb-server`, `--work-dir`, `--retries`, …).
    #[command(flatten)]
    pub devices: crate::remote::DeviceRunOptions,
}

/// Runs `npugate run`.
pub fn run(mut args: RunArgs) -> Result<u8> {
    if args.json {
        args.gate.formats = vec![gate::export::Format::Json];
    }
    let signing_key = args.evidence.key()?;
    if !args.local && args.devices.wanted() {
        return on_devices(&args, signing_key.as_ref());
    }
    if !args.local {
        bail!("choose where to run: --local (this machine) or --device SERIAL|all (over adb)");
    }
    let runtime = RuntimeManifest::load(args.runtime.as_deref().unwrap_or(HOST_RUNTIME))?;
    let harness = match &args.harness {
        Some(path) => path.clone(),
        None => sibling_binary("npugate-harness")?,
    };
    let out = args.out.clone().unwrap_or_else(|| default_out_dir(&args.model, "local"));
    prepare_out_dir(&out)?;
    let paths = TargetPaths {
        ort_lib: runtime.ort_library_path().display().to_string(),
        ep_library: runtime.ep_library_path().map(|p| p.display().to_string()),
        model: args.model.display().to_string(),
        out: out.display().to_string(),
        input_files: args.settings.input_files().iter().map(|p| p.display().to_string()).collect(),
    };
    let status = Command::new(&harness)
        .args(args.settings.harness_args(&paths, Some(&runtime.name)))
        .status()
        .with_context(|| format!("cannot start the harness {}", harness.display()))?;
    let has_result = out.join(npugate_result::files::RESULT).is_file();
    if !status.success() && !has_result {
        bail!("the harness failed ({status}) before measuring anything; see its message above");
    }
    let outputs_ok = !args.settings.check_outputs
        || output_check::check_local(&args.outputs, &args.model, &harness, &args.settings, &out);
    let harness_ok = status.success() && outputs_ok;
    let code = if args.no_gate {
        eprintln!("npugate: result in {}", out.display());
        crate::EXIT_PASS
    } else {
        let verdict = judging::judge_dir(&out, &args.gate)?;
        let code = judging::emit(&verdict, &args.gate)?;
        eprintln!("npugate: result, verdict and report in {}", out.display());
        code
    };
    if let Some(key) = &signing_key {
        write_evidence(&args, key, Bundle::new().run("local", &out).subject(
            &args.model,
            args.outputs.reference_model.as_deref(),
            &harness,
            &runtime,
            &args.settings,
        ))?;
    }
    Ok(if harness_ok { code } else { crate::EXIT_ERROR })
}

/// `npugate run --device …`: the same harness settings and gate, on each device over adb; results
/// in `<out>/<serial>/`.
fn on_devices(args: &RunArgs, signing_key: Option<&SigningKey>) -> Result<u8> {
    let runtime_name = args.runtime.as_deref().context("--device needs --runtime NAME (a runtime built for the device)")?;
    let runtime = RuntimeManifest::load(runtime_name)?;
    let out = args.out.clone().unwrap_or_else(|| default_out_dir(&args.model, "devices"));
    let harness_args = |paths: &TargetPaths| args.settings.harness_args(paths, Some(&runtime.name));
    let reference = match args.settings.check_outputs {
        true => {
            let host_harness = sibling_binary("npugate-harness")?;
            Some(output_check::reference_for(&args.outputs, &args.model, &host_harness, &args.settings, &out.join(REFERENCE_DIR))?)
        }
        false => None,
    };
    let judge = |dir: &Path| -> Result<(u8, String)> {
        let outputs_ok = match &reference {
            Some(reference) => reference.compare_reporting(dir),
            None => true,
        };
        let (code, text) = match args.no_gate {
            true => (crate::EXIT_PASS, String::new()),
            false => judging::emit_for_device(&judging::judge_dir(dir, &args.gate)?, &args.gate, dir)?,
        };
        Ok((if outputs_ok { code } else { crate::EXIT_ERROR }, text))
    };
    let inputs = args.settings.input_files();
    let plan = args.devices.plan(&runtime, &args.model, &inputs, args.harness.as_deref(), &harness_args);
    let code = crate::remote::run_on_devices(&args.devices, &plan, &out, &judge)?;
    if reference.is_some() {
        match crate::cmd::outputs::table(std::slice::from_ref(&out), crate::cmd::outputs::TableFormat::Terminal, false) {
            Ok(table) => print!("{table}"),
            Err(error) => eprintln!("npugate: no cross-device output table: {error:#}"),
        }
    }
    if let Some(key) = signing_key {
        let harness = match &args.harness {
            Some(path) => path.clone(),
            None => crate::device_run::harness_for(&runtime.target)?,
        };
        let mut bundle = evidence::runs_below(Bundle::new(), &out)?.subject(
            &args.model,
            args.outputs.reference_model.as_deref(),
            &harness,
            &runtime,
            &args.settings,
        );
        if reference.is_some() {
            let host = RuntimeManifest::load(HOST_RUNTIME)?;
            bundle = bundle.runtime(&host).file("harness", "harness/host/npugate-harness", &sibling_binary("npugate-harness")?);
        }
        write_evidence(args, key, bundle)?;
    }
    Ok(code)
}

/// Writes and signs the `--evidence` bundle.
fn write_evidence(args: &RunArgs, key: &SigningKey, bundle: Bundle) -> Result<()> {
    let Some(out) = &args.evidence.evidence else { return Ok(()) };
    let manifest = bundle.write(out, key)?;
    eprintln!("npugate: evidence bundle of {} files signed in {}", manifest.files.len(), out.display());
    Ok(())
}

/// A binary installed next to the running `npugate`.
pub fn sibling_binary(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot locate the npugate executable")?;
    let path = exe.with_file_name(name);
    if !path.is_file() {
        bail!("{} not found next to {}; build it (cargo build --release) or pass --harness", name, exe.display());
    }
    Ok(path)
}

/// `npugate-results/<model stem>/<target>`.
pub fn default_out_dir(model: &Path, target: &str) -> PathBuf {
    let stem = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    PathBuf::from("npugate-results").join(stem).join(target)
}

/// Makes `out` an empty directory; a previous npugate result there is replaced, anything else is
/// refused so no unrelated file is deleted.
pub fn prepare_out_dir(out: &Path) -> Result<()> {
    if out.exists() {
        let has_entries = std::fs::read_dir(out).with_context(|| format!("cannot read {}", out.display()))?.next().is_some();
        if has_entries {
            if !out.join(npugate_result::files::RESULT).is_file() {
                bail!("{} is not empty and holds no npugate result; choose another --out", out.display());
            }
            std::fs::remove_dir_all(out).with_context(|| format!("cannot clear {}", out.display()))?;
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))
}
