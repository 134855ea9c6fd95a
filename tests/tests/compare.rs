//! `npugate compare` end to end on the adb rig (real adb, real adbd, the real harness and ONNX
//! Runtime): a rack compares each device on its own and writes every round and report; `run
//! --confirm` keeps every attempt of a reproducible failure; a device with planted noisy history is
//! flagged by `npugate devices` and skipped with `--skip-noisy`.
//!
//! What a comparison concludes — a 10% slower model found, an identical copy passing, load halfway
//! moving both models alike while the stored-baseline gate fails — is statistics, tested on the mock
//! target with injected latencies (`compare::session` tests): deterministic. Here the rig's devices
//! share this machine's CPU with everything else, so nothing asserted depends on how fast they ran.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use npugate_e2e::devices::Rig;
use npugate_e2e::{bin, describe, model, python, run};
use serde_json::Value;

const RUNTIME: &str = "ort-1.31.1-linux-x86_64";

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// `npugate compare --device SERIAL` of `baseline` against `candidate` inside the rig.
fn compare(rig: &Rig, baseline: &Path, candidate: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut command = rig.command(bin("npugate"));
    command.args(["compare", "--runtime", RUNTIME]).arg("--baseline-model").arg(baseline).arg("--model").arg(candidate);
    command.arg("--out").arg(out).args(extra);
    command
}

/// `model` copied into `dir` under `name`: the same bytes, another file.
fn copy_of(model: &Path, dir: &Path, name: &str) -> PathBuf {
    let copy = dir.join(name);
    std::fs::copy(model, &copy).unwrap();
    copy
}

#[test]
fn a_rack_compares_each_device_on_its_own_and_writes_every_round_and_report() {
    let rig = Rig::up(&[6181, 6182]);
    let work = tempfile::tempdir().unwrap();
    let stack = model("convstack.onnx");
    let copy = copy_of(&stack, work.path(), "convstack_copy.onnx");
    let out = work.path().join("rack");
    // `max_slowdown_pct = 50`: two identical models interleaved are never 50% apart unless the
    // pairing itself is broken, whatever else loads this machine — so the verdict is `pass`.
    let extra = [
        "--device",
        "all",
        "--rounds",
        "10",
        "--runs-per-round",
        "15",
        "--intra-threads",
        "1",
        "--rule",
        "max_slowdown_pct=50",
    ];
    let reports = ["--format", "markdown", "--format", "junit", "--format", "html", "--report", "reports"];
    let rack = run(compare(&rig, &stack, &copy, &out, &extra).args(reports));
    assert_eq!(rack.status.code(), Some(0), "{}", describe(&rack));
    let summary = json(&out.join("rack.json"));
    assert_eq!(
        (summary["devices"].as_array().unwrap().len(), summary["exit_code"].as_u64()),
        (2, Some(0)),
        "{summary}"
    );
    for port in [6181, 6182] {
        let device = out.join(format!("127.0.0.1_{port}"));
        let verdict = json(&device.join("compare.json"));
        assert_eq!(verdict["target"], Rig::serial(port), "each device is its own pair");
        // 10 rounds asked; compare adds rounds at later looks while its interval cannot decide.
        assert!(verdict["rounds"].as_array().unwrap().len() >= 10, "{verdict:#}");
        let ratio = verdict["paired"]["ratio"].as_f64().unwrap();
        assert!((0.67..1.5).contains(&ratio), "an identical copy: B/A {ratio}");
        assert_eq!(verdict["placement_differences"].as_array().unwrap().len(), 0, "both run on the CPU EP");
        for dir in ["baseline/placement", "candidate/placement", "baseline/round-01", "candidate/round-10"] {
            assert!(
                device.join(dir).join("result.json").is_file() && device.join(dir).join("device_run.json").is_file(),
                "{dir}"
            );
        }
        let round = json(&device.join("candidate/round-10/result.json"));
        assert_eq!(
            (round["settings"]["runs"].as_u64(), round["settings"]["profile_runs"].as_u64()),
            (Some(15), Some(0))
        );
        let junit = std::fs::read_to_string(device.join("reports/compare.junit.xml")).unwrap();
        assert!(junit.contains("name=\"max_slowdown_pct\"") && junit.contains("placement_must_match"), "{junit}");
        assert!(std::fs::read_to_string(device.join("reports/compare.html")).unwrap().contains("npugate compare"));
        assert!(std::fs::read_to_string(device.join("reports/compare.md")).unwrap().contains("npugate compare: PASS"));
    }
}

