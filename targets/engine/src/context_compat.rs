//! Which QNN versions load which context binaries, as measured by npugate-htp's `compat`: each
//! context compiled with one QNN version loaded (and run once) on Qualcomm's host HTP emulator
//! under every QNN version (`npugate compile --qnn A --qnn B …`), giving the matrix compiled-with ×
//! loaded-with (`npugate.context-compat/1`). The measured rule npugate applies before a run
//! ([`crate::compiled::CompiledFor::check`]) is such a matrix kept in the repository
//! (`context_compat.json`, with the commands that measured it and when), never a guess: a pair
//! measured to fail is refused, a pair never measured is a warning.

use std::path::Path;

use anyhow::{Context, Result};
use npugate_result::contract;
use serde::{Deserialize, Serialize};

/// Schema of a context compatibility matrix.
pub const CONTEXT_COMPAT_SCHEMA: &str = "npugate.context-compat/1";
/// The measured rule, embedded at build time.
const MEASURED_RULE: &str = include_str!("context_compat.json");

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
        contract::parse(MEASURED_RULE, Path::new("targets/engine/src/context_compat.json"))
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
            text.push_str(&npugate_result::table::plain(&header, rows));
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
}
