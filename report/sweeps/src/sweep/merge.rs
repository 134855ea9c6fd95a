//! `npugate sweep merge`: shard results (`npugate sweep --shard I/N`) put back together into one
//! sweep directory. Every shard's cells are linked into `<out>/<device>/<runtime>/<model>/` and
//! listed in one `sweep.json` in the order an unsharded run of the plan has (unit by unit, as the
//! shards recorded the cut), so the matrix report and the history night made from it are those of
//! an unsharded run with the same cells. The cells of a shard that is not among the directories
//! are `absent`, named by the units the cut gives that shard.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::cell::{CellKey, CellRecord};
use super::shard::{MergeInfo, MergedShard, MissingShard, ShardInfo, ShardUnit};
use super::summary::{CellEntry, CellState, SweepDevice, SweepSummary, SWEEP_SCHEMA};
use super::unit::Unit;
use npugate_result::files;

/// One shard result to merge.
struct ShardResult {
    /// Its directory, as given.
    dir: PathBuf,
    /// Its `sweep.json`.
    summary: SweepSummary,
    /// Its `shard` section.
    info: ShardInfo,
}

impl ShardResult {
    /// Reads the shard result in `dir`.
    fn read(dir: &Path) -> Result<ShardResult> {
        let summary = SweepSummary::read(dir).ok_or_else(|| {
            anyhow::anyhow!(
                "{} holds no sweep ({} missing or not {SWEEP_SCHEMA}); give the --out folders of `npugate sweep --shard I/N`",
                dir.display(),
                files::SWEEP
            )
        })?;
        let Some(info) = summary.shard.clone() else {
            bail!(
                "{} holds a sweep run without --shard; merge takes the shard results of `npugate sweep --shard I/N`",
                dir.display()
            );
        };
        Ok(ShardResult { dir: dir.to_path_buf(), summary, info })
    }

    /// Why this shard is not of the same sweep as `first`, if it is not.
    fn mismatch(&self, first: &ShardResult) -> Option<String> {
        let (a, b) = (&self.summary, &first.summary);
        let differs = |what: &str, this: String, that: String| {
            Some(format!("{what} {this}, but {} has {that}", first.dir.display()))
        };
        if a.name != b.name {
            return differs("is of sweep", format!("{:?}", a.name), format!("{:?}", b.name));
        }
        if a.night != b.night {
            return differs("is of night", a.night.clone(), b.night.clone());
        }
        if self.info.shard.count != first.info.shard.count {
            return differs("is shard", self.info.shard.to_string(), format!("shard {}", first.info.shard));
        }
        if self.info.plan_sha256 != first.info.plan_sha256 {
            return differs("ran the plan with sha256", self.info.plan_sha256.clone(), first.info.plan_sha256.clone());
        }
        if self.info.plan_cut() != first.info.plan_cut() || a.runtimes != b.runtimes || a.models != b.models {
            let units = |info: &ShardInfo| info.units.iter().map(|u| u.unit.label()).collect::<Vec<_>>().join(", ");
            return differs("cut the plan into", units(&self.info), units(&first.info));
        }
        None
    }
}

/// Merges the shard results in `inputs` into `out` (missing, empty, or a merged sweep, which is
/// replaced); returns the merged summary, also written as `<out>/sweep.json`. The history and the
/// matrix report are the caller's (as after `run_sweep`).
pub fn merge(inputs: &[PathBuf], out: &Path) -> Result<SweepSummary> {
    let shards = read_shards(inputs)?;
    let first = shards.values().next().context("no shard result to merge")?;
    check_same_sweep(&shards, first)?;
    check_out(out, inputs)?;
    let mut gathered = gather(&shards, first, out)?;
    let links = std::mem::take(&mut gathered.links);
    let summary = merged_summary(&shards, first, gathered);
    write_merged(out, &summary, &links)?;
    Ok(summary)
}

/// What the shards' units contribute to the merged sweep, in the plan's unit order.
#[derive(Default)]
struct Gathered {
    /// The devices of the merged shards, their outcomes pointing into `out`.
    devices: Vec<SweepDevice>,
    /// Every planned cell: the merged shards' cells and the absent cells of missing shards.
    cells: Vec<CellEntry>,
    /// Cell folders to link into `out`: (source folder in a shard, its cell).
    links: Vec<(PathBuf, CellKey)>,
    /// The units of each shard not among the inputs, by shard index.
    missing: BTreeMap<u32, Vec<Unit>>,
}

