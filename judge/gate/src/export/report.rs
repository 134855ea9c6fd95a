//! The run's verdict and the comparison as kinds of the one report stream: each in every format,
//! rendered by the format files beside this one (a function per kind in each: `verdict`,
//! `compare`).

use npugate_result::report::{json_of, Format, Report};

use super::{github, html, junit, markdown, terminal};
use crate::compare::CompareVerdict;
use crate::verdict::Verdict;

/// `impl Report` for a kind the gate judges: its schema field, its outcome's exit code, its JSON,
/// and the function `$render` of every format file (the file stem `$render` too); JUnit's is
/// `None` where the kind has no rule (a measure-only run), which `render` reports.
macro_rules! in_every_format {
    ($kind:ty, $render:ident) => {
        impl Report for $kind {
            fn schema(&self) -> &str {
                &self.schema
            }
            fn exit_code(&self) -> u8 {
                <$kind>::exit_code(self)
            }
            fn text(&self, color: bool) -> String {
                terminal::$render(self, color)
            }
            fn json(&self) -> String {
                json_of(self)
            }
            fn document(&self, format: Format) -> Option<String> {
                match format {
                    Format::Markdown => Some(markdown::$render(self)),
                    Format::Github => Some(github::$render(self)),
                    Format::Junit => junit::$render(self),
                    Format::Html => Some(html::$render(self)),
                    _ => None,
                }
            }
            fn stem(&self) -> &str {
                stringify!($render)
            }
        }
    };
}

// A run's verdict (`npugate.verdict/1`): `verdict.md`, `verdict.junit.xml`, … with `--report DIR`.
in_every_format!(Verdict, verdict);
// A comparison of two models (`npugate.compare/1`): `compare.md`, `compare.junit.xml`, …
in_every_format!(CompareVerdict, compare);
