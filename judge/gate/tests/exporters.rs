//! Every exporter on a failing verdict (bimodal latencies, a CPU fallback, a moved node) and a
//! passing one: JSON round-trips, GitHub commands are escaped, JUnit validates against the XSD with
//! xmllint, and the HTML report renders in headless Chromium.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{detector_nodes, mixture, move_to_cpu, normal_series, placement, run, NORM, QNN};
use npugate_gate::{judge, Baseline, Comparison, Evidence, Rules, Verdict};
use npugate_result::report::{self, write_all, Format};
use npugate_result::{CpuWait, PerRun};

fn failing_verdict() -> Verdict {
    let baseline_run = run(normal_series(200, 8.0, 3.0, 31));
    let baseline = Baseline::from_run(&baseline_run, Some(&placement(QNN, &detector_nodes())), "results/main").unwrap();
    let mut nodes = detector_nodes();
    move_to_cpu(&mut nodes, NORM, 1800.0);
    let rules = Rules::load(None, &["p99_ms=20".into(), "max_partitions=1".into()]).unwrap();
    let run = run(mixture(300, 8.1, 24.6, 0.32, 41));
    let placement = placement(QNN, &nodes);
    let baseline = Some(Comparison { baseline: &baseline, force: false });
    judge(&Evidence { baseline, ..Evidence::new(&run, Ok(&placement)) }, &rules)
}

fn passing_verdict() -> Verdict {
    let (run, placement) = (run(normal_series(200, 8.0, 3.0, 5)), placement(QNN, &detector_nodes()));
    judge(&Evidence::new(&run, Ok(&placement)), &Rules::default())
}

fn render(format: Format, verdict: &Verdict) -> String {
    report::render(verdict, format, false).unwrap()
}

#[test]
fn json_round_trips_and_is_versioned() {
    let verdict = failing_verdict();
    let json = render(Format::Json, &verdict);
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["schema"], npugate_gate::verdict::VERDICT_SCHEMA);
    assert_eq!(value["outcome"], "fail");
    let back: Verdict = serde_json::from_str(&json).unwrap();
    // Floats may differ in the last bit after a text round trip; everything a reader acts on is equal.
    assert_eq!(back.outcome, verdict.outcome);
    assert_eq!(
        back.checks.iter().map(|c| (&c.rule, c.status, &c.message)).collect::<Vec<_>>(),
        verdict.checks.iter().map(|c| (&c.rule, c.status, &c.message)).collect::<Vec<_>>()
    );
    assert_eq!(back.latencies_ns, verdict.latencies_ns);
    let fallback =
        |v: &Verdict| v.placement.as_ref().unwrap().fallback.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
    assert_eq!(fallback(&back), fallback(&verdict));
}

#[test]
fn github_annotations_one_error_per_failing_rule() {
    let verdict = failing_verdict();
    let text = render(Format::Github, &verdict);
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("::error ")).collect();
    assert_eq!(errors.len(), verdict.failures().count(), "{text}");
    assert!(
        errors.iter().any(|l| l.starts_with("::error title=npugate npu_flops_pct::npu_flops_pct 87.7%25 < 98%25")),
        "{text}"
    );
    assert!(text.lines().all(|l| l.starts_with("::")), "one command per line: {text}");
    let pass = render(Format::Github, &passing_verdict());
    assert!(pass.lines().any(|l| l.starts_with("::notice title=npugate::PASS: all 2 rules passed")), "{pass}");
    assert!(!pass.contains("::error"), "{pass}");
}

fn xmllint() -> Option<PathBuf> {
    let found = Command::new("xmllint").arg("--version").output().is_ok();
    if !found {
        panic!("xmllint is not installed: run scripts/setup (Debian package libxml2-utils)");
    }
    Some(PathBuf::from("xmllint"))
}

fn validate_junit(xml: &str, dir: &Path, name: &str) -> std::process::Output {
    let file = dir.join(name);
    std::fs::write(&file, xml).unwrap();
    let xsd = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/junit.xsd");
    Command::new(xmllint().unwrap()).arg("--noout").arg("--schema").arg(xsd).arg(&file).output().unwrap()
}

