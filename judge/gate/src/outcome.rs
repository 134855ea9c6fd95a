//! The overall outcome of a judgement (a verdict, a comparison, a confirmed run) and its exit code.

use npugate_result::contract::{EXIT_ERROR, EXIT_FAIL, EXIT_PASS};
use serde::{Deserialize, Serialize};

/// Overall result.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every check passed.
    Pass,
    /// At least one check failed.
    Fail,
    /// Nothing failed, but something could not be judged: evidence was missing.
    Error,
    /// Nothing failed and no evidence was missing, but the machine dominated what a latency rule
    /// reads (a busy CPU, a clock or temperature change): the rule was not judged, with the
    /// measured cause and the fix. Exit code 2, like [`Outcome::Error`]: not a verdict on the model.
    NotJudged,
    /// No rule was asked for (`npugate run --no-gate`): the run was measured, not judged. Exit
    /// code 0: the run succeeded.
    Measured,
}

impl Outcome {
    /// Upper-case label for reports.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Error => "ERROR",
            Outcome::NotJudged => "NOT JUDGED",
            Outcome::Measured => "MEASURED",
        }
    }

    /// The process exit code ([`npugate_result::contract`]): 0 pass or measured, 1 fail, 2 error or
    /// not judged.
    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Pass | Outcome::Measured => EXIT_PASS,
            Outcome::Fail => EXIT_FAIL,
            Outcome::Error | Outcome::NotJudged => EXIT_ERROR,
        }
    }
}
