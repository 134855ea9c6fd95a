//! One report stream, after cargo-nextest's runner/reporter split and hyperfine's exporters: a
//! command ends by handing its finished result to one [`Reporter`] as a [`Finished`] event, and
//! the reporter, chosen once from the command line, decides what the user sees — the terminal text
//! ([`Text`]) or the versioned JSON document ([`Json`], `--json`). No command prints its result by
//! hand.
//!
//! A kind of result (a preflight, an estimate, a numerics report, …) is one type that implements
//! [`Report`] beside its definition: its schema id, its exit code, its text and its JSON. An output
//! format is one type that implements [`Reporter`] from those methods alone. Either is added in one
//! file: the developing chapter of the guide shows both.

use serde::Serialize;

/// A command's finished result: one kind of report.
pub trait Report {
    /// The versioned schema id of its JSON form (`npugate.htp-preflight/2`).
    fn schema(&self) -> &str;
    /// The exit code it gives the command: 0 pass, 1 a rule or a check failed, 2 could not judge.
    fn exit_code(&self) -> u8;
    /// The text a terminal shows, with its final newline; coloured when `color`.
    fn text(&self, color: bool) -> String;
    /// The versioned JSON document (usually [`json_of`] of itself).
    fn json(&self) -> String;
}

/// `document` as pretty JSON with a final newline: the JSON form of every report.
pub fn json_of(document: &impl Serialize) -> String {
    // Reports hold strings, numbers, lists and maps with string keys: serialization cannot fail.
    let mut json = serde_json::to_string_pretty(document).expect("a report always serializes");
    json.push('\n');
    json
}

/// The event a command ends with: its report, and where it left its files.
pub struct Finished<'a> {
    /// What the command found.
    pub report: &'a dyn Report,
    /// Where its files are, in words (`preflight.json and one result directory per SoC in out/`),
    /// shown on stderr as `npugate: …`; `None` when it wrote none worth naming.
    pub saved: Option<String>,
}

impl<'a> Finished<'a> {
    /// `report`, its files unnamed.
    pub fn new(report: &'a dyn Report) -> Finished<'a> {
        Finished { report, saved: None }
    }

    /// `report`, its files where `saved` says.
    pub fn saved(report: &'a dyn Report, saved: String) -> Finished<'a> {
        Finished { report, saved: Some(saved) }
    }
}

/// Shows a command's finished result to the user.
pub trait Reporter {
    /// Shows `finished`; returns the command's exit code (the report's).
    fn finished(&self, finished: &Finished<'_>) -> u8;
}

/// The terminal text on stdout, where the files are on stderr.
pub struct Text {
    /// Colour the text (a terminal, `NO_COLOR` unset).
    pub color: bool,
}

impl Reporter for Text {
    fn finished(&self, finished: &Finished<'_>) -> u8 {
        print!("{}", finished.report.text(self.color));
        saved_note(finished);
        finished.report.exit_code()
    }
}

/// The versioned JSON document on stdout (`--json`), where the files are on stderr.
pub struct Json;

impl Reporter for Json {
    fn finished(&self, finished: &Finished<'_>) -> u8 {
        print!("{}", finished.report.json());
        saved_note(finished);
        finished.report.exit_code()
    }
}

/// `npugate: <where the files are>` on stderr.
fn saved_note(finished: &Finished<'_>) {
    if let Some(saved) = &finished.saved {
        eprintln!("npugate: {saved}");
    }
}

/// The reporter of a command with a `--json` flag.
pub fn reporter(json: bool, color: bool) -> Box<dyn Reporter> {
    match json {
        true => Box::new(Json),
        false => Box::new(Text { color }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report kind for the tests: a count that fails above 2.
    #[derive(Serialize)]
    struct Count {
        schema: &'static str,
        count: u32,
    }

    impl Report for Count {
        fn schema(&self) -> &str {
            self.schema
        }
        fn exit_code(&self) -> u8 {
            u8::from(self.count > 2)
        }
        fn text(&self, _color: bool) -> String {
            format!("{} counted\n", self.count)
        }
        fn json(&self) -> String {
            json_of(self)
        }
    }

    #[test]
    fn every_reporter_returns_the_reports_exit_code_and_json_carries_the_schema() {
        let count = Count { schema: "npugate.count/1", count: 3 };
        for reporter in [reporter(true, false), reporter(false, false)] {
            assert_eq!(reporter.finished(&Finished::new(&count)), 1);
        }
        let json: serde_json::Value = serde_json::from_str(&count.json()).unwrap();
        assert_eq!(json["schema"], count.schema());
        assert!(count.json().ends_with("}\n") && count.text(false) == "3 counted\n");
    }
}
