//! `npugate compile`: ahead-of-time compile a model for one Snapdragon on Qualcomm's host HTP
//! backend: an EPContext model with the context binary embedded (or beside it, `--context-file`),
//! stamped with what it was compiled for. Exit 0 fully compiled, 1 nodes left on the CPU (named; the file is still written), 2 error.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use npugate_settings::ShapeSpec;
use npugate_result::contract::{EXIT_FAIL, EXIT_PASS};

use crate::hexagon::{self, Soc};
use crate::htp::compile::CompileRequest;
use crate::htp::HostHtp;

/// Arguments of `npugate compile`.
#[derive(Debug, Args)]
pub struct CompileArgs {
    /// The ONNX model.
    #[arg(long, value_name = "PATH")]
    pub model: PathBuf,
    /// The Snapdragon to compile for, e.g. SM8650.
    #[arg(long, value_name = "SOC", value_parser = hexagon::find)]
    pub soc: Soc,
    /// Concrete shape for a dynamic input, `name=1x3x224x224` (repeatable).
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    pub shapes: Vec<ShapeSpec>,
    /// The EPContext model to write (default: <model>_ctx.onnx next to the model).
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Runtime (name or directory) [default: qnn-2.7.0-ort-1.31.1-windows-x86_64].
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,
    /// The Windows harness (default: the cargo layout's x86_64-pc-windows-gnu build).
    #[arg(long, value_name = "PATH")]
    pub harness: Option<PathBuf>,
    /// Compile float graphs in fp16 (as the device run would) [default: 1].
    #[arg(long, value_name = "0|1", default_value = "1", value_parser = clap::builder::BoolishValueParser::new())]
    pub enable_htp_fp16_precision: bool,
    /// Write the context binary as a `.bin` file beside the model (embed mode 0, what large models
    /// use) instead of inside it; the two are deployed together.
    #[arg(long)]
    pub context_file: bool,
}

/// Runs `npugate compile`.
pub fn run(args: CompileArgs) -> Result<u8> {
    let model = args.model.canonicalize().with_context(|| format!("model {} cannot be read; pass --model with an .onnx file", args.model.display()))?;
    let out = args.out.clone().unwrap_or_else(|| {
        let stem = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
        model.with_file_name(format!("{stem}_ctx.onnx"))
    });
    let host = HostHtp::locate(args.runtime.as_deref(), args.harness.as_deref())?;
    let request = CompileRequest { host: &host, model: &model, shapes: &args.shapes, soc: args.soc, fp16: args.enable_htp_fp16_precision, context_file: args.context_file };
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
