//! The gate: latency statistics, rules, baselines, the verdict and its exporters.
//!
//! `judge(run, placement, rules, baseline) -> Verdict`, then `export::write_all(&verdict, formats, out)`.

pub mod background;
pub mod baseline;
pub mod export;
pub mod fingerprint;
pub mod judge;
pub mod outputs;
pub mod rules;
pub mod stats;
pub mod units;
pub mod verdict;

pub use baseline::Baseline;
pub use judge::{judge, judge_outputs, Comparison};
pub use rules::{RuleName, Rules};
pub use verdict::{Outcome, Verdict};
