//! `npugate preflight`: will this model run on the NPU of these Snapdragons? By default Qualcomm's
//! own HTP backend (its x86_64 host build, under wine) validates and compiles the model for each
//! `--soc`; `--backend saver` is the older prediction from the QNN EP's builder rules alone (the
//! aarch64 harness under qemu with the Saver backend), for hosts without wine. Exit codes as the
//! gate's: 0 every SoC passes, 1 a SoC fails, 2 could not judge. With `--ep openvino` (or another EP
//! of this machine) the session is created on that EP here instead ([`npugate_engine::host_preflight`]).

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use npugate_result::files;
use npugate_result::report::Finished;
use npugate_settings::{EpKind, InputFile, SessionSettings, ShapeSpec};

use super::console::Console;
use super::options::{EmulatorArgs, JsonArg, LlmLengthArgs, SubjectArgs};
use npugate_engine::host_preflight::Claimed;
use npugate_engine::model::GivenModel;
use npugate_host::hash_cache::HashCache;
use npugate_htp::folder_preflight::{FolderPreflightReport, GraphPreflight};
use npugate_htp::preflight::{HtpPreflightRequest, REPORT_FILE};
use npugate_htp::saver::{Predicted, PreflightRequest};
use npugate_htp::HostHtp;
use npugate_onnx::genai::LlmModel;
use npugate_onnx::llm_shapes::{phase_shapes, PhaseShapes};
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
    /// `--prompt-tokens`, `--context`: what an LLM folder's dynamic graphs are sized for.
    #[command(flatten)]
    pub lengths: LlmLengthArgs,
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
            flags: ModelFlags { generation: self.lengths.given_flags(), ..ModelFlags::of(&self.session, None) },
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
    // Every flag becomes a typed value before the plan: after it, the command reads only the plan
    // and these.
    let settings = Settings {
        session: args.session.clone(),
        lengths: args.lengths.clone(),
        execute: !args.no_execute,
        json: args.json.json,
    };
    let plan = Plan::resolve(&Request { model: &model, ..args.request()? }, &Installed)?;
    plan.announce();
    let model = plan.model.given()?;
    match plan.kind {
        Kind::Emulator => host_htp(&settings, model, &plan, console),
        Kind::Qemu => saver(&settings, model, &plan, console),
        _ => on_host(&settings, model, &plan, console),
    }
}

/// What a preflight needs besides its plan: the flags' typed settings, taken from them before the
/// plan is resolved.
struct Settings {
    /// How the session is made.
    session: SessionSettings,
    /// What an LLM folder's dynamic graphs are sized for.
    lengths: LlmLengthArgs,
    /// Run the emulated inference per SoC after the compile (not `--no-execute`).
    execute: bool,
    /// `--json`.
    json: bool,
}

/// The host HTP backend, every SoC × QNN version in parallel.
fn host_htp(settings: &Settings, model: &GivenModel, plan: &Plan, console: &Console) -> Result<u8> {
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
        return htp_per_graph(settings, llm, &model.hashes, &hosts, &socs, plan, console);
    }
    let request = HtpPreflightRequest {
        hosts: &hosts,
        model,
        session: &settings.session,
        shapes: &settings.session.shapes,
        inputs: &settings.session.inputs,
        socs: &socs,
        fp16,
        execute: settings.execute,
        keep_outputs: false,
        timeout: plan.timeouts.tool,
    };
    let report = request.run(&plan.out, &console.policy(0))?;
    let saved = format!("{REPORT_FILE} and one result directory per SoC in {}", plan.out.display());
    Ok(console.finished(settings.json, Finished::saved(&report, saved)))
}

