//! Latency statistics, free of I/O: named estimates (as criterion does), a seeded bootstrap
//! confidence interval for the median, bimodality, within-run drift, sample-size guards, the
//! paired ratio of an interleaved A/B session ([`paired_ratio`]) and the runs a busy machine
//! slowed ([`contention`]).
//! npugate's one implementation of percentiles and medians: the gate's latency statistics, the
//! placement report's kernel times and the benchmarks all compute them here.
//!
//! Conventions:
//! - Percentiles use linear interpolation between closest ranks (Hyndman–Fan type 7, numpy's
//!   default): `h = (n − 1)·q`, `x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋])` on the sorted sample.
//! - The standard deviation is the sample one (divisor n − 1); the MAD is scaled by 1.4826 so that it
//!   estimates σ for normal data (as criterion and hyperfine do).
//! - Bootstrap intervals are percentile intervals from [`BOOTSTRAP_RESAMPLES`] resamples at
//!   [`CONFIDENCE_LEVEL`], drawn from a generator seeded with [`BOOTSTRAP_SEED`]: the same series
//!   always gives the same interval.

use serde::{Deserialize, Serialize};

pub mod contention;
pub mod paired;

pub use contention::{attributed_waits, ContendedRun, Contention, Readings, RunSpan, ThreadCounters};
pub use paired::{look_alpha, paired_ratio, sign_test_rank, PairedRatio, SEQUENTIAL_ALPHA};

/// Number of bootstrap resamples behind every confidence interval.
pub const BOOTSTRAP_RESAMPLES: usize = 10_000;
/// Confidence level of every interval.
pub const CONFIDENCE_LEVEL: f64 = 0.95;
/// Seed of the bootstrap generator (ASCII "npugate!"), so intervals are reproducible.
pub const BOOTSTRAP_SEED: u64 = 0x6e70_7567_6174_6521;
/// Runs a coefficient-of-variation rule needs: below 20 the sample standard deviation is itself
/// too uncertain (its relative standard error ≈ 1/√(2(n−1)) exceeds 16%) to hold an 8% limit.
pub const MIN_RUNS_FOR_CV: usize = 20;
/// Run-to-run standard deviation the clock and the scheduler add to any timed run on their own
/// (ns): a timer interrupt, a softirq, a thread-pool worker woken a tick late — a few µs each, seen
/// in a part of the runs. A model of 36 µs held to an 8% CV (2.9 µs) would be failed by that floor
/// alone; [`model_cv_pct`] takes it out before the CV rule reads the series.
pub const TIMER_JITTER_FLOOR_NS: f64 = 10_000.0;
/// Runs below which the modality and drift analyses are not attempted.
pub const MIN_RUNS_FOR_SHAPE: usize = 10;
/// Smallest share (percent) each cluster must hold for a series to be called bimodal.
pub const MIN_CLUSTER_SHARE_PCT: f64 = 5.0;
/// Ashman's D above which two clusters are called cleanly separated.
pub const MIN_ASHMAN_D: f64 = 2.0;
/// Bimodality coefficient above which a distribution is more bimodal than the uniform (5/9).
pub const BIMODALITY_COEFFICIENT_THRESHOLD: f64 = 5.0 / 9.0;
/// Change between the first and last third (percent) from which drift is reported.
pub const DRIFT_WARN_PCT: f64 = 5.0;
/// Scale that makes the median absolute deviation a consistent estimator of σ for normal data.
const MAD_SCALE: f64 = 1.4826;

/// Runs a percentile rule needs so that at least one run is expected above that percentile:
/// ⌈1 / (1 − q)⌉, i.e. 10 for p90, 20 for p95 and 100 for p99. With fewer runs the "percentile"
/// is only an estimate of the maximum.
pub fn min_runs_for_percentile(percentile: f64) -> usize {
    let above = 1.0 - percentile / 100.0;
    (1.0 / above - 1e-9).ceil() as usize
}

