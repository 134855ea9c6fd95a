//! `npugate run`: run the harness on a model on this machine (`--local`, natively or on the host
//! HTP emulator with `--ep qnn`) or on devices over adb (`--device`), check its outputs, judge it
//! and report. Exit code 0 pass, 1 a rule failed, 2 the run could not be judged.

use anyhow::Result;
use clap::{Args, Command as ClapCommand};
use npugate_settings::HarnessSettings;

use super::console::Console;
use super::numerics::NumericsArgs;
use super::options::{ConfirmArg, EmulatorArgs, EvidenceArgs, GateArgs, HealthArgs, ReferenceArg, TargetArgs};
use npugate_engine::pipeline::GateSpec;
use npugate_plan::run::{self as run_plan, RunOptions};
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
    /// Only measure: judge no rule (the gate flags are ignored); the report shows the measurement
    /// (latency, memory, placement) as `npugate run: MEASURED`, `--json` `npugate.verdict/1.2` with
    /// outcome `measured`; exit 0 when the run succeeded.
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
    let mut gate = if args.no_gate { GateSpec::measure_only() } else { args.gate.spec()? };
    if args.settings.check_outputs {
        let words: Vec<String> = std::env::args().skip_while(|word| word != "run").skip(1).collect();
        gate.numerics_command = Some(numerics_command(&words));
    }
    let bundle = args.evidence.bundle()?;
    // Every flag becomes a typed value before the plan: after it, the command reads only the plan
    // and these options.
    let options = RunOptions {
        settings: &args.settings,
        gate: &gate,
        sinks: args.gate.output.sinks(args.target.json.json, console.color),
        confirm: args.confirm.confirm,
        policy: args.target.place.devices.policy(console),
        evidence: bundle.as_ref().map(|(dir, key)| (dir.as_path(), key)),
    };
    // A model that cannot run anywhere (its data missing or out of its folder, a bad --shape, a
    // flag its kind does not take) is one error from the plan before any device is touched.
    let plan = Plan::resolve(&args.request()?, &Installed)?;
    plan.announce();
    run_plan::execute(&plan, &options, &Installed)
}

/// The `npugate numerics` command line that finds the first diverging layer of the run whose
/// words after `run` are `run_words`: its flags that `numerics` takes (model, reference, target,
/// EP and session), in their order, without `--out` and `--json` (numerics has its own directory
/// and prints text); shell-quoted, to copy and paste.
fn numerics_command(run_words: &[String]) -> String {
    let run = RunArgs::augment_args(ClapCommand::new("run"));
    let numerics = NumericsArgs::augment_args(ClapCommand::new("numerics"));
    let find =
        |command: &ClapCommand, long: &str| command.get_arguments().find(|a| a.get_long() == Some(long)).cloned();
    let mut kept = vec!["npugate".to_string(), "numerics".to_string()];
    let mut words = run_words.iter().peekable();
    while let Some(word) = words.next() {
        let Some(flag) = word.strip_prefix("--") else { continue };
        let (name, inline) = flag.split_once('=').map_or((flag, false), |(name, _)| (name, true));
        let keep = !matches!(name, "out" | "json") && find(&numerics, name).is_some();
        let values = match find(&run, name).or_else(|| find(&numerics, name)) {
            Some(arg) if !inline && arg.get_action().takes_values() => {
                arg.get_num_args().map_or(1, |range| range.max_values())
            }
            _ => 0,
        };
        if keep {
            kept.push(word.clone());
        }
        for _ in 0..values {
            let Some(value) = words.next_if(|value| !value.starts_with("--")) else { break };
            if keep {
                kept.push(value.clone());
            }
        }
    }
    shell_words::join(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_numerics_command_keeps_the_model_reference_target_and_session_of_the_run() {
        let words = "--local --ep qnn --soc SM8650 --model dir/my_qdq.onnx --runs 5 --check-outputs --reference-model \
                     f.onnx --shape x=1x3x8x8 --shape y=1x4 --out o --rule min_cosine=0.9 --json --seed=3"
            .split_whitespace()
            .map(String::from)
            .chain(["--input".into(), "x=my input.npy".into()])
            .collect::<Vec<_>>();
        assert_eq!(
            numerics_command(&words),
            "npugate numerics --local --ep qnn --soc SM8650 --model dir/my_qdq.onnx --reference-model f.onnx --shape \
             'x=1x3x8x8' --shape 'y=1x4' '--seed=3' --input 'x=my input.npy'"
        );
    }
}
