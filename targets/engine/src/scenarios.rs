//! Labelled latency series for measuring the gate: what a device's noise and a model's partial
//! fallback look like in the runs a harness records — each series with the evidence a device run
//! writes beside it (every run's CPU wait, the device's state and busiest process, the placement).
//! The gate-quality benchmark (`scripts/bench-gate`) replays many seeded series of each scenario
//! on the mock target through the whole pipeline and counts the verdicts; the engine's tests
//! replay a few.
//!
//! Every series is 30 runs (the default `--runs`) around a 5 ms model, with ±1.5% run-to-run
//! noise (the sum of three uniforms: a bell of σ ≈ 0.9%).

use npugate_android::device_load::RunLoad;
use npugate_android::device_state::{CpuClock, DeviceState, DeviceStateRecord, ThermalZone};
use npugate_result::background::ProcessCpu;

use crate::targets::mock::{Replay, ReplayPlacement};

/// Runs per series: the default `--runs`.
pub const RUNS: usize = 30;
/// The model's latency on a quiet device (ns).
const BASE_NS: f64 = 5_000_000.0;
/// A scheduler time slice another process takes (ns).
const SLICE_NS: f64 = 4_000_000.0;

/// What a series is, as the benchmark labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// A quiet device: noise only, a few runs that waited a little without being slowed.
    Clean,
    /// Another process preempts 3–9 of the 30 runs for 1–3 time slices each; the harness recorded
    /// each run's wait, and the device's busiest process.
    Preemption,
    /// The same preemptions without the per-run wait: what a harness before the record saw.
    PreemptionUnrecorded,
    /// The clock steps between two levels during the run (a 35% slower level for 30% of the
    /// runs), the device state recording the lowered max clock; every node on the preferred EP.
    TwoLevelClock,
    /// The same two levels without a clock record: as a fallback placement cannot show.
    TwoLevelClockUnrecorded,
    /// Heat: each run slower than the last, 30% over the run, the hottest sensor rising 9 °C.
    ThermalDrift,
    /// A partial fallback: 30% of the runs take the CPU path, 80% slower, without waiting;
    /// placement shows the node off the preferred EP.
    FallbackShown,
    /// The same fallback with every node on the preferred EP in the placement (a fallback the
    /// assignment does not show, e.g. inside the EP).
    FallbackHidden,
    /// The shown fallback on a busy device: preemptions too, each with its wait.
    FallbackUnderPreemption,
}

impl Scenario {
    /// Every scenario, noise first.
    pub const ALL: [Scenario; 9] = [
        Scenario::Clean,
        Scenario::Preemption,
        Scenario::PreemptionUnrecorded,
        Scenario::TwoLevelClock,
        Scenario::TwoLevelClockUnrecorded,
        Scenario::ThermalDrift,
        Scenario::FallbackShown,
        Scenario::FallbackHidden,
        Scenario::FallbackUnderPreemption,
    ];

