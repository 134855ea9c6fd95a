//! Gate rules: read from a TOML file (`--gate gate.toml`), overridden from the command line
//! (`--rule cv_pct=5`), with the defaults `cv_pct <= 8`, `npu_flops_pct >= 98`,
//! `baseline_median_pct = 10` and `baseline_placement = true`; with `--check-outputs`, a single
//! model's outputs are judged by `min_cosine >= 0.95` and `min_sqnr_db >= 10` (see
//! [`DEFAULT_MIN_COSINE`]).

use std::fmt;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The lowest cosine of an output to its reference a `--check-outputs` run passes by default: the
/// cosine of a tensor whose noise has a tenth of its power (SQNR 10 dB) is about 0.95.
pub const DEFAULT_MIN_COSINE: f64 = 0.95;
/// The lowest SQNR (dB) of an output a `--check-outputs` run passes by default: noise at a tenth
/// of the signal's power. A sound 8-bit quantization scores 20–40 dB (`smallcnn_qdq.onnx` 31.6 dB);
/// an output whose noise is as large as the signal (0 dB, top-1 lost) is garbage.
pub const DEFAULT_MIN_SQNR_DB: f64 = 10.0;
/// The largest error at which an output agrees with its reference to rounding: an output whose
/// every element is this close (`max_abs_err` at most this) is not judged by the relative rules
/// (`min_cosine`, `min_sqnr_db`) — where they fail with an error this small, the reference itself
/// is within rounding of zero (a wake-word score of 3e-5 that the HTP computes as 0: cosine 0,
/// SQNR 0 dB), and they measure the rounding, not the model. A tenth of float16's epsilon.
pub const ROUNDING_ABS_ERR: f64 = 1e-4;

/// The limits a run is judged against. Absent optional limits are not checked.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Rules {
    /// Fewest timed runs accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_runs: Option<usize>,
    /// Highest coefficient of variation of the latencies, percent (needs 20 runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cv_pct: Option<f64>,
    /// Highest median latency, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_ms: Option<f64>,
    /// Highest 95th percentile latency, milliseconds (needs 20 runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p95_ms: Option<f64>,
    /// Highest 99th percentile latency, milliseconds (needs 100 runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// Lowest share of FLOPs on the preferred EP, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub npu_flops_pct: Option<f64>,
    /// Lowest share of nodes on the preferred EP, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub npu_nodes_pct: Option<f64>,
    /// Lowest share of measured kernel time on the preferred EP, percent (needs a profile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub npu_time_pct: Option<f64>,
    /// Most nodes allowed off the preferred EP (expected and allow-listed ones not counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_fallback_nodes: Option<usize>,
    /// Most fused partitions of compiling EPs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_partitions: Option<usize>,
    /// Most EP switches in one profiled run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_boundaries: Option<usize>,
    /// Node names that may run off the preferred EP without failing any rule.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_nodes: Vec<String>,
    /// Operator types that may run off the preferred EP without failing any rule.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_op_types: Vec<String>,
    /// Against a baseline: the median may grow by at most this many percent, judged on the bootstrap
    /// interval of the median ratio (fails only when the whole interval is above the limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_median_pct: Option<f64>,
    /// Against a baseline: no node that ran on the preferred EP may run elsewhere now.
    pub baseline_placement: bool,
    /// LLM folders against a baseline of one: the median time to first token may grow by at most
    /// this many percent, judged like `baseline_median_pct` on the bootstrap interval of the ratio
    /// (the decode steps are the run's latencies: `baseline_median_pct` judges decode tok/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_ttft_pct: Option<f64>,
    /// Lowest cosine similarity of every output to its reference (needs `--check-outputs`;
    /// default [`DEFAULT_MIN_COSINE`], judged only when the outputs were compared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_cosine: Option<f64>,
    /// Lowest SQNR of every output against its reference, dB (needs `--check-outputs`; default
    /// [`DEFAULT_MIN_SQNR_DB`], judged only when the outputs were compared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_sqnr_db: Option<f64>,
    /// Largest absolute error of any output element against its reference (needs `--check-outputs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_abs_err: Option<f64>,
    /// LLM folders against a reference folder: lowest share of generated positions whose token
    /// equals the reference's, percent (needs `--check-outputs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_token_agreement_pct: Option<f64>,
    /// LLM folders against a reference folder: the first differing token may not come before this
    /// position (0 is the prompt's token; the default 1: the first token must agree). Judged when
    /// the run has a token comparison.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_first_divergence: Option<usize>,
    /// Highest CPU share, in percent of one core, of any other process on the device while the
    /// run was timed (needs a device run's `device_state.json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_background_cpu_pct: Option<f64>,
    /// Highest peak resident memory of the harness process (session creation and the timed runs), MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_peak_memory_mb: Option<f64>,
    /// Most resident memory the process may keep over session re-creations, MiB (needs `--leak-check N`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_memory_growth_mb: Option<f64>,
    /// Most energy per inference above idle, millijoules (a device run with `--energy-window`),
    /// judged on the measurement's interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_energy_mj: Option<f64>,
    /// LLM folders: highest median time to first token (the prompt's graph runs), milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ttft_ms: Option<f64>,
    /// LLM folders: fewest generated tokens per second (1 / median decode step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_decode_tok_s: Option<f64>,
    /// LLM folders: fewest prompt tokens per second (prompt tokens / median TTFT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_prefill_tok_s: Option<f64>,
    /// LLM folders: highest CV of the decode steps, percent (needs 20 steps over all generations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_cv_pct: Option<f64>,
    /// Highest ESTIMATED latency on the run's SoC, milliseconds: `npugate estimate`'s latency model
    /// (fitted on Qualcomm AI Hub's published device runs) on the run's graph — never a measured
    /// latency, so it can gate an emulator run, whose speed rules are not applicable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_estimated_ms: Option<f64>,
    /// Rules switched off, by name (e.g. `disable = ["cv_pct"]` for a median-only gate).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disable: Vec<RuleName>,
}

