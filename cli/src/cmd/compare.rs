//! `npugate compare --baseline-model A --model B`: both models interleaved on the same device in
//! one session (ABBA rounds), judged on the paired ratio B/A and on their placements. Exit 0 pass,
//! 1 a rule failed, 2 could not judge.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use npugate_gate::compare::CompareRules;
use npugate_settings::HarnessSettings;

use super::options::{ConfirmArg, FormatArgs, HealthArgs, RulesArgs, TargetArgs};
use npugate_engine::compare::{compare_on, CompareReport, CompareSpec};
use npugate_engine::confirm::run_confirmed;
use npugate_engine::device_rack;
use npugate_engine::targets::{Job, Silent, Target};
use npugate_htp::compiled::ReferenceChoice;
use npugate_plan::{Command, Installed, Kind, Plan, Request};

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
        self.target.request(Command::Compare, self.settings.ep, None, Some(&self.health))
    }
}

/// Runs `npugate compare`.
pub fn run(args: CompareArgs) -> Result<u8> {
    if args.settings.check_outputs {
        bail!("compare does not check outputs; check each model with `npugate run --check-outputs`");
    }
    for model in [args.baseline_model.as_path(), args.target.model()] {
        npugate_engine::model::check_any(model, &args.settings)?;
    }
    // A compiled side's placement run counts it in its source model's nodes and runs the source
    // as its reference, found the way `npugate run` finds it.
    const NAME_IT: &str = "keep its source model where npugate compile recorded it (beside it, unchanged)";
    let choices = [
        ReferenceChoice::resolve(&args.baseline_model, None, NAME_IT)?,
        ReferenceChoice::resolve(args.target.model(), None, NAME_IT)?,
    ];
    for skipped in choices.iter().filter_map(|choice| choice.skipped_for(&args.settings)) {
        eprintln!("npugate: warning: {skipped}");
    }
    let rules = CompareRules::load(args.rules.rules_file.as_deref(), &args.rules.rule_overrides)?;
    let sinks = args.output.sinks(args.target.json.json);
    let cancel = super::options::interrupt_flag();
    let plan = Plan::resolve(&args.request()?, &Installed)?;
    plan.announce();
    let specs: Vec<CompareSpec> = plan
        .targets
        .iter()
        .map(|one| CompareSpec {
            job: Job {
                harness: &one.harness,
                runtime: &one.runtime,
                model: args.target.model(),
                prepared: None,
                reference_model: None,
                settings: &args.settings,
                env: &[],
                timeout: plan.timeout,
                cancel: &cancel,
            },
            baseline: &args.baseline_model,
            candidate: args.target.model(),
            sources: [choices[0].source.as_deref(), choices[1].source.as_deref()],
            rounds: args.rounds as usize,
            runs_per_round: args.runs_per_round,
            rules: &rules,
        })
        .collect();
    if plan.kind == Kind::Host {
        let report = run_confirmed(args.confirm.confirm, &plan.out, |dir| {
            compare_on(plan.targets[0].target.as_ref(), &specs[0], dir, &Silent)
        })?;
        sinks.emit(&report.verdict)?;
        eprintln!("npugate: comparison, every run and report in {}", report.dir.display());
        return Ok(report.verdict.exit_code());
    }
    let targets: Vec<&dyn Target> = plan.targets.iter().map(|t| t.target.as_ref()).collect();
    let on_done =
        |target: &dyn Target, report: &CompareReport| match sinks.render_for_device(&report.verdict, &report.dir) {
            Ok(text) => print!("{text}"),
            Err(error) => eprintln!("npugate: {}: error: {error:#}", target.name()),
        };
    let work =
        |index: usize, target: &dyn Target, dir: &std::path::Path, progress: &dyn npugate_engine::targets::Progress| {
            run_confirmed(args.confirm.confirm, dir, |d| compare_on(target, &specs[index], d, progress))
        };
    let names: Vec<&str> = targets.iter().map(|t| t.name()).collect();
    let rack = device_rack::on_targets(&targets, &plan.out, &args.target.place.devices.policy(&cancel), work, &on_done)
        .with_context(|| format!("comparing on {}", names.join(", ")))?;
    print!("{}", rack.report.lines());
    Ok(rack.report.exit_code)
}
