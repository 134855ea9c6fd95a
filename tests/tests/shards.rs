//! Sweeps sharded over a CI matrix, end to end on the adb rig with the real harness and two real
//! ONNX Runtimes. A 3-device plan (two phones by serial, one by SoC class) run as 3 shards in
//! separate processes, as 3 matrix jobs would — one of them SIGKILLed after its first cell and
//! resumed — and merged holds the cells of the unsharded run of the same plan, in its order, with
//! the same recorded results. Two runs never time alike, so "the same summary" is proved on the
//! same cells: the shards' cells copied in place of the unsharded run's own, that run's summary
//! (matrix.md, matrix.html, sweep.json but for its invocation's times, the history night) is the
//! merge's byte for byte. A missing shard is named, cell by cell (a SoC class by its unit), exit 2.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use npugate_e2e::devices::{Device, Rig};
use npugate_e2e::sweeps::{finished_cells, start_and_kill_after_first_cell, RUNTIMES};
use npugate_e2e::{bin, describe, files_under, model, run};
use serde_json::Value;

const NIGHT: &str = "2026-03-01";
/// Timing noise of a shared CI machine is not under test.
const CALM: &str = "cv_pct = 100000";
/// A median below 100 ns: every cell of this model fails its gate, on every device and runtime.
const FAILING: &str = "cv_pct = 100000, median_ms = 0.0001";

/// Three phones; the second reads as an SM8650 board (kernel chip id 557).
fn rig(ports: [u16; 3]) -> Rig {
    Rig::up_with(&[Device::new(ports[0]), Device::new(ports[1]).soc_id(557), Device::new(ports[2])])
}

/// A plan naming the first and third phone by serial and the second by its SoC class.
fn write_plan(dir: &Path, ports: [u16; 3], runtimes: &[&str], models: &[(&str, &str)]) -> PathBuf {
    let mut plan =
        format!("name = \"nightly\"\nruntimes = {runtimes:?}\n\n[settings]\nruns = 20\nmax_runs = 20\nwarmup = 2\nprofile_runs = 2\n");
    plan.push_str(&format!("\n[[device]]\nserial = {:?}\n", Rig::serial(ports[0])));
    plan.push_str("\n[[device]]\nsoc = \"SM8650\"\n");
    plan.push_str(&format!("\n[[device]]\nserial = {:?}\n", Rig::serial(ports[2])));
    for (name, rules) in models {
        plan.push_str(&format!(
            "\n[[model]]\npath = {:?}\nrules = {{ {rules} }}\n",
            model(&format!("{name}.onnx")).display().to_string()
        ));
    }
    let file = dir.join("sweep.toml");
    std::fs::write(&file, plan).unwrap();
    file
}

fn sweep(rig: &Rig, plan: &Path, out: &Path, history: &Path, shard: Option<&str>) -> Command {
    let mut command = rig.command(bin("npugate"));
    command
        .arg("sweep")
        .arg("--plan")
        .arg(plan)
        .arg("--out")
        .arg(out)
        .arg("--history")
        .arg(history)
        .args(["--night", NIGHT]);
    if let Some(shard) = shard {
        command.args(["--shard", shard]);
    }
    command
}

fn merge(inputs: &[&PathBuf], out: &Path, history: &Path) -> Output {
    run(Command::new(bin("npugate"))
        .args(["sweep", "merge"])
        .args(inputs)
        .arg("--out")
        .arg(out)
        .arg("--history")
        .arg(history))
}