impl Default for Rules {
    /// The seed defaults: CV ≤ 8%, ≥ 98% of FLOPs on the NPU, median ≤ baseline × 1.10, no node moved.
    fn default() -> Self {
        Rules {
            min_runs: None,
            cv_pct: Some(8.0),
            median_ms: None,
            p95_ms: None,
            p99_ms: None,
            npu_flops_pct: Some(98.0),
            npu_nodes_pct: None,
            npu_time_pct: None,
            max_fallback_nodes: None,
            max_partitions: None,
            max_boundaries: None,
            allow_nodes: Vec::new(),
            allow_op_types: Vec::new(),
            baseline_median_pct: Some(10.0),
            baseline_placement: true,
            baseline_ttft_pct: Some(10.0),
            min_cosine: Some(DEFAULT_MIN_COSINE),
            min_sqnr_db: Some(DEFAULT_MIN_SQNR_DB),
            max_abs_err: None,
            min_token_agreement_pct: None,
            min_first_divergence: Some(1),
            max_background_cpu_pct: None,
            max_peak_memory_mb: None,
            max_memory_growth_mb: None,
            max_energy_mj: None,
            max_ttft_ms: None,
            min_decode_tok_s: None,
            min_prefill_tok_s: None,
            decode_cv_pct: None,
            max_estimated_ms: None,
            disable: Vec::new(),
        }
    }
}

/// Every rule by the name used in TOML, on the command line and in reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleName {
    /// [`Rules::min_runs`].
    MinRuns,
    /// [`Rules::cv_pct`].
    CvPct,
    /// [`Rules::median_ms`].
    MedianMs,
    /// [`Rules::p95_ms`].
    P95Ms,
    /// [`Rules::p99_ms`].
    P99Ms,
    /// [`Rules::npu_flops_pct`].
    NpuFlopsPct,
    /// [`Rules::npu_nodes_pct`].
    NpuNodesPct,
    /// [`Rules::npu_time_pct`].
    NpuTimePct,
    /// [`Rules::max_fallback_nodes`].
    MaxFallbackNodes,
    /// [`Rules::max_partitions`].
    MaxPartitions,
    /// [`Rules::max_boundaries`].
    MaxBoundaries,
    /// [`Rules::baseline_median_pct`].
    BaselineMedianPct,
    /// [`Rules::baseline_placement`].
    BaselinePlacement,
    /// [`Rules::baseline_ttft_pct`].
    BaselineTtftPct,
    /// [`Rules::min_cosine`].
    MinCosine,
    /// [`Rules::min_sqnr_db`].
    MinSqnrDb,
    /// [`Rules::max_abs_err`].
    MaxAbsErr,
    /// [`Rules::min_token_agreement_pct`].
    MinTokenAgreementPct,
    /// [`Rules::min_first_divergence`].
    MinFirstDivergence,
    /// [`Rules::max_background_cpu_pct`].
    MaxBackgroundCpuPct,
    /// [`Rules::max_peak_memory_mb`].
    MaxPeakMemoryMb,
    /// [`Rules::max_memory_growth_mb`].
    MaxMemoryGrowthMb,
    /// [`Rules::max_energy_mj`].
    MaxEnergyMj,
    /// [`Rules::max_ttft_ms`].
    MaxTtftMs,
    /// [`Rules::min_decode_tok_s`].
    MinDecodeTokS,
    /// [`Rules::min_prefill_tok_s`].
    MinPrefillTokS,
    /// [`Rules::decode_cv_pct`].
    DecodeCvPct,
    /// [`Rules::max_estimated_ms`].
    MaxEstimatedMs,
    /// [`crate::compare::CompareRules::max_slowdown_pct`].
    MaxSlowdownPct,
    /// [`crate::compare::CompareRules::placement_must_match`].
    PlacementMustMatch,
}

