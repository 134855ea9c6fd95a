//! `npugate preflight`: will this model run on the NPU of these Snapdragons? By default Qualcomm's
//! own HTP backend (its x86_64 host build, under wine) validates and compiles the model for each
//! `--soc`; `--backend saver` is the older prediction from the QNN EP's builder rules alone (the
//! aarch64 harness under qemu with the Saver backend), for hosts without wine. Exit codes as the
//! gate's: 0 every SoC passes, 1 a SoC fails, 2 could not judge. With `--ep openvino` (or another EP
//! of this machine) the session is created on that EP here instead ([`npugate_engine::host_preflight`]).

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use npugate_result::contract::{EXIT_FAIL, EXIT_PASS};
use npugate_result::files;
use npugate_settings::{EpKind, SessionSettings};

use super::console::Console;
use super::options::{EmulatorArgs, JsonArg, SubjectArgs};
use npugate_htp::preflight::{summary as htp_summary, HtpPreflightRequest, SocOutcome, REPORT_FILE};
use npugate_htp::saver::{summary, unexpected_fallbacks, PreflightRequest};
use npugate_htp::HostHtp;
use npugate_onnx::genai::LlmModel;
use npugate_plan::{Command, Installed, Kind, ModelFlags, Place, Plan, Request};

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
    /// `--model`, `--runtime`, `--harness`, `--out` [default: npugate-results/<model>/preflight;
    /// …/preflight-saver; …/preflight-<ep>].
    #[command(flatten)]
    pub subject: SubjectArgs,
    /// `--soc`, `--qnn`: the Snapdragons and QNN versions to judge the model for (the host HTP backend only).
    #[command(flatten)]
    pub emulator: EmulatorArgs,
    /// `htp` (Qualcomm's host HTP backend: validation and compile per SoC) or `saver` (the EP's
    /// builder rules only, under qemu).
    #[arg(long, value_enum, default_value_t = PreflightBackend::Htp)]
    pub backend: PreflightBackend,
    /// Validate and compile only: no emulated inference per SoC after the compile (the host HTP).
    #[arg(long)]
    pub no_execute: bool,
    /// `--json`: `npugate.htp-preflight/2` (`npugate.placement/1` with saver or another EP).
    #[command(flatten)]
    pub json: JsonArg,
    /// How the session is made (`--shape`, `--input`, `--enable-htp-fp16-precision` [default: 1], …).
    /// `--ep` other than cpu or qnn (openvino, xnnpack, cuda, …) creates the session on that EP of this
    /// machine and reports what it claims, instead of judging QNN.
    #[command(flatten)]
    pub session: SessionSettings,
}

impl PreflightArgs {
    /// True when `--ep` names an EP of this machine rather than QNN (cpu is the flag's default).
    fn host_ep(&self) -> bool {
        !matches!(self.session.ep, EpKind::Cpu | EpKind::Qnn)
    }

    /// The plan request these flags make.
    pub fn request(&self) -> Result<Request<'_>> {
        let (place, ep) = match (self.host_ep(), self.backend) {
            (true, PreflightBackend::Htp) => (Place::Local, self.session.ep),
            (true, PreflightBackend::Saver) => {
                bail!("--backend saver predicts QNN; drop --ep {}", self.session.ep.cli_name())
            }
            (false, PreflightBackend::Htp) => (Place::Emulator, EpKind::Qnn),
            (false, PreflightBackend::Saver) => (Place::Qemu, EpKind::Qnn),
        };
        Ok(Request {
            flags: ModelFlags::of(&self.session, None),
            fp16: self.session.qnn.enable_htp_fp16_precision,
            ..self.subject.request(Command::Preflight, place, ep, Some(&self.emulator))
        })
    }
}

/// Runs `npugate preflight`.
pub fn run(args: PreflightArgs, console: &Console) -> Result<u8> {
    let model = args.subject.model.model.canonicalize().with_context(|| {
        format!("model {} cannot be read; pass --model with an .onnx file", args.subject.model.model.display())
    })?;
    let plan = Plan::resolve(&Request { model: &model, ..args.request()? }, &Installed)?;
    plan.announce();
    match plan.kind {
        Kind::Emulator => host_htp(&args, &model, &plan, console),
        Kind::Qemu => saver(&args, &model, &plan, console),
        _ => on_host(&args, &model, &plan, console),
    }
}

/// The host HTP backend, every SoC × QNN version in parallel.
fn host_htp(args: &PreflightArgs, model: &std::path::Path, plan: &Plan, console: &Console) -> Result<u8> {
    let mut hosts: Vec<HostHtp> = Vec::new();
    let mut socs = Vec::new();
    for planned in &plan.targets {
        if !hosts.iter().any(|host| host.runtime.dir == planned.runtime.dir) {
            hosts.push(HostHtp { harness: planned.harness.clone(), runtime: planned.runtime.clone() });
        }
        if let Some(soc) = planned.soc.filter(|soc| !socs.contains(soc)) {
            socs.push(soc);
        }
    }
    let fp16 = plan.fp16;
    if let Some(llm) = plan.model.llm() {
        return htp_per_graph(args, llm, &hosts, &socs, plan, console);
    }
    let request = HtpPreflightRequest {
        hosts: &hosts,
        model,
        shapes: &args.session.shapes,
        inputs: &args.session.inputs,
        socs: &socs,
        fp16,
        execute: !args.no_execute,
    };
    let report = request.run(&plan.out, &console.policy(0))?;
    if args.json.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", htp_summary(&report));
        eprintln!("npugate: {REPORT_FILE} and one result directory per SoC in {}", plan.out.display());
    }
    Ok(report.exit_code)
}

