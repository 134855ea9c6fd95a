//! Running a sweep: resolve the plan's devices, then every device in parallel on the rack, its cells
//! one after another. Finished cells (with a `cell.json`) are skipped, so a sweep killed at any
//! point and started again redoes only the cell it was in; `sweep.json` is rewritten after every cell.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::cell::{CellDevice, CellKey, CellRecord};
use super::plan::{PlannedModel, SweepPlan};
use super::summary::{CellEntry, CellState, SweepDevice, SweepSummary, SWEEP_SCHEMA};
use crate::adb::Adb;
use crate::device_run::{self, Progress};
use crate::devices::{self, DeviceInfo};
use crate::invocation::TargetPaths;
use crate::judging;
use crate::rack;
use crate::remote::{result_dir_names, DeviceRunOptions};
use crate::runtime::RuntimeManifest;

/// How to run a plan.
pub struct SweepOptions<'a> {
    /// The sweep directory (created; resumed when it holds this sweep already).
    pub out: &'a Path,
    /// The night this sweep belongs to (`YYYY-MM-DD`); default: today (UTC), or the resumed sweep's.
    pub night: Option<&'a str>,
    /// adb, work dir, retries, cooldown and timeouts.
    pub devices: &'a DeviceRunOptions,
    /// Explicit harness binary; else one per device target.
    pub harness: Option<&'a Path>,
}

/// A device the plan resolved to.
struct ResolvedDevice {
    info: DeviceInfo,
    dir: String,
    chosen_by: String,
}

/// Runs (or resumes) the sweep; returns the final summary (also in `<out>/sweep.json`).
pub fn run_sweep(plan: &SweepPlan, options: &SweepOptions) -> Result<SweepSummary> {
    let adb = options.devices.devices.adb()?;
    let devices = resolve_devices(plan, options.devices, &adb)?;
    let out = options.out;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let summary = Mutex::new(initial_summary(plan, options, &devices)?);
    lock(&summary).write(out)?;

    let serials: Vec<String> = devices.iter().map(|d| d.info.serial.clone()).collect();
    let report = rack::run_rack(&serials, options.devices.retries, |serial, progress| {
        let device = devices.iter().find(|d| d.info.serial == serial).expect("serial comes from the list");
        run_device_cells(plan, options, &adb, device, &summary, progress)
    });

    let mut summary = summary.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
    for outcome in report.devices {
        if let Some(device) = summary.devices.iter_mut().find(|d| d.serial == outcome.serial) {
            device.outcome = Some(outcome);
        }
    }
    summary.finished_at = Some(super::now_rfc3339());
    summary.exit_code = Some(summary.overall_exit());
    summary.write(out)?;
    Ok(summary)
}

