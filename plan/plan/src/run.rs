//! The run pipeline over a resolved [`Plan`] — what `npugate run` does, and the one place a
//! target's run is built ([`RunInputs`]), which a sweep's cells share: one target (this machine,
//! or one emulated SoC) runs into `<out>` itself; several (devices, SoCs × QNN versions of the
//! emulator) run in parallel into `<out>/<name>/` with `rack.json` beside them
//! ([`device_rack::on_plan`], the split `compare` shares). The output check's fp32 reference runs
//! on this machine (once, shared by a rack); then the cross-target output table and the evidence
//! bundle.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use ed25519_dalek::SigningKey;
use npugate_result::files;
use npugate_result::report::{Finished, Reporter};
use npugate_settings::HarnessSettings;

use crate::subject::Subject;
use crate::{Plan, Resources};
use npugate_engine::confirm::run_confirmed;
use npugate_engine::consistency;
use npugate_engine::device_rack::{self, Ran};
use npugate_engine::evidence::{Bundle, VerdictSummary};
use npugate_engine::layout::Placed;
use npugate_engine::model::GivenModel;
use npugate_engine::output_check::{Reference, ReferenceRequest};
use npugate_engine::pipeline::{GateSpec, OutputsCheck, Sinks};
use npugate_engine::progress::Progress;
use npugate_engine::rack::{Rack, RackPolicy};
use npugate_engine::run::{run_on, ReferenceSource, RunReport, RunSpec};
use npugate_engine::targets::{Cancel, Execution, Job, Target};
use npugate_engine::timeouts::Timeouts;
use npugate_host::runtime::RuntimeManifest;

/// What every target of one run shares — the model with its source and reference models, the settings, the
/// rules, the limit of one harness run, the interrupt flag and the output check's host tools — and
/// the one place a target's [`RunSpec`] is built: `npugate run` builds one per target of its plan,
/// a sweep one per cell.
pub struct RunInputs<'a> {
    model: &'a Path,
    /// `model` as its subject looked at it and hashed it, once.
    given: &'a GivenModel,
    /// A compiled model's source, as its subject looked at it (the harness's reference pass).
    source: Option<&'a GivenModel>,
    /// The output check's reference model, as its subject looked at it, when outputs are checked.
    reference: Option<&'a GivenModel>,
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
    /// The inputs of running `subject` (its reference as it chose) with `settings` under `gate`,
    /// each phase within its limit of `timeouts`: its files hashed once, by the subject, handed to
    /// every run; the reference tools come from `resources` when `settings` check outputs.
    pub fn of_subject(
        subject: &'a Subject,
        settings: &'a HarnessSettings,
        gate: Option<&'a GateSpec>,
        timeouts: Timeouts,
        cancel: &'a Cancel,
        resources: &dyn Resources,
    ) -> Result<RunInputs<'a>> {
        let choice = &subject.reference;
        let reference = match settings.check_outputs {
            true => subject.reference_model()?,
            false => None,
        };
        let tools = match reference {
            Some(_) => Some(crate::reference_tools(resources)?),
            None => None,
        };
        Ok(RunInputs {
            model: &subject.path,
            given: subject.given()?,
            source: subject.source_model()?,
            reference,
            settings,
            reference_settings: choice.settings_for(settings),
            gate,
            timeouts,
            cancel,
            tools,
        })
    }

    /// The inputs of running `plan`'s model with `settings` under `gate`, within the plan's limits.
    pub fn of_plan(
        plan: &'a Plan,
        settings: &'a HarnessSettings,
        gate: Option<&'a GateSpec>,
        cancel: &'a Cancel,
        resources: &dyn Resources,
    ) -> Result<RunInputs<'a>> {
        RunInputs::of_subject(&plan.model, settings, gate, plan.timeouts, cancel, resources)
    }

    /// The output check's reference run on the host (`--reference-model`, a compiled model's
    /// source, or the model itself), when outputs are checked.
    pub fn reference_request(&self) -> Option<ReferenceRequest<'_>> {
        let (harness, runtime) = self.tools.as_ref()?;
        let model = self.reference?;
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
            reference_model: self.source,
            given: Some(self.given),
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
    /// The rules ([`GateSpec::measure_only`]: none, only measure).
    pub gate: &'a GateSpec,
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
    let inputs = RunInputs::of_plan(plan, options.settings, Some(options.gate), cancel, resources)?;
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
            options.sinks.device_finished(target.name(), verdict, report.placed.dir());
        }
    };
    match device_rack::on_plan(&targets, one, &plan.out, &options.policy, work, &on_done)? {
        Ran::One(report) => single(plan, &report, options),
        Ran::Rack(rack) => racked(plan, &rack, options, shared.as_ref().zip(inputs.tools.as_ref())),
    }
}

