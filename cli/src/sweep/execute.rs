//! Running a sweep: every device in parallel on the rack, its cells one after another. Finished
//! cells (with a `cell.json`) are skipped, so a sweep killed at any point and started again redoes
//! only the cell it was in; `sweep.json` is rewritten after every cell.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use npugate_result::contract::{EXIT_ERROR, EXIT_PASS};

use super::plan::{PlannedModel, SweepPlan};
use npugate_aihub::Session;
use npugate_android::adb::Adb;
use npugate_android::devices::{self, DeviceChoice, DeviceInfo, DeviceList};
use npugate_engine::device_rack::result_dir_names;
use npugate_engine::pipeline::GateSpec;
use npugate_engine::progress::Progress;
use npugate_engine::rack::{self, Attempted, RackPolicy};
use npugate_engine::run::{run_on, RunReport, RunSpec};
use npugate_engine::targets::adb::{AdbSettings, AdbTarget};
use npugate_engine::targets::aihub::AiHubTarget;
use npugate_engine::targets::wine::WineTarget;
use npugate_engine::targets::{is_retryable, Job, Target};
use npugate_engine::timeouts::Timeouts;
use npugate_host::runtime::RuntimeManifest;
use npugate_plan::run::RunInputs;
use npugate_settings::{EpKind, HarnessSettings, SessionSettings};
use npugate_sweeps::sweep::cell::{CellDevice, CellKey, CellRecord, HOST_HTP_FINGERPRINT};
use npugate_sweeps::sweep::night::{now_rfc3339, today};
use npugate_sweeps::sweep::shard::{Cut, Shard, ShardInfo, ShardUnit};
use npugate_sweeps::sweep::summary::{CellEntry, CellState, SweepDevice, SweepSummary, SWEEP_SCHEMA};
use npugate_sweeps::sweep::unit::{self, host_htp_dir, Unit};

/// How to run a plan.
pub struct SweepOptions<'a> {
    /// The sweep directory (created; resumed when it holds this sweep already).
    pub out: &'a Path,
    /// The night this sweep belongs to (`YYYY-MM-DD`); default: today (UTC), or the resumed sweep's.
    pub night: Option<&'a str>,
    /// Explicit harness binary; else the one built for each device's target.
    pub harness: Option<&'a Path>,
    /// Retries and cancellation.
    pub policy: &'a RackPolicy,
    /// The limit of each phase: one harness run (`--run-timeout`), the reference run.
    pub timeouts: Timeouts,
    /// The plan's units, and the shard of them this sweep runs (`--shard`).
    pub cut: &'a Cut,
}

/// A device of the sweep: where it runs and what it is.
pub struct SweepTarget<T> {
    /// Where its harness runs.
    pub target: T,
    /// The device as probed.
    pub info: DeviceInfo,
    /// Its directory name in the sweep dir.
    pub dir: String,
    /// What chose it (`--device`, `serial`, `soc=SM8650`, `socs` for a host-HTP cell).
    pub chosen_by: String,
    /// The position of its unit in the plan (see [`npugate_sweeps::sweep::unit`]).
    pub unit: usize,
    /// What kind of target it is, which chooses the runtimes of its cells.
    pub kind: TargetKind,
}

/// What a sweep target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// A device over adb: its cells run the plan's runtimes.
    Device,
    /// The host HTP emulator as one SoC: its cells run the plan's host-HTP runtimes (one per QNN
    /// version) with `--ep qnn` (placement and outputs; speed is not judged).
    HostHtp,
    /// A Qualcomm AI Hub device: its cells run in the runtime column `aihub` (a local CPU
    /// reference pass and an AI Hub profile job).
    AiHub,
}

impl TargetKind {
    /// The kind of a unit's targets.
    pub fn of(unit: &Unit) -> TargetKind {
        match unit {
            Unit::HostHtp(_) => TargetKind::HostHtp,
            Unit::AiHub(_) => TargetKind::AiHub,
            Unit::Serial(_) | Unit::Soc(_) | Unit::Device(_) => TargetKind::Device,
        }
    }
}

impl<T: Target + 'static> SweepTarget<T> {
    /// The same target behind a `Box<dyn Target>`, so devices and host-HTP SoCs share one sweep.
    pub fn boxed(self) -> SweepTarget<Box<dyn Target>> {
        SweepTarget {
            target: Box::new(self.target),
            info: self.info,
            dir: self.dir,
            chosen_by: self.chosen_by,
            unit: self.unit,
            kind: self.kind,
        }
    }
}