#[test]
fn junit_validates_against_the_xsd() {
    let dir = tempfile::tempdir().unwrap();
    let failing = failing_verdict();
    let xml = render(Format::Junit, &failing);
    let out = validate_junit(&xml, dir.path(), "fail.xml");
    assert!(out.status.success(), "{}\n{xml}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(xml.matches("<testcase ").count(), failing.checks.len());
    assert_eq!(xml.matches("<failure ").count(), failing.failures().count());
    assert!(xml.contains("name=\"npu_flops_pct\""));

    let out = validate_junit(&render(Format::Junit, &passing_verdict()), dir.path(), "pass.xml");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // The validator is real: a test case without its required name is rejected.
    let broken = xml.replacen("name=\"npu_flops_pct\"", "", 1);
    assert!(!validate_junit(&broken, dir.path(), "broken.xml").status.success());
}

#[test]
fn junit_of_a_run_that_could_not_be_judged_validates() {
    let dir = tempfile::tempdir().unwrap();
    let run = run(normal_series(50, 8.0, 3.0, 7));
    let verdict = judge(&Evidence::new(&run, Err("profile.json <truncated> & \u{1}broken".into())), &Rules::default());
    let xml = render(Format::Junit, &verdict);
    let out = validate_junit(&xml, dir.path(), "error.xml");
    assert!(out.status.success(), "{}\n{xml}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(xml.matches("<error ").count(), 2, "the unjudged npu_flops_pct and the run: {xml}");
    assert!(xml.contains("name=\"run\"") && xml.contains("&lt;truncated&gt; &amp; broken"), "{xml}");
}

#[test]
fn markdown_has_the_rule_table_and_clusters() {
    let md = render(Format::Markdown, &failing_verdict());
    assert!(md.starts_with("## ❌ npugate gate: FAIL"), "{md}");
    assert!(md.contains("| status | rule | measured | limit | detail |"), "{md}");
    assert!(md.contains("68% of runs at 8."), "{md}");
    assert!(md.contains("<details><summary>3 node(s) off QNNExecutionProvider</summary>"), "{md}");
}

#[test]
fn terminal_colours_only_when_asked() {
    let verdict = failing_verdict();
    let plain = render(Format::Terminal, &verdict);
    assert!(!plain.contains('\x1b'));
    assert!(plain.contains("FAIL"), "{plain}");
    let coloured = report::render(&verdict, Format::Terminal, true).unwrap();
    assert!(coloured.contains("\x1b[31mFAIL\x1b[0m"));
    let placement = npugate_gate::export::placement_text(verdict.placement.as_ref().unwrap(), &verdict.rules, false);
    assert!(placement.contains("Partitions (2)") && placement.contains("hint: export with opset 17"), "{placement}");
}

#[test]
fn write_all_puts_several_formats_into_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("reports");
    let written = write_all(&passing_verdict(), &[Format::Json, Format::Junit, Format::Html], &out).unwrap();
    assert_eq!(written.len(), 3);
    assert!(
        out.join("verdict.json").is_file()
            && out.join("verdict.junit.xml").is_file()
            && out.join("verdict.html").is_file()
    );
    let single = dir.path().join("v.md");
    write_all(&passing_verdict(), &[Format::Markdown], &single).unwrap();
    assert!(std::fs::read_to_string(single).unwrap().contains("PASS"));
}

/// Writes `html` under the test target dir and renders it in headless Chromium (kept to look at).
fn screenshot(html: &str, name: &str) -> Option<Vec<u8>> {
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gate-html");
    std::fs::create_dir_all(&keep).unwrap();
    let page = keep.join(format!("{name}.html"));
    std::fs::write(&page, html).unwrap();
    npugate_e2e::screenshot(&page, &keep, name)
}

#[test]
fn html_is_self_contained_and_renders_in_chromium() {
    let verdict = failing_verdict();
    let html = render(Format::Html, &verdict);
    assert!(
        !html.contains("http://")
            || html.matches("http://").count() == html.matches("http://www.w3.org/2000/svg").count()
    );
    assert!(!html.contains("https://") && !html.contains("<script") && !html.contains("<link"));
    assert!(html.matches("<svg").count() >= 4, "histogram, run chart, EP bars, graph strip");
    let Some(png) = screenshot(&html, "failing") else { return };
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // A blank 1400×2400 page compresses to a few kB; charts, tables and text make it far larger.
    assert!(png.len() > 60_000, "screenshot is only {} bytes", png.len());
    screenshot(&render(Format::Html, &passing_verdict()), "passing");
}

/// A passing verdict whose every 10th run waited 30 ms for a CPU and took 40 ms: those runs are
/// set aside as contended.
fn contended_verdict() -> (Verdict, usize) {
    let mut latencies = normal_series(200, 8.0, 3.0, 17);
    let mut delays = vec![0u64; latencies.len()];
    for index in (0..latencies.len()).step_by(10) {
        latencies[index] = 40_000_000;
        delays[index] = 30_000_000;
    }
    let mut run = run(latencies);
    run.timings.cpu_wait = Some(CpuWait {
        threads: 4,
        run_queue_delay_ns: PerRun::Measured(delays),
        involuntary_switches: PerRun::Unavailable("not read in this test".into()),
    });
    (judge(&Evidence::new(&run, Ok(&placement(QNN, &detector_nodes()))), &Rules::default()), 20)
}

#[test]
fn html_histogram_bins_the_judged_runs_and_names_the_set_aside_ones() {
    let (verdict, set_aside) = contended_verdict();
    assert_eq!(verdict.contention.as_ref().map(|c| c.set_aside()), Some(set_aside));
    let html = render(Format::Html, &verdict);
    let start = html.find("latency histogram").expect("a histogram");
    let histogram = &html[html[..start].rfind("<svg").unwrap()..start + html[start..].find("</svg>").unwrap()];
    let binned: usize =
        histogram.split("<title>").skip(1).filter_map(|t| t.split(" runs</title>").next()?.parse::<usize>().ok()).sum();
    assert_eq!(binned, verdict.latencies_ns.len() - set_aside, "only the judged runs are binned");
    assert!(histogram.contains("20 contended runs set aside (up to 40"), "{histogram}");
    assert!(html.contains("20 contended runs set aside, not binned"));
    // The latency table comes in tables of at most 7 columns (14 in one overflow 1280 px).
    let latency = &html[html.find("<h2>Latency</h2>").unwrap()..start];
    let tables: Vec<&str> = latency.split("<table>").skip(1).collect();
    assert_eq!(tables.len(), 2);
    assert!(tables.iter().all(|t| t.matches("<th>").count() <= 7), "{latency}");
}

#[test]
fn unknown_toml_key_names_the_key_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gate.toml");
    std::fs::write(&file, "cv_pct = 5\nnpu_flop_pct = 98\n").unwrap();
    let err = Rules::load(Some(&file), &[]).unwrap_err().to_string();
    assert!(err.contains("npu_flop_pct") && err.contains("gate.toml"), "{err}");
    assert!(!err.contains('\n'), "one line: {err}");

    std::fs::write(&file, "cv_pct = 5\nmedian_ms = 12.5\nallow_op_types = [\"Softmax\"]\n").unwrap();
    let rules = Rules::load(Some(&file), &["cv_pct=6".into()]).unwrap();
    assert_eq!((rules.cv_pct, rules.median_ms), (Some(6.0), Some(12.5)), "overrides win over the file");
    assert_eq!(rules.npu_flops_pct, Some(98.0), "defaults stay");
}

