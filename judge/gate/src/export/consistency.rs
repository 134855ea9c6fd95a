//! The rows of the cross-device output table: the same model on every device side by side, each
//! output's distance from the reference, the outlier device marked. The terminal and Markdown
//! formats render them (`consistency_text`, `consistency_markdown`).

use crate::outputs::{fmt_metric, outlier, worst, OutputsReport};
use crate::verdict::Verdict;

/// One device's outputs compared with the reference.
#[derive(Debug, Clone)]
pub struct DeviceOutputs {
    /// Device label (product model, or CPU model off Android).
    pub device: String,
    /// SoC label.
    pub soc: String,
    /// Its comparison with the reference.
    pub report: OutputsReport,
}

/// Header of [`rows`].
pub(super) const HEADER: [&str; 9] =
    ["device", "SoC", "output", "cosine", "SQNR dB", "max abs err", "mean abs err", "top-1", ""];
/// Which columns of [`rows`] hold numbers.
pub(super) const NUMERIC: [bool; 9] = [false, false, false, true, true, true, true, true, false];
/// The last cell of the outlier device's rows.
const OUTLIER_MARK: &str = "◀ outlier";

/// Index of the outlier device by each device's worst SQNR.
fn outlier_device(devices: &[DeviceOutputs]) -> Option<usize> {
    let worst_sqnr: Vec<f64> =
        devices.iter().map(|d| worst(&d.report.outputs, |m| m.sqnr_db, true).map_or(f64::NAN, |(_, v)| v)).collect();
    outlier(&worst_sqnr)
}

/// One row per device and output, and the outlier device: its rows carry the mark, their cells
/// passed through `highlight` (red on a terminal, bold in Markdown).
pub(super) fn rows(devices: &[DeviceOutputs], highlight: impl Fn(&str) -> String) -> (Vec<[String; 9]>, Option<usize>) {
    let outlier = outlier_device(devices);
    let mut out = Vec::new();
    for (index, device) in devices.iter().enumerate() {
        for output in &device.report.outputs {
            let m = &output.metrics;
            let mut row = [
                device.device.clone(),
                device.soc.clone(),
                output.name.clone(),
                fmt_metric(m.cosine, 6),
                fmt_metric(m.sqnr_db, 1),
                format!("{:.3e}", m.max_abs_err),
                format!("{:.3e}", m.mean_abs_err),
                m.top1_agreement_pct.map_or_else(|| "—".into(), |p| format!("{p:.1}%")),
                String::new(),
            ];
            if outlier == Some(index) {
                row[8] = OUTLIER_MARK.into();
                for cell in row.iter_mut().filter(|c| !c.is_empty()) {
                    *cell = highlight(cell);
                }
            }
            out.push(row);
        }
    }
    (out, outlier)
}

/// `prefix` + a one-line summary of the outlier (or that there is none) + newline; empty for a
/// single device.
pub(super) fn outlier_line(prefix: &str, devices: &[DeviceOutputs], outlier: Option<usize>) -> String {
    let line = match outlier {
        None if devices.len() < 2 => return String::new(),
        Some(i) => format!(
            "outlier: {} ({}) drifts furthest from the reference: worst SQNR at least {} dB below the other devices' median",
            devices[i].device,
            devices[i].soc,
            crate::outputs::OUTLIER_GAP_DB
        ),
        None => "no outlier device".into(),
    };
    format!("{prefix}{line}\n")
}

/// `prefix` + one line per device whose generation was compared as tokens (an LLM folder): the
/// agreement, the first divergence and how many positions' step logits the table compares.
pub(super) fn token_lines(prefix: &str, devices: &[DeviceOutputs]) -> String {
    let mut out = String::new();
    for device in devices {
        if let Some(tokens) = &device.report.tokens {
            out.push_str(&format!(
                "{prefix}tokens on {}: {}; step_logits over the {} position(s) up to the first divergence\n",
                device.device,
                tokens.summary(),
                tokens.logit_positions
            ));
        }
    }
    out
}

/// The run's own outputs against the reference, as one device of the table (for the verdict reports).
pub(super) fn verdict_outputs(v: &Verdict) -> Option<(String, Vec<DeviceOutputs>)> {
    let report = v.outputs.clone()?;
    let fp = &v.subject.fingerprint;
    Some((
        v.subject.model_file().to_string(),
        vec![DeviceOutputs { device: fp.device.clone(), soc: fp.soc.clone(), report }],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::{consistency_markdown, consistency_text};
    use crate::outputs::{compare_tensors, ReferenceSource, OUTPUTS_SCHEMA};

    fn device(name: &str, error: f64) -> DeviceOutputs {
        let reference: Vec<f64> = (0..20).map(|i| (i as f64).cos()).collect();
        let output: Vec<f64> = reference.iter().map(|r| r + error).collect();
        DeviceOutputs {
            device: name.into(),
            soc: format!("{name}-soc"),
            report: OutputsReport {
                schema: OUTPUTS_SCHEMA.into(),
                reference: ReferenceSource {
                    model: "m.onnx".into(),
                    model_sha256: String::new(),
                    model_digest: String::new(),
                    ep: "CPU".into(),
                    result_dir: "r".into(),
                },
                outputs: vec![compare_tensors("probs", (&[2, 10], &reference), (&[2, 10], &output)).unwrap()],
                tokens: None,
            },
        }
    }

    #[test]
    fn a_generation_compared_as_tokens_gets_its_line_in_both_formats() {
        let mut llm = device("cpu", 1e-3);
        llm.report.tokens = Some(crate::outputs::TokenComparison {
            logit_positions: 3,
            ..crate::outputs::TokenComparison::compare(&[4, 5, 6, 7], &[4, 5, 9, 7])
        });
        let expected = "tokens on cpu: 3/4 tokens agree (75.0%); first divergence at position 2 (run 9, reference 6); \
                        first token agrees; step_logits over the 3 position(s) up to the first divergence";
        for rendered in [consistency_text("m", std::slice::from_ref(&llm), false), consistency_markdown("m", &[llm])] {
            assert!(rendered.contains(expected), "{rendered}");
        }
        assert!(!consistency_text("m", &[device("a", 0.0)], false).contains("tokens on"));
    }

    #[test]
    fn the_outlier_device_is_marked_in_both_formats() {
        let devices = [device("a", 1e-3), device("b", 1.2e-3), device("c", 3e-2)];
        let text = consistency_text("m.onnx", &devices, false);
        let marked: Vec<&str> = text.lines().filter(|l| l.contains(OUTLIER_MARK)).collect();
        assert_eq!(marked.len(), 1, "{text}");
        assert!(marked[0].trim_start().starts_with("c "), "{text}");
        assert!(text.contains("outlier: c (c-soc)"), "{text}");
        let md = consistency_markdown("m.onnx", &devices);
        assert!(md.contains("| **c** | **c-soc** | **probs** |"), "{md}");
        assert!(!md.contains("**a**"), "{md}");
    }

    #[test]
    fn close_devices_have_no_outlier() {
        let devices = [device("a", 1e-3), device("b", 1.1e-3)];
        assert!(consistency_text("m.onnx", &devices, false).contains("no outlier device"));
    }
}
