//! Output consistency: how far a run's model outputs are from a reference computed on the same
//! inputs (`npugate.outputs/1`). Metrics are computed in f64; no I/O here. A generation's tokens
//! are compared as tokens ([`TokenComparison`]), never as a float tensor.

use npugate_result::contract::{Document, Schema};
use serde::{Deserialize, Serialize};

/// Schema identifier of a serialized [`OutputsReport`].
/// 1.1 added `reference.model_digest` and `tokens`.
pub const OUTPUTS_SCHEMA: &str = "npugate.outputs/1.1";

/// A run's outputs compared with the reference outputs, one entry per model output.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OutputsReport {
    /// Always [`OUTPUTS_SCHEMA`].
    pub schema: String,
    /// Where the reference outputs came from.
    pub reference: ReferenceSource,
    /// One comparison per model output, in the model's output order. For an LLM folder's
    /// generation: `step_logits`, the logits of the positions up to the first divergence (where
    /// both runs had seen the same tokens).
    pub outputs: Vec<OutputComparison>,
    /// An LLM folder's generated tokens against the reference's (since 1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenComparison>,
}

impl Document for OutputsReport {
    const SCHEMA: Schema = Schema::new(OUTPUTS_SCHEMA);
}

/// The run that produced the reference outputs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReferenceSource {
    /// Reference model path as given (the float model of a QDQ model, or the model itself).
    pub model: String,
    /// sha256 of the reference model (of an LLM folder: its `genai_config.json`).
    pub model_sha256: String,
    /// The reference model's identity over all of its files (of an LLM folder: every file in it);
    /// since 1.1.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model_digest: String,
    /// Execution provider of the reference run (`CPUExecutionProvider`).
    pub ep: String,
    /// The reference run's result directory, relative to the compared result directory.
    pub result_dir: String,
}

/// One output compared with its reference.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OutputComparison {
    /// Output name.
    pub name: String,
    /// Concrete shape of the output.
    pub shape: Vec<u64>,
    /// The distance metrics.
    pub metrics: OutputMetrics,
    /// Of a bool output: the elements whose raw byte was neither 0 nor 1 (a backend's true may be
    /// any non-zero byte — the host HTP writes 12); compared as true, reported, never a failure.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub non_binary_bools: usize,
}

/// Serde's skip test for a zero count.
fn is_zero(count: &usize) -> bool {
    *count == 0
}

/// Distances between an output and its reference. Non-finite values are written as the strings
/// `"inf"`, `"-inf"` and `"nan"` (JSON has no such numbers); identical outputs have infinite SQNR.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct OutputMetrics {
    /// Number of elements compared.
    pub elements: usize,
    /// Largest |reference − output|.
    #[serde(with = "non_finite")]
    pub max_abs_err: f64,
    /// Mean |reference − output|.
    #[serde(with = "non_finite")]
    pub mean_abs_err: f64,
    /// Cosine similarity of the flattened tensors (1 when both are all zeros).
    #[serde(with = "non_finite")]
    pub cosine: f64,
    /// Signal-to-quantization-noise ratio, 10·log10(Σref² / Σ(ref−out)²), in dB; infinite when equal.
    #[serde(with = "non_finite")]
    pub sqnr_db: f64,
    /// Percent of rows whose argmax along the last axis agrees, for class scores (last dim > 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top1_agreement_pct: Option<f64>,
}

/// A generation's greedy tokens against the reference generation's, position by position
/// (position 0 is the token the prompt chose).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TokenComparison {
    /// Tokens the run generated.
    pub generated: usize,
    /// Tokens the reference generated.
    pub reference_generated: usize,
    /// Positions both generated: the ones compared.
    pub compared: usize,
    /// Compared positions whose tokens are equal.
    pub agreeing: usize,
    /// `agreeing / compared`, percent (100 when nothing was compared).
    pub agreement_pct: f64,
    /// True when the first generated token (the prompt's) agrees.
    pub first_token_agrees: bool,
    /// The first position whose tokens differ; `None` when every compared position agrees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_divergence: Option<Divergence>,
    /// Positions whose step logits were compared (`step_logits` in the outputs): those up to and
    /// including the first divergence, as far as both runs saved them; 0 when not saved.
    pub logit_positions: usize,
}

