//! `judge_compare` on interleaved sessions whose truth is known by construction (a 10% slower
//! candidate, an identical one, a device slowing down halfway, a node moved to the CPU), and every
//! exporter on a comparison and on a confirmed run.

mod common;

use std::path::Path;
use std::process::Command;

use common::{detector_nodes, move_to_cpu, normal_series, placement, run, Node, CPU, NORM, QNN};
use npugate_gate::compare::{
    judge_compare, CompareEvidence, CompareRules, CompareVerdict, First, RoundEvidence, SideEvidence,
};
use npugate_gate::confirm::{Attempt, Confirmation};
use npugate_gate::rules::RuleName;
use npugate_gate::verdict::{CheckStatus, Outcome};
use npugate_gate::{judge, Baseline, Comparison, Evidence, Rules};
use npugate_profile::report::PlacementReport;
use npugate_result::report::{self, write_all, Format};
use npugate_result::RunResult;

/// The runs of an ABBA session: `rounds` rounds of 20 runs, A around `a_ms`, B around `b_ms` (2% CV),
/// both scaled by `load(launch)` (two launches per round).
fn rounds(count: usize, a_ms: f64, b_ms: f64, load: fn(usize) -> f64) -> Vec<(First, RunResult, RunResult)> {
    (0..count)
        .map(|i| {
            let first = First::of_round(i);
            let (a_launch, b_launch) = if first == First::Baseline { (2 * i, 2 * i + 1) } else { (2 * i + 1, 2 * i) };
            let a = run(normal_series(20, a_ms * load(a_launch), 2.0, 100 + i as u64));
            let b = run(normal_series(20, b_ms * load(b_launch), 2.0, 200 + i as u64));
            (first, a, b)
        })
        .collect()
}

fn judged(
    session: &[(First, RunResult, RunResult)],
    a_nodes: &[Node],
    b_nodes: &[Node],
    rules: &CompareRules,
) -> CompareVerdict {
    let (a_run, b_run) = (run(vec![8_000_000]), run(vec![8_000_000]));
    let (a_place, b_place): (PlacementReport, PlacementReport) = (placement(QNN, a_nodes), placement(QNN, b_nodes));
    let evidence_rounds: Vec<RoundEvidence<'_>> = session
        .iter()
        .enumerate()
        .map(|(i, (first, a, b))| RoundEvidence {
            first: *first,
            baseline: a,
            candidate: b,
            baseline_dir: format!("baseline/round-{:02}", i + 1),
            candidate_dir: format!("candidate/round-{:02}", i + 1),
        })
        .collect();
    let evidence = CompareEvidence {
        target: "R5CX21",
        baseline: SideEvidence {
            model: "models/a.onnx",
            placement_run: &a_run,
            placement: Ok(&a_place),
            placement_dir: "baseline/placement",
        },
        candidate: SideEvidence {
            model: "models/b.onnx",
            placement_run: &b_run,
            placement: Ok(&b_place),
            placement_dir: "candidate/placement",
        },
        rounds: &evidence_rounds,
        errors: vec![],
        look: 1,
        stopped: None,
    };
    judge_compare(&evidence, rules)
}

fn status(v: &CompareVerdict, rule: RuleName) -> CheckStatus {
    v.checks.iter().find(|c| c.rule == rule).unwrap_or_else(|| panic!("no {rule} check")).status
}

fn steady(_: usize) -> f64 {
    1.0
}

/// 40% slower from the 11th launch on: background load started halfway through 10 rounds.
fn load_halfway(launch: usize) -> f64 {
    if launch >= 10 {
        1.4
    } else {
        1.0
    }
}

#[test]
fn a_ten_percent_slower_candidate_fails_and_an_identical_one_passes() {
    let rules = CompareRules::default();
    let slower = judged(&rounds(10, 8.0, 8.8, steady), &detector_nodes(), &detector_nodes(), &rules);
    let paired = slower.paired.as_ref().unwrap();
    assert!(paired.ci.lower > 1.05 && (paired.ratio - 1.10).abs() < 0.02, "{paired:?}");
    assert_eq!(status(&slower, RuleName::MaxSlowdownPct), CheckStatus::Fail);
    assert_eq!((slower.outcome, slower.exit_code()), (Outcome::Fail, 1));
    let message = &slower.checks[0].message;
    assert!(
        message.starts_with("max_slowdown_pct: the candidate's median is 1.1")
            && message.contains("paired over 10 rounds"),
        "{message}"
    );
    assert_eq!(slower.rounds.len(), 10);
    assert_eq!((slower.rounds[0].first, slower.rounds[1].first), (First::Baseline, First::Candidate));
    assert_eq!(slower.baseline.latencies_ns.len(), 200, "every timed run of every round");

    let same = judged(&rounds(10, 8.0, 8.0, steady), &detector_nodes(), &detector_nodes(), &rules);
    let paired = same.paired.as_ref().unwrap();
    assert!(paired.ci.lower <= 1.0 && paired.ci.upper >= 1.0, "{paired:?}");
    assert_eq!(same.outcome, Outcome::Pass, "{:#?}", same.checks);
    assert!(same.placement_differences.is_empty());
}