/// Reads every shard result in `inputs`, keyed by shard index; refuses a shard given twice.
fn read_shards(inputs: &[PathBuf]) -> Result<BTreeMap<u32, ShardResult>> {
    let mut shards: BTreeMap<u32, ShardResult> = BTreeMap::new();
    for dir in inputs {
        let shard = ShardResult::read(dir)?;
        if let Some(same) = shards.get(&shard.info.shard.index) {
            bail!(
                "{} and {} are both shard {}; give each shard once",
                same.dir.display(),
                dir.display(),
                shard.info.shard
            );
        }
        shards.insert(shard.info.shard.index, shard);
    }
    Ok(shards)
}

/// Refuses shards that are not all of the same sweep, night and cut as `first`.
fn check_same_sweep(shards: &BTreeMap<u32, ShardResult>, first: &ShardResult) -> Result<()> {
    for shard in shards.values() {
        if let Some(why) = shard.mismatch(first) {
            bail!("{} {why}; merge the shards of one sweep and night", shard.dir.display());
        }
    }
    Ok(())
}

/// Walks the plan's units in order: a merged shard's unit gives its devices, cells and cell
/// folders; a missing shard's unit gives absent cells (where its device folder is known).
fn gather(shards: &BTreeMap<u32, ShardResult>, first: &ShardResult, out: &Path) -> Result<Gathered> {
    let mut gathered = Gathered::default();
    let mut device_dirs: BTreeMap<String, &Path> = BTreeMap::new();
    for (position, planned) in first.info.units.iter().enumerate() {
        let Some(shard) = shards.get(&planned.shard) else {
            gathered.missing.entry(planned.shard).or_default().push(planned.unit.clone());
            gathered.cells.extend(absent_cells(planned, first));
            continue;
        };
        for serial in &shard.info.units[position].devices {
            let device = shard.summary.devices.iter().find(|d| &d.serial == serial).with_context(|| {
                format!(
                    "{}: device {serial} of {} is not among its devices",
                    shard.dir.join(files::SWEEP).display(),
                    planned.unit.label()
                )
            })?;
            if let Some(other) = device_dirs.insert(device.dir.clone(), &shard.dir) {
                bail!(
                    "{} and {} both hold device folder {}; their serials make one folder name",
                    other.display(),
                    shard.dir.display(),
                    device.dir
                );
            }
            gathered.devices.push(SweepDevice {
                outcome: device.outcome.clone().map(|outcome| npugate_engine::rack::DeviceOutcome {
                    result_dir: Some(out.join(&device.dir)),
                    ..outcome
                }),
                ..device.clone()
            });
            gather_device_cells(shard, &device.dir, &mut gathered);
        }
    }
    Ok(gathered)
}

/// The cells of a unit whose shard was not merged, each `absent` with the reason; none when the
/// unit's device folder is not known without running it.
fn absent_cells(planned: &ShardUnit, first: &ShardResult) -> Vec<CellEntry> {
    let Some(device) = planned.unit.known_dir() else {
        return Vec::new();
    };
    let error = format!("shard {}/{} was not merged", planned.shard, first.info.shard.count);
    let mut cells = Vec::new();
    for runtime in &planned.runtimes {
        for model in &first.summary.models {
            let key = CellKey { device: device.clone(), runtime: runtime.clone(), model: model.clone() };
            let dir = format!("{device}/{runtime}/{model}");
            cells.push(CellEntry { key, dir, state: CellState::Absent, record: None, error: Some(error.clone()) });
        }
    }
    cells
}

/// Adds the cells `shard` holds for device folder `device_dir`, their state re-read from the cell
/// folders (a cell marked finished without a finished record is pending again), and the folders
/// to link.
fn gather_device_cells(shard: &ShardResult, device_dir: &str, gathered: &mut Gathered) {
    for entry in shard.summary.cells.iter().filter(|c| c.key.device == device_dir) {
        let source = entry.key.dir(&shard.dir);
        if source.is_dir() {
            gathered.links.push((source.clone(), entry.key.clone()));
        }
        gathered.cells.push(match CellRecord::read_finished(&source) {
            Some(record) => {
                CellEntry { state: CellState::Finished, record: Some(record), error: None, ..entry.clone() }
            }
            None if entry.state == CellState::Finished => {
                CellEntry { state: CellState::Pending, record: None, ..entry.clone() }
            }
            None => CellEntry { record: None, ..entry.clone() },
        });
    }
}

