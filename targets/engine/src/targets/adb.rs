//! A phone or board over adb: probe, take the device lock (one measurement at a time per device,
//! across hosts; orphaned harnesses stopped), cool down, deploy (content-addressed), start the
//! harness with the NPU's environment, pull the result directory back, and record how it went
//! (`device_run.json`, `device_state.json`) next to it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use npugate_result::{contract, files};
use npugate_settings::HarnessCommand;
use serde::{Deserialize, Serialize};

use super::{Execution, Job, Progress, Retryable, Target};
use crate::model::{Memory, ModelFiles};
use npugate_android::adb::quote::{assignment, command_line, quote};
use npugate_android::adb::{Adb, AdbError, DeviceShell, ShellOutput};
use npugate_android::deploy::{self, DeployFile, DeployReport};
use npugate_android::device_lock::{DeviceLock, LockError, LockOptions, LockRecord, Reporter};
use npugate_android::device_state::{self, Cooldown, DeviceStateRecord};
use npugate_android::devices::{self, DeviceInfo};
use npugate_android::energy::{self, Gauge};
use npugate_result::energy::EnergyRecord;

/// Schema of `device_run.json`.
pub const DEVICE_RUN_SCHEMA: &str = "npugate.device-run/1";
/// Default work dir on the device.
pub const DEFAULT_WORK_DIR: &str = "/data/local/tmp/npugate";
/// The DSP library dirs QNN's Skel search needs after the work dir (`;`-separated, QAIRT docs).
const DSP_LIBRARY_DIRS: &str = "/vendor/lib/rfsa/adsp;/vendor/dsp/cdsp;/system/lib/rfsa/adsp;/dsp";
/// Where the harness appears below the work dir.
const HARNESS: &str = "bin/npugate-harness";

/// How one run reached the device and came back (`device_run.json`).
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
    /// How the device lock was taken: waits, broken locks, stopped orphans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<LockRecord>,
    /// What the deploy pushed and skipped.
    pub deploy: DeployReport,
    /// The harness process.
    pub harness: HarnessExit,
    /// Wall time of pulling the result directory, seconds.
    pub pull_seconds: f64,
    /// Non-fatal observations, each a sentence.
    pub warnings: Vec<String>,
}

impl contract::Document for DeviceRunRecord {
    const SCHEMA: contract::Schema = contract::Schema::new(DEVICE_RUN_SCHEMA);
}

/// How the harness process ended on the device.
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

/// How runs on devices over adb are done; the same for every device of a command.
#[derive(Debug, Clone)]
pub struct AdbSettings {
    /// Work dir on the device (blobs, runtimes, models, results and the lock live below it).
    pub work_dir: String,
    /// Wait before each run until the hottest sensor is at or below this °C, for at most this long.
    pub cooldown: Option<(f64, Duration)>,
    /// Longest wait for the device lock; `None` waits as long as it takes, zero does not wait.
    pub lock_timeout: Option<Duration>,
    /// Measure energy per inference from the battery gauge over windows of this many seconds (idle,
    /// then back-to-back inferences), see [`npugate_android::energy`].
    pub energy_window: Option<f64>,
}

/// One device over adb; it is probed at the start of every run (it may have changed or gone).
#[derive(Debug, Clone)]
pub struct AdbTarget {
    adb: Adb,
    serial: String,
    settings: AdbSettings,
}

impl AdbTarget {
    /// The device `serial` behind `adb`, run as `settings` say.
    pub fn new(adb: &Adb, serial: &str, settings: &AdbSettings) -> AdbTarget {
        let work_dir = settings.work_dir.trim_end_matches('/').to_string();
        AdbTarget { adb: adb.clone(), serial: serial.into(), settings: AdbSettings { work_dir, ..settings.clone() } }
    }
}

impl Target for AdbTarget {
    fn name(&self) -> &str {
        &self.serial
    }

