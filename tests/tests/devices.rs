//! Devices over adb, end to end: the real `adb` client against real AOSP adbds (scripts/adb-rig),
//! the real harness and ONNX Runtime on the simulated devices, results pulled and judged on the host.

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use npugate_e2e::devices::{Device, Rig};
use npugate_e2e::{bin, describe, model, run};
use serde_json::Value;

const RUNTIME: &str = "ort-1.31.1-linux-x86_64";

fn npugate(rig: &Rig, args: &[&str]) -> Output {
    run(rig.command(bin("npugate")).args(args))
}

/// Arguments of `npugate run` with the x86_64 runtime; `extra` picks devices and options. Timing
/// noise of a shared CI machine is not under test here, so the CV rule is relaxed.
fn run_args(model: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["run", "--runtime", RUNTIME, "--rule", "cv_pct=100000"].map(String::from).to_vec();
    args.extend(["--model".into(), model.display().to_string(), "--out".into(), out.display().to_string()]);
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// `npugate run` inside the rig (see [`run_args`]).
fn run_on_devices(rig: &Rig, model: &Path, out: &Path, extra: &[&str]) -> Output {
    run(rig.command(bin("npugate")).args(run_args(model, out, extra)))
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn result_dir(out: &Path, port: u16) -> PathBuf {
    out.join(format!("127.0.0.1_{port}"))
}

fn assert_complete_result(dir: &Path) {
    let result = npugate_result::RunResult::read(dir).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(result.status, npugate_result::RunStatus::Complete, "{}", dir.display());
    assert_eq!(json(&dir.join("device_state.json"))["schema"], "npugate.device-state/1");
    assert_eq!(json(&dir.join("device_run.json"))["schema"], "npugate.device-run/1");
}

#[test]
fn devices_lists_rig_devices_as_linux_boards_and_honours_the_adb_server() {
    let rig = Rig::up(&[6101, 6102, 6103]);
    // Move 6103 to a second adb server (port 5038), the way a device farm shares phones.
    let adb = |args: &[&str]| run(rig.command("adb").args(args));
    assert!(adb(&["disconnect", &Rig::serial(6103)]).status.success());
    let moved = adb(&["-P", "5038", "connect", &Rig::serial(6103)]);
    assert!(String::from_utf8_lossy(&moved.stdout).contains("connected"), "{}", describe(&moved));

    let listed = npugate(&rig, &["devices", "--json"]);
    assert!(listed.status.success(), "{}", describe(&listed));
    let list: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(list["schema"], "npugate.devices/1");
    let serials: Vec<&str> =
        list["devices"].as_array().unwrap().iter().map(|d| d["serial"].as_str().unwrap()).collect();
    assert_eq!(serials, [Rig::serial(6101), Rig::serial(6102)]);
    for device in list["devices"].as_array().unwrap() {
        assert_eq!((device["state"].as_str(), device["os"].as_str()), (Some("device"), Some("linux")));
        assert_eq!(device["abi"].as_str(), Some(std::env::consts::ARCH));
        assert_eq!(device["target"].as_str(), Some("x86_64-unknown-linux-gnu"));
        assert!(device["release"].as_str().is_some_and(|r| !r.is_empty()), "{device}");
    }

    let remote = npugate(&rig, &["devices", "--json", "--adb-server", "127.0.0.1:5038"]);
    let remote: Value = serde_json::from_slice(&remote.stdout).unwrap();
    assert_eq!(remote["devices"][0]["serial"], Rig::serial(6103));
    assert_eq!(remote["devices"].as_array().unwrap().len(), 1);
    let by_env = run(rig.command(bin("npugate")).arg("devices").env("ADB_SERVER_SOCKET", "tcp:127.0.0.1:5038"));
    assert!(String::from_utf8_lossy(&by_env.stdout).contains("127.0.0.1:6103"), "{}", describe(&by_env));

    let table = npugate(&rig, &["devices"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.starts_with("SERIAL") && text.contains("127.0.0.1:6102  device"), "{text}");

    let unknown = npugate(&rig, &["devices", "--device", "no-such-serial"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", describe(&unknown));
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("device no-such-serial not found"),
        "{}",
        describe(&unknown)
    );
}

#[test]
fn full_run_pushes_runs_pulls_and_judges_and_a_second_run_pushes_nothing() {
    let rig = Rig::up(&[6101]);
    let out = tempfile::tempdir().unwrap();
    let serial = Rig::serial(6101);
    // The device comes from ANDROID_SERIAL; its hottest readable sensor is at 36.5°C, below the cooldown's 40°C.
    let first = run(rig
        .command(bin("npugate"))
        .args(run_args(&model("smallcnn.onnx"), &out.path().join("first"), &["--cooldown-until", "40C"]))
        .env("ANDROID_SERIAL", &serial));
    assert_eq!(first.status.code(), Some(0), "{}", describe(&first));
    let dir = result_dir(&out.path().join("first"), 6101);
    assert_complete_result(&dir);
    let state = json(&dir.join("device_state.json"));
    assert_eq!(state["cooldown"]["outcome"], "reached", "{state}");
    // Two of the three zones are readable by the shell (the PMIC's is not, as on phones); every
    // CPU has its cpufreq files.
    let zones: Vec<&str> =
        state["before"]["thermal_zones"].as_array().unwrap().iter().map(|z| z["kind"].as_str().unwrap()).collect();
    assert_eq!(zones, ["cpu-0-0-usr", "gpuss-0-usr"], "{state}");
    assert!(
        state["before"]["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["governor"] == "schedutil" && c["max_khz"] == 3302400),
        "{state}"
    );
    let record = json(&dir.join("device_run.json"));
    assert_eq!(record["deploy"]["files_pushed"], 3, "{record}");
    assert!(record["deploy"]["bytes_pushed"].as_u64().unwrap() > 1_000_000, "{record}");
    assert_eq!(record["harness"]["exit_code"], 0);
    let command = record["harness"]["command"].as_str().unwrap();
    assert!(
        command
            .contains(&format!("ADSP_LIBRARY_PATH='/data/local/tmp/npugate/runtimes/{RUNTIME};/vendor/lib/rfsa/adsp;")),
        "{command}"
    );
    let on_device = rig.device_data(6101).join("local/tmp/npugate");
    let digest = npugate_result::RunResult::read(&dir).unwrap().model.digest;
    assert!(
        on_device.join(format!("models/{digest}/smallcnn.onnx")).exists(),
        "model not deployed under the default work dir"
    );
    assert!(std::fs::read_dir(on_device.join("results")).unwrap().next().is_none(), "device result dir not cleaned up");

    assert!(String::from_utf8_lossy(&first.stdout).contains("npu_flops_pct"), "no gate verdict: {}", describe(&first));

    // Same files again: nothing crosses the cable. This time a rule fails: exit 1, never retried.
    let strict = ["--device", serial.as_str(), "--rule", "median_ms=0.000001", "--retries", "2"];
    let second = run_on_devices(&rig, &model("smallcnn.onnx"), &out.path().join("second"), &strict);
    assert_eq!(second.status.code(), Some(1), "{}", describe(&second));
    let record = json(&result_dir(&out.path().join("second"), 6101).join("device_run.json"));
    assert_eq!(
        (record["deploy"]["bytes_pushed"].as_u64(), record["deploy"]["files_skipped"].as_u64()),
        (Some(0), Some(3)),
        "{record}"
    );
    let summary = json(&out.path().join("second/rack.json"));
    assert_eq!(
        (summary["devices"][0]["attempts"].as_u64(), summary["exit_code"].as_u64()),
        (Some(1), Some(1)),
        "{summary}"
    );

    // A blob damaged on the device (an interrupted push) fails its sha256 check and is pushed again.
    let (sha256, _) = npugate_result::digest::sha256_file(&model("smallcnn.onnx")).unwrap();
    std::fs::write(on_device.join("blobs").join(&sha256), b"truncated").unwrap();
    let third = run_on_devices(&rig, &model("smallcnn.onnx"), &out.path().join("third"), &["--device", &serial]);
    assert_eq!(third.status.code(), Some(0), "{}", describe(&third));
    let record = json(&result_dir(&out.path().join("third"), 6101).join("device_run.json"));
    let files = record["deploy"]["files"].as_array().unwrap();
    let pushed: Vec<&str> =
        files.iter().filter(|f| f["pushed"] == true).map(|f| f["remote"].as_str().unwrap()).collect();
    assert_eq!(pushed, [format!("models/{sha256}/smallcnn.onnx")], "{record}");
}

#[test]
fn a_rack_of_three_finishes_with_three_results() {
    let rig = Rig::up(&[6101, 6102, 6103]);
    let out = tempfile::tempdir().unwrap();
    let rack = run_on_devices(&rig, &model("smallcnn.onnx"), out.path(), &["--device", "all", "--json"]);
    assert_eq!(rack.status.code(), Some(0), "{}", describe(&rack));
    for port in [6101, 6102, 6103] {
        assert_complete_result(&result_dir(out.path(), port));
    }
    let summary = json(&out.path().join("rack.json"));
    assert_eq!((summary["schema"].as_str(), summary["exit_code"].as_u64()), (Some("npugate.rack/1"), Some(0)));
    assert_eq!(summary["devices"].as_array().unwrap().len(), 3);
    // `--json` on a rack: one versioned document on stdout, rack.json itself.
    let printed: Value = serde_json::from_slice(&rack.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&rack)));
    assert_eq!(printed, summary);
}

#[test]
fn a_device_dying_mid_run_is_an_infrastructure_failure_and_the_others_complete() {
    let rig = Rig::up(&[6101, 6102, 6103]);
    let out = tempfile::tempdir().unwrap();
    let victim = 6102;
    let rack = std::thread::scope(|scope| {
        let killer = scope.spawn(|| {
            let seen = rig.wait_for_process(victim, "npugate-harness", Duration::from_secs(60));
            if seen {
                rig.kill(victim);
            }
            seen
        });
        // Enough timed runs that the harness is still running when its adbd is killed.
        let rack = run_on_devices(
            &rig,
            &model("smallcnn.onnx"),
            out.path(),
            &["--device", "all", "--runs", "4000", "--retries", "1"],
        );
        assert!(killer.join().unwrap(), "the harness never started on device {victim}");
        rack
    });
    assert_eq!(rack.status.code(), Some(2), "{}", describe(&rack));
    let summary = json(&out.path().join("rack.json"));
    let devices = summary["devices"].as_array().unwrap();
    let dead = devices.iter().find(|d| d["serial"] == Rig::serial(victim)).unwrap();
    assert_eq!(dead["exit_code"], 2, "{dead}");
    assert!(dead["infrastructure_error"].as_str().unwrap().contains("127.0.0.1:6102"), "{dead}");
    assert_eq!(dead["attempts"], 2, "a transport failure is retried once with --retries 1: {dead}");
    assert!(dead["retried_errors"][0].as_str().unwrap().contains("not reachable"), "{dead}");
    for port in [6101, 6103] {
        assert_complete_result(&result_dir(out.path(), port));
    }
    let stdout = String::from_utf8_lossy(&rack.stdout);
    assert!(stdout.contains("127.0.0.1:6102\tinfrastructure failure"), "{stdout}");
}

#[test]
fn hostile_model_names_run_as_plain_file_names() {
    let rig = Rig::up(&[6101]);
    let models = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    for (index, name) in
        ["a b;rm -rf $(x).onnx", "c';touch pwned;$(touch pwned2)`touch pwned3`\".onnx"].iter().enumerate()
    {
        let hostile = models.path().join(name);
        std::fs::copy(model("smallcnn.onnx"), &hostile).unwrap();
        let dest = out.path().join(index.to_string());
        let outcome = run_on_devices(&rig, &hostile, &dest, &["--device", &Rig::serial(6101)]);
        assert_eq!(outcome.status.code(), Some(0), "{name}: {}", describe(&outcome));
        let result = npugate_result::RunResult::read(&result_dir(&dest, 6101)).unwrap();
        assert!(
            result.model.path.ends_with(&format!("/models/{}/{name}", result.model.digest)),
            "{}",
            result.model.path
        );
        assert!(rig.device_data(6101).join("local/tmp/npugate/models").join(&result.model.digest).join(name).exists());
    }
    let mut created = Vec::new();
    for root in [rig.device_data(6101), out.path().to_path_buf()] {
        find_named(&root, &["pwned", "pwned2", "pwned3", "x"], &mut created);
    }
    assert!(created.is_empty(), "an injected command ran: {created:?}");
}

fn find_named(dir: &Path, names: &[&str], found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if names.iter().any(|n| entry.file_name() == *n) {
            found.push(path.clone());
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            find_named(&path, names, found);
        }
    }
}

/// Timed runs of smallcnn that keep the harness busy for a few seconds on the rig.
const LONG_RUN: &str = "4000";

/// Starts `npugate run` of smallcnn with `runs` timed runs on one rig device in the background,
/// output captured.
fn start_run(rig: &Rig, port: u16, out: &Path, runs: &str) -> Child {
    let mut args = vec!["--device".to_string(), Rig::serial(port), "--profile-runs".into(), "1".into()];
    args.extend(["--runs".to_string(), runs.to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    rig.command(bin("npugate"))
        .args(run_args(&model("smallcnn.onnx"), out, &args))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start npugate run")
}

/// This machine's host name, as a lock record names it.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string()
}

#[test]
fn two_runs_on_one_device_take_turns_and_one_that_may_not_wait_names_the_holder() {
    let rig = Rig::up(&[6111]);
    let out = tempfile::tempdir().unwrap();
    // Warm the device (deploy) so both runs below spend their time measuring.
    let warm = run_on_devices(
        &rig,
        &model("smallcnn.onnx"),
        &out.path().join("warm"),
        &["--device", &Rig::serial(6111), "--runs", "20"],
    );
    assert_eq!(warm.status.code(), Some(0), "{}", describe(&warm));

    let stop = AtomicBool::new(false);
    let (first, second, refused, (most, busy)) = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| rig.most_harnesses_at_once(6111, &stop));
        let first = start_run(&rig, 6111, &out.path().join("first"), LONG_RUN);
        std::thread::sleep(Duration::from_secs(1));
        let second = start_run(&rig, 6111, &out.path().join("second"), LONG_RUN);
        assert!(rig.wait_for_process(6111, "npugate-harness", Duration::from_secs(60)), "no harness started");
        let refused = run_on_devices(
            &rig,
            &model("smallcnn.onnx"),
            &out.path().join("refused"),
            &["--device", &Rig::serial(6111), "--lock-timeout", "0"],
        );
        let (first_pid, first) = (first.id(), first.wait_with_output().unwrap());
        let second = second.wait_with_output().unwrap();
        stop.store(true, Ordering::SeqCst);
        ((first_pid, first), second, refused, watcher.join().unwrap())
    });
    let (first_pid, first) = first;
    assert_eq!(first.status.code(), Some(0), "{}", describe(&first));
    assert_eq!(second.status.code(), Some(0), "{}", describe(&second));
    assert!(busy > 100, "the watcher saw harnesses in only {busy} samples");
    assert_eq!(most, 1, "two harnesses ran on the device at once");

    let holder = format!("host {} pid {first_pid}", host_name());
    let waited = String::from_utf8_lossy(&second.stderr);
    assert!(waited.contains(&format!("device {} is locked by {holder}", Rig::serial(6111))), "{waited}");
    assert!(waited.contains("lock taken after waiting"), "{waited}");
    let record = json(&result_dir(&out.path().join("second"), 6111).join("device_run.json"));
    let waited_s = record["lock"]["waited_s"].as_f64().unwrap();
    assert!(waited_s > 1.0, "{record}");
    assert_eq!(record["lock"]["waited_for"]["pid"].as_u64(), Some(u64::from(first_pid)), "{record}");
    eprintln!("the second run waited {waited_s:.1} s for the first");

    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    let said = format!("{}{}", String::from_utf8_lossy(&refused.stdout), String::from_utf8_lossy(&refused.stderr));
    assert!(said.contains(&format!("is locked by {holder}")) && said.contains("--lock-timeout 0"), "{said}");
    assert!(!rig.lock_dir(6111).exists(), "the lock is released after both runs");
}

