//! What the machine did to a run, as the gate reads it — so that the latency rules judge what the
//! model did:
//!
//! - which runs a busy CPU slowed: the harness's per-run run-queue delay, judged by
//!   [`Contention`] (`npugate_result::stats`); those runs are set aside, named, and never a failure;
//! - the busiest other process while the runs were timed, and the device's clock and temperature
//!   changes (`device_state.json`, written around device and local runs);
//! - where the model ran (placement): "partial fallback" is a cause only when placement shows
//!   nodes off the preferred EP.
//!
//! From that evidence come the sentences naming a latency's cause (bimodality, drift, a failing
//! latency rule), the `not judged` checks (too few clean runs left; a clock or temperature change
//! with every node on the preferred EP) and the verdict's `contention` record.

use npugate_profile::report::PlacementReport;
use npugate_result::background::{BackgroundLoad, ProcessCpu};
use npugate_result::RunResult;
use serde::{Deserialize, Serialize};

use crate::background::WARN_BACKGROUND_CPU_PCT;
use crate::check::{check, Check, CheckStatus};
use crate::rules::RuleName;
use crate::stats::{ClusterSplit, Contention, Drift};
use crate::units::{fmt_ms, Unit};

/// The ORT name of the CPU execution provider.
const CPU_EP: &str = "CPUExecutionProvider";
/// Other processes that together kept this much of a core busy (percent) are named as the load
/// when none alone reached [`WARN_BACKGROUND_CPU_PCT`].
const BUSY_TOGETHER_PCT: f64 = 50.0;
/// Runs named one by one in a sentence before "…".
const NAMED_RUNS: usize = 8;
/// A cluster or third whose runs waited on median at least this share of its latency gap had the
/// wait among its causes.
const WAIT_CAUSE_SHARE: f64 = 0.25;

/// How busy the machine was while a run was timed, as the verdict records it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ContentionSummary {
    /// The runs a busy CPU slowed, set aside from what the latency rules judge (absent when the
    /// harness recorded no run-queue delay: see `unavailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<Contention>,
    /// Threads of the harness whose wait was read.
    pub threads: usize,
    /// Involuntary context switches over all timed runs, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involuntary_switches: Option<u64>,
    /// Why the per-run wait is missing, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// The busiest other processes while the runs were timed, busiest first (device and local
    /// runs record them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub busiest: Vec<ProcessCpu>,
}

impl ContentionSummary {
    /// Runs set aside as contended.
    pub fn set_aside(&self) -> usize {
        self.runs.as_ref().map_or(0, |c| c.contended.len())
    }

    /// True when the machine was busy: runs were set aside, or other processes kept a CPU busy.
    pub fn busy(&self) -> bool {
        self.set_aside() > 0 || busy_processes(&self.busiest).is_some()
    }

    /// `6 of 30 runs waited for a CPU; sh (pid 4242) at 99% of a core`: the contention in a phrase.
    pub fn phrase(&self) -> String {
        let mut parts = Vec::new();
        if let Some(runs) = self.runs.as_ref().filter(|c| !c.contended.is_empty()) {
            parts.push(format!("{} of {} runs waited for a CPU", runs.contended.len(), runs.runs));
        }
        parts.extend(busy_processes(&self.busiest));
        parts.join("; ")
    }
}

/// The machine's evidence around one run, with the run's placement.
pub(crate) struct Machine<'a> {
    run: &'a RunResult,
    contention: Option<Contention>,
    load: Option<&'a BackgroundLoad>,
    placement: Option<&'a PlacementReport>,
}

