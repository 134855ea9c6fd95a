//! Which runs the machine slowed, not the model: the runs whose own wait for a CPU explains why
//! they were slow.
//!
//! Definition. For each timed run `i` the harness records its latency `Lᵢ` and its run-queue delay
//! `Dᵢ` — the time the process's threads were runnable but waited for a CPU, summed over the
//! threads, read around the run. Each run is judged by its own measurement against a reference
//! `r` taken from the runs that did not wait:
//!
//! - the **reference** `r` is the lower quartile (type 7) of the latencies of the runs that waited
//!   for at most [`SLOW_RUN_PCT`]% of their own time (`Dᵢ ≤ 5% · Lᵢ`: nothing to explain, whatever
//!   else the series holds) — the fastest clean runs — when there are at least
//!   [`MIN_REFERENCE_RUNS`] of them; else — every run waited — of all runs. A majority of slowed
//!   runs therefore never becomes the reference (it did with a median of all runs: issue 44's 59%
//!   of runs at 6.58 ms that waited 8 ms each set the "clean median" at 6.46 ms, against 2.35 ms
//!   unwaited).
//! - run `i`'s excess is `eᵢ = Lᵢ − r`; it is **contended** when it is slow, `eᵢ > r · 5%`, and its
//!   wait explains it: `Dᵢ ≥ EXPLAINED_SHARE · eᵢ` (it waited for a CPU at least half of the time it
//!   lost).
//!
//! What the run-queue delay does not see: a run whose intra-op workers found every other CPU
//! taken and left their share to the measuring thread runs serially without any thread waiting in
//! a run queue. Measured on this 2-core machine under one CPU burner, a ≈1 ms model alternated
//! between 0.55 ms (two threads) and 1.0 ms (one) with no delay in either, and ran at 1.0 ms
//! steadily with `--intra-threads 1`; the threads' CPU time in `schedstat` (its 1st field) moves
//! in whole scheduler ticks (4 ms here) for a thread that keeps its CPU, too coarse to tell per run.
//! Such runs stay in the series (a bimodal latency whose cause the verdict names when measured).
//!
//! The **clean median** is the median latency of the runs not contended.
//!
//! A preempted run waits about as long as it lost (one thread preempted for a 4 ms time slice: a
//! run 4 ms slower, 4 ms of delay), so the ratio `Dᵢ / eᵢ` of a contended run is near 1 — above 1
//! when several threads waited at once. A run slowed by the model or the device — part of the
//! graph on another processor, a lower clock, heat — is slow without having waited: its delay is
//! a small part of its excess, and it stays in the series the latency rules judge. A run that
//! waited but was not slow (a spinning worker preempted while the main thread did the work) stays
//! too: the wait cost it nothing.

use serde::{Deserialize, Serialize};

use crate::{median, percentile};

/// A run counts as slow when its latency exceeds the clean median by more than this (percent).
pub const SLOW_RUN_PCT: f64 = 5.0;
/// A slow run's wait explains its excess when it is at least this share of the excess.
pub const EXPLAINED_SHARE: f64 = 0.5;
/// Runs that waited at most [`SLOW_RUN_PCT`]% of their own time needed to take the reference from
/// them; with fewer, the reference is the median of the fastest quarter of all runs.
pub const MIN_REFERENCE_RUNS: usize = 3;

/// One run set aside: slow, and its wait for a CPU explains why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ContendedRun {
    /// Its index in run order, from 0.
    pub index: usize,
    /// Its latency (ns).
    pub latency_ns: u64,
    /// Its run-queue delay (ns).
    pub wait_ns: u64,
}

/// The runs of a series the machine slowed, against the median of the others.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Contention {
    /// Runs in the series.
    pub runs: usize,
    /// Median latency of the runs not contended (ns).
    pub clean_median_ns: f64,
    /// The latency a run's excess is measured from (ns): the median of the runs that did not wait
    /// (see the module's definition). Absent in records written before it existed.
    #[serde(default)]
    pub reference_ns: f64,
    /// The contended runs, in run order.
    pub contended: Vec<ContendedRun>,
    /// Runs whose threads waited for a CPU at all (delay > 0), contended or not.
    pub runs_that_waited: usize,
    /// Run-queue delay over every run (ns).
    pub total_wait_ns: u64,
}

