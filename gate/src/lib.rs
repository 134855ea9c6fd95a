//! The gate: latency statistics, rules, baselines, the verdict and its exporters.
