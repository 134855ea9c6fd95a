//! One run on one device: probe, cool down, deploy, start the harness with the NPU's environment,
//! pull the result directory back and record how it went (`device_run.json`, `device_state.json`).
//! Judging the pulled result is the caller's (host-side) business.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::adb::quote::{assignment, command_line, quote};
use crate::adb::{Adb, AdbError};
use crate::deploy::{self, DeployFile, DeployReport};
use crate::device_state::{self, Cooldown, DeviceStateRecord, DEVICE_STATE_FILE};
use crate::devices::{self, DeviceInfo};
use crate::invocation::TargetPaths;
use crate::runtime::RuntimeManifest;

/// Schema of `device_run.json`.
pub const DEVICE_RUN_SCHEMA: &str = "npugate.device-run/1";
/// File name of the transport record next to the pulled result.
pub const DEVICE_RUN_FILE: &str = "device_run.json";
/// Default work dir on the device.
pub const DEFAULT_WORK_DIR: &str = "/data/local/tmp/npugate";
/// The DSP library dirs QNN's Skel search needs after the work dir (`;`-separated, QAIRT docs).
const DSP_LIBRARY_DIRS: &str = "/vendor/lib/rfsa/adsp;/vendor/dsp/cdsp;/system/lib/rfsa/adsp;/dsp";
/// Harness output files kept next to the pulled result.
const STDOUT_FILE: &str = "harness.stdout";
const STDERR_FILE: &str = "harness.stderr";

/// Builds the harness arguments (after the executable) from the device-side paths.
pub type HarnessArgs<'a> = dyn Fn(&TargetPaths) -> Vec<String> + Sync + 'a;

/// Everything that is the same for every device of a rack run.
pub struct RunPlan<'a> {
    /// The runtime to deploy.
    pub runtime: &'a RuntimeManifest,
    /// The model on the host.
    pub model: &'a Path,
    /// `--input` data files on the host, in the order the harness arguments name them.
    pub inputs: &'a [PathBuf],
    /// Explicit harness binary (`--harness`); else looked up by the device's target triple.
    pub harness: Option<&'a Path>,
    /// Work dir on the device.
    pub work_dir: &'a str,
    /// Harness arguments.
    pub harness_args: &'a HarnessArgs<'a>,
    /// `--cooldown-until` target (°C) and its bound.
    pub cooldown: Option<(f64, Duration)>,
    /// Limit for the harness run itself.
    pub run_timeout: Duration,
}

/// Progress callbacks of one device run (the rack turns them into a progress line).
pub trait Progress {
    /// A new step started (`deploy`, `run`, …).
    fn step(&self, what: &str);
    /// `total` bytes are about to be pushed.
    fn push_total(&self, total: u64);
    /// `bytes` more were pushed.
    fn pushed(&self, bytes: u64);
}

/// How the harness process ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HarnessExit {
    /// The exact command line given to `adb shell`.
    pub command: String,
    /// Its exit code.
    pub exit_code: i32,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Its stdout, saved next to the result.
    pub stdout_file: String,
    /// Its stderr, saved next to the result.
    pub stderr_file: String,
}

/// `device_run.json`: how one run reached the device and came back.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceRunRecord {
    /// Always [`DEVICE_RUN_SCHEMA`].
    pub schema: String,
    /// The device as probed before the run.
    pub device: DeviceInfo,
    /// Runtime name.
    pub runtime: String,
    /// Model file name.
    pub model: String,
    /// What the deploy pushed and skipped.
    pub deploy: DeployReport,
    /// The harness process.
    pub harness: HarnessExit,
    /// Wall time of pulling the result directory, seconds.
    pub pull_seconds: f64,
    /// Non-fatal observations, each a sentence.
    pub warnings: Vec<String>,
}

