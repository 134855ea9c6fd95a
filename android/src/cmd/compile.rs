//! `npugate compile`: ahead-of-time compile a model for one Snapdragon on Qualcomm's host HTP
//! backend: an EPContext model with the context binary embedded (or beside it, `--context-file`),
//! stamped with what it was compiled for. Exit 0 fully compiled, 1 nodes left on the CPU (named; the file is still written), 2 error.

use anyhow::{bail, Context, Result};
use clap::Args;
use npugate_result::contract::{EXIT_FAIL, EXIT_PASS};
use npugate_settings::{EpKind, SessionSettings};

use super::options::{EmulatorArgs, SubjectArgs};
use crate::htp::compile::CompileRequest;
use crate::htp::HostHtp;
use crate::plan::{Command, Installed, Place, Plan, Request};

/// Arguments of `npugate compile`.
#[derive(Debug, Args)]
pub struct CompileArgs {
    /// `--model`, `--runtime`, `--harness`, `--out`: the EPContext model to write [default:
    /// <model>_ctx.onnx next to the model].
    #[command(flatten)]
    pub subject: SubjectArgs,
    /// `--soc`: the Snapdragon to compile for (one), e.g. SM8650; `--qnn`: the QNN version that compiles.
    #[command(flatten)]
    pub emulator: EmulatorArgs,
    /// Write the context binary as a `.bin` file beside the model (embed mode 0, what large models
    /// use) instead of inside it; the two are deployed together.
    #[arg(long)]
    pub context_file: bool,
    /// How the session is made (`--shape`, `--enable-htp-fp16-precision` [default: 1], …).
    #[command(flatten)]
    pub session: SessionSettings,
}

impl CompileArgs {
    /// The plan request these flags make.
    pub fn request(&self) -> Result<Request<'_>> {
        if self.emulator.socs().len() != 1 {
            bail!("compile writes a context for one Snapdragon: pass one --soc, e.g. --soc SM8650");
        }
        Ok(Request { out: None, ..self.subject.request(Command::Compile, Place::Emulator, EpKind::Qnn, Some(&self.emulator)) })
    }
}

/// Runs `npugate compile`.
pub fn run(args: CompileArgs) -> Result<u8> {
    let model = args.subject.model.model.canonicalize().with_context(|| format!("model {} cannot be read; pass --model with an .onnx file", args.subject.model.model.display()))?;
    let out = args.subject.out.out.clone().unwrap_or_else(|| {
        let stem = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
        model.with_file_name(format!("{stem}_ctx.onnx"))
    });
    let plan = Plan::resolve(&args.request()?, &Installed)?;
    plan.announce();
    let [planned] = plan.targets.as_slice() else {
        bail!("compile uses one QNN version: pass one --qnn");
    };
    let host = HostHtp { harness: planned.harness.clone(), runtime: planned.runtime.clone() };
    let soc = planned.soc.context("an emulator target has its SoC")?;
    let fp16 = args.session.qnn.enable_htp_fp16_precision.unwrap_or(true);
    let request = CompileRequest { host: &host, model: &model, shapes: &args.session.shapes, soc, fp16, context_file: args.context_file };
    let compiled = request.run(&out, &super::options::interrupt_flag())?;
    println!("{}: compiled for {}", compiled.path.display(), compiled.compiled_for.describe());
    for file in &compiled.context_files {
        println!("  context binary beside it: {}", file.display());
    }
    for node in &compiled.left_on_cpu {
        println!("  left on the CPU: {} ({}): {}", node.name, node.op_type, node.reason.as_deref().unwrap_or("no reason in the log"));
    }
    eprintln!("npugate: the compile's result and ort.log in {}", compiled.job_dir.display());
    Ok(if compiled.left_on_cpu.is_empty() { EXIT_PASS } else { EXIT_FAIL })
}