impl<T> SweepTarget<T> {
    /// The runtimes of this target's cells: the host-HTP runtimes, the AI Hub cells' runtime, or
    /// the plan's device runtimes.
    fn runtimes<'p>(&self, plan: &'p SweepPlan) -> Vec<&'p RuntimeManifest> {
        cell_runtimes(plan, self.kind)
    }
}

/// The host-HTP units of `cut` this sweep runs as targets: Qualcomm's HTP emulator under wine
/// configured as each SoC of the plan's `socs`, in directories `htp-<SOC>`.
pub fn host_htp_targets(plan: &SweepPlan, cut: &Cut) -> Vec<SweepTarget<WineTarget>> {
    cut.taken()
        .filter_map(|(position, unit)| match unit {
            Unit::HostHtp(name) => plan.socs.iter().find(|soc| soc.model == name.as_str()).map(|soc| (position, soc)),
            _ => None,
        })
        .map(|(position, soc)| {
            let name = host_htp_dir(soc.model);
            let info = DeviceInfo {
                serial: name.clone(),
                state: "device".into(),
                os: Some(HOST_HTP_FINGERPRINT.into()),
                soc: Some(soc.model.into()),
                hexagon_arch: Some(soc.arch.into()),
                target: Some(npugate_engine::targets::wine::TRIPLE.into()),
                ..DeviceInfo::default()
            };
            SweepTarget {
                target: WineTarget::for_soc(*soc).named(&name),
                info,
                dir: name,
                chosen_by: "socs".into(),
                unit: position,
                kind: TargetKind::HostHtp,
            }
        })
        .collect()
}

/// The AI Hub units of `cut` this sweep runs as targets, through `session`: each plan entry's
/// device as AI Hub lists it (refused when it names none, several, or one without ONNX), in a
/// directory named after the device (`samsung-galaxy-s24-family`, as `npugate run --aihub`); the
/// device's name is its serial in `sweep.json` and the history, its chipset its SoC.
pub fn aihub_targets(plan: &SweepPlan, cut: &Cut, session: &Arc<Session>) -> Result<Vec<SweepTarget<AiHubTarget>>> {
    let mut listed = None;
    let mut targets: Vec<SweepTarget<AiHubTarget>> = Vec::new();
    for (position, unit) in cut.taken() {
        let Unit::AiHub(selector) = unit else { continue };
        let listed = match &mut listed {
            Some(listed) => listed,
            None => listed.insert(npugate_aihub::devices::list(session.client())?),
        };
        let index = plan.aihub.iter().position(|d| d == selector).unwrap_or_default();
        let pick = npugate_plan::choose_aihub_device(listed, selector)
            .map_err(|e| plan.error(&format!("aihub[{index}]"), format!("{e:#}")))?;
        if let Some(note) = &pick.note {
            eprintln!("npugate sweep: {note}");
        }
        let device = pick.device;
        if targets.iter().any(|t| t.info.serial == device.name) {
            let message = format!("chooses {}, as another entry of aihub does; list each device once", device.name);
            return Err(plan.error(&format!("aihub[{index}]"), message));
        }
        let info = DeviceInfo {
            serial: device.name.clone(),
            state: "device".into(),
            os: Some(format!("AI Hub: {} {}", device.name, device.os)),
            soc: npugate_aihub::devices::attribute(&device, "chipset").map(str::to_string),
            hexagon_arch: npugate_aihub::devices::attribute(&device, "hexagon").map(str::to_string),
            model: Some(device.name.clone()),
            ..DeviceInfo::default()
        };
        let target = AiHubTarget::new(Arc::clone(session), device);
        let dir = target.name().to_string();
        targets.push(SweepTarget {
            target,
            info,
            dir,
            chosen_by: unit.chosen_by(),
            unit: position,
            kind: TargetKind::AiHub,
        });
    }
    Ok(targets)
}

/// What one device's cells came to.
struct DeviceCells {
    dir: PathBuf,
    worst: u8,
}

impl Attempted for DeviceCells {
    fn result_dir(&self) -> PathBuf {
        self.dir.clone()
    }

    fn exit_code(&self) -> u8 {
        self.worst
    }
}