/// What one target's run (into `<out>`) says: its problems, its verdict, the evidence.
fn single(plan: &Plan, report: &RunReport, options: &RunOptions<'_>) -> Result<u8> {
    report_problems(&report.execution, &report.outputs, &report.placed);
    let verdict =
        report.verdict.as_ref().context("every run of `npugate run` is judged (by no rule with --no-gate)")?;
    let saved = format!("result, verdict and report in {}", report.placed.dir().display());
    // Exit codes rank by severity (0 pass, 1 a rule failed, 2 not judged): a harness or an output
    // check that failed after measuring is an error the verdict need not show.
    let exit_code = options.sinks.finished(&Finished::saved(verdict, saved)).max(report.exit_code);
    if let Some((bundle_dir, key)) = options.evidence {
        let one = &plan.targets[0];
        let summary = Some(VerdictSummary::of(verdict));
        let bundle = Bundle::new().run(one.target.name(), report.placed.dir(), &report.result, summary).subject(
            plan.model.given()?,
            plan.model.other_reference()?,
            &one.harness,
            &one.runtime,
            options.settings,
        );
        write_evidence(bundle, bundle_dir, key)?;
    }
    Ok(exit_code)
}

/// What a rack's runs (each printed as it finished) say together: one line per target (or, when
/// standard output is JSON, `rack.json` as its one document), the cross-target output table, the
/// evidence.
fn racked(
    plan: &Plan,
    rack: &Rack<RunReport>,
    options: &RunOptions<'_>,
    reference: Option<(&Reference, &(PathBuf, RuntimeManifest))>,
) -> Result<u8> {
    let exit_code = options.sinks.rack_finished(&rack.report);
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
            Ok(table) => options.sinks.aside(&table),
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
            plan.model.given()?,
            plan.model.other_reference()?,
            &first.harness,
            &first.runtime,
            options.settings,
        );
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
    Ok(exit_code)
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::fake::Fake;
    use crate::{Command, Place, Request};
    use npugate_engine::model::{testing::identity_model, ModelFiles};
    use npugate_engine::targets::mock::{Behaviour, MockTarget};
    use npugate_settings::EpKind;

    /// The mock target asking for the model's files as the host and adb targets do (to deploy
    /// and record them), keeping what it was given.
    struct Deploying {
        mock: MockTarget,
        given: Mutex<Vec<ModelFiles>>,
    }

    impl Target for Deploying {
        fn name(&self) -> &str {
            self.mock.name()
        }

        fn execute(&self, job: &Job<'_>, out: &Path, progress: &Progress<'_>) -> Result<Execution> {
            self.given.lock().unwrap().push(job.model_files()?);
            self.mock.execute(job, out, progress)
        }
    }

    #[test]
    fn a_run_hashes_its_model_once_with_the_plans_cache_from_resolve_to_evidence() {
        let fake = Fake::machine();
        let work = tempfile::tempdir().unwrap();
        let model = work.path().join("m.onnx");
        identity_model(&model, &[Some(1), Some(3)]);
        let settings = HarnessSettings::default();
        let request =
            Request { settings: Some(&settings), ..Request::new(Command::Run, &model, Place::Local, EpKind::Cpu) };
        let plan = Plan::resolve(&request, &fake).unwrap();
        let hashed = plan.model.given().unwrap().files.clone();
        assert_eq!(fake.hashes.lookups(), 1, "the plan hashes the model's one file");

        // Another model in its place from here: anything that hashed the file again (with any
        // cache: its stat changed) would see other bytes.
        identity_model(&model, &[Some(1), Some(4)]);
        let cancel = Cancel::new();
        let inputs = RunInputs::of_plan(&plan, &settings, None, &cancel, &fake).unwrap();
        let planned = &plan.targets[0];
        let spec = inputs.spec(&planned.harness, &planned.runtime, None);
        let target = Deploying {
            mock: MockTarget::new("mock", vec![Behaviour::Measure(vec![1_000_000; 10])]),
            given: Mutex::default(),
        };
        run_on(&target, &spec, &work.path().join("out"), &Progress::silent()).unwrap();
        assert_eq!(target.given.into_inner().unwrap(), vec![hashed.clone()], "the target got the plan's hashes");
        assert_eq!(spec.job.model_files().unwrap(), hashed);
        Bundle::new().subject(plan.model.given().unwrap(), None, &model, &planned.runtime, &settings);
        assert_eq!(fake.hashes.lookups(), 1, "nothing after the plan asked for a hash");
        assert_ne!(ModelFiles::read(&model, &fake.hashes).unwrap().sha256, hashed.sha256, "the test can tell");
    }

    #[test]
    fn a_run_checking_outputs_hashes_its_reference_model_once_with_the_plans_cache() {
        let fake = Fake::machine();
        let work = tempfile::tempdir().unwrap();
        let (model, float) = (work.path().join("m.onnx"), work.path().join("f.onnx"));
        identity_model(&model, &[Some(1), Some(3)]);
        identity_model(&float, &[Some(1), Some(3)]);
        let settings = HarnessSettings { check_outputs: true, ..HarnessSettings::default() };
        let request = Request {
            settings: Some(&settings),
            reference_model: Some(&float),
            ..Request::new(Command::Run, &model, Place::Local, EpKind::Cpu)
        };
        let plan = Plan::resolve(&request, &fake).unwrap();
        let cancel = Cancel::new();
        let inputs = RunInputs::of_plan(&plan, &settings, None, &cancel, &fake).unwrap();
        assert_eq!(fake.hashes.lookups(), 2, "the model and its reference, one file each, hashed once");
        let reference = plan.model.reference_model().unwrap().expect("the reference model");
        assert_eq!(reference.path, float);
        let hashed = reference.files.clone();

        // Other models in their places from here: a second hash (with any cache) would see them.
        identity_model(&model, &[Some(1), Some(4)]);
        identity_model(&float, &[Some(1), Some(5)]);
        let planned = &plan.targets[0];
        let spec = inputs.spec(&planned.harness, &planned.runtime, None);
        let Some(ReferenceSource::RunInside(run_inside)) = &spec.reference else {
            panic!("one target runs the output check's reference inside its run")
        };
        assert!(std::ptr::eq(run_inside.model, reference), "the reference run takes the plan's reference model");
        assert_eq!(run_inside.model.files, hashed);
        let other = plan.model.other_reference().unwrap().expect("another model is the reference");
        Bundle::new().subject(plan.model.given().unwrap(), Some(other), &model, &planned.runtime, &settings);
        assert_eq!(fake.hashes.lookups(), 2, "nothing after the plan's hand-off asked for a hash");
        assert_ne!(ModelFiles::read(&float, &fake.hashes).unwrap().sha256, hashed.sha256, "the test can tell");

        // A reference model that is not there is refused before anything runs, with the fix.
        let missing = work.path().join("gone.onnx");
        let request = Request { reference_model: Some(&missing), ..request };
        let plan = Plan::resolve(&request, &fake).unwrap();
        let error = RunInputs::of_plan(&plan, &settings, None, &cancel, &fake).err().expect("refused");
        assert_eq!(
            format!("{error:#}"),
            format!(
                "reference model {} not found; pass --reference-model with the float .onnx model",
                missing.display()
            )
        );
    }
}
