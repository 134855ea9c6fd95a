//! The run pipeline over a resolved [`Plan`] — what `npugate run` does, and the one place a
//! target's run is built ([`RunInputs`]), which a sweep's cells share: one target (this machine,
//! or one emulated SoC) runs into `<out>` itself; several (devices, SoCs × QNN versions of the
//! emulator) run in parallel into `<out>/<name>/` with `rack.json` beside them
//! ([`device_rack::on_plan`], the split `compare` shares). The output check's fp32 reference runs
//! on this machine (once, shared by a rack); then the cross-target output table and the evidence
//! bundle.

use std::path::{Path, PathBuf};

use anyhow::Result;
use ed25519_dalek::SigningKey;
use npugate_result::files;
use npugate_settings::HarnessSettings;

use crate::{Plan, Resources};
use npugate_engine::compiled::ReferenceChoice;
use npugate_engine::confirm::run_confirmed;
use npugate_engine::consistency;
use npugate_engine::device_rack::{self, Ran};
use npugate_engine::evidence::{Bundle, VerdictSummary};
use npugate_engine::layout::Placed;
use npugate_engine::output_check::{Reference, ReferenceRequest};
use npugate_engine::pipeline::{GateSpec, OutputsCheck, Sinks};
use npugate_engine::progress::Progress;
use npugate_engine::rack::{Rack, RackPolicy};
use npugate_engine::run::{run_on, ReferenceSource, RunReport, RunSpec};
use npugate_engine::targets::{Cancel, Execution, Job, Target};
use npugate_engine::timeouts::Timeouts;
use npugate_host::runtime::RuntimeManifest;

/// What every target of one run shares — the model with its reference choice, the settings, the
/// rules, the limit of one harness run, the interrupt flag and the output check's host tools — and
/// the one place a target's [`RunSpec`] is built: `npugate run` builds one per target of its plan,
/// a sweep one per cell.
pub struct RunInputs<'a> {
    model: &'a Path,
    choice: &'a ReferenceChoice,
    settings: &'a HarnessSettings,
    /// The reference run's settings: `settings` with a compiled model's recorded source shapes
    /// when they fix none.
    reference_settings: HarnessSettings,
    gate: Option<&'a GateSpec>,
    timeouts: Timeouts,
    cancel: &'a Cancel,
    /// The host harness and runtime of the output check's reference run, when outputs are checked
    /// and there is a reference model.
    tools: Option<(PathBuf, RuntimeManifest)>,
}

impl<'a> RunInputs<'a> {
    /// The inputs of running `model` (whose reference `choice` made) with `settings` under `gate`,
    /// each phase within its limit of `timeouts`; the reference tools come from `resources` when `settings` check outputs.
    pub fn new(
        model: &'a Path,
        choice: &'a ReferenceChoice,
        settings: &'a HarnessSettings,
        gate: Option<&'a GateSpec>,
        timeouts: Timeouts,
        cancel: &'a Cancel,
        resources: &dyn Resources,
    ) -> Result<RunInputs<'a>> {
        let tools = match settings.check_outputs && choice.outputs.is_some() {
            true => Some(crate::reference_tools(resources)?),
            false => None,
        };
        let reference_settings = choice.settings_for(settings);
        Ok(RunInputs { model, choice, settings, reference_settings, gate, timeouts, cancel, tools })
    }

    /// The output check's reference run on the host (`--reference-model`, a compiled model's
    /// source, or the model itself), when outputs are checked.
    pub fn reference_request(&self) -> Option<ReferenceRequest<'_>> {
        let (harness, runtime) = self.tools.as_ref()?;
        let model = self.choice.outputs.as_deref()?;
        Some(ReferenceRequest {
            harness,
            runtime,
            model,
            settings: &self.reference_settings,
            timeout: self.timeouts.reference,
        })
    }

    /// The run of one target with `harness` and `runtime`: its job, the rules, and the output
    /// check's reference — `shared` when a rack ran it once, else run inside the target's run.
    pub fn spec<'s>(
        &'s self,
        harness: &'s Path,
        runtime: &'s RuntimeManifest,
        shared: Option<&'s Reference>,
    ) -> RunSpec<'s> {
        let job = Job {
            reference_model: self.choice.source.as_deref(),
            ..Job::new(harness, runtime, self.model, self.settings, self.timeouts.run, self.cancel)
        };
        let reference = match shared {
            Some(reference) => Some(ReferenceSource::Ready(reference)),
            None => self.reference_request().map(ReferenceSource::RunInside),
        };
        RunSpec { job, gate: self.gate, reference }
    }
}