/// An LLM folder on the host HTP backend: each graph preflighted per SoC on its own (into
/// `<out>/<graph id>/`), one line per graph and SoC, then each graph's report; the exit code is
/// the worst graph's.
fn htp_per_graph(
    args: &PreflightArgs,
    llm: &LlmModel,
    hosts: &[HostHtp],
    socs: &[npugate_host::hexagon::Soc],
    plan: &Plan,
    console: &Console,
) -> Result<u8> {
    let policy = console.policy(0);
    let mut exit = 0;
    let mut details = String::new();
    let mut lines = Vec::new();
    for graph in &llm.graphs {
        let request = HtpPreflightRequest {
            hosts,
            model: &graph.path,
            shapes: &[],
            inputs: &[],
            socs,
            fp16: plan.fp16,
            execute: !args.no_execute,
        };
        let report = request.run(&plan.out.join(&graph.id), &policy)?;
        for soc in &report.socs {
            let left: Vec<&str> = soc.fallback.iter().filter(|f| !f.expected).map(|f| f.name.as_str()).collect();
            let outcome = match soc.outcome {
                SocOutcome::Pass => "pass",
                SocOutcome::Fail => "fail",
                SocOutcome::Error => "could not judge",
            };
            let verdict = match (&soc.error, left.is_empty()) {
                (Some(error), _) => format!("{outcome}: {}", error.lines().next().unwrap_or_default()),
                (None, true) => format!("{outcome}: every node on the HTP, compiled"),
                (None, false) => format!("{outcome}: {} node(s) left to the CPU ({})", left.len(), left.join(", ")),
            };
            let qnn = if hosts.len() > 1 { format!(" with QNN {}", soc.qnn_sdk) } else { String::new() };
            lines
                .push(format!("graph {} ({}) on {} ({}){qnn}: {verdict}", graph.id, graph.file, soc.soc, soc.htp_arch));
        }
        details.push_str(&format!("\ngraph {} ({}):\n{}", graph.id, graph.file, htp_summary(&report)));
        exit = exit.max(report.exit_code);
    }
    if args.json.json {
        println!("{}", serde_json::to_string_pretty(&lines)?);
    } else {
        println!("{}\n{details}", lines.join("\n"));
        eprintln!("npugate: one {REPORT_FILE} per graph in {}/<graph id>/", plan.out.display());
    }
    Ok(exit)
}

/// The EP's builder rules only: the aarch64 harness under qemu with the Saver backend.
fn saver(args: &PreflightArgs, model: &std::path::Path, plan: &Plan, console: &Console) -> Result<u8> {
    let planned = &plan.targets[0];
    let request = PreflightRequest {
        harness: &planned.harness,
        runtime: &planned.runtime,
        model,
        shapes: &args.session.shapes,
        fp16: plan.fp16,
    };
    let preflight = request.run(&plan.out, &console.cancel)?;
    if let Some(status) = &preflight.crashed_after_result {
        eprintln!(
            "npugate: note: the harness crashed in teardown ({status}) after writing result.json; the result decides"
        );
    }
    if args.json.json {
        println!("{}", serde_json::to_string_pretty(&preflight.report)?);
    } else {
        print!("{}", summary(&preflight.report));
        eprintln!("npugate: result and {} in {}", files::PLACEMENT, preflight.dir.display());
    }
    Ok(if unexpected_fallbacks(&preflight.report).next().is_some() { EXIT_FAIL } else { EXIT_PASS })
}

/// `npugate preflight --ep openvino …`: the session on an EP of this machine.
fn on_host(args: &PreflightArgs, model: &std::path::Path, plan: &Plan, console: &Console) -> Result<u8> {
    let planned = &plan.targets[0];
    let preflight = npugate_engine::host_preflight::HostPreflight {
        harness: &planned.harness,
        runtime: &planned.runtime,
        model,
        ep: args.session.ep,
        ep_options: &args.session.ep_options,
        shapes: &args.session.shapes,
        inputs: &args.session.inputs,
    };
    let (dir, report) = preflight.run(&plan.out, &console.cancel)?;
    if args.json.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", npugate_gate::export::placement_text(&report, &npugate_gate::Rules::default(), console.color));
        eprintln!("npugate: result and {} in {}", files::PLACEMENT, dir.display());
    }
    Ok(if unexpected_fallbacks(&report).next().is_some() { EXIT_FAIL } else { EXIT_PASS })
}