/// Summary of one latency series, every time in nanoseconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LatencyStats {
    /// Number of runs.
    pub n: usize,
    /// Fastest run.
    pub min_ns: f64,
    /// Slowest run.
    pub max_ns: f64,
    /// Arithmetic mean.
    pub mean_ns: f64,
    /// Median (type-7 50th percentile).
    pub median_ns: f64,
    /// Bootstrap confidence interval of the median.
    pub median_ci: ConfidenceInterval,
    /// Sample standard deviation (divisor n − 1; 0 for one run).
    pub stdev_ns: f64,
    /// Coefficient of variation: stdev / mean, in percent.
    pub cv_pct: f64,
    /// Median absolute deviation from the median, scaled by 1.4826.
    pub mad_ns: f64,
    /// 90th percentile (type 7).
    pub p90_ns: f64,
    /// 95th percentile (type 7).
    pub p95_ns: f64,
    /// 99th percentile (type 7).
    pub p99_ns: f64,
    /// Two-cluster analysis (absent below [`MIN_RUNS_FOR_SHAPE`] runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modality: Option<Modality>,
    /// First third against last third (absent below [`MIN_RUNS_FOR_SHAPE`] runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
}

/// A two-sided percentile-bootstrap confidence interval.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ConfidenceInterval {
    /// Lower bound.
    pub lower: f64,
    /// Upper bound.
    pub upper: f64,
    /// Confidence level (0.95).
    pub level: f64,
    /// Bootstrap resamples drawn.
    pub resamples: usize,
}

/// Whether a series splits into two clusters, and the best split.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Modality {
    /// True when the best split is clean (Ashman's D > 2), both clusters hold at least 5% of the runs
    /// and the bimodality coefficient exceeds 5/9.
    pub bimodal: bool,
    /// Sarle's bimodality coefficient (g² + 1) / (κ + 3(n−1)²/((n−2)(n−3))) with bias-corrected
    /// skewness g and excess kurtosis κ; 1/3 for normal data, 5/9 for uniform, 1 for two points.
    pub coefficient: f64,
    /// The two-cluster split minimising the within-cluster sum of squares (1-D 2-means, exact).
    pub split: ClusterSplit,
}

/// The best split of a sorted series into a fast and a slow cluster.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClusterSplit {
    /// The faster cluster.
    pub fast: Cluster,
    /// The slower cluster.
    pub slow: Cluster,
    /// Empty space between the clusters: slowest fast run to fastest slow run (ns).
    pub gap_ns: f64,
    /// Ashman's D = √2·|μ₁ − μ₂| / √(σ₁² + σ₂²); above 2 the clusters are cleanly separated.
    pub ashman_d: f64,
}

/// One cluster of a split.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cluster {
    /// Runs in the cluster.
    pub runs: usize,
    /// Percent of all runs.
    pub share_pct: f64,
    /// Median of the cluster.
    pub median_ns: f64,
    /// Fastest run in the cluster.
    pub min_ns: f64,
    /// Slowest run in the cluster.
    pub max_ns: f64,
}

/// Within-run drift: the median of the last third of the runs against the first third.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Drift {
    /// Runs in each third.
    pub runs_per_third: usize,
    /// Median of the first third.
    pub first_third_median_ns: f64,
    /// Median of the last third.
    pub last_third_median_ns: f64,
    /// (last − first) / first, in percent; positive when the runs got slower (thermal throttling).
    pub change_pct: f64,
}

impl Drift {
    /// True when the change reaches [`DRIFT_WARN_PCT`] in either direction.
    pub fn is_notable(&self) -> bool {
        self.change_pct.abs() >= DRIFT_WARN_PCT
    }
}

/// Ratio of two medians (current / baseline) with its bootstrap interval.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MedianRatio {
    /// Point estimate: current median / baseline median.
    pub ratio: f64,
    /// Bootstrap interval of the ratio (both series resampled independently).
    pub ci: ConfidenceInterval,
}

