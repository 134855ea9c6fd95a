//! The verdict: every rule's outcome with the numbers and nodes behind it, serialized as
//! `npugate.verdict/1` and rendered in every report format (`export`).

use std::path::Path;

use npugate_profile::report::PlacementReport;
use npugate_result::contract::{self, Document, Schema};
use npugate_result::{ReadError, RunResult};
use serde::{Deserialize, Serialize};

pub use crate::check::{Check, CheckStatus, Culprit};
use crate::confirm::Confirmation;
use crate::fingerprint::Fingerprint;
use crate::machine::ContentionSummary;
pub use crate::outcome::Outcome;
use crate::outputs::OutputsReport;
use crate::rules::Rules;
use crate::stats::{LatencyStats, MedianRatio};

/// Schema identifier of a serialized [`Verdict`] (1.1: the `not_judged` outcome and check status,
/// `contention`).
pub const VERDICT_SCHEMA: &str = "npugate.verdict/1.1";
/// Schema identifier of a measure-only run's [`Verdict`] (`npugate run --no-gate`; 1.2: the
/// `measured` outcome). A verdict judged by rules is still written as [`VERDICT_SCHEMA`], so
/// every reader of 1.1 reads it.
pub const MEASURED_SCHEMA: &str = "npugate.verdict/1.2";
/// What the report of a measure-only run says where a verdict shows its rules.
pub const NO_RULES: &str = "none: a measurement only (npugate run --no-gate); `npugate gate RESULT_DIR` judges it";

/// The judgement of one run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    /// Always [`VERDICT_SCHEMA`].
    pub schema: String,
    /// `fail` if any check failed, else `error` if evidence was missing, else `not_judged` if the
    /// machine dominated what a rule reads, else `pass`.
    pub outcome: Outcome,
    /// What was judged.
    pub subject: Subject,
    /// The rules as applied (defaults, file and overrides merged).
    pub rules: Rules,
    /// One entry per enabled rule, in a fixed order.
    pub checks: Vec<Check>,
    /// Latency statistics of the runs the latency rules judged: every timed run but those set
    /// aside as contended (see `contention`); an LLM folder's decode steps with their growth with
    /// the context taken out ([`crate::decode`]); absent when the run has no timed runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyStats>,
    /// How busy the machine was while the runs were timed, and which runs it slowed (absent when
    /// the harness recorded no CPU wait: older harnesses, Windows, LLM folders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<ContentionSummary>,
    /// The timed runs in run order (ns), for plots.
    pub latencies_ns: Vec<u64>,
    /// The first (cold) inference after session creation (ns).
    pub first_inference_ns: u64,
    /// Creating the timed session, including EP graph compilation (ns).
    #[serde(default)]
    pub session_create_ns: u64,
    /// The placement report the placement rules read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementReport>,
    /// An LLM folder's generation: TTFT and decode statistics, tokens per second, the KV cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<GenerationSummary>,
    /// The comparison against a baseline, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineComparison>,
    /// The run's outputs against the reference outputs (`--check-outputs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<OutputsReport>,
    /// The memory the harness process held (`result.json` `memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<npugate_result::MemoryRecord>,
    /// Energy per inference on a device, or why it was not measured (`energy.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<npugate_result::energy::EnergyRecord>,
    /// Why (part of) the run could not be judged, one sentence each.
    pub errors: Vec<String>,
    /// Observations that do not fail the gate (drift, slow first run, the harness's warnings).
    pub warnings: Vec<String>,
    /// Every attempt when a latency failure was rerun (`--confirm K`); this verdict is the
    /// reported attempt's, its outcome the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Confirmation>,
}

/// An LLM folder run's generation, as judged: what the generation rules read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GenerationSummary {
    /// `decoder` or `pipeline`.
    pub layout: String,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Decode steps per generation.
    pub gen_tokens: u32,
    /// Timed generations.
    pub generations: u32,
    /// Time to first token over the generations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<LatencyStats>,
    /// Per-token decode latency over every step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode: Option<LatencyStats>,
    /// Prompt tokens per second.
    pub prefill_tok_s: f64,
    /// Generated tokens per second.
    pub decode_tok_s: f64,
    /// How the KV cache was carried and how large it grew.
    pub kv: npugate_result::KvCache,
    /// The thread counts the sessions ran with, and where they come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<npugate_result::GenerationThreads>,
    /// Peak resident memory of the harness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
}