/// Runs the plan on `serial`, leaving the pulled result plus `device_run.json` and
/// `device_state.json` in `result_dir` (replaced if it exists).
pub fn run_on_device(
    adb: &Adb,
    serial: &str,
    plan: &RunPlan,
    result_dir: &Path,
    progress: &dyn Progress,
) -> anyhow::Result<DeviceRunRecord> {
    progress.step("probe");
    let device = devices::probe(adb, serial)?;
    let mut warnings = Vec::new();
    let files = files_for(plan, &device, &mut warnings)?;

    let cooldown = match plan.cooldown {
        Some((target_c, limit)) => {
            progress.step(&format!("cooldown to {target_c}°C"));
            let on_wait = |t: f64| progress.step(&format!("cooldown: {t:.1}°C > {target_c}°C"));
            Some(device_state::cool_down(adb, serial, target_c, limit, Duration::from_secs(5), on_wait)?)
        }
        None => None,
    };
    if let Some(Cooldown { outcome, waited_s, .. }) = &cooldown {
        if outcome == "timed_out" {
            warnings.push(format!("cooldown gave up after {waited_s:.0} s; the run started warm"));
        }
    }

    progress.step("deploy");
    let deploy =
        deploy::deploy(adb, serial, plan.work_dir, &files, |t| progress.push_total(t), |b| progress.pushed(b))?;

    let before = device_state::read(adb, serial)?;
    progress.step("run");
    let layout = Layout::new(plan, &format!("run-{}-{}", std::process::id(), unique_suffix()));
    let command = harness_command(plan, &layout);
    let started = Instant::now();
    let out = adb.shell(serial, &command, plan.run_timeout, "run the harness").inspect_err(|error| {
        if matches!(error, AdbError::Timeout { .. }) {
            // Killing the local adb does not stop the harness on the device; its command line
            // holds the run's unique output dir.
            let stop = format!("pkill -f {}", quote(&layout.paths.out));
            let _ = adb.shell(serial, &stop, Duration::from_secs(10), "stop the harness");
        }
    })?;
    let seconds = started.elapsed().as_secs_f64();
    let after = device_state::read(adb, serial).ok();

    progress.step("pull");
    let pulled = Instant::now();
    pull_result(adb, serial, &layout.paths.out, result_dir).with_context(|| {
        format!("harness exited {}: {}", out.exit_code, out.stderr.lines().last().unwrap_or("(no stderr)"))
    })?;
    let pull_seconds = pulled.elapsed().as_secs_f64();
    let _ = adb.shell(serial, &format!("rm -rf {}", quote(&layout.paths.out)), Duration::from_secs(60), "clean up");

    std::fs::write(result_dir.join(STDOUT_FILE), &out.stdout)?;
    std::fs::write(result_dir.join(STDERR_FILE), &out.stderr)?;
    let state = DeviceStateRecord::new(serial, cooldown, before, after);
    write_json(&result_dir.join(DEVICE_STATE_FILE), &state)?;
    warnings.extend(state.drift.iter().map(|drift| format!("unsteady device: {drift}")));
    let record = DeviceRunRecord {
        schema: DEVICE_RUN_SCHEMA.into(),
        device,
        runtime: plan.runtime.name.clone(),
        model: file_name(plan.model),
        deploy,
        harness: HarnessExit {
            command,
            exit_code: out.exit_code,
            seconds,
            stdout_file: STDOUT_FILE.into(),
            stderr_file: STDERR_FILE.into(),
        },
        pull_seconds,
        warnings,
    };
    write_json(&result_dir.join(DEVICE_RUN_FILE), &record)?;
    Ok(record)
}