    /// The device's, which the host does not see: its harness checks sizes against it.
    fn memory(&self) -> Memory {
        Memory::Remote
    }

    fn execute(&self, job: &Job<'_>, out: &Path, progress: &Progress<'_>) -> anyhow::Result<Execution> {
        let (adb, serial, work_dir) = (&self.adb, self.serial.as_str(), self.settings.work_dir.as_str());
        progress.step("probe");
        let device = devices::probe(adb, serial).map_err(adb_error)?;
        let mut warnings: Vec<String> = device.gap().into_iter().collect();
        let model_files = job.model_files()?;
        let reference_files = job.reference_model.map(|reference| &reference.files);
        let files = files_for(job, &device, (&model_files, reference_files), &mut warnings)?;
        let shell: Arc<dyn DeviceShell> = Arc::new(adb.device(serial));
        progress.step("lock");
        let cancelled = || job.cancel.is_cancelled();
        let reporter =
            Reporter { step: &|what| progress.step(what), note: &|line| progress.note(line), cancelled: &cancelled };
        // Held until this function returns: cooldown, deploy, run and pull happen under it.
        let lock =
            DeviceLock::acquire(shell.clone(), work_dir, &LockOptions::waiting(self.settings.lock_timeout), &reporter)
                .map_err(|error| match error {
                    LockError::Adb(error) => adb_error(error),
                    LockError::Interrupted(_) => job.cancel.error(),
                    other => other.into(),
                })?;
        let cooldown = self.cool_down(&*shell, progress, &mut warnings)?;
        if cancelled() {
            return Err(job.cancel.error());
        }
        progress.step("deploy");
        let mut deploy =
            deploy::deploy(adb, serial, work_dir, &files, |t| progress.push_total(t), |b| progress.pushed(b))
                .map_err(adb_error)?;
        deploy.model_hash_seconds = model_files.hash_time.as_secs_f64();
        if cancelled() {
            return Err(job.cancel.error());
        }

        let gauge = match self.settings.energy_window {
            Some(_) => Some(energy::probe(&*shell).map_err(adb_error)?),
            None => None,
        };
        let before = device_state::read(&*shell).map_err(adb_error)?;
        progress.step("run");
        let energy = match (&gauge, self.settings.energy_window) {
            (Some(Ok(gauge)), Some(seconds)) => Some((gauge, seconds)),
            _ => None,
        };
        let layout = Layout::new(job, (&model_files, reference_files), work_dir, lock.run(), energy);
        let HarnessRun { command, output: shell_out, seconds } = self.run_harness(job, &layout, &lock, progress)?;
        let after = device_state::read(&*shell).ok();
        let ended = ended_execution(&shell_out, seconds);

        progress.step("pull");
        let pull_seconds = self.pull_results(&layout, out, &ended, gauge.as_ref())?;

        std::fs::write(out.join(files::HARNESS_STDOUT), &shell_out.stdout)?;
        std::fs::write(out.join(files::HARNESS_STDERR), &shell_out.stderr)?;
        let state = DeviceStateRecord::new(serial, cooldown, before, after);
        contract::write_json(&out.join(files::DEVICE_STATE), &state)?;
        warnings.extend(state.drift.iter().map(|drift| format!("unsteady device: {drift}")));
        warnings.extend(lock.lost());
        let record = DeviceRunRecord {
            schema: DEVICE_RUN_SCHEMA.into(),
            device,
            runtime: job.runtime.name.clone(),
            model: file_name(job.model),
            lock: Some(lock.record().clone()),
            deploy,
            harness: HarnessExit {
                command,
                exit_code: shell_out.exit_code,
                seconds,
                stdout_file: files::HARNESS_STDOUT.into(),
                stderr_file: files::HARNESS_STDERR.into(),
            },
            pull_seconds,
            warnings: warnings.clone(),
        };
        contract::write_json(&out.join(files::DEVICE_RUN), &record)?;
        Ok(Execution { warnings, ..ended })
    }
}