/// Where two generations first differ.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Divergence {
    /// Position of the first differing token (0: the prompt's token).
    pub position: usize,
    /// The run's token there.
    pub token: i64,
    /// The reference's token there.
    pub reference_token: i64,
}

impl TokenComparison {
    /// Compares the run's `tokens` with the `reference` tokens over the positions both generated.
    pub fn compare(reference: &[i64], tokens: &[i64]) -> TokenComparison {
        let compared = reference.len().min(tokens.len());
        let agreeing = reference.iter().zip(tokens).filter(|(r, t)| r == t).count();
        let first_divergence = reference.iter().zip(tokens).position(|(r, t)| r != t).map(|position| Divergence {
            position,
            token: tokens[position],
            reference_token: reference[position],
        });
        TokenComparison {
            generated: tokens.len(),
            reference_generated: reference.len(),
            compared,
            agreeing,
            agreement_pct: if compared == 0 { 100.0 } else { agreeing as f64 / compared as f64 * 100.0 },
            first_token_agrees: compared > 0 && reference[0] == tokens[0],
            first_divergence,
            logit_positions: 0,
        }
    }

    /// The positions whose contexts were the same in both runs: up to and including the first
    /// divergence (the logits there chose different tokens from the same context), else all compared.
    pub fn same_context_positions(&self) -> usize {
        self.first_divergence.map_or(self.compared, |d| d.position + 1)
    }

    /// The first divergence position, or the positions compared when there is none: how many
    /// leading tokens agree.
    pub fn agreeing_prefix(&self) -> usize {
        self.first_divergence.map_or(self.compared, |d| d.position)
    }

    /// One line for reports: `9/33 tokens agree (27.3%); first divergence at position 3 (run 17, reference 42)`.
    pub fn summary(&self) -> String {
        let divergence = match self.first_divergence {
            Some(d) => format!(
                "first divergence at position {} (run {}, reference {})",
                d.position, d.token, d.reference_token
            ),
            None => "no divergence".into(),
        };
        format!(
            "{}/{} tokens agree ({:.1}%); {divergence}; first token {}",
            self.agreeing,
            self.compared,
            self.agreement_pct,
            if self.first_token_agrees { "agrees" } else { "differs" }
        )
    }
}

/// Why two tensors cannot be compared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompareError {
    /// The element counts or shapes differ.
    #[error("shape {output:?} differs from the reference shape {reference:?}")]
    Shape {
        /// The run's output shape.
        output: Vec<u64>,
        /// The reference output shape.
        reference: Vec<u64>,
    },
}