fn history_json(history: &Path) -> Vec<u8> {
    let output = run(Command::new(bin("npugate")).arg("history").arg("--history").arg(history).arg("--json"));
    assert!(output.status.success(), "{}", describe(&output));
    output.stdout
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `sweep.json` without what belongs to one invocation: its times, each device's rack outcome
/// (attempts, wall time), and the shard or merge section.
fn without_invocation(summary: &Value) -> Value {
    let mut summary = summary.clone();
    let object = summary.as_object_mut().unwrap();
    for key in ["started_at", "finished_at", "shard", "merged"] {
        object.remove(key);
    }
    for device in object["devices"].as_array_mut().unwrap() {
        device.as_object_mut().unwrap().remove("outcome");
    }
    summary
}

/// What a cell's record says apart from its timing: where it ran, what ran, how it was judged.
fn judged(record: &Value) -> Value {
    let keep = [
        "key",
        "device",
        "ort_version",
        "model_digest",
        "outcome",
        "exit_code",
        "failed_rules",
        "runs",
        "npu_flops_pct",
        "fallback_nodes",
    ];
    Value::Object(keep.iter().map(|k| (k.to_string(), record[*k].clone())).collect())
}

/// Replaces `to` with a copy of `from` (every file, byte for byte).
fn copy_dir(from: &Path, to: &Path) {
    if to.exists() {
        std::fs::remove_dir_all(to).unwrap();
    }
    for file in files_under(from) {
        let target = to.join(file.strip_prefix(from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&file, &target).unwrap();
    }
}

fn first_difference(a: &str, b: &str) -> String {
    a.lines()
        .zip(b.lines())
        .find(|(x, y)| x != y)
        .map(|(x, y)| format!("\n  {x}\n  {y}"))
        .unwrap_or_else(|| "lengths differ".into())
}

#[test]
fn three_shards_in_separate_processes_merge_into_the_unsharded_sweep_cell_for_cell_and_byte_for_byte() {
    let ports = [6471, 6472, 6473];
    let rig = rig(ports);
    let work = tempfile::tempdir().unwrap();
    let plan = write_plan(work.path(), ports, &RUNTIMES, &[("smallcnn", CALM), ("mixed", FAILING)]);
    let unsharded = work.path().join("unsharded");
    let whole = run(&mut sweep(&rig, &plan, &unsharded, &work.path().join("unsharded.sqlite"), None));
    assert_eq!(whole.status.code(), Some(1), "mixed fails its gate: {}", describe(&whole));

    // Three matrix jobs at once; shard 2 is SIGKILLed after its first cell, refused as shard 3/3, resumed.
    let shards: Vec<PathBuf> = (1..=3).map(|i| work.path().join(format!("shard-{i}"))).collect();
    let histories: Vec<PathBuf> = (1..=3).map(|i| work.path().join(format!("shard-{i}.sqlite"))).collect();
    let (outputs, killed_after, wrong_shard) = std::thread::scope(|scope| {
        let first = scope.spawn(|| run(&mut sweep(&rig, &plan, &shards[0], &histories[0], Some("1/3"))));
        let third = scope.spawn(|| run(&mut sweep(&rig, &plan, &shards[2], &histories[2], Some("3/3"))));
        start_and_kill_after_first_cell(sweep(&rig, &plan, &shards[1], &histories[1], Some("2/3")), &shards[1]);
        let killed_after = finished_cells(&shards[1]);
        let wrong_shard = run(&mut sweep(&rig, &plan, &shards[1], &histories[1], Some("3/3")));
        let resumed = run(&mut sweep(&rig, &plan, &shards[1], &histories[1], Some("2/3")));
        ([first.join().unwrap(), resumed, third.join().unwrap()], killed_after, wrong_shard)
    });
    assert_eq!(wrong_shard.status.code(), Some(2), "{}", describe(&wrong_shard));
    let message = stderr(&wrong_shard);
    assert!(message.contains("holds shard 2/3 of its sweep, not 3/3; resume it with --shard 2/3"), "{message}");
    assert_eq!(message.trim_end().lines().count(), 1, "one line: {message}");
    assert!(
        !killed_after.is_empty() && killed_after.len() < 4,
        "the kill landed after {} of shard 2's 4 cells",
        killed_after.len()
    );

    let units = ["device 127.0.0.1:6471", "every device with SoC SM8650", "device 127.0.0.1:6473"];
    for (index, output) in outputs.iter().enumerate() {
        assert_eq!(output.status.code(), Some(1), "shard {}: {}", index + 1, describe(output));
        let log = stderr(output);
        assert!(
            log.contains(&format!("npugate sweep: shard {}/3 of 3 unit(s): {}\n", index + 1, units[index])),
            "{log}"
        );
        let summary = json(&shards[index].join("sweep.json"));
        assert_eq!(summary["shard"]["shard"], serde_json::json!({ "index": index + 1, "count": 3 }));
        assert_eq!(summary["devices"].as_array().unwrap().len(), 1, "one phone per shard: {summary}");
        assert_eq!(summary["cells"].as_array().unwrap().len(), 4, "2 runtimes × 2 models");
    }
    let resumed_log = stderr(&outputs[1]);
    assert_eq!(
        resumed_log.matches(": skipped (finished").count(),
        killed_after.len(),
        "the resumed shard redoes only what the kill cut off:\n{resumed_log}"
    );
    assert_eq!(json(&shards[1].join("sweep.json"))["devices"][0]["chosen_by"], "soc=SM8650");

    // The merge, shards given in any order: the unsharded run's cells, in its order, judged alike.
    let merged = work.path().join("merged");
    let merged_history = work.path().join("merged.sqlite");
    let done = merge(&[&shards[2], &shards[0], &shards[1]], &merged, &merged_history);
    assert_eq!(done.status.code(), Some(1), "{}", describe(&done));
    let (ours, theirs) = (json(&merged.join("sweep.json")), json(&unsharded.join("sweep.json")));
    assert_eq!(
        ours["merged"]["shards"].as_array().unwrap().iter().map(|s| s["index"].as_u64().unwrap()).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(ours["merged"].get("missing").is_none() && ours["exit_code"] == theirs["exit_code"], "{ours}");
    let devices = |s: &Value| {
        s["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["serial"].clone(), d["dir"].clone(), d["chosen_by"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(devices(&ours), devices(&theirs));
    let (our_cells, their_cells) = (ours["cells"].as_array().unwrap(), theirs["cells"].as_array().unwrap());
    assert_eq!(our_cells.len(), 12);
    for (a, b) in our_cells.iter().zip(their_cells) {
        assert_eq!((&a["dir"], &a["state"]), (&b["dir"], &b["state"]));
        assert_eq!(judged(&a["record"]), judged(&b["record"]), "cell {}", a["dir"]);
        let shard =
            shards.iter().find(|s| s.join(a["dir"].as_str().unwrap()).is_dir()).expect("a shard holds the cell");
        for file in ["result.json", "verdict.json", "cell.json", "report.html"] {
            let (copy, original) =
                (merged.join(a["dir"].as_str().unwrap()).join(file), shard.join(a["dir"].as_str().unwrap()).join(file));
            assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&original).unwrap(), "{}", copy.display());
        }
    }
    // Counted here from the shards' own markers: the matrix report says the same.
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for shard in &shards {
        for cell in finished_cells(shard) {
            *outcomes.entry(json(&cell.join("cell.json"))["outcome"].as_str().unwrap().to_string()).or_default() += 1;
        }
    }
    assert_eq!(outcomes, BTreeMap::from([("fail".to_string(), 6), ("pass".to_string(), 6)]));
    let markdown = std::fs::read_to_string(merged.join("matrix.md")).unwrap();
    assert!(
        markdown
            .contains("3 device(s) × 2 runtime(s) × 2 model(s): **6 passed, 6 failed, 0 not judged, 0 unfinished**"),
        "{markdown}"
    );
    assert_eq!((markdown.matches("| PASS |").count(), markdown.matches("| FAIL |").count()), (6, 6), "{markdown}");

    // One history night of all twelve cells; each shard's own history holds its own phone.
    let night: Value = serde_json::from_slice(&history_json(&merged_history)).unwrap();
    assert_eq!(night["nights"], serde_json::json!([NIGHT]));
    assert_eq!(night["series"].as_array().unwrap().len(), 12, "{night}");
    for (index, history) in histories.iter().enumerate() {
        let part: Value = serde_json::from_slice(&history_json(history)).unwrap();
        let phones: Vec<&str> =
            part["series"].as_array().unwrap().iter().map(|s| s["device"].as_str().unwrap()).collect();
        assert_eq!(phones, vec![format!("127.0.0.1_{}", ports[index]); 4], "shard {} history", index + 1);
    }

    // The unsharded run with the shards' cells in place of its own: the merge's summary, byte for byte.
    for cell in our_cells {
        let dir = cell["dir"].as_str().unwrap();
        copy_dir(&merged.join(dir), &unsharded.join(dir));
    }
    let unsharded_history = work.path().join("unsharded-again.sqlite");
    let again = run(&mut sweep(&rig, &plan, &unsharded, &unsharded_history, None));
    assert_eq!(again.status.code(), Some(1), "{}", describe(&again));
    assert_eq!(stderr(&again).matches(": skipped (finished").count(), 12, "{}", describe(&again));
    for report in ["matrix.md", "matrix.html"] {
        let (a, b) = (
            std::fs::read_to_string(unsharded.join(report)).unwrap(),
            std::fs::read_to_string(merged.join(report)).unwrap(),
        );
        assert!(a == b, "{report} differs:{}", first_difference(&a, &b));
    }
    assert_eq!(
        without_invocation(&json(&unsharded.join("sweep.json"))),
        without_invocation(&json(&merged.join("sweep.json")))
    );
    assert_eq!(
        String::from_utf8(history_json(&unsharded_history)).unwrap(),
        String::from_utf8(history_json(&merged_history)).unwrap()
    );
}

#[test]
fn a_missing_shard_is_named_cell_by_cell_and_the_merge_exits_2_until_it_is_there() {
    let ports = [6481, 6482, 6483];
    let rig = rig(ports);
    let work = tempfile::tempdir().unwrap();
    let plan = write_plan(work.path(), ports, &RUNTIMES[..1], &[("smallcnn", CALM)]);
    let shards: Vec<PathBuf> = (1..=3).map(|i| work.path().join(format!("shard-{i}"))).collect();
    let history = work.path().join("history.sqlite");
    std::thread::scope(|scope| {
        let jobs: Vec<_> = (0..3)
            .map(|i| {
                let (rig, plan, shards, history) = (&rig, &plan, &shards, &history);
                scope.spawn(move || run(&mut sweep(rig, plan, &shards[i], history, Some(&format!("{}/3", i + 1)))))
            })
            .collect();
        for job in jobs {
            let output = job.join().unwrap();
            assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        }
    });
    // The three shards recorded into one history: one night of all three phones.
    let shared: Value = serde_json::from_slice(&history_json(&history)).unwrap();
    assert_eq!(shared["series"].as_array().unwrap().len(), 3, "{shared}");

    let out = work.path().join("merged");
    let without_third = merge(&[&shards[0], &shards[1]], &out, &work.path().join("merged.sqlite"));
    assert_eq!(without_third.status.code(), Some(2), "{}", describe(&without_third));
    assert!(
        stderr(&without_third).contains("shard 3/3 is missing: its cells on device 127.0.0.1:6483 are absent"),
        "{}",
        describe(&without_third)
    );
    let summary = json(&out.join("sweep.json"));
    let absent: Vec<&Value> = summary["cells"].as_array().unwrap().iter().filter(|c| c["state"] == "absent").collect();
    assert_eq!(absent.len(), 1, "{summary}");
    assert_eq!(
        (absent[0]["dir"].as_str(), absent[0]["error"].as_str()),
        (Some("127.0.0.1_6483/ort-1.31.1-linux-x86_64/smallcnn"), Some("shard 3/3 was not merged"))
    );
    assert_eq!(
        summary["merged"]["missing"],
        serde_json::json!([{ "index": 3, "units": [{ "serial": "127.0.0.1:6483" }] }])
    );
    let markdown = std::fs::read_to_string(out.join("matrix.md")).unwrap();
    assert!(markdown.contains("**2 passed, 0 failed, 0 not judged, 0 unfinished, shard 3/3 missing**"), "{markdown}");
    assert!(markdown.contains("## Absent cells (their shard was not merged: run it, then merge again)\n\n- 127.0.0.1_6483 / ort-1.31.1-linux-x86_64 / smallcnn: absent (shard 3/3 was not merged)"), "{markdown}");
    assert!(std::fs::read_to_string(out.join("matrix.html"))
        .unwrap()
        .contains("127.0.0.1_6483 / ort-1.31.1-linux-x86_64 / smallcnn: absent (shard 3/3 was not merged)"));

    // Without the SoC class's shard: only that shard knew which phones the class took.
    let without_class = merge(&[&shards[0], &shards[2]], &out, &work.path().join("merged.sqlite"));
    assert_eq!(without_class.status.code(), Some(2), "{}", describe(&without_class));
    let markdown = std::fs::read_to_string(out.join("matrix.md")).unwrap();
    assert!(
        markdown.contains("- every device with SoC SM8650, every runtime and model: absent (shard 2/3 was not merged)"),
        "{markdown}"
    );

    // Every shard there: the earlier merge is replaced, nothing is absent.
    let whole = merge(&[&shards[0], &shards[1], &shards[2]], &out, &work.path().join("merged.sqlite"));
    assert_eq!(whole.status.code(), Some(0), "{}", describe(&whole));
    let markdown = std::fs::read_to_string(out.join("matrix.md")).unwrap();
    assert!(
        markdown.contains("**3 passed, 0 failed, 0 not judged, 0 unfinished**") && !markdown.contains("Absent"),
        "{markdown}"
    );

    // Bad input: one line, exit 2, nothing touched.
    let mine = work.path().join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "mine").unwrap();
    let cases = [
        (
            merge(&[&shards[0], &shards[0]], &work.path().join("x"), &history),
            "are both shard 1/3; give each shard once",
        ),
        (
            merge(&[&shards[0], &mine], &work.path().join("x"), &history),
            "holds no sweep (sweep.json missing or not npugate.sweep/1)",
        ),
        (merge(&[&shards[0]], &mine, &history), "holds no merged sweep (notes.txt is there); nothing was changed"),
    ];
    for (output, expected) in cases {
        assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
        let message = stderr(&output);
        assert!(message.contains(expected) && message.trim_end().lines().count() == 1, "want {expected:?}: {message}");
    }
    assert_eq!(std::fs::read_to_string(mine.join("notes.txt")).unwrap(), "mine");
    assert!(!work.path().join("x").exists());
}
