//! `npugate compile`: ahead-of-time compile a model for one Snapdragon on Qualcomm's host HTP
//! backend: an EPContext model with the context binary embedded (or beside it, `--context-file`),
//! stamped with what it was compiled for. With several QNN versions (`--qnn A --qnn B`, `--qnn
//! all`) one model per version, then each loaded under every version: the measured context
//! compatibility matrix. Exit 0 fully compiled, 1 nodes left on the CPU (named; the file is still
//! written), 2 error.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use npugate_result::report::Finished;
use npugate_settings::{EpKind, SessionSettings};

use super::console::Console;
use super::options::{EmulatorArgs, JsonArg, LlmLengthArgs, SubjectArgs};
use npugate_engine::progress::Progress;
use npugate_htp::compat::CompatRequest;
use npugate_htp::compile::CompileRequest;
use npugate_htp::compile_folder::FolderCompileRequest;
use npugate_htp::compile_report::{CompatMeasured, CompileReport};
use npugate_htp::HostHtp;
use npugate_onnx::llm_shapes::GenerationLengths;
use npugate_plan::{Command, Installed, ModelFlags, Place, Plan, Request};
use npugate_result::hexagon::Soc;

/// Arguments of `npugate compile`.
#[derive(Debug, Args)]
#[command(mut_arg("out", |out| out.help("The EPContext model to write [default: <model>_ctx.onnx next to the model]; with several QNN versions, the directory to write them into [default: the model's]")))]
pub struct CompileArgs {
    /// `--model`, `--runtime`, `--harness`, `--out`: the EPContext model to write [default:
    /// <model>_ctx.onnx next to the model]; with several QNN versions, the directory to write them
    /// into [default: the model's].
    #[command(flatten)]
    pub subject: SubjectArgs,
    /// `--soc`: the Snapdragon to compile for (one), e.g. SM8650; `--qnn`: the QNN version that
    /// compiles — several (or `all`): one `<model>_qnn<version>_ctx.onnx` each, each then loaded
    /// under every version (`<model>.context-compat/context_compat.json`).
    #[command(flatten)]
    pub emulator: EmulatorArgs,
    /// Write the context binary as a `.bin` file beside the model (embed mode 0, what large models
    /// use) instead of inside it; the two are deployed together.
    #[arg(long)]
    pub context_file: bool,
    /// `--prompt-tokens`, `--context`: what an LLM folder's dynamic graphs are compiled for (each
    /// once per phase: the prompt's, and a token's at the whole context).
    #[command(flatten)]
    pub lengths: LlmLengthArgs,
    /// How the session is made (`--shape`, `--enable-htp-fp16-precision` [default: 1], …).
    #[command(flatten)]
    pub session: SessionSettings,
    /// `--json`: `npugate.compile/1` instead of text.
    #[command(flatten)]
    pub json: JsonArg,
}

impl CompileArgs {
    /// The plan request these flags make.
    pub fn request(&self) -> Result<Request<'_>> {
        // No --soc is the default SoC (SM8650), as `--help` says; several are refused.
        if self.emulator.socs().len() > 1 {
            bail!("compile writes a context for one Snapdragon: pass one --soc, e.g. --soc SM8650 (the default)");
        }
        Ok(Request {
            flags: ModelFlags {
                context_file: self.context_file,
                generation: self.lengths.given_flags(),
                ..ModelFlags::of(&self.session, None)
            },
            fp16: self.session.qnn.enable_htp_fp16_precision,
            ..self.subject.request(Command::Compile, Place::Emulator, EpKind::Qnn, Some(&self.emulator))
        })
    }
}

