//! `npugate compare --baseline-model A --model B`: both models interleaved on the same device in
//! one session (ABBA rounds), judged on the paired ratio B/A and on their placements. Exit 0 pass,
//! 1 a rule failed, 2 could not judge.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use npugate_gate::compare::CompareRules;
use npugate_result::report::{Finished, Reporter};
use npugate_settings::HarnessSettings;

use super::console::Console;
use super::options::{ConfirmArg, FormatArgs, HealthArgs, RulesArgs, TargetArgs};
use npugate_engine::compare::{compare_on, CompareReport, CompareSpec};
use npugate_engine::confirm::run_confirmed;
use npugate_engine::device_rack::{self, Ran};
use npugate_engine::progress::Progress;
use npugate_engine::targets::{Job, Target};
use npugate_plan::{Command, Installed, ModelFlags, Plan, Request};

/// Arguments of `npugate compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline model A (e.g. the one on the main branch).
    #[arg(long, value_name = "PATH")]
    pub baseline_model: PathBuf,
    /// `--model`: the candidate model B (the one under review); `--runtime`, `--harness`, `--out`
    /// [default: npugate-results/<model>/compare; a rack puts each device in <out>/<serial>/],
    /// `--local` or devices, `--json` (`npugate.compare/1`).
    #[command(flatten)]
    pub target: TargetArgs,
    /// Rounds: each model runs once per round, in ABBA order (AB, BA, AB, …).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=99))]
    pub rounds: u32,
    /// Time budget in seconds: an undecided comparison (its interval reaches both sides of the
    /// limit) measures more rounds, half as many again per look, until it decides or the next look
    /// would end after this; then it is NOT JUDGED (exit 2).
    #[arg(long, value_name = "SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub budget: u64,
    /// Timed runs of each model in each round (instead of --runs).
    #[arg(long, default_value_t = 20, conflicts_with = "runs", value_parser = clap::value_parser!(u32).range(1..))]
    pub runs_per_round: u32,
    /// `--confirm K`: the whole comparison rerun.
    #[command(flatten)]
    pub confirm: ConfirmArg,
    /// Compare rules (`--gate FILE`: max_slowdown_pct (default 5), placement_must_match (default
    /// true), disable; `--rule NAME=VALUE`).
    #[command(flatten)]
    pub rules: RulesArgs,
    /// `--format`, `--report`.
    #[command(flatten)]
    pub output: FormatArgs,
    /// Measurement settings, the same for both models (`--runs` is `--runs-per-round` here).
    #[command(flatten)]
    pub settings: HarnessSettings,
    /// Device health (`--skip-noisy`, `--history`).
    #[command(flatten)]
    pub health: HealthArgs,
}

impl CompareArgs {
    /// The plan request these flags make.
    pub fn request(&self) -> Result<Request<'_>> {
        Ok(Request {
            baseline: Some(&self.baseline_model),
            flags: ModelFlags::of(&self.settings.session, Some(&self.settings.generation)),
            fp16: self.settings.qnn.enable_htp_fp16_precision,
            settings: Some(&self.settings),
            ..self.target.request(Command::Compare, self.settings.ep, None, Some(&self.health))?
        })
    }
}

/// Runs `npugate compare`: one target into `<out>`, or a rack (the split `run` shares).
pub fn run(args: CompareArgs, console: &Console) -> Result<u8> {
    if args.settings.check_outputs {
        bail!("compare does not check outputs; check each model with `npugate run --check-outputs`");
    }
    let rules = CompareRules::load(args.rules.rules_file.as_deref(), &args.rules.rule_overrides)?;
    let sinks = args.output.sinks(args.target.json.json, console.color);
    // Every flag becomes a typed value before the plan: after it, the command reads only the plan
    // and these.
    let settings = &args.settings;
    let (rounds, budget) = (args.rounds as usize, std::time::Duration::from_secs(args.budget));
    let (runs_per_round, confirm) = (args.runs_per_round, args.confirm.confirm);
    let policy = args.target.place.devices.policy(console);
    let plan = Plan::resolve(&args.request()?, &Installed)?;
    // A compiled side's placement run counts it in its source model's nodes and runs the source
    // as its reference, found the way `npugate run` finds it.
    let baseline = plan.baseline.as_ref().context("compare's plan has its baseline model")?;
    let choices = [&baseline.reference, &plan.model.reference];
    for skipped in choices.iter().filter_map(|choice| choice.skipped_for(settings)) {
        eprintln!("npugate: warning: {skipped}");
    }
    plan.announce();
    let (baseline_model, candidate_model) = (baseline.given()?, plan.model.given()?);
    let sources = [baseline.source_model()?, plan.model.source_model()?];
    let specs: Vec<CompareSpec> = plan
        .targets
        .iter()
        .map(|one| CompareSpec {
            job: Job::new(&one.harness, &one.runtime, &plan.model.path, settings, plan.timeouts.run, &console.cancel),
            baseline: baseline_model,
            candidate: candidate_model,
            sources,
            rounds,
            budget,
            runs_per_round,
            rules: &rules,
        })
        .collect();
    let targets: Vec<&dyn Target> = plan.targets.iter().map(|t| t.target.as_ref()).collect();
    let work = |index: usize, target: &dyn Target, dir: &Path, progress: &Progress<'_>| {
        run_confirmed(confirm, dir, |d| compare_on(target, &specs[index], d, progress))
    };
    let on_done = |target: &dyn Target, report: &CompareReport| {
        sinks.device_finished(target.name(), &report.verdict, &report.dir)
    };
    let names: Vec<&str> = targets.iter().map(|t| t.name()).collect();
    let ran = device_rack::on_plan(&targets, plan.single().is_some(), &plan.out, &policy, work, &on_done)
        .with_context(|| format!("comparing on {}", names.join(", ")))?;
    match ran {
        Ran::One(report) => {
            let saved = format!("comparison, every run and report in {}", report.dir.display());
            Ok(sinks.finished(&Finished::saved(&report.verdict, saved)))
        }
        Ran::Rack(rack) => Ok(sinks.rack_finished(&rack.report)),
    }
}