#[test]
fn confirm_2_keeps_all_three_attempts_of_a_reproducible_failure() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("confirmed");
    let failing = run(Command::new(bin("npugate"))
        .args([
            "run",
            "--local",
            "--runs",
            "5",
            "--profile-runs",
            "1",
            "--rule",
            "median_ms=0.000001",
            "--confirm",
            "2",
        ])
        .arg("--model")
        .arg(model("smallcnn.onnx"))
        .arg("--out")
        .arg(&out));
    assert_eq!(failing.status.code(), Some(1), "{}", describe(&failing));
    let verdict = json(&out.join("verdict.json"));
    let confirmation = &verdict["confirmation"];
    assert_eq!(
        (confirmation["failed"].as_u64(), confirmation["outcome"].as_str()),
        (Some(3), Some("fail")),
        "{confirmation}"
    );
    assert_eq!(confirmation["attempts"].as_array().unwrap().len(), 3);
    for attempt in 1..=3 {
        let dir = out.join(format!("attempt-{attempt}"));
        assert!(dir.join("result.json").is_file() && dir.join("verdict.json").is_file(), "attempt {attempt}");
    }
    let stdout = String::from_utf8_lossy(&failing.stdout);
    assert!(stdout.contains("failed 3 of 3: the failure reproduced"), "{stdout}");
    // The result directory stays whole: `npugate gate` judges it again.
    let again = run(Command::new(bin("npugate")).arg("gate").arg(&out).args(["--rule", "median_ms=0.000001"]));
    assert_eq!(again.status.code(), Some(1), "{}", describe(&again));

    // A placement failure is deterministic: never rerun.
    let out = work.path().join("placement");
    let placement = run(Command::new(bin("npugate"))
        .args([
            "run",
            "--local",
            "--runs",
            "5",
            "--profile-runs",
            "1",
            "--rule",
            "median_ms=0.000001",
            "--rule",
            "npu_nodes_pct=101",
            "--confirm",
            "2",
        ])
        .arg("--model")
        .arg(model("smallcnn.onnx"))
        .arg("--out")
        .arg(&out));
    assert_eq!(placement.status.code(), Some(1), "{}", describe(&placement));
    assert!(!out.join("attempt-1").exists() && json(&out.join("verdict.json")).get("confirmation").is_none());
}

/// Runs a real sweep of `serials` × smallcnn for `night` into `dir`, recorded in `history`.
fn sweep(rig: &Rig, serials: &[String], dir: &Path, history: &Path, night: &str) -> Output {
    let mut plan = format!("name = \"health\"\nruntimes = [{RUNTIME:?}]\n[settings]\nruns = 20\nprofile_runs = 1\n");
    for serial in serials {
        plan.push_str(&format!("[[device]]\nserial = {serial:?}\n"));
    }
    plan.push_str(&format!(
        "[[model]]\npath = {:?}\nrules = {{ cv_pct = 100000 }}\n",
        model("smallcnn.onnx").display().to_string()
    ));
    let file = dir.join("sweep.toml");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(&file, plan).unwrap();
    run(rig
        .command(bin("npugate"))
        .arg("sweep")
        .arg("--plan")
        .arg(&file)
        .arg("--out")
        .arg(dir.join(night))
        .arg("--history")
        .arg(history)
        .args(["--night", night]))
}

