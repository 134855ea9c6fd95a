//! `npugate.verdict/1` and `npugate.compare/1` JSON: the [`Verdict`] and the [`CompareVerdict`] as
//! serde writes them (schemas in the README).

use serde::Serialize;

use super::Exporter;
use crate::compare::CompareVerdict;
use crate::verdict::Verdict;

/// JSON report.
#[derive(Debug, Clone, Copy)]
pub struct JsonExporter;

/// Pretty JSON with a final newline.
fn pretty(document: &impl Serialize) -> String {
    // Both documents hold only strings, numbers, lists and maps with string keys: serialization cannot fail.
    let mut json = serde_json::to_string_pretty(document).expect("a verdict always serializes");
    json.push('\n');
    json
}

impl Exporter for JsonExporter {
    fn render(&self, verdict: &Verdict) -> String {
        pretty(verdict)
    }

    fn render_compare(&self, comparison: &CompareVerdict) -> String {
        pretty(comparison)
    }
}
