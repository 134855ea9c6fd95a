//! One run on one target, the same for a local run, every device of a rack and every cell of a
//! sweep: stage a result directory, execute the job on the target, read the result once, check
//! the outputs against the fp32 reference, judge, save the verdict next to the result, and move
//! the result into place. Values found along the way are handed on in memory.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use gate::Verdict;
use npugate_result::contract::{EXIT_ERROR, EXIT_PASS};
use npugate_result::{files, RunResult, RunStatus};

use crate::layout::{Placed, Staging};
use crate::output_check::{Reference, ReferenceRequest};
use crate::pipeline::{self, GateSpec, OutputsCheck};
use crate::rack::Attempted;
use crate::target::{Execution, Job, Progress, Target};

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
pub fn run_on(target: &dyn Target, spec: &RunSpec<'_>, out: &Path, progress: &dyn Progress) -> Result<RunReport> {
    let settings = spec.job.settings;
    let model = crate::model::for_run(spec.job.model, settings, &crate::model::default_cache())?;
    let fixed_from = model.fixed_from.as_ref().map(|original| original.sha256.as_str());
    let job = Job { model: &model.path, fixed_from, ..spec.job };
    let staging = Staging::next_to(out)?;
    let execution = target.execute(&job, staging.path(), progress)?;
    let result = match RunResult::read(staging.path()) {
        Ok(result) => result,
        Err(error) if error.is_not_found() => {
            bail!("the harness failed ({}) before measuring anything: {}", execution.status(), execution.last_message())
        }
        Err(error) => bail!("the harness ({}) left no readable result: {error}", execution.status()),
    };
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

/// The output check of the run in `dir`: against a reference run now (inside `dir`) or one given.
fn check_outputs(source: ReferenceSource<'_>, dir: &Path, run: &RunResult, cancel: &crate::target::Cancel) -> OutputsCheck {
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
        Ok(report) => OutputsCheck::Compared(report),
        Err(error) => OutputsCheck::Failed(format!("--check-outputs: {error:#}")),
    }
}
