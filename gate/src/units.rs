//! Number formatting shared by the checks and every exporter.

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
}