impl<'a> Machine<'a> {
    /// The evidence of `run`: its per-run CPU wait, the load recorded around it, its placement.
    pub fn new(
        run: &'a RunResult,
        placement: Option<&'a PlacementReport>,
        load: Option<&'a BackgroundLoad>,
    ) -> Machine<'a> {
        Machine { run, contention: run.timings.contention(), load, placement }
    }

    /// The latencies the latency rules judge: every timed run but the contended ones.
    pub fn judged_latencies(&self) -> Vec<u64> {
        self.run.timings.clean_latencies()
    }

    /// The values of `per_run` (one per timed run, in run order: an LLM folder's decode steps with
    /// their growth with the context taken out) of the runs not set aside; all of them when the
    /// runs' waits were not recorded or the lengths differ.
    pub fn clean_of(&self, per_run: &[u64]) -> Vec<u64> {
        match &self.contention {
            Some(contention) if contention.runs == per_run.len() => contention.clean_latencies(per_run),
            _ => per_run.to_vec(),
        }
    }

    /// Timed runs in all.
    pub fn all_runs(&self) -> usize {
        self.run.timings.latencies_ns.len()
    }

    /// The timed runs the settings asked for (`--runs`): what the count rules judge, so the runs
    /// the harness added to replace contended ones never turn a too-short run into a long enough one.
    pub fn asked_runs(&self) -> usize {
        self.run.timings.extension.as_ref().map_or(self.all_runs(), |e| (e.requested as usize).min(self.all_runs()))
    }

    /// The flags that give a rerun at least `runs` timed runs: `--runs N`, or for an LLM folder
    /// (whose timed runs are its decode steps) `--generations G` at this run's `--gen-tokens`.
    pub fn more_runs(&self, runs: usize) -> String {
        match &self.run.generation {
            Some(g) if g.gen_tokens > 0 => {
                let generations = runs.div_ceil(g.gen_tokens as usize).max(g.generations as usize + 1);
                format!("--generations {generations} (--gen-tokens {} each)", g.gen_tokens)
            }
            _ => format!("--runs {runs}"),
        }
    }

    /// Runs set aside as contended.
    pub fn set_aside(&self) -> usize {
        self.contention.as_ref().map_or(0, |c| c.contended.len())
    }

    /// The verdict's record: present when the harness recorded its CPU wait or the host the load.
    pub fn summary(&self) -> Option<ContentionSummary> {
        let wait = self.run.timings.cpu_wait.as_ref();
        if wait.is_none() && self.load.is_none() {
            return None;
        }
        let unavailable = match wait {
            None => Some("the harness recorded no CPU wait (an older harness)".to_string()),
            Some(wait) => match &wait.run_queue_delay_ns {
                npugate_result::PerRun::Unavailable(why) => Some(why.clone()),
                npugate_result::PerRun::Measured(_) => None,
            },
        };
        Some(ContentionSummary {
            runs: self.contention.clone(),
            threads: wait.map_or(0, |w| w.threads),
            involuntary_switches: wait.and_then(|w| w.involuntary_switches.measured()).map(|s| s.iter().sum()),
            unavailable,
            busiest: self.load.map(|l| l.busiest.clone()).unwrap_or_default(),
        })
    }

    /// True when the run was timed on the CPU EP, where nothing can fall back.
    pub fn on_cpu_ep(&self) -> bool {
        self.run.execution.preferred_ep == CPU_EP
    }

    /// The busy processes recorded around the run, and when (see [`busy_processes`]).
    fn busy_process(&self) -> Option<String> {
        let load = self.load?;
        busy_processes(&load.busiest).map(|busy| format!("{busy} {}", load.window))
    }

    /// What changed on the device during the run (temperature, clocks, governors).
    fn state_changes(&self) -> &[String] {
        self.load.map_or(&[], |l| l.state_changes.as_slice())
    }

    /// `partial fallback: placement shows 2 node(s) off QNNExecutionProvider (Det node det, …)`, when
    /// it does and the preferred EP is an accelerator. Nodes off the EP by design (graph-I/O Q/DQ)
    /// run there every run and are no cause of an unsteady latency.
    fn fallback(&self) -> Option<String> {
        let report = self.placement.filter(|_| !self.on_cpu_ep())?;
        let off: Vec<_> = report.fallback.iter().filter(|node| !node.expected).collect();
        let first = off.iter().max_by(|a, b| a.flops_pct.total_cmp(&b.flops_pct))?;
        let more = if off.len() > 1 { ", …" } else { "" };
        Some(format!(
            "partial fallback: placement shows {} node(s) off {} ({} node {}{more})",
            off.len(),
            report.preferred_ep,
            first.op_type,
            first.name
        ))
    }

    /// The sentence naming the contention, for the warnings: which runs were set aside and why,
    /// the wait, the preemptions and the busiest other process.
    pub fn contention_warning(&self) -> Option<String> {
        let contention = self.contention.as_ref().filter(|c| !c.contended.is_empty())?;
        let runs: Vec<String> =
            contention.contended.iter().take(NAMED_RUNS).map(|r| (r.index + 1).to_string()).collect();
        let more = if contention.contended.len() > NAMED_RUNS { ", …" } else { "" };
        let (min_wait, max_wait) = min_max(contention.contended.iter().map(|r| r.wait_ns as f64));
        let (min_excess, max_excess) =
            min_max(contention.contended.iter().map(|r| r.latency_ns as f64 - contention.reference_ns));
        let switches = self
            .run
            .timings
            .cpu_wait
            .as_ref()
            .and_then(|w| w.involuntary_switches.measured())
            .map(|s| {
                let total: u64 = contention.contended.iter().filter_map(|r| s.get(r.index)).sum();
                format!(", {total} involuntary context switch(es) among them")
            })
            .unwrap_or_default();
        let busy = self.busy_process().map(|p| format!("; busiest other process: {p}")).unwrap_or_default();
        Some(format!(
            "CPU contention: {} of {} runs set aside (run {}{more}): {}–{} slower than the fastest clean runs ({}), and each \
             waited {}–{} for a CPU (run-queue delay over {} thread(s){switches}) — the machine, not the model{busy}",
            contention.contended.len(),
            contention.runs,
            runs.join(", "),
            fmt_ms(min_excess),
            fmt_ms(max_excess),
            fmt_ms(contention.reference_ns),
            fmt_ms(min_wait),
            fmt_ms(max_wait),
            self.run.timings.cpu_wait.as_ref().map_or(0, |w| w.threads)
        ))
    }

    /// A latency rule left with too few clean runs: not judged, with the measured cause and the fix.
    pub fn too_few_clean(&self, rule: RuleName, needed: usize, limit: f64, unit: Unit, what: &str) -> Check {
        let (all, clean) = (self.all_runs(), self.all_runs() - self.set_aside());
        let busy = self.busy_process().map(|p| format!(" ({p})")).unwrap_or_default();
        let fix = match clean {
            0 => "rerun when the machine is quieter".to_string(),
            _ => {
                let runs = (needed as f64 * all as f64 / clean as f64 * 1.25).ceil() as usize;
                match &self.run.timings.extension {
                    Some(extension) => format!(
                        "the harness timed its whole budget of {} runs to replace them; rerun when the machine is \
                         quieter, or with --max-runs {}",
                        extension.budget,
                        runs.max(extension.budget as usize + 1)
                    ),
                    None => format!("rerun when the machine is quieter, or with {}", self.more_runs(runs.max(needed))),
                }
            }
        };
        let message = format!(
            "{rule}: not judged: {} of {all} runs waited for a CPU long enough to explain why they were slow and \
             were set aside, leaving {clean} where {what} needs {needed}; the machine was busy{busy} — {fix}",
            self.set_aside()
        );
        check(rule, CheckStatus::NotJudged, None, limit, unit, message)
    }

    /// A failing latency check when the device's clock or temperature changed during the run and
    /// placement shows no node off the preferred EP: not judged — the latency measured the machine.
    pub fn dominated(&self, mut check: Check) -> Check {
        let changes = self.state_changes();
        if check.status != CheckStatus::Fail || changes.is_empty() || self.fallback().is_some() {
            return check;
        }
        let everywhere = match self.placement {
            Some(report) => format!("placement has every node on {}", report.preferred_ep),
            None => "no placement shows a node off the preferred EP".to_string(),
        };
        check.status = CheckStatus::NotJudged;
        check.message = format!(
            "{} — not judged: the device's state changed during the run ({}) and {everywhere}: the latency measured \
             the machine; rerun with --cooldown-until (see \"Devices and racks\") or with the clocks pinned",
            check.message,
            changes.join("; ")
        );
        check
    }

    /// The measured cause of a bimodal judged series: the wait of its slow runs, a busy process, a
    /// clock or temperature change, a partial fallback — or that none was measured.
    pub fn bimodal_cause(&self, split: &ClusterSplit) -> String {
        let gap = split.slow.median_ns - split.fast.median_ns;
        let waited = self.median_clean_wait(|latency| latency >= split.slow.min_ns);
        let wait = waited.filter(|w| *w >= WAIT_CAUSE_SHARE * gap).map(|w| {
            format!("CPU wait: the slow runs waited {} for a CPU on median (too little to set them aside)", fmt_ms(w))
        });
        self.causes(wait)
    }

    /// The measured cause of drift in the judged series.
    pub fn drift_cause(&self, drift: &Drift) -> String {
        let judged = self.judged_waits();
        let third = judged.len() / 3;
        let wait = (third > 0)
            .then(|| {
                let first = crate::stats::median(&judged[..third].iter().map(|(_, w)| *w).collect::<Vec<_>>())?;
                let last =
                    crate::stats::median(&judged[judged.len() - third..].iter().map(|(_, w)| *w).collect::<Vec<_>>())?;
                let moved = drift.last_third_median_ns - drift.first_third_median_ns;
                ((last - first) * moved.signum() >= WAIT_CAUSE_SHARE * moved.abs()).then(|| {
                    format!("CPU wait: {} per run in the first third, {} in the last", fmt_ms(first), fmt_ms(last))
                })
            })
            .flatten();
        self.causes(wait)
    }

    /// The measured causes joined, or why none was measured.
    fn causes(&self, wait: Option<String>) -> String {
        let mut causes: Vec<String> = wait.into_iter().collect();
        causes.extend(self.busy_process().map(|p| format!("a busy process: {p}")));
        let changes = self.state_changes();
        if !changes.is_empty() {
            causes.push(format!("the device's state changed: {}", changes.join("; ")));
        }
        causes.extend(self.fallback());
        if !causes.is_empty() {
            return causes.join("; ");
        }
        let placed = match (self.placement, self.on_cpu_ep()) {
            (_, true) => "on the CPU EP nothing can fall back".to_string(),
            (Some(report), false) => format!("placement has every node on {}", report.preferred_ep),
            (None, false) => "no placement to show a fallback".to_string(),
        };
        let waited = match self.contention {
            Some(_) => "the runs did not wait for a CPU",
            None => "no CPU wait was recorded",
        };
        let recorded = match self.load {
            Some(_) => "no clock or temperature change was recorded",
            None => "no device state was recorded",
        };
        format!("cause not measured: {waited}, {placed}, {recorded}")
    }

    /// (latency, wait) of the judged runs in run order; waits 0 without a record.
    fn judged_waits(&self) -> Vec<(f64, f64)> {
        let latencies = &self.run.timings.latencies_ns;
        let delays = self.run.timings.run_queue_delays();
        latencies
            .iter()
            .enumerate()
            .filter(|(index, _)| !self.contention.as_ref().is_some_and(|c| c.is_contended(*index)))
            .map(|(index, &latency)| (latency as f64, delays.map_or(0.0, |d| d[index] as f64)))
            .collect()
    }

    /// Median wait of the judged runs whose latency passes `select`; `None` without a record.
    fn median_clean_wait(&self, select: impl Fn(f64) -> bool) -> Option<f64> {
        self.contention.as_ref()?;
        let waits: Vec<f64> = self.judged_waits().into_iter().filter(|(l, _)| select(*l)).map(|(_, w)| w).collect();
        crate::stats::median(&waits)
    }

    /// ` (a stability check: nothing can fall back on the CPU EP)` on the CPU EP.
    pub fn cv_label(&self) -> &'static str {
        if self.on_cpu_ep() {
            " (a stability check: nothing can fall back on the CPU EP)"
        } else {
            ""
        }
    }

    /// `; 6 of 30 runs set aside (CPU contention)` when runs were set aside.
    pub fn set_aside_note(&self) -> String {
        match self.set_aside() {
            0 => String::new(),
            n => format!("; {n} of {} runs set aside (CPU contention)", self.all_runs()),
        }
    }
}

/// `sh (pid 4242) at 99% of a core` when the busiest of `busiest` kept a CPU busy (at least
/// [`WARN_BACKGROUND_CPU_PCT`]), else `other processes at 140% of a core in all (rustc (pid 7) at
/// 24% of a core, …)` when together they kept at least [`BUSY_TOGETHER_PCT`] busy.
fn busy_processes(busiest: &[ProcessCpu]) -> Option<String> {
    let top = busiest.iter().max_by(|a, b| a.cpu_pct.total_cmp(&b.cpu_pct))?;
    if top.cpu_pct >= WARN_BACKGROUND_CPU_PCT {
        return Some(top.describe());
    }
    let together: f64 = busiest.iter().map(|p| p.cpu_pct).sum();
    let named: Vec<String> = busiest.iter().take(3).map(ProcessCpu::describe).collect();
    let more = if busiest.len() > 3 { ", …" } else { "" };
    (together >= BUSY_TOGETHER_PCT)
        .then(|| format!("other processes at {together:.0}% of a core in all ({}{more})", named.join(", ")))
}

/// Smallest and largest of some values (∞, −∞ for none).
fn min_max(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
}
