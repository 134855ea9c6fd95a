//! `npugate estimate`: an ESTIMATE — never a measurement — of a model's latency on the NPU of each
//! Snapdragon, from its graph, by a small latency model fitted per SoC on Qualcomm AI Hub's
//! published device runs (`data/aihub/`), printed with the error that model makes on those runs
//! when each model is left out of its fit. Without `--model`, the fitted models and their errors.
//! Exit 0 estimated (or calibration printed), 1 no SoC could be estimated, 2 bad input.

use super::console::Console;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use npugate_estimate::{
    chip, CalibrationReport, EstimateReport, Estimator, GraphFeatures, Reference, SocEstimate, ESTIMATE_SCHEMA, LABEL,
};
use npugate_result::report::Finished;
use npugate_settings::{EpKind, ShapeSpec};

use super::options::{JsonArg, OutArg, RuntimeArgs};
use npugate_plan::{Command, Installed, Place, Plan, Request};

/// Arguments of `npugate estimate`.
#[derive(Debug, Args)]
pub struct EstimateArgs {
    /// The ONNX model to estimate [default: none: print each SoC's fitted latency model and its error].
    #[arg(long, value_name = "PATH")]
    pub model: Option<PathBuf>,
    /// Snapdragon to estimate for (repeatable), e.g. SM8650; `all` = every SoC with AI Hub runs [default: all].
    #[arg(long = "soc", value_name = "SOC|all")]
    pub socs: Vec<String>,
    /// A folder with the reference files (perf.csv, features.json, PROVENANCE.md, as data/aihub/)
    /// [default: the ones built into npugate].
    #[arg(long, value_name = "DIR")]
    pub reference: Option<PathBuf>,
    /// Fix a dynamic input's dims, NAME=DIMS (repeatable), e.g. `x=1x3x224x224`.
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    pub shapes: Vec<ShapeSpec>,
    /// `--runtime`, `--harness` of the CPU run that gives the node shapes.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// `--out` [default: npugate-results/<model>/estimate].
    #[command(flatten)]
    pub out: OutArg,
    /// `--json`: `npugate.estimate/1` (`npugate.estimate-calibration/1` without --model).
    #[command(flatten)]
    pub json: JsonArg,
}

/// Runs `npugate estimate`.
pub fn run(args: EstimateArgs, console: &Console) -> Result<u8> {
    let reference = match &args.reference {
        Some(dir) => Reference::load(dir)?,
        None => Reference::embedded()?,
    };
    let estimator = Estimator::new(reference);
    let socs = socs(&args.socs, &estimator.reference)?;
    match &args.model {
        None => Ok(console.finished(args.json.json, Finished::new(&CalibrationReport::of(&estimator, &socs)))),
        Some(model) => estimate(&args, model, &estimator, &socs, console),
    }
}

/// The SoCs `--soc` names, in npugate's names: every SoC with AI Hub runs for `all` or none given;
/// a name in neither npugate's SoC table nor the reference is bad input.
fn socs(flags: &[String], reference: &Reference) -> Result<Vec<String>> {
    let known = reference.socs();
    if flags.is_empty() || flags.iter().any(|f| f.eq_ignore_ascii_case("all")) {
        return Ok(known);
    }
    let mut socs: Vec<String> = Vec::new();
    for flag in flags {
        let name = match npugate_result::hexagon::find(flag) {
            Ok(soc) => soc.model.to_string(),
            Err(_) if known.contains(&chip(flag)) => chip(flag),
            Err(why) => bail!("--soc {flag}: {why}; AI Hub measured: {}", known.join(", ")),
        };
        if !socs.contains(&name) {
            socs.push(name);
        }
    }
    Ok(socs)
}

/// The model's node shapes from one CPU run on this machine, its features, and the estimate per SoC.
fn estimate(
    args: &EstimateArgs,
    model: &std::path::Path,
    estimator: &Estimator,
    socs: &[String],
    console: &Console,
) -> Result<u8> {
    let model_path = model
        .canonicalize()
        .with_context(|| format!("model {} cannot be read; pass --model with an .onnx file", model.display()))?;
    let request = Request {
        runtime: args.runtime.runtime.as_deref(),
        harness: args.runtime.harness.harness.as_deref(),
        out: args.out.out.as_deref(),
        ..Request::new(Command::Estimate, &model_path, Place::Local, EpKind::Cpu)
    };
    // What the run needs besides the plan, built before it: nothing reads the flags after.
    let (session, json) =
        (npugate_settings::SessionSettings { shapes: args.shapes.clone(), ..Default::default() }, args.json.json);
    let shown = model.display().to_string();
    let plan = Plan::resolve(&request, &Installed)?;
    let planned = &plan.targets[0];
    let preflight = npugate_engine::host_preflight::HostPreflight {
        harness: &planned.harness,
        runtime: &planned.runtime,
        model: plan.model.given()?,
        session: &session,
        timeout: plan.timeouts.tool,
    };
    let (_, placement) = preflight.run(&plan.out, &console.cancel)?;
    let onnx = npugate_onnx::Model::read(&model_path)
        .with_context(|| format!("model {} cannot be read as ONNX", model_path.display()))?;
    let features = GraphFeatures::of_report(&placement, &onnx);
    let estimates: Vec<SocEstimate> = socs.iter().map(|soc| estimator.estimate(soc, &features)).collect();
    let report = EstimateReport {
        schema: ESTIMATE_SCHEMA.into(),
        label: LABEL.into(),
        model: shown,
        model_sha256: placement.model_sha256.clone(),
        features,
        reference: estimator.reference.source.clone(),
        socs: estimates,
    };
    Ok(console.finished(json, Finished::new(&report)))
}