/// Runs (or resumes) the sweep on `devices`; returns the final summary (also in `<out>/sweep.json`).
pub fn run_sweep<T: Target>(
    plan: &SweepPlan,
    devices: &[SweepTarget<T>],
    options: &SweepOptions,
) -> Result<SweepSummary> {
    let out = options.out;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let shard = options.cut.shard.map(|shard| shard_info(plan, shard, options.cut, devices)).transpose()?;
    let summary = initial_summary(plan, options, devices, shard)?;
    if let Some(shard) = options.cut.shard {
        let taken: Vec<String> = options.cut.taken().map(|(_, unit)| unit.label()).collect();
        let taken =
            if taken.is_empty() { "none (the plan has fewer units than shards)".to_string() } else { taken.join(", ") };
        eprintln!("npugate sweep: shard {shard} of {} unit(s): {taken}", options.cut.units.len());
    }
    let summary = Mutex::new(summary);
    lock(&summary).write(out)?;

    let targets: Vec<&T> = devices.iter().map(|d| &d.target).collect();
    let rack = rack::run_rack(&targets, options.policy, |target, progress| {
        let device = devices.iter().find(|d| std::ptr::eq(&d.target, target)).context("a target of this sweep")?;
        run_device_cells(plan, options, device, &summary, progress)
    });

    let mut summary = summary.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
    for outcome in rack.report.devices {
        if let Some(device) = summary.devices.iter_mut().find(|d| d.serial == outcome.serial) {
            device.outcome = Some(outcome);
        }
    }
    summary.finished_at = Some(now_rfc3339());
    summary.exit_code = Some(summary.overall_exit());
    summary.write(out)?;
    Ok(summary)
}

/// The plan's units in plan order: its `[[device]]` entries — or, without any, the devices
/// `requested` chooses (`--device SERIAL|all`, listed over `adb`) — then its host-HTP SoCs. A serial
/// or a SoC class listed twice is one unit. Nothing is probed.
pub fn plan_units(plan: &SweepPlan, adb: &Adb, requested: &[DeviceChoice]) -> Result<Vec<Unit>> {
    let mut units: Vec<Unit> = Vec::new();
    if plan.devices.is_empty() && requested.is_empty() && !(plan.socs.is_empty() && plan.aihub.is_empty()) {
        // Host-HTP and AI Hub cells only: no device is needed.
    } else if plan.devices.is_empty() {
        units.extend(devices::select(adb, requested)?.into_iter().map(Unit::Device));
    } else {
        anyhow::ensure!(
            requested.is_empty(),
            "{} chooses devices ([[device]]); drop --device, or remove the plan's [[device]] entries",
            plan.file.display()
        );
        for spec in &plan.devices {
            let unit = match (&spec.serial, &spec.soc) {
                (Some(serial), _) => Unit::Serial(serial.clone()),
                (None, Some(soc)) => Unit::Soc(soc.to_ascii_uppercase()),
                (None, None) => continue, // refused when the plan was loaded
            };
            if !units.contains(&unit) {
                units.push(unit);
            }
        }
    }
    units.extend(plan.socs.iter().map(|soc| Unit::HostHtp(soc.model.to_string())));
    units.extend(plan.aihub.iter().map(|device| Unit::AiHub(device.clone())));
    Ok(units)
}

/// The runtimes of a target's cells: the plan's host-HTP runtimes for the host HTP emulator, the
/// AI Hub cells' runtime for an AI Hub device, else the plan's device runtimes.
fn cell_runtimes(plan: &SweepPlan, kind: TargetKind) -> Vec<&RuntimeManifest> {
    match kind {
        TargetKind::HostHtp => plan.htp_runtimes.iter().collect(),
        TargetKind::AiHub => plan.aihub_runtimes.iter().collect(),
        TargetKind::Device => plan.runtimes.iter().collect(),
    }
}

/// The record of the shard `cut` makes of `plan` (see [`npugate_sweeps::sweep::shard`]), with the devices this
/// shard resolved its units to.
fn shard_info<T>(plan: &SweepPlan, shard: Shard, cut: &Cut, devices: &[SweepTarget<T>]) -> Result<ShardInfo> {
    let (plan_sha256, _) = npugate_result::digest::sha256_file(&plan.file)
        .with_context(|| format!("cannot read sweep plan {}", plan.file.display()))?;
    let units = cut
        .units
        .iter()
        .enumerate()
        .map(|(position, unit)| ShardUnit {
            shard: Shard::of_unit(position, shard.count),
            unit: unit.clone(),
            runtimes: cell_runtimes(plan, TargetKind::of(unit))
                .into_iter()
                .map(|runtime| runtime.name.clone())
                .collect(),
            devices: devices.iter().filter(|d| d.unit == position).map(|d| d.info.serial.clone()).collect(),
        })
        .collect();
    Ok(ShardInfo { shard, plan_sha256, units })
}

