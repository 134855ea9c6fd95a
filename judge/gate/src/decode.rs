//! An LLM folder's decode steps judged as generation. Each step attends over the whole past, so a
//! step at a longer context is slower by design: judged as one series, the growth reads as noise
//! (a high CV) and as drift ("slower towards the end"). The growth per token of context is fitted
//! and taken out: the steps of every timed generation are cut into context buckets (ten, or one
//! per step for fewer), each bucket's median step stands for it (a spike of a loaded machine moves
//! no median), and a least-squares line through the medians is the growth per token. Then the series the latency rules and the drift warning judge has each step referred to the
//! generation's mean context, so what remains of a CV or a drift is noise, not the KV cache.

use npugate_result::stats::median;
use npugate_result::Generation;

use crate::units::fmt_ms;

/// How the decode steps grow with the context.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextGrowth {
    /// Fitted growth per token of context (ns per token).
    pub ns_per_token: f64,
    /// Fitted step time at the first decode step's context (ns).
    pub first_step_ns: f64,
    /// Fitted step time at the last decode step's context (ns).
    pub last_step_ns: f64,
    /// Context (past tokens) of the first decode step.
    pub first_context: u32,
    /// Context of the last decode step.
    pub last_context: u32,
}

impl ContextGrowth {
    /// The fit of the steps of `generation` against their context (see the module doc); `None`
    /// with fewer than two steps per generation (no context to grow over).
    pub fn fit(generation: &Generation) -> Option<ContextGrowth> {
        let points = bucket_medians(generation);
        let n = points.len() as f64;
        let (mean_x, mean_y) = points.iter().fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
        let sxx: f64 = points.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
        if generation.gen_tokens < 2 || sxx <= 0.0 {
            return None;
        }
        let slope = points.iter().map(|(x, y)| (x - mean_x) * (y - mean_y)).sum::<f64>() / sxx;
        let at = |context: u32| mean_y + slope * (f64::from(context) - mean_x);
        let (first_context, last_context) =
            (generation.prompt_tokens, generation.prompt_tokens + generation.gen_tokens - 1);
        Some(ContextGrowth {
            ns_per_token: slope,
            first_step_ns: at(first_context),
            last_step_ns: at(last_context),
            first_context,
            last_context,
        })
    }

    /// Every decode step with the growth taken out: referred to the mean context of a generation.
    pub fn steps_at_mean_context(&self, generation: &Generation) -> Vec<u64> {
        let mean_context = f64::from(self.first_context + self.last_context) / 2.0;
        steps(generation)
            .map(|(context, ns)| (ns - self.ns_per_token * (context - mean_context)).max(0.0).round() as u64)
            .collect()
    }

    /// `decode steps grow 0.4 µs per token of context (0.178 ms at 32 → 0.31 ms at 431); the
    /// latency statistics judge them with that growth taken out`.
    pub fn describe(&self) -> String {
        format!(
            "decode steps grow {} per token of context ({} at {} → {} at {}); the latency statistics judge them with that growth taken out",
            fmt_ms(self.ns_per_token),
            fmt_ms(self.first_step_ns),
            self.first_context,
            fmt_ms(self.last_step_ns),
            self.last_context
        )
    }
}

/// Context buckets of a generation's decode steps.
const BUCKETS: usize = 10;

/// (mean context, median step ns) of each context bucket of the steps of every timed generation.
fn bucket_medians(generation: &Generation) -> Vec<(f64, f64)> {
    let steps_per_generation = generation.decode_ns.iter().map(Vec::len).max().unwrap_or(0);
    let buckets = BUCKETS.min(steps_per_generation).max(1);
    let mut contexts = vec![Vec::new(); buckets];
    let mut times = vec![Vec::new(); buckets];
    for run in &generation.decode_ns {
        for (i, &ns) in run.iter().enumerate() {
            let bucket = i * buckets / steps_per_generation;
            contexts[bucket].push(f64::from(generation.prompt_tokens) + i as f64);
            times[bucket].push(ns as f64);
        }
    }
    contexts
        .iter()
        .zip(&times)
        .filter_map(|(c, t)| Some((c.iter().sum::<f64>() / c.len() as f64, median(t)?)))
        .collect()
}

/// (context, step ns) of every decode step of every timed generation, in order.
fn steps(generation: &Generation) -> impl Iterator<Item = (f64, f64)> + '_ {
    let prompt = f64::from(generation.prompt_tokens);
    generation
        .decode_ns
        .iter()
        .flat_map(move |run| run.iter().enumerate().map(move |(i, &ns)| (prompt + i as f64, ns as f64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generation(decode_ns: Vec<Vec<u64>>) -> Generation {
        let mut g: Generation = serde_json::from_value(serde_json::json!({
            "layout": "decoder", "prompt_tokens": 32, "gen_tokens": 0, "warmup_generations": 0, "generations": 0,
            "context_length": 512, "ttft_ns": [], "decode_ns": [], "prefill_tok_s": 0.0, "decode_tok_s": 0.0,
            "wall_ns": [], "kv": {"mode": "ping_pong", "copies_per_step": 0.0, "bytes": 0, "allocated_bytes": 0}, "prompt_ids": [], "tokens": [], "graphs": []
        }))
        .expect("a generation");
        g.gen_tokens = decode_ns.first().map_or(0, |r| r.len() as u32);
        g.generations = decode_ns.len() as u32;
        g.decode_ns = decode_ns;
        g
    }

    #[test]
    fn steps_that_grow_with_the_context_are_flat_once_the_growth_is_taken_out() {
        // 200 ns + 1 ns per token of context, ±5 ns alternating noise, two generations.
        let run: Vec<u64> = (0..400u64).map(|i| 200 + 32 + i + if i % 2 == 0 { 5 } else { 0 }).collect();
        let g = generation(vec![run.clone(), run]);
        let growth = ContextGrowth::fit(&g).unwrap();
        assert!((growth.ns_per_token - 1.0).abs() < 0.01, "{growth:?}");
        assert!((growth.first_step_ns - 234.5).abs() < 1.0 && (growth.last_step_ns - 633.5).abs() < 1.0, "{growth:?}");
        let flat = growth.steps_at_mean_context(&g);
        let (min, max) = (flat.iter().min().unwrap(), flat.iter().max().unwrap());
        assert!(max - min <= 6, "only the noise is left: {min}..{max}");
        assert!(growth.describe().starts_with("decode steps grow "), "{}", growth.describe());
        assert_eq!(ContextGrowth::fit(&generation(vec![vec![300]])), None, "one step grows over no context");
        // Spikes of a loaded machine (30 µs, every 25th step, early) move no bucket's median.
        let spiky: Vec<u64> = (0..200u64).map(|i| if i % 25 == 3 && i < 100 { 30_000 } else { 232 + i }).collect();
        let growth = ContextGrowth::fit(&generation(vec![spiky])).unwrap();
        assert!((growth.ns_per_token - 1.0).abs() < 0.05, "{growth:?}");
    }
}
