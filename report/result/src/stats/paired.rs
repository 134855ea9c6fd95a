//! The paired ratio B/A of an interleaved A/B session, with an interval that holds on a shared
//! machine and under repeated looks.
//!
//! **Estimate.** In every round both models ran one after the other on the same device, so what
//! the device did during the round moves both alike and cancels in the round's ratio
//! `rᵢ = median(Bᵢ) / median(Aᵢ)`. The estimate is the median of the round ratios, computed on
//! their logarithms `xᵢ = ln rᵢ` (the same number; a ratio of 2 and one of ½ are equally far from 1).
//!
//! **Interval.** The order-statistic (sign-test) interval of the median of the `xᵢ`:
//! `[x₍ₖ₎, x₍ₙ₊₁₋ₖ₎]` with `k` the largest rank such that `P(Bin(n, ½) ≤ k − 1) ≤ α/2`
//! ([`sign_test_rank`]). It assumes only that the rounds are independent draws from one
//! continuous distribution — not normality, not symmetry, not a bounded spread — so it holds when
//! round ratios on a loaded 2-core machine spread from 0.45× to 3.7×: a wild round moves the
//! interval by at most one rank. Its coverage is at least `1 − α`, exactly
//! `1 − 2·P(Bin(n, ½) ≤ k − 1)` (the level it states). It needs `2·½ⁿ ≤ α` (6 rounds at 95%);
//! with fewer, the interval is the whole range of the round ratios at the lower level it has.
//!
//! **Repeated looks.** A comparison that cannot decide measures more rounds and looks again. Look
//! `j` (1, 2, …) uses `αⱼ = α / (j (j + 1))` ([`look_alpha`]): 2.5%, 0.83%, 0.42%, … of
//! [`SEQUENTIAL_ALPHA`] = 5%. The αⱼ sum to α over any number of looks, so by the union bound the
//! chance that *any* look's interval misses the true median ratio is at most 5% — however the
//! looks depend on each other and however many there are (an open-ended alpha-spending sequence,
//! i.e. a confidence sequence by Bonferroni). A PASS (interval wholly below the limit) when the
//! truth is above it, or a FAIL when the truth is below, is such a miss on one side: each at most
//! 2.5%.

use serde::{Deserialize, Serialize};

use super::{median, median_in_place, ConfidenceInterval, CONFIDENCE_LEVEL};

/// Error rate of a whole sequential comparison, spent over its looks ([`look_alpha`]).
pub const SEQUENTIAL_ALPHA: f64 = 1.0 - CONFIDENCE_LEVEL;

/// The paired estimate of an interleaved A/B session.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PairedRatio {
    /// Point estimate: the median of the round ratios (B's median / A's median, round by round).
    pub ratio: f64,
    /// Order-statistic (sign-test) interval of that median; `level` is its exact coverage
    /// `1 − 2·P(Bin(n, ½) ≤ k − 1)` and `resamples` 0 (nothing is resampled).
    pub ci: ConfidenceInterval,
    /// Each round's ratio, in round order.
    pub round_ratios: Vec<f64>,
}

/// The α of look `look` (from 1) of a sequential comparison: `SEQUENTIAL_ALPHA / (look (look + 1))`.
/// Summed over every look it is [`SEQUENTIAL_ALPHA`].
pub fn look_alpha(look: usize) -> f64 {
    let j = look.max(1) as f64;
    SEQUENTIAL_ALPHA / (j * (j + 1.0))
}

/// `P(Bin(n, ½) ≤ k)`, summed in log space (exact to rounding for any n).
fn binomial_half_cdf(n: usize, k: usize) -> f64 {
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let mut ln_choose = 0.0;
    let mut total = 0.0;
    for i in 0..=k.min(n) {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        total += (ln_choose + ln_half_n).exp();
    }
    total.min(1.0)
}

/// The rank `k` (from 1) of the two-sided sign-test interval `[x₍ₖ₎, x₍ₙ₊₁₋ₖ₎]` of a median from `n`
/// values at error `alpha`: the largest `k ≤ n/2` with `P(Bin(n, ½) ≤ k − 1) ≤ alpha / 2`. `None` when
/// even the whole range (`k = 1`) misses more often (`2·½ⁿ > alpha`).
pub fn sign_test_rank(n: usize, alpha: f64) -> Option<usize> {
    let mut rank = None;
    for k in 1..=n / 2 {
        if binomial_half_cdf(n, k - 1) <= alpha / 2.0 {
            rank = Some(k);
        } else {
            break;
        }
    }
    rank
}

/// The exact coverage of the interval of rank `k` from `n` values: `1 − 2·P(Bin(n, ½) ≤ k − 1)`.
fn coverage(n: usize, k: usize) -> f64 {
    1.0 - 2.0 * binomial_half_cdf(n, k - 1)
}