impl LatencyStats {
    /// Computes every estimate for a series in run order; `None` for an empty series.
    pub fn from_ns(latencies_ns: &[u64]) -> Option<LatencyStats> {
        if latencies_ns.is_empty() {
            return None;
        }
        let in_order: Vec<f64> = latencies_ns.iter().map(|&v| v as f64).collect();
        let mut sorted = in_order.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let mean = mean(&sorted);
        let stdev = sample_stdev(&sorted, mean);
        let median = percentile_sorted(&sorted, 50.0);
        let mut deviations: Vec<f64> = sorted.iter().map(|v| (v - median).abs()).collect();
        deviations.sort_by(f64::total_cmp);
        let shaped = n >= MIN_RUNS_FOR_SHAPE;
        Some(LatencyStats {
            n,
            min_ns: sorted[0],
            max_ns: sorted[n - 1],
            mean_ns: mean,
            median_ns: median,
            median_ci: median_ci(&sorted),
            stdev_ns: stdev,
            cv_pct: if mean > 0.0 { stdev / mean * 100.0 } else { 0.0 },
            mad_ns: percentile_sorted(&deviations, 50.0) * MAD_SCALE,
            p90_ns: percentile_sorted(&sorted, 90.0),
            p95_ns: percentile_sorted(&sorted, 95.0),
            p99_ns: percentile_sorted(&sorted, 99.0),
            modality: shaped.then(|| modality(&sorted)).flatten(),
            drift: if shaped { drift(&in_order) } else { None },
        })
    }

    /// The value of a named percentile estimate (90, 95 or 99), if this summary carries it.
    pub fn percentile_ns(&self, percentile: u8) -> Option<f64> {
        match percentile {
            50 => Some(self.median_ns),
            90 => Some(self.p90_ns),
            95 => Some(self.p95_ns),
            99 => Some(self.p99_ns),
            _ => None,
        }
    }

    /// The clusters when the series is bimodal.
    pub fn bimodal_split(&self) -> Option<&ClusterSplit> {
        self.modality.as_ref().filter(|m| m.bimodal).map(|m| &m.split)
    }
}

/// The CV (percent) of what the model itself varied: the measured variance less the clock's and
/// scheduler's floor ([`TIMER_JITTER_FLOOR_NS`]²; independent noise adds its variance), over the
/// mean. Equal to the measured CV for a series whose stdev is far above the floor (a 1 ms model
/// with a 50 µs stdev: 4.99% for 5.0%); 0 for a tiny model whose whole spread is the floor's.
pub fn model_cv_pct(stats: &LatencyStats) -> f64 {
    if stats.mean_ns <= 0.0 {
        return 0.0;
    }
    let variance = (stats.stdev_ns.powi(2) - TIMER_JITTER_FLOOR_NS.powi(2)).max(0.0);
    variance.sqrt() / stats.mean_ns * 100.0
}

/// Type-7 percentile (0–100) of values in any order; `None` when there are none.
pub fn percentile(values: &[f64], percentile: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(percentile_sorted(&sorted, percentile))
}

/// Median of values in any order (the type-7 50th percentile: the mean of the two middle values
/// for an even count); `None` when there are none.
pub fn median(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| median_in_place(&mut values.to_vec()))
}

/// Type-7 percentile (0–100) of an already sorted, non-empty slice.
pub fn percentile_sorted(sorted: &[f64], percentile: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * (percentile / 100.0).clamp(0.0, 1.0);
    let low = h.floor() as usize;
    let high = (low + 1).min(sorted.len() - 1);
    sorted[low] + (h - low as f64) * (sorted[high] - sorted[low])
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

fn sample_stdev(values: &[f64], mean: f64) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let ss: f64 = values.iter().map(|v| (v - mean).powi(2)).sum();
    (ss / (values.len() - 1) as f64).sqrt()
}

