//! The units of the checks and the number formatting shared by the checks and every report format.

use serde::{Deserialize, Serialize};

/// Unit of a check's measured value and limit, serialized as the string in parentheses.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum Unit {
    /// Percent (`%`).
    #[serde(rename = "%")]
    Percent,
    /// Milliseconds (`ms`).
    #[serde(rename = "ms")]
    Ms,
    /// Timed runs (`runs`).
    #[serde(rename = "runs")]
    Runs,
    /// Graph nodes (`nodes`).
    #[serde(rename = "nodes")]
    Nodes,
    /// Fused partitions (`partitions`).
    #[serde(rename = "partitions")]
    Partitions,
    /// EP switches per run (`switches`).
    #[serde(rename = "switches")]
    Switches,
    /// Cosine similarity, a plain number (`cosine`).
    #[serde(rename = "cosine")]
    Cosine,
    /// Decibels (`dB`).
    #[serde(rename = "dB")]
    Db,
    /// Absolute error, a plain number (`abs`).
    #[serde(rename = "abs")]
    Abs,
    /// Tokens per second (`tok/s`).
    #[serde(rename = "tok/s")]
    TokensPerSecond,
    /// Token positions of a generation (`tokens`).
    #[serde(rename = "tokens")]
    Tokens,
    /// Mebibytes (`MiB`).
    #[serde(rename = "MiB")]
    Mb,
    /// Millijoules (`mJ`).
    #[serde(rename = "mJ")]
    Mj,
}

impl Unit {
    /// The unit as written in the verdict JSON and after counted values (`3 nodes`).
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Percent => "%",
            Unit::Ms => "ms",
            Unit::Runs => "runs",
            Unit::Nodes => "nodes",
            Unit::Partitions => "partitions",
            Unit::Switches => "switches",
            Unit::Cosine => "cosine",
            Unit::Db => "dB",
            Unit::Abs => "abs",
            Unit::TokensPerSecond => "tok/s",
            Unit::Tokens => "tokens",
            Unit::Mb => "MiB",
            Unit::Mj => "mJ",
        }
    }
}

impl std::fmt::Display for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Nanoseconds as milliseconds with precision suited to the size: `24.6 ms`, `8.10 ms`, `0.412 ms`.
pub fn fmt_ms(ns: f64) -> String {
    format!("{} ms", ms_number(ns / 1e6))
}

/// Microseconds as milliseconds (placement times are in µs).
pub fn fmt_ms_from_us(us: f64) -> String {
    fmt_ms(us * 1e3)
}

/// A millisecond value without the unit, three significant digits (at least one decimal).
pub fn ms_number(ms: f64) -> String {
    let a = ms.abs();
    if a >= 10.0 {
        format!("{ms:.1}")
    } else if a >= 1.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.3}")
    }
}

/// A percentage with one decimal: `81.9%`.
pub fn fmt_pct(pct: f64) -> String {
    format!("{pct:.1}%")
}

/// A limit as written in the rules: integers without decimals (`8`), others as given (`97.5`).
pub fn fmt_limit(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(fmt_ms(24_600_000.0), "24.6 ms");
        assert_eq!(fmt_ms(8_100_000.0), "8.10 ms");
        assert_eq!(fmt_ms(412_000.0), "0.412 ms");
        assert_eq!(fmt_limit(8.0), "8");
        assert_eq!(fmt_limit(97.5), "97.5");
    }

    #[test]
    fn units_serialize_as_the_strings_written_before_they_were_a_type() {
        let all = [
            Unit::Percent,
            Unit::Ms,
            Unit::Runs,
            Unit::Nodes,
            Unit::Partitions,
            Unit::Switches,
            Unit::Cosine,
            Unit::Db,
            Unit::Abs,
        ];
        let written = ["%", "ms", "runs", "nodes", "partitions", "switches", "cosine", "dB", "abs"];
        for (unit, text) in all.into_iter().zip(written) {
            assert_eq!(serde_json::to_string(&unit).unwrap(), format!("{text:?}"));
            assert_eq!(serde_json::from_str::<Unit>(&format!("{text:?}")).unwrap(), unit);
            assert_eq!(unit.to_string(), text);
        }
    }
}
