//! `npugate.verdict/1` JSON: the [`Verdict`] as serde writes it (schema in the README).

use super::Exporter;
use crate::verdict::Verdict;

/// JSON report.
#[derive(Debug, Clone, Copy)]
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn render(&self, verdict: &Verdict) -> String {
        // A Verdict holds only strings, numbers, lists and maps with string keys: serialization cannot fail.
        let mut json = serde_json::to_string_pretty(verdict).expect("a Verdict always serializes");
        json.push('\n');
        json
    }
}
