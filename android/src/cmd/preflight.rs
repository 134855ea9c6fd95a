//! `npugate preflight`: which nodes the QNN EP would claim on a Snapdragon, predicted on this
//! machine without a device. Runs the real QNN EP partitioner: the aarch64 harness (under
//! qemu-user on an x86_64 host) with the `onnxruntime-qnn` plugin, the HTP backend as the intended
//! backend, the QNN Saver recording instead of executing, and the HTP backend's own op validation
//! skipped (it needs a DSP). Exit codes as the gate's: 0 every node claimed (graph I/O
//! quantization on CPU by design counts as claimed), 1 some node would fall back to CPU, 2 could
//! not judge.
//!
//! Under qemu a harness whose HTP setup failed can die with signal 11 in library teardown *after*
//! writing `result.json` (rc 139); a readable `result.json` then decides, never the signal.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{bail, Context, Result};
use clap::Args;
use npugate_result::RunResult;
use profile_parser::report::PlacementReport;

use crate::runtime::RuntimeManifest;

/// The runtime used when none is given: aarch64 ORT + the onnxruntime-qnn plugin from PyPI.
pub const DEFAULT_RUNTIME: &str = "qnn-2.7.0-ort-1.31.1-linux-aarch64";
/// Label of every preflight placement report.
pub const PREDICTED: &str = "predicted: HTP backend validation not run";
/// The placement report written next to `result.json`.
pub const PLACEMENT_FILE: &str = "placement.json";
/// The target triple the harness and runtime of a preflight are built for.
const TARGET: &str = "aarch64-unknown-linux-gnu";
/// ARM `/proc/cpuinfo` for ORT's CPU detection under qemu (the host's x86 one crashes it).
const ARM_CPUINFO: &str = include_str!("../../../scripts/qemu/cpuinfo-cortex-a76");
/// Exit status of a process killed by SIGSEGV, as a shell reports it.
const SIGSEGV_STATUS: i32 = 139;

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
    pub shapes: Vec<String>,
    /// Run float graphs in fp16 on HTP (as the device run would) [default: 1].
    #[arg(long, value_name = "0|1", default_value = "1")]
    pub enable_htp_fp16_precision: String,
    /// Print the placement report as JSON instead of the summary.
    #[arg(long)]
    pub json: bool,
}

/// Runs `npugate preflight`.
pub fn run(args: PreflightArgs) -> Result<u8> {
    let runtime = RuntimeManifest::load(&args.runtime)?;
    let plugin = qnn_plugin(&runtime)?;
    let harness = match &args.harness {
        Some(path) => path.clone(),
        None => crate::device_run::harness_for(TARGET)?,
    };
    let model = args.model.canonicalize().with_context(|| format!("model {} cannot be read; pass --model with an .onnx file", args.model.display()))?;
    let out = args.out.clone().unwrap_or_else(|| super::run::default_out_dir(&model, "preflight"));
    super::run::prepare_out_dir(&out)?;
    let out = out.canonicalize().with_context(|| format!("cannot resolve {}", out.display()))?;

    let output = run_harness(&harness, &harness_args(&args, &runtime, &plugin, &model, &out), &out)?;
    let result = match RunResult::read(&out) {
        Ok(result) => result,
        Err(error) => {
            eprintln!("{}", String::from_utf8_lossy(&output.stderr).trim_end());
            bail!("the harness wrote no readable result ({}, {error}); see its message above", output.status);
        }
    };
    if output.status.code() == Some(SIGSEGV_STATUS) || output.status.code().is_none() {
        eprintln!("npugate: note: the harness crashed in teardown ({}) after writing result.json; the result decides", output.status);
    }
    if let Some(backend) = result.backend.as_ref().filter(|b| !b.started) {
        bail!(
            "the QNN backend did not start under preflight, so nothing can be predicted: {}",
            backend.reason.as_deref().unwrap_or("no reason in the log")
        );
    }
    let mut report = profile_parser::analyze_result_dir(&out).with_context(|| format!("cannot analyze {}", out.display()))?;
    report.predicted = Some(PREDICTED.to_string());
    let json = serde_json::to_vec_pretty(&report)?;
    std::fs::write(out.join(PLACEMENT_FILE), &json).with_context(|| format!("cannot write {}", out.join(PLACEMENT_FILE).display()))?;
    if args.json {
        println!("{}", String::from_utf8_lossy(&json));
    } else {
        print!("{}", summary(&report));
        eprintln!("npugate: result and {PLACEMENT_FILE} in {}", out.display());
    }
    Ok(if unexpected_fallbacks(&report).next().is_some() { crate::EXIT_FAIL } else { crate::EXIT_PASS })
}