#[test]
fn a_device_with_planted_noisy_history_is_flagged_and_skipped() {
    let rig = Rig::up(&[6191, 6192, 6193]);
    let serials: Vec<String> = [6191, 6192, 6193].map(Rig::serial).to_vec();
    let work = tempfile::tempdir().unwrap();
    let history = work.path().join("history.sqlite");
    let swept = sweep(&rig, &serials, &work.path().join("sweeps"), &history, "2026-02-01");
    assert!(swept.status.code().is_some_and(|c| c < 2), "{}", describe(&swept));
    // The real night gives the store its cells; two more nights are copies of it, and every cell's
    // noise is planted (this machine's own noise is real and varies run to run, so nothing measured
    // decides): 6191 and 6192 steady at 2% CV, 6193 at 30% with medians swinging ±25%.
    let plant = "import sqlite3, sys\n\
        db = sqlite3.connect(sys.argv[1])\n\
        (first,) = db.execute(\"SELECT id FROM sweeps\").fetchone()\n\
        for night in ('2026-02-02', '2026-02-03'):\n    \
            cur = db.execute(\"INSERT INTO sweeps (name, night, started_at, sweep_dir) SELECT name, ?, started_at, sweep_dir FROM sweeps WHERE id = ?\", (night, first))\n    \
            columns = ', '.join(c[1] for c in db.execute('PRAGMA table_info(cells)') if c[1] != 'sweep_id')\n    \
            db.execute(f\"INSERT INTO cells (sweep_id, {columns}) SELECT ?, {columns} FROM cells WHERE sweep_id = ?\", (cur.lastrowid, first))\n\
        rows = db.execute(\"SELECT rowid, serial FROM cells ORDER BY sweep_id, serial\").fetchall()\n\
        for i, (rowid, serial) in enumerate(rows):\n    \
            noisy = serial == sys.argv[2]\n    \
            median = 1e6 * ((1.25 if i % 2 else 0.75) if noisy else 1.0)\n    \
            db.execute(\"UPDATE cells SET cv_pct = ?, median_ns = ? WHERE rowid = ?\", (30.0 if noisy else 2.0, median, rowid))\n\
        db.commit()\n\
        print(len(rows))\n";
    let planted = run(Command::new(python()).arg("-c").arg(plant).arg(&history).arg(&serials[2]));
    assert_eq!(String::from_utf8_lossy(&planted.stdout).trim(), "9", "{}", describe(&planted));

    let listed = run(rig.command(bin("npugate")).args(["devices", "--history"]).arg(&history));
    assert!(listed.status.success(), "{}", describe(&listed));
    let text = String::from_utf8_lossy(&listed.stdout);
    let line = |serial: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(serial) && l.contains("noise floor"))
            .unwrap_or_else(|| panic!("{serial}: {text}"))
            .to_string()
    };
    assert!(line(&serials[2]).contains("NOISY") && line(&serials[2]).ends_with(": noisy"), "{text}");
    assert!(line(&serials[0]).contains(" ok ") && line(&serials[1]).contains(" ok "), "{text}");
    let listed = run(rig.command(bin("npugate")).args(["devices", "--json", "--history"]).arg(&history));
    let list: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let noisy: Vec<&str> = list["health"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["noisy"] == true)
        .map(|h| h["serial"].as_str().unwrap())
        .collect();
    assert_eq!(noisy, [serials[2].as_str()], "{list}");

    let shown = run(Command::new(bin("npugate")).args(["history", "--history"]).arg(&history));
    assert!(String::from_utf8_lossy(&shown.stdout).contains("Device health"), "{}", describe(&shown));

    // --skip-noisy leaves it out of a rack, and says so.
    let out = work.path().join("rack");
    let skipped = run(rig
        .command(bin("npugate"))
        .args([
            "run",
            "--runtime",
            RUNTIME,
            "--device",
            "all",
            "--runs",
            "5",
            "--rule",
            "disable=[\"cv_pct\"]",
            "--skip-noisy",
            "--history",
        ])
        .arg(&history)
        .arg("--model")
        .arg(model("smallcnn.onnx"))
        .arg("--out")
        .arg(&out));
    assert_eq!(skipped.status.code(), Some(0), "{}", describe(&skipped));
    assert!(
        String::from_utf8_lossy(&skipped.stderr).contains(&format!("skipping {}: noise floor", serials[2])),
        "{}",
        describe(&skipped)
    );
    let ran: Vec<String> = json(&out.join("rack.json"))["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["serial"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ran, serials[..2]);
}
