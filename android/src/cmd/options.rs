//! Options shared by several subcommands, each parsed once into the library's typed values.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use ed25519_dalek::SigningKey;
use npugate_gate::export::Format;

use crate::adb::Adb;
use crate::device_state::parse_celsius;
use crate::pipeline::{GateSpec, Sinks};
use crate::rack::RackPolicy;
use crate::targets::adb::{AdbSettings, DEFAULT_WORK_DIR};
use crate::targets::Cancel;

/// Gate options of every command that judges a run.
#[derive(Debug, Clone, Args)]
pub struct GateArgs {
    /// Gate rules file (TOML); defaults: cv_pct <= 8, npu_flops_pct >= 98.
    #[arg(long = "gate", value_name = "FILE")]
    pub rules_file: Option<PathBuf>,
    /// Override one rule, `name=value` (repeatable), e.g. `--rule median_ms=12`.
    #[arg(long = "rule", value_name = "NAME=VALUE")]
    pub rule_overrides: Vec<String>,
    /// Baseline to compare against (from `npugate baseline save`).
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Compare against a baseline even when the fingerprints differ.
    #[arg(long)]
    pub force: bool,
    /// Output format (repeatable): terminal, json, markdown, github, junit, html.
    #[arg(long = "format", value_name = "FORMAT", default_value = "terminal")]
    pub formats: Vec<Format>,
    /// Write the formats to this file (one format) or directory (several) instead of stdout.
    #[arg(long = "report", value_name = "PATH")]
    pub report: Option<PathBuf>,
}

impl GateArgs {
    /// The rules and baseline.
    pub fn spec(&self) -> Result<GateSpec> {
        GateSpec::load(self.rules_file.as_deref(), &self.rule_overrides, self.baseline.as_deref(), self.force)
    }

    /// Where the verdict goes.
    pub fn sinks(&self) -> Sinks {
        Sinks { formats: self.formats.clone(), report: self.report.clone() }
    }
}

/// The device-selection and adb-connection options every device command takes.
#[derive(Debug, Clone, Args)]
pub struct DeviceArgs {
    /// Device serial (repeatable), or `all` for every online device. Default: `ANDROID_SERIAL`,
    /// else the only online device.
    #[arg(long = "device", value_name = "SERIAL")]
    pub devices: Vec<String>,
    /// The adb binary (default: `adb` from PATH).
    #[arg(long, value_name = "PATH")]
    pub adb: Option<PathBuf>,
    /// A remote adb server `host:port` (default: adb's own, which honours `ADB_SERVER_SOCKET`).
    #[arg(long, value_name = "HOST:PORT")]
    pub adb_server: Option<String>,
}

impl DeviceArgs {
    /// The adb client these options describe.
    pub fn adb(&self) -> Result<Adb> {
        Adb::new(self.adb.clone(), self.adb_server.as_deref())
    }

    /// True when `--device` (or `ANDROID_SERIAL`) asks for devices.
    pub fn wanted(&self) -> bool {
        !self.devices.is_empty() || std::env::var_os("ANDROID_SERIAL").is_some_and(|s| !s.is_empty())
    }
}

/// How runs on devices over adb are done: work dir, retries, cooldown, timeouts.
#[derive(Debug, Clone, Args)]
pub struct DeviceRunArgs {
    /// Devices, adb binary and adb server.
    #[command(flatten)]
    pub devices: DeviceArgs,
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
    /// Longest wait, in seconds, for a device another npugate (on any host) is measuring on;
    /// 0 fails at once (exit 2, naming the holder). Default: wait as long as it takes.
    #[arg(long, value_name = "SECONDS")]
    pub lock_timeout: Option<u64>,
}

impl DeviceRunArgs {
    /// Work dir, cooldown and lock timeout of every device run.
    pub fn adb_settings(&self) -> AdbSettings {
        AdbSettings {
            work_dir: self.work_dir.clone(),
            cooldown: self.cooldown_until.map(|c| (c, Duration::from_secs(self.cooldown_timeout))),
            lock_timeout: self.lock_timeout.map(Duration::from_secs),
        }
    }