impl OutputMetrics {
    /// Compares `output` with `reference`, both flattened in C order with the common `shape`.
    pub fn compare(reference: &[f64], output: &[f64], shape: &[u64]) -> OutputMetrics {
        let mut max_abs = 0.0f64;
        let (mut sum_abs, mut dot, mut ref_sq, mut out_sq, mut noise_sq) = (0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for (&r, &o) in reference.iter().zip(output) {
            let diff = r - o;
            // NaN must not vanish in `max`: it makes the error NaN so every rule on it fails.
            max_abs = if diff.is_nan() || max_abs.is_nan() { f64::NAN } else { max_abs.max(diff.abs()) };
            sum_abs += diff.abs();
            dot += r * o;
            ref_sq += r * r;
            out_sq += o * o;
            noise_sq += diff * diff;
        }
        let n = reference.len().min(output.len());
        let cosine = match (ref_sq == 0.0, out_sq == 0.0) {
            (true, true) => 1.0,
            (true, false) | (false, true) => 0.0,
            // Rounding can take |cos| a hair past 1 (e.g. identical vectors): clamp (NaN stays NaN).
            (false, false) => (dot / (ref_sq.sqrt() * out_sq.sqrt())).clamp(-1.0, 1.0),
        };
        OutputMetrics {
            elements: n,
            max_abs_err: max_abs,
            mean_abs_err: if n == 0 { 0.0 } else { sum_abs / n as f64 },
            cosine,
            sqnr_db: sqnr_db(ref_sq, noise_sq),
            top1_agreement_pct: top1_agreement_pct(reference, output, shape),
        }
    }
}

/// Compares two tensors after checking that their shapes agree.
pub fn compare_tensors(
    name: &str,
    reference: (&[u64], &[f64]),
    output: (&[u64], &[f64]),
) -> Result<OutputComparison, CompareError> {
    if reference.0 != output.0 || reference.1.len() != output.1.len() {
        return Err(CompareError::Shape { output: output.0.to_vec(), reference: reference.0.to_vec() });
    }
    Ok(OutputComparison {
        name: name.to_string(),
        shape: output.0.to_vec(),
        metrics: OutputMetrics::compare(reference.1, output.1, output.0),
        non_binary_bools: 0,
    })
}

/// 10·log10(signal / noise): infinite for zero noise, NaN when either sum is NaN.
fn sqnr_db(signal: f64, noise: f64) -> f64 {
    if noise == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (signal / noise).log10()
    }
}

/// Share of rows (all axes but the last) whose first argmax along the last axis agrees; `None`
/// when the last dimension is 1 or absent (not a class score).
fn top1_agreement_pct(reference: &[f64], output: &[f64], shape: &[u64]) -> Option<f64> {
    let classes = usize::try_from(*shape.last()?).ok().filter(|&c| c > 1)?;
    let rows: Vec<bool> = reference
        .chunks_exact(classes)
        .zip(output.chunks_exact(classes))
        .map(|(r, o)| argmax(r) == argmax(o))
        .collect();
    (!rows.is_empty()).then(|| rows.iter().filter(|&&agree| agree).count() as f64 / rows.len() as f64 * 100.0)
}

/// Index of the first largest value (numpy's `argmax`: the first NaN wins).
fn argmax(row: &[f64]) -> usize {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if row[best].is_nan() {
            break;
        }
        if v.is_nan() || v > row[best] {
            best = i;
        }
    }
    best
}

/// The worst value of one metric across the outputs, with the output's name.
pub fn worst<'a>(
    outputs: impl IntoIterator<Item = &'a OutputComparison>,
    metric: impl Fn(&OutputMetrics) -> f64,
    higher_is_better: bool,
) -> Option<(&'a str, f64)> {
    let badness = |v: f64| {
        if v.is_nan() {
            f64::INFINITY
        } else if higher_is_better {
            -v
        } else {
            v
        }
    };
    outputs
        .into_iter()
        .map(|o| (o.name.as_str(), metric(&o.metrics)))
        .max_by(|a, b| badness(a.1).total_cmp(&badness(b.1)))
}

/// How far (dB) a device's SQNR must lie below the median of the other devices to be the outlier.
pub const OUTLIER_GAP_DB: f64 = 3.0;

/// The outlier among devices, given each device's worst SQNR (dB): the device with the lowest SQNR
/// when it lies at least [`OUTLIER_GAP_DB`] below the median of the others (NaN counts as lowest,
/// infinity as highest). `None` for fewer than two devices or no clear outlier.
pub fn outlier(sqnr_db: &[f64]) -> Option<usize> {
    if sqnr_db.len() < 2 {
        return None;
    }
    let key = |v: f64| if v.is_nan() { f64::NEG_INFINITY } else { v };
    let (worst, &lowest) = sqnr_db.iter().enumerate().min_by(|a, b| key(*a.1).total_cmp(&key(*b.1)))?;
    let others: Vec<f64> = sqnr_db.iter().enumerate().filter(|(i, _)| *i != worst).map(|(_, &v)| key(v)).collect();
    let gap = crate::stats::median(&others)? - key(lowest);
    (gap >= OUTLIER_GAP_DB).then_some(worst)
}

