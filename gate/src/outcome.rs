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
    /// Nothing failed, but something could not be judged.
    Error,
}

impl Outcome {
    /// Upper-case label for reports.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Error => "ERROR",
        }
    }

    /// The process exit code ([`npugate_result::contract`]): 0 pass, 1 fail, 2 error.
    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Pass => EXIT_PASS,
            Outcome::Fail => EXIT_FAIL,
            Outcome::Error => EXIT_ERROR,
        }
    }
}