    /// The limit of one harness run.
    pub fn run_timeout(&self) -> Duration {
        Duration::from_secs(self.run_timeout)
    }

    /// Retries, a short pause between attempts, and `cancel`.
    pub fn policy(&self, cancel: &Cancel) -> RackPolicy {
        RackPolicy { retries: self.retries, retry_pause: Duration::from_secs(1), cancel: cancel.clone() }
    }
}

/// Leaving noisy devices out of a rack (`run`, `compare`): their noise floor, learned from the
/// history, drifted well above their peers' (see `npugate devices`).
#[derive(Debug, Clone, Args)]
pub struct HealthArgs {
    /// Skip the devices the history flags as noisy (each named on stderr).
    #[arg(long)]
    pub skip_noisy: bool,
    /// History store the noise floors are learned from (default: <cache>/history.sqlite).
    #[arg(long, value_name = "PATH", requires = "skip_noisy")]
    pub history: Option<PathBuf>,
}

impl HealthArgs {
    /// `serials` without the noisy ones when `--skip-noisy` is given; an error when none is left.
    pub fn keep_healthy(&self, serials: Vec<String>) -> Result<Vec<String>> {
        if !self.skip_noisy {
            return Ok(serials);
        }
        let path = self.history.clone().unwrap_or_else(crate::history::default_path);
        let Some(health) = crate::history::health::load(&path)? else {
            eprintln!("npugate: --skip-noisy: no history at {} yet, so no device is skipped", path.display());
            return Ok(serials);
        };
        let (kept, skipped): (Vec<String>, Vec<String>) =
            serials.into_iter().partition(|serial| !health.iter().any(|h| &h.serial == serial && h.noisy));
        for serial in &skipped {
            let why = health.iter().find(|h| &h.serial == serial).map(|h| h.summary.as_str()).unwrap_or_default();
            eprintln!("npugate: skipping {serial}: {why}");
        }
        anyhow::ensure!(
            !kept.is_empty(),
            "every chosen device is flagged noisy ({}); see `npugate devices`, or run without --skip-noisy",
            skipped.join(", ")
        );
        Ok(kept)
    }
}

/// Options of commands that write a signed evidence bundle (`run`, `sweep`).
#[derive(Debug, Clone, Args)]
pub struct EvidenceArgs {
    /// Write a signed evidence bundle to this directory (see `npugate verify`).
    #[arg(long, value_name = "OUT")]
    pub evidence: Option<PathBuf>,
    /// ed25519 private key to sign the bundle with (PKCS#8 PEM, from `npugate keygen`); default: the
    /// PEM text in $NPUGATE_SIGNING_KEY.
    #[arg(long, value_name = "FILE", requires = "evidence")]
    pub signing_key: Option<PathBuf>,
}

impl EvidenceArgs {
    /// The bundle directory and the key to sign it with, when `--evidence` is given (the key is
    /// loaded up front, so a missing key fails before anything runs).
    pub fn bundle(&self) -> Result<Option<(PathBuf, SigningKey)>> {
        match &self.evidence {
            None => Ok(None),
            Some(out) => Ok(Some((out.clone(), crate::evidence::signing_key(self.signing_key.as_deref())?))),
        }
    }
}

/// A cancellation flag set by Ctrl-C (SIGINT) or SIGTERM: work stops at its next check, a running
/// harness is stopped, and the command ends with what was finished so far.
pub fn interrupt_flag() -> Cancel {
    let cancel = Cancel::new();
    let flag = cancel.clone();
    if let Err(error) = ctrlc::set_handler(move || flag.cancel()) {
        eprintln!("npugate: warning: Ctrl-C will end npugate at once, not cleanly: {error}");
    }
    cancel
}