/// The plan's `[[device]]` entries (or `--device`) as probed devices, each runtime checked against
/// each device's target.
fn resolve_devices(plan: &SweepPlan, options: &DeviceRunOptions, adb: &Adb) -> Result<Vec<ResolvedDevice>> {
    let mut chosen: Vec<(String, String)> = Vec::new();
    if plan.devices.is_empty() {
        for serial in options.devices.select(adb)? {
            chosen.push((serial, "--device".into()));
        }
    } else {
        anyhow::ensure!(
            options.devices.devices.is_empty(),
            "{} chooses devices ([[device]]); drop --device, or remove the plan's [[device]] entries",
            plan.file.display()
        );
        let listed = devices::list(adb)?;
        for (index, spec) in plan.devices.iter().enumerate() {
            if let Some(serial) = &spec.serial {
                let mut one = options.devices.clone();
                one.devices = vec![serial.clone()];
                let selected = one.select(adb).map_err(|e| plan.error(&format!("device[{index}].serial"), format!("{e:#}")))?;
                chosen.extend(selected.into_iter().map(|s| (s, "serial".into())));
            } else if let Some(soc) = &spec.soc {
                let matching = matching_soc(&listed.devices, soc);
                if matching.is_empty() {
                    let connected: Vec<String> = listed
                        .devices
                        .iter()
                        .map(|d| format!("{} (SoC {})", d.serial, d.soc.as_deref().unwrap_or("unknown")))
                        .collect();
                    let connected = if connected.is_empty() { "none".to_string() } else { connected.join(", ") };
                    return Err(plan.error(&format!("device[{index}].soc"), format!("no connected device has SoC {soc:?} (connected: {connected})")));
                }
                chosen.extend(matching.into_iter().map(|s| (s, format!("soc={soc}"))));
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    chosen.retain(|(serial, _)| seen.insert(serial.clone()));
    let serials: Vec<String> = chosen.iter().map(|(s, _)| s.clone()).collect();
    let dirs = result_dir_names(&serials);
    let mut resolved = Vec::new();
    for ((serial, chosen_by), dir) in chosen.into_iter().zip(dirs) {
        let info = devices::probe(adb, &serial).with_context(|| format!("cannot probe device {serial}"))?;
        for (index, runtime) in plan.runtimes.iter().enumerate() {
            if info.target.as_deref() != Some(runtime.target.as_str()) {
                return Err(plan.error(
                    &format!("runtimes[{index}]"),
                    format!(
                        "runtime {} is built for {}, but device {serial} runs {}",
                        runtime.name,
                        runtime.target,
                        info.target.as_deref().unwrap_or("an unknown target")
                    ),
                ));
            }
        }
        resolved.push(ResolvedDevice { info, dir, chosen_by });
    }
    Ok(resolved)
}

/// Online devices whose SoC is `soc` (case-insensitive).
fn matching_soc(devices: &[DeviceInfo], soc: &str) -> Vec<String> {
    devices
        .iter()
        .filter(|d| d.state == "device" && d.soc.as_deref().is_some_and(|s| s.eq_ignore_ascii_case(soc)))
        .map(|d| d.serial.clone())
        .collect()
}

/// The summary to start from: this plan's cells, finished ones read from their markers; the night
/// and start time of the sweep already in `out` when resuming.
fn initial_summary(plan: &SweepPlan, options: &SweepOptions, devices: &[ResolvedDevice]) -> Result<SweepSummary> {
    let out = options.out;
    let (night, started_at) = match SweepSummary::read(out) {
        Some(previous) => {
            if previous.name != plan.name {
                bail!("{} holds sweep {:?}, not {:?}; choose another --out", out.display(), previous.name, plan.name);
            }
            if options.night.is_some_and(|night| night != previous.night) {
                bail!("{} holds the sweep of night {}; resume it without --night or choose another --out", out.display(), previous.night);
            }
            (previous.night, previous.started_at)
        }
        None if has_entries(out) => bail!("{} is not empty and holds no sweep; choose another --out", out.display()),
        None => (options.night.map(str::to_string).unwrap_or_else(super::today), super::now_rfc3339()),
    };
    let mut cells = Vec::new();
    for device in devices {
        for runtime in &plan.runtimes {
            for model in &plan.models {
                let key = CellKey { device: device.dir.clone(), runtime: runtime.name.clone(), model: model.name.clone() };
                let record = CellRecord::read_finished(&key.dir(out));
                let state = if record.is_some() { CellState::Finished } else { CellState::Pending };
                let dir = format!("{}/{}/{}", key.device, key.runtime, key.model);
                cells.push(CellEntry { key, dir, state, record, error: None });
            }
        }
    }
    Ok(SweepSummary {
        schema: SWEEP_SCHEMA.into(),
        name: plan.name.clone(),
        plan: plan.file.display().to_string(),
        night,
        started_at,
        finished_at: None,
        runtimes: plan.runtimes.iter().map(|r| r.name.clone()).collect(),
        models: plan.models.iter().map(|m| m.name.clone()).collect(),
        devices: devices
            .iter()
            .map(|d| SweepDevice {
                serial: d.info.serial.clone(),
                dir: d.dir.clone(),
                soc: d.info.soc.clone(),
                model: d.info.model.clone(),
                chosen_by: d.chosen_by.clone(),
                outcome: None,
            })
            .collect(),
        cells,
        exit_code: None,
    })
}

fn has_entries(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
}

fn lock(summary: &Mutex<SweepSummary>) -> std::sync::MutexGuard<'_, SweepSummary> {
    summary.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One device's cells in plan order (runtime-major). A transport failure ends the attempt (the rack
/// retries the device, and the retry skips what finished); any other failure is recorded for that
/// cell and the device moves on.
fn run_device_cells(
    plan: &SweepPlan,
    options: &SweepOptions,
    adb: &Adb,
    device: &ResolvedDevice,
    summary: &Mutex<SweepSummary>,
    progress: &dyn Progress,
) -> Result<rack::Judged> {
    let out = options.out;
    let mut worst = crate::EXIT_PASS;
    for runtime in &plan.runtimes {
        for model in &plan.models {
            let key = CellKey { device: device.dir.clone(), runtime: runtime.name.clone(), model: model.name.clone() };
            let dir = key.dir(out);
            if let Some(record) = CellRecord::read_finished(&dir) {
                eprintln!("npugate sweep: {}: skipped (finished {})", key.label(), record.finished_at);
                worst = worst.max(record.exit_code);
                continue;
            }
            progress.step(&format!("{} {}", runtime.name, model.name));
            let result = run_cell(options, adb, device, runtime, model, &key, &dir, progress);
            let mut summary = lock(summary);
            let entry = summary.cell_mut(&key).expect("every planned cell is in the summary");
            match result {
                Ok(record) => {
                    eprintln!("npugate sweep: {}: {}", key.label(), describe(&record));
                    worst = worst.max(record.exit_code);
                    (entry.state, entry.record, entry.error) = (CellState::Finished, Some(record), None);
                }
                Err(error) if rack::is_transient(&error) => return Err(error),
                Err(error) => {
                    eprintln!("npugate sweep: {}: could not be judged: {error:#}", key.label());
                    worst = crate::EXIT_ERROR;
                    (entry.state, entry.error) = (CellState::Failed, Some(format!("{error:#}")));
                }
            }
            summary.write(out)?;
        }
    }
    Ok((out.join(&device.dir), worst))
}

/// Deploys, runs, pulls and judges one cell, then marks it finished.
#[allow(clippy::too_many_arguments)] // the cell's coordinates and the rack's callbacks
fn run_cell(
    options: &SweepOptions,
    adb: &Adb,
    device: &ResolvedDevice,
    runtime: &RuntimeManifest,
    model: &PlannedModel,
    key: &CellKey,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<CellRecord> {
    let started = Instant::now();
    remove_stale_pulls(dir);
    let harness_args = |paths: &TargetPaths| model.settings.harness_args(paths, Some(&runtime.name));
    let inputs: Vec<PathBuf> = model.settings.input_files();
    let run_plan = options.devices.plan(runtime, &model.path, &inputs, options.harness, &harness_args);
    let run = device_run::run_on_device(adb, &device.info.serial, &run_plan, dir, progress)?;
    progress.step("judge");
    let verdict = judging::judge_dir_with(dir, &model.rules, None)?;
    let exit_code = if run.harness.exit_code == 0 { verdict.outcome.exit_code() } else { crate::EXIT_ERROR };
    let fingerprint_soc = Some(verdict.subject.fingerprint.soc.clone()).filter(|soc| soc != "unknown");
    let cell_device = CellDevice {
        serial: device.info.serial.clone(),
        soc: run.device.soc.clone().or(fingerprint_soc).unwrap_or_else(|| "unknown".into()),
        model: run.device.model.clone(),
    };
    let record = CellRecord::new(key.clone(), cell_device, &verdict, exit_code, started.elapsed().as_secs_f64());
    record.write_marker(dir)?;
    Ok(record)
}

/// Pull staging dirs (`.pull-*`) a killed sweep left next to the cell's directory.
fn remove_stale_pulls(dir: &Path) {
    let Some(parent) = dir.parent() else { return };
    for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with(".pull-") {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// `pass, median 1.23 ms, CV 2.1%, 100% FLOPs on the preferred EP, 12.3 s`.
fn describe(record: &CellRecord) -> String {
    let mut parts = vec![record.outcome.label().to_lowercase()];
    if let Some(median) = record.median_ns {
        parts.push(format!("median {}", gate::units::fmt_ms(median)));
    }
    if let Some(cv) = record.cv_pct {
        parts.push(format!("CV {cv:.1}%"));
    }
    if let Some(flops) = record.npu_flops_pct {
        parts.push(format!("{flops:.1}% of FLOPs on the preferred EP"));
    }
    if !record.failed_rules.is_empty() {
        parts.push(format!("failed: {}", record.failed_rules.join(", ")));
    }
    parts.push(format!("{:.1} s", record.seconds));
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soc_classes_match_online_devices_case_insensitively() {
        let device = |serial: &str, soc: Option<&str>, state: &str| DeviceInfo {
            serial: serial.into(),
            state: state.into(),
            soc: soc.map(str::to_string),
            ..Default::default()
        };
        let listed = [
            device("a", Some("SM8650"), "device"),
            device("b", Some("SM8550"), "device"),
            device("c", Some("sm8650"), "device"),
            device("d", Some("SM8650"), "offline"),
            device("e", None, "device"),
        ];
        assert_eq!(matching_soc(&listed, "SM8650"), ["a", "c"]);
        assert!(matching_soc(&listed, "SM8750").is_empty());
    }
}