impl RuleName {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleName::MinRuns => "min_runs",
            RuleName::CvPct => "cv_pct",
            RuleName::MedianMs => "median_ms",
            RuleName::P95Ms => "p95_ms",
            RuleName::P99Ms => "p99_ms",
            RuleName::NpuFlopsPct => "npu_flops_pct",
            RuleName::NpuNodesPct => "npu_nodes_pct",
            RuleName::NpuTimePct => "npu_time_pct",
            RuleName::MaxFallbackNodes => "max_fallback_nodes",
            RuleName::MaxPartitions => "max_partitions",
            RuleName::MaxBoundaries => "max_boundaries",
            RuleName::BaselineMedianPct => "baseline_median_pct",
            RuleName::BaselinePlacement => "baseline_placement",
            RuleName::BaselineTtftPct => "baseline_ttft_pct",
            RuleName::MinCosine => "min_cosine",
            RuleName::MinSqnrDb => "min_sqnr_db",
            RuleName::MaxAbsErr => "max_abs_err",
            RuleName::MinTokenAgreementPct => "min_token_agreement_pct",
            RuleName::MinFirstDivergence => "min_first_divergence",
            RuleName::MaxBackgroundCpuPct => "max_background_cpu_pct",
            RuleName::MaxPeakMemoryMb => "max_peak_memory_mb",
            RuleName::MaxMemoryGrowthMb => "max_memory_growth_mb",
            RuleName::MaxEnergyMj => "max_energy_mj",
            RuleName::MaxTtftMs => "max_ttft_ms",
            RuleName::MinDecodeTokS => "min_decode_tok_s",
            RuleName::MinPrefillTokS => "min_prefill_tok_s",
            RuleName::DecodeCvPct => "decode_cv_pct",
            RuleName::MaxEstimatedMs => "max_estimated_ms",
            RuleName::MaxSlowdownPct => "max_slowdown_pct",
            RuleName::PlacementMustMatch => "placement_must_match",
        }
    }

    /// True for the rules that read latencies, whose failure noise can cause (and a confirmation
    /// rerun can tell apart); placement, run-count and output rules are deterministic.
    pub fn reads_latency(self) -> bool {
        matches!(
            self,
            RuleName::CvPct
                | RuleName::MedianMs
                | RuleName::P95Ms
                | RuleName::P99Ms
                | RuleName::BaselineMedianPct
                | RuleName::BaselineTtftPct
                | RuleName::MaxSlowdownPct
                | RuleName::MaxTtftMs
                | RuleName::MinDecodeTokS
                | RuleName::MinPrefillTokS
                | RuleName::DecodeCvPct
        )
    }
}

impl fmt::Display for RuleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Errors loading rules.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// The gate file could not be read.
    #[error("cannot read gate file {path}: {source}")]
    Io {
        /// File path.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The gate file is not valid TOML for the rules (unknown key, wrong type, …).
    #[error("gate file {path}: {message}")]
    File {
        /// File path.
        path: String,
        /// The TOML parser's message (names the key and line).
        message: String,
    },
    /// A command-line override is malformed or names an unknown rule.
    #[error("--rule {arg}: {message}")]
    Override {
        /// The override as given.
        arg: String,
        /// What is wrong and how to write it.
        message: String,
    },
}

impl Rules {
    /// Defaults, then the TOML file (if any), then each `key=value` override in order.
    pub fn load(file: Option<&Path>, overrides: &[String]) -> Result<Rules, RulesError> {
        load(file, overrides)
    }

