//! `npugate preflight`: which nodes the QNN EP would claim on a Snapdragon, predicted on this
//! machine without a device; with `--ep openvino` (or another EP of this machine) the session is
//! created on that EP here ([`crate::host_preflight`]). Exit codes as the gate's: 0 every node
//! claimed, 1 some node would fall back to CPU, 2 could not judge.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use harness_settings::{EpKind, KeyValue, ShapeSpec};
use npugate_result::contract::{EXIT_FAIL, EXIT_PASS};
use npugate_result::files;

use crate::harnesses;
use crate::layout::default_out_dir;
use crate::preflight::{summary, unexpected_fallbacks, PreflightRequest, DEFAULT_RUNTIME};
use crate::runtime::RuntimeManifest;
use crate::target::qemu;

/// Arguments of `npugate preflight`.
#[derive(Debug, Args)]
pub struct PreflightArgs {
    /// The ONNX model.
    #[arg(long, value_name = "PATH")]
    pub model: PathBuf,
    /// Runtime with the QNN plugin EP, built for aarch64 Linux (name or directory).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_RUNTIME)]
    pub runtime: String,
    /// Result directory (default: npugate-results/<model>/preflight).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The aarch64 harness (default: the cargo layout's aarch64-unknown-linux-gnu/release build;
    /// build it with scripts/build-aarch64).
    #[arg(long, value_name = "PATH")]
    pub harness: Option<PathBuf>,
    /// Concrete shape for a dynamic input, `name=1x3x224x224` (repeatable).
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    pub shapes: Vec<ShapeSpec>,
    /// Run float graphs in fp16 on HTP (as the device run would) [default: 1].
    #[arg(long, value_name = "0|1", default_value = "1", value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::Set)]
    pub enable_htp_fp16_precision: bool,
    /// Print the placement report as JSON instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// An EP of this machine (openvino, xnnpack, cuda, …): create the session on it here and report
    /// what it claims, instead of predicting QNN (the runtime defaults to the pinned host runtime with it).
    #[arg(long, value_enum)]
    pub ep: Option<EpKind>,
    /// Option of `--ep` (repeatable), e.g. `device_type=NPU` for OpenVINO.
    #[arg(long = "ep-option", value_name = "KEY=VALUE", requires = "ep")]
    pub ep_options: Vec<KeyValue>,
}

/// Runs `npugate preflight`.
pub fn run(args: PreflightArgs) -> Result<u8> {
    if let Some(ep) = args.ep.filter(|ep| *ep != EpKind::Qnn) {
        return on_host(&args, ep);
    }
    let runtime = RuntimeManifest::load(&args.runtime)?;
    let harness = match &args.harness {
        Some(path) => path.clone(),
        None => harnesses::for_target(qemu::TRIPLE)?,
    };
    if !harness.is_file() {
        anyhow::bail!("harness {} does not exist; build it with scripts/build-aarch64 or pass --harness", harness.display());
    }
    let model = args.model.canonicalize().with_context(|| format!("model {} cannot be read; pass --model with an .onnx file", args.model.display()))?;
    let out = args.out.clone().unwrap_or_else(|| default_out_dir(&model, "preflight"));
    let request = PreflightRequest { harness: &harness, runtime: &runtime, model: &model, shapes: &args.shapes, fp16: args.enable_htp_fp16_precision };
    let preflight = request.run(&out, &super::options::interrupt_flag())?;
    if let Some(status) = &preflight.crashed_after_result {
        eprintln!("npugate: note: the harness crashed in teardown ({status}) after writing result.json; the result decides");
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&preflight.report)?);
    } else {
        print!("{}", summary(&preflight.report));
        eprintln!("npugate: result and {} in {}", files::PLACEMENT, preflight.dir.display());
    }
    Ok(if unexpected_fallbacks(&preflight.report).next().is_some() { EXIT_FAIL } else { EXIT_PASS })
}

/// `npugate preflight --ep openvino …`: the session on an EP of this machine.
fn on_host(args: &PreflightArgs, ep: EpKind) -> Result<u8> {
    let settings = harness_settings::HarnessSettings { ep, ..Default::default() };
    let name = if args.runtime == DEFAULT_RUNTIME { super::run::local_runtime(&settings)? } else { args.runtime.clone() };
    let runtime = RuntimeManifest::load(&name)?;
    let harness = match &args.harness {
        Some(path) => path.clone(),
        None => harnesses::host()?,
    };
    let out = args.out.clone().unwrap_or_else(|| default_out_dir(&args.model, "preflight"));
    let preflight = crate::host_preflight::HostPreflight { harness: &harness, runtime: &runtime, model: &args.model, ep, ep_options: &args.ep_options, shapes: &args.shapes };
    let (dir, report) = preflight.run(&out, &super::options::interrupt_flag())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let color = std::io::IsTerminal::is_terminal(&std::io::stdout()) && std::env::var_os("NO_COLOR").is_none();
        print!("{}", gate::export::placement_text(&report, &gate::Rules::default(), color));
        eprintln!("npugate: result and {} in {}", files::PLACEMENT, dir.display());
    }
    Ok(if unexpected_fallbacks(&report).next().is_some() { EXIT_FAIL } else { EXIT_PASS })
}