    /// How the benchmark names it.
    pub fn label(self) -> &'static str {
        match self {
            Scenario::Clean => "clean device runs",
            Scenario::Preemption => "preemption spikes, schedstat recorded",
            Scenario::PreemptionUnrecorded => "preemption spikes, no schedstat (the gate before)",
            Scenario::TwoLevelClock => "two-level clock, max-clock change recorded",
            Scenario::TwoLevelClockUnrecorded => "two-level clock, no clock record",
            Scenario::ThermalDrift => "thermal drift, temperature rise recorded",
            Scenario::FallbackShown => "partial fallback, placement shows it",
            Scenario::FallbackHidden => "partial fallback, placement does not show it",
            Scenario::FallbackUnderPreemption => "partial fallback under preemption spikes",
        }
    }

    /// True for a series of a model that did nothing wrong: a failure of it is a false alarm.
    pub fn is_noise(self) -> bool {
        !matches!(self, Scenario::FallbackShown | Scenario::FallbackHidden | Scenario::FallbackUnderPreemption)
    }

    /// True when the series carries the evidence its cause leaves (a series without it cannot be
    /// told from a fallback that placement does not show).
    pub fn has_evidence(self) -> bool {
        !matches!(self, Scenario::PreemptionUnrecorded | Scenario::TwoLevelClockUnrecorded)
    }

    /// The series with seed `seed`.
    pub fn replay(self, seed: u64) -> Replay {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut latencies: Vec<f64> = (0..RUNS).map(|_| BASE_NS * (1.0 + noise(&mut rng))).collect();
        let mut waits = vec![0.0; RUNS];
        let mut placement = ReplayPlacement::AllOnEp;
        let mut state = quiet_state(&mut rng);
        match self {
            Scenario::Clean => idle_waits(&mut rng, &mut waits),
            Scenario::Preemption | Scenario::PreemptionUnrecorded => {
                preempt(&mut rng, &mut latencies, &mut waits);
                state.during = Some(busy_process(96.0));
            }
            Scenario::TwoLevelClock | Scenario::TwoLevelClockUnrecorded => {
                two_levels(&mut rng, &mut latencies, 1.35);
                if self == Scenario::TwoLevelClock {
                    state = clock_dropped(&mut rng);
                }
            }
            Scenario::ThermalDrift => {
                for (index, latency) in latencies.iter_mut().enumerate() {
                    *latency *= 1.0 + 0.30 * index as f64 / (RUNS - 1) as f64;
                }
                state = heated(&mut rng);
            }
            Scenario::FallbackShown | Scenario::FallbackHidden | Scenario::FallbackUnderPreemption => {
                two_levels(&mut rng, &mut latencies, 1.8);
                if self != Scenario::FallbackHidden {
                    placement = ReplayPlacement::Fallback;
                }
                if self == Scenario::FallbackUnderPreemption {
                    preempt(&mut rng, &mut latencies, &mut waits);
                    state.during = Some(busy_process(96.0));
                }
            }
        }
        let recorded = self.has_evidence();
        Replay {
            latencies_ns: latencies.iter().map(|&ns| ns as u64).collect(),
            run_queue_delay_ns: recorded.then(|| waits.iter().map(|&ns| ns as u64).collect()),
            device_state: recorded.then_some(state),
            placement,
        }
    }
}

/// ±1.5% noise: the mean of three uniforms, a bell of σ ≈ 0.9%.
fn noise(rng: &mut fastrand::Rng) -> f64 {
    let sum: f64 = (0..3).map(|_| rng.f64() * 2.0 - 1.0).sum();
    0.015 * sum / 3.0 * 3f64.sqrt()
}

/// A few runs whose spinning worker waited without slowing the run.
fn idle_waits(rng: &mut fastrand::Rng, waits: &mut [f64]) {
    for _ in 0..rng.usize(0..4) {
        waits[rng.usize(..RUNS)] = rng.f64() * 50_000.0;
    }
}

/// 3–9 runs preempted for 1–3 slices: each slower by what it lost, its threads' wait 0.9–1.6× that
/// (several threads may wait at once).
fn preempt(rng: &mut fastrand::Rng, latencies: &mut [f64], waits: &mut [f64]) {
    idle_waits(rng, waits);
    for _ in 0..rng.usize(3..=9) {
        let run = rng.usize(..RUNS);
        let lost = SLICE_NS * rng.usize(1..=3) as f64 * (0.5 + rng.f64() * 0.5);
        latencies[run] += lost;
        waits[run] += lost * (0.9 + rng.f64() * 0.7);
    }
}

/// 30% of the runs (in random places) at `factor` × their latency, without waiting.
fn two_levels(rng: &mut fastrand::Rng, latencies: &mut [f64], factor: f64) {
    let mut order: Vec<usize> = (0..RUNS).collect();
    rng.shuffle(&mut order);
    for &run in &order[..RUNS * 3 / 10] {
        latencies[run] *= factor;
    }
}

