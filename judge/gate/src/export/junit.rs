//! JUnit XML (the Ant/Jenkins dialect, written by `quick-junit`): one `<testcase>` per rule,
//! `<failure>` for a failed rule, `<error>` for one that could not be judged, plus a `run` case for
//! run-level errors.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::measured_text;
use crate::compare::CompareVerdict;
use crate::confirm::Confirmation;
use crate::verdict::{Check, CheckStatus, Outcome, Verdict};

/// A failure or error with its message, type and body.
fn non_success(kind: NonSuccessKind, ty: &str, message: &str, body: &str) -> TestCaseStatus {
    let mut status = TestCaseStatus::non_success(kind);
    status.set_message(message).set_type(ty).set_description(body);
    status
}

/// The test case of one rule: the message, the measured value and the blamed nodes.
fn check_case(check: &Check, classname: &str) -> TestCase {
    let mut body = format!("{}\nmeasured: {}\n", check.message, measured_text(check));
    for node in &check.nodes {
        body.push_str(&format!("node: {}\n", node.describe()));
    }
    let status = match check.status {
        CheckStatus::Fail => non_success(NonSuccessKind::Failure, "gate rule", &check.message, &body),
        CheckStatus::Unjudged => non_success(NonSuccessKind::Error, "unjudged", &check.message, &body),
        CheckStatus::NotJudged => non_success(NonSuccessKind::Error, "not judged", &check.message, &body),
        CheckStatus::NotApplicable => {
            let mut skipped = TestCaseStatus::skipped();
            skipped.set_message(check.message.clone());
            skipped
        }
        CheckStatus::Pass => TestCaseStatus::success(),
    };
    let mut case = TestCase::new(check.rule.as_str(), status);
    case.set_classname(classname).set_time(Duration::ZERO);
    if check.status == CheckStatus::Pass {
        case.set_system_out(body);
    }
    case
}

/// A suite with one case per check, a `run` case for the first error (all errors in its body), and
/// the warnings (and the confirmation's decision) as its standard output.
fn suite(
    name: &str,
    classname: &str,
    checks: &[Check],
    errors: &[String],
    notes: String,
    properties: &[(&str, &str)],
) -> String {
    let mut suite = TestSuite::new(name);
    suite.set_time(Duration::ZERO).add_properties(properties.iter().copied());
    suite.add_test_cases(checks.iter().map(|check| check_case(check, classname)));
    if let Some(first) = errors.first() {
        let status = non_success(NonSuccessKind::Error, "run", first, &errors.join("\n"));
        let mut case = TestCase::new("run", status);
        case.set_classname(classname).set_time(Duration::ZERO);
        suite.add_test_case(case);
    }
    suite.set_system_out(notes);
    let mut report = Report::new("npugate");
    report.add_test_suite(suite);
    // Every string passes through quick-junit's XML filter: serialization cannot fail.
    report.to_string().expect("a JUnit report always serializes")
}

/// The run's memory and energy figures as properties (`peak_memory_mb`, `memory_growth_mb`,
/// `energy_mj`, `energy_error_mj`, `energy_not_measured`), those it has.
fn resource_properties(v: &Verdict) -> Vec<(&'static str, String)> {
    let mb = |bytes: f64| format!("{:.1}", bytes / npugate_result::resources::MB);
    let memory = v.memory.as_ref();
    let energy = v.energy.as_ref();
    [
        ("peak_memory_mb", memory.and_then(|m| m.peak_bytes).map(|b| mb(b as f64))),
        ("memory_growth_mb", memory.and_then(|m| m.leak_check.as_ref()).map(|l| mb(l.growth_bytes as f64))),
        ("energy_mj", energy.and_then(|e| e.measured.as_ref()).map(|m| format!("{:.4}", m.energy_mj))),
        ("energy_error_mj", energy.and_then(|e| e.measured.as_ref()).map(|m| format!("{:.4}", m.error_mj))),
        ("energy_not_measured", energy.and_then(|e| e.not_measured.clone())),
    ]
    .into_iter()
    .filter_map(|(name, value)| value.map(|v| (name, v)))
    .collect()
}

/// The confirmation's decision and the warnings, one line each.
fn notes(confirmation: Option<&Confirmation>, warnings: &[String]) -> String {
    let confirmed = confirmation.map(|c| format!("confirmation: {}\n", c.sentence())).unwrap_or_default();
    confirmed + &warnings.iter().map(|w| format!("warning: {w}\n")).collect::<String>()
}

/// A run's verdict as JUnit XML; none for a measure-only run, which has no rule to be a test case.
pub(super) fn verdict(v: &Verdict) -> Option<String> {
    if v.outcome == Outcome::Measured {
        return None;
    }
    let fp = &v.subject.fingerprint;
    let resources = resource_properties(v);
    let mut properties = vec![
        ("model", v.subject.model.as_str()),
        ("model_digest", fp.model_digest.as_str()),
        ("device", fp.device.as_str()),
        ("soc", fp.soc.as_str()),
        ("preferred_ep", fp.preferred_ep.as_str()),
        ("ort_version", fp.ort_version.as_str()),
        ("outcome", v.outcome.label()),
    ];
    properties.extend(resources.iter().map(|(k, v)| (*k, v.as_str())));
    let classname = format!("npugate.{}", fp.preferred_ep);
    Some(suite(
        "npugate gate",
        &classname,
        &v.checks,
        &v.errors,
        notes(v.confirmation.as_ref(), &v.warnings),
        &properties,
    ))
}

/// A comparison of two models as JUnit XML (every comparison has its rules).
pub(super) fn compare(v: &CompareVerdict) -> Option<String> {
    let fp = &v.candidate.subject.fingerprint;
    let paired = v.paired_sentence();
    let properties = [
        ("baseline_model", v.baseline.model.as_str()),
        ("baseline_digest", v.baseline.subject.fingerprint.model_digest.as_str()),
        ("candidate_model", v.candidate.model.as_str()),
        ("candidate_digest", fp.model_digest.as_str()),
        ("target", v.target.as_str()),
        ("device", fp.device.as_str()),
        ("preferred_ep", fp.preferred_ep.as_str()),
        ("paired_ratio", paired.as_str()),
        ("outcome", v.outcome.label()),
    ];
    let classname = format!("npugate.compare.{}", fp.preferred_ep);
    Some(suite(
        "npugate compare",
        &classname,
        &v.checks,
        &v.errors,
        notes(v.confirmation.as_ref(), &v.warnings),
        &properties,
    ))
}
