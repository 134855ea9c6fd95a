//! `npugate preflight`: will this model run on the NPU of these Snapdragons? By default Qualcomm's
//! own HTP backend (its x86_64 host build, under wine) validates and compiles the model for each
//! `--soc`; `--backend saver` is the older prediction from the QNN EP's builder rules alone (the
//! aarch64 harness under qemu with the Saver backend), for hosts without wine. Exit codes as the
//! gate's: 0 every SoC passes, 1 a SoC fails, 2 could not judge. With `--ep openvino` (or another EP
//! of this machine) the session is created on that EP here instead ([`crate::host_preflight`]).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use npugate_settings::{EpKind, InputFile, KeyValue, ShapeSpec};
use npugate_result::contract::{EXIT_FAIL, EXIT_PASS};
use npugate_result::files;

use crate::harnesses;
use crate::hexagon::{self, Soc};
use crate::htp::preflight::{summary as htp_summary, HtpPreflightRequest, REPORT_FILE};
use crate::htp::versions::QnnChoice;
use crate::htp::{HostHtp, DEFAULT_SOC};
use crate::layout::default_out_dir;
use crate::preflight::{summary, unexpected_fallbacks, PreflightRequest, DEFAULT_RUNTIME};
use crate::runtime::RuntimeManifest;
use crate::targets::qemu;

/// Which backend judges the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PreflightBackend {
    /// Qualcomm's HTP backend (x86_64 host build, under wine): op validation and compile per SoC.
    Htp,
    /// The QNN EP's builder rules only (aarch64 harness under qemu, Saver backend, HTP validation
    /// skipped): for hosts without wine, e.g. aarch64 Linux.
    Saver,
}

/// Arguments of `npugate preflight`.
#[derive(Debug, Args)]
pub struct PreflightArgs {
    /// The ONNX model.
    #[arg(long, value_name = "PATH")]
    pub model: PathBuf,
    /// Snapdragon to judge the model for (repeatable), e.g. SM8350, SM8650; `all` = every known
    /// SoC (v68 to v81) [default: SM8650]. The host HTP backend only.
    #[arg(long = "soc", value_name = "SOC|all", value_parser = parse_socs)]
    pub socs: Vec<SocChoice>,
    /// `htp` (Qualcomm's host HTP backend: validation and compile per SoC) or `saver` (the EP's
    /// builder rules only, under qemu).
    #[arg(long, value_enum, default_value_t = PreflightBackend::Htp)]
    pub backend: PreflightBackend,
    /// Runtime (name or directory) [default: qnn-2.7.0-ort-1.31.1-windows-x86_64 with htp,
    /// qnn-2.7.0-ort-1.31.1-linux-aarch64 with saver].
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,
    /// Result directory (default: npugate-results/<model>/preflight-htp; -saver with `--backend
    /// saver`, -<ep> with `--ep`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The harness (default: the cargo layout's x86_64-pc-windows-gnu build with htp, built by
    /// scripts/build-windows; the aarch64-unknown-linux-gnu build with saver, scripts/build-aarch64).
    #[arg(long, value_name = "PATH")]
    pub harness: Option<PathBuf>,
    /// Concrete shape for a dynamic input, `name=1x3x224x224` (repeatable).
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    pub shapes: Vec<ShapeSpec>,
    /// Real input data from a `.npy` file, `name=file.npy` (repeatable), for the emulated
    /// inference and the CPU reference job (default: seeded random inputs).
    #[arg(long = "input", value_name = "NAME=FILE")]
    pub inputs: Vec<InputFile>,
    /// QNN version of the host HTP backend (repeatable), e.g. `2.49.40`, `2.51`, or `all` (every
    /// fetched host-HTP runtime): one matrix SoC × QNN version, and what changed between versions.
    #[arg(long = "qnn", value_name = "VERSION|all", conflicts_with = "runtime")]
    pub qnn: Vec<QnnChoice>,
    /// Validate and compile only: no emulated inference after the compile (the host HTP backend).
    #[arg(long)]
    pub no_execute: bool,
    /// Run float graphs in fp16 on HTP (as the device run would) [default: 1].
    #[arg(long, value_name = "0|1", default_value = "1", value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::Set)]
    pub enable_htp_fp16_precision: bool,
    /// Print the report as JSON (`npugate.htp-preflight/1`; `npugate.placement/1` with saver).
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

/// The SoCs one `--soc` names.
#[derive(Debug, Clone)]
pub struct SocChoice(pub Vec<Soc>);

/// `SM8650` → that SoC; `all` → every known SoC.
pub fn parse_socs(text: &str) -> Result<SocChoice, String> {
    if text.eq_ignore_ascii_case("all") {
        return Ok(SocChoice(hexagon::all().to_vec()));
    }
    hexagon::find(text).map(|soc| SocChoice(vec![soc]))
}

/// Runs `npugate preflight`.
pub fn run(args: PreflightArgs) -> Result<u8> {
    if let Some(ep) = args.ep.filter(|ep| *ep != EpKind::Qnn) {
        return on_host(&args, ep);
    }
    let model = args.model.canonicalize().with_context(|| format!("model {} cannot be read; pass --model with an .onnx file", args.model.display()))?;
    match args.backend {
        PreflightBackend::Htp => host_htp(&args, &model, &args.out.clone().unwrap_or_else(|| default_out_dir(&model, "preflight-htp"))),
        PreflightBackend::Saver => saver(&args, &model, &args.out.clone().unwrap_or_else(|| default_out_dir(&model, "preflight-saver"))),
    }
}

/// The host HTP backend, every SoC in parallel.
fn host_htp(args: &PreflightArgs, model: &std::path::Path, out: &std::path::Path) -> Result<u8> {
    let mut socs: Vec<Soc> = args.socs.iter().flat_map(|choice| choice.0.iter().copied()).collect();
    let mut seen = std::collections::HashSet::new();
    socs.retain(|soc| seen.insert(soc.model));
    if socs.is_empty() {
        socs.push(hexagon::find(DEFAULT_SOC).map_err(anyhow::Error::msg)?);
    }
    let hosts = HostHtp::for_versions(args.runtime.as_deref(), &args.qnn, args.harness.as_deref())?;
    let request = HtpPreflightRequest {
        hosts: &hosts,
        model,
        shapes: &args.shapes,
        inputs: &args.inputs,
        socs: &socs,
        fp16: args.enable_htp_fp16_precision,
        execute: !args.no_execute,
    };
    let report = request.run(out, &super::options::interrupt_flag())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", htp_summary(&report));
        eprintln!("npugate: {REPORT_FILE} and one result directory per SoC in {}", out.display());
    }
    Ok(report.exit_code)
}

