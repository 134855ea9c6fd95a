//! Median and p95 of per-run kernel times.

use crate::report::TimeStats;

/// Median of the samples (mean of the two middle values for an even count); 0 for none.
pub fn median(samples: &[f64]) -> f64 {
    percentile(samples, 50.0)
}

/// Percentile with linear interpolation between closest ranks; 0 for no samples.
pub fn percentile(samples: &[f64], pct: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n => {
            let rank = pct / 100.0 * (n - 1) as f64;
            let (low, high) = (rank.floor() as usize, rank.ceil() as usize);
            sorted[low] + (sorted[high] - sorted[low]) * (rank - low as f64)
        }
    }
}

/// Median, p95 and count of the samples, `None` when there are none.
pub fn time_stats(samples: &[f64]) -> Option<TimeStats> {
    (!samples.is_empty()).then(|| TimeStats {
        median_us: median(samples),
        p95_us: percentile(samples, 95.0),
        samples: samples.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 3.0, 4.0]), 2.5);
        assert_eq!(percentile(&[0.0, 10.0], 95.0), 9.5);
        assert!(time_stats(&[]).is_none());
        assert_eq!(time_stats(&[5.0]).unwrap().samples, 1);
    }
}
