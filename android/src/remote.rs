//! The `--device` path of `npugate run`: the options it adds, and one run per chosen device in
//! parallel with per-device result dirs under `--out`, a `rack.json` summary and the rack's exit code.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::device_run::{self, HarnessArgs, RunPlan, DEFAULT_WORK_DIR};
use crate::device_state::parse_celsius;
use crate::devices::DeviceOptions;
use crate::rack::{self, RACK_FILE};
use crate::runtime::RuntimeManifest;

/// Options of `npugate run` for devices reached over adb.
#[derive(Debug, Clone, clap::Args)]
pub struct DeviceRunOptions {
    /// Devices, adb binary and adb server.
    #[command(flatten)]
    pub devices: DeviceOptions,
    /// Work dir on the device (blobs, runtimes, models, results live below it).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_WORK_DIR)]
    pub work_dir: String,
    /// Retries of a device whose transport failed (device gone, timeout); gate failures never retry.
    #[arg(long, default_value_t = 0)]
    pub retries: u32,
    /// Wait until the device's hottest sensor is at or below this temperature (e.g. `40C`).
    #[arg(long, value_name = "TEMP", value_parser = parse_celsius)]
    pub cooldown_until: Option<f64>,
    /// Longest cooldown wait in seconds; the run starts anyway after it (and says so).
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub cooldown_timeout: u64,
    /// Limit for one harness run on a device, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1800)]
    pub run_timeout: u64,
}

impl DeviceRunOptions {
    /// True when `--device` (or `ANDROID_SERIAL`) asks for the device path.
    pub fn wanted(&self) -> bool {
        !self.devices.devices.is_empty() || std::env::var_os("ANDROID_SERIAL").is_some_and(|s| !s.is_empty())
    }
}

impl DeviceRunOptions {
    /// The plan every chosen device runs: these options plus what `npugate run` resolved.
    pub fn plan<'a>(
        &'a self,
        runtime: &'a RuntimeManifest,
        model: &'a Path,
        inputs: &'a [PathBuf],
        harness: Option<&'a Path>,
        harness_args: &'a HarnessArgs<'a>,
    ) -> RunPlan<'a> {
        RunPlan {
            runtime,
            model,
            inputs,
            harness,
            work_dir: self.work_dir.trim_end_matches('/'),
            harness_args,
            cooldown: self.cooldown_until.map(|c| (c, Duration::from_secs(self.cooldown_timeout))),
            run_timeout: Duration::from_secs(self.run_timeout),
        }
    }
}

/// Runs `plan` on every chosen device; each device's pulled result (plus `device_run.json`,
/// `device_state.json`) lands in `out/<serial>/` as soon as it is done and is judged there by
/// `judge`, which returns the exit code and the report to print. Devices judge in parallel; their
/// reports are printed one at a time. Prints one line per device; returns the rack's exit code.
pub fn run_on_devices(
    options: &DeviceRunOptions,
    plan: &RunPlan,
    out: &Path,
    judge: &(dyn Fn(&Path) -> anyhow::Result<(u8, String)> + Sync),
) -> anyhow::Result<u8> {
    anyhow::ensure!(plan.model.is_file(), "model {} not found", plan.model.display());
    let adb = options.devices.adb()?;
    let serials = options.devices.select(&adb)?;
    let dirs = result_dir_names(&serials);
    std::fs::create_dir_all(out).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", out.display()))?;
    // Reports are printed one device at a time, so they do not interleave.
    let printing = std::sync::Mutex::new(());
    let report = rack::run_rack(&serials, options.retries, |serial, progress| {
        let index = serials.iter().position(|s| s == serial).expect("serial comes from the list");
        let result_dir = out.join(&dirs[index]);
        let record = device_run::run_on_device(&adb, serial, plan, &result_dir, progress)?;
        progress.step("judge");
        let (code, verdict_report) = judge(&result_dir)?;
        {
            let _turn = printing.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            for warning in &record.warnings {
                eprintln!("npugate: {serial}: warning: {warning}");
            }
            print!("{verdict_report}");
        }
        let harness_ok = record.harness.exit_code == 0;
        Ok((result_dir, if harness_ok { code } else { crate::EXIT_ERROR }))
    });
    std::fs::write(out.join(RACK_FILE), serde_json::to_vec_pretty(&report)?)?;
    for device in &report.devices {
        let dir = device.result_dir.as_ref().map(|d| d.display().to_string()).unwrap_or_else(|| "-".into());
        println!("{}\t{}\t{dir}", device.serial, device.summary());
    }
    Ok(report.exit_code)
}

/// A host directory name per serial: characters outside `[A-Za-z0-9._-]` become `_`, and names
/// that would collide (or be `.`/`..`) get a numeric suffix.
pub fn result_dir_names(serials: &[String]) -> Vec<String> {
    let mut used = BTreeSet::new();
    serials
        .iter()
        .map(|serial| {
            let mut base: String =
                serial.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
            if base.is_empty() || base.chars().all(|c| c == '.') {
                base = format!("device{base}");
            }
            let mut name = base.clone();
            let mut n = 2;
            while !used.insert(name.clone()) {
                name = format!("{base}-{n}");
                n += 1;
            }
            name
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_serials_become_distinct_safe_directory_names() {
        let serials: Vec<String> =
            ["127.0.0.1:6101", "../../etc", "a b;rm -rf $(x)", "a:b", "a_b", "..", ""].map(String::from).to_vec();
        let names = result_dir_names(&serials);
        assert_eq!(names[0], "127.0.0.1_6101");
        assert_eq!(names[1], ".._.._etc");
        assert_eq!(names[2], "a_b_rm_-rf___x_");
        assert_eq!((names[3].as_str(), names[4].as_str()), ("a_b", "a_b-2"));
        assert_eq!((names[5].as_str(), names[6].as_str()), ("device..", "device"));
        assert!(names.iter().all(|n| !n.contains('/') && n != "." && n != ".."));
    }
}
