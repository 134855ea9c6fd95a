//! `npugate numerics`: where the numbers go wrong — every layer of a model compared with its fp32
//! reference on this machine, on devices or on the host HTP emulator per Snapdragon and QNN
//! version; exit 0 no divergence, 1 a divergence, 2 could not judge.

use anyhow::{bail, Result};
use clap::Args;
use npugate_result::report::Finished;
use npugate_settings::{HarnessSettings, SessionSettings};

use super::options::{EmulatorArgs, ReferenceArg, TargetArgs};
use npugate_numerics::{self as numerics, NumericsRequest, Targets, TensorChoice, DEFAULT_MIN_SQNR_DB};
use npugate_plan::{self as plan, Command, Installed, ModelFlags, Plan, Request};

/// Arguments of `npugate numerics`.
#[derive(Debug, Args)]
pub struct NumericsArgs {
    /// `--model`: the model under test (e.g. a QDQ model); `--runtime`, `--harness`, `--out`
    /// [default: npugate-results/<model>/numerics], `--local` or devices (neither: with `--ep qnn
    /// --soc`, the host HTP emulator), `--json` (`npugate.numerics/1`).
    #[command(flatten)]
    pub target: TargetArgs,
    /// `--reference-model`: the float model whose fp32 CPU run is the reference.
    #[command(flatten)]
    pub reference: ReferenceArg,
    /// `--soc`, `--qnn`: with `--ep qnn`, the host HTP emulator as these Snapdragons and QNN
    /// versions (per-chipset numerics without a device).
    #[command(flatten)]
    pub emulator: EmulatorArgs,
    /// Which tensors to expose: `all` (default), `boundaries` (those crossing a partition
    /// boundary in a plain run on the target) or tensor names.
    #[arg(long, value_name = "all|boundaries|NAME", num_args = 1..)]
    pub tensors: Vec<String>,
    /// A layer whose SQNR falls below this (dB) while its inputs were above it is a divergence.
    #[arg(long, value_name = "DB", default_value_t = DEFAULT_MIN_SQNR_DB)]
    pub min_sqnr_db: f64,
    /// How the target runs the model (EP and its options, shapes, inputs, seed, threads):
    /// numerics runs one inference.
    #[command(flatten)]
    pub session: SessionSettings,
}

impl NumericsArgs {
    /// The plan request these flags make.
    pub fn request(&self) -> Result<Request<'_>> {
        Ok(Request {
            reference_model: self.reference.reference_model.as_deref(),
            flags: ModelFlags::of(&self.session, None),
            fp16: self.session.qnn.enable_htp_fp16_precision,
            ..self.target.request(Command::Numerics, self.session.ep, Some(&self.emulator), None)?
        })
    }
}

/// Runs `npugate numerics`.
pub fn run(args: NumericsArgs, console: &super::console::Console) -> Result<u8> {
    if !args.min_sqnr_db.is_finite() {
        bail!("--min-sqnr-db {} is not a number of dB; pass e.g. --min-sqnr-db 20", args.min_sqnr_db);
    }
    for path in std::iter::once(args.target.model()).chain(args.reference.reference_model.as_deref()) {
        if !path.is_file() {
            bail!("model {} not found", path.display());
        }
    }
    let policy = args.target.place.devices.policy(console);
    let json = args.target.json.json;
    // Every flag becomes a typed value before the plan: after it, the command reads only the plan
    // and these.
    let (tensors, min_sqnr_db, session) = (TensorChoice::parse(&args.tensors), args.min_sqnr_db, args.session.clone());
    let plan = Plan::resolve(&args.request()?, &Installed)?;
    // A compiled model's fp32 reference is its source model, found the way `npugate run` finds it.
    let choice = &plan.model.reference;
    let Some(reference_model) = plan.model.reference_model()? else {
        bail!("{}", choice.skipped.as_deref().unwrap_or("no reference model"));
    };
    plan.announce();
    let (host_harness, host_runtime) = plan::reference_tools(&Installed)?;
    let settings = choice.settings_for(&HarnessSettings::from(session));
    let request = NumericsRequest {
        model: plan.model.given()?,
        reference_model,
        tensors: &tensors,
        min_sqnr_db,
        settings: &settings,
        host_harness: &host_harness,
        host_runtime: &host_runtime,
        out: &plan.out,
        cancel: &console.cancel,
    };
    let on = Targets { planned: &plan.targets, env: &[], timeouts: plan.timeouts, policy: &policy };
    let report = numerics::run(&request, &on)?;
    let saved = format!("numerics.json and numerics.html in {}", plan.out.display());
    Ok(console.finished(json, Finished::saved(&report, saved)))
}