    /// No rule at all: every limit off, so a run is measured and not judged (`npugate run
    /// --no-gate`: its verdict's outcome is [`crate::Outcome::Measured`]).
    pub fn none() -> Rules {
        Rules {
            cv_pct: None,
            npu_flops_pct: None,
            baseline_median_pct: None,
            baseline_placement: false,
            baseline_ttft_pct: None,
            min_cosine: None,
            min_sqnr_db: None,
            min_first_divergence: None,
            ..Rules::default()
        }
    }

    /// True when the rule is switched on (not in `disable`).
    pub fn enabled(&self, rule: RuleName) -> bool {
        !self.disable.contains(&rule)
    }

    /// True when a node may run off the preferred EP by the allow-lists.
    pub fn allows(&self, node_name: &str, op_type: &str) -> bool {
        self.allow_nodes.iter().any(|n| n == node_name) || self.allow_op_types.iter().any(|t| t == op_type)
    }
}

/// A rule set (gate or compare rules): its defaults, then the TOML file (if any), then each
/// `key=value` override in order. Unknown keys are errors naming the key and the file.
pub fn load<T: DeserializeOwned>(file: Option<&Path>, overrides: &[String]) -> Result<T, RulesError> {
    let mut table = match file {
        None => toml::Table::new(),
        Some(path) => {
            let shown = path.display().to_string();
            let text =
                std::fs::read_to_string(path).map_err(|source| RulesError::Io { path: shown.clone(), source })?;
            // Parse into `T` first so that errors carry the line and name the key.
            toml::from_str::<T>(&text)
                .map_err(|e| RulesError::File { path: shown.clone(), message: one_line(&e.to_string()) })?;
            toml::from_str::<toml::Table>(&text)
                .map_err(|e| RulesError::File { path: shown, message: one_line(&e.to_string()) })?
        }
    };
    for arg in overrides {
        let (key, value) = parse_override::<T>(arg)?;
        table.insert(key, value);
    }
    T::deserialize(toml::Value::Table(table))
        .map_err(|e| RulesError::Override { arg: overrides.join(" --rule "), message: one_line(&e.to_string()) })
}

/// Parses one `key=value` override; the value is TOML (`5`, `true`, `["Softmax"]`) or a bare string.
fn parse_override<T: DeserializeOwned>(arg: &str) -> Result<(String, toml::Value), RulesError> {
    let fail = |message: String| RulesError::Override { arg: arg.to_string(), message };
    let (key, raw) =
        arg.split_once('=').ok_or_else(|| fail("expected RULE=VALUE, e.g. --rule cv_pct=5".to_string()))?;
    let key = key.trim().to_string();
    let raw = raw.trim();
    let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()));
    let mut single = toml::Table::new();
    single.insert(key.clone(), value.clone());
    T::deserialize(toml::Value::Table(single)).map_err(|e| fail(one_line(&e.to_string())))?;
    Ok((key, value))
}

/// Collapses a multi-line parser message (toml prints a source excerpt) into one line.
fn one_line(message: &str) -> String {
    message.split('\n').map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('|')).collect::<Vec<_>>().join(" ")
}

/// The rule's limit when it is configured and enabled.
pub(crate) fn limit<T: Copy>(rules: &Rules, rule: RuleName, value: Option<T>) -> Option<T> {
    value.filter(|_| rules.enabled(rule))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_seed_rules() {
        let rules = Rules::load(None, &[]).unwrap();
        assert_eq!(rules, Rules::default());
        assert_eq!(rules.cv_pct, Some(8.0));
        assert_eq!(rules.npu_flops_pct, Some(98.0));
    }

    #[test]
    fn override_parses_numbers_lists_and_rule_names() {
        let rules = Rules::load(
            None,
            &["cv_pct=5".into(), "allow_op_types=[\"Softmax\"]".into(), "disable=[\"npu_flops_pct\"]".into()],
        )
        .unwrap();
        assert_eq!(rules.cv_pct, Some(5.0));
        assert_eq!(rules.allow_op_types, vec!["Softmax"]);
        assert!(!rules.enabled(RuleName::NpuFlopsPct));
    }

    #[test]
    fn unknown_override_is_named() {
        let err = Rules::load(None, &["cv_pc=5".into()]).unwrap_err().to_string();
        assert!(err.contains("cv_pc"), "{err}");
    }
}
