//! JUnit XML (the Ant/Jenkins dialect, written by `quick-junit`): one `<testcase>` per rule,
//! `<failure>` for a failed rule, `<error>` for one that could not be judged, plus a `run` case for
//! run-level errors.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::{measured_text, Exporter};
use crate::verdict::{Check, CheckStatus, Verdict};

/// JUnit report.
#[derive(Debug, Clone, Copy)]
pub struct JunitExporter;

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
        CheckStatus::Unjudged => non_success(NonSuccessKind::Error, "not judged", &check.message, &body),
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

impl Exporter for JunitExporter {
    fn render(&self, v: &Verdict) -> String {
        let fp = &v.subject.fingerprint;
        let classname = format!("npugate.{}", fp.preferred_ep);
        let mut suite = TestSuite::new("npugate gate");
        suite.set_time(Duration::ZERO).add_properties([
            ("model", v.subject.model.as_str()),
            ("model_sha256", fp.model_sha256.as_str()),
            ("device", fp.device.as_str()),
            ("soc", fp.soc.as_str()),
            ("preferred_ep", fp.preferred_ep.as_str()),
            ("ort_version", fp.ort_version.as_str()),
            ("outcome", v.outcome.label()),
        ]);
        suite.add_test_cases(v.checks.iter().map(|check| check_case(check, &classname)));
        if let Some(first) = v.errors.first() {
            let status = non_success(NonSuccessKind::Error, "run", first, &v.errors.join("\n"));
            let mut case = TestCase::new("run", status);
            case.set_classname(&classname).set_time(Duration::ZERO);
            suite.add_test_case(case);
        }
        suite.set_system_out(v.warnings.iter().map(|w| format!("warning: {w}\n")).collect::<String>());
        let mut report = Report::new("npugate");
        report.add_test_suite(suite);
        // Every string passes through quick-junit's XML filter: serialization cannot fail.
        report.to_string().expect("a JUnit report always serializes")
    }
}