/// Runs `npugate compile`.
pub fn run(args: CompileArgs, console: &Console) -> Result<u8> {
    let model = args.subject.model.model.canonicalize().with_context(|| {
        format!("model {} cannot be read; pass --model with an .onnx file", args.subject.model.model.display())
    })?;
    // The context-compat matrix names the command that measured it.
    let measured_by =
        std::iter::once("npugate".to_string()).chain(std::env::args().skip(1)).collect::<Vec<_>>().join(" ");
    // Every flag becomes a typed value before the plan: after it, the command reads only the plan
    // and these.
    let (context_file, lengths, session, json) =
        (args.context_file, args.lengths.clone(), args.session.clone(), args.json.json);
    let plan = Plan::resolve(&Request { model: &model, ..args.request()? }, &Installed)?;
    plan.announce();
    let soc = plan.targets.first().and_then(|planned| planned.soc).context("an emulator target has its SoC")?;
    let hosts: Vec<HostHtp> = plan
        .targets
        .iter()
        .map(|planned| HostHtp { harness: planned.harness.clone(), runtime: planned.runtime.clone() })
        .collect();
    let cancel = &console.cancel;
    let given = plan.model.given()?;
    if let Some(llm) = plan.model.llm() {
        let settings = (&session, lengths.resolve(llm), json);
        return compile_folder(settings, &hosts, soc, &plan, console);
    }
    let compile = |host: &HostHtp, out: &Path| {
        let fp16 = plan.fp16;
        CompileRequest {
            host,
            model: given,
            session: &session,
            shapes: &session.shapes,
            soc,
            fp16,
            context_file,
            timeout: plan.timeouts.tool,
        }
        .run(out, cancel)
    };
    if let [host] = hosts.as_slice() {
        let compiled = compile(host, &plan.out)?;
        let saved = format!("the compile's result and ort.log in {}", compiled.job_dir.display());
        return Ok(console.finished(json, Finished::saved(&CompileReport::of(vec![compiled]), saved)));
    }
    let dir = &plan.out;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let model = &plan.model.path;
    let stem = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    let mut all = Vec::new();
    for host in &hosts {
        let compiled = compile(host, &dir.join(format!("{stem}_qnn{}_ctx.onnx", host.qnn_sdk())))?;
        let note = format!("the compile's result and ort.log in {}", compiled.job_dir.display());
        Progress::new(&compiled.compiled_for.qnn_sdk, &*console.reporter).note(&note);
        all.push(compiled);
    }
    let contexts: Vec<(String, PathBuf)> =
        all.iter().map(|compiled| (compiled.compiled_for.qnn_sdk.clone(), compiled.path.clone())).collect();
    let model_name = model.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let compat_dir = dir.join(format!("{stem}.context-compat"));
    let matrix = CompatRequest {
        hosts: &hosts,
        soc,
        contexts: &contexts,
        model: &model_name,
        measured_by,
        timeout: plan.timeouts.context_load,
        hashes: &given.hashes,
    }
    .run(&compat_dir, &console.policy(0))?;
    let saved = format!("the matrix (npugate.context-compat/1) and every load's result in {}", compat_dir.display());
    let context_compat =
        CompatMeasured { soc: soc.model.to_string(), htp_arch: soc.arch.to_string(), dir: compat_dir, matrix };
    let report = CompileReport { context_compat: Some(context_compat), ..CompileReport::of(all) };
    Ok(console.finished(json, Finished::saved(&report, saved)))
}

/// An LLM folder: every graph into one weight-shared context, written as a compiled folder
/// (the plan's out, default `<folder>_ctx/` beside it) that deploys and runs as one model; the
/// session's settings, the lengths its graphs are compiled for and `--json` come with it.
fn compile_folder(
    (session, lengths, json): (&SessionSettings, GenerationLengths, bool),
    hosts: &[HostHtp],
    soc: Soc,
    plan: &Plan,
    console: &Console,
) -> Result<u8> {
    let [host] = hosts else {
        bail!("compile writes an LLM folder's weight-shared context with one QNN version: pass one --qnn");
    };
    let request = FolderCompileRequest {
        host,
        model: plan.model.given()?,
        session,
        soc,
        fp16: plan.fp16,
        lengths,
        timeout: plan.timeouts.tool,
    };
    let compiled = request.run(&plan.out, &console.cancel)?;
    let saved = format!("the compile's result and ort.log in {}", compiled.job_dir.display());
    Ok(console.finished(json, Finished::saved(&CompileReport::of_folder(compiled), saved)))
}