/// What `npugate run` does on every target of its plan (the model is the plan's).
pub struct RunOptions<'a> {
    /// What to measure.
    pub settings: &'a HarnessSettings,
    /// The rules (`None`: only measure).
    pub gate: Option<&'a GateSpec>,
    /// Where verdicts go.
    pub sinks: Sinks,
    /// `--confirm K`.
    pub confirm: u32,
    /// Retries of a target whose transport failed, the interrupt flag, the progress reporter.
    pub policy: RackPolicy,
    /// The evidence bundle to write, with its signing key.
    pub evidence: Option<(&'a Path, &'a SigningKey)>,
}

/// Runs the plan — its one target into `<out>`, or every target into `<out>/<name>/` (the split
/// [`device_rack::on_plan`] makes for `run` and `compare` alike) — and reports; returns the exit
/// code (0 pass, 1 a rule failed, 2 could not judge).
pub fn execute(plan: &Plan, options: &RunOptions<'_>, resources: &dyn Resources) -> Result<u8> {
    let choice = &plan.model.reference;
    if let Some(skipped) = choice.skipped_for(options.settings) {
        eprintln!("npugate: warning: {skipped}");
    }
    let cancel = &options.policy.cancel;
    let inputs =
        RunInputs::new(&plan.model.path, choice, options.settings, options.gate, plan.timeouts, cancel, resources)?;
    let one = plan.single().is_some();
    // One target runs its reference inside its own run; a rack shares one, run first.
    let shared: Option<Reference> = match (inputs.reference_request(), one) {
        (Some(request), false) => Some(request.run(&plan.out.join(files::OUTPUT_REFERENCE_DIR), cancel)?),
        _ => None,
    };
    let specs: Vec<RunSpec> =
        plan.targets.iter().map(|planned| inputs.spec(&planned.harness, &planned.runtime, shared.as_ref())).collect();
    let targets: Vec<&dyn Target> = plan.targets.iter().map(|t| t.target.as_ref()).collect();
    let work = |index: usize, target: &dyn Target, dir: &Path, progress: &Progress<'_>| {
        run_confirmed(options.confirm, dir, |d| run_on(target, &specs[index], d, progress))
    };
    let on_done = |target: &dyn Target, report: &RunReport| {
        for warning in &report.execution.warnings {
            eprintln!("npugate: {}: warning: {warning}", target.name());
        }
        report_problems(&report.execution, &report.outputs, &report.placed);
        if let Some(verdict) = &report.verdict {
            match options.sinks.render_for_device(verdict, report.placed.dir()) {
                Ok(text) => print!("{text}"),
                Err(error) => eprintln!("npugate: error: {error:#}"),
            }
        }
    };
    match device_rack::on_plan(&targets, one, &plan.out, &options.policy, work, &on_done)? {
        Ran::One(report) => single(plan, &report, options),
        Ran::Rack(rack) => racked(plan, &rack, options, shared.as_ref().zip(inputs.tools.as_ref())),
    }
}

/// The model the evidence bundle holds as the outputs' reference, when it is another model.
fn other_reference(plan: &Plan) -> Option<&Path> {
    plan.model.reference.outputs.as_deref().filter(|r| *r != plan.model.path)
}

