//! Nightly sweeps end to end on the adb rig: a 2-device × 2-runtime × 2-model sweep with the real
//! harness and two real ONNX Runtimes, SIGKILLed after its first cells and resumed without redoing
//! them; the matrix report rendered in headless Chromium; the history over three nights.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use npugate_e2e::devices::Rig;
use npugate_e2e::sweeps::{finished_cells, start_and_kill_after_first_cell, write_plan, RUNTIMES};
use npugate_e2e::{bin, describe, model, run, screenshot};
use serde_json::Value;

const MODELS: [&str; 2] = ["smallcnn", "mixed"];

fn sweep_command(rig: &Rig, plan: &Path, out: &Path, history: &Path, night: &str) -> Command {
    let mut command = rig.command(bin("npugate"));
    command
        .arg("sweep")
        .arg("--plan")
        .arg(plan)
        .arg("--out")
        .arg(out)
        .arg("--history")
        .arg(history)
        .args(["--night", night]);
    command
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// What proves a result file was not rewritten: inode, mtime and bytes (the timings of a real run
/// never repeat).
fn identity(cell: &Path) -> (u64, i64, i64, Vec<u8>) {
    let file = cell.join("result.json");
    let meta = std::fs::metadata(&file).unwrap();
    (meta.ino(), meta.mtime(), meta.mtime_nsec(), std::fs::read(file).unwrap())
}

#[test]
fn a_killed_sweep_resumes_without_redoing_finished_cells_and_the_history_spans_three_nights() {
    let rig = Rig::up(&[6141, 6142]);
    let serials = [Rig::serial(6141), Rig::serial(6142)];
    let work = tempfile::tempdir().unwrap();
    let plan = write_plan(work.path(), &serials, &MODELS);
    let history = work.path().join("history.sqlite");
    let night1 = work.path().join("2026-01-01");

    // Night 1: killed right after its first cell, then resumed.
    start_and_kill_after_first_cell(sweep_command(&rig, &plan, &night1, &history, "2026-01-01"), &night1);
    let before: BTreeMap<PathBuf, _> =
        finished_cells(&night1).into_iter().map(|cell| (cell.clone(), identity(&cell))).collect();
    assert!(!before.is_empty() && before.len() < 8, "kill landed after {} of 8 cells", before.len());
    let summary = json(&night1.join("sweep.json"));
    assert_eq!(summary["schema"], "npugate.sweep/1");
    assert!(summary.get("exit_code").is_none(), "a killed sweep never wrote its final summary");

    let resumed = run(&mut sweep_command(&rig, &plan, &night1, &history, "2026-01-01"));
    assert_eq!(resumed.status.code(), Some(0), "{}", describe(&resumed));
    let log = String::from_utf8_lossy(&resumed.stderr);
    let skipped: Vec<&str> = log.lines().filter(|l| l.contains(": skipped (finished")).collect();
    assert_eq!(skipped.len(), before.len(), "every finished cell is skipped, nothing else:\n{log}");
    for (cell, identity_before) in &before {
        let label = cell.strip_prefix(&night1).unwrap().display().to_string().replace('/', " / ");
        assert!(skipped.iter().any(|l| l.contains(&label)), "{label} not listed as skipped:\n{log}");
        assert!(identity(cell) == *identity_before, "{} was rewritten on resume", cell.display());
    }
    assert_eq!(finished_cells(&night1).len(), 8, "{log}");
    assert_eq!(log.lines().filter(|l| l.contains(": pass, median")).count(), 8 - before.len(), "{log}");

    let summary = json(&night1.join("sweep.json"));
    assert_eq!((summary["night"].as_str(), summary["exit_code"].as_u64()), (Some("2026-01-01"), Some(0)));
    let cells = summary["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 8);
    for cell in cells {
        assert_eq!(cell["state"], "finished", "{cell}");
        let record = &cell["record"];
        assert_eq!(record["schema"], "npugate.sweep-cell/1");
        assert_eq!(record["runs"], 20);
        assert!(
            record["median_ns"].as_f64().unwrap() > 0.0 && record["npu_flops_pct"].as_f64() == Some(100.0),
            "{record}"
        );
        let dir = night1.join(cell["dir"].as_str().unwrap());
        for file in ["result.json", "verdict.json", "report.html", "cell.json"] {
            assert!(dir.join(file).is_file(), "{} lacks {file}", dir.display());
        }
        let result = json(&dir.join("result.json"));
        let ort = result["runtime"]["ort_version"].as_str().unwrap();
        assert!(cell["key"]["runtime"].as_str().unwrap().contains(ort), "cell {} ran ORT {ort}", cell["dir"]);
    }

    // Nights 2 and 3, straight through.
    for night in ["2026-01-02", "2026-01-03"] {
        let out = work.path().join(night);
        let done = run(&mut sweep_command(&rig, &plan, &out, &history, night));
        assert_eq!(done.status.code(), Some(0), "{}", describe(&done));
    }

    // The matrix report of night 3: every cell, the runtime comparison, the trend of three nights.
    let night3 = work.path().join("2026-01-03");
    let html = std::fs::read_to_string(night3.join("matrix.html")).unwrap();
    assert!(!html.contains("<script") && !html.contains("https://") && !html.contains("<link"), "self-contained");
    assert!(html.matches("<svg").count() >= 4, "a median chart per model and a trend chart per model");
    assert!(html.contains("3 night(s) up to 2026-01-03"), "trend from the history");
    assert!(html.contains("No node changed its EP against <code>ort-1.31.1-linux-x86_64</code>"));
    let markdown = std::fs::read_to_string(night3.join("matrix.md")).unwrap();
    assert_eq!(markdown.lines().filter(|l| l.contains("| PASS |")).count(), 8, "{markdown}");
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sweeps");
    if let Some(png) = screenshot(&night3.join("matrix.html"), &keep, "matrix") {
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        // A blank 1400×2000 page compresses to a few kB; charts, tables and text make it far larger.
        assert!(png.len() > 60_000, "screenshot is only {} bytes", png.len());
    }

    // The history: how smallcnn did on each device and runtime over the last 30 nights.
    let query = |args: &[&str]| -> Output {
        run(Command::new(bin("npugate")).arg("history").arg("--history").arg(&history).args(args))
    };
    let answer = query(&["--model", "smallcnn", "--nights", "30", "--json"]);
    assert!(answer.status.success(), "{}", describe(&answer));
    let report: Value = serde_json::from_slice(&answer.stdout).unwrap();
    assert_eq!(report["schema"], "npugate.history/1");
    assert_eq!(report["nights"], serde_json::json!(["2026-01-01", "2026-01-02", "2026-01-03"]));
    let series = report["series"].as_array().unwrap();
    assert_eq!(series.len(), 4, "2 devices × 2 runtimes");
    for s in series {
        assert_eq!(s["model"], "smallcnn");
        assert_eq!(s["points"].as_array().unwrap().len(), 3, "{s}");
        let change = &s["change"];
        assert_eq!(
            (change["from_night"].as_str(), change["to_night"].as_str()),
            (Some("2026-01-02"), Some("2026-01-03"))
        );
        let ratio = &change["median_ratio"];
        let (lower, point, upper) = (
            ratio["ci"]["lower"].as_f64().unwrap(),
            ratio["ratio"].as_f64().unwrap(),
            ratio["ci"]["upper"].as_f64().unwrap(),
        );
        assert!(lower <= point && point <= upper && lower > 0.0, "{ratio}");
        assert!(["slower", "faster", "unchanged"].contains(&change["latency"].as_str().unwrap()), "{change}");
    }
    let recent =
        query(&["--model", "smallcnn", "--device", &serials[0], "--runtime", RUNTIMES[1], "--nights", "2", "--json"]);
    let recent: Value = serde_json::from_slice(&recent.stdout).unwrap();
    assert_eq!(recent["nights"], serde_json::json!(["2026-01-02", "2026-01-03"]));
    assert_eq!(recent["series"].as_array().unwrap().len(), 1);

    let page = work.path().join("history.html");
    let table = query(&["--model", "mixed", "--html", page.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.starts_with("3 night(s): 2026-01-01 2026-01-02 2026-01-03"), "{text}");
    let sparklines = text.lines().filter(|l| l.chars().filter(|c| ('▁'..='█').contains(c)).count() == 3).count();
    assert_eq!(sparklines, 4, "a three-night sparkline per device and runtime:\n{text}");
    let page = std::fs::read_to_string(page).unwrap();
    assert!(page.contains("<svg") && page.contains("<polyline"), "trend chart");
    // Running a finished night again skips every cell and records it once more: still one point per night.
    let again = run(&mut sweep_command(&rig, &plan, &night1, &history, "2026-01-01"));
    assert_eq!(again.status.code(), Some(0), "{}", describe(&again));
    assert_eq!(String::from_utf8_lossy(&again.stderr).matches(": skipped (finished").count(), 8);
    let after: Value = serde_json::from_slice(&query(&["--model", "smallcnn", "--json"]).stdout).unwrap();
    assert!(after["series"].as_array().unwrap().iter().all(|s| s["points"].as_array().unwrap().len() == 3), "{after}");

    let none = query(&["--soc", "SM8650"]);
    assert_eq!(String::from_utf8_lossy(&none.stdout), "no matching sweeps in the history\n");
}

#[test]
fn plan_errors_are_one_line_name_the_field_and_the_file_and_exit_2() {
    let rig = Rig::up(&[6151]);
    let work = tempfile::tempdir().unwrap();
    let plan = write_plan(work.path(), &[Rig::serial(6151)], &["smallcnn"]);
    let text = std::fs::read_to_string(&plan).unwrap();
    let serial_entry = format!("[[device]]\nserial = {:?}", Rig::serial(6151));
    let cases = [
        (text.replace("warmup = 2", "warmpu = 2"), "settings.warmpu: unknown setting; did you mean `warmup`?"),
        (
            text.replace("warmup = 2", "warmup = 2\nexecute_once = true"),
            "settings.execute_once: needs session_only = true as well; add it, or drop execute_once",
        ),
        (text.replace("smallcnn.onnx", "nosuch.onnx"), "model[0].path: model "),
        (text.replace(RUNTIMES[1], "ort-9.9.9-linux-x86_64"), "runtimes[1]: runtime \"ort-9.9.9-linux-x86_64\" is not fetched"),
        (
            text.replace(RUNTIMES[1], "ort-1.31.1-linux-aarch64"),
            "runtimes[1]: runtime ort-1.31.1-linux-aarch64 is built for aarch64-unknown-linux-gnu, but device 127.0.0.1:6151 runs x86_64-unknown-linux-gnu",
        ),
        (text.replace(&serial_entry, "[[device]]\nsoc = \"SM8650\""), "device[0].soc: no connected device has SoC \"SM8650\" (connected: 127.0.0.1:6151 (SoC unknown))"),
        (text.replace(&serial_entry, "[[device]]\nserial = \"127.0.0.1:6999\""), "device[0].serial: device 127.0.0.1:6999 not found"),
    ];
    for (plan_text, expected) in cases {
        std::fs::write(&plan, plan_text).unwrap();
        let out = work.path().join("out");
        let output = run(&mut sweep_command(&rig, &plan, &out, &work.path().join("h.sqlite"), "2026-01-01"));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
        assert!(
            stderr.contains(&plan.display().to_string()) && stderr.contains(expected),
            "want {expected:?}: {stderr}"
        );
        assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
        assert!(!out.join("sweep.json").exists(), "nothing is run for a bad plan");
    }
}

/// A plan of one device × both runtimes × smallcnn with enough timed runs that a cell's harness
/// runs for seconds on the rig.
fn long_plan(dir: &Path, serial: &str) -> PathBuf {
    let plan = format!(
        "name = \"nightly\"\nruntimes = {RUNTIMES:?}\n\n[settings]\nruns = 3000\nwarmup = 2\nprofile_runs = 1\n\n\
         [[device]]\nserial = {serial:?}\n\n[[model]]\npath = {:?}\nrules = {{ cv_pct = 100000 }}\n",
        model("smallcnn.onnx").display().to_string()
    );
    let file = dir.join("sweep.toml");
    std::fs::write(&file, plan).unwrap();
    file
}

#[test]
fn a_sweep_killed_mid_cell_and_resumed_at_once_stops_the_orphan_before_timing_anything() {
    let rig = Rig::up(&[6143]);
    let serial = Rig::serial(6143);
    let work = tempfile::tempdir().unwrap();
    let plan = long_plan(work.path(), &serial);
    let history = work.path().join("history.sqlite");
    let night = work.path().join("killed");

    // SIGKILL while the second cell's harness runs: its host is gone, its harness is not.
    let mut child = sweep_command(&rig, &plan, &night, &history, "2026-02-01")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while finished_cells(&night).is_empty() || rig.harnesses(6143).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(300), "the second cell's harness never started");
        assert!(child.try_wait().unwrap().is_none(), "the sweep ended before its second cell ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let orphans = rig.harnesses(6143);
    assert_eq!(orphans.len(), 1, "the killed host's harness keeps running on the device: {orphans:?}");

    let stop = AtomicBool::new(false);
    let (resumed, (most, busy)) = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| rig.most_harnesses_at_once(6143, &stop));
        let resumed = run(&mut sweep_command(&rig, &plan, &night, &history, "2026-02-01"));
        stop.store(true, Ordering::SeqCst);
        (resumed, watcher.join().unwrap())
    });
    assert_eq!(resumed.status.code(), Some(0), "{}", describe(&resumed));
    let log = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(most, 1, "the redone cell's harness ran while the orphan did:\n{log}");
    assert!(busy > 0);
    assert_eq!(log.matches(": skipped (finished").count(), 1, "{log}");
    assert!(log.contains("broke the lock of host") && log.contains("on this host has ended"), "{log}");
    assert!(log.contains(&format!("stopped orphaned harness pid {}", orphans[0])), "{log}");
    let redone = night.join("127.0.0.1_6143").join(RUNTIMES[1]).join("smallcnn");
    let record = json(&redone.join("device_run.json"));
    assert_eq!(record["lock"]["orphans_stopped"][0]["pid"].as_u64(), Some(u64::from(orphans[0])), "{record}");
    assert!(record["lock"]["broken"][0]["reason"].as_str().unwrap().contains("has ended"), "{record}");
    // That no timed run shared the device with the orphan is what the watcher saw (at most one
    // harness at a time), not a latency: this machine's load moves latencies by chance.
    assert!(json(&redone.join("cell.json"))["median_ns"].as_f64().is_some_and(|ns| ns > 0.0));
}