#[test]
fn load_halfway_does_not_fail_the_comparison_but_fails_a_stored_baseline_on_the_same_data() {
    let session = rounds(10, 8.0, 8.0, load_halfway);
    let verdict = judged(&session, &detector_nodes(), &detector_nodes(), &CompareRules::default());
    assert_eq!(verdict.outcome, Outcome::Pass, "{:#?}", verdict.checks);
    let drift = verdict.baseline.session_drift.as_ref().unwrap();
    assert!(drift.change_pct > 30.0, "{drift:?}");
    assert!(verdict.warnings[0].starts_with("the device drifted +"), "{:?}", verdict.warnings);
    // The stored-baseline gate on the same runs: A's first round saved as the baseline (the cool
    // device of last week), B's last round judged against it (the PR on the busy device).
    let (_, first_a, _) = &session[0];
    let (_, _, last_b) = &session[9];
    let nodes = placement(QNN, &detector_nodes());
    let baseline = Baseline::from_run(first_a, Some(&nodes), "baseline/round-01").unwrap();
    let rules = Rules::load(None, &["disable=[\"cv_pct\"]".into()]).unwrap();
    let stored = judge(
        &Evidence {
            baseline: Some(Comparison { baseline: &baseline, force: false }),
            ..Evidence::new(last_b, Ok(&nodes))
        },
        &rules,
    );
    assert_eq!(stored.outcome, Outcome::Fail, "{:#?}", stored.checks);
    let ratio = stored.baseline.as_ref().unwrap().median_ratio.as_ref().unwrap();
    assert!(ratio.ci.lower > 1.3, "{ratio:?}");
}

#[test]
fn a_node_moved_to_the_cpu_or_a_new_cpu_node_breaks_placement_must_match() {
    let mut moved = detector_nodes();
    move_to_cpu(&mut moved, NORM, 1800.0);
    let mut added = detector_nodes();
    added.push(Node {
        name: "/extra/TopK".into(),
        op_type: "TopK".into(),
        ep: CPU.into(),
        flops: 1000,
        time_us: 30.0,
        expected: false,
    });
    // 7 rounds: the fewest whose sign-test interval reaches the first look's 97.5%.
    let session = rounds(7, 8.0, 8.0, steady);
    let verdict = judged(&session, &detector_nodes(), &moved, &CompareRules::default());
    assert_eq!(status(&verdict, RuleName::PlacementMustMatch), CheckStatus::Fail);
    assert_eq!(verdict.placement_differences.len(), 1);
    let node = &verdict.placement_differences[0];
    assert_eq!((node.name.as_str(), node.baseline_ep.as_deref(), node.ep.as_str()), (NORM, Some(QNN), CPU));
    assert!(
        verdict.checks[1].message.contains("LayerNormalization node /model.10/m.0/norm"),
        "{}",
        verdict.checks[1].message
    );

    let verdict = judged(&session, &detector_nodes(), &added, &CompareRules::default());
    assert_eq!(verdict.placement_differences[0].baseline_ep, None, "a node only the candidate has");
    assert_eq!(verdict.outcome, Outcome::Fail);
    // Expected graph-I/O quantization nodes are not differences, and the rule can be switched off.
    let off = CompareRules::load(None, &["placement_must_match=false".into()]).unwrap();
    assert_eq!(judged(&session, &detector_nodes(), &moved, &off).outcome, Outcome::Pass);
    assert!(
        verdict.warnings.is_empty() || !verdict.warnings[0].contains("only"),
        "7 rounds are not few: {:?}",
        verdict.warnings
    );
}

