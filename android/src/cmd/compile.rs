//! `npugate compile`: ahead-of-time compile a model for one Snapdragon on Qualcomm's host HTP
//! backend: an EPContext model with the context binary embedded (or beside it, `--context-file`),
//! stamped with what it was compiled for. With several QNN versions (`--qnn A --qnn B`, `--qnn
//! all`) one model per version, then each loaded under every version: the measured context
//! compatibility matrix. Exit 0 fully compiled, 1 nodes left on the CPU (named; the file is still
//! written), 2 error.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use npugate_settings::ShapeSpec;
use npugate_result::contract::{EXIT_FAIL, EXIT_PASS};

use crate::hexagon::{self, Soc};
use crate::htp::compat::CompatRequest;
use crate::htp::compile::{CompileRequest, Compiled};
use crate::htp::versions::QnnChoice;
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
    /// QNN version to compile with (repeatable), e.g. `2.49.40`, or `all` (every fetched host-HTP
    /// runtime). With several, one `<model>_qnn<version>_ctx.onnx` each (in `--out`, a directory,
    /// default the model's), then every context loaded under every version: `context_compat.json`.
    #[arg(long = "qnn", value_name = "VERSION|all", conflicts_with = "runtime")]
    pub qnn: Vec<QnnChoice>,
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
    let stem = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    let hosts = HostHtp::for_versions(args.runtime.as_deref(), &args.qnn, args.harness.as_deref())?;
    let cancel = super::options::interrupt_flag();
    let compile = |host: &HostHtp, out: &std::path::Path| {
        let request = CompileRequest { host, model: &model, shapes: &args.shapes, soc: args.soc, fp16: args.enable_htp_fp16_precision, context_file: args.context_file };
        request.run(out, &cancel)
    };
    if let [host] = hosts.as_slice() {
        let out = args.out.clone().unwrap_or_else(|| model.with_file_name(format!("{stem}_ctx.onnx")));
        let compiled = compile(host, &out)?;
        print_compiled(&compiled);
        return Ok(if compiled.left_on_cpu.is_empty() { EXIT_PASS } else { EXIT_FAIL });
    }
    let dir = args.out.clone().unwrap_or_else(|| model.parent().map(PathBuf::from).unwrap_or_default());
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut contexts = Vec::new();
    let mut left_on_cpu = false;
    for host in &hosts {
        let compiled = compile(host, &dir.join(format!("{stem}_qnn{}_ctx.onnx", host.qnn_sdk())))?;
        print_compiled(&compiled);
        left_on_cpu |= !compiled.left_on_cpu.is_empty();
        contexts.push((compiled.compiled_for.qnn_sdk.clone(), compiled.path));
    }
    let measured_by = std::iter::once("npugate".to_string()).chain(std::env::args().skip(1)).collect::<Vec<_>>().join(" ");
    let model_name = model.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let compat_dir = dir.join(format!("{stem}.context-compat"));
    let request = CompatRequest { hosts: &hosts, soc: args.soc, contexts: &contexts, model: &model_name, measured_by };
    let matrix = request.run(&compat_dir, &cancel)?;
    println!("\ncontext compatibility on the host HTP emulator as {} ({}): each context loaded (and run once) under every QNN version", args.soc.model, args.soc.arch);
    print!("{}", matrix.table());
    eprintln!("npugate: the matrix (npugate.context-compat/1) and every load's result in {}", compat_dir.display());
    Ok(if left_on_cpu { EXIT_FAIL } else { EXIT_PASS })
}

/// What one compile wrote and left on the CPU.
fn print_compiled(compiled: &Compiled) {
    println!("{}: compiled for {}", compiled.path.display(), compiled.compiled_for.describe());
    for file in &compiled.context_files {
        println!("  context binary beside it: {}", file.display());
    }
    for node in &compiled.left_on_cpu {
        println!("  left on the CPU: {} ({}): {}", node.name, node.op_type, node.reason.as_deref().unwrap_or("no reason in the log"));
    }
    eprintln!("npugate: the compile's result and ort.log in {}", compiled.job_dir.display());
}
