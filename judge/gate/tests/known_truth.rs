//! The statistics and latency rules against series whose truth is known by construction — and the
//! seed's point: a median-only gate passes a bimodal (partial-fallback) series that a CV gate fails.

mod common;

use common::{detector_nodes, mixture, normal_series, placement, run, QNN};
use npugate_gate::rules::RuleName;
use npugate_gate::stats::LatencyStats;
use npugate_gate::verdict::{CheckStatus, Outcome};
use npugate_gate::{judge, Evidence, Rules};
use npugate_result::{CpuWait, PerRun, RunExtension};

/// Judges the QNN fixture run with these latencies on the detector graph (all on QNN).
fn judged(latencies_ns: Vec<u64>, rules: &Rules) -> npugate_gate::Verdict {
    judge(&Evidence::new(&run(latencies_ns), Ok(&placement(QNN, &detector_nodes()))), rules)
}

fn check_status(verdict: &npugate_gate::Verdict, rule: RuleName) -> CheckStatus {
    verdict.checks.iter().find(|c| c.rule == rule).unwrap_or_else(|| panic!("no {rule} check")).status
}

#[test]
fn unimodal_series_with_cv_3pct_passes() {
    let series = normal_series(300, 8.0, 3.0, 7);
    let stats = LatencyStats::from_ns(&series).unwrap();
    assert!((2.6..3.4).contains(&stats.cv_pct), "CV {}", stats.cv_pct);
    assert!((stats.median_ns / 1e6 - 8.0).abs() < 0.1, "median {}", stats.median_ns);
    assert!(stats.median_ci.lower < stats.median_ns && stats.median_ns < stats.median_ci.upper);
    assert!(stats.median_ci.lower / 1e6 > 7.85 && stats.median_ci.upper / 1e6 < 8.15, "{:?}", stats.median_ci);
    // p95 of N(8, 0.24) is 8 + 1.645·0.24 = 8.39 ms.
    assert!((stats.p95_ns / 1e6 - 8.39).abs() < 0.08, "p95 {}", stats.p95_ns);
    let modality = stats.modality.as_ref().unwrap();
    assert!(!modality.bimodal, "{modality:?}");
    assert!(modality.coefficient < 0.5, "{modality:?}");
    assert!(stats.drift.as_ref().unwrap().change_pct.abs() < 2.0);

    let verdict = judged(series, &Rules::default());
    assert_eq!(check_status(&verdict, RuleName::CvPct), CheckStatus::Pass);
    assert_eq!(verdict.outcome, Outcome::Pass, "{:#?}", verdict.checks);
    assert_eq!(verdict.exit_code(), 0);
}

#[test]
fn mixture_70_30_fails_cv_and_is_reported_bimodal() {
    let series = mixture(200, 8.0, 24.0, 0.3, 11);
    let verdict = judged(series, &Rules::default());
    let stats = verdict.latency.as_ref().unwrap();
    let split = stats.bimodal_split().expect("the 70/30 mixture must be called bimodal");
    assert_eq!((split.fast.runs, split.slow.runs), (140, 60));
    assert!((split.fast.share_pct - 70.0).abs() < 1e-9 && (split.slow.share_pct - 30.0).abs() < 1e-9);
    assert!((split.fast.median_ns / 1e6 - 8.0).abs() < 0.1, "{split:?}");
    assert!((split.slow.median_ns / 1e6 - 24.0).abs() < 0.3, "{split:?}");
    assert!(split.gap_ns / 1e6 > 10.0);

    let cv = verdict.checks.iter().find(|c| c.rule == RuleName::CvPct).unwrap();
    assert_eq!(cv.status, CheckStatus::Fail, "{}", cv.message);
    assert!(cv.measured.unwrap() > 50.0, "{}", cv.message);
    assert!(cv.message.contains("70% of runs at 8."), "{}", cv.message);
    assert!(cv.message.contains("30% at 24."), "{}", cv.message);
    assert!(cv.clusters.is_some());
    assert_eq!(verdict.outcome, Outcome::Fail);
    assert_eq!(verdict.exit_code(), 1);
}

#[test]
fn mixture_with_10_runs_fails_for_too_few_runs() {
    let series = mixture(10, 8.0, 24.0, 0.3, 11);
    let verdict = judged(series, &Rules::default());
    let cv = verdict.checks.iter().find(|c| c.rule == RuleName::CvPct).unwrap();
    assert_eq!(cv.status, CheckStatus::Fail);
    assert!(cv.message.contains("needs at least 20 runs, this run has 10"), "{}", cv.message);
    assert!(cv.message.contains("--runs 20"), "{}", cv.message);
}