#[test]
fn an_interrupted_run_stops_its_harness_on_the_device_and_releases_the_lock() {
    let rig = Rig::up(&[6112]);
    let out = tempfile::tempdir().unwrap();
    let mut child = start_run(&rig, 6112, out.path(), "400000");
    assert!(rig.wait_for_process(6112, "npugate-harness", Duration::from_secs(60)), "the harness never started");
    let interrupt = run(std::process::Command::new("kill").args(["-INT", &child.id().to_string()]));
    assert!(interrupt.status.success(), "{}", describe(&interrupt));
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < Duration::from_secs(30), "npugate did not stop after SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("interrupted"), "{}", describe(&output));
    assert!(rig.harnesses(6112).is_empty(), "a harness still runs on the device: {:?}", rig.harnesses(6112));
    assert!(!rig.lock_dir(6112).exists(), "the lock was not released");
    eprintln!("npugate ended {:.2} s after SIGINT", started.elapsed().as_secs_f64());
}

#[test]
fn bad_locks_and_unwritable_work_dirs_are_named_with_the_fix() {
    let rig = Rig::up(&[6113]);
    let out = tempfile::tempdir().unwrap();
    let serial = Rig::serial(6113);
    let lock = rig.lock_dir(6113);
    let holder = "local/tmp/npugate/lock/holder";
    rig.plant(6113, holder, "\u{0}\u{1}not a lock record".as_bytes());
    let corrupt = run_on_devices(&rig, &model("smallcnn.onnx"), &out.path().join("corrupt"), &["--device", &serial]);
    assert_eq!(corrupt.status.code(), Some(2), "{}", describe(&corrupt));
    let said = String::from_utf8_lossy(&corrupt.stdout);
    let clear = format!("npugate devices --unlock {serial} --work-dir /data/local/tmp/npugate");
    assert!(said.contains("/data/local/tmp/npugate/lock/holder is corrupt") && said.contains(&clear), "{said}");

    // A holder on another host with a fresh heartbeat is alive: --unlock refuses without --force.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let record = "schema=npugate.device-lock/1\nrun=run-1-a\nhost=lab-7\nhost_id=elsewhere\npid=4242\ncommand=npugate sweep\nstarted_at=2026-11-23T02:00:00Z\n";
    rig.plant(6113, holder, record.as_bytes());
    rig.plant(6113, "local/tmp/npugate/lock/heartbeat", format!("{now}\n").as_bytes());
    let refused = npugate(&rig, &["devices", "--unlock", &serial]);
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("host lab-7 pid 4242"), "{}", describe(&refused));
    let forced = npugate(&rig, &["devices", "--unlock", &serial, "--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", describe(&forced));
    assert!(
        String::from_utf8_lossy(&forced.stdout).contains("cleared the lock of host lab-7 pid 4242"),
        "{}",
        describe(&forced)
    );
    assert!(!lock.exists());
    let free = npugate(&rig, &["devices", "--unlock", &serial]);
    assert!(String::from_utf8_lossy(&free.stdout).contains("not locked"), "{}", describe(&free));

    let unwritable = run_on_devices(
        &rig,
        &model("smallcnn.onnx"),
        &out.path().join("ro"),
        &["--device", &serial, "--work-dir", "/proc/npugate"],
    );
    assert_eq!(unwritable.status.code(), Some(2), "{}", describe(&unwritable));
    let said = String::from_utf8_lossy(&unwritable.stdout);
    assert!(said.contains("cannot take the lock in work dir /proc/npugate"), "{said}");

    // /data is root's (0771): the shell cannot make a work dir there, and the error says why —
    // mkdir's own words, not the lock's "No such file or directory".
    let denied = run_on_devices(
        &rig,
        &model("smallcnn.onnx"),
        &out.path().join("data"),
        &["--device", &serial, "--work-dir", "/data/npugate"],
    );
    assert_eq!(denied.status.code(), Some(2), "{}", describe(&denied));
    let said = String::from_utf8_lossy(&denied.stdout);
    assert!(
        said.contains("cannot take the lock in work dir /data/npugate: mkdir: '/data/npugate': Permission denied"),
        "{said}"
    );
    assert!(!said.contains("No such file or directory"), "{said}");
}

