//! One report stream, after cargo-nextest's runner/reporter split and hyperfine's exporters: a
//! command ends by handing its finished result to one [`Reporter`] as a [`Finished`] event, and
//! the reporter, chosen once from the command line, decides what the user sees in which
//! [`Format`]s — the terminal text, the versioned JSON document (`--json`), or the documents of
//! `--format` (Markdown, GitHub annotations, JUnit, HTML), on stdout or in files ([`write_all`]).
//! No command prints its result by hand.
//!
//! A kind of result (a preflight, a run's verdict, a sweep's matrix, …) is one type that implements
//! [`Report`] beside its definition: its schema id, its exit code, its text, its JSON, and the
//! documents of the other formats it has. An output format is one [`Format`]; [`render`] is the one
//! place that turns a report into a format, and the one place that says a format does not apply
//! to a kind ([`ReportError::NotApplicable`]). The developing chapter of the guide shows both.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

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
    /// Its document in a format beyond the text and the JSON every report has (Markdown, GitHub
    /// annotations, JUnit, HTML); `None` where `format` does not apply to this kind, which
    /// [`render`] reports.
    fn document(&self, _format: Format) -> Option<String> {
        None
    }
    /// The file stem when several formats go to one directory (`verdict` → `verdict.md`, …).
    fn stem(&self) -> &str {
        "report"
    }
}

/// `document` as pretty JSON with a final newline: the JSON form of every report.
pub fn json_of(document: &impl Serialize) -> String {
    // Reports hold strings, numbers, lists and maps with string keys: serialization cannot fail.
    let mut json = serde_json::to_string_pretty(document).expect("a report always serializes");
    json.push('\n');
    json
}

/// The output formats of a report (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned text, coloured on a TTY.
    Terminal,
    /// The versioned JSON document.
    Json,
    /// Markdown for `$GITHUB_STEP_SUMMARY` or a PR comment.
    Markdown,
    /// GitHub Actions workflow commands (`::error title=…::…`).
    Github,
    /// JUnit XML, one test case per rule.
    Junit,
    /// Self-contained HTML report with inline SVG charts.
    Html,
}

impl Format {
    /// Every format, in documentation order.
    pub const ALL: [Format; 6] =
        [Format::Terminal, Format::Json, Format::Markdown, Format::Github, Format::Junit, Format::Html];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Terminal => "terminal",
            Format::Json => "json",
            Format::Markdown => "markdown",
            Format::Github => "github",
            Format::Junit => "junit",
            Format::Html => "html",
        }
    }

    /// File name used when several formats of a document with this stem go to one directory
    /// (`verdict.txt`, `compare.junit.xml`, `matrix.md`, …).
    pub fn file_name(self, stem: &str) -> String {
        let extension = match self {
            Format::Terminal => "txt",
            Format::Json => "json",
            Format::Markdown => "md",
            Format::Github => "github.txt",
            Format::Junit => "junit.xml",
            Format::Html => "html",
        };
        format!("{stem}.{extension}")
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Format, String> {
        Format::ALL.into_iter().find(|f| f.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
            format!("unknown format {s:?}; use one of {}", names.join(", "))
        })
    }
}

/// Why a report was not shown.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The kind has no document in this format.
    #[error("the {format} format does not apply to a {schema} report; use terminal or json")]
    NotApplicable {
        /// The format asked for.
        format: Format,
        /// The report's schema id.
        schema: String,
    },
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// Where the write failed.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
}

/// `report` in `format` (the terminal text coloured when `color`): the text and the JSON of every
/// kind, the kind's own document otherwise, or the one error that says the format does not apply.
pub fn render(report: &dyn Report, format: Format, color: bool) -> Result<String, ReportError> {
    match format {
        Format::Terminal => Ok(report.text(color)),
        Format::Json => Ok(report.json()),
        other => report
            .document(other)
            .ok_or_else(|| ReportError::NotApplicable { format, schema: report.schema().to_string() }),
    }
}

