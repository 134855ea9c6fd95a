//! Which QNN versions load which context binaries, measured: each context compiled with one QNN
//! version is loaded (and run once) on Qualcomm's host HTP emulator under every QNN version
//! (`npugate compile --qnn A --qnn B …`), giving the matrix compiled-with × loaded-with
//! (`npugate.context-compat/1`). The measured rule npugate applies before a run
//! ([`super::compiled::CompiledFor::check`]) is such a matrix kept in the repository
//! (`context_compat.json`, with the commands that measured it and when), never a guess: a pair
//! measured to fail is refused, a pair never measured is a warning.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use npugate_result::{contract, files, RunResult};
use npugate_settings::SessionSettings;
use serde::{Deserialize, Serialize};

use super::preflight::{launch, soc_settings, Launched};
use super::HostHtp;
use npugate_engine::rack::{self, RackPolicy};
use npugate_engine::targets::wine::WineTarget;
use npugate_engine::targets::{Job, Target};
use npugate_host::hexagon::Soc;

/// Schema of a context compatibility matrix.
pub const CONTEXT_COMPAT_SCHEMA: &str = "npugate.context-compat/1";
/// The measured rule, embedded at build time.
const MEASURED_RULE: &str = include_str!("context_compat.json");
/// The longest one load may take.
const TIMEOUT: Duration = Duration::from_secs(600);
/// At most this many of QNN's own error lines are kept per refused pair.
const MAX_QNN_ERRORS: usize = 4;

/// A context compatibility matrix: what loaded where.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ContextCompat {
    /// Always [`CONTEXT_COMPAT_SCHEMA`].
    pub schema: String,
    /// The commands that measured it.
    pub measured_by: Vec<String>,
    /// When (RFC 3339, UTC).
    pub measured_at: String,
    /// Where: what ran the loads.
    pub measured_on: String,
    /// One entry per compiled-with × loaded-with × SoC.
    pub pairs: Vec<CompatPair>,
}

impl contract::Document for ContextCompat {
    const SCHEMA: contract::Schema = contract::Schema::new(CONTEXT_COMPAT_SCHEMA);
}

/// One context binary loaded under one QNN version.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CompatPair {
    /// The SoC the context was compiled for (and the emulator configured as).
    pub soc: String,
    /// Its Hexagon arch.
    pub htp_arch: String,
    /// The model the context was compiled from.
    pub model: String,
    /// QNN version that compiled the context, e.g. `2.49.40`.
    pub compiled_with: String,
    /// QNN version that loaded it, e.g. `2.51.0`.
    pub loaded_with: String,
    /// What happened.
    pub outcome: CompatOutcome,
    /// QNN's (and the EP's) error when it did not load or run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What loading a context binary under a QNN version did.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CompatOutcome {
    /// The session was created from the context and one inference ran.
    Runs,
    /// The session was created, the inference failed.
    FailsToRun,
    /// The session (the context) was refused.
    Refused,
    /// Could not be judged (the harness crashed, wine missing, …).
    NotJudged,
}

impl CompatOutcome {
    /// `loads`, `fails to run`, `refused`, `not judged`.
    pub fn label(self) -> &'static str {
        match self {
            CompatOutcome::Runs => "loads and runs",
            CompatOutcome::FailsToRun => "loads, fails to run",
            CompatOutcome::Refused => "refused",
            CompatOutcome::NotJudged => "not judged",
        }
    }
}

/// What the measured rule says about a context compiled with one QNN version on another.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict<'a> {
    /// Measured to load and run (on the SoC named, which may be another of the same or another arch).
    Works(&'a CompatPair),
    /// Measured to fail: refused or failing to run.
    Fails(&'a CompatPair),
    /// Never measured.
    Untested,
}

impl ContextCompat {
    /// The measured rule kept in the repository.
    pub fn measured() -> Result<ContextCompat> {
        contract::parse(MEASURED_RULE, Path::new("htp/src/context_compat.json"))
            .context("the embedded context compatibility rule is invalid")
    }

    /// The rule for a context compiled with `compiled` (QNN SDK version) loaded by `loaded`, for a
    /// SoC of Hexagon arch `arch`: a measurement on that arch first, else on any arch; a pair
    /// measured to fail anywhere counts as failing.
    pub fn verdict(&self, compiled: &str, loaded: &str, arch: &str) -> Verdict<'_> {
        let judged = |pair: &&CompatPair| {
            pair.compiled_with == compiled && pair.loaded_with == loaded && pair.outcome != CompatOutcome::NotJudged
        };
        let matching: Vec<&CompatPair> = self.pairs.iter().filter(judged).collect();
        let fails = |pair: &&&CompatPair| matches!(pair.outcome, CompatOutcome::Refused | CompatOutcome::FailsToRun);
        if let Some(failed) =
            matching.iter().filter(|p| p.htp_arch == arch).find(fails).or_else(|| matching.iter().find(fails))
        {
            return Verdict::Fails(failed);
        }
        match matching.iter().find(|p| p.htp_arch == arch).or(matching.first()) {
            Some(works) => Verdict::Works(works),
            None => Verdict::Untested,
        }
    }

    /// The matrix as text: one table per SoC, compiled-with down, loaded-with across.
    pub fn table(&self) -> String {
        let mut text = String::new();
        let mut socs: Vec<&str> = self.pairs.iter().map(|p| p.soc.as_str()).collect();
        socs.dedup();
        for soc in socs {
            let pairs: Vec<&CompatPair> = self.pairs.iter().filter(|p| p.soc == soc).collect();
            let mut versions: Vec<&str> = pairs
                .iter()
                .map(|p| p.compiled_with.as_str())
                .chain(pairs.iter().map(|p| p.loaded_with.as_str()))
                .collect();
            versions.sort_by_key(|v| v.split('.').map(|part| part.parse::<u64>().unwrap_or(0)).collect::<Vec<_>>());
            versions.dedup();
            let header: Vec<String> = std::iter::once(format!("{soc}: COMPILED WITH ↓ LOADED WITH →"))
                .chain(versions.iter().map(|v| format!("QNN {v}")))
                .collect();
            let rows = versions.iter().map(|compiled| {
                std::iter::once(format!("QNN {compiled}"))
                    .chain(versions.iter().map(|loaded| {
                        pairs
                            .iter()
                            .find(|p| p.compiled_with == *compiled && p.loaded_with == *loaded)
                            .map_or("-".to_string(), |p| p.outcome.label().to_string())
                    }))
                    .collect::<Vec<String>>()
            });
            let header: Vec<&str> = header.iter().map(String::as_str).collect();
            text.push_str(&npugate_host::table::plain(&header, rows));
            for pair in pairs.iter().filter(|p| p.error.is_some()) {
                text.push_str(&format!(
                    "  QNN {} on QNN {}: {}\n",
                    pair.compiled_with,
                    pair.loaded_with,
                    pair.error.as_deref().unwrap_or_default()
                ));
            }
        }
        text
    }
}

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
}