impl Contention {
    /// The contention of a series: `latencies_ns[i]` and `run_queue_delay_ns[i]` of run `i`.
    /// `None` when the series is empty or the two lengths differ.
    pub fn of(latencies_ns: &[u64], run_queue_delay_ns: &[u64]) -> Option<Contention> {
        if latencies_ns.is_empty() || latencies_ns.len() != run_queue_delay_ns.len() {
            return None;
        }
        let runs: Vec<(u64, u64)> = latencies_ns.iter().copied().zip(run_queue_delay_ns.iter().copied()).collect();
        let reference = reference_of(&runs)?;
        let marked: Vec<bool> = runs.iter().map(|&(latency, wait)| is_contended(latency, wait, reference)).collect();
        let clean: Vec<f64> = runs.iter().zip(&marked).filter(|(_, &m)| !m).map(|((l, _), _)| *l as f64).collect();
        let clean_median = median(&clean).unwrap_or(reference);
        let contended = runs
            .iter()
            .zip(&marked)
            .enumerate()
            .filter(|(_, (_, &m))| m)
            .map(|(index, (&(latency_ns, wait_ns), _))| ContendedRun { index, latency_ns, wait_ns })
            .collect();
        Some(Contention {
            runs: runs.len(),
            clean_median_ns: clean_median,
            reference_ns: reference,
            contended,
            runs_that_waited: run_queue_delay_ns.iter().filter(|&&d| d > 0).count(),
            total_wait_ns: run_queue_delay_ns.iter().sum(),
        })
    }

    /// Runs not contended.
    pub fn clean_runs(&self) -> usize {
        self.runs - self.contended.len()
    }

    /// The latencies of the runs not contended, in run order.
    pub fn clean_latencies(&self, latencies_ns: &[u64]) -> Vec<u64> {
        let mut contended = self.contended.iter().map(|run| run.index).peekable();
        latencies_ns
            .iter()
            .enumerate()
            .filter(|(index, _)| {
                let skip = contended.peek() == Some(index);
                if skip {
                    contended.next();
                }
                !skip
            })
            .map(|(_, &ns)| ns)
            .collect()
    }

    /// True when run `index` (from 0) is contended.
    pub fn is_contended(&self, index: usize) -> bool {
        self.contended.binary_search_by_key(&index, |run| run.index).is_ok()
    }
}

/// True when a run waited for at most [`SLOW_RUN_PCT`]% of its own latency.
fn unwaited(latency_ns: u64, wait_ns: u64) -> bool {
    wait_ns as f64 <= latency_ns as f64 * SLOW_RUN_PCT / 100.0
}

/// The reference latency of `runs` (latency, wait): the lower quartile of the runs that waited at
/// most [`SLOW_RUN_PCT`]% of their own latency, or of all runs when fewer than
/// [`MIN_REFERENCE_RUNS`] did.
fn reference_of(runs: &[(u64, u64)]) -> Option<f64> {
    let unwaited: Vec<f64> =
        runs.iter().filter(|&&(latency, wait)| unwaited(latency, wait)).map(|&(latency, _)| latency as f64).collect();
    if unwaited.len() >= MIN_REFERENCE_RUNS.min(runs.len()) {
        return percentile(&unwaited, 25.0);
    }
    percentile(&runs.iter().map(|&(latency, _)| latency as f64).collect::<Vec<_>>(), 25.0)
}