/// The device units of `cut` this sweep runs (see [`plan_units`]) as devices over `adb`, each
/// probed and every runtime checked against its target. A SoC class takes the connected devices of
/// that SoC the plan does not name by serial.
pub fn resolve_devices(
    plan: &SweepPlan,
    adb: &Adb,
    cut: &Cut,
    settings: &AdbSettings,
) -> Result<Vec<SweepTarget<AdbTarget>>> {
    let named = unit::named_serials(&cut.units);
    let mut listed: Option<DeviceList> = None;
    let mut chosen: Vec<(String, String, usize)> = Vec::new();
    for (position, unit) in cut.taken() {
        match unit {
            Unit::Serial(serial) => {
                let selected = devices::select(adb, &[DeviceChoice::Serial(serial.clone())])
                    .map_err(|e| plan.error(&device_field(plan, unit), format!("{e:#}")))?;
                chosen.extend(selected.into_iter().map(|s| (s, unit.chosen_by(), position)));
            }
            Unit::Device(serial) => chosen.push((serial.clone(), unit.chosen_by(), position)),
            Unit::Soc(soc) => {
                let listed = match &mut listed {
                    Some(listed) => listed,
                    None => listed.insert(devices::list(adb)?),
                };
                let (matching, by_serial): (Vec<String>, Vec<String>) =
                    matching_soc(&listed.devices, soc).into_iter().partition(|s| !named.contains(&s.as_str()));
                if matching.is_empty() {
                    let connected: Vec<String> = listed
                        .devices
                        .iter()
                        .map(|d| format!("{} (SoC {})", d.serial, d.soc.as_deref().unwrap_or("unknown")))
                        .collect();
                    let connected = if connected.is_empty() { "none".to_string() } else { connected.join(", ") };
                    let message = match by_serial.is_empty() {
                        true => format!("no connected device has SoC {soc:?} (connected: {connected})"),
                        false => format!("every connected device with SoC {soc:?} is named by serial in the plan ({}); drop this entry", by_serial.join(", ")),
                    };
                    return Err(plan.error(&device_field(plan, unit), message));
                }
                chosen.extend(matching.into_iter().map(|s| (s, unit.chosen_by(), position)));
            }
            Unit::HostHtp(_) | Unit::AiHub(_) => {}
        }
    }
    let mut seen = std::collections::HashSet::new();
    chosen.retain(|(serial, _, _)| seen.insert(serial.clone()));
    let serials: Vec<String> = chosen.iter().map(|(s, _, _)| s.clone()).collect();
    let dirs = result_dir_names(&serials);
    let mut resolved = Vec::new();
    for ((serial, chosen_by, unit), dir) in chosen.into_iter().zip(dirs) {
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
        let target = AdbTarget::new(adb, &serial, settings);
        resolved.push(SweepTarget { target, info, dir, chosen_by, unit, kind: TargetKind::Device });
    }
    Ok(resolved)
}

