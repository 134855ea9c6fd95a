//! Confirmation reruns (`--confirm K`): a latency rule that fails on a shared, noisy device is
//! often noise, so the run is repeated K more times and fails only when the failure reproduces in
//! a majority of all attempts. Every attempt stays in the record; nothing is hidden. Placement,
//! run-count and output failures are deterministic and never rerun ([`RuleName::reads_latency`]).
//! A latency failure of a run during which the machine was busy is confirmed without being asked
//! ([`CONTENTION_RERUNS`] reruns), and the decision says why.

use serde::{Deserialize, Serialize};

use crate::outcome::Outcome;
use crate::rules::RuleName;
use crate::units::fmt_ms;

/// Reruns that confirm a latency failure of a run during which the machine was busy, when no
/// `--confirm` was given: bounded, so a busy machine costs at most this many more runs.
pub const CONTENTION_RERUNS: u32 = 2;

/// True when a confirmation rerun can change the outcome: some rule failed and every failed rule
/// reads latencies.
pub fn worth_confirming(failed_rules: &[RuleName]) -> bool {
    !failed_rules.is_empty() && failed_rules.iter().all(|rule| rule.reads_latency())
}

/// One attempt of a confirmed run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Attempt {
    /// 1 for the first run, 2… for the confirmations.
    pub attempt: u32,
    /// Its result directory, relative to the final result (`attempt-1`, …).
    pub dir: String,
    /// Its own outcome.
    pub outcome: Outcome,
    /// The rules it failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_rules: Vec<RuleName>,
    /// Its headline latency (the median, or for a comparison the paired ratio), for the table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline: Option<String>,
}

/// The headline of a run: `median 8.10 ms`.
pub fn median_headline(median_ns: Option<f64>) -> Option<String> {
    median_ns.map(|ns| format!("median {}", fmt_ms(ns)))
}

/// How the attempts of a confirmed run add up.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Confirmation {
    /// Confirmation reruns asked for (`--confirm K`).
    pub asked: u32,
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
    /// Attempts that failed.
    pub failed: usize,
    /// The decision: `fail` when more than half of the attempts failed, else `error` when one could
    /// not be judged for missing evidence, else `not_judged` when the machine dominated one, else
    /// `pass`.
    pub outcome: Outcome,
    /// The attempt whose result and report stand for the decision (the last one that agrees with it).
    pub representative: u32,
    /// Why the attempts ran without `--confirm`: the machine was busy during the first attempt
    /// (its contention, in a phrase), so its latency failure was confirmed before the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<String>,
}

impl Confirmation {
    /// Decides over `attempts` (at least one), made for `--confirm asked`.
    pub fn decide(asked: u32, attempts: Vec<Attempt>) -> Confirmation {
        let failed = attempts.iter().filter(|a| a.outcome == Outcome::Fail).count();
        let outcome = if failed * 2 > attempts.len() {
            Outcome::Fail
        } else if attempts.iter().any(|a| a.outcome == Outcome::Error) {
            Outcome::Error
        } else if attempts.iter().any(|a| a.outcome == Outcome::NotJudged) {
            Outcome::NotJudged
        } else {
            Outcome::Pass
        };
        let representative =
            attempts.iter().rev().find(|a| a.outcome == outcome).or(attempts.last()).map_or(1, |a| a.attempt);
        Confirmation { asked, attempts, failed, outcome, representative, contention: None }
    }

    /// `failed 1 of 3, passed on confirmation` / `failed 3 of 3: the failure reproduced`, after
    /// why the reruns ran when the contention started them.
    pub fn sentence(&self) -> String {
        let why = match &self.contention {
            Some(contention) => format!(
                "the machine was busy ({contention}), so the latency failure was confirmed by {} rerun(s): ",
                self.asked
            ),
            None => String::new(),
        };
        format!("{why}{}", self.decision())
    }

    /// The decision in words.
    fn decision(&self) -> String {
        let (failed, of) = (self.failed, self.attempts.len());
        match self.outcome {
            Outcome::Pass => format!("failed {failed} of {of}, passed on confirmation"),
            Outcome::Fail => format!("failed {failed} of {of}: the failure reproduced"),
            Outcome::Error => format!("failed {failed} of {of}, and an attempt could not be judged"),
            Outcome::NotJudged => format!("failed {failed} of {of}, and an attempt was not judged (the machine)"),
            // A confirmation reruns a failed rule: a run without rules is never confirmed.
            Outcome::Measured => format!("failed {failed} of {of}, then measured without rules"),
        }
    }

    /// One row per attempt: attempt, directory, outcome, failed rules, headline.
    pub fn rows(&self) -> Vec<[String; 5]> {
        self.attempts
            .iter()
            .map(|a| {
                let rules: Vec<&str> = a.failed_rules.iter().map(|r| r.as_str()).collect();
                let marker = if a.attempt == self.representative { " (reported)" } else { "" };
                [
                    format!("{}{marker}", a.attempt),
                    a.dir.clone(),
                    a.outcome.label().to_string(),
                    rules.join(", "),
                    a.headline.clone().unwrap_or_default(),
                ]
            })
            .collect()
    }
}

/// Header of [`Confirmation::rows`].
pub const ATTEMPT_HEADER: [&str; 5] = ["attempt", "dir", "outcome", "failed rules", "latency"];

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(n: u32, outcome: Outcome) -> Attempt {
        let failed_rules = if outcome == Outcome::Fail { vec![RuleName::MedianMs] } else { vec![] };
        Attempt { attempt: n, dir: format!("attempt-{n}"), outcome, failed_rules, headline: None }
    }

    #[test]
    fn a_majority_of_failures_fails_and_the_reported_attempt_agrees() {
        let once = Confirmation::decide(
            2,
            vec![attempt(1, Outcome::Fail), attempt(2, Outcome::Pass), attempt(3, Outcome::Pass)],
        );
        assert_eq!((once.outcome, once.failed, once.representative), (Outcome::Pass, 1, 3));
        assert_eq!(once.sentence(), "failed 1 of 3, passed on confirmation");
        let twice = Confirmation::decide(
            2,
            vec![attempt(1, Outcome::Fail), attempt(2, Outcome::Pass), attempt(3, Outcome::Fail)],
        );
        assert_eq!((twice.outcome, twice.representative), (Outcome::Fail, 3));
        assert_eq!(twice.sentence(), "failed 2 of 3: the failure reproduced");
        let tie = Confirmation::decide(1, vec![attempt(1, Outcome::Fail), attempt(2, Outcome::Pass)]);
        assert_eq!((tie.outcome, tie.representative), (Outcome::Pass, 2), "one failure in two did not reproduce");
        let broken = Confirmation::decide(
            2,
            vec![attempt(1, Outcome::Fail), attempt(2, Outcome::Error), attempt(3, Outcome::Pass)],
        );
        assert_eq!((broken.outcome, broken.representative), (Outcome::Error, 2));
        assert_eq!(once.rows()[2][0], "3 (reported)");
    }

    #[test]
    fn only_latency_failures_are_worth_a_rerun() {
        assert!(worth_confirming(&[RuleName::MedianMs]));
        assert!(worth_confirming(&[RuleName::MaxSlowdownPct, RuleName::CvPct]));
        assert!(
            !worth_confirming(&[RuleName::MedianMs, RuleName::NpuFlopsPct]),
            "a placement failure is deterministic"
        );
        assert!(!worth_confirming(&[]), "nothing failed");
        assert!(!worth_confirming(&[RuleName::PlacementMustMatch]));
        assert!(!worth_confirming(&[RuleName::MinRuns]));
    }
}
