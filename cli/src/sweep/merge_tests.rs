//! Merging shards back into one sweep, tested on real sweeps of mock devices: the shards of a plan
//! merged are the unsharded sweep cell for cell.

use std::time::Duration;

use std::path::{Path, PathBuf};

use super::execute::TargetKind;
use super::{run_sweep, SweepOptions, SweepPlan, SweepTarget};
use npugate_android::devices::DeviceInfo;
use npugate_engine::rack::RackPolicy;
use npugate_engine::targets::mock::{Behaviour, MockTarget};
use npugate_engine::targets::Cancel;
use npugate_result::files;
use npugate_sweeps::matrix::{self, Matrix};
use npugate_sweeps::sweep::cell::CellRecord;
use npugate_sweeps::sweep::merge;
use npugate_sweeps::sweep::shard::{Cut, Shard};
use npugate_sweeps::sweep::summary::CellState;
use npugate_sweeps::sweep::summary::SweepSummary;
use npugate_sweeps::sweep::unit::Unit;

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
        markdown.contains("- every device with SoC SM8650, every runtime and model: absent (shard 2/3 was not merged)"),
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
    assert!(error(&dirs, &roundabout).contains("is inside shard result"), "a path that does not exist yet, resolved");
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
    assert!(
        resume(units(false), shard(2)).contains("holds shard 1/3 of its sweep, not 2/3; resume it with --shard 1/3")
    );
    assert!(resume(units(false), None).contains("holds shard 1/3 of its sweep; resume it with --shard 1/3"));
    assert!(resume(units(true), shard(1)).contains("holds shard 1/3 of a plan cut into other units"));
    let again = sweep(&plan, work.path(), &dir, units(false), shard(1));
    assert_eq!(again.finished().count(), 2, "resumed as the same shard: nothing redone, nothing lost");
}