/// The plan field of a `[[device]]` unit, for errors: `device[2].serial`, `device[0].soc`.
fn device_field(plan: &SweepPlan, unit: &Unit) -> String {
    let entry = plan.devices.iter().position(|spec| match unit {
        Unit::Serial(serial) => spec.serial.as_ref() == Some(serial),
        Unit::Soc(soc) => spec.soc.as_ref().is_some_and(|s| s.eq_ignore_ascii_case(soc)),
        _ => false,
    });
    let key = if matches!(unit, Unit::Soc(_)) { "soc" } else { "serial" };
    format!("device[{}].{key}", entry.unwrap_or_default())
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
fn initial_summary<T>(
    plan: &SweepPlan,
    options: &SweepOptions,
    devices: &[SweepTarget<T>],
    shard: Option<ShardInfo>,
) -> Result<SweepSummary> {
    let out = options.out;
    let (night, started_at) = match SweepSummary::read(out) {
        Some(previous) => {
            if previous.name != plan.name {
                bail!("{} holds sweep {:?}, not {:?}; choose another --out", out.display(), previous.name, plan.name);
            }
            if options.night.is_some_and(|night| night != previous.night) {
                bail!(
                    "{} holds the sweep of night {}; resume it without --night or choose another --out",
                    out.display(),
                    previous.night
                );
            }
            if previous.merged.is_some() {
                bail!(
                    "{} holds a merged sweep (npugate sweep merge), which runs no cells; choose another --out",
                    out.display()
                );
            }
            match (&previous.shard, &shard) {
                (Some(before), Some(now)) => {
                    if let Some(why) = before.differs_from(now) {
                        bail!("{} {why}, or choose another --out", out.display());
                    }
                }
                (Some(before), None) => bail!(
                    "{} holds shard {} of its sweep; resume it with --shard {}, or choose another --out",
                    out.display(),
                    before.shard,
                    before.shard
                ),
                (None, Some(now)) => bail!(
                    "{} holds a sweep run without --shard; resume it without --shard {}, or choose another --out",
                    out.display(),
                    now.shard
                ),
                (None, None) => {}
            }
            (previous.night, previous.started_at)
        }
        None if has_entries(out) => bail!("{} is not empty and holds no sweep; choose another --out", out.display()),
        None => (options.night.map(str::to_string).unwrap_or_else(today), now_rfc3339()),
    };
    let mut cells = Vec::new();
    for device in devices {
        for runtime in device.runtimes(plan) {
            for model in &plan.models {
                let key =
                    CellKey { device: device.dir.clone(), runtime: runtime.name.clone(), model: model.name.clone() };
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
        runtimes: plan.all_runtimes().map(|r| r.name.clone()).collect(),
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
        shard,
        merged: None,
    })
}

fn has_entries(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
}

fn lock(summary: &Mutex<SweepSummary>) -> std::sync::MutexGuard<'_, SweepSummary> {
    summary.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One device's cells in plan order (runtime-major). A retryable failure ends the attempt (the
/// rack retries the device, and the retry skips what finished); any other failure is recorded for
/// that cell and the device moves on. An interrupt stops before the next cell.
fn run_device_cells<T: Target>(
    plan: &SweepPlan,
    options: &SweepOptions,
    device: &SweepTarget<T>,
    summary: &Mutex<SweepSummary>,
    progress: &Progress<'_>,
) -> Result<DeviceCells> {
    let out = options.out;
    let mut worst = EXIT_PASS;
    for runtime in device.runtimes(plan) {
        for model in &plan.models {
            let key = CellKey { device: device.dir.clone(), runtime: runtime.name.clone(), model: model.name.clone() };
            let dir = key.dir(out);
            if let Some(record) = CellRecord::read_finished(&dir) {
                eprintln!("npugate sweep: {}: skipped (finished {})", key.label(), record.finished_at);
                worst = worst.max(record.exit_code);
                continue;
            }
            if options.policy.cancel.is_cancelled() {
                bail!("interrupted before cell {}", key.label());
            }
            progress.step(&format!("{} {}", runtime.name, model.name));
            let settings = plan.cell_settings(model, runtime);
            let result = run_cell(options, device, runtime, model, &settings, &key, progress);
            let mut summary = lock(summary);
            let entry = summary.cell_mut(&key).context("every planned cell is in the summary")?;
            match result {
                Ok(record) => {
                    eprintln!("npugate sweep: {}: {}", key.label(), describe(&record));
                    worst = worst.max(record.exit_code);
                    (entry.state, entry.record, entry.error) = (CellState::Finished, Some(record), None);
                }
                Err(error) if is_retryable(&error) => return Err(error),
                Err(error) => {
                    eprintln!("npugate sweep: {}: could not be judged: {error:#}", key.label());
                    worst = EXIT_ERROR;
                    (entry.state, entry.error) = (CellState::Failed, Some(format!("{error:#}")));
                }
            }
            summary.write(out)?;
        }
    }
    Ok(DeviceCells { dir: out.join(&device.dir), worst })
}

/// Runs and judges one cell, then marks it finished. With `check_outputs` its outputs are compared
/// with the fp32 CPU reference (run into the cell's directory). A host-HTP cell whose run fails is
/// tried once more as `--session-only`: a session the backend refuses is the cell's finding (its
/// graph does not compile for that SoC), recorded with QNN's error, not a cell that could not be judged.
fn run_cell<T: Target>(
    options: &SweepOptions,
    device: &SweepTarget<T>,
    runtime: &RuntimeManifest,
    model: &PlannedModel,
    settings: &HarnessSettings,
    key: &CellKey,
    progress: &Progress<'_>,
) -> Result<CellRecord> {
    let started = Instant::now();
    let dir = &key.dir(options.out);
    npugate_engine::layout::remove_stale_staging(dir);
    let harness = npugate_plan::harness_for(options.harness, runtime, &npugate_plan::Installed)?;
    let gate = GateSpec { rules: model.rules.clone(), ..GateSpec::default() };
    let host_htp = device.kind == TargetKind::HostHtp;
    let settings = match host_htp {
        true => HarnessSettings {
            session: SessionSettings { ep: EpKind::Qnn, ..settings.session.clone() },
            ..settings.clone()
        },
        false => settings.clone(),
    };
    let cancel = &options.policy.cancel;
    let inputs = RunInputs::of_subject(
        &model.subject,
        &settings,
        Some(&gate),
        options.timeouts,
        cancel,
        &npugate_plan::Installed,
    )?;
    let spec = inputs.spec(&harness, runtime, None);
    let run = match run_on(&device.target, &spec, dir, progress) {
        Err(error) if host_htp && !is_retryable(&error) => refused_compile(device, &spec, dir, progress, error)?,
        run => run?,
    };
    let verdict = run.verdict.as_ref().context("a judged run has a verdict")?;
    let fingerprint_soc = Some(verdict.subject.fingerprint.soc.clone()).filter(|soc| soc != "unknown");
    let cell_device = CellDevice {
        serial: device.info.serial.clone(),
        soc: device.info.soc.clone().or(fingerprint_soc).unwrap_or_else(|| "unknown".into()),
        model: device.info.model.clone(),
        fingerprint: device
            .info
            .fingerprint
            .clone()
            .or_else(|| device.info.os.clone())
            .or_else(|| Some(verdict.subject.fingerprint.device.clone())),
    };
    // A session the backend refused never ran, so the harness could not say it was emulated.
    let emulated = run.result.execution.emulated.clone().or_else(|| {
        host_htp.then(|| format!("Qualcomm's HTP emulator ({HOST_HTP_FINGERPRINT}); the session was not created"))
    });
    let mut record = CellRecord::new(
        key.clone(),
        cell_device,
        verdict,
        runtime.qnn_build(),
        emulated,
        run.exit_code,
        started.elapsed().as_secs_f64(),
    );
    record.findings.compile_error = run.result.session_error.clone();
    record.write_marker(run.placed.dir())?;
    Ok(record)
}

/// The cell of a failed host-HTP run once more as `--session-only` (no runs, no output check): its
/// report when the backend refused the session (`session_error`: the graph does not compile), else
/// the first run's `failure`.
fn refused_compile<T: Target>(
    device: &SweepTarget<T>,
    spec: &RunSpec<'_>,
    dir: &Path,
    progress: &Progress<'_>,
    failure: anyhow::Error,
) -> Result<RunReport> {
    progress.step("session only");
    let settings =
        HarnessSettings { session_only: true, execute_once: false, check_outputs: false, ..spec.job.settings.clone() };
    let probe = RunSpec { job: Job { settings: &settings, ..spec.job }, gate: spec.gate, reference: None };
    match run_on(&device.target, &probe, dir, progress) {
        Ok(report) if report.result.session_error.is_some() => Ok(report),
        _ => Err(failure),
    }
}

/// `pass, median 1.23 ms, CV 2.1%, 100% FLOPs on the preferred EP, 12.3 s`; an emulated cell's time
/// as host time (`pass, emulated: host time 42.6 ms, …`), a graph the backend did not compile as such.
fn describe(record: &CellRecord) -> String {
    let mut parts = vec![record.outcome.label().to_lowercase()];
    match (record.is_emulated(), record.median_ns) {
        (true, Some(median)) => parts.push(format!("emulated: host time {}", npugate_gate::units::fmt_ms(median))),
        (true, None) => parts.push("emulated".into()),
        (false, Some(median)) => parts.push(format!("median {}", npugate_gate::units::fmt_ms(median))),
        (false, None) => {}
    }
    if let Some(cv) = record.cv_pct.filter(|_| !record.is_emulated()) {
        parts.push(format!("CV {cv:.1}%"));
    }
    if let Some(error) = &record.findings.compile_error {
        parts.push(format!("not compiled: {error}"));
    }
    if let Some(flops) = record.npu_flops_pct {
        parts.push(format!("{flops:.1}% of FLOPs on the preferred EP"));
    }
    if let Some(outputs) = &record.findings.outputs {
        parts.push(format!("worst output SQNR {}", outputs.label()));
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
    use npugate_engine::targets::mock::{Behaviour, MockTarget};
    use npugate_engine::targets::{Cancel, Execution};
    use std::time::Duration;

    /// A mock device that "kills the sweep" (sets the interrupt) after `kill_after` runs.
    struct KilledAfter {
        mock: MockTarget,
        kill_after: usize,
        cancel: Cancel,
    }

    impl Target for KilledAfter {
        fn name(&self) -> &str {
            self.mock.name()
        }

        fn execute(&self, job: &Job<'_>, out: &Path, progress: &Progress<'_>) -> Result<Execution> {
            let execution = self.mock.execute(job, out, progress);
            if self.mock.calls() >= self.kill_after {
                self.cancel.cancel();
            }
            execution
        }
    }

    fn plan(dir: &Path, models: usize) -> SweepPlan {
        let runtime = crate::sweep::testing::runtime_dir(dir);
        let mut text = format!("name = \"nightly\"\nruntimes = [{runtime:?}]\n[settings]\nruns = 20\n");
        for index in 0..models {
            npugate_engine::model::testing::identity_model(&dir.join(format!("m{index}.onnx")), &[Some(1), Some(3)]);
            text.push_str(&format!(
                "[[model]]\npath = \"m{index}.onnx\"\nrules = {{ cv_pct = 0, npu_flops_pct = 0 }}\n"
            ));
        }
        std::fs::write(dir.join("sweep.toml"), text).unwrap();
        SweepPlan::load(&dir.join("sweep.toml")).unwrap()
    }

    fn device(target: KilledAfter) -> SweepTarget<KilledAfter> {
        let info = DeviceInfo {
            serial: "rig-1".into(),
            state: "device".into(),
            target: Some(npugate_engine::targets::host_triple()),
            ..Default::default()
        };
        SweepTarget { target, info, dir: "rig-1".into(), chosen_by: "serial".into(), unit: 0, kind: TargetKind::Device }
    }

    #[test]
    fn a_sweep_killed_after_two_cells_resumes_without_redoing_them() {
        let work = tempfile::tempdir().unwrap();
        let plan = plan(work.path(), 4);
        let out = work.path().join("sweep");
        let harness = work.path().join("harness");
        npugate_engine::harnesses::write_stand_in(&harness, &npugate_engine::targets::host_triple()).unwrap();
        let run = |kill_after: usize| {
            let cancel = Cancel::new();
            let target = KilledAfter {
                mock: MockTarget::new("rig-1", vec![Behaviour::Measure(vec![1_000_000; 20])]),
                kill_after,
                cancel: cancel.clone(),
            };
            let policy = RackPolicy::once(&cancel);
            let cut = Cut { units: vec![Unit::Serial("rig-1".into())], shard: None };
            let options = SweepOptions {
                out: &out,
                night: Some("2026-11-23"),
                harness: Some(&harness),
                policy: &policy,
                timeouts: Timeouts::LOCAL.with_run(Duration::from_secs(5)),
                cut: &cut,
            };
            let devices = [device(target)];
            let summary = run_sweep(&plan, &devices, &options).unwrap();
            (summary, devices[0].target.mock.calls())
        };

        let (killed, calls) = run(2);
        assert_eq!(calls, 2);
        assert_eq!(killed.finished().count(), 2, "{killed:?}");
        assert!(killed.devices[0]
            .outcome
            .as_ref()
            .unwrap()
            .infrastructure_error
            .as_deref()
            .unwrap()
            .contains("interrupted"));
        assert_eq!(killed.exit_code, Some(EXIT_ERROR));
        // A kill in the middle of the third cell leaves its staging directory behind.
        let third = CellKey { device: "rig-1".into(), runtime: "rt-test".into(), model: "m2".into() }.dir(&out);
        let leftover = third.with_file_name(".m2.staging-killed");
        std::fs::create_dir_all(&leftover).unwrap();

        let (resumed, calls) = run(usize::MAX);
        assert_eq!(calls, 2, "only the two unfinished cells run again");
        assert_eq!(resumed.finished().count(), 4);
        assert_eq!(resumed.exit_code, Some(EXIT_PASS), "{resumed:?}");
        assert!(!leftover.exists(), "the killed run's staging directory is cleaned up");
        assert_eq!(resumed.night, "2026-11-23");
    }

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