impl CompatRequest<'_> {
    /// Loads every context under every QNN version, in parallel, each into `dir/<A>-on-<B>/`
    /// (kept), and returns the matrix (also written as `dir/context_compat.json`).
    pub fn run(&self, dir: &Path, policy: &RackPolicy) -> Result<ContextCompat> {
        let cancel = &policy.cancel;
        let mut loads: Vec<(WineTarget, &str, &Path, &HostHtp)> = Vec::new();
        for (compiled_with, context) in self.contexts {
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
            let job = Job {
                harness: &host.harness,
                runtime: &host.runtime,
                model: context,
                prepared: None,
                reference_model: None,
                settings: &settings,
                env: &[],
                timeout: TIMEOUT,
                cancel,
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

    fn pair(arch: &str, compiled: &str, loaded: &str, outcome: CompatOutcome) -> CompatPair {
        CompatPair {
            soc: if arch == "v75" { "SM8650" } else { "SM8350" }.into(),
            htp_arch: arch.into(),
            model: "m".into(),
            compiled_with: compiled.into(),
            loaded_with: loaded.into(),
            outcome,
            error: (outcome == CompatOutcome::Refused).then(|| "QNN_CONTEXT_ERROR_INVALID_ARGUMENT".into()),
        }
    }

    #[test]
    fn the_rule_refuses_measured_failures_and_knows_what_it_never_measured() {
        let rule = ContextCompat {
            schema: CONTEXT_COMPAT_SCHEMA.into(),
            measured_by: vec!["npugate compile --qnn all".into()],
            measured_at: "2026-11-25T00:00:00Z".into(),
            measured_on: "emulator".into(),
            pairs: vec![
                pair("v75", "2.49.40", "2.51.0", CompatOutcome::Runs),
                pair("v75", "2.51.0", "2.49.40", CompatOutcome::Refused),
                pair("v68", "2.50.40", "2.51.0", CompatOutcome::NotJudged),
            ],
        };
        assert!(matches!(rule.verdict("2.49.40", "2.51.0", "v75"), Verdict::Works(p) if p.soc == "SM8650"));
        assert!(
            matches!(rule.verdict("2.49.40", "2.51.0", "v68"), Verdict::Works(_)),
            "measured on another arch still counts"
        );
        assert!(
            matches!(rule.verdict("2.51.0", "2.49.40", "v79"), Verdict::Fails(p) if p.outcome == CompatOutcome::Refused)
        );
        assert_eq!(rule.verdict("2.50.40", "2.51.0", "v68"), Verdict::Untested, "a pair not judged was never measured");
        assert_eq!(rule.verdict("2.51.0", "2.52.0", "v75"), Verdict::Untested);
        let table = rule.table();
        assert!(table.contains("SM8650: COMPILED WITH ↓ LOADED WITH →  QNN 2.49.40"), "{table}");
        assert!(table.contains("QNN 2.51.0 on QNN 2.49.40: QNN_CONTEXT_ERROR_INVALID_ARGUMENT"), "{table}");
    }

    #[test]
    fn the_embedded_rule_is_measured_data_with_its_provenance() {
        let rule = ContextCompat::measured().unwrap();
        assert!(
            !rule.measured_by.is_empty() && rule.measured_by.iter().all(|c| c.starts_with("npugate compile --qnn")),
            "{:?}",
            rule.measured_by
        );
        assert!(
            rule.pairs.iter().any(|p| p.outcome == CompatOutcome::Runs)
                && rule.pairs.iter().any(|p| p.outcome == CompatOutcome::Refused)
        );
    }

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
