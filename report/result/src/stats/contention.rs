//! Which runs the machine slowed, not the model: the runs whose own wait for a CPU explains why
//! they were slow.
//!
//! Definition. For each timed run `i` the harness records its latency `Lᵢ` and its CPU wait `Dᵢ`
//! — the time the process's threads were runnable but waited for a CPU during the run, summed over
//! the threads (see **Each run's wait** below). Each run is judged by its own measurement against
//! a reference `r` taken from the runs that did not wait:
//!
//! - the **reference** `r` is the lower quartile (type 7) of the latencies of the runs that waited
//!   for at most [`SLOW_RUN_PCT`]% of their own time (`Dᵢ ≤ 5% · Lᵢ`: nothing to explain, whatever
//!   else the series holds) — the fastest clean runs — when there are at least
//!   [`MIN_REFERENCE_RUNS`] of them; else — every run waited — of all runs. A majority of slowed
//!   runs therefore never becomes the reference (it did with a median of all runs: issue 44's 59%
//!   of runs at 6.58 ms that waited 8 ms each set the "clean median" at 6.46 ms, against 2.35 ms
//!   unwaited).
//! - run `i`'s excess is `eᵢ = Lᵢ − r`; it is **contended** when it is slow, `eᵢ > r · 5%`, and it
//!   waited for a CPU: its wait explains it, `Dᵢ ≥ EXPLAINED_SHARE · eᵢ` (it waited at least half of
//!   the time it lost), or it waited more than [`SLOW_RUN_PCT`]% of its own time, `Dᵢ > 5% · Lᵢ`: a
//!   run that shared the CPUs with other runnable work loses more than its wait (its threads ran
//!   beside that work on sibling hyperthreads and shared caches; measured here under one burner:
//!   runs 0.13 ms slower than the reference that waited 0.075 ms, `cv_pct` 8.7–9.4% on the runs
//!   kept). A slow run that waited at most 5% of its time is the model's, whatever the machine did
//!   (a partial fallback's slow runs stay in the series: see the tests).
//!
//! **Each run's wait** `Dᵢ` is what the threads' counters prove it waited ([`attributed_waits`]),
//! not the delay counted between the two readings around it: `schedstat`'s run-queue delay grows
//! only when a waiting thread gets a CPU, so a worker that found every other CPU taken at the
//! start of a run — the measuring thread then ran its share serially — counts its wait in a
//! later run's reading, or in none (measured on this 2-core machine under one CPU burner: a
//! ≈1 ms model alternated between 0.55 ms with both intra-op threads on a CPU and 1.0 ms with
//! one, the slow runs with no delay counted, the worker's 10–40 ms of delay counted runs later).
//! The harness reads, per thread and before and after every run, the thread CPU clock
//! (`clock_gettime` of the thread's clock: it includes the slice running now, where `schedstat`'s
//! 1st field lags by up to a tick), the run-queue delay, the times it blocked
//! (`voluntary_ctxt_switches`), and, last in a reading, its CPU clock again and its state. Per
//! thread and run, the larger of what its state proves and what its counted delays prove, at most
//! the run's latency, summed over the threads:
//!
//! - **runnable through the run**: in state `R` as the reading before the run ended and never
//!   blocked until the reading after it — a thread that does not run cannot block, one that blocks
//!   counts a voluntary switch — it was running or waiting throughout the run, so it waited for all
//!   of the run it did not run: `L − (its CPU time from before its state was read to after the
//!   run)`. This is the case above: the worker, runnable and on no CPU, waited the whole 1.0 ms.
//! - **waited before it was counted**: a delay `Δ` counted at a reading, over a window `W` from
//!   the start of the reading before it, in which the thread also ran `c`: waits and CPU time
//!   are disjoint, so at least `Δ + c − W` of it was waited before the window, in one wait
//!   reaching up to the window's start; that part is placed back onto the runs it overlapped,
//!   latest first — the latest placement the counters allow, a lower bound.
//! - **waited inside the window**: the rest of `Δ`, less the window's time outside the run.
//!
//! Each is a lower bound of what the thread waited during the run; none is inferred from the
//! latency. Still not seen: a thread that blocked during the run and was woken to wait for a CPU
//! (its wait is placed only as far as the counted delay proves), and a run slowed by a thread that
//! was not alive when the loop started; on a kernel without a thread CPU clock or `stat` state, only
//! the counted delays are placed.
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