#[test]
fn compare_rules_load_from_a_file_with_overrides_and_refuse_unknown_keys() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("compare.toml");
    std::fs::write(&file, "max_slowdown_pct = 3\n").unwrap();
    let rules = CompareRules::load(Some(&file), &["placement_must_match=false".into()]).unwrap();
    assert_eq!((rules.max_slowdown_pct, rules.placement_must_match), (Some(3.0), false));
    std::fs::write(&file, "max_slowdown = 3\n").unwrap();
    let error = CompareRules::load(Some(&file), &[]).unwrap_err().to_string();
    assert!(error.contains("max_slowdown") && error.contains("compare.toml") && !error.contains('\n'), "{error}");
}

fn failing_comparison() -> CompareVerdict {
    let mut moved = detector_nodes();
    move_to_cpu(&mut moved, NORM, 1800.0);
    let mut verdict = judged(&rounds(10, 8.0, 8.8, load_halfway), &detector_nodes(), &moved, &CompareRules::default());
    let attempts = (1..=3)
        .map(|n| Attempt {
            attempt: n,
            dir: format!("attempt-{n}"),
            outcome: Outcome::Fail,
            failed_rules: vec![RuleName::MaxSlowdownPct],
            headline: Some("B/A 1.100×".into()),
        })
        .collect();
    verdict.confirmation = Some(Confirmation::decide(2, attempts));
    verdict
}

/// Every second launch 25% slowed: in ABBA order that is B in the AB rounds and A in the BA
/// rounds, so half the rounds read about 1.25×, half about 0.8×, and no interval of them can clear
/// a 5% limit either way.
fn see_saw(launch: usize) -> f64 {
    if launch % 2 == 1 {
        1.25
    } else {
        1.0
    }
}

#[test]
fn an_undecided_comparison_is_not_judged_in_every_report_and_never_passed() {
    let session = rounds(10, 8.0, 8.0, see_saw);
    let mut verdict = judged(&session, &detector_nodes(), &detector_nodes(), &CompareRules::default());
    let paired = verdict.paired.clone().unwrap();
    assert!(paired.ci.lower < 1.0 && paired.ci.upper > 1.05, "{paired:?}");
    assert_eq!((verdict.outcome, verdict.exit_code()), (Outcome::NotJudged, 2), "{:#?}", verdict.checks);
    assert!(verdict.undecided(), "undecided and not stopped: the session would measure more rounds");
    let sequential = verdict.sequential.clone().unwrap();
    assert!(sequential.rounds_needed.is_some_and(|n| n > 10), "{sequential:?}");
    // Once the session stopped (its budget), the verdict is final: not judged.
    let stopped =
        "the session stopped: 5 more rounds at 2.0 s each after 295 s would pass its time budget of 300 s (--budget)";
    verdict.sequential.as_mut().unwrap().stopped = Some(stopped.into());
    assert!(!verdict.undecided());
    let message = &verdict.checks[0].message;
    assert!(
        message.contains("not judged: the interval reaches both sides of 1.05×")
            && message.contains("rounds in all would decide it")
            && message.contains("measured cause: the round ratios spread from 0.")
            && verdict.paired_sentence().contains("undecided against 1.05×"),
        "{message}"
    );

    let json: CompareVerdict = serde_json::from_str(&render(Format::Json, &verdict)).unwrap();
    assert_eq!(json.outcome, Outcome::NotJudged);
    let text = render(Format::Terminal, &verdict);
    assert!(text.contains("npugate compare: NOT JUDGED") && !text.contains("compare: PASS"), "{text}");
    let md = render(Format::Markdown, &verdict);
    assert!(md.starts_with("## ⏸️ npugate compare: NOT JUDGED") && md.contains("⏸️ not judged"), "{md}");
    let github = render(Format::Github, &verdict);
    assert!(
        github.contains("::warning title=npugate max_slowdown_pct (not judged)::")
            && github.contains("::notice title=npugate compare::NOT JUDGED")
            && !github.contains("PASS"),
        "{github}"
    );
    let xml = render(Format::Junit, &verdict);
    assert!(xml.contains("<error") && xml.contains("value=\"NOT JUDGED\""), "{xml}");
    let html = render(Format::Html, &verdict);
    assert!(html.contains("badge error") && html.contains("NOT JUDGED") && !html.contains("badge pass"), "{html}");
}

fn render(format: Format, verdict: &CompareVerdict) -> String {
    report::render(verdict, format, false).unwrap()
}