/// The busiest other process during the run as the load sample records it: `cpu_pct` of a core,
/// or none above 1% at 0.
fn busy_process(cpu_pct: f64) -> RunLoad {
    let busiest = (cpu_pct > 0.0).then(|| ProcessCpu::single(812, "cc1plus", cpu_pct));
    RunLoad { seconds: 0.5, busiest: busiest.into_iter().collect() }
}

/// The record of a device `before` and `after` the run, no other process busy during it.
fn record(before: DeviceState, after: DeviceState) -> DeviceStateRecord {
    DeviceStateRecord { during: Some(busy_process(0.0)), ..DeviceStateRecord::new("replay", None, before, Some(after)) }
}

/// A steady device: the same temperatures and clocks before and after.
fn quiet_state(rng: &mut fastrand::Rng) -> DeviceStateRecord {
    let state = device(38.0 + rng.f64(), 2_841_600);
    record(state.clone(), state)
}

/// The big cores' max clock lowered during the run (the two levels' slower one).
fn clock_dropped(rng: &mut fastrand::Rng) -> DeviceStateRecord {
    record(device(38.0 + rng.f64(), 2_841_600), device(39.0 + rng.f64(), 1_996_800))
}

/// The hottest sensor 9 °C warmer after the run.
fn heated(rng: &mut fastrand::Rng) -> DeviceStateRecord {
    record(device(38.0 + rng.f64(), 2_841_600), device(47.0 + rng.f64(), 2_841_600))
}

/// A device with one sensor at `celsius` and its big core's max clock.
fn device(celsius: f64, max_khz: u64) -> DeviceState {
    DeviceState {
        thermal_zones: vec![ThermalZone { zone: "thermal_zone0".into(), kind: "cpu-1-0-usr".into(), celsius }],
        cpus: vec![CpuClock {
            cpu: "cpu7".into(),
            cur_khz: Some(max_khz),
            max_khz: Some(max_khz),
            governor: "schedutil".into(),
        }],
        battery_c: None,
        load: None,
    }
}

#[cfg(test)]
mod tests {
    use npugate_gate::rules::RuleName;
    use npugate_gate::verdict::{CheckStatus, Outcome};
    use npugate_gate::Verdict;

    use super::*;
    use crate::confirm::run_confirmed;
    use crate::pipeline::GateSpec;
    use crate::progress::Progress;
    use crate::run::{run_on, RunReport, RunSpec};
    use crate::targets::mock::{Behaviour, MockJob, MockTarget};

    /// `npugate run` with the default rules (no `--confirm`) of the mock replaying `series` call by
    /// call: the verdict, and how many times the target ran.
    fn judged(series: Vec<Replay>) -> (Verdict, usize) {
        let mock = MockJob::new();
        let target =
            MockTarget::new("replay", series.into_iter().map(|replay| Behaviour::Replay(Box::new(replay))).collect());
        let gate = GateSpec::default();
        let spec = RunSpec { job: mock.job(), gate: Some(&gate), reference: None };
        let report: RunReport =
            run_confirmed(0, &mock.work.path().join("out"), |dir| run_on(&target, &spec, dir, &Progress::silent()))
                .unwrap();
        (report.verdict.unwrap(), target.calls())
    }

    fn cv(verdict: &Verdict) -> &npugate_gate::verdict::Check {
        verdict.checks.iter().find(|c| c.rule == RuleName::CvPct).unwrap()
    }

    #[test]
    fn preempted_runs_are_set_aside_and_named_where_the_gate_before_failed_them() {
        let recorded = Scenario::Preemption.replay(7);
        let preempted = recorded.run_queue_delay_ns.as_ref().unwrap().iter().filter(|&&w| w > 1_000_000).count();
        let (verdict, calls) = judged(vec![recorded]);
        assert_eq!((verdict.outcome, calls), (Outcome::Pass, 1), "{:#?}", verdict.checks);
        assert_eq!(verdict.contention.as_ref().unwrap().set_aside(), preempted);
        assert!(cv(&verdict).message.contains(&format!("; {preempted} of 30 runs set aside (CPU contention)")));
        let named = &verdict.warnings[0];
        assert!(named.starts_with(&format!("CPU contention: {preempted} of 30 runs set aside (run ")), "{named}");
        assert!(named.contains("busiest other process: cc1plus (pid 812) at 96% of a core"), "{named}");

        let (before, calls) = judged(vec![Scenario::PreemptionUnrecorded.replay(7)]);
        assert_eq!((cv(&before).status, calls), (CheckStatus::Fail, 1), "no record, no contention to confirm");
        assert!(before.contention.is_none());
    }

