//! The bundle of a finished sweep: every finished cell's result dir as `runs/<device>/<runtime>/<model>/`,
//! each planned model, runtime and harness binary, the models' `--input` files, the plan, `sweep.json`
//! and the matrix reports.

use std::path::{Path, PathBuf};

use anyhow::Result;

use npugate_result::{files, RunResult};

use super::SweepPlan;
use npugate_engine::evidence::{file_name, Bundle, VerdictSummary};
use npugate_sweeps::sweep::finished_cells;

/// Describes the bundle of the sweep in `sweep_dir` run from `plan`; `harness` is the explicit
/// harness binary (else the one built for each runtime's target), `reports` the matrix report files.
pub fn for_sweep(plan: &SweepPlan, sweep_dir: &Path, harness: Option<&Path>, reports: &[PathBuf]) -> Result<Bundle> {
    let mut bundle = Bundle::new().file("plan", &format!("plan/{}", file_name(&plan.file)), &plan.file);
    for cell in finished_cells(sweep_dir)? {
        let key = &cell.record.key;
        let result = RunResult::read(&cell.dir)?;
        let verdict = VerdictSummary {
            outcome: cell.record.outcome.label().to_lowercase(),
            failed: cell.record.failed_rules.clone(),
        };
        bundle =
            bundle.run(&format!("{}/{}/{}", key.device, key.runtime, key.model), &cell.dir, &result, Some(verdict));
    }
    for model in &plan.models {
        bundle = bundle
            .model("model", &format!("model/{}", model.name), model.subject.given()?)
            .inputs(&format!("inputs/{}", model.name), &model.settings);
        if let Some(source) = model.subject.source_model()? {
            bundle = bundle.model("reference_model", &format!("reference-model/{}", model.name), source);
        }
    }
    for runtime in plan.all_runtimes() {
        let binary = match harness {
            Some(path) => path.to_path_buf(),
            None => npugate_engine::harnesses::for_target(&runtime.target)?,
        };
        bundle = bundle.runtime(runtime).file(
            "harness",
            &format!("harness/{}/{}", runtime.target, file_name(&binary)),
            &binary,
        );
    }
    bundle = bundle.file("report", files::SWEEP, &sweep_dir.join(files::SWEEP));
    for report in reports {
        if let Ok(relative) = report.strip_prefix(sweep_dir) {
            bundle = bundle.file("report", &relative.to_string_lossy().replace('\\', "/"), report);
        }
    }
    Ok(bundle)
}
