//! `npugate run`: run the harness on a model on this machine (`--local`, natively or on the host
//! HTP emulator with `--ep qnn`) or on devices over adb (`--device`), check its outputs, judge it
//! and report. Exit code 0 pass, 1 a rule failed, 2 the run could not be judged.

use anyhow::Result;
use clap::Args;
use npugate_settings::HarnessSettings;

use super::console::Console;
use super::options::{ConfirmArg, EmulatorArgs, EvidenceArgs, GateArgs, HealthArgs, ReferenceArg, TargetArgs};
use crate::run_plan::{self, RunOptions};
use npugate_plan::{Command, Installed, ModelFlags, Plan, Request};

/// Arguments of `npugate run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// `--model`, `--runtime`, `--harness`, `--out` [default: npugate-results/<model>/local, …/htp on
    /// the emulator, …/devices], `--local` or devices, `--json` (the verdict, `npugate.verdict/1`).
    #[command(flatten)]
    pub target: TargetArgs,
    /// `--soc`, `--qnn` (with `--ep qnn`: the host HTP emulator; outputs are checked, latency is
    /// not judged).
    #[command(flatten)]
    pub emulator: EmulatorArgs,
    /// Only measure: skip placement analysis and the gate.
    #[arg(long)]
    pub no_gate: bool,
    /// `--reference-model`: the float model of a QDQ model, the source of a compiled model.
    #[command(flatten)]
    pub reference: ReferenceArg,
    /// `--confirm K`.
    #[command(flatten)]
    pub confirm: ConfirmArg,
    /// Measurement settings.
    #[command(flatten)]
    pub settings: HarnessSettings,
    /// Gate settings.
    #[command(flatten)]
    pub gate: GateArgs,
    /// Evidence bundle (`--evidence OUT`, `--signing-key FILE`).
    #[command(flatten)]
    pub evidence: EvidenceArgs,
    /// Device health (`--skip-noisy`, `--history`).
    #[command(flatten)]
    pub health: HealthArgs,
}

impl RunArgs {
    /// The plan request these flags make.
    pub fn request(&self) -> Result<Request<'_>> {
        Ok(Request {
            reference_model: self.reference.reference_model.as_deref(),
            flags: ModelFlags::of(&self.settings.session, Some(&self.settings.generation)),
            fp16: self.settings.qnn.enable_htp_fp16_precision,
            settings: Some(&self.settings),
            ..self.target.request(Command::Run, self.settings.ep, Some(&self.emulator), Some(&self.health))?
        })
    }
}

/// Runs `npugate run`.
pub fn run(args: RunArgs, console: &Console) -> Result<u8> {
    let gate = (!args.no_gate).then(|| args.gate.spec()).transpose()?;
    let bundle = args.evidence.bundle()?;
    // A model that cannot run anywhere (its data missing or out of its folder, a bad --shape, a
    // flag its kind does not take) is one error from the plan before any device is touched.
    let plan = Plan::resolve(&args.request()?, &Installed)?;
    plan.announce();
    let options = RunOptions {
        model: args.target.model(),
        settings: &args.settings,
        gate: gate.as_ref(),
        sinks: args.gate.output.sinks(args.target.json.json, console.color),
        confirm: args.confirm.confirm,
        policy: args.target.place.devices.policy(console),
        evidence: bundle.as_ref().map(|(dir, key)| (dir.as_path(), key)),
    };
    run_plan::execute(&plan, &options, &Installed)
}