/// The EP's builder rules only: the aarch64 harness under qemu with the Saver backend.
fn saver(args: &PreflightArgs, model: &std::path::Path, out: &std::path::Path) -> Result<u8> {
    anyhow::ensure!(args.socs.is_empty(), "--soc needs the host HTP backend (--backend htp); the Saver backend judges no SoC");
    anyhow::ensure!(args.qnn.is_empty(), "--qnn chooses the host HTP backend's QNN version (--backend htp); with the Saver backend pass --runtime");
    anyhow::ensure!(args.inputs.is_empty(), "--input feeds the host HTP's emulated inference (--backend htp); the Saver backend runs nothing");
    let runtime = RuntimeManifest::load(args.runtime.as_deref().unwrap_or(DEFAULT_RUNTIME))?;
    let harness = match &args.harness {
        Some(path) => path.clone(),
        None => harnesses::for_target(qemu::TRIPLE)?,
    };
    if !harness.is_file() {
        anyhow::bail!("harness {} does not exist; build it with scripts/build-aarch64 or pass --harness", harness.display());
    }
    let request = PreflightRequest { harness: &harness, runtime: &runtime, model, shapes: &args.shapes, fp16: args.enable_htp_fp16_precision };
    let preflight = request.run(out, &super::options::interrupt_flag())?;
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
    let settings = npugate_settings::HarnessSettings { ep, ..Default::default() };
    let name = match &args.runtime {
        Some(name) => name.clone(),
        None => super::run::local_runtime(&settings)?,
    };
    let runtime = RuntimeManifest::load(&name)?;
    let harness = match &args.harness {
        Some(path) => path.clone(),
        None => harnesses::host()?,
    };
    let out = args.out.clone().unwrap_or_else(|| default_out_dir(&args.model, &format!("preflight-{}", ep.cli_name())));
    anyhow::ensure!(args.qnn.is_empty() && args.socs.is_empty(), "--qnn and --soc choose the host HTP backend (--ep qnn); --ep {} runs on this machine", ep.cli_name());
    let preflight = crate::host_preflight::HostPreflight {
        harness: &harness,
        runtime: &runtime,
        model: &args.model,
        ep,
        ep_options: &args.ep_options,
        shapes: &args.shapes,
        inputs: &args.inputs,
    };
    let (dir, report) = preflight.run(&out, &super::options::interrupt_flag())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let color = std::io::IsTerminal::is_terminal(&std::io::stdout()) && std::env::var_os("NO_COLOR").is_none();
        print!("{}", npugate_gate::export::placement_text(&report, &npugate_gate::Rules::default(), color));
        eprintln!("npugate: result and {} in {}", files::PLACEMENT, dir.display());
    }
    Ok(if unexpected_fallbacks(&report).next().is_some() { EXIT_FAIL } else { EXIT_PASS })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_every_known_soc_and_a_name_is_one() {
        assert_eq!(parse_socs("all").unwrap().0, hexagon::all());
        assert_eq!(parse_socs("sm8350").unwrap().0.iter().map(|s| s.model).collect::<Vec<_>>(), ["SM8350"]);
        assert!(parse_socs("x").unwrap_err().contains("known SoCs"));
    }
}