/// The files this device needs: its harness, the model and the runtime's libraries, keeping
/// only the Stub/Skel of the device's Hexagon arch.
fn files_for(plan: &RunPlan, device: &DeviceInfo, warnings: &mut Vec<String>) -> anyhow::Result<Vec<DeployFile>> {
    let serial = &device.serial;
    let target = device.target.as_deref().ok_or_else(|| {
        anyhow::anyhow!(
            "device {serial}: unknown ABI {:?}; no harness target for it",
            device.abi.as_deref().unwrap_or("?")
        )
    })?;
    anyhow::ensure!(
        plan.runtime.target == target,
        "device {serial} runs {target}, but runtime {} is built for {}",
        plan.runtime.name,
        plan.runtime.target
    );
    let harness = match plan.harness {
        Some(path) => path.to_path_buf(),
        None => harness_for(target)?,
    };
    let mut files = vec![
        DeployFile::hashed(&harness, HARNESS.into(), true)?,
        DeployFile::hashed(plan.model, model_path(plan.model), false)?,
    ];
    for (index, input) in plan.inputs.iter().enumerate() {
        files.push(DeployFile::hashed(input, input_path(index, input), false)?);
    }
    let mut skipped_archs = std::collections::BTreeSet::new();
    for lib in &plan.runtime.files {
        if let Some(arch) = &lib.hexagon_arch {
            if device.hexagon_arch.as_ref() != Some(arch) {
                skipped_archs.insert(arch.clone());
                continue;
            }
        }
        files.push(DeployFile {
            local: plan.runtime.dir.join(&lib.name),
            remote: format!("runtimes/{}/{}", plan.runtime.name, lib.name),
            sha256: lib.sha256.clone(),
            bytes: lib.bytes,
            executable: false,
        });
    }
    if device.hexagon_arch.is_none() && !skipped_archs.is_empty() {
        warnings.push(format!(
            "device {serial}: SoC not identified, so no Hexagon Stub/Skel was pushed (runtime has {})",
            skipped_archs.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(files)
}

/// Where the harness, the model and the inputs appear below the work dir.
const HARNESS: &str = "bin/npugate-harness";

fn model_path(model: &Path) -> String {
    format!("models/{}", file_name(model))
}

fn input_path(index: usize, input: &Path) -> String {
    format!("inputs/{index}/{}", file_name(input))
}

/// The device-side paths of one run.
struct Layout {
    harness: String,
    runtime_dir: String,
    paths: TargetPaths,
}

impl Layout {
    fn new(plan: &RunPlan, run_id: &str) -> Layout {
        let work = plan.work_dir;
        let runtime_dir = format!("{work}/runtimes/{}", plan.runtime.name);
        let ep_library = plan.runtime.ep.as_ref().and_then(|ep| ep.library.as_ref());
        let paths = TargetPaths {
            ort_lib: format!("{runtime_dir}/{}", plan.runtime.ort_library),
            ep_library: ep_library.map(|lib| format!("{runtime_dir}/{lib}")),
            model: format!("{work}/{}", model_path(plan.model)),
            out: format!("{work}/results/{run_id}"),
            input_files: plan.inputs.iter().enumerate().map(|(i, p)| format!("{work}/{}", input_path(i, p))).collect(),
        };
        Layout { harness: format!("{work}/{HARNESS}"), runtime_dir, paths }
    }
}

/// The `adb shell` command line: make the output dir, set `LD_LIBRARY_PATH` and the
/// `;`-separated `ADSP_LIBRARY_PATH`, start the harness. Every word is quoted.
fn harness_command(plan: &RunPlan, layout: &Layout) -> String {
    let adsp = format!("{};{DSP_LIBRARY_DIRS}", layout.runtime_dir);
    let mut words = vec![layout.harness.clone()];
    words.extend((plan.harness_args)(&layout.paths));
    format!(
        "mkdir -p {out} && cd {out} && {ld} {adsp} {cmd}",
        out = quote(&layout.paths.out),
        ld = assignment("LD_LIBRARY_PATH", &layout.runtime_dir),
        adsp = assignment("ADSP_LIBRARY_PATH", &adsp),
        cmd = command_line(&words),
    )
}

/// Pulls the device's result dir into `result_dir` (via a sibling temp dir, then a rename).
fn pull_result(adb: &Adb, serial: &str, remote_dir: &str, result_dir: &Path) -> anyhow::Result<()> {
    let parent = result_dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let staging = tempfile::Builder::new().prefix(".pull-").tempdir_in(parent)?;
    adb.pull(serial, remote_dir, staging.path(), Duration::from_secs(600))?;
    let leaf = remote_dir.rsplit('/').next().unwrap_or(remote_dir);
    let pulled: PathBuf = staging.path().join(leaf);
    anyhow::ensure!(pulled.is_dir(), "device {serial}: pull of {remote_dir} brought no directory back");
    if result_dir.exists() {
        std::fs::remove_dir_all(result_dir)?;
    }
    std::fs::rename(&pulled, result_dir)?;
    Ok(())
}

/// The harness for a target triple: next to this `npugate` for the host's own target, else in
/// the cargo layout `<target dir>/<triple>/release/`.
pub fn harness_for(target: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let host = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let candidates = [
        (target == host).then(|| dir.join("npugate-harness")),
        dir.parent().map(|p| p.join(target).join("release").join("npugate-harness")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| p.is_file())
        .ok_or_else(|| anyhow::anyhow!("no npugate-harness built for {target} (build it, or pass --harness PATH)"))
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{nanos:x}")
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_vec_pretty(value)?)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::manifest::{EpLibrary, RuntimeFile};

    fn runtime(dir: &Path) -> RuntimeManifest {
        let file = |name: &str, role: &str, arch: Option<&str>| RuntimeFile {
            name: name.into(),
            sha256: format!("{:0>64}", name.len()),
            bytes: 1,
            role: role.into(),
            hexagon_arch: arch.map(str::to_string),
        };
        RuntimeManifest {
            schema: "npugate.runtime/1".into(),
            name: "qnn-test".into(),
            target: "aarch64-linux-android".into(),
            ort_version: "1.31.1".into(),
            ort_library: "libonnxruntime.so".into(),
            ep: Some(EpLibrary {
                name: "QNNExecutionProvider".into(),
                attach: "plugin".into(),
                library: Some("libqnn_ep.so".into()),
            }),
            sources: vec![],
            files: vec![
                file("libonnxruntime.so", "ort", None),
                file("libQnnHtp.so", "qnn_backend", None),
                file("libQnnHtpV73Stub.so", "qnn_stub", Some("v73")),
                file("libQnnHtpV75Stub.so", "qnn_stub", Some("v75")),
                file("libQnnHtpV73Skel.so", "qnn_skel", Some("v73")),
                file("libQnnHtpV75Skel.so", "qnn_skel", Some("v75")),
            ],
            dir: dir.to_path_buf(),
        }
    }

    fn plan<'a>(runtime: &'a RuntimeManifest, model: &'a Path, harness: &'a Path, work: &'a str) -> RunPlan<'a> {
        static MODEL_ONLY: fn(&TargetPaths) -> Vec<String> = |paths| vec!["--model".into(), paths.model.clone()];
        RunPlan {
            runtime,
            model,
            inputs: &[],
            harness: Some(harness),
            work_dir: work,
            harness_args: &MODEL_ONLY,
            cooldown: None,
            run_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn only_the_devices_hexagon_arch_stub_and_skel_are_deployed() {
        let dir = tempfile::tempdir().unwrap();
        let (model, harness) = (dir.path().join("m.onnx"), dir.path().join("h"));
        std::fs::write(&model, "model").unwrap();
        std::fs::write(&harness, "harness").unwrap();
        let runtime = runtime(dir.path());
        let plan = plan(&runtime, &model, &harness, "/data/local/tmp/npugate");
        let device = DeviceInfo {
            serial: "R5CX".into(),
            target: Some("aarch64-linux-android".into()),
            hexagon_arch: Some("v75".into()),
            ..Default::default()
        };
        let mut warnings = Vec::new();
        let files = files_for(&plan, &device, &mut warnings).unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.remote.as_str()).collect();
        assert!(
            names.contains(&"runtimes/qnn-test/libQnnHtpV75Skel.so")
                && names.contains(&"runtimes/qnn-test/libQnnHtpV75Stub.so")
        );
        assert!(!names.iter().any(|n| n.contains("V73")), "{names:?}");
        assert_eq!(names.len(), 6, "{names:?}");
        assert!(warnings.is_empty());

        let unknown = DeviceInfo { hexagon_arch: None, ..device.clone() };
        let files = files_for(&plan, &unknown, &mut warnings).unwrap();
        assert!(!files.iter().any(|f| f.remote.contains("Skel")));
        assert!(warnings[0].contains("v73, v75"), "{warnings:?}");

        let linux = DeviceInfo { target: Some("x86_64-unknown-linux-gnu".into()), ..device };
        let err = files_for(&plan, &linux, &mut warnings).unwrap_err().to_string();
        assert!(err.contains("R5CX") && err.contains("qnn-test"), "{err}");
    }

    #[test]
    fn the_harness_gets_the_npu_environment_and_hostile_names_stay_one_argument() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join("bin")).unwrap();
        let fake = work.join("bin/npugate-harness");
        std::fs::write(
            &fake,
            "#!/bin/sh\nprintf '%s\\n' \"$LD_LIBRARY_PATH\" \"$ADSP_LIBRARY_PATH\" \"$#\" \"$@\" > seen\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let model = dir.path().join("a b;rm -rf $(x).onnx");
        let runtime = runtime(dir.path());
        let work = work.to_str().unwrap();
        let plan = plan(&runtime, &model, &fake, work);
        let layout = Layout::new(&plan, "run-1");
        let status =
            std::process::Command::new("/bin/sh").arg("-c").arg(harness_command(&plan, &layout)).status().unwrap();
        assert!(status.success());
        let seen = std::fs::read_to_string(Path::new(&layout.paths.out).join("seen")).unwrap();
        let lines: Vec<&str> = seen.lines().collect();
        let runtime_dir = format!("{work}/runtimes/qnn-test");
        assert_eq!(lines[0], runtime_dir);
        assert_eq!(
            lines[1],
            format!("{runtime_dir};/vendor/lib/rfsa/adsp;/vendor/dsp/cdsp;/system/lib/rfsa/adsp;/dsp")
        );
        assert_eq!(lines[2..], ["2", "--model", &format!("{work}/models/a b;rm -rf $(x).onnx")]);
    }
}
