//! One run on one target, the same for a local run, every device of a rack and every cell of a
//! sweep: stage a result directory, execute the job on the target, read the result once, check
//! the outputs against the fp32 reference, judge, save the verdict next to the result, and move
//! the result into place. Values found along the way are handed on in memory.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use npugate_gate::Verdict;
use npugate_result::contract::{EXIT_DID_NOT_START, EXIT_ERROR, EXIT_PASS};
use npugate_result::{files, RunResult, RunStatus};

use crate::layout::{Placed, Staging};
use crate::model::PreparedModel;
use crate::output_check::{Reference, ReferenceRequest};
use crate::pipeline::{self, GateSpec, OutputsCheck};
use crate::progress::Progress;
use crate::rack::Attempted;
use crate::targets::{Execution, Job, Retryable, Target};

/// Where a run's output reference comes from.
#[derive(Debug, Clone, Copy)]
pub enum ReferenceSource<'a> {
    /// Run it on this machine into the result directory (`output-reference/`), after the run.
    RunInside(ReferenceRequest<'a>),
    /// A reference already run (shared by every device of a rack).
    Ready(&'a Reference),
}

/// What to do with one run besides executing it.
#[derive(Debug, Clone, Copy)]
pub struct RunSpec<'a> {
    /// The harness job.
    pub job: Job<'a>,
    /// Judge the result by these rules (`None`: only measure).
    pub gate: Option<&'a GateSpec>,
    /// Check the saved outputs against this reference (`--check-outputs`).
    pub reference: Option<ReferenceSource<'a>>,
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Where its result directory is now.
    pub placed: Placed,
    /// How the harness process ended.
    pub execution: Execution,
    /// What the harness wrote.
    pub result: RunResult,
    /// The output check.
    pub outputs: OutputsCheck,
    /// The verdict, when judged.
    pub verdict: Option<Verdict>,
    /// 0 pass, 1 a rule failed, 2 not judged (the harness or the output check failed).
    pub exit_code: u8,
}

impl Attempted for RunReport {
    fn result_dir(&self) -> PathBuf {
        self.placed.dir().to_path_buf()
    }

    fn exit_code(&self) -> u8 {
        self.exit_code
    }
}

/// Runs `spec` on `target` into `out`; on an EP that needs static dims a model whose input shapes
/// `--shape` fixes runs as its fixed copy (see [`crate::model`]).
///
/// Three outcomes are never confused: an accelerator that did not start (its device absent, its
/// backend dead) is a [`Retryable`] error — what it measured on the CPU is kept in `out` — so a
/// rack tries again; a session the harness could not create is a final error (exit 2, ORT's
/// message); an EP that started and rejected nodes, even all of them, is judged (a verdict).
pub fn run_on(target: &dyn Target, spec: &RunSpec<'_>, out: &Path, progress: &Progress<'_>) -> Result<RunReport> {
    let settings = spec.job.settings;
    let given = spec.job.given_or_read()?;
    let model = crate::model::for_run(&given, settings, &crate::model::default_cache(), target.memory())?;
    let job = Job { model: &model.path, prepared: Some(&model), ..spec.job };
    let staging = Staging::next_to(out)?;
    let execution = target.execute(&job, staging.path(), progress)?;
    let result = harness_result(&execution, staging.path(), &model)?;
    if let Some(health) = result.backend.as_ref().filter(|health| !health.started) {
        let why = format!(
            "{} did not start: {}",
            result.execution.preferred_ep,
            health.reason.as_deref().unwrap_or("no reason in the log")
        );
        let placed = staging.commit(false)?;
        return Err(
            Retryable(anyhow!("{why}; what ran on the CPU instead is kept in {}", placed.dir().display())).into()
        );
    }
    let outputs = match spec.reference {
        None => OutputsCheck::NotRequested,
        Some(source) => {
            progress.step("check outputs");
            check_outputs(source, staging.path(), &result, spec.job.cancel)
        }
    };
    outputs.save(staging.path())?;
    let verdict = match spec.gate {
        Some(gate) => {
            progress.step("judge");
            let verdict = pipeline::judge(staging.path(), &result, &outputs, gate);
            pipeline::save(&verdict, staging.path())?;
            Some(verdict)
        }
        None => None,
    };
    let judged = verdict.as_ref().map_or(EXIT_PASS, |v| v.outcome.exit_code());
    let outputs_ok = !matches!(outputs, OutputsCheck::Failed(_));
    let exit_code = if execution.succeeded() && outputs_ok { judged } else { EXIT_ERROR };
    let placed = staging.commit(result.status == RunStatus::Complete)?;
    Ok(RunReport { placed, execution, result, outputs, verdict, exit_code })
}

/// The result the harness wrote into `dir`, or why there is none: an accelerator that did not
/// start (retryable), a harness that failed before measuring (with its own message, and a hint
/// when ONNX Runtime rejected the shapes `--shape` fixed into the model).
pub fn harness_result(execution: &Execution, dir: &Path, model: &PreparedModel) -> Result<RunResult> {
    match RunResult::read(dir) {
        Ok(result) => Ok(result),
        Err(error) if error.is_not_found() => {
            let message = execution.last_message();
            let why = message.strip_prefix("npugate-harness: error: ").unwrap_or(&message);
            if execution.exit_code == Some(i32::from(EXIT_DID_NOT_START)) {
                return Err(Retryable(anyhow!("{why}; nothing ran")).into());
            }
            let inference = why.contains("ShapeInferenceError") || why.contains("TypeInferenceError");
            let hint = match &model.fixed_from {
                Some(original) if inference => format!(
                    "; its input dims were fixed from --shape (the original is {}), and ONNX Runtime's shape inference rejects \
                     those sizes somewhere in the graph — check them against what the model expects (an If branch built for \
                     other sizes fails this way)",
                    original.path.display()
                ),
                _ => String::new(),
            };
            bail!("the harness failed ({}) before measuring anything: {why}{hint}", execution.status())
        }
        Err(error) => bail!("the harness ({}) left no readable result: {error}", execution.status()),
    }
}