/// The plugin library of a QNN plugin runtime built for aarch64 Linux, with the Saver it needs.
fn qnn_plugin(runtime: &RuntimeManifest) -> Result<PathBuf> {
    let fix = format!("pass --runtime {DEFAULT_RUNTIME} (npugate runtime fetch {DEFAULT_RUNTIME})");
    if runtime.target != TARGET {
        bail!("runtime {} is built for {}, but preflight runs the {TARGET} harness; {fix}", runtime.name, runtime.target);
    }
    let plugin = match &runtime.ep {
        Some(ep) if ep.name == "QNNExecutionProvider" && ep.attach == "plugin" => runtime.ep_library_path(),
        _ => None,
    };
    let Some(plugin) = plugin else {
        bail!("runtime {} has no QNN plugin EP; {fix}", runtime.name);
    };
    for needed in ["libQnnHtp.so", "libQnnSaver.so"] {
        if !runtime.dir.join(needed).is_file() {
            bail!("runtime {} has no {needed}, which preflight needs; {fix}", runtime.name);
        }
    }
    Ok(plugin)
}

/// The harness command line of a preflight: one recorded run, one profiled run, the reference pass.
fn harness_args(args: &PreflightArgs, runtime: &RuntimeManifest, plugin: &Path, model: &Path, out: &Path) -> Vec<String> {
    let text = |p: &Path| p.display().to_string();
    let mut list: Vec<String> = [
        "--ort-lib", &text(&runtime.ort_library_path()),
        "--model", &text(model),
        "--out", &text(out),
        "--warmup", "0", "--runs", "1", "--profile-runs", "1",
        "--ep", "qnn", "--ep-library", &text(plugin),
        "--qnn-backend", "htp",
        "--enable-htp-fp16-precision", &args.enable_htp_fp16_precision,
        "--ep-option", &format!("qnn_saver_path={}", text(&runtime.dir.join("libQnnSaver.so"))),
        "--ep-option", "skip_backend_op_validation=1",
        "--runtime-name", &runtime.name,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for shape in &args.shapes {
        list.extend(["--shape".to_string(), shape.clone()]);
    }
    list
}

/// Runs the harness with its working directory in `out` (the Saver writes `saver_output.c` and
/// `params.bin` into the CWD): natively on an aarch64 host, else under qemu-user with an ARM
/// `/proc/cpuinfo` bind-mounted in a private mount namespace.
fn run_harness(harness: &Path, args: &[String], out: &Path) -> Result<Output> {
    if !harness.is_file() {
        bail!("harness {} does not exist; build it with scripts/build-aarch64 or pass --harness", harness.display());
    }
    let mut command = if std::env::consts::ARCH == "aarch64" {
        Command::new(harness)
    } else {
        let cpuinfo = out.join(".qemu-cpuinfo");
        std::fs::write(&cpuinfo, ARM_CPUINFO).with_context(|| format!("cannot write {}", cpuinfo.display()))?;
        let mut command = Command::new("unshare");
        // Root may mount in a new mount namespace; anyone else needs a user namespace for it.
        command.args(if is_root() { &["-m"][..] } else { &["-r", "-m"][..] });
        command
            .args(["--propagation", "private", "sh", "-c"])
            .arg(r#"mount --bind "$0" /proc/cpuinfo && exec qemu-aarch64 -L /usr/aarch64-linux-gnu "$@""#)
            .arg(&cpuinfo)
            .arg(harness);
        if std::env::var_os("QEMU_CPU").is_none() {
            command.env("QEMU_CPU", "cortex-a76");
        }
        command
    };
    // Without a Snapdragon the QNN plugin offers a device only when its CPU backend is enabled.
    command.env("ORT_QNN_ENABLE_CPU_BACKEND", "1").current_dir(out).args(args);
    let output = command.output().with_context(|| {
        format!("cannot start {:?}; preflight on x86_64 needs qemu-user, util-linux unshare and the aarch64 libc (scripts/build-aarch64 installs them)", command.get_program())
    })?;
    let _ = std::fs::remove_file(out.join(".qemu-cpuinfo"));
    Ok(output)
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

/// Nodes that would fall back to CPU against the model's wishes (not I/O quantization by design).
fn unexpected_fallbacks(report: &PlacementReport) -> impl Iterator<Item = &profile_parser::report::FallbackNode> {
    report.fallback.iter().filter(|f| !f.expected)
}

/// The terminal summary: the label, the share on QNN, every fallback with the EP's own reason.
fn summary(report: &PlacementReport) -> String {
    let mut text = format!(
        "preflight ({}): {:.1}% of {} nodes on {}, {:.1}% of FLOPs\n",
        PREDICTED, report.preferred_nodes_pct, report.totals.nodes, report.preferred_ep, report.preferred_flops_pct
    );
    for node in &report.fallback {
        let kind = if node.expected { "on CPU by design" } else { "would fall back to CPU" };
        let reason = node.reason.as_deref().unwrap_or("no reason in the log");
        text.push_str(&format!("  {kind}: {} ({}): {reason}\n", node.name, node.op_type));
        if let Some(hint) = node.hint.as_deref().filter(|_| !node.expected) {
            text.push_str(&format!("    hint: {hint}\n"));
        }
    }
    if unexpected_fallbacks(report).next().is_none() {
        text.push_str("  every node would be claimed by QNN\n");
    }
    text
}