#[test]
fn runs_the_harness_added_never_make_too_few_asked_runs_enough() {
    // Ten runs asked, 21 timed to replace runs that waited for a CPU: the settings were too few for
    // a CV limit (20) and for min_runs=20, whatever the machine made the harness add.
    let mut extended = run(normal_series(21, 8.0, 3.0, 5));
    extended.settings.runs = 10;
    extended.timings.extension =
        Some(RunExtension { requested: 10, budget: 40, taken: 21, set_aside_at_requested: 6, clean: 10 });
    let rules = Rules::load(None, &["min_runs=20".into()]).unwrap();
    let verdict = judge(&Evidence::new(&extended, Ok(&placement(QNN, &detector_nodes()))), &rules);
    let cv = verdict.checks.iter().find(|c| c.rule == RuleName::CvPct).unwrap();
    assert_eq!(cv.status, CheckStatus::Fail, "{}", cv.message);
    assert!(cv.message.contains("needs at least 20 runs, this run asked for 10 (21 timed"), "{}", cv.message);
    let min_runs = verdict.checks.iter().find(|c| c.rule == RuleName::MinRuns).unwrap();
    assert_eq!(min_runs.status, CheckStatus::Fail, "{}", min_runs.message);
    assert!(min_runs.message.contains("10 runs < 20"), "{}", min_runs.message);
}

#[test]
fn p99_rule_needs_100_runs_and_p95_needs_20() {
    let rules = Rules::load(None, &["p99_ms=30".into(), "p95_ms=30".into()]).unwrap();
    let verdict = judged(normal_series(50, 8.0, 3.0, 3), &rules);
    let p99 = verdict.checks.iter().find(|c| c.rule == RuleName::P99Ms).unwrap();
    assert_eq!(p99.status, CheckStatus::Fail);
    assert!(p99.message.contains("needs at least 100 runs, this run has 50"), "{}", p99.message);
    assert_eq!(check_status(&verdict, RuleName::P95Ms), CheckStatus::Pass);

    let verdict = judged(normal_series(100, 8.0, 3.0, 3), &rules);
    assert_eq!(check_status(&verdict, RuleName::P99Ms), CheckStatus::Pass);
}

#[test]
fn median_only_gate_passes_the_bimodal_mixture() {
    // The seed's point: 30% of runs at three times the latency, and a median gate sees nothing.
    let series = mixture(200, 8.0, 24.0, 0.3, 11);
    let rules = Rules::load(None, &["median_ms=10".into(), "disable=[\"cv_pct\"]".into()]).unwrap();
    let verdict = judged(series.clone(), &rules);
    assert_eq!(check_status(&verdict, RuleName::MedianMs), CheckStatus::Pass);
    assert_eq!(verdict.outcome, Outcome::Pass, "{:#?}", verdict.checks);
    // … while the default gate on the same series fails.
    let default = judged(series, &Rules::default());
    assert_eq!(default.outcome, Outcome::Fail);
}

#[test]
fn drift_between_thirds_is_warned() {
    // 8 ms rising linearly to 9.6 ms: the last third's median is ~14% above the first third's.
    let series: Vec<u64> = (0..90).map(|i| 8_000_000 + i * 18_000).collect();
    let verdict = judged(series, &Rules::default());
    let drift = verdict.latency.as_ref().unwrap().drift.as_ref().unwrap();
    assert!((12.0..16.0).contains(&drift.change_pct), "{drift:?}");
    assert!(verdict.warnings.iter().any(|w| w.contains("drifted +")), "{:?}", verdict.warnings);
}

#[test]
fn min_runs_rule() {
    let rules = Rules::load(None, &["min_runs=50".into()]).unwrap();
    let verdict = judged(normal_series(30, 8.0, 3.0, 5), &rules);
    let check = verdict.checks.iter().find(|c| c.rule == RuleName::MinRuns).unwrap();
    assert_eq!(check.status, CheckStatus::Fail);
    assert!(check.message.contains("30 runs < 50"), "{}", check.message);
}

#[test]
fn empty_run_cannot_be_judged() {
    let verdict = judged(vec![], &Rules::default());
    assert_eq!(check_status(&verdict, RuleName::CvPct), CheckStatus::Unjudged);
    assert_eq!(verdict.outcome, Outcome::Error);
    assert_eq!(verdict.exit_code(), 2);
}

#[test]
fn a_few_slow_outliers_are_named_but_not_called_bimodal() {
    let mut series = normal_series(200, 8.0, 2.0, 9);
    for i in [20, 90, 150] {
        series[i] = 40_000_000;
    }
    let verdict = judged(series, &Rules::default());
    assert!(verdict.latency.as_ref().unwrap().bimodal_split().is_none());
    let cv = verdict.checks.iter().find(|c| c.rule == RuleName::CvPct).unwrap();
    assert_eq!(cv.status, CheckStatus::Fail);
    assert!(cv.message.contains("3 outlier run(s) (2%) near 40.0 ms"), "{}", cv.message);
}

