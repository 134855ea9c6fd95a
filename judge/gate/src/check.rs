//! One rule's outcome as the verdict holds it ([`Check`]), with the nodes it blames: the type every
//! judging module (latency, machine, background, resources, …) produces and the verdict collects.
//! It depends on no judging module, so they and the verdict all point here.

use npugate_profile::report::FallbackNode;
use serde::{Deserialize, Serialize};

use crate::rules::RuleName;
use crate::stats::ClusterSplit;
use crate::units::{fmt_ms_from_us, fmt_pct, Unit};

/// One rule's outcome.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Check {
    /// The rule.
    pub rule: RuleName,
    /// Pass, fail or unjudged.
    pub status: CheckStatus,
    /// The measured value in `unit` (absent when it could not be measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<f64>,
    /// The configured limit in `unit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    /// Unit of `measured` and `limit`.
    pub unit: Unit,
    /// One sentence: what, how much, and which node or cluster.
    pub message: String,
    /// The nodes that made the check fail, worst first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<Culprit>,
    /// The two latency clusters, when the series is bimodal and the rule reads latencies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<ClusterSplit>,
}

/// Status of one check.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// Within the limit.
    Pass,
    /// Beyond the limit, or too few runs to hold the limit.
    Fail,
    /// The data the rule reads is missing (no placement report, no profile, refused baseline).
    Unjudged,
    /// The rule does not apply to this run, by design (latency of a run on an emulator): shown
    /// with the reason, never counted for the outcome.
    NotApplicable,
    /// Measured, but the machine dominated what the rule reads: too few runs were left once the
    /// runs a busy CPU slowed were set aside, or the device's clock or temperature changed during
    /// the run. Shown with the measured cause and the fix; never a failure.
    NotJudged,
}

impl CheckStatus {
    /// Upper-case label for reports.
    pub fn label(self) -> &'static str {
        match self {
            CheckStatus::Pass => "PASS",
            CheckStatus::Fail => "FAIL",
            CheckStatus::Unjudged => "UNJUDGED",
            CheckStatus::NotApplicable => "N/A",
            CheckStatus::NotJudged => "NOT JUDGED",
        }
    }
}

/// A node blamed by a check.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Culprit {
    /// Node name.
    pub name: String,
    /// Operator type.
    pub op_type: String,
    /// EP it ran on.
    pub ep: String,
    /// EP it ran on in the baseline (placement diff only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_ep: Option<String>,
    /// Percent of the model's known FLOPs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops_pct: Option<f64>,
    /// Median kernel time per run (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_us_per_run: Option<f64>,
    /// The EP's rejection reason, when logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A remedy, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Culprit {
    /// A culprit from a fallback node of the placement report.
    pub fn from_fallback(node: &FallbackNode) -> Culprit {
        Culprit {
            name: node.name.clone(),
            op_type: node.op_type.clone(),
            ep: node.ep.clone(),
            baseline_ep: None,
            flops_pct: Some(node.flops_pct),
            time_us_per_run: node.time_us_per_run,
            reason: node.reason.clone(),
            hint: node.hint.clone(),
        }
    }

    /// `LayerNormalization node /model.10/m.0/norm (12.3% of FLOPs, 1.8 ms/run) runs on CPUExecutionProvider`.
    pub fn describe(&self) -> String {
        let mut costs = Vec::new();
        if let Some(pct) = self.flops_pct {
            costs.push(format!("{} of FLOPs", fmt_pct(pct)));
        }
        if let Some(us) = self.time_us_per_run {
            costs.push(format!("{}/run", fmt_ms_from_us(us)));
        }
        let costs = if costs.is_empty() { String::new() } else { format!(" ({})", costs.join(", ")) };
        match &self.baseline_ep {
            Some(before) => format!("{} node {}{costs} moved from {before} to {}", self.op_type, self.name, self.ep),
            None => format!("{} node {}{costs} runs on {}", self.op_type, self.name, self.ep),
        }
    }
}

/// A check of `rule` with its limit and no nodes.
pub(crate) fn check(
    rule: RuleName,
    status: CheckStatus,
    measured: Option<f64>,
    limit: f64,
    unit: Unit,
    message: String,
) -> Check {
    Check { rule, status, measured, limit: Some(limit), unit, message, nodes: Vec::new(), clusters: None }
}

/// A check whose evidence is missing.
pub(crate) fn unjudged(rule: RuleName, limit: f64, unit: Unit, message: String) -> Check {
    check(rule, CheckStatus::Unjudged, None, limit, unit, message)
}

/// Pass when `ok`, else fail.
pub(crate) fn pass_or_fail(ok: bool) -> CheckStatus {
    if ok {
        CheckStatus::Pass
    } else {
        CheckStatus::Fail
    }
}
