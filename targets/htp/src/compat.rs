//! Measures which QNN versions load which context binaries: each context compiled with one QNN
//! version is loaded (and run once) on Qualcomm's host HTP emulator under every QNN version
//! (`npugate compile --qnn A --qnn B …`), giving the matrix compiled-with × loaded-with
//! (`npugate.context-compat/1`, [`npugate_engine::context_compat`], which also holds the measured
//! rule a run applies).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use npugate_engine::context_compat::{CompatOutcome, CompatPair, ContextCompat, CONTEXT_COMPAT_SCHEMA};
use npugate_result::{contract, files, RunResult};
use npugate_settings::SessionSettings;

use super::preflight::{launch, soc_settings, Launched};
use super::HostHtp;
use npugate_engine::model::GivenModel;
use npugate_engine::rack::{self, RackPolicy};
use npugate_engine::targets::wine::WineTarget;
use npugate_engine::targets::{Job, Target};
use npugate_host::hash_cache::HashCache;
use npugate_result::hexagon::Soc;

/// At most this many of QNN's own error lines are kept per refused pair.
const MAX_QNN_ERRORS: usize = 4;

/// Contexts to load under every QNN version.
#[derive(Debug, Clone)]
pub struct CompatRequest<'a> {
    /// The host HTP of each QNN version, oldest first.
    pub hosts: &'a [HostHtp],
    /// The SoC the contexts were compiled for.
    pub soc: Soc,
    /// Each context model with the QNN version that compiled it.
    pub contexts: &'a [(String, PathBuf)],
    /// The model they were compiled from (a name for the matrix).
    pub model: &'a str,
    /// The command that asked for the measurement.
    pub measured_by: String,
    /// The longest one load may take (npugate_engine's `Timeouts::context_load`).
    pub timeout: Duration,
    /// The command's hash cache: each context is looked at once with it and handed to every load.
    pub hashes: &'a HashCache,
}

impl CompatRequest<'_> {
    /// Loads every context under every QNN version, in parallel, each into `dir/<A>-on-<B>/`
    /// (kept), and returns the matrix (also written as `dir/context_compat.json`).
    pub fn run(&self, dir: &Path, policy: &RackPolicy) -> Result<ContextCompat> {
        let cancel = &policy.cancel;
        // Each context looked at once (a context that cannot be is that context's loads' error).
        let looked: Vec<Result<GivenModel, String>> = self
            .contexts
            .iter()
            .map(|(_, context)| GivenModel::read(context, self.hashes).map_err(|e| format!("{e:#}")))
            .collect();
        let mut loads: Vec<(WineTarget, &str, &Result<GivenModel, String>, &HostHtp)> = Vec::new();
        for ((compiled_with, _), context) in self.contexts.iter().zip(&looked) {
            for host in self.hosts {
                let name = format!("{compiled_with}-on-{}", host.qnn_sdk());
                loads.push((WineTarget::for_soc(self.soc).named(&name), compiled_with, context, host));
            }
        }
        let settings = npugate_settings::HarnessSettings {
            execute_once: true,
            ..soc_settings(&SessionSettings::default(), &[], true)
        };
        let targets: Vec<&WineTarget> = loads.iter().map(|(target, ..)| target).collect();
        let policy = RackPolicy { retries: 0, retry_pause: Duration::ZERO, ..policy.clone() };
        let rack = rack::run_rack(&targets, &policy, |target, progress| {
            let (_, _, context, host) =
                loads.iter().find(|(t, ..)| std::ptr::eq(t, target)).context("a load of this matrix")?;
            let context = context.as_ref().map_err(|error| anyhow::anyhow!("{error}"))?;
            let job = Job {
                given: Some(context),
                ..Job::new(&host.harness, &host.runtime, &context.path, &settings, self.timeout, cancel)
            };
            launch(target, &job, &dir.join(target.name()), progress)
        });
        let pairs = loads
            .iter()
            .zip(rack.report.devices.iter().zip(&rack.results))
            .map(|((_, compiled_with, _, host), (outcome, loaded))| {
                let (outcome, error) = match loaded {
                    Some(loaded) => judge(loaded),
                    None => (CompatOutcome::NotJudged, outcome.infrastructure_error.clone()),
                };
                CompatPair {
                    soc: self.soc.model.into(),
                    htp_arch: self.soc.arch.into(),
                    model: self.model.into(),
                    compiled_with: compiled_with.to_string(),
                    loaded_with: host.qnn_sdk(),
                    outcome,
                    error,
                }
            })
            .collect();
        let matrix = ContextCompat {
            schema: CONTEXT_COMPAT_SCHEMA.into(),
            measured_by: vec![self.measured_by.clone()],
            measured_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            measured_on:
                "Qualcomm's x86_64 host HTP backend (each QNN version's QnnHtp.dll) under wine, configured as the SoC"
                    .into(),
            pairs,
        };
        contract::write_json(&dir.join("context_compat.json"), &matrix)?;
        Ok(matrix)
    }
}

/// The outcome of one load from what its harness left.
fn judge(loaded: &Launched) -> (CompatOutcome, Option<String>) {
    let log = std::fs::read_to_string(loaded.dir.join(files::ORT_LOG)).unwrap_or_default();
    let with_qnn = |error: &str| {
        let qnn = qnn_errors(&log);
        let error = error.split_once(".onnx: ").map_or(error, |(_, rest)| rest).trim();
        if qnn.is_empty() {
            error.to_string()
        } else {
            format!("{error}; QNN: {}", qnn.join("; "))
        }
    };
    match RunResult::read(&loaded.dir) {
        Ok(result) => match (&result.session_error, &result.inference_error) {
            (Some(refused), _) => (CompatOutcome::Refused, Some(with_qnn(refused))),
            (None, Some(failed)) => (CompatOutcome::FailsToRun, Some(with_qnn(failed))),
            (None, None) => (CompatOutcome::Runs, None),
        },
        Err(_) => (
            CompatOutcome::NotJudged,
            Some(format!(
                "the harness ended ({}) without a result: {}",
                loaded.execution.status(),
                loaded.execution.last_message()
            )),
        ),
    }
}

/// QNN's own error messages (`<E> …`) in a log, in order, each once.
fn qnn_errors(log: &str) -> Vec<String> {
    let mut errors: Vec<String> = Vec::new();
    for message in log.lines().filter_map(|line| line.split_once("<E> ").map(|(_, m)| m.trim().to_string())) {
        if !message.is_empty() && !errors.contains(&message) && errors.len() < MAX_QNN_ERRORS {
            errors.push(message);
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qnns_own_errors_are_read_once_each() {
        let log = "[V:onnxruntime:timed, qnn_backend_manager.cc:516 QnnLogging]  <E> Using newer context binary on old SDK\n\
                   [V:x]  <W> noise\n[V:x]  <E> Fail to get context blob with err 5000\n[V:x]  <E> Using newer context binary on old SDK\n";
        assert_eq!(
            qnn_errors(log),
            ["Using newer context binary on old SDK", "Fail to get context blob with err 5000"]
        );
    }
}
