//! The clock of sweeps: nights are calendar dates (UTC), times are RFC 3339 UTC with seconds.

/// Now as RFC 3339 UTC with seconds (`2026-11-22T01:20:36Z`).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Today's UTC date, `YYYY-MM-DD`.
pub fn today() -> String {
    chrono::Utc::now().date_naive().format("%Y-%m-%d").to_string()
}

/// Checks a `--night` value: a calendar date `YYYY-MM-DD`.
pub fn parse_night(text: &str) -> Result<String, String> {
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map(|date| date.format("%Y-%m-%d").to_string())
        .map_err(|_| format!("{text:?} is not a date; write YYYY-MM-DD, e.g. 2026-01-31"))
}
