//! The gate: rules, baselines, the verdict and its formats, on the latency statistics of
//! `npugate_result::stats` (re-exported as [`stats`]).
//!
//! `judge(&Evidence { run, placement, outputs, baseline }, &rules) -> Verdict`, a kind of the one
//! report stream (`npugate_result::report::Report`, implemented in [`export`]), shown with
//! `report::write_all(&verdict, formats, out)` or `report::render_all`; for two models measured
//! interleaved on one device, `compare::judge_compare(&CompareEvidence, &CompareRules) ->
//! CompareVerdict`, reported the same way; [`confirm`] decides over the attempts of a rerun latency failure. [`page`] holds the building blocks every npugate
//! HTML page shares (the verdict report, the sweep matrix, the history page).

pub mod background;
pub mod baseline;
pub mod check;
pub mod compare;
pub mod confirm;
pub mod decode;
pub mod export;
pub mod fingerprint;
pub mod judge;
pub mod latency;
pub mod machine;
pub mod outcome;
pub mod outputs;
pub mod page;
pub mod resources;
pub mod rules;
pub mod slowdown;
pub mod units;
pub mod verdict;

/// Latency statistics: `npugate_result::stats`, re-exported for the gate's callers.
pub use npugate_result::stats;

pub use baseline::Baseline;
pub use judge::{judge, Comparison, Evidence, OutputsEvidence};
pub use rules::{RuleName, Rules};
pub use verdict::{Outcome, Verdict};