/// The merged sweep's summary: `first`'s sweep, the shards' earliest start and latest finish
/// (none while any shard is unfinished), the gathered devices and cells, and the merge section.
fn merged_summary(shards: &BTreeMap<u32, ShardResult>, first: &ShardResult, gathered: Gathered) -> SweepSummary {
    let Gathered { devices, cells, missing, .. } = gathered;
    let mut summary = SweepSummary {
        schema: SWEEP_SCHEMA.into(),
        name: first.summary.name.clone(),
        plan: first.summary.plan.clone(),
        night: first.summary.night.clone(),
        started_at: shards.values().map(|s| s.summary.started_at.clone()).min().unwrap_or_default(),
        finished_at: shards
            .values()
            .map(|s| s.summary.finished_at.clone())
            .collect::<Option<Vec<_>>>()
            .and_then(|ends| ends.into_iter().max()),
        runtimes: first.summary.runtimes.clone(),
        models: first.summary.models.clone(),
        devices,
        cells,
        exit_code: None,
        shard: None,
        merged: Some(MergeInfo {
            count: first.info.shard.count,
            plan_sha256: first.info.plan_sha256.clone(),
            shards: shards
                .values()
                .map(|s| MergedShard {
                    index: s.info.shard.index,
                    dir: s.dir.display().to_string(),
                    started_at: s.summary.started_at.clone(),
                    finished_at: s.summary.finished_at.clone(),
                })
                .collect(),
            missing: missing.into_iter().map(|(index, units)| MissingShard { index, units }).collect(),
        }),
    };
    summary.exit_code = Some(summary.overall_exit());
    summary
}

/// Refuses an `out` that is one of the shards (or inside one), or that holds anything but a
/// merged sweep: a merge replaces only a merge.
fn check_out(out: &Path, inputs: &[PathBuf]) -> Result<()> {
    // A path as the file system resolves it; one that does not exist yet, below its resolved parent.
    let resolved = |path: &Path| {
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        std::fs::canonicalize(&absolute).unwrap_or_else(|_| match (absolute.parent(), absolute.file_name()) {
            (Some(parent), Some(name)) => {
                std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf()).join(name)
            }
            _ => absolute.clone(),
        })
    };
    let target = resolved(out);
    if let Some(input) = inputs.iter().find(|input| target.starts_with(resolved(input))) {
        bail!("--out {} is inside shard result {}; choose a folder of its own", out.display(), input.display());
    }
    if !out.exists() || SweepSummary::read(out).is_some_and(|summary| summary.merged.is_some()) {
        return Ok(());
    }
    anyhow::ensure!(out.is_dir(), "--out {} is a file; give a folder for the merged sweep", out.display());
    let mut entries = std::fs::read_dir(out).with_context(|| format!("cannot read {}", out.display()))?;
    if let Some(entry) = entries.next() {
        let name = entry.with_context(|| format!("cannot read {}", out.display()))?.file_name();
        bail!(
            "--out {} holds no merged sweep ({} is there); nothing was changed — choose another --out (a merge replaces only an earlier merge)",
            out.display(),
            name.to_string_lossy()
        );
    }
    Ok(())
}

/// Builds the merged sweep next to `out` and moves it into place, replacing an earlier merge:
/// a merge that fails half-way leaves `out` as it was.
fn write_merged(out: &Path, summary: &SweepSummary, links: &[(PathBuf, CellKey)]) -> Result<()> {
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    let staging = tempfile::Builder::new()
        .prefix(".npugate-merge-")
        .tempdir_in(parent)
        .with_context(|| format!("cannot write in {}", parent.display()))?;
    let mut linked = BTreeSet::new();
    for (source, key) in links {
        if linked.insert(key.clone()) {
            npugate_engine::layout::link_tree(source, &key.dir(staging.path()), &[])?;
        }
    }
    summary.write(staging.path())?;
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("cannot replace {}", out.display()))?;
    }
    let staged = staging.keep();
    std::fs::rename(&staged, out).with_context(|| format!("cannot move the merged sweep into {}", out.display()))
}