#[test]
fn verdict_file_is_written_atomically_and_read_only_at_its_major_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("verdict.json");
    let verdict = passing_verdict();
    verdict.write(&path).unwrap();
    let back = Verdict::read(&path).unwrap();
    assert_eq!((back.outcome, back.checks.len()), (verdict.outcome, verdict.checks.len()));
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(json["checks"][0]["unit"], "%", "units keep their spelling");
    json["schema"] = "npugate.verdict/2".into();
    std::fs::write(&path, json.to_string()).unwrap();
    let error = Verdict::read(&path).unwrap_err().to_string();
    assert!(error.contains("verdict.json") && error.contains("npugate.verdict/2"), "{error}");
}

#[test]
fn html_and_text_say_when_the_profiler_slowed_the_runs_its_kernel_times_come_from() {
    // The timed median is about 8 ms; the placement's kernel time per profiled run is set below it,
    // then at 3× it (a Loop of small nodes under ORT's profiler).
    let measured = run(normal_series(200, 8.0, 3.0, 5));
    let mut placed = placement(QNN, &detector_nodes());
    for (kernel_us, said) in [(4_000.0, false), (24_000.0, true)] {
        placed.totals.time_us_per_run = Some(kernel_us);
        let verdict = judge(&Evidence::new(&measured, Ok(&placed)), &Rules::default());
        let note = "which ORT's profiler slowed to 24.0 ms of kernels per run against a timed median of";
        for format in [Format::Html, Format::Terminal] {
            assert_eq!(render(format, &verdict).contains(note), said, "{format}: kernel {kernel_us} us per run");
        }
    }
}