/// What one target's run (into `<out>`) says: its problems, its verdict, the evidence.
fn single(plan: &Plan, report: &RunReport, options: &RunOptions<'_>) -> Result<u8> {
    report_problems(&report.execution, &report.outputs, &report.placed);
    match &report.verdict {
        Some(verdict) => {
            options.sinks.emit(verdict)?;
            eprintln!("npugate: result, verdict and report in {}", report.placed.dir().display());
        }
        None => eprintln!("npugate: result in {}", report.placed.dir().display()),
    }
    if let Some((bundle_dir, key)) = options.evidence {
        let one = &plan.targets[0];
        let verdict = report.verdict.as_ref().map(VerdictSummary::of);
        let bundle = Bundle::new().run(one.target.name(), report.placed.dir(), &report.result, verdict).subject(
            &plan.model.path,
            other_reference(plan),
            &one.harness,
            &one.runtime,
            options.settings,
        )?;
        write_evidence(bundle, bundle_dir, key)?;
    }
    Ok(report.exit_code)
}

/// What a rack's runs (each printed as it finished) say together: one line per target, the
/// cross-target output table, the evidence.
fn racked(
    plan: &Plan,
    rack: &Rack<RunReport>,
    options: &RunOptions<'_>,
    reference: Option<(&Reference, &(PathBuf, RuntimeManifest))>,
) -> Result<u8> {
    print!("{}", rack.report.lines());
    let finished: Vec<&RunReport> = rack.results.iter().flatten().collect();
    if reference.is_some() {
        let compared: Vec<_> = finished
            .iter()
            .filter_map(|report| match &report.outputs {
                OutputsCheck::Compared(outputs) => Some((&report.result, outputs.as_ref())),
                _ => None,
            })
            .collect();
        match consistency::table(&compared, consistency::TableFormat::Terminal, false) {
            Ok(table) => print!("{table}"),
            Err(error) => eprintln!("npugate: no cross-device output table: {error:#}"),
        }
    }
    if let Some((bundle_dir, key)) = options.evidence {
        let mut bundle = Bundle::new();
        for report in &finished {
            let label = report.placed.dir().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            bundle = bundle.run(
                &label,
                report.placed.dir(),
                &report.result,
                report.verdict.as_ref().map(VerdictSummary::of),
            );
        }
        let first = &plan.targets[0];
        bundle = bundle.file("device", files::RACK, &plan.out.join(files::RACK)).subject(
            &plan.model.path,
            other_reference(plan),
            &first.harness,
            &first.runtime,
            options.settings,
        )?;
        for other in &plan.targets[1..] {
            bundle = bundle.runtime(&other.runtime);
        }
        if let Some((reference, (harness, runtime))) = reference {
            bundle = bundle
                .run(files::OUTPUT_REFERENCE_DIR, &reference.dir, &reference.result, None)
                .runtime(runtime)
                .file("harness", "harness/host/npugate-harness", harness);
        }
        write_evidence(bundle, bundle_dir, key)?;
    }
    Ok(rack.report.exit_code)
}

/// Says what went wrong besides the verdict: a harness that failed after measuring, an output
/// check that could not be made, a result kept beside a complete one.
fn report_problems(execution: &Execution, outputs: &OutputsCheck, placed: &Placed) {
    if !execution.succeeded() {
        eprintln!(
            "npugate: error: the harness failed ({}) after measuring: {}",
            execution.status(),
            execution.last_message()
        );
    }
    if let OutputsCheck::Failed(error) = outputs {
        eprintln!("npugate: error: {error}");
    }
    if let Placed::Beside(dir) = placed {
        eprintln!(
            "npugate: the run is incomplete and was kept in {}; the complete result before it stays in place",
            dir.display()
        );
    }
}

/// Writes and signs an evidence bundle.
fn write_evidence(bundle: Bundle, out: &Path, key: &SigningKey) -> Result<()> {
    let manifest = bundle.write(out, key)?;
    eprintln!("npugate: evidence bundle of {} files signed in {}", manifest.files.len(), out.display());
    Ok(())
}