#[test]
fn a_phone_is_identified_from_its_properties_and_a_missing_applet_is_a_named_gap() {
    let props = tempfile::NamedTempFile::new().unwrap();
    let fingerprint = "google/caiman/caiman:15/AP4A.250105.002/12701944:user/release-keys";
    std::fs::write(
        props.path(),
        format!("ro.product.model=Pixel 9 Pro\nro.soc.model=SM8650\nro.board.platform=pineapple\nro.build.fingerprint={fingerprint}\n"),
    )
    .unwrap();
    let rig = Rig::up_with(&[Device::new(6114).props(props.path()), Device::new(6115)]);
    rig.remove_command(6115, "uname");
    let listed = npugate(&rig, &["devices", "--json"]);
    assert!(listed.status.success(), "{}", describe(&listed));
    let list: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let (phone, board) = (&list["devices"][0], &list["devices"][1]);
    assert_eq!((phone["os"].as_str(), phone["model"].as_str()), (Some("android"), Some("Pixel 9 Pro")), "{phone}");
    assert_eq!((phone["soc"].as_str(), phone["hexagon_arch"].as_str()), (Some("SM8650"), Some("v75")), "{phone}");
    assert_eq!(phone["fingerprint"].as_str(), Some(fingerprint));
    assert!(phone.get("missing_commands").is_none(), "{phone}");
    // The board lacks uname: its ABI is unknown, and the probe says why instead of a blank.
    assert_eq!(board["missing_commands"], serde_json::json!(["uname"]), "{board}");
    assert!(board.get("abi").is_none(), "{board}");
    let table = npugate(&rig, &["devices"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("device 127.0.0.1:6115 lacks uname (not on its shell's PATH)"), "{text}");

    // A phone without ro.product.cpu.abi names no harness target: refused before anything is pushed.
    let out = tempfile::tempdir().unwrap();
    let refused = run_on_devices(&rig, &model("smallcnn.onnx"), out.path(), &["--device", &Rig::serial(6114)]);
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stdout).contains("device 127.0.0.1:6114: its ABI is unknown"),
        "{}",
        describe(&refused)
    );
    assert!(!rig.device_data(6114).join("local/tmp/npugate").exists(), "nothing was pushed");
}