/// Slow by more than [`SLOW_RUN_PCT`] of `reference_ns` and waited at least [`EXPLAINED_SHARE`] of
/// the excess.
fn is_contended(latency_ns: u64, wait_ns: u64, reference_ns: f64) -> bool {
    let excess = latency_ns as f64 - reference_ns;
    excess > reference_ns * SLOW_RUN_PCT / 100.0 && wait_ns as f64 >= EXPLAINED_SHARE * excess
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn preempted_runs_are_set_aside_and_the_clean_median_is_the_rest() {
        // 0.54 ms runs; every 8th preempted for a 4 ms slice (it waited 4 ms).
        let latencies: Vec<u64> =
            (0..40).map(|i| if i % 8 == 3 { 540_000 + 4 * MS } else { 540_000 + (i % 5) * 1_000 }).collect();
        let delays: Vec<u64> = (0..40).map(|i| if i % 8 == 3 { 4 * MS } else { 0 }).collect();
        let c = Contention::of(&latencies, &delays).unwrap();
        assert_eq!(c.contended.iter().map(|r| r.index).collect::<Vec<_>>(), [3, 11, 19, 27, 35]);
        assert_eq!(c.clean_runs(), 35);
        assert!((c.clean_median_ns - 542_000.0).abs() < 1_000.0, "{}", c.clean_median_ns);
        assert_eq!(c.clean_latencies(&latencies).len(), 35);
        assert!(c.clean_latencies(&latencies).iter().all(|&ns| ns < MS));
        assert!(c.is_contended(11) && !c.is_contended(12));
        assert_eq!((c.runs_that_waited, c.total_wait_ns), (5, 20 * MS));
    }

    #[test]
    fn slow_runs_that_did_not_wait_stay_and_waits_that_cost_nothing_stay() {
        // A partial fallback: every 4th run 2× slower without waiting; a spinning worker that
        // waited 3 ms in a fast run.
        let latencies: Vec<u64> = (0..40).map(|i| if i % 4 == 0 { 2 * MS } else { MS }).collect();
        let delays: Vec<u64> = (0..40)
            .map(|i| {
                if i == 5 {
                    3 * MS
                } else if i % 4 == 0 {
                    50_000
                } else {
                    0
                }
            })
            .collect();
        let c = Contention::of(&latencies, &delays).unwrap();
        assert!(c.contended.is_empty(), "{c:?}");
        assert_eq!(c.clean_median_ns, MS as f64);
        assert_eq!(c.runs_that_waited, 11);
    }

    #[test]
    fn a_majority_of_contended_runs_still_finds_the_clean_median() {
        // 60% of the runs preempted by 2–6 ms: the median of all runs is a contended one, the
        // iteration comes down to the clean runs.
        let latencies: Vec<u64> =
            (0..50).map(|i| if i % 5 < 3 { MS + (2 + i % 3) * MS } else { MS + (i % 7) * 5_000 }).collect();
        let delays: Vec<u64> = (0..50).map(|i| if i % 5 < 3 { (2 + i % 3) * MS } else { 0 }).collect();
        let c = Contention::of(&latencies, &delays).unwrap();
        assert_eq!((c.contended.len(), c.clean_runs()), (30, 20));
        assert!(c.clean_median_ns < 1.05 * MS as f64, "{}", c.clean_median_ns);
    }

    #[test]
    fn a_contended_majority_never_becomes_the_reference() {
        // Issue 44: 59% of runs at 6.58 ms that waited 8 ms each, 41% at 2.35 ms that did not wait.
        let latencies: Vec<u64> =
            (0..30).map(|i| if i % 5 < 3 { 6_580_000 + i * 1_000 } else { 2_350_000 + i * 1_000 }).collect();
        let delays: Vec<u64> = (0..30).map(|i| if i % 5 < 3 { 8 * MS } else { 20_000 }).collect();
        let c = Contention::of(&latencies, &delays).unwrap();
        assert_eq!((c.contended.len(), c.clean_runs()), (18, 12), "{c:?}");
        assert!(c.reference_ns < 2.5e6 && c.clean_median_ns < 2.5e6, "{c:?}");
        // Every run waited (two burners): the fastest quarter is the reference, the slow runs whose
        // wait explains them are set aside, the fast ones stay.
        let delays: Vec<u64> = (0..30).map(|i| if i % 5 < 3 { 8 * MS } else { 400_000 }).collect();
        let c = Contention::of(&latencies, &delays).unwrap();
        assert_eq!(c.clean_runs(), 12, "{c:?}");
        assert!(c.reference_ns < 2.5e6, "{c:?}");
    }

    #[test]
    fn mismatched_or_empty_series_have_no_contention() {
        assert!(Contention::of(&[], &[]).is_none());
        assert!(Contention::of(&[1, 2], &[0]).is_none());
    }
}