/// The output check of the run in `dir`: against a reference run now (inside `dir`) or one given.
fn check_outputs(
    source: ReferenceSource<'_>,
    dir: &Path,
    run: &RunResult,
    cancel: &crate::targets::Cancel,
) -> OutputsCheck {
    let inside;
    let reference = match source {
        ReferenceSource::Ready(reference) => reference,
        ReferenceSource::RunInside(request) => match request.run(&dir.join(files::OUTPUT_REFERENCE_DIR), cancel) {
            Ok(reference) => {
                inside = reference;
                &inside
            }
            Err(error) => return OutputsCheck::Failed(format!("--check-outputs: {error:#}")),
        },
    };
    match reference.compare(dir, run) {
        Ok(report) => OutputsCheck::Compared(Box::new(report)),
        Err(error) => OutputsCheck::Failed(format!("--check-outputs: {error:#}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Progress;
    use crate::rack::{run_rack, RackPolicy};
    use crate::targets::mock::{Behaviour, MockJob, MockTarget};
    use crate::targets::Cancel;

    /// Runs the mock's script through `run_on` on a rack with `retries`, judging by the default rules.
    fn rack_of(target: &MockTarget, retries: u32) -> (crate::rack::RackReport, tempfile::TempDir) {
        let (mock, gate) = (MockJob::new(), GateSpec::default());
        let spec = RunSpec { job: mock.job(), gate: Some(&gate), reference: None };
        let out = mock.work.path().join("out");
        let policy = RackPolicy { retries, ..RackPolicy::once(&Cancel::new()) };
        let rack = run_rack(&[target], &policy, |target, progress| run_on(target, &spec, &out, progress));
        let MockJob { work, .. } = mock;
        (rack.report, work)
    }

    #[test]
    fn a_backend_that_did_not_start_is_retried_and_then_infrastructure_with_its_measurements_kept() {
        let dead = MockTarget::new("dead", vec![Behaviour::BackendDown("No Snapdragon SOC detected".into())]);
        let (report, dir) = rack_of(&dead, 2);
        let device = &report.devices[0];
        assert_eq!(
            (dead.calls(), device.attempts, device.exit_code, report.exit_code),
            (3, 3, EXIT_ERROR, EXIT_ERROR),
            "{report:?}"
        );
        let error = device.infrastructure_error.as_deref().unwrap();
        assert!(error.starts_with("QNNExecutionProvider did not start: No Snapdragon SOC detected"), "{error}");
        assert_eq!(device.retried_errors.len(), 2);
        let kept = RunResult::read(&dir.path().join("out")).expect("the CPU measurements are kept");
        assert_eq!(kept.status, npugate_result::RunStatus::Incomplete);

        // An absent device refused before anything ran: retried too, then infrastructure.
        let absent = MockTarget::new(
            "absent",
            vec![Behaviour::DeviceAbsent(
                "OpenVINOExecutionProvider did not start: Device NPU is not available".into(),
            )],
        );
        let (report, _dir) = rack_of(&absent, 1);
        assert_eq!((absent.calls(), report.exit_code), (2, EXIT_ERROR));
        assert!(
            report.devices[0].infrastructure_error.as_deref().unwrap().contains("Device NPU is not available"),
            "{report:?}"
        );

        // A device that comes back healthy on the retry is judged.
        let flaky = MockTarget::new(
            "flaky",
            vec![Behaviour::BackendDown("Failed in loading stub".into()), Behaviour::Measure(vec![1_000_000; 30])],
        );
        let (report, _dir) = rack_of(&flaky, 1);
        assert_eq!((flaky.calls(), report.devices[0].infrastructure_error.as_deref()), (2, None), "{report:?}");
        assert!(report.devices[0].retried_errors[0].contains("Failed in loading stub"));
    }

    #[test]
    fn a_session_that_could_not_be_created_is_final_and_not_retried() {
        let broken = MockTarget::new(
            "broken",
            vec![Behaviour::NoSession("cannot create a session for model m.onnx: Load model failed".into())],
        );
        let (report, _dir) = rack_of(&broken, 3);
        assert_eq!((broken.calls(), report.exit_code), (1, EXIT_ERROR));
        let error = report.devices[0].infrastructure_error.as_deref().unwrap();
        assert!(error.contains("before measuring anything: cannot create a session"), "{error}");
    }

    #[test]
    fn a_started_ep_that_rejected_nodes_is_a_verdict_not_infrastructure() {
        // The mock's result is the real QNN (Saver) run of mixed.onnx: Det rejected, backend up.
        let judged = MockTarget::new("judged", vec![Behaviour::Measure(vec![1_000_000; 30])]);
        let mock = MockJob::new();
        let gate = GateSpec {
            rules: npugate_gate::Rules::load(None, &["max_fallback_nodes=0".into()]).unwrap(),
            ..GateSpec::default()
        };
        let spec = RunSpec { job: mock.job(), gate: Some(&gate), reference: None };
        let report = run_on(&judged, &spec, &mock.work.path().join("out"), &Progress::silent()).unwrap();
        assert_eq!(report.exit_code, npugate_result::contract::EXIT_FAIL);
        let verdict = report.verdict.unwrap();
        let check = verdict.checks.iter().find(|c| c.rule.to_string() == "max_fallback_nodes").unwrap();
        assert!(check.message.contains("det"), "{}", check.message);
    }
}