#[test]
fn a_shell_that_cannot_see_other_users_makes_the_background_check_not_applicable() {
    let rig = Rig::up_with(&[Device::new(6116).without_readproc(), Device::new(6117)]);
    // A root process spinning on the host, which the devices share: the readproc shell sees it,
    // the other one cannot.
    let spinner = Spinner::start();
    let out = tempfile::tempdir().unwrap();
    let rule = ["--rule", "max_background_cpu_pct=20"];
    let blind = run_on_devices(
        &rig,
        &model("smallcnn.onnx"),
        &out.path().join("blind"),
        &[&["--device", &Rig::serial(6116)][..], &rule].concat(),
    );
    let seeing = run_on_devices(
        &rig,
        &model("smallcnn.onnx"),
        &out.path().join("seeing"),
        &[&["--device", &Rig::serial(6117)][..], &rule].concat(),
    );
    drop(spinner);
    assert_eq!(blind.status.code(), Some(0), "a check that could not see does not fail the run: {}", describe(&blind));
    let verdict = json(&result_dir(&out.path().join("blind"), 6116).join("verdict.json"));
    let check = verdict["checks"].as_array().unwrap().iter().find(|c| c["rule"] == "max_background_cpu_pct").unwrap();
    assert_eq!(check["status"], "not_applicable", "{check}");
    let message = check["message"].as_str().unwrap();
    assert!(message.contains("sees only its own user's processes") && message.contains("readproc"), "{message}");
    let state = json(&result_dir(&out.path().join("blind"), 6116).join("device_state.json"));
    assert_eq!(state["before"]["load"]["others_hidden"], true, "{state}");

    assert!(seeing.status.code().is_some_and(|code| code < 2), "{}", describe(&seeing));
    let verdict = json(&result_dir(&out.path().join("seeing"), 6117).join("verdict.json"));
    let check = verdict["checks"].as_array().unwrap().iter().find(|c| c["rule"] == "max_background_cpu_pct").unwrap();
    assert!(check["status"] == "pass" || check["status"] == "fail", "the readproc shell judges it: {check}");
    let state = json(&result_dir(&out.path().join("seeing"), 6117).join("device_state.json"));
    assert!(state["before"]["load"].get("others_hidden").is_none(), "{state}");
}