/// Median of a non-empty, unsorted scratch buffer (reordered in place): the same estimator as
/// [`percentile_sorted`] at 50, by selection instead of sorting (the bootstrap calls it 10,000 times).
pub(crate) fn median_in_place(values: &mut [f64]) -> f64 {
    let n = values.len();
    let mid = n / 2;
    let (_, &mut upper, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
    if n % 2 == 1 {
        upper
    } else {
        let lower = values[..mid].iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lower + upper) / 2.0
    }
}

/// Fills `scratch` with a resample (with replacement) of `data` and returns its median.
fn resampled_median(rng: &mut fastrand::Rng, data: &[f64], scratch: &mut Vec<f64>) -> f64 {
    scratch.clear();
    scratch.extend((0..data.len()).map(|_| data[rng.usize(..data.len())]));
    median_in_place(scratch)
}

/// Percentile interval of bootstrap replicates.
fn percentile_interval(mut replicates: Vec<f64>) -> ConfidenceInterval {
    replicates.sort_by(f64::total_cmp);
    let tail = (1.0 - CONFIDENCE_LEVEL) / 2.0 * 100.0;
    ConfidenceInterval {
        lower: percentile_sorted(&replicates, tail),
        upper: percentile_sorted(&replicates, 100.0 - tail),
        level: CONFIDENCE_LEVEL,
        resamples: replicates.len(),
    }
}

/// Seeded bootstrap confidence interval of the median of a non-empty series.
pub fn median_ci(series: &[f64]) -> ConfidenceInterval {
    let mut rng = fastrand::Rng::with_seed(BOOTSTRAP_SEED);
    let mut scratch = Vec::with_capacity(series.len());
    let replicates = (0..BOOTSTRAP_RESAMPLES).map(|_| resampled_median(&mut rng, series, &mut scratch)).collect();
    percentile_interval(replicates)
}

/// Seeded bootstrap interval of median(current) / median(baseline); `None` if either is empty or the
/// baseline median is zero.
pub fn median_ratio(current_ns: &[u64], baseline_ns: &[u64]) -> Option<MedianRatio> {
    let current: Vec<f64> = current_ns.iter().map(|&v| v as f64).collect();
    let baseline: Vec<f64> = baseline_ns.iter().map(|&v| v as f64).collect();
    if current.is_empty() || baseline.is_empty() {
        return None;
    }
    let base_median = median_in_place(&mut baseline.clone());
    if base_median <= 0.0 {
        return None;
    }
    let ratio = median_in_place(&mut current.clone()) / base_median;
    let mut rng = fastrand::Rng::with_seed(BOOTSTRAP_SEED);
    let (mut scratch_c, mut scratch_b) = (Vec::new(), Vec::new());
    let replicates = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            let c = resampled_median(&mut rng, &current, &mut scratch_c);
            let b = resampled_median(&mut rng, &baseline, &mut scratch_b);
            c / b
        })
        .collect();
    Some(MedianRatio { ratio, ci: percentile_interval(replicates) })
}

/// Sarle's bimodality coefficient of a sorted series with n ≥ 4; `None` when all values are equal.
fn bimodality_coefficient(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len() as f64;
    let m = mean(sorted);
    let moment = |k: i32| sorted.iter().map(|v| (v - m).powi(k)).sum::<f64>() / n;
    let m2 = moment(2);
    if m2 <= 0.0 {
        return None;
    }
    let g1 = moment(3) / m2.powf(1.5);
    let g2 = moment(4) / (m2 * m2) - 3.0;
    let skew = g1 * (n * (n - 1.0)).sqrt() / (n - 2.0);
    let excess_kurtosis = (n - 1.0) / ((n - 2.0) * (n - 3.0)) * ((n + 1.0) * g2 + 6.0);
    Some((skew * skew + 1.0) / (excess_kurtosis + 3.0 * (n - 1.0).powi(2) / ((n - 2.0) * (n - 3.0))))
}