impl PairedRatio {
    /// The estimate and the sign-test interval at error `alpha` of `round_ratios` (in round order);
    /// `None` without ratios or when one is not a positive finite number. With too few rounds for
    /// `alpha`, the interval is the range of the ratios at the coverage it has (below `1 − alpha`).
    pub fn of(round_ratios: Vec<f64>, alpha: f64) -> Option<PairedRatio> {
        if round_ratios.is_empty() || round_ratios.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
            return None;
        }
        let mut logs: Vec<f64> = round_ratios.iter().map(|r| r.ln()).collect();
        let center = median_in_place(&mut logs.clone());
        logs.sort_by(f64::total_cmp);
        let n = logs.len();
        let k = sign_test_rank(n, alpha).unwrap_or(1);
        let ci = ConfidenceInterval {
            lower: logs[k - 1].exp(),
            upper: logs[n - k].exp(),
            level: if n >= 2 { coverage(n, k) } else { 0.0 },
            resamples: 0,
        };
        Some(PairedRatio { ratio: center.exp(), ci, round_ratios })
    }

    /// True when the interval reaches the level `1 − alpha` (enough rounds for it).
    pub fn holds_at(&self, alpha: f64) -> bool {
        self.ci.level >= 1.0 - alpha - 1e-12
    }

    /// About how many rounds in all the interval needs to clear `limit` (a ratio) on the side the
    /// estimate lies: its half-width on that side shrinks as 1/√n. `None` when the estimate sits on
    /// the limit (no number of rounds is enough to tell) or the interval already clears it.
    pub fn rounds_needed(&self, limit: f64) -> Option<usize> {
        let (center, limit) = (self.ratio.ln(), limit.ln());
        let (half_width, distance) = if center < limit {
            (self.ci.upper.ln() - center, limit - center)
        } else {
            (center - self.ci.lower.ln(), center - limit)
        };
        let n = self.round_ratios.len() as f64;
        if distance <= 1e-9 * half_width.abs().max(1e-9) || half_width < distance {
            return None;
        }
        let needed = (n * (half_width / distance).powi(2)).ceil();
        (needed.is_finite() && needed < 1e6).then_some(needed as usize)
    }
}

/// The paired ratio of `rounds`, each `(a_ns, b_ns)`: the timed runs of A and of B in that round, at
/// the 95% level of a single look. `None` without rounds, or when a round has no runs on either side
/// or A's median is zero.
pub fn paired_ratio(rounds: &[(&[u64], &[u64])]) -> Option<PairedRatio> {
    let as_f64 = |ns: &[u64]| ns.iter().map(|&v| v as f64).collect::<Vec<f64>>();
    let mut round_ratios = Vec::with_capacity(rounds.len());
    for (a, b) in rounds {
        let (a_median, b_median) = (median(&as_f64(a))?, median(&as_f64(b))?);
        if a_median <= 0.0 {
            return None;
        }
        round_ratios.push(b_median / a_median);
    }
    PairedRatio::of(round_ratios, SEQUENTIAL_ALPHA)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_test_ranks_match_the_binomial_tables() {
        // n = 10 at 95%: P(X ≤ 1) = 11/1024 = 0.0107 ≤ 0.025 < P(X ≤ 2) = 0.0547, so k = 2.
        assert_eq!(sign_test_rank(10, 0.05), Some(2));
        assert!((coverage(10, 2) - (1.0 - 22.0 / 1024.0)).abs() < 1e-12);
        // n = 6 is the fewest for 95% (2/64 = 0.031 ≤ 0.05); n = 5 has none (2/32 = 0.0625).
        assert_eq!((sign_test_rank(6, 0.05), sign_test_rank(5, 0.05)), (Some(1), None));
        // n = 20 at 95%: k = 6 (P(X ≤ 5) = 0.0207), the textbook value.
        assert_eq!(sign_test_rank(20, 0.05), Some(6));
        // Far in the tail the log-space sum stays exact: n = 2000 gives k ≈ n/2 − 1.96·√n/2.
        let k = sign_test_rank(2000, 0.05).unwrap();
        assert!((954..=958).contains(&k), "{k}");
    }

    #[test]
    fn look_alphas_sum_to_the_sequential_alpha() {
        assert!((look_alpha(1) - 0.025).abs() < 1e-15);
        let spent: f64 = (1..100_000).map(look_alpha).sum();
        assert!(spent <= SEQUENTIAL_ALPHA && spent > SEQUENTIAL_ALPHA * 0.9999, "{spent}");
    }

    #[test]
    fn too_few_rounds_give_the_range_at_its_own_lower_level() {
        let p = PairedRatio::of(vec![1.0, 1.2, 0.9, 1.1, 1.05], 0.05).unwrap();
        assert_eq!((p.ci.lower, p.ci.upper), (0.9, 1.2));
        assert!((p.ci.level - (1.0 - 2.0 / 32.0)).abs() < 1e-12);
        assert!(!p.holds_at(0.05));
        assert!(PairedRatio::of(vec![1.0, -1.0], 0.05).is_none());
        assert!(PairedRatio::of(Vec::new(), 0.05).is_none());
    }

    #[test]
    fn rounds_needed_scale_with_the_square_of_the_half_width() {
        // Estimate 1.0, upper bound 1.10 (half-width ln 1.1), limit 1.05: (ln1.1/ln1.05)² ≈ 3.8× the rounds.
        let p = PairedRatio {
            ratio: 1.0,
            ci: ConfidenceInterval { lower: 0.9, upper: 1.1, level: 0.98, resamples: 0 },
            round_ratios: vec![1.0; 10],
        };
        assert_eq!(p.rounds_needed(1.05), Some(39));
        // Already below the limit: nothing more is needed.
        assert_eq!(p.rounds_needed(1.2), None);
    }
}