impl AdbTarget {
    /// Cools the device down to the configured temperature, if any; warns when it gave up.
    fn cool_down(
        &self,
        shell: &dyn DeviceShell,
        progress: &Progress<'_>,
        warnings: &mut Vec<String>,
    ) -> anyhow::Result<Option<Cooldown>> {
        let cooldown = match self.settings.cooldown {
            Some((target_c, limit)) => {
                progress.step(&format!("cooldown to {target_c}°C"));
                let on_wait = |t: f64| progress.step(&format!("cooldown: {t:.1}°C > {target_c}°C"));
                Some(
                    device_state::cool_down(shell, target_c, limit, Duration::from_secs(5), on_wait)
                        .map_err(adb_error)?,
                )
            }
            None => None,
        };
        if let Some(Cooldown { outcome, waited_s, .. }) = &cooldown {
            if outcome == "timed_out" {
                warnings.push(format!("cooldown gave up after {waited_s:.0} s; the run started warm"));
            }
        }
        Ok(cooldown)
    }

    /// Runs the harness on the device under `lock`; on a timeout or cancel, stops it there too.
    fn run_harness(
        &self,
        job: &Job<'_>,
        layout: &Layout<'_>,
        lock: &DeviceLock,
        progress: &Progress<'_>,
    ) -> anyhow::Result<HarnessRun> {
        let serial = self.serial.as_str();
        let cancelled = || job.cancel.is_cancelled();
        let command = harness_command(job, layout);
        let started = Instant::now();
        // The idle window and the energy window add to the harness's own time.
        let timeout = job.timeout + layout.energy.map_or(Duration::ZERO, |(_, s)| Duration::from_secs_f64(2.0 * s));
        let shell_out = self.adb.shell_until(serial, &command, timeout, "run the harness", &cancelled);
        if let Err(AdbError::Timeout { .. } | AdbError::Interrupted { .. }) = &shell_out {
            // Stopping the local adb does not stop the harness on the device.
            if let Err(error) = lock.stop_own_harness() {
                progress.note(&format!("device {serial}: the harness may still run: {error}"));
            }
        }
        let output = match shell_out {
            Err(AdbError::Interrupted { .. }) => return Err(job.cancel.error()),
            other => other.map_err(adb_error)?,
        };
        Ok(HarnessRun { command, output, seconds: started.elapsed().as_secs_f64() })
    }

    /// Pulls the run's results into `out`, cleans them up on the device and saves the energy
    /// record when a gauge was probed; returns the seconds the pull took.
    fn pull_results(
        &self,
        layout: &Layout<'_>,
        out: &Path,
        ended: &Execution,
        gauge: Option<&Result<Gauge, String>>,
    ) -> anyhow::Result<f64> {
        let (adb, serial) = (&self.adb, self.serial.as_str());
        let pulled = Instant::now();
        pull_into(adb, serial, &layout.out, out)
            .with_context(|| format!("the harness ended ({}): {}", ended.status(), ended.last_message()))?;
        let pull_seconds = pulled.elapsed().as_secs_f64();
        let _ = adb.shell(serial, &cleanup_script(&layout.out), Duration::from_secs(60), "clean up");
        if let Some(gauge) = gauge {
            let record = energy_record(gauge.as_ref(), out);
            contract::write_json(&out.join(files::ENERGY), &record)?;
        }
        Ok(pull_seconds)
    }
}

/// The harness's command line, its output and how long it ran, seconds.
struct HarnessRun {
    /// The command run on the device.
    command: String,
    /// What the device's shell returned.
    output: ShellOutput,
    /// Wall time of the run, seconds.
    seconds: f64,
}