use super::{median, percentile};

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

/// Slow by more than [`SLOW_RUN_PCT`] of `reference_ns`, and waited for a CPU: at least
/// [`EXPLAINED_SHARE`] of the excess, or more than [`SLOW_RUN_PCT`]% of its own time (it shared the
/// machine with other runnable work, which slows a run beyond its own wait).
fn is_contended(latency_ns: u64, wait_ns: u64, reference_ns: f64) -> bool {
    let excess = latency_ns as f64 - reference_ns;
    let waited = wait_ns as f64 >= EXPLAINED_SHARE * excess || !unwaited(latency_ns, wait_ns);
    excess > reference_ns * SLOW_RUN_PCT / 100.0 && waited
}

/// One thread's counters at one reading, all cumulative.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadCounters {
    /// Nanoseconds the thread was runnable but waited for a CPU, counted when it got one
    /// (`schedstat`'s 2nd field).
    pub run_delay_ns: u64,
    /// Nanoseconds the thread ran (its thread CPU clock, which includes the slice it is running),
    /// read first in the reading, before any other counter; `None` when it could not be read.
    pub cpu_ns: Option<u64>,
    /// When the thread was runnable (state `R`: running or waiting for a CPU) as the reading ended:
    /// its CPU clock read just before that state was; `None` when it was not runnable or unknown.
    pub runnable_at_cpu_ns: Option<u64>,
    /// Times the thread blocked (`voluntary_ctxt_switches` in its `status`), read with its delay;
    /// `None` when unknown.
    pub blocked: Option<u64>,
}

/// One timed run on the readings' clock, and the reading that followed it (the one before it is
/// the reading just before that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSpan {
    /// Its start (ns, on the readings' clock).
    pub start_ns: u64,
    /// Its end (ns).
    pub end_ns: u64,
    /// The index of the first reading taken after it.
    pub after_reading: usize,
}

impl RunSpan {
    fn latency_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// The readings of every thread's counters through a timed loop: reading `j` began at
/// `began_ns[j]` and ended at `ended_ns[j]`; `counters[j * threads + t]` is what thread `t` said.
#[derive(Debug, Clone, Copy)]
pub struct Readings<'a> {
    /// When each reading began (ns, ascending).
    pub began_ns: &'a [u64],
    /// When each reading ended (ns).
    pub ended_ns: &'a [u64],
    /// Reading-major: the counters of every thread at reading 0, then at reading 1, …
    pub counters: &'a [ThreadCounters],
    /// Threads per reading.
    pub threads: usize,
}

/// The CPU wait of each run of `runs` (in run order) that its threads' counters prove, as the
/// module's definition says: per thread, a run it waited through; the part of a delay that must
/// have happened before the reading it was counted at, placed back onto the runs it overlapped
/// latest first; the part that must have overlapped the run between the two readings. A thread's
/// share of a run is at most the run's latency. Runs whose readings are missing get 0.
pub fn attributed_waits(readings: Readings<'_>, runs: &[RunSpan]) -> Vec<u64> {
    let count = readings.began_ns.len().min(readings.ended_ns.len());
    let mut total = vec![0u64; runs.len()];
    if readings.threads == 0 || readings.counters.len() < count * readings.threads {
        return total;
    }
    // Per run, for the thread at hand: what its state proves, and what its counted delays do.
    let (mut through, mut placed) = (vec![0u64; runs.len()], vec![0u64; runs.len()]);
    for thread in 0..readings.threads {
        through.iter_mut().chain(placed.iter_mut()).for_each(|ns| *ns = 0);
        let counters = |j: usize| readings.counters[j * readings.threads + thread];
        for j in 1..count {
            let (before, after) = (counters(j - 1), counters(j));
            // The runs that ended before reading j − 1; the run between readings j − 1 and j.
            let ended = runs.partition_point(|run| run.after_reading < j);
            let inside = runs.get(ended).filter(|run| run.after_reading == j).map(|_| ended);
            if let Some(k) = inside {
                through[k] = runnable_through(before, after, runs[k].latency_ns());
            }
            place_delay(&readings, j, (before, after), runs, (ended, inside), &mut placed);
        }
        for (((total, through), placed), run) in total.iter_mut().zip(&through).zip(&placed).zip(runs) {
            *total += (*through).max(*placed).min(run.latency_ns());
        }
    }
    total
}

