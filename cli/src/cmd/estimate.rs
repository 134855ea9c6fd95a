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
    chip, EstimateReport, Estimator, GraphFeatures, Reference, SocEstimate, ESTIMATE_SCHEMA, LABEL, TERMS,
};
use npugate_result::contract::{EXIT_FAIL, EXIT_PASS};
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

/// Schema of `npugate estimate --json` without a model.
const CALIBRATION_SCHEMA: &str = "npugate.estimate-calibration/1";

/// Runs `npugate estimate`.
pub fn run(args: EstimateArgs, console: &Console) -> Result<u8> {
    let reference = match &args.reference {
        Some(dir) => Reference::load(dir)?,
        None => Reference::embedded()?,
    };
    let estimator = Estimator::new(reference);
    let socs = socs(&args.socs, &estimator.reference)?;
    match &args.model {
        None => calibration(&estimator, &socs, args.json.json),
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
        let name = match npugate_host::hexagon::find(flag) {
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

/// Each SoC's latency model, its coefficients and its leave-one-model-out error.
fn calibration(estimator: &Estimator, socs: &[String], json: bool) -> Result<u8> {
    let fitted: Vec<(String, Result<npugate_estimate::SocCalibration, String>)> =
        socs.iter().map(|soc| (soc.clone(), estimator.calibrate(soc))).collect();
    if json {
        let socs: Vec<serde_json::Value> = fitted
            .iter()
            .map(|(soc, fit)| match fit {
                Ok(calibration) => serde_json::json!({ "soc": soc, "calibration": calibration }),
                Err(why) => serde_json::json!({ "soc": soc, "no_estimate": why }),
            })
            .collect();
        let report = serde_json::json!({
            "schema": CALIBRATION_SCHEMA,
            "label": LABEL,
            "terms": TERMS,
            "reference": estimator.reference.source,
            "socs": socs,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{LABEL}");
        println!("reference: {} ({})\n", estimator.reference.source.release, estimator.reference.source.location);
        println!("{:<8} {:>5} {:>7} {:>9} {:>6}  FITTED ON", "SOC", "ROWS", "MODELS", "MEDIAN ERR", "P90 ERR");
        for (soc, fit) in &fitted {
            match fit {
                Ok(c) => println!(
                    "{soc:<8} {:>5} {:>7} {:>9.0}% {:>6.0}%  {}",
                    c.error.rows,
                    c.error.models,
                    100.0 * c.error.median_rel,
                    100.0 * c.error.p90_rel,
                    c.devices.join(", ")
                ),
                Err(why) => println!("{soc:<8} no estimate: {why}"),
            }
        }
        for (soc, fit) in &fitted {
            if let Ok(c) = fit {
                let terms: Vec<String> = TERMS
                    .iter()
                    .zip(&c.model.coefficients)
                    .filter(|(_, v)| **v > 0.0)
                    .map(|(term, v)| format!("{v:.4} {term}"))
                    .collect();
                println!("\n{soc} latency model: {}", terms.join(" + "));
            }
        }
        println!("\nErrors are leave-one-model-out: each AI Hub row predicted by a fit without any row of its model.");
    }
    Ok(if fitted.iter().any(|(_, f)| f.is_ok()) { EXIT_PASS } else { EXIT_FAIL })
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
    let plan = Plan::resolve(&request, &Installed)?;
    let planned = &plan.targets[0];
    let session = npugate_settings::SessionSettings { shapes: args.shapes.clone(), ..Default::default() };
    let preflight = npugate_engine::host_preflight::HostPreflight {
        harness: &planned.harness,
        runtime: &planned.runtime,
        model: &model_path,
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
        model: model.display().to_string(),
        model_sha256: placement.model_sha256.clone(),
        features,
        reference: estimator.reference.source.clone(),
        socs: estimates,
    };
    if args.json.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", summary(&report));
    }
    Ok(if report.socs.iter().any(|s| s.estimate_ms.is_some()) { EXIT_PASS } else { EXIT_FAIL })
}

/// The terminal report: what was read of the graph, then one line per SoC.
fn summary(report: &EstimateReport) -> String {
    let f = &report.features;
    let giga = |flops: u64| flops as f64 / 1e9;
    let mut out = format!(
        "{}\nmodel {} ({}; {} layers; GFLOPs: conv {:.3}, matmul {:.3}, other {:.3}{}; weights {:.1} MB, activations {:.1} MB)\nreference: {} ({})\n\n",
        report.label,
        report.model,
        f.precision.0,
        f.layers,
        giga(f.conv_flops),
        giga(f.matmul_flops),
        giga(f.other_flops),
        if f.unknown_flops_nodes > 0 { format!(", {} nodes of unknown FLOPs", f.unknown_flops_nodes) } else { String::new() },
        f.weight_bytes as f64 / 1e6,
        f.activation_bytes as f64 / 1e6,
        report.reference.release,
        report.reference.location,
    );
    for soc in &report.socs {
        out.push_str(&format!("{}\n", soc.line()));
    }
    out.push_str(
        "\nThe estimate assumes the whole graph runs on the SoC's NPU: `npugate preflight --soc S` checks that.\n",
    );
    out
}