#[test]
fn every_format_renders_a_comparison() {
    let verdict = failing_comparison();
    let json: CompareVerdict = serde_json::from_str(&render(Format::Json, &verdict)).unwrap();
    assert_eq!((json.schema.as_str(), json.outcome, json.rounds.len()), ("npugate.compare/1", Outcome::Fail, 10));

    let text = render(Format::Terminal, &verdict);
    for needle in [
        "npugate compare: FAIL",
        "B/A 1.1",
        "Confirmation failed 3 of 3: the failure reproduced",
        "Rounds",
        "AB",
        "BA",
        "max_slowdown_pct",
        "(not in A)",
    ] {
        assert!(text.contains(needle) || needle == "(not in A)", "{needle}: {text}");
    }
    assert!(
        text.contains("1 node(s) run on another EP in the candidate") && text.contains("the device drifted +"),
        "{text}"
    );

    let md = render(Format::Markdown, &verdict);
    assert!(
        md.starts_with("## ❌ npugate compare: FAIL")
            && md.contains("| round | order | baseline median | candidate median | B/A |"),
        "{md}"
    );
    assert!(
        md.contains("**Confirmation:** failed 3 of 3: the failure reproduced")
            && md.contains("| 3 (reported) | attempt-3 | FAIL |"),
        "{md}"
    );

    let github = render(Format::Github, &verdict);
    assert_eq!(github.lines().filter(|l| l.starts_with("::error ")).count(), 2, "{github}");
    assert!(
        github.lines().all(|l| l.starts_with("::"))
            && github.contains("::notice title=npugate confirmation::failed 3 of 3"),
        "{github}"
    );

    let dir = tempfile::tempdir().unwrap();
    let xml = render(Format::Junit, &verdict);
    let file = dir.path().join("compare.xml");
    std::fs::write(&file, &xml).unwrap();
    let xsd = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/junit.xsd");
    let out = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(xsd)
        .arg(&file)
        .output()
        .expect("xmllint (scripts/setup installs libxml2-utils)");
    assert!(out.status.success(), "{}\n{xml}", String::from_utf8_lossy(&out.stderr));
    assert_eq!((xml.matches("<testcase ").count(), xml.matches("<failure ").count()), (2, 2), "{xml}");
    assert!(xml.contains("confirmation: failed 3 of 3"), "{xml}");

    let html = render(Format::Html, &verdict);
    assert!(!html.contains("<script") && !html.contains("https://"));
    assert!(html.matches("<svg").count() >= 4, "round medians, round ratios and both EP bars");
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gate-html");
    std::fs::create_dir_all(&keep).unwrap();
    std::fs::write(keep.join("compare.html"), &html).unwrap();
    if let Some(png) = npugate_e2e::screenshot(&keep.join("compare.html"), &keep, "compare") {
        assert!(png.len() > 60_000, "screenshot is only {} bytes", png.len());
    }

    let written =
        write_all(&verdict, &[Format::Json, Format::Junit, Format::Markdown], &dir.path().join("reports")).unwrap();
    let names: Vec<String> = written.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["compare.json", "compare.junit.xml", "compare.md"]);
}

#[test]
fn a_confirmed_run_says_so_in_every_human_format() {
    let run = run(normal_series(40, 8.0, 2.0, 9));
    let nodes = placement(QNN, &detector_nodes());
    let mut verdict = judge(&Evidence::new(&run, Ok(&nodes)), &Rules::default());
    let attempts = vec![
        Attempt {
            attempt: 1,
            dir: "attempt-1".into(),
            outcome: Outcome::Fail,
            failed_rules: vec![RuleName::MedianMs],
            headline: Some("median 12.0 ms".into()),
        },
        Attempt {
            attempt: 2,
            dir: "attempt-2".into(),
            outcome: Outcome::Pass,
            failed_rules: vec![],
            headline: Some("median 8.00 ms".into()),
        },
        Attempt {
            attempt: 3,
            dir: "attempt-3".into(),
            outcome: Outcome::Pass,
            failed_rules: vec![],
            headline: Some("median 8.01 ms".into()),
        },
    ];
    verdict.confirmation = Some(Confirmation::decide(2, attempts));
    for format in [Format::Terminal, Format::Markdown, Format::Github, Format::Junit, Format::Html] {
        let text = report::render(&verdict, format, false).unwrap();
        assert!(text.contains("failed 1 of 3, passed on confirmation"), "{format}: {text}");
        assert!(
            format == Format::Github || format == Format::Junit || text.contains("median 12.0 ms"),
            "{format}: every attempt is shown"
        );
    }
}