/// Exact best two-cluster split of a sorted series (minimal within-cluster sum of squares).
fn best_split(sorted: &[f64]) -> Option<ClusterSplit> {
    let n = sorted.len();
    if n < 2 {
        return None;
    }
    let mut prefix = Vec::with_capacity(n + 1);
    let mut prefix_sq = Vec::with_capacity(n + 1);
    let (mut s, mut sq) = (0.0, 0.0);
    prefix.push(0.0);
    prefix_sq.push(0.0);
    for v in sorted {
        s += v;
        sq += v * v;
        prefix.push(s);
        prefix_sq.push(sq);
    }
    let sse = |from: usize, to: usize| {
        let count = (to - from) as f64;
        let sum = prefix[to] - prefix[from];
        (prefix_sq[to] - prefix_sq[from]) - sum * sum / count
    };
    let cut = (1..n).min_by(|&a, &b| (sse(0, a) + sse(a, n)).total_cmp(&(sse(0, b) + sse(b, n))))?;
    let (fast, slow) = sorted.split_at(cut);
    let spread = |part: &[f64]| {
        let m = mean(part);
        part.iter().map(|v| (v - m).powi(2)).sum::<f64>() / part.len() as f64
    };
    // Floor the pooled spread at 1 ppb of the mean so that noise-free clusters stay finite.
    let pooled = (spread(fast) + spread(slow)).sqrt().max(mean(sorted).abs() * 1e-9).max(f64::MIN_POSITIVE);
    Some(ClusterSplit {
        fast: cluster(fast, n),
        slow: cluster(slow, n),
        gap_ns: slow[0] - fast[fast.len() - 1],
        ashman_d: std::f64::consts::SQRT_2 * (mean(slow) - mean(fast)).abs() / pooled,
    })
}

fn cluster(sorted_part: &[f64], total: usize) -> Cluster {
    Cluster {
        runs: sorted_part.len(),
        share_pct: sorted_part.len() as f64 / total as f64 * 100.0,
        median_ns: percentile_sorted(sorted_part, 50.0),
        min_ns: sorted_part[0],
        max_ns: sorted_part[sorted_part.len() - 1],
    }
}

/// Modality of a sorted series with at least [`MIN_RUNS_FOR_SHAPE`] runs; `None` if all runs are equal.
fn modality(sorted: &[f64]) -> Option<Modality> {
    let coefficient = bimodality_coefficient(sorted)?;
    let split = best_split(sorted)?;
    let bimodal = split.ashman_d > MIN_ASHMAN_D
        && split.fast.share_pct.min(split.slow.share_pct) >= MIN_CLUSTER_SHARE_PCT
        && coefficient > BIMODALITY_COEFFICIENT_THRESHOLD;
    Some(Modality { bimodal, coefficient, split })
}

