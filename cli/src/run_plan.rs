//! `npugate run` over a resolved [`Plan`]: one target (this machine, or one emulated SoC) runs into
//! `<out>` itself; several (devices, SoCs × QNN versions of the emulator) run in parallel into
//! `<out>/<name>/` with `rack.json` beside them ([`device_rack::on_plan`], the split `compare` shares). The output check's fp32 reference runs on this
//! machine (once, shared by a rack); then the cross-target output table and the evidence bundle.

use std::path::{Path, PathBuf};

use anyhow::Result;
use ed25519_dalek::SigningKey;
use npugate_result::files;
use npugate_settings::HarnessSettings;

use npugate_engine::compiled::ReferenceChoice;
use npugate_engine::confirm::run_confirmed;
use npugate_engine::consistency;
use npugate_engine::device_rack::{self, Ran};
use npugate_engine::layout::Placed;
use npugate_engine::output_check::{Reference, ReferenceRequest};
use npugate_engine::pipeline::{GateSpec, OutputsCheck, Sinks};
use npugate_engine::progress::Progress;
use npugate_engine::rack::{Rack, RackPolicy};
use npugate_engine::run::{run_on, ReferenceSource, RunReport, RunSpec};
use npugate_engine::targets::{Execution, Job, Target};
use npugate_host::runtime::RuntimeManifest;
use npugate_nightly::evidence::{Bundle, VerdictSummary};
use npugate_plan::{self as plan, Plan, Planned, Resources};

/// What `npugate run` does on every target of its plan.
pub struct RunOptions<'a> {
    /// The model as the user named it.
    pub model: &'a Path,
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

/// The reference of every target of one `npugate run`, decided once: the models (a compiled
/// model's source) and the settings of the output check's reference run.
struct References {
    choice: ReferenceChoice,
    /// The run's settings, with a compiled model's recorded source shapes when the run gave none.
    settings: HarnessSettings,
}

/// Runs the plan — its one target into `<out>`, or every target into `<out>/<name>/` (the split
/// [`device_rack::on_plan`] makes for `run` and `compare` alike) — and reports; returns the exit
/// code (0 pass, 1 a rule failed, 2 could not judge).
pub fn execute(plan: &Plan, options: &RunOptions<'_>, resources: &dyn Resources) -> Result<u8> {
    let choice = plan.model.reference.clone();
    if let Some(skipped) = choice.skipped_for(options.settings) {
        eprintln!("npugate: warning: {skipped}");
    }
    let settings = choice.settings_for(options.settings);
    let references = References { choice, settings };
    let reference_tools = match options.settings.check_outputs && references.choice.outputs.is_some() {
        true => Some(plan::reference_tools(resources)?),
        false => None,
    };
    let one = plan.single().is_some();
    // One target runs its reference inside its own run; a rack shares one, run first.
    let shared: Option<Reference> = match (&reference_tools, one) {
        (Some((harness, runtime)), false) => Some(
            reference_request(&references, harness, runtime)
                .run(&plan.out.join(files::OUTPUT_REFERENCE_DIR), &options.policy.cancel)?,
        ),
        _ => None,
    };
    let specs: Vec<RunSpec> = plan
        .targets
        .iter()
        .map(|planned| RunSpec {
            job: job(plan, planned, options, &references),
            gate: options.gate,
            reference: match (&shared, &reference_tools) {
                (Some(reference), _) => Some(ReferenceSource::Ready(reference)),
                (None, Some((harness, runtime))) => {
                    Some(ReferenceSource::RunInside(reference_request(&references, harness, runtime)))
                }
                (None, None) => None,
            },
        })
        .collect();
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
        Ran::One(report) => single(plan, &report, options, &references),
        Ran::Rack(rack) => racked(plan, &rack, options, &references, shared.as_ref().zip(reference_tools.as_ref())),
    }
}

/// What one target's run (into `<out>`) says: its problems, its verdict, the evidence.
fn single(plan: &Plan, report: &RunReport, options: &RunOptions<'_>, references: &References) -> Result<u8> {
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
            options.model,
            references.choice.outputs.as_deref().filter(|r| *r != options.model),
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
    references: &References,
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
            options.model,
            references.choice.outputs.as_deref().filter(|r| *r != options.model),
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

/// The harness job of one planned target.
fn job<'a>(plan: &Plan, one: &'a Planned, options: &'a RunOptions<'_>, references: &'a References) -> Job<'a> {
    Job {
        harness: &one.harness,
        runtime: &one.runtime,
        model: options.model,
        prepared: None,
        reference_model: references.choice.source.as_deref(),
        settings: options.settings,
        env: &[],
        timeout: plan.timeout,
        cancel: &options.policy.cancel,
    }
}

/// The output check's reference run on the host: `--reference-model`, a compiled model's source,
/// or the model itself (the caller checked there is one).
fn reference_request<'a>(
    references: &'a References,
    harness: &'a Path,
    runtime: &'a RuntimeManifest,
) -> ReferenceRequest<'a> {
    let model = references.choice.outputs.as_deref().unwrap_or(Path::new(""));
    ReferenceRequest { harness, runtime, model, settings: &references.settings }
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
