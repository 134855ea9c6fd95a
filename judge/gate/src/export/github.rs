//! GitHub Actions workflow commands: one `::error` per failing or unjudged rule, `::warning` per
//! warning, and a `::notice` when everything passed.

use crate::compare::CompareVerdict;
use crate::confirm::Confirmation;
use crate::verdict::{Check, CheckStatus, Outcome, Verdict};

/// Escapes a command's message (`%`, CR, LF), as the Actions runner expects.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a command property value (`title=`): the data escapes plus `:` and `,`.
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

fn command(kind: &str, title: &str, message: &str) -> String {
    format!("::{kind} title={}::{}\n", escape_property(title), escape_data(message))
}

/// One `::error` per failing or unjudged check and per error, one `::warning` per warning.
fn annotations(checks: &[Check], errors: &[String], warnings: &[String]) -> String {
    let mut out = String::new();
    for check in checks {
        match check.status {
            CheckStatus::Fail => out.push_str(&command("error", &format!("npugate {}", check.rule), &check.message)),
            CheckStatus::Unjudged => {
                out.push_str(&command("error", &format!("npugate {} (unjudged)", check.rule), &check.message))
            }
            CheckStatus::NotJudged => {
                out.push_str(&command("warning", &format!("npugate {} (not judged)", check.rule), &check.message))
            }
            CheckStatus::NotApplicable => {
                out.push_str(&command("notice", &format!("npugate {} (not applicable)", check.rule), &check.message))
            }
            CheckStatus::Pass => {}
        }
    }
    for error in errors {
        out.push_str(&command("error", "npugate", error));
    }
    for warning in warnings {
        out.push_str(&command("warning", "npugate", warning));
    }
    out
}

/// A notice with the confirmation's decision, when the run was confirmed.
fn confirmation_notice(confirmation: Option<&Confirmation>) -> String {
    confirmation.map(|c| command("notice", "npugate confirmation", &c.sentence())).unwrap_or_default()
}

/// A run's verdict as GitHub Actions annotations.
pub(super) fn verdict(v: &Verdict) -> String {
    let mut out = confirmation_notice(v.confirmation.as_ref());
    out.push_str(&annotations(&v.checks, &v.errors, &v.warnings));
    let summary = match v.outcome {
        Outcome::Pass => format!("all {} rules passed", v.checks.len()),
        Outcome::Measured => "no rules (npugate run --no-gate)".to_string(),
        Outcome::Fail | Outcome::Error | Outcome::NotJudged => return out,
    };
    let summary = format!("{}: {summary} — {}", v.outcome.label(), v.subject.summary());
    out.push_str(&command("notice", "npugate", &summary));
    out
}

/// A comparison of two models as GitHub Actions annotations.
pub(super) fn compare(v: &CompareVerdict) -> String {
    let mut out = confirmation_notice(v.confirmation.as_ref());
    out.push_str(&annotations(&v.checks, &v.errors, &v.warnings));
    let summary = format!("{}: {} — {}", v.outcome.label(), v.paired_sentence(), v.summary());
    out.push_str(&command("notice", "npugate compare", &summary));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_the_runner_expects() {
        assert_eq!(
            command("error", "npugate a:b,c", "50% off\nnext"),
            "::error title=npugate a%3Ab%2Cc::50%25 off%0Anext\n"
        );
    }
}