/// The execution the harness's output describes (its exit code, the signal that ended it, stderr).
fn ended_execution(shell_out: &ShellOutput, seconds: f64) -> Execution {
    // adbd (and a shell) report a process a signal ended as exit code 128 + its number.
    let signal = (129..=159).contains(&shell_out.exit_code).then(|| shell_out.exit_code - 128);
    Execution {
        exit_code: Some(shell_out.exit_code),
        signal,
        stderr: shell_out.stderr.clone(),
        seconds,
        warnings: Vec::new(),
    }
}

/// The energy of a run measured on `gauge` (its samples and the harness's window in `out`), or
/// why there is none (the probe's refusal, a run that recorded no window).
fn energy_record(gauge: Result<&Gauge, &String>, out: &Path) -> EnergyRecord {
    let gauge = match gauge {
        Ok(gauge) => gauge,
        Err(why) => return EnergyRecord::not_measured(why.clone()),
    };
    let samples = std::fs::read_to_string(out.join(files::GAUGE_SAMPLES)).unwrap_or_default();
    match npugate_result::RunResult::read(out).ok().and_then(|r| r.energy_window) {
        Some(window) => energy::measure(&samples, &window, gauge),
        None => EnergyRecord::not_measured(
            "the harness recorded no energy window (it stopped before the window, or its inferences failed)",
        ),
    }
}

/// An adb failure as the rack sees it: transport failures (device gone, timeout) are retryable.
fn adb_error(error: AdbError) -> anyhow::Error {
    if error.is_transient() {
        Retryable(error.into()).into()
    } else {
        error.into()
    }
}

