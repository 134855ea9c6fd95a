//! `npugate numerics`: where the numbers go wrong — every layer of a model compared with its fp32
//! reference on this machine, on devices or on the host HTP emulator per Snapdragon and QNN
//! version; exit 0 no divergence, 1 a divergence, 2 could not judge.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use npugate_settings::{HarnessSettings, SessionSettings};

use super::options::{EmulatorArgs, JsonArg, ModelArg, OutArg, PlaceArgs, RuntimeArgs};
use crate::numerics::{self, NumericsRequest, TensorChoice, Targets, DEFAULT_MIN_SQNR_DB};
use crate::plan::{self, Command, Installed, Place, Plan, Request};

/// Arguments of `npugate numerics`.
#[derive(Debug, Args)]
pub struct NumericsArgs {
    /// `--model`: the model under test (e.g. a QDQ model).
    #[command(flatten)]
    pub model: ModelArg,
    /// The float model whose fp32 CPU run is the reference (default: the model itself).
    #[arg(long, value_name = "PATH")]
    pub reference_model: Option<PathBuf>,
    /// `--local`, or devices over adb (`--device SERIAL|all`, `--adb`, `--work-dir`, `--retries`, …);
    /// neither with `--ep qnn --soc`: the host HTP emulator.
    #[command(flatten)]
    pub place: PlaceArgs,
    /// `--runtime`, `--harness`.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
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
    /// `--json`: `npugate.numerics/1` instead of the table.
    #[command(flatten)]
    pub json: JsonArg,
    /// `--out` [default: npugate-results/<model>/numerics].
    #[command(flatten)]
    pub out: OutArg,
    /// How the target runs the model (EP and its options, shapes, inputs, seed, threads):
    /// numerics runs one inference.
    #[command(flatten)]
    pub session: SessionSettings,
}

impl NumericsArgs {
    /// The plan request these flags make: `--ep qnn` with `--soc`/`--qnn` and neither `--local`
    /// nor a device is the host HTP emulator.
    pub fn request(&self) -> Result<Request<'_>> {
        let emulated = !self.place.local && !self.place.devices.devices.wanted() && (!self.emulator.socs.is_empty() || !self.emulator.qnn.is_empty());
        let place = match emulated {
            true if self.session.ep == npugate_settings::EpKind::Qnn => Place::Local,
            true => bail!("--soc and --qnn run the model on the host HTP emulator: they need --ep qnn"),
            false => match self.place.place(None) {
                Ok(place) => place,
                Err(_) => bail!("choose where to run: --local (this machine), --device SERIAL|all (over adb) or --ep qnn --soc SOC (the host HTP emulator)"),
            },
        };
        Ok(Request {
            command: Command::Numerics,
            model: &self.model.model,
            place,
            ep: self.session.ep,
            runtime: self.runtime.runtime.as_deref(),
            harness: self.runtime.harness.harness.as_deref(),
            socs: self.emulator.socs(),
            qnn: self.emulator.qnn(),
            out: self.out.out.as_deref(),
        })
    }
}

/// Runs `npugate numerics`.
pub fn run(args: NumericsArgs) -> Result<u8> {
    if !args.min_sqnr_db.is_finite() {
        bail!("--min-sqnr-db {} is not a number of dB; pass e.g. --min-sqnr-db 20", args.min_sqnr_db);
    }
    for path in std::iter::once(&args.model.model).chain(&args.reference_model) {
        if !path.is_file() {
            bail!("model {} not found", path.display());
        }
    }
    let plan = Plan::resolve(&args.request()?, &Installed)?;
    plan.announce();
    let cancel = super::options::interrupt_flag();
    let (host_harness, host_runtime) = plan::reference_tools(&Installed)?;
    let tensors = TensorChoice::parse(&args.tensors);
    let settings = HarnessSettings::from(args.session.clone());
    let request = NumericsRequest {
        model: &args.model.model,
        reference_model: args.reference_model.as_deref().unwrap_or(&args.model.model),
        tensors: &tensors,
        min_sqnr_db: args.min_sqnr_db,
        settings: &settings,
        host_harness: &host_harness,
        host_runtime: &host_runtime,
        out: &plan.out,
        cancel: &cancel,
    };
    let policy = args.place.devices.policy(&cancel);
    let on = Targets { planned: &plan.targets, env: &[], timeout: plan.timeout, policy: &policy };
    let report = numerics::run(&request, &on)?;
    if args.json.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        print!("{}", numerics::render::text(&report, color));
    }
    eprintln!("npugate: numerics.json and numerics.html in {}", plan.out.display());
    Ok(report.outcome.exit_code())
}