/// First third against last third of a series in order (runs of one session, or the round medians
/// of an A/B session); `None` below 3 values.
pub fn drift(in_order: &[f64]) -> Option<Drift> {
    let third = in_order.len() / 3;
    if third == 0 {
        return None;
    }
    let first = median_in_place(&mut in_order[..third].to_vec());
    let last = median_in_place(&mut in_order[in_order.len() - third..].to_vec());
    Some(Drift {
        runs_per_third: third,
        first_third_median_ns: first,
        last_third_median_ns: last,
        change_pct: if first > 0.0 { (last - first) / first * 100.0 } else { 0.0 },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type7_percentiles_match_numpy() {
        // numpy.percentile([1..10], [50, 90, 95, 99]) = 5.5, 9.1, 9.55, 9.91
        let data: Vec<f64> = (1..=10).map(f64::from).collect();
        for (p, expected) in [(50.0, 5.5), (90.0, 9.1), (95.0, 9.55), (99.0, 9.91)] {
            assert!((percentile_sorted(&data, p) - expected).abs() < 1e-12, "p{p}");
        }
    }

    #[test]
    fn median_and_percentile_of_unsorted_values() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(percentile(&[10.0, 0.0], 95.0), Some(9.5));
        assert_eq!(percentile(&[], 95.0), None);
        // Selection and sorting agree on every length.
        for n in 1..12 {
            let values: Vec<f64> = (0..n).map(|i| f64::from((i * 7) % 5) + f64::from(i) / 10.0).collect();
            assert_eq!(median(&values), percentile(&values, 50.0), "n = {n}");
        }
    }

    #[test]
    fn min_runs_for_percentiles() {
        assert_eq!(min_runs_for_percentile(90.0), 10);
        assert_eq!(min_runs_for_percentile(95.0), 20);
        assert_eq!(min_runs_for_percentile(99.0), 100);
    }

    #[test]
    fn moments_of_a_known_series() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sample stdev sqrt(32/7), median 4.5, MAD 0.5·1.4826
        let s = LatencyStats::from_ns(&[2, 4, 4, 4, 5, 5, 7, 9]).unwrap();
        assert_eq!(s.mean_ns, 5.0);
        assert!((s.stdev_ns - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(s.median_ns, 4.5);
        assert!((s.mad_ns - 0.5 * MAD_SCALE).abs() < 1e-12);
        assert!(s.median_ci.lower <= 4.5 && s.median_ci.upper >= 4.5);
        assert!(s.modality.is_none(), "8 runs are below the shape threshold");
    }

    #[test]
    fn the_timer_floor_comes_out_of_a_tiny_models_cv_and_not_a_large_ones() {
        // 36 µs with a 4 µs stdev (an 11% CV): all of it within the clock's floor.
        let tiny =
            LatencyStats::from_ns(&(0..40).map(|i| if i % 2 == 0 { 32_000 } else { 40_000 }).collect::<Vec<_>>())
                .unwrap();
        assert!(tiny.cv_pct > 8.0 && model_cv_pct(&tiny) == 0.0, "{}", tiny.cv_pct);
        // 36 µs with a 30 µs spread is unsteady whatever the floor.
        let unsteady =
            LatencyStats::from_ns(&(0..40).map(|i| if i % 2 == 0 { 6_000 } else { 66_000 }).collect::<Vec<_>>())
                .unwrap();
        assert!(model_cv_pct(&unsteady) > 50.0);
        // 1 ms with a 50 µs stdev: the floor moves the CV by a hundredth of a point.
        let large =
            LatencyStats::from_ns(&(0..40).map(|i| if i % 2 == 0 { 950_000 } else { 1_050_000 }).collect::<Vec<_>>())
                .unwrap();
        assert!((large.cv_pct - model_cv_pct(&large)).abs() < 0.1, "{} {}", large.cv_pct, model_cv_pct(&large));
    }

    #[test]
    fn bimodality_coefficient_of_two_points_is_one() {
        let mut data = vec![1.0; 50];
        data.extend(vec![3.0; 50]);
        let bc = bimodality_coefficient(&data).unwrap();
        assert!((bc - 1.0).abs() < 0.05, "{bc}");
    }

    #[test]
    fn split_finds_the_gap() {
        let data = [1.0, 1.1, 1.2, 5.0, 5.1];
        let split = best_split(&data).unwrap();
        assert_eq!((split.fast.runs, split.slow.runs), (3, 2));
        assert!((split.gap_ns - 3.8).abs() < 1e-12);
    }

    #[test]
    fn bootstrap_is_deterministic() {
        let data: Vec<u64> = (0..200).map(|i| 1_000 + (i * 37 % 101)).collect();
        let a = LatencyStats::from_ns(&data).unwrap().median_ci;
        let b = LatencyStats::from_ns(&data).unwrap().median_ci;
        assert_eq!(a, b);
        assert_eq!(a.resamples, BOOTSTRAP_RESAMPLES);
    }
}