impl GenerationSummary {
    /// The summary of a result's generation section.
    pub fn of(generation: &npugate_result::Generation) -> GenerationSummary {
        GenerationSummary {
            layout: generation.layout.clone(),
            prompt_tokens: generation.prompt_tokens,
            gen_tokens: generation.gen_tokens,
            generations: generation.generations,
            ttft: generation.ttft.clone(),
            decode: generation.decode.clone(),
            prefill_tok_s: generation.prefill_tok_s,
            decode_tok_s: generation.decode_tok_s,
            kv: generation.kv.clone(),
            threads: generation.threads.clone(),
            peak_rss_bytes: generation.peak_rss_bytes,
        }
    }
}

/// The run that was judged.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Subject {
    /// Model path as the harness was given it.
    pub model: String,
    /// Identity of device, runtime and model.
    pub fingerprint: Fingerprint,
    /// `complete` or `incomplete` as the harness wrote it.
    pub run_status: String,
    /// What ran instead of hardware, when the run was emulated (`result.json` `execution.emulated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated: Option<String>,
}

impl Subject {
    /// The subject of a run.
    pub fn of(run: &RunResult) -> Subject {
        // An LLM folder is named by its folder, not its genai_config.json.
        let model = match run.model.path.strip_suffix("genai_config.json").filter(|_| run.generation.is_some()) {
            Some(folder) => folder.trim_end_matches(['/', '\\']).to_string(),
            None => run.model.path.clone(),
        };
        Subject {
            model,
            fingerprint: Fingerprint::of(run),
            run_status: format!("{:?}", run.status).to_lowercase(),
            emulated: run.execution.emulated.clone(),
        }
    }

    /// The model's file name (the path without its directories).
    pub fn model_file(&self) -> &str {
        self.model.rsplit(['/', '\\']).next().unwrap_or(&self.model)
    }

    /// One line: model file name, EP, device and SoC.
    pub fn summary(&self) -> String {
        let file = self.model_file();
        let fp = &self.fingerprint;
        format!("{file} on {} ({}, {}), ORT {}", fp.preferred_ep, fp.device, fp.soc, fp.ort_version)
    }
}

/// The comparison against a baseline.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BaselineComparison {
    /// Where the baseline came from.
    pub source: String,
    /// The baseline's fingerprint.
    pub fingerprint: Fingerprint,
    /// How this run's fingerprint differs (empty when comparable).
    pub fingerprint_differences: Vec<String>,
    /// True when the comparison was forced across different fingerprints.
    pub forced: bool,
    /// Median of this run / median of the baseline, with its interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_ratio: Option<MedianRatio>,
    /// LLM folders: median TTFT of this run / the baseline's, with its interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ratio: Option<MedianRatio>,
    /// Nodes on the preferred EP in the baseline and elsewhere now (not excused).
    pub moved_off_preferred: Vec<Culprit>,
}

impl Document for Verdict {
    const SCHEMA: Schema = Schema::new(VERDICT_SCHEMA);
}

impl Verdict {
    /// Reads a verdict file, refusing any schema but [`VERDICT_SCHEMA`]'s major version.
    pub fn read(path: &Path) -> Result<Verdict, ReadError> {
        contract::read(path)
    }

    /// Writes the verdict as pretty JSON, atomically.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        contract::write_json(path, self)
    }

    /// The command its report is titled by: `npugate run` for a measurement, `npugate gate` for a
    /// judgement.
    pub fn title(&self) -> &'static str {
        match self.outcome {
            Outcome::Measured => "npugate run",
            _ => "npugate gate",
        }
    }

    /// The process exit code of this verdict.
    pub fn exit_code(&self) -> u8 {
        self.outcome.exit_code()
    }

    /// The checks that failed.
    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.status == CheckStatus::Fail)
    }
}