/// A root process keeping one core busy until dropped.
struct Spinner(Child);

impl Spinner {
    fn start() -> Spinner {
        let child =
            std::process::Command::new("sh").args(["-c", "while :; do :; done"]).stdout(Stdio::null()).spawn().unwrap();
        Spinner(child)
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes the battery's `current_now` of the device on `port` until `stop`: `idle_ua` until the
/// run's gauge samples mark the idle window's end, `busy_ua` after; each ± 1000 µA every 0.2 s,
/// as a fuel gauge's readings move.
fn drive_gauge(rig: &Rig, port: u16, (idle_ua, busy_ua): (i64, i64), stop: &AtomicBool) {
    let results = rig.device_data(port).join("local/tmp/npugate/results");
    let idle_over = || {
        let runs = std::fs::read_dir(&results).into_iter().flatten().flatten();
        runs.filter_map(|run| std::fs::read_to_string(run.path().join("gauge_samples.txt")).ok())
            .any(|samples| samples.contains("idle_end"))
    };
    let mut tick = 0i64;
    while !stop.load(Ordering::Relaxed) {
        let base = if idle_over() { busy_ua } else { idle_ua };
        tick += 1;
        rig.battery(port, "current_now", &(base + 1000 * (2 * (tick % 2) - 1)).to_string());
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_known_draw_gives_the_known_energy_per_inference_and_a_charging_phone_is_refused() {
    let rig = Rig::up_with(&[Device::new(6118).battery()]);
    let out = tempfile::tempdir().unwrap();
    let extra = ["--device", "all", "--energy-window", "2", "--runs", "20", "--warmup", "1", "--profile-runs", "1"];
    let extra: Vec<&str> = extra.iter().chain(&["--rule", "max_energy_mj=1000"]).copied().collect();
    // Idle: 100 mA at 3.9 V; during inferences 350 mA: 975 mW above idle (the gauge reads µA, negative discharging).
    let stop = AtomicBool::new(false);
    let output = std::thread::scope(|scope| {
        scope.spawn(|| drive_gauge(&rig, 6118, (-100_000, -350_000), &stop));
        let output = run_on_devices(&rig, &model("smallcnn.onnx"), &out.path().join("measured"), &extra);
        stop.store(true, Ordering::Relaxed);
        output
    });
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let dir = result_dir(&out.path().join("measured"), 6118);
    let window = npugate_result::RunResult::read(&dir).unwrap().energy_window.unwrap();
    assert!(window.inferences > 0 && window.seconds() >= 2.0, "{window:?}");
    let energy = json(&dir.join("energy.json"));
    assert_eq!(energy["schema"], "npugate.energy/1");
    let measured = &energy["measured"];
    let expected_mj = 975.0 * window.seconds() / window.inferences as f64;
    let (mj, error) = (measured["energy_mj"].as_f64().unwrap(), measured["error_mj"].as_f64().unwrap());
    assert!((mj - expected_mj).abs() <= error, "{mj} ± {error} mJ, expected {expected_mj}: {energy:#}");
    // A few percent on a quiet machine; on a loaded one the gauge driver's 200 ms ticks slip, idle
    // samples land in the busy window and the stated error grows with them (14.6% seen in one CI run).
    assert!(error < 0.3 * expected_mj, "the stated error stays bounded: {energy:#}");
    assert!(measured["method"].as_str().unwrap().contains("/sys/class/power_supply/battery"), "{energy:#}");
    assert_eq!(measured["resolution"]["current_step_ua"].as_f64(), Some(2000.0), "{energy:#}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("PASS    max_energy_mj") && stdout.contains("energy per inference"), "{stdout}");

    rig.battery(6118, "status", "Charging");
    let charging = run_on_devices(&rig, &model("smallcnn.onnx"), &out.path().join("charging"), &extra);
    let dir = result_dir(&out.path().join("charging"), 6118);
    assert_complete_result(&dir);
    let why = json(&dir.join("energy.json"))["not_measured"].as_str().unwrap().to_string();
    assert!(why.starts_with("the device is charging (battery status Charging)"), "{why}");
    let stdout = String::from_utf8_lossy(&charging.stdout);
    assert!(stdout.contains("not measured: the device is charging"), "{}", describe(&charging));
    assert!(!dir.join("gauge_samples.txt").exists(), "a refused device is not sampled");
}

#[test]
fn a_rack_measured_with_no_gate_is_one_rack_document_and_unlock_reports_in_json() {
    let rig = Rig::up(&[6114, 6115]);
    let out = tempfile::tempdir().unwrap();
    let measured =
        run_on_devices(&rig, &model("smallcnn.onnx"), out.path(), &["--device", "all", "--no-gate", "--json"]);
    assert_eq!(measured.status.code(), Some(0), "{}", describe(&measured));
    let rack: Value =
        serde_json::from_slice(&measured.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&measured)));
    assert_eq!(rack["schema"], "npugate.rack/1", "stdout is one document, the rack's");
    for port in [6114, 6115] {
        let verdict = json(&result_dir(out.path(), port).join("verdict.json"));
        assert_eq!(
            (verdict["schema"].as_str(), verdict["outcome"].as_str()),
            (Some("npugate.verdict/1.2"), Some("measured"))
        );
    }
    assert!(rack["devices"].as_array().unwrap().iter().all(|d| d["exit_code"] == 0), "{rack}");

    let serial = Rig::serial(6114);
    let unlocked = npugate(&rig, &["devices", "--unlock", &serial, "--json"]);
    assert_eq!(unlocked.status.code(), Some(0), "{}", describe(&unlocked));
    let report: Value = serde_json::from_slice(&unlocked.stdout).unwrap();
    assert_eq!(
        (report["schema"].as_str(), report["serial"].as_str()),
        (Some("npugate.device-unlock/1"), Some(serial.as_str()))
    );
    assert!(report["done"].as_str().is_some_and(|done| done.contains("not locked")), "{report}");
}