#[test]
fn an_llm_run_with_too_few_decode_steps_names_the_generation_flags_not_runs() {
    // Two generations of four decode steps: 8 timed steps where p95 needs 20.
    let steps: Vec<u64> = normal_series(8, 2.0, 3.0, 5);
    let mut llm = run(steps.clone());
    llm.generation = Some(
        serde_json::from_value(serde_json::json!({
            "layout": "decoder", "prompt_tokens": 16, "gen_tokens": 4, "warmup_generations": 0, "generations": 2,
            "context_length": 64, "ttft_ns": [9_000_000, 9_100_000], "decode_ns": [&steps[..4], &steps[4..]],
            "prefill_tok_s": 0.0, "decode_tok_s": 0.0, "wall_ns": [], "prompt_ids": [], "tokens": [], "graphs": [],
            "kv": {"mode": "shared", "copies_per_step": 0.0, "bytes": 0, "allocated_bytes": 0}
        }))
        .expect("a generation"),
    );
    let rules = Rules::load(None, &["p95_ms=30".into(), "min_runs=12".into()]).unwrap();
    let verdict = judge(&Evidence::new(&llm, Ok(&placement(QNN, &detector_nodes()))), &rules);
    for rule in [RuleName::P95Ms, RuleName::MinRuns] {
        let check = verdict.checks.iter().find(|c| c.rule == rule).unwrap();
        assert_eq!(check.status, CheckStatus::Fail, "{}", check.message);
        assert!(!check.message.contains("--runs"), "an LLM run takes no --runs: {}", check.message);
        let generations = if rule == RuleName::P95Ms { 5 } else { 3 };
        let flags = format!("--generations {generations} (--gen-tokens 4 each)");
        assert!(check.message.contains(&flags), "{}", check.message);
    }
}

#[test]
fn an_llm_runs_decode_steps_that_waited_for_a_cpu_are_set_aside_like_a_models_runs() {
    // Five generations of eight steps growing 10 µs per token of context; five steps (one per
    // generation) slowed 3 ms by a busy machine, each of which waited 3 ms for a CPU.
    let slowed = |i: usize| i % 8 == 3;
    let steps: Vec<u64> = (0..40usize)
        .map(|i| 2_000_000 + 10_000 * (i % 8) as u64 + if i % 2 == 0 { 4_000 } else { 0 })
        .enumerate()
        .map(|(i, ns)| if slowed(i) { ns + 3_000_000 } else { ns })
        .collect();
    let mut llm = run(steps.clone());
    llm.generation = Some(
        serde_json::from_value(serde_json::json!({
            "layout": "decoder", "prompt_tokens": 16, "gen_tokens": 8, "warmup_generations": 0, "generations": 5,
            "context_length": 64, "ttft_ns": vec![9_000_000u64; 5], "decode_ns": steps.chunks(8).collect::<Vec<_>>(),
            "prefill_tok_s": 0.0, "decode_tok_s": 0.0, "wall_ns": [], "prompt_ids": [], "tokens": [], "graphs": [],
            "kv": {"mode": "shared", "copies_per_step": 0.0, "bytes": 0, "allocated_bytes": 0}
        }))
        .expect("a generation"),
    );
    let rules = Rules::load(None, &["decode_cv_pct=5".into(), "disable=[\"cv_pct\"]".into()]).unwrap();
    let judged =
        |llm: &npugate_result::RunResult| judge(&Evidence::new(llm, Ok(&placement(QNN, &detector_nodes()))), &rules);
    // Without a wait record every step counts, and the five slowed ones fail the CV limit.
    let unrecorded = judged(&llm);
    assert_eq!(check_status(&unrecorded, RuleName::DecodeCvPct), CheckStatus::Fail);
    let waits = (0..40).map(|i| if slowed(i) { 3_000_000 } else { 0 }).collect();
    llm.timings.cpu_wait = Some(CpuWait {
        threads: 2,
        run_queue_delay_ns: PerRun::Measured(waits),
        involuntary_switches: PerRun::Unavailable("not read in this test".into()),
    });
    let recorded = judged(&llm);
    let decode = recorded.checks.iter().find(|c| c.rule == RuleName::DecodeCvPct).unwrap();
    assert_eq!(decode.status, CheckStatus::Pass, "{}", decode.message);
    assert_eq!(recorded.latency.as_ref().map(|l| l.n), Some(35), "the five steps that waited are set aside");
    assert!(recorded.warnings.iter().any(|w| w.starts_with("decode steps grow")), "{:?}", recorded.warnings);
}