/// The files this device needs: its harness, the model with every file it refers to (and so a
/// compiled model's source model, `reference`), the inputs and the runtime's libraries, keeping only the Stub/Skel of the device's Hexagon arch.
fn files_for(
    job: &Job<'_>,
    device: &DeviceInfo,
    (model, reference): (&ModelFiles, Option<&ModelFiles>),
    warnings: &mut Vec<String>,
) -> anyhow::Result<Vec<DeployFile>> {
    let serial = &device.serial;
    let target = device.target.as_deref().ok_or_else(|| match device.abi.as_deref() {
        Some(abi) => anyhow::anyhow!("device {serial}: unknown ABI {abi:?}; no harness target for it"),
        None => anyhow::anyhow!("device {serial}: its ABI is unknown (getprop ro.product.cpu.abi and uname -m gave nothing); no harness target for it"),
    })?;
    super::check_runtime(&format!("device {serial}"), target, job.runtime)?;
    let mut files = vec![DeployFile::hashed(job.harness, HARNESS.into(), true)?];
    files.extend(model_deploy_files(job.model, model));
    if let (Some(source), Some(reference)) = (job.reference_model, reference) {
        files.extend(model_deploy_files(&source.path, reference));
    }
    for (index, input) in job.settings.inputs.iter().enumerate() {
        files.push(DeployFile::hashed(&input.path, input_path(index, &input.path), false)?);
    }
    for (index, file) in job.settings.ep_option_files() {
        files.push(DeployFile::hashed(&file, ep_option_path(index, &file), false)?);
    }
    let mut skipped_archs = BTreeSet::new();
    for lib in &job.runtime.files {
        if let Some(arch) = &lib.hexagon_arch {
            if device.hexagon_arch.as_ref() != Some(arch) {
                skipped_archs.insert(arch.clone());
                continue;
            }
        }
        files.push(DeployFile {
            local: job.runtime.dir.join(&lib.name),
            remote: format!("runtimes/{}/{}", job.runtime.name, lib.name),
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

/// The `.onnx` at `path` and every file it refers to, in the model's own directory.
fn model_deploy_files(path: &Path, model: &ModelFiles) -> Vec<DeployFile> {
    let onnx = DeployFile {
        local: path.to_path_buf(),
        remote: model_path(path, model),
        sha256: model.sha256.clone(),
        bytes: model.bytes,
        executable: false,
    };
    let referenced = model.referenced.iter().map(|(file, local)| DeployFile {
        local: local.clone(),
        remote: format!("{}/{}", model_dir(model), file.name),
        sha256: file.sha256.clone(),
        bytes: file.bytes,
        executable: false,
    });
    std::iter::once(onnx).chain(referenced).collect()
}

/// The model's own directory on the device, `models/<digest>`: the `.onnx` and the files it
/// refers to sit together under their own names, as ONNX Runtime expects (it accepts external data
/// only inside the model's folder), and two models never share one.
fn model_dir(model: &ModelFiles) -> String {
    format!("models/{}", model.digest)
}

fn model_path(path: &Path, model: &ModelFiles) -> String {
    format!("{}/{}", model_dir(model), file_name(path))
}

fn input_path(index: usize, input: &Path) -> String {
    format!("inputs/{index}/{}", file_name(input))
}

/// Where the file an `--ep-option` names goes on the device.
fn ep_option_path(index: usize, file: &Path) -> String {
    format!("ep-options/{index}/{}", file_name(file))
}

/// The device-side paths of one run.
struct Layout<'g> {
    harness: String,
    runtime_dir: String,
    out: String,
    command: HarnessCommand,
    /// The gauge sampled around the harness and the window length, when energy is measured.
    energy: Option<(&'g Gauge, f64)>,
    /// How long the sampler may run at most, seconds.
    sampler_limit_s: u64,
}

impl<'g> Layout<'g> {
    fn new(
        job: &Job<'_>,
        (model, reference): (&ModelFiles, Option<&ModelFiles>),
        work: &str,
        run_id: &str,
        energy: Option<(&'g Gauge, f64)>,
    ) -> Layout<'g> {
        let runtime_dir = format!("{work}/runtimes/{}", job.runtime.name);
        // A CPU run never loads the runtime's plugin EP (a plugin runtime serves CPU runs too).
        let ep_library =
            job.runtime.ep.as_ref().and_then(|ep| ep.library.as_ref()).filter(|_| job.settings.ep.is_accelerator());
        let out = format!("{work}/results/{run_id}");
        let mut index = 0;
        let settings = job
            .settings
            .with_input_paths(|input| {
                index += 1;
                PathBuf::from(format!("{work}/{}", input_path(index - 1, &input.path)))
            })
            .with_ep_option_files(|index, file| format!("{work}/{}", ep_option_path(index, file)));
        let command = HarnessCommand {
            ort_lib: format!("{runtime_dir}/{}", job.runtime.ort_library).into(),
            model: format!("{work}/{}", model_path(job.model, model)).into(),
            out: out.clone().into(),
            ep_library: ep_library.map(|lib| format!("{runtime_dir}/{lib}").into()),
            runtime_name: Some(job.runtime.name.clone()),
            fixed_from_sha256: job.fixed_from().map(str::to_string),
            model_files: model.hints(),
            reference_model: job
                .reference_model
                .zip(reference)
                .map(|(source, files)| format!("{work}/{}", model_path(&source.path, files)).into()),
            energy_window: energy.map(|(_, seconds)| seconds),
            progress: false,
            keep_partitioned_graph: false,
            settings,
        };
        let sampler_limit_s = (job.timeout.as_secs_f64() + energy.map_or(0.0, |(_, s)| 2.0 * s)).ceil() as u64;
        Layout { harness: format!("{work}/{HARNESS}"), runtime_dir, out, command, energy, sampler_limit_s }
    }
}

/// The `adb shell` command line: make the output dir, set `LD_LIBRARY_PATH` and the
/// `;`-separated `ADSP_LIBRARY_PATH`, start the harness. Every word is quoted.
fn harness_command(job: &Job<'_>, layout: &Layout) -> String {
    let adsp = format!("{};{DSP_LIBRARY_DIRS}", layout.runtime_dir);
    let mut words = vec![layout.harness.clone()];
    words.extend(layout.command.to_argv());
    let env: Vec<String> = job.env.iter().map(|(name, value)| assignment(name, value)).collect();
    let (prologue, epilogue) = match layout.energy {
        Some((gauge, seconds)) => {
            let samples = format!("{}/{}", layout.out, files::GAUGE_SAMPLES);
            (energy::prologue(gauge, &samples, seconds, layout.sampler_limit_s), energy::EPILOGUE)
        }
        None => (String::new(), ""),
    };
    format!(
        "mkdir -p {out} && cd {out} && {prologue}{ld} {adsp} {env}{cmd}{epilogue}",
        out = quote(&layout.out),
        ld = assignment("LD_LIBRARY_PATH", &layout.runtime_dir),
        adsp = assignment("ADSP_LIBRARY_PATH", &adsp),
        env = env.iter().map(|e| format!("{e} ")).collect::<String>(),
        cmd = command_line(&words),
    )
}

/// Removes the run's result dir on the device once it is pulled.
fn cleanup_script(out: &str) -> String {
    format!("rm -rf {}", quote(out))
}

/// Pulls the device's result dir and moves its entries into `out` (an empty directory).
fn pull_into(adb: &Adb, serial: &str, remote_dir: &str, out: &Path) -> anyhow::Result<()> {
    adb.pull(serial, remote_dir, out, Duration::from_secs(600)).map_err(adb_error)?;
    let leaf = remote_dir.rsplit('/').next().unwrap_or(remote_dir);
    let pulled: PathBuf = out.join(leaf);
    anyhow::ensure!(pulled.is_dir(), "device {serial}: pull of {remote_dir} brought no directory back");
    for entry in std::fs::read_dir(&pulled)? {
        let entry = entry?;
        std::fs::rename(entry.path(), out.join(entry.file_name()))?;
    }
    std::fs::remove_dir(&pulled)?;
    Ok(())
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::Cancel;
    use npugate_host::runtime::manifest::{EpLibrary, RuntimeFile};
    use npugate_settings::HarnessSettings;

    fn runtime(dir: &Path) -> npugate_host::runtime::RuntimeManifest {
        let file = |name: &str, role: &str, arch: Option<&str>| RuntimeFile {
            name: name.into(),
            sha256: format!("{:0>64}", name.len()),
            bytes: 1,
            role: role.into(),
            hexagon_arch: arch.map(str::to_string),
        };
        npugate_host::runtime::RuntimeManifest {
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
            qnn_build: None,
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

    /// A model of `m.onnx` and its weights `sub/w.bin`, hashed by hand.
    fn model_files(dir: &Path) -> ModelFiles {
        let weights = npugate_result::ModelFile { name: "sub/w.bin".into(), sha256: "b".repeat(64), bytes: 4 };
        ModelFiles {
            sha256: "a".repeat(64),
            bytes: 5,
            referenced: vec![(weights, dir.join("sub/w.bin"))],
            digest: "d".repeat(64),
            hash_time: Duration::ZERO,
        }
    }

    fn job<'a>(
        runtime: &'a npugate_host::runtime::RuntimeManifest,
        model: &'a Path,
        harness: &'a Path,
        settings: &'a HarnessSettings,
        cancel: &'a Cancel,
    ) -> Job<'a> {
        Job::new(harness, runtime, model, settings, Duration::from_secs(1), cancel)
    }

    #[test]
    fn only_the_devices_hexagon_arch_stub_and_skel_are_deployed() {
        let dir = tempfile::tempdir().unwrap();
        let (model, harness) = (dir.path().join("m.onnx"), dir.path().join("h"));
        std::fs::write(&model, "model").unwrap();
        std::fs::write(&harness, "harness").unwrap();
        let runtime = runtime(dir.path());
        // An EP option naming a file (onnxruntime-qnn's op_affinity) is pushed and named by its device path.
        let affinity = dir.path().join("affinity.json");
        std::fs::write(&affinity, r#"{"op_type": {"GroupQueryAttention": "htp"}}"#).unwrap();
        let mut settings = HarnessSettings::default();
        settings.session.ep_options = vec![
            npugate_settings::KeyValue { key: "htp_performance_mode".into(), value: "burst".into() },
            npugate_settings::KeyValue { key: "op_affinity".into(), value: affinity.display().to_string() },
        ];
        let cancel = Cancel::new();
        let job = job(&runtime, &model, &harness, &settings, &cancel);
        let device = DeviceInfo {
            serial: "R5CX".into(),
            target: Some("aarch64-linux-android".into()),
            hexagon_arch: Some("v75".into()),
            ..Default::default()
        };
        let mut warnings = Vec::new();
        let model_files = model_files(dir.path());
        let files = files_for(&job, &device, (&model_files, None), &mut warnings).unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.remote.as_str()).collect();
        let model_dir = format!("models/{}", "d".repeat(64));
        assert_eq!(
            names[1..3],
            [format!("{model_dir}/m.onnx"), format!("{model_dir}/sub/w.bin")],
            "the model's files sit together"
        );
        assert_eq!(files[2].sha256, "b".repeat(64));
        assert!(
            names.contains(&"runtimes/qnn-test/libQnnHtpV75Skel.so")
                && names.contains(&"runtimes/qnn-test/libQnnHtpV75Stub.so")
        );
        assert!(!names.iter().any(|n| n.contains("V73")), "{names:?}");
        assert!(names.contains(&"ep-options/1/affinity.json"), "{names:?}");
        assert_eq!(names.len(), 8, "{names:?}");
        assert!(warnings.is_empty());
        let layout = Layout::new(&job, (&model_files, None), "/data/local/tmp/npugate", "run-1", None);
        let options = &layout.command.settings.ep_options;
        assert_eq!(
            (options[0].value.as_str(), options[1].value.as_str()),
            ("burst", "/data/local/tmp/npugate/ep-options/1/affinity.json")
        );

        let unknown = DeviceInfo { hexagon_arch: None, ..device.clone() };
        let files = files_for(&job, &unknown, (&model_files, None), &mut warnings).unwrap();
        assert!(!files.iter().any(|f| f.remote.contains("Skel")));
        assert!(warnings[0].contains("v73, v75"), "{warnings:?}");

        let linux = DeviceInfo { target: Some("x86_64-unknown-linux-gnu".into()), ..device };
        let err = files_for(&job, &linux, (&model_files, None), &mut warnings).unwrap_err().to_string();
        assert!(err.contains("R5CX") && err.contains("qnn-test"), "{err}");
    }

    /// A device that records every script run on it and answers each with nothing.
    #[derive(Default)]
    struct Recorder(std::sync::Mutex<Vec<String>>);

    impl DeviceShell for Recorder {
        fn name(&self) -> &str {
            "recorder"
        }

        fn run(&self, script: &str, _: Duration, _: &str) -> Result<npugate_android::adb::ShellOutput, AdbError> {
            self.0.lock().unwrap().push(script.to_string());
            Ok(npugate_android::adb::ShellOutput { stdout: String::new(), stderr: String::new(), exit_code: 0 })
        }
    }

    #[test]
    fn every_device_side_script_uses_only_the_device_command_set() {
        use npugate_android::device_lock::{holder::Holder, script};
        let recorder = Recorder::default();
        let work = "/data/local/tmp/npugate";
        let _ = script::try_take(&recorder, work, &Holder::for_this_process("run-1"));
        let _ = script::inspect(&recorder, work);
        let _ = script::break_lock(&recorder, work, "run-1");
        let _ = script::clear(&recorder, work);
        let _ = script::heartbeat(&recorder, work, "run-1");
        let _ = script::release(&recorder, work, "run-1");
        let _ = script::stop_harnesses(&recorder, work, &["run-1"]);
        let _ = device_state::read(&recorder);
        let _ = devices::probe_shell(&recorder);
        let mut scripts = recorder.0.into_inner().unwrap();

        let dir = tempfile::tempdir().unwrap();
        let (model, harness) = (dir.path().join("m.onnx"), dir.path().join("h"));
        let runtime = runtime(dir.path());
        let (settings, cancel) = (HarnessSettings::default(), Cancel::new());
        let job = job(&runtime, &model, &harness, &settings, &cancel);
        let layout = Layout::new(&job, (&model_files(dir.path()), None), work, "run-1", None);
        let gauge = Gauge { dir: "/sys/class/power_supply/battery".into() };
        let measured = Layout::new(&job, (&model_files(dir.path()), None), work, "run-2", Some((&gauge, 10.0)));
        let file = DeployFile {
            local: model.clone(),
            remote: "models/m.onnx".into(),
            sha256: "a".repeat(64),
            bytes: 1,
            executable: true,
        };
        scripts.extend([
            npugate_android::adb::wrapped(&harness_command(&job, &layout)),
            npugate_android::adb::wrapped(&harness_command(&job, &measured)),
            energy::PROBE_SCRIPT.to_string(),
            cleanup_script(&layout.out),
            deploy::check_script(&format!("{work}/blobs"), &[file.sha256.as_str()].into()),
            deploy::link_script(work, std::slice::from_ref(&file), &[&file]),
        ]);
        assert_eq!(
            scripts.len(),
            15,
            "every script of the lock, the state and load sample, the probe, the run (gauge sampled or not), the \
             gauge's probe and the deploy"
        );
        for script in &scripts {
            let mut outside = npugate_android::adb::commands::outside_the_set(script);
            // The deployed harness is the one program of npugate's own the scripts start.
            outside.retain(|command| *command != layout.harness);
            assert!(outside.is_empty(), "commands outside the device command set {outside:?} in:\n{script}");
        }
    }

    #[test]
    fn the_harness_gets_the_npu_environment_and_hostile_names_stay_one_argument() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join("bin")).unwrap();
        let fake = work.join("bin/npugate-harness");
        // No /bin/sh on a phone: the fake harness is a script of the phone shell the test runs.
        let shell = npugate_android::adb::LocalShell;
        std::fs::write(&fake, "printf '%s\\n' \"$LD_LIBRARY_PATH\" \"$ADSP_LIBRARY_PATH\" \"$#\" \"$@\" > seen\n")
            .unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let model = dir.path().join("a b;rm -rf $(x).onnx");
        let runtime = runtime(dir.path());
        let work = work.to_str().unwrap();
        let (settings, cancel) = (HarnessSettings::default(), Cancel::new());
        let job = job(&runtime, &model, &fake, &settings, &cancel);
        let layout = Layout::new(&job, (&model_files(dir.path()), None), work, "run-1", None);
        let out = shell.run(&harness_command(&job, &layout), Duration::from_secs(30), "run the fake harness").unwrap();
        assert_eq!(out.exit_code, 0, "{}", out.stderr);
        let seen = std::fs::read_to_string(Path::new(&layout.out).join("seen")).unwrap();
        let lines: Vec<&str> = seen.lines().collect();
        let runtime_dir = format!("{work}/runtimes/qnn-test");
        assert_eq!(lines[0], runtime_dir);
        assert_eq!(
            lines[1],
            format!("{runtime_dir};/vendor/lib/rfsa/adsp;/vendor/dsp/cdsp;/system/lib/rfsa/adsp;/dsp")
        );
        let argv = &lines[3..];
        assert_eq!(lines[2], argv.len().to_string(), "every argument arrives as one word");
        let model_at = argv.iter().position(|a| *a == "--model").unwrap();
        assert_eq!(argv[model_at + 1], format!("{work}/models/{}/a b;rm -rf $(x).onnx", "d".repeat(64)));
        let file_at = argv.iter().position(|a| *a == "--model-file").unwrap();
        assert_eq!(argv[file_at + 1], format!("sub/w.bin={}:4", "b".repeat(64)));
    }
}