/// Every format of `formats`, in order, as one text for standard output.
pub fn render_all(report: &dyn Report, formats: &[Format], color: bool) -> Result<String, ReportError> {
    formats.iter().map(|format| render(report, *format, color)).collect()
}

/// Writes every format of `formats` into files, never coloured: with one format `out` is the
/// file; with several, `out` is a directory that receives [`Format::file_name`] of the report's
/// [`Report::stem`] for each. Returns the files written.
pub fn write_all(report: &dyn Report, formats: &[Format], out: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let write_error = |path: &Path, source| ReportError::Write { path: path.display().to_string(), source };
    let targets: Vec<(Format, PathBuf)> = match formats {
        [single] => vec![(*single, out.to_path_buf())],
        many => {
            std::fs::create_dir_all(out).map_err(|source| write_error(out, source))?;
            many.iter().map(|f| (*f, out.join(f.file_name(report.stem())))).collect()
        }
    };
    for (format, path) in &targets {
        std::fs::write(path, render(report, *format, false)?).map_err(|source| write_error(path, source))?;
    }
    Ok(targets.into_iter().map(|(_, path)| path).collect())
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

/// The formats asked for, in order, on stdout, where the files are on stderr.
pub struct Stdout {
    /// The formats, in order (the terminal text alone, or the JSON document alone with `--json`).
    pub formats: Vec<Format>,
    /// Colour the terminal text (a terminal, `NO_COLOR` unset).
    pub color: bool,
}

impl Reporter for Stdout {
    fn finished(&self, finished: &Finished<'_>) -> u8 {
        match render_all(finished.report, &self.formats, self.color) {
            Ok(text) => print!("{text}"),
            Err(error) => {
                eprintln!("npugate: error: {error}");
                return crate::contract::EXIT_ERROR;
            }
        }
        if let Some(saved) = &finished.saved {
            eprintln!("npugate: {saved}");
        }
        finished.report.exit_code()
    }
}

/// The reporter of a command with a `--json` flag: the versioned JSON document, or the terminal
/// text.
pub fn reporter(json: bool, color: bool) -> Box<dyn Reporter> {
    let format = if json { Format::Json } else { Format::Terminal };
    Box::new(Stdout { formats: vec![format], color })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report kind for the tests: a count that fails above 2, with a Markdown document.
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
        fn document(&self, format: Format) -> Option<String> {
            (format == Format::Markdown).then(|| format!("**{}** counted\n", self.count))
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

    #[test]
    fn a_format_a_kind_lacks_is_one_error_naming_both_and_a_shown_report_exits_2() {
        let count = Count { schema: "npugate.count/1", count: 1 };
        assert_eq!(
            render_all(&count, &[Format::Terminal, Format::Markdown], false).unwrap(),
            "1 counted\n**1** counted\n"
        );
        let error = render(&count, Format::Junit, false).unwrap_err().to_string();
        assert_eq!(error, "the junit format does not apply to a npugate.count/1 report; use terminal or json");
        let stdout = Stdout { formats: vec![Format::Html], color: false };
        assert_eq!(stdout.finished(&Finished::new(&count)), crate::contract::EXIT_ERROR);
    }

    #[test]
    fn several_formats_go_to_one_directory_under_the_reports_stem() {
        let count = Count { schema: "npugate.count/1", count: 1 };
        let dir = tempfile::tempdir().unwrap();
        let written = write_all(&count, &[Format::Json, Format::Markdown], &dir.path().join("out")).unwrap();
        let names: Vec<String> = written.iter().map(|p| p.file_name().unwrap().to_string_lossy().into()).collect();
        assert_eq!(names, ["report.json", "report.md"]);
        assert_eq!(std::fs::read_to_string(&written[1]).unwrap(), "**1** counted\n");
        for format in Format::ALL {
            assert_eq!(format.name().parse::<Format>().unwrap(), format);
        }
        assert!("pdf".parse::<Format>().unwrap_err().contains("terminal"));
    }
}