/// A metric value for reports: `∞` for infinite SQNR, `NaN`, else `digits` decimals.
pub fn fmt_metric(value: f64, digits: usize) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "∞" } else { "-∞" }.into()
    } else {
        format!("{value:.digits$}")
    }
}

/// Serde for f64 that keeps infinities and NaN (as `"inf"`, `"-inf"`, `"nan"`); use it with
/// `#[serde(with = "npugate_gate::outputs::non_finite")]`.
pub mod non_finite {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes a number, or `"inf"`, `"-inf"`, `"nan"`.
    pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
        match *value {
            v if v.is_nan() => serializer.serialize_str("nan"),
            v if v == f64::INFINITY => serializer.serialize_str("inf"),
            v if v == f64::NEG_INFINITY => serializer.serialize_str("-inf"),
            v => serializer.serialize_f64(v),
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrWord {
        Number(f64),
        Word(String),
    }

    /// Reads a number, or `"inf"`, `"-inf"`, `"nan"`.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        match NumberOrWord::deserialize(deserializer)? {
            NumberOrWord::Number(v) => Ok(v),
            NumberOrWord::Word(w) => match w.as_str() {
                "nan" => Ok(f64::NAN),
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                other => Err(serde::de::Error::custom(format!(
                    "expected a number, \"inf\", \"-inf\" or \"nan\", found {other:?}"
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic standard normal samples (Box–Muller on a fixed-seed generator).
    fn normal(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..n)
            .map(|_| {
                let (u1, u2) = (1.0 - rng.f64(), rng.f64());
                (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
            })
            .collect()
    }

    #[test]
    fn identical_outputs_have_cosine_one_and_infinite_sqnr() {
        let reference = normal(1000, 1);
        let m = OutputMetrics::compare(&reference, &reference, &[10, 100]);
        assert_eq!(m.cosine, 1.0);
        assert_eq!(m.sqnr_db, f64::INFINITY);
        assert_eq!((m.max_abs_err, m.mean_abs_err), (0.0, 0.0));
        assert_eq!(m.top1_agreement_pct, Some(100.0));
    }

    #[test]
    fn noise_of_a_known_snr_gives_that_sqnr() {
        let reference = normal(100_000, 2);
        let noise = normal(100_000, 3);
        let signal_power = reference.iter().map(|r| r * r).sum::<f64>() / reference.len() as f64;
        let noise_power = noise.iter().map(|e| e * e).sum::<f64>() / noise.len() as f64;
        for snr_db in [10.0, 20.0, 35.0, 60.0] {
            // Scale the noise so that signal power / noise power is exactly 10^(snr/10).
            let scale = (signal_power / noise_power / 10f64.powf(snr_db / 10.0)).sqrt();
            let output: Vec<f64> = reference.iter().zip(&noise).map(|(r, e)| r + scale * e).collect();
            let m = OutputMetrics::compare(&reference, &output, &[100_000]);
            assert!((m.sqnr_db - snr_db).abs() < 0.5, "injected {snr_db} dB, measured {} dB", m.sqnr_db);
            assert!(m.cosine < 1.0 && m.cosine > 0.9, "{}", m.cosine);
        }
    }

    #[test]
    fn top1_counts_rows_whose_argmax_agrees() {
        let reference = [0.1, 0.9, 0.0, /* row 2 */ 0.5, 0.2, 0.3];
        let output = [0.2, 0.7, 0.1, /* row 2 */ 0.1, 0.8, 0.1];
        let m = OutputMetrics::compare(&reference, &output, &[2, 3]);
        assert_eq!(m.top1_agreement_pct, Some(50.0));
        assert_eq!(OutputMetrics::compare(&reference, &output, &[6, 1]).top1_agreement_pct, None);
        assert!((m.max_abs_err - 0.6).abs() < 1e-12);
    }

    #[test]
    fn nan_in_the_output_poisons_the_metrics() {
        let m = OutputMetrics::compare(&[1.0, 2.0], &[1.0, f64::NAN], &[2]);
        assert!(m.max_abs_err.is_nan() && m.cosine.is_nan() && m.sqnr_db.is_nan());
    }

    #[test]
    fn non_finite_values_survive_json() {
        let m = OutputMetrics::compare(&[1.0, 2.0], &[1.0, 2.0], &[2]);
        let json = serde_json::to_string(&m).unwrap();
        assert!(json.contains("\"sqnr_db\":\"inf\""), "{json}");
        assert_eq!(serde_json::from_str::<OutputMetrics>(&json).unwrap(), m);
    }

    #[test]
    fn outlier_is_the_device_clearly_below_the_others() {
        assert_eq!(outlier(&[41.0, 40.2, 31.5, 40.9]), Some(2));
        assert_eq!(outlier(&[41.0, 40.2, 39.5]), None, "1.1 dB below the others is noise");
        assert_eq!(outlier(&[f64::INFINITY, 35.0]), Some(1));
        assert_eq!(outlier(&[f64::INFINITY, f64::INFINITY]), None);
        assert_eq!(outlier(&[30.0, f64::NAN]), Some(1));
        assert_eq!(outlier(&[30.0]), None);
    }

    #[test]
    fn a_report_of_another_major_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("outputs.json");
        let report = OutputsReport {
            schema: OUTPUTS_SCHEMA.into(),
            reference: ReferenceSource {
                model: "m.onnx".into(),
                model_sha256: "0".into(),
                model_digest: "1".into(),
                ep: "CPU".into(),
                result_dir: "r".into(),
            },
            outputs: vec![compare_tensors("y", (&[2], &[1.0, 2.0]), (&[2], &[1.0, 2.5])).unwrap()],
            tokens: Some(TokenComparison::compare(&[1, 2], &[1, 3])),
        };
        npugate_result::contract::write_json(&path, &report).unwrap();
        assert_eq!(npugate_result::contract::read::<OutputsReport>(&path).unwrap(), report);
        std::fs::write(&path, std::fs::read_to_string(&path).unwrap().replace("outputs/1", "outputs/2")).unwrap();
        let error = npugate_result::contract::read::<OutputsReport>(&path).unwrap_err().to_string();
        assert!(error.contains("npugate.outputs/2"), "{error}");
    }

    #[test]
    fn tokens_are_compared_position_by_position_up_to_the_shorter_generation() {
        let t = TokenComparison::compare(&[5, 6, 7, 8, 9], &[5, 6, 1, 8]);
        assert_eq!((t.generated, t.reference_generated, t.compared, t.agreeing), (4, 5, 4, 3));
        assert_eq!(t.agreement_pct, 75.0);
        assert!(t.first_token_agrees);
        assert_eq!(t.first_divergence, Some(Divergence { position: 2, token: 1, reference_token: 7 }));
        assert_eq!((t.same_context_positions(), t.agreeing_prefix()), (3, 2));
        assert_eq!(
            t.summary(),
            "3/4 tokens agree (75.0%); first divergence at position 2 (run 1, reference 7); first token agrees"
        );
        let same = TokenComparison::compare(&[3, 4], &[3, 4]);
        assert_eq!((same.first_divergence, same.same_context_positions(), same.agreeing_prefix()), (None, 2, 2));
        let first = TokenComparison::compare(&[3, 4], &[4, 4]);
        assert!(!first.first_token_agrees);
        assert_eq!((first.agreeing_prefix(), first.agreement_pct), (0, 50.0));
    }

    #[test]
    fn shapes_must_agree() {
        let err = compare_tensors("y", (&[1, 3], &[0.0; 3]), (&[3, 1], &[0.0; 3])).unwrap_err();
        assert!(err.to_string().contains("[3, 1]"), "{err}");
    }
}
