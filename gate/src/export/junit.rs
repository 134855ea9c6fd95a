//! JUnit XML (the Ant/Jenkins dialect): one `<testcase>` per rule, `<failure>` for a failed rule,
//! `<error>` for one that could not be judged, plus a `run` case for run-level errors.

use super::{measured_text, xml_escape, Exporter};
use crate::verdict::{CheckStatus, Verdict};

/// JUnit report.
#[derive(Debug, Clone, Copy)]
pub struct JunitExporter;

/// `<failure|error message="…" type="…">body</…>`.
fn outcome_element(tag: &str, kind: &str, message: &str, body: &str) -> String {
    format!(
        "      <{tag} message=\"{}\" type=\"{kind}\">{}</{tag}>\n",
        xml_escape(message),
        xml_escape(body)
    )
}

impl Exporter for JunitExporter {
    fn render(&self, v: &Verdict) -> String {
        let fp = &v.subject.fingerprint;
        let classname = format!("npugate.{}", fp.preferred_ep);
        let failures = v.checks.iter().filter(|c| c.status == CheckStatus::Fail).count();
        let run_errors = usize::from(!v.errors.is_empty());
        let errors = v.checks.iter().filter(|c| c.status == CheckStatus::Unjudged).count() + run_errors;
        let tests = v.checks.len() + run_errors;
        let mut cases = String::new();
        for check in &v.checks {
            cases.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" time=\"0\">\n",
                xml_escape(&classname),
                check.rule
            ));
            let mut body = format!("{}\nmeasured: {}\n", check.message, measured_text(check));
            for node in &check.nodes {
                body.push_str(&format!("node: {}\n", node.describe()));
            }
            match check.status {
                CheckStatus::Fail => cases.push_str(&outcome_element("failure", "gate rule", &check.message, &body)),
                CheckStatus::Unjudged => cases.push_str(&outcome_element("error", "not judged", &check.message, &body)),
                CheckStatus::Pass => cases.push_str(&format!("      <system-out>{}</system-out>\n", xml_escape(&body))),
            }
            cases.push_str("    </testcase>\n");
        }
        if !v.errors.is_empty() {
            cases.push_str(&format!("    <testcase classname=\"{}\" name=\"run\" time=\"0\">\n", xml_escape(&classname)));
            cases.push_str(&outcome_element("error", "run", &v.errors[0], &v.errors.join("\n")));
            cases.push_str("    </testcase>\n");
        }
        let properties: Vec<String> = [
            ("model", v.subject.model.as_str()),
            ("model_sha256", fp.model_sha256.as_str()),
            ("device", fp.device.as_str()),
            ("soc", fp.soc.as_str()),
            ("preferred_ep", fp.preferred_ep.as_str()),
            ("ort_version", fp.ort_version.as_str()),
            ("outcome", v.outcome.label()),
        ]
        .iter()
        .map(|(k, val)| format!("      <property name=\"{k}\" value=\"{}\"/>\n", xml_escape(val)))
        .collect();
        let warnings: String = v.warnings.iter().map(|w| format!("warning: {w}\n")).collect();
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <testsuites name=\"npugate\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">\n\
             \x20 <testsuite name=\"npugate gate\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\" time=\"0\">\n\
             \x20   <properties>\n{}    </properties>\n{cases}    <system-out>{}</system-out>\n\
             \x20 </testsuite>\n</testsuites>\n",
            properties.concat(),
            xml_escape(&warnings)
        )
    }
}
