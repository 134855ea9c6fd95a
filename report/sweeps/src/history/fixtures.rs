//! Stored cells for the tests of trends and of the pictures of them.

use super::store::{CellAxes, StoredCell};
use crate::sweep::cell::{Findings, OutputAgreement};

/// A cell of device `dev` (SM8650), runtime `rt`, model `m`.
pub fn cell(night: &str, latencies_ns: Vec<u64>, outcome: &str) -> StoredCell {
    StoredCell {
        sweep: "nightly".into(),
        night: night.into(),
        started_at: format!("{night}T01:00:00Z"),
        device: "dev".into(),
        serial: "dev".into(),
        soc: "SM8650".into(),
        runtime: "rt".into(),
        model: "m".into(),
        axes: CellAxes {
            model_digest: "abc".into(),
            qnn_build: Some("v2.49.40.260810104044".into()),
            ort_version: "1.31.1".into(),
            device_fingerprint: None,
        },
        outcome: outcome.into(),
        median_ns: None,
        cv_pct: None,
        npu_flops_pct: None,
        fallback_nodes: Some(0),
        latencies_ns,
        generation: None,
        emulated: None,
        findings: Findings::default(),
        resources: Default::default(),
    }
}

/// A cell of the host HTP emulator as SM8650: every node on the HTP, the outputs at 48 dB.
pub fn emulated(night: &str, latencies_ns: Vec<u64>) -> StoredCell {
    let mut cell = cell(night, latencies_ns, "pass");
    cell.device = "htp-SM8650".into();
    cell.emulated = Some("Qualcomm's HTP emulator".into());
    let latencies: Vec<f64> = cell.latencies_ns.iter().map(|&ns| ns as f64).collect();
    cell.median_ns = npugate_gate::stats::median(&latencies);
    cell.npu_flops_pct = Some(100.0);
    cell.findings = Findings {
        compile_error: None,
        npu_nodes_pct: Some(100.0),
        fallback: Vec::new(),
        outputs: Some(OutputAgreement { output: "y".into(), sqnr_db: 48.13, cosine: 0.99998 }),
    };
    cell
}

/// Latencies around `center` ns with ±1% deterministic jitter.
pub fn around(center: u64) -> Vec<u64> {
    (0..40).map(|i| center + (i * 7 % 21) * center / 1000).collect()
}

/// Two nights, 2026-11-26 and 2026-11-27, of device `dev` (about 4 ms) and the host HTP emulator
/// (`host_ms` of host time each night).
pub fn device_and_emulator(host_ms: [u64; 2]) -> Vec<StoredCell> {
    vec![
        cell("2026-11-26", around(4_000_000), "pass"),
        emulated("2026-11-26", around(host_ms[0] * 1_000_000)),
        cell("2026-11-27", around(4_100_000), "pass"),
        emulated("2026-11-27", around(host_ms[1] * 1_000_000)),
    ]
}