#[test]
fn a_run_judged_by_no_rule_is_measured_in_every_format_but_junit() {
    let (run, placement) = (run(normal_series(200, 8.0, 3.0, 5)), placement(QNN, &detector_nodes()));
    let measured = judge(&Evidence::new(&run, Ok(&placement)), &Rules::none());
    assert_eq!((measured.outcome, measured.exit_code()), (npugate_gate::Outcome::Measured, 0));
    assert!(measured.checks.is_empty() && measured.latency.is_some() && measured.placement.is_some());
    let json: serde_json::Value = serde_json::from_str(&render(Format::Json, &measured)).unwrap();
    assert_eq!((json["schema"].as_str(), json["outcome"].as_str()), (Some("npugate.verdict/1.2"), Some("measured")));
    let dir = tempfile::tempdir().unwrap();
    measured.write(&dir.path().join("verdict.json")).unwrap();
    assert_eq!(Verdict::read(&dir.path().join("verdict.json")).unwrap().outcome, measured.outcome, "1.2 reads back");

    let text = render(Format::Terminal, &measured);
    assert!(text.starts_with("npugate run: MEASURED — ") && text.contains("\nLatency\n"), "{text}");
    assert!(text.contains("\nRules\n  none: a measurement only (npugate run --no-gate)"), "{text}");
    assert!(render(Format::Markdown, &measured).starts_with("## 📏 npugate run: MEASURED"));
    assert!(render(Format::Github, &measured).contains("::notice title=npugate::MEASURED: no rules"));
    assert!(render(Format::Html, &measured).contains("<title>npugate run: MEASURED</title>"));
    let junit = report::render(&measured, Format::Junit, false).unwrap_err().to_string();
    assert!(junit.starts_with("the junit format does not apply to a npugate.verdict/1.2 report"), "{junit}");
    // A verdict judged by rules keeps its schema: readers of 1.1 read it.
    assert_eq!(passing_verdict().schema, npugate_gate::verdict::VERDICT_SCHEMA);
}

#[test]
fn report_html_labels_fallback_nodes_without_overlap_even_side_by_side_and_at_the_right_edge() {
    // Six neighbouring nodes with long names fall back, the last ones at the end of the graph: the
    // labels go to the three rows under the strip where they fit, none over another, and the
    // last ones end at their mark instead of running off the page.
    let mut nodes = detector_nodes();
    let last = nodes.len() - 1;
    for index in [3, 4, 5, 6, last - 2, last - 1] {
        let name = nodes[index].name.clone();
        move_to_cpu(&mut nodes, &name, 500.0);
    }
    let verdict =
        judge(&Evidence::new(&run(normal_series(60, 8.0, 3.0, 5)), Ok(&placement(QNN, &nodes))), &Rules::default());
    let html = render(Format::Html, &verdict);
    let labels: Vec<(f64, f64, bool, String)> = html
        .split("<text ")
        .filter(|element| element.contains(r##"fill="#c92a2a""##))
        .map(|element| {
            let number = |key: &str| -> f64 {
                let rest = &element[element.find(&format!("{key}=\"")).unwrap() + key.len() + 2..];
                rest[..rest.find('"').unwrap()].parse().unwrap()
            };
            let text = &element[element.find('>').unwrap() + 1..element.find("</text>").unwrap()];
            (number("x"), number("y"), element.contains(r#"text-anchor="end""#), text.to_string())
        })
        .collect();
    assert!(labels.len() >= 3, "one label per row at least: {labels:?}");
    // At 11 px a character of these names is at most 7 px wide.
    let span = |(x, _, ends, text): &(f64, f64, bool, String)| {
        let width = text.chars().count() as f64 * 7.0;
        if *ends {
            (x - width, *x)
        } else {
            (*x, x + width)
        }
    };
    for (index, a) in labels.iter().enumerate() {
        for b in &labels[index + 1..] {
            let ((a0, a1), (b0, b1)) = (span(a), span(b));
            assert!(a.1 != b.1 || a1 <= b0 || b1 <= a0, "{a:?} overlaps {b:?}");
        }
        assert!(span(a).1 <= 1180.0 && span(a).0 >= 0.0, "{a:?} leaves the strip");
    }
    assert!(labels.iter().any(|label| label.2), "a label at the right edge ends at its mark: {labels:?}");
}
