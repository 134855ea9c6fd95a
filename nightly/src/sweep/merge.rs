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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::matrix::{self, Matrix};
    use crate::sweep::shard::{Cut, Shard};
    use crate::sweep::unit::Unit;
    use crate::sweep::{run_sweep, SweepOptions, SweepPlan, SweepTarget, TargetKind};
    use npugate_android::devices::DeviceInfo;
    use npugate_engine::rack::RackPolicy;
    use npugate_engine::targets::mock::{Behaviour, MockTarget};
    use npugate_engine::targets::Cancel;

    const NIGHT: &str = "2026-11-23";

    fn plan(dir: &Path) -> SweepPlan {
        let runtime = crate::sweep::testing::runtime_dir(dir);
        let mut text = format!("name = \"nightly\"\nruntimes = [{runtime:?}]\n[settings]\nruns = 20\n");
        for (index, rules) in ["cv_pct = 100", "median_ms = 0.3"].iter().enumerate() {
            npugate_engine::model::testing::identity_model(&dir.join(format!("m{index}.onnx")), &[Some(1), Some(3)]);
            text.push_str(&format!("[[model]]\npath = \"m{index}.onnx\"\nrules = {{ {rules}, npu_flops_pct = 0 }}\n"));
        }
        std::fs::write(dir.join("sweep.toml"), text).unwrap();
        SweepPlan::load(&dir.join("sweep.toml")).unwrap()
    }

    /// Three devices by serial (one of them a SoC class in `with_class`).
    fn units(with_class: bool) -> Vec<Unit> {
        let middle = if with_class { Unit::Soc("SM8650".into()) } else { Unit::Serial("b".into()) };
        vec![Unit::Serial("a".into()), middle, Unit::Serial("c".into())]
    }

    /// Runs `shard` of the plan (all of it with `None`) on mock devices into `out`.
    fn sweep(plan: &SweepPlan, work: &Path, out: &Path, units: Vec<Unit>, shard: Option<Shard>) -> SweepSummary {
        let harness = work.join("harness");
        npugate_engine::harnesses::write_stand_in(&harness, &npugate_engine::targets::host_triple()).unwrap();
        let cut = Cut { units, shard };
        let targets: Vec<SweepTarget<MockTarget>> = cut
            .taken()
            .map(|(position, unit)| {
                let serial = match unit {
                    Unit::Serial(serial) => serial.clone(),
                    _ => "b".to_string(), // the class's one device
                };
                let info = DeviceInfo {
                    serial: serial.clone(),
                    state: "device".into(),
                    target: Some(npugate_engine::targets::host_triple()),
                    ..Default::default()
                };
                let target = MockTarget::new(&serial, vec![Behaviour::Measure(vec![400_000; 20])]);
                SweepTarget {
                    target,
                    info,
                    dir: serial,
                    chosen_by: unit.chosen_by(),
                    unit: position,
                    kind: TargetKind::Device,
                }
            })
            .collect();
        let policy = RackPolicy::once(&Cancel::new());
        let options = SweepOptions {
            out,
            night: Some(NIGHT),
            harness: Some(&harness),
            policy: &policy,
            timeouts: npugate_engine::timeouts::Timeouts::LOCAL.with_run(Duration::from_secs(5)),
            cut: &cut,
        };
        run_sweep(plan, &targets, &options).unwrap()
    }

    fn shard(index: u32) -> Option<Shard> {
        Some(Shard { index, count: 3 })
    }

    /// `sweep.json` without what belongs to one invocation (its times, each device's rack outcome) or to the merge.
    fn cells_of(dir: &Path) -> serde_json::Value {
        let mut value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(files::SWEEP)).unwrap()).unwrap();
        let object = value.as_object_mut().unwrap();
        for key in ["started_at", "finished_at", "shard", "merged"] {
            object.remove(key);
        }
        for device in object["devices"].as_array_mut().unwrap() {
            device.as_object_mut().unwrap().remove("outcome");
        }
        value
    }

    fn write_matrix(summary: &SweepSummary, dir: &Path) -> (String, String) {
        let written = matrix::write(&Matrix::build(summary, dir, None).unwrap(), dir).unwrap();
        (std::fs::read_to_string(&written[0]).unwrap(), std::fs::read_to_string(&written[1]).unwrap())
    }

    #[test]
    fn three_shards_merged_are_the_unsharded_sweep_cell_for_cell_and_byte_for_byte() {
        let work = tempfile::tempdir().unwrap();
        let plan = plan(work.path());
        let unsharded = work.path().join("unsharded");
        let whole = sweep(&plan, work.path(), &unsharded, units(false), None);
        let dirs: Vec<PathBuf> = (1..=3).map(|i| work.path().join(format!("shard-{i}"))).collect();
        for (index, dir) in dirs.iter().enumerate() {
            let part = sweep(&plan, work.path(), dir, units(false), shard(index as u32 + 1));
            assert_eq!(part.devices.len(), 1, "one device per shard");
            assert_eq!(part.shard.as_ref().unwrap().units.iter().map(|u| u.shard).collect::<Vec<_>>(), [1, 2, 3]);
        }
        let out = work.path().join("merged");
        let merged = merge(&[dirs[2].clone(), dirs[0].clone(), dirs[1].clone()], &out).unwrap();
        let keys = |s: &SweepSummary| s.cells.iter().map(|c| (c.key.clone(), c.state)).collect::<Vec<_>>();
        assert_eq!(keys(&merged), keys(&whole), "the cells of the unsharded run, in its order");
        assert_eq!(merged.exit_code, whole.exit_code);
        assert_eq!(merged.exit_code, Some(1), "m1's median rule fails everywhere");
        for cell in &merged.cells {
            let shard_dir = &dirs[["a", "b", "c"].iter().position(|d| *d == cell.key.device).unwrap()];
            let (ours, theirs) = (cell.key.dir(&out), cell.key.dir(shard_dir));
            assert_eq!(
                std::fs::read(ours.join(files::RESULT)).unwrap(),
                std::fs::read(theirs.join(files::RESULT)).unwrap()
            );
            assert_eq!(cell.record, CellRecord::read_finished(&theirs));
        }
        let info = merged.merged.as_ref().unwrap();
        assert_eq!(
            (info.count, info.shards.iter().map(|s| s.index).collect::<Vec<_>>(), info.missing.len()),
            (3, vec![1, 2, 3], 0)
        );

        // The unsharded run with the shards' cells in place of its own: the same summary.
        for cell in &merged.cells {
            let dir = cell.key.dir(&unsharded);
            std::fs::remove_dir_all(&dir).unwrap();
            npugate_engine::layout::link_tree(&cell.key.dir(&out), &dir, &[]).unwrap();
        }
        let resumed = sweep(&plan, work.path(), &unsharded, units(false), None);
        assert_eq!(cells_of(&unsharded), cells_of(&out));
        assert_eq!(
            write_matrix(&resumed, &unsharded),
            write_matrix(&merged, &out),
            "matrix.html and matrix.md, byte for byte"
        );
    }

    #[test]
    fn a_missing_shard_leaves_its_cells_absent_by_name_and_exit_2() {
        let work = tempfile::tempdir().unwrap();
        let plan = plan(work.path());
        let dirs: Vec<PathBuf> = (1..=3).map(|i| work.path().join(format!("shard-{i}"))).collect();
        for (index, dir) in dirs.iter().enumerate() {
            sweep(&plan, work.path(), dir, units(true), shard(index as u32 + 1));
        }
        // Without shard 3 (a device by serial): its cells are named; without shard 2 (a SoC class): its unit is.
        let out = work.path().join("merged");
        let merged = merge(&dirs[..2], &out).unwrap();
        assert_eq!(merged.exit_code, Some(2));
        let absent: Vec<String> =
            merged.cells.iter().filter(|c| c.state == CellState::Absent).map(|c| c.key.label()).collect();
        assert_eq!(absent, ["c / rt-test / m0", "c / rt-test / m1"]);
        let (html, markdown) = write_matrix(&merged, &out);
        assert!(
            markdown.contains("## Absent cells")
                && markdown.contains("- c / rt-test / m1: absent (shard 3/3 was not merged)"),
            "{markdown}"
        );
        assert!(markdown.contains("0 unfinished, shard 3/3 missing**"), "{markdown}");
        assert!(html.contains("c / rt-test / m0: absent (shard 3/3 was not merged)"), "{html}");

        let without_class = merge(&[dirs[0].clone(), dirs[2].clone()], &out).unwrap();
        assert_eq!(without_class.exit_code, Some(2));
        assert!(
            without_class.cells.iter().all(|c| c.state != CellState::Absent),
            "a class's devices are known to its shard alone"
        );
        let (_, markdown) = write_matrix(&without_class, &out);
        assert!(
            markdown
                .contains("- every device with SoC SM8650, every runtime and model: absent (shard 2/3 was not merged)"),
            "{markdown}"
        );
    }

    #[test]
    fn shards_of_different_sweeps_and_foreign_folders_are_refused_and_nothing_is_changed() {
        let work = tempfile::tempdir().unwrap();
        let plan = plan(work.path());
        let dirs: Vec<PathBuf> = (1..=2).map(|i| work.path().join(format!("shard-{i}"))).collect();
        for (index, dir) in dirs.iter().enumerate() {
            sweep(&plan, work.path(), dir, units(false), shard(index as u32 + 1));
        }
        let unsharded = work.path().join("unsharded");
        sweep(&plan, work.path(), &unsharded, units(false), None);
        let out = work.path().join("merged");
        let error = |inputs: &[PathBuf], out: &Path| format!("{:#}", merge(inputs, out).unwrap_err());
        assert!(error(&[dirs[0].clone(), dirs[0].clone()], &out).contains("are both shard 1/3; give each shard once"));
        assert!(error(&[dirs[0].clone(), unsharded.clone()], &out).contains("holds a sweep run without --shard"));
        assert!(error(&[work.path().join("nowhere")], &out).contains("holds no sweep (sweep.json missing"));
        assert!(error(&dirs, &dirs[0].join("merged")).contains("is inside shard result"));
        std::os::unix::fs::symlink(&dirs[0], work.path().join("link")).unwrap();
        let roundabout = work.path().join("link").join("merged");
        assert!(
            error(&dirs, &roundabout).contains("is inside shard result"),
            "a path that does not exist yet, resolved"
        );
        // Another night's shard.
        let other = work.path().join("other-night");
        std::fs::create_dir_all(&other).unwrap();
        let mut summary = SweepSummary::read(&dirs[1]).unwrap();
        summary.night = "2026-11-24".into();
        summary.write(&other).unwrap();
        let message = error(&[dirs[0].clone(), other], &out);
        assert!(
            message.contains("is of night 2026-11-24, but")
                && message.contains("has 2026-11-23; merge the shards of one sweep and night"),
            "{message}"
        );
        assert!(!out.exists(), "nothing was written");

        // An out that holds anything but an earlier merge is left alone; an earlier merge is replaced.
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("notes.txt"), "mine").unwrap();
        assert!(error(&dirs, &out).contains("holds no merged sweep (notes.txt is there)"));
        assert!(
            error(&dirs, &unsharded).contains("holds no merged sweep"),
            "an unsharded sweep's cells are never replaced"
        );
        std::fs::remove_file(out.join("notes.txt")).unwrap();
        let first = merge(&dirs[..1], &out).unwrap();
        assert_eq!(first.merged.unwrap().missing.iter().map(|m| m.index).collect::<Vec<_>>(), [2, 3]);
        let second = merge(&dirs, &out).unwrap();
        assert_eq!(second.merged.unwrap().missing.iter().map(|m| m.index).collect::<Vec<_>>(), [3]);
        assert!(out.join("b/rt-test/m0/cell.json").is_file());
    }

    #[test]
    fn a_shard_resumes_only_as_the_same_shard() {
        let work = tempfile::tempdir().unwrap();
        let plan = plan(work.path());
        let dir = work.path().join("shard-1");
        sweep(&plan, work.path(), &dir, units(false), shard(1));
        let resume = |units: Vec<Unit>, shard: Option<Shard>| {
            let cut = Cut { units, shard };
            let policy = RackPolicy::once(&Cancel::new());
            let options = SweepOptions {
                out: &dir,
                night: None,
                harness: None,
                policy: &policy,
                timeouts: npugate_engine::timeouts::Timeouts::LOCAL.with_run(Duration::from_secs(5)),
                cut: &cut,
            };
            format!("{:#}", run_sweep::<MockTarget>(&plan, &[], &options).unwrap_err())
        };
        assert!(resume(units(false), shard(2))
            .contains("holds shard 1/3 of its sweep, not 2/3; resume it with --shard 1/3"));
        assert!(resume(units(false), None).contains("holds shard 1/3 of its sweep; resume it with --shard 1/3"));
        assert!(resume(units(true), shard(1)).contains("holds shard 1/3 of a plan cut into other units"));
        let again = sweep(&plan, work.path(), &dir, units(false), shard(1));
        assert_eq!(again.finished().count(), 2, "resumed as the same shard: nothing redone, nothing lost");
    }
}