/// An LLM folder on the host HTP backend: each graph preflighted per SoC on its own, a graph
/// with dynamic dims once per phase it runs in with the shapes the folder's config gives that phase
/// ([`phase_shapes`]; into `<out>/<graph id>.<phase>/`, else `<out>/<graph id>/`), one line per
/// graph, phase and SoC, then each one's report (`--json`: one [`FolderPreflightReport`]); the
/// exit code is the worst graph's.
fn htp_per_graph(
    settings: &Settings,
    llm: &LlmModel,
    hashes: &HashCache,
    hosts: &[HostHtp],
    socs: &[npugate_result::hexagon::Soc],
    plan: &Plan,
    console: &Console,
) -> Result<u8> {
    let policy = console.policy(0);
    let lengths = settings.lengths.resolve(llm);
    let mut graphs = Vec::new();
    for graph in &llm.graphs {
        let phases = phase_shapes(llm, graph, lengths)?;
        let runs: Vec<(Option<&str>, Vec<ShapeSpec>, Feeds)> = match phases.is_empty() {
            true => vec![(None, Vec::new(), Vec::new())],
            false => phases.into_iter().map(|p| phase_run(llm, p)).collect(),
        };
        for (phase, shapes, feeds) in runs {
            // The CPU reference (node shapes, FLOPs) and an executed inference get genai's values.
            let staged = tempfile::tempdir().context("cannot create a temporary directory for the inputs")?;
            let inputs = write_feeds(graph, &feeds, staged.path())?;
            let model = GivenModel::of(&graph.path, None, None, hashes)?;
            let request = HtpPreflightRequest {
                hosts,
                model: &model,
                session: &settings.session,
                shapes: &shapes,
                inputs: &inputs,
                socs,
                fp16: plan.fp16,
                execute: settings.execute,
                keep_outputs: false,
                timeout: plan.timeouts.tool,
            };
            let dir = match phase {
                Some(phase) => format!("{}.{phase}", graph.id),
                None => graph.id.clone(),
            };
            let report = request.run(&plan.out.join(&dir), &policy)?;
            graphs.push(GraphPreflight {
                graph: graph.id.clone(),
                file: graph.file.clone(),
                phase: phase.map(str::to_string),
                shapes: shapes.iter().map(ToString::to_string).collect(),
                dir,
                report,
            });
        }
    }
    let report = FolderPreflightReport::new(&llm.folder, graphs);
    let saved = format!("one {REPORT_FILE} per graph (and phase) in {}/<graph id>[.<phase>]/", plan.out.display());
    Ok(console.finished(settings.json, Finished::saved(&report, saved)))
}

/// A phase's ids, mask and positions as genai feeds them: (input, dims, values).
type Feeds = Vec<(String, Vec<i64>, Vec<i64>)>;

/// Writes `feeds` as `.npy` files into `dir` in the element type `graph` declares (int64 or int32;
/// other types are left to the harness's random data), as `--input` files.
fn write_feeds(graph: &npugate_onnx::genai::LlmGraph, feeds: &Feeds, dir: &std::path::Path) -> Result<Vec<InputFile>> {
    use npugate_onnx::proto::tensor_proto::DataType;
    let mut inputs = Vec::new();
    for (name, dims, values) in feeds {
        let int32 = match graph.input(name).and_then(|i| i.element_type.data_type()) {
            Some(DataType::Int64) => false,
            Some(DataType::Int32) => true,
            _ => continue,
        };
        let path = dir.join(format!("{}.npy", inputs.len()));
        let dims: Vec<u64> = dims.iter().map(|&d| d.max(0) as u64).collect();
        npugate_engine::output_check::write_npy_ints(&path, &dims, values, int32)?;
        inputs.push(InputFile { input: name.clone(), path });
    }
    Ok(inputs)
}

/// One phase of a graph with dynamic dims: its name, its shapes and the values genai feeds its
/// ids, mask and positions.
fn phase_run(llm: &LlmModel, phase: PhaseShapes) -> (Option<&'static str>, Vec<ShapeSpec>, Feeds) {
    let feeds = npugate_onnx::llm_shapes::phase_feeds(llm, &phase);
    let name = phase.phase.name();
    let shapes = phase.inputs.into_iter().map(|(input, dims)| ShapeSpec { input, dims }).collect();
    (Some(name), shapes, feeds)
}

/// The EP's builder rules only: the aarch64 harness under qemu with the Saver backend.
fn saver(settings: &Settings, model: &GivenModel, plan: &Plan, console: &Console) -> Result<u8> {
    let planned = &plan.targets[0];
    let request = PreflightRequest {
        harness: &planned.harness,
        runtime: &planned.runtime,
        model,
        session: &settings.session,
        fp16: plan.fp16,
        timeout: plan.timeouts.tool,
    };
    let preflight = request.run(&plan.out, &console.cancel)?;
    if let Some(status) = &preflight.crashed_after_result {
        eprintln!(
            "npugate: note: the harness crashed in teardown ({status}) after writing result.json; the result decides"
        );
    }
    let saved = format!("result and {} in {}", files::PLACEMENT, preflight.dir.display());
    Ok(console.finished(settings.json, Finished::saved(&Predicted(&preflight.report), saved)))
}

/// `npugate preflight --ep openvino …`: the session on an EP of this machine.
fn on_host(settings: &Settings, model: &GivenModel, plan: &Plan, console: &Console) -> Result<u8> {
    let planned = &plan.targets[0];
    let preflight = npugate_engine::host_preflight::HostPreflight {
        harness: &planned.harness,
        runtime: &planned.runtime,
        model,
        session: &settings.session,
        timeout: plan.timeouts.tool,
    };
    let (dir, report) = preflight.run(&plan.out, &console.cancel)?;
    let saved = format!("result and {} in {}", files::PLACEMENT, dir.display());
    Ok(console.finished(settings.json, Finished::saved(&Claimed(&report), saved)))
}