    #[test]
    fn a_fallback_fails_and_is_called_one_only_where_placement_shows_it() {
        let (shown, _) = judged(vec![Scenario::FallbackShown.replay(3)]);
        assert_eq!((shown.outcome, cv(&shown).status), (Outcome::Fail, CheckStatus::Fail));
        assert!(
            cv(&shown)
                .message
                .contains("partial fallback: placement shows 1 node(s) off QNNExecutionProvider (Det node det)"),
            "{}",
            cv(&shown).message
        );
        let (hidden, _) = judged(vec![Scenario::FallbackHidden.replay(3)]);
        assert_eq!(cv(&hidden).status, CheckStatus::Fail);
        let message = &cv(&hidden).message;
        assert!(message.contains("cause not measured") && !message.contains("fallback"), "{message}");
        assert!(hidden.warnings.iter().all(|w| !w.contains("fallback")), "{:?}", hidden.warnings);
    }

    #[test]
    fn a_fallback_on_a_busy_device_is_confirmed_by_two_reruns_and_still_fails() {
        let series = (0..3).map(|seed| Scenario::FallbackUnderPreemption.replay(seed)).collect();
        let (verdict, calls) = judged(series);
        assert_eq!((verdict.outcome, calls), (Outcome::Fail, 3));
        let confirmation = verdict.confirmation.as_ref().unwrap();
        assert!(confirmation.contention.as_deref().unwrap().contains("runs waited for a CPU"), "{confirmation:?}");
        assert!(
            confirmation.sentence().starts_with("the machine was busy (")
                && confirmation.sentence().ends_with(
                    "so the latency failure was confirmed by 2 rerun(s): failed 3 of 3: the failure reproduced"
                ),
            "{}",
            confirmation.sentence()
        );
    }

    #[test]
    fn a_clock_change_with_every_node_on_the_ep_is_not_judged_and_too_few_clean_runs_neither() {
        let (clock, calls) = judged(vec![Scenario::TwoLevelClock.replay(5)]);
        assert_eq!((clock.outcome, clock.exit_code(), calls), (Outcome::NotJudged, 2, 1));
        let message = &cv(&clock).message;
        assert_eq!(cv(&clock).status, CheckStatus::NotJudged);
        assert!(message.contains("cpu7 max clock dropped from 2841600 kHz to 1996800 kHz"), "{message}");
        assert!(message.contains("placement has every node on OpenVINOExecutionProvider"), "{message}");
        // The same series without the clock record cannot be told from a fallback placement misses.
        let (unrecorded, _) = judged(vec![Scenario::TwoLevelClockUnrecorded.replay(5)]);
        assert_eq!(cv(&unrecorded).status, CheckStatus::Fail);

        // Half the runs preempted: 15 clean runs cannot hold a CV.
        let waits: Vec<u64> = (0..RUNS as u64).map(|i| if i % 2 == 0 { 8_000_000 } else { 0 }).collect();
        let latencies = waits.iter().map(|w| 5_000_000 + w + (w / 7) % 50_000).collect();
        let busy = Replay {
            latencies_ns: latencies,
            run_queue_delay_ns: Some(waits),
            device_state: None,
            placement: ReplayPlacement::AllOnEp,
        };
        let (verdict, _) = judged(vec![busy]);
        assert_eq!((verdict.outcome, cv(&verdict).status), (Outcome::NotJudged, CheckStatus::NotJudged));
        assert!(
            cv(&verdict).message.contains("15 of 30 runs waited for a CPU")
                && cv(&verdict).message.contains("--runs 50"),
            "{}",
            cv(&verdict).message
        );
    }
}