/// What a thread runnable as the reading `before` a run ended, and never blocked until the
/// reading `after` it, waited during the run of `latency_ns`: all of it that it did not run (a
/// thread that does not run cannot block; one that blocks counts a voluntary switch). 0 when the
/// counters do not show that.
fn runnable_through(before: ThreadCounters, after: ThreadCounters, latency_ns: u64) -> u64 {
    match (before.runnable_at_cpu_ns, after.cpu_ns) {
        (Some(runnable_at), Some(cpu)) if before.blocked.is_some() && before.blocked == after.blocked => {
            latency_ns.saturating_sub(cpu.saturating_sub(runnable_at))
        }
        _ => 0,
    }
}

/// Places one thread's delay counted at reading `j` onto the runs it must have overlapped, adding
/// to `placed`: the part that must have been waited before reading `j − 1` began onto the runs
/// before, latest first; the rest, less the window's time outside the run, onto the run between.
fn place_delay(
    readings: &Readings<'_>,
    j: usize,
    (before, after): (ThreadCounters, ThreadCounters),
    runs: &[RunSpan],
    (ended, inside): (usize, Option<usize>),
    placed: &mut [u64],
) {
    let ran = before.cpu_ns.zip(after.cpu_ns).map(|(before, after)| after.saturating_sub(before));
    let delay = after.run_delay_ns.saturating_sub(before.run_delay_ns);
    if delay == 0 {
        return;
    }
    // Counted waits and CPU time since reading j − 1 began fit in the window; the rest was
    // waited before, contiguously up to that moment (one wait spans it).
    let since = readings.began_ns[j - 1];
    let window = readings.ended_ns[j].saturating_sub(since);
    let earlier = delay.saturating_add(ran.unwrap_or(0)).saturating_sub(window).min(delay);
    if let Some(k) = inside {
        placed[k] += (delay - earlier).saturating_sub(window.saturating_sub(runs[k].latency_ns()));
    }
    let placed_from = since.saturating_sub(earlier);
    for k in (0..ended).rev() {
        let run = runs[k];
        if run.end_ns <= placed_from {
            break;
        }
        placed[k] += run.end_ns.min(since).saturating_sub(run.start_ns.max(placed_from));
    }
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
    fn a_slow_run_that_waited_more_than_5_pct_of_its_time_is_set_aside_though_its_wait_is_short() {
        // One burner: runs beside it 0.78 ms against 0.66 ms, each having waited 0.05 ms (6.4% of its
        // time, less than half of the 0.12 ms it lost); a 2 ms run that waited 60 µs (3%) is the model's.
        let latencies: Vec<u64> = (0..40)
            .map(|i| {
                if i == 7 {
                    2 * MS
                } else if i % 4 == 1 {
                    780_000
                } else {
                    660_000
                }
            })
            .collect();
        let delays: Vec<u64> = (0..40)
            .map(|i| {
                if i == 7 {
                    60_000
                } else if i % 4 == 1 {
                    50_000
                } else {
                    0
                }
            })
            .collect();
        let c = Contention::of(&latencies, &delays).unwrap();
        let set_aside: Vec<usize> = c.contended.iter().map(|r| r.index).collect();
        assert_eq!(set_aside, (0..40).filter(|i| i % 4 == 1).collect::<Vec<_>>(), "{c:?}");
        assert!(!c.is_contended(7), "a slow run that hardly waited stays: {c:?}");
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

    const US: u64 = 1_000;

    /// A loop on two threads as the harness reads it: each run between two readings of 5 µs, 5 µs
    /// apart; `threads(k)` gives each thread's change over run `k` — (delay counted, CPU time run,
    /// runnable as the reading before the run ended, blocked during the run).
    fn readings_of(latencies: &[u64], step: impl Fn(usize) -> [(u64, u64, bool, bool); 2]) -> ReadingsFixture {
        let mut fixture = ReadingsFixture::default();
        let mut at = 0;
        let mut now = [ThreadCounters { blocked: Some(0), cpu_ns: Some(0), ..Default::default() }; 2];
        let read = |fixture: &mut ReadingsFixture, now: &[ThreadCounters; 2], at: &mut u64| {
            fixture.began_ns.push(*at);
            *at += 5 * US;
            fixture.ended_ns.push(*at);
            fixture.counters.extend_from_slice(now);
        };
        let step_of: Vec<_> = (0..latencies.len()).map(&step).collect();
        for (thread, counters) in now.iter_mut().enumerate() {
            let runnable = step_of.first().is_some_and(|s| s[thread].2);
            counters.runnable_at_cpu_ns = runnable.then_some(0);
        }
        read(&mut fixture, &now, &mut at);
        for (k, &latency) in latencies.iter().enumerate() {
            at += 5 * US;
            fixture.runs.push(RunSpan { start_ns: at, end_ns: at + latency, after_reading: k + 1 });
            at += latency;
            for (thread, counters) in now.iter_mut().enumerate() {
                let (delay, cpu, _, blocked) = step_of[k][thread];
                counters.run_delay_ns += delay;
                counters.cpu_ns = counters.cpu_ns.map(|ns| ns + cpu);
                counters.blocked = counters.blocked.map(|n| n + u64::from(blocked));
                let runnable_next = step_of.get(k + 1).is_some_and(|s| s[thread].2);
                counters.runnable_at_cpu_ns = runnable_next.then_some(counters.cpu_ns.unwrap());
            }
            read(&mut fixture, &now, &mut at);
        }
        fixture
    }

    #[derive(Default)]
    struct ReadingsFixture {
        began_ns: Vec<u64>,
        ended_ns: Vec<u64>,
        counters: Vec<ThreadCounters>,
        runs: Vec<RunSpan>,
    }

    impl ReadingsFixture {
        fn waits(&self) -> Vec<u64> {
            let readings =
                Readings { began_ns: &self.began_ns, ended_ns: &self.ended_ns, counters: &self.counters, threads: 2 };
            attributed_waits(readings, &self.runs)
        }
    }

    #[test]
    fn a_worker_runnable_through_a_run_waited_for_what_it_did_not_run() {
        // One burner on two CPUs: the worker gets a CPU in runs 0, 1 (0.55 ms, each thread ran
        // half), none in run 2 (1.0 ms, the main thread ran it all), 20 µs of run 3 before it was
        // preempted, all of run 4 after blocking in it (a voluntary switch: nothing proven).
        let latencies = [550 * US, 550 * US, 1_000 * US, 1_000 * US, 1_000 * US];
        let fixture = readings_of(&latencies, |k| match k {
            0 | 1 => [(0, 560 * US, true, false), (0, 555 * US, true, false)],
            2 => [(0, 1_010 * US, true, false), (0, 0, true, false)],
            3 => [(0, 1_010 * US, true, false), (0, 20 * US, true, false)],
            _ => [(0, 1_010 * US, true, false), (0, 0, true, true)],
        });
        assert_eq!(fixture.waits(), [0, 0, 1_000 * US, 980 * US, 0]);
        // A thread that was asleep (not runnable) before the run proves nothing either.
        let fixture = readings_of(&latencies[2..3], |_| [(0, 1_010 * US, true, false), (0, 0, false, false)]);
        assert_eq!(fixture.waits(), [0]);
    }

    #[test]
    fn a_delay_counted_late_goes_back_to_the_runs_it_must_have_overlapped() {
        // The worker asleep throughout (no state proof), its 2.5 ms wait counted after run 3, in
        // which it then ran 0.4 ms: the window of run 3 (the reading before, the gap, the run and
        // the reading after: 0.615 ms) holds at most 0.215 ms of it (0.2 ms inside the run), so
        // ≥ 2.285 ms was waited before that window, latest first: all of run 2 and run 1 (1 ms
        // each), 0.265 ms of run 0 (the readings and gaps between runs take the rest).
        let latencies = [1_000 * US, 1_000 * US, 1_000 * US, 600 * US];
        let fixture = readings_of(&latencies, |k| {
            let worker = if k == 3 { (2_500 * US, 400 * US, false, false) } else { (0, 0, false, false) };
            [(0, latencies[k] + 10 * US, true, false), worker]
        });
        let waits = fixture.waits();
        assert_eq!(waits, [265 * US, 1_000 * US, 1_000 * US, 200 * US]);
        // Never more than the delay: the placed waits sum to what the counters allow.
        assert!(waits.iter().sum::<u64>() <= 2_500 * US);
    }

    #[test]
    fn a_delay_counted_in_a_run_s_window_counts_only_what_the_window_s_gaps_cannot_hold() {
        // The main thread (not known runnable: only its counted delay speaks) preempted for 3 ms
        // inside a 4 ms run: the window holds 15 µs outside the run, so ≥ 2.985 ms was in it.
        let main = (3_000 * US, 1_000 * US, false, false);
        let fixture = readings_of(&[4_000 * US], |_| [main, (0, 0, false, false)]);
        assert_eq!(fixture.waits(), [2_985 * US]);
        // Preempted for 3 ms after a 1 ms run, before the reading after it ended (the window grew
        // to 4 ms around the run): the window outside the run can hold all of it, nothing proven.
        let mut fixture = readings_of(&[1_000 * US], |_| [main, (0, 0, false, false)]);
        fixture.ended_ns[1] += 3_000 * US;
        assert_eq!(fixture.waits(), [0]);
    }

    #[test]
    fn the_one_burner_alternation_is_set_aside_and_the_fast_runs_are_the_reference() {
        // Issue 44: under one CPU burner the latency alternated between 0.55 ms (the worker on a
        // CPU) and 1.0 ms (the worker runnable on none, no delay counted in either run).
        let latencies: Vec<u64> =
            (0..40).map(|k| if k % 3 == 2 { 1_000 * US + k * US } else { 550 * US + k * US }).collect();
        let fixture = readings_of(&latencies, |k| {
            let worker = if k % 3 == 2 { (0, 0, true, false) } else { (0, latencies[k], true, true) };
            [(0, latencies[k] + 10 * US, true, false), worker]
        });
        let waits = fixture.waits();
        let contention = Contention::of(&latencies, &waits).unwrap();
        assert_eq!(contention.contended.len(), 13, "{contention:?}");
        assert!(contention.contended.iter().all(|run| run.index % 3 == 2));
        assert!(contention.reference_ns < 600_000.0 && contention.clean_median_ns < 600_000.0, "{contention:?}");
        // The delays counted around each run (what was recorded before) explain none of them.
        assert!(Contention::of(&latencies, &vec![0; 40]).unwrap().contended.is_empty());
    }

    #[test]
    fn mismatched_or_empty_series_have_no_contention() {
        assert!(Contention::of(&[], &[]).is_none());
        assert!(Contention::of(&[1, 2], &[0]).is_none());
    }
}
