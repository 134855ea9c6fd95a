//! Test helpers: the hand-written run fixture, placement reports built from a node list, and latency
//! series whose statistics are known by construction.
#![allow(dead_code)] // each test file uses a different subset

use std::path::PathBuf;

use npugate_profile::report::{
    Boundaries, EpShare, FallbackNode, NodePlacement, Partition, PlacementReport, TimeStats, Totals, Transition,
    PLACEMENT_SCHEMA,
};
use npugate_result::RunResult;

pub const QNN: &str = "QNNExecutionProvider";
pub const CPU: &str = "CPUExecutionProvider";
/// The node the spec's example blames.
pub const NORM: &str = "/model.10/m.0/norm";

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// The hand-written QNN run with the given latencies.
pub fn run(latencies_ns: Vec<u64>) -> RunResult {
    let mut run = RunResult::read(&fixture("result_qnn.json")).unwrap();
    run.settings.runs = latencies_ns.len() as u32;
    run.timings.latencies_ns = latencies_ns;
    run
}

/// One node of a synthetic graph.
#[derive(Clone)]
pub struct Node {
    pub name: String,
    pub op_type: String,
    pub ep: String,
    pub flops: u64,
    pub time_us: f64,
    pub expected: bool,
}

fn node(name: &str, op_type: &str, ep: &str, flops: u64, time_us: f64, expected: bool) -> Node {
    Node { name: name.into(), op_type: op_type.into(), ep: ep.into(), flops, time_us, expected }
}

/// A 30-node detector-like graph on QNN, with the graph-input QuantizeLinear and the output
/// DequantizeLinear on the CPU by design (`expected`). The LayerNormalization node holds 12.3% of
/// the FLOPs and costs 1.8 ms when it runs on the CPU.
pub fn detector_nodes() -> Vec<Node> {
    let mut nodes = vec![node("/images_QuantizeLinear", "QuantizeLinear", CPU, 1_228_800, 150.0, true)];
    for i in 0..27 {
        let (op, flops) = if i % 3 == 2 { ("Mul", 2_000_000) } else { ("Conv", 62_888_000) };
        nodes.push(node(&format!("/model.{i}/conv/{op}"), op, QNN, flops, 60.0, false));
    }
    nodes.insert(11, node(NORM, "LayerNormalization", QNN, 0, 40.0, false));
    nodes.push(node("/output0_DequantizeLinear", "DequantizeLinear", CPU, 705_600, 90.0, true));
    let total: u64 = nodes.iter().map(|n| n.flops).sum();
    // Give the norm 12.3% of the final total: f / (total + f) = 0.123.
    nodes[11].flops = (total as f64 * 0.123 / 0.877) as u64;
    nodes
}

/// Moves a node to the CPU (a fallback), with its CPU cost.
pub fn move_to_cpu(nodes: &mut [Node], name: &str, time_us: f64) {
    let n = nodes.iter_mut().find(|n| n.name == name).unwrap();
    n.ep = CPU.into();
    n.time_us = time_us;
}

/// A placement report computed from a node list (partitions = maximal runs on a non-CPU EP).
pub fn placement(preferred: &str, nodes: &[Node]) -> PlacementReport {
    let total_flops: u64 = nodes.iter().map(|n| n.flops).sum();
    let total_time: f64 = nodes.iter().map(|n| n.time_us).sum();
    let pct = |part: f64, whole: f64| if whole > 0.0 { part / whole * 100.0 } else { 0.0 };
    let mut eps: Vec<String> = nodes.iter().map(|n| n.ep.clone()).collect();
    eps.sort();
    eps.dedup();
    let mut per_ep: Vec<EpShare> = eps
        .iter()
        .map(|ep| {
            let mine: Vec<&Node> = nodes.iter().filter(|n| &n.ep == ep).collect();
            let flops: u64 = mine.iter().map(|n| n.flops).sum();
            let time: f64 = mine.iter().map(|n| n.time_us).sum();
            EpShare {
                ep: ep.clone(),
                nodes: mine.len(),
                nodes_pct: pct(mine.len() as f64, nodes.len() as f64),
                flops,
                // As the placement counts it: with no FLOPs known, the FLOP share is the node share.
                flops_pct: if total_flops == 0 {
                    pct(mine.len() as f64, nodes.len() as f64)
                } else {
                    pct(flops as f64, total_flops as f64)
                },
                time_us_per_run: Some(time),
                time_pct: Some(pct(time, total_time)),
            }
        })
        .collect();
    per_ep.sort_by_key(|e| std::cmp::Reverse(e.flops));
    let share = |ep: &str| per_ep.iter().find(|e| e.ep == ep).cloned();
    let preferred_share = share(preferred);
    let mut partitions: Vec<Partition> = Vec::new();
    let mut transitions = Vec::new();
    let mut previous: Option<&Node> = None;
    for n in nodes {
        if n.ep != CPU {
            let continues = previous.is_some_and(|p| p.ep == n.ep);
            if !continues {
                partitions.push(Partition {
                    ep: n.ep.clone(),
                    fused_name: format!("QNNExecutionProvider_QNN_{}_0", partitions.len()),
                    nodes: Vec::new(),
                    flops: 0,
                    time: Some(TimeStats { median_us: 0.0, p95_us: 0.0, samples: 10 }),
                    backend_ops: Vec::new(),
                    graph: None,
                    phase: None,
                });
            }
            let p = partitions.last_mut().unwrap();
            p.nodes.push(n.name.clone());
            p.flops += n.flops;
            if let Some(t) = p.time.as_mut() {
                t.median_us += n.time_us;
                t.p95_us += n.time_us * 1.05;
            }
        }
        if let Some(p) = previous.filter(|p| p.ep != n.ep) {
            transitions.push(Transition {
                from_ep: p.ep.clone(),
                to_ep: n.ep.clone(),
                after: p.name.clone(),
                before: n.name.clone(),
                gap_us: None,
            });
        }
        previous = Some(n);
    }
    let mut fallback: Vec<FallbackNode> = nodes
        .iter()
        .filter(|n| n.ep != preferred)
        .map(|n| FallbackNode {
            name: n.name.clone(),
            op_type: n.op_type.clone(),
            ep: n.ep.clone(),
            input_shapes: vec!["[1,80,80,256]".into()],
            flops: Some(n.flops),
            flops_pct: pct(n.flops as f64, total_flops as f64),
            time_us_per_run: Some(n.time_us),
            expected: n.expected,
            reason: (!n.expected).then(|| format!("Validation FAILED for node {}: unsupported axis", n.name)),
            hint: (!n.expected).then(|| "export with opset 17 and axis=-1".to_string()),
        })
        .collect();
    fallback.sort_by(|a, b| b.flops_pct.total_cmp(&a.flops_pct));
    let rejections = npugate_profile::causes::aggregate(&fallback, preferred, None);
    PlacementReport {
        schema: PLACEMENT_SCHEMA.into(),
        model_sha256: "5d41402abc4b2a76b9719d911017c592b2ad8c6f1d3e4a5b6c7d8e9f00112233".into(),
        preferred_ep: preferred.into(),
        predicted: None,
        compiled: None,
        runs_profiled: 10,
        per_ep,
        totals: Totals {
            nodes: nodes.len(),
            flops: total_flops,
            model_nodes: Some(nodes.len()),
            model_flops: total_flops,
            flops_covered_pct: 100.0,
            time_us_per_run: Some(total_time),
            ..Totals::default()
        },
        preferred_flops_pct: preferred_share.as_ref().map_or(0.0, |s| s.flops_pct),
        preferred_nodes_pct: preferred_share.as_ref().map_or(0.0, |s| s.nodes_pct),
        preferred_time_pct: Some(preferred_share.as_ref().and_then(|s| s.time_pct).unwrap_or(0.0)),
        partitions,
        boundaries: Boundaries { per_run: vec![transitions.len(); 10], transitions, ..Boundaries::default() },
        rejections,
        fallback,
        nodes: nodes
            .iter()
            .map(|n| NodePlacement {
                not_placed: None,
                name: n.name.clone(),
                op_type: n.op_type.clone(),
                domain: String::new(),
                ep: n.ep.clone(),
                input_shapes: vec![],
                output_shapes: vec![],
                flops: Some(n.flops),
                profile_ep: Some(n.ep.clone()),
                time_us_per_run: (n.ep == CPU).then_some(n.time_us),
                backend_time: None,
            })
            .collect(),
        qnn_ops: None,
        graphs: vec![],
        warnings: vec![],
    }
}

/// `n` normal samples (Box–Muller on a seeded generator) with the given mean and CV.
pub fn normal_series(n: usize, mean_ms: f64, cv_pct: f64, seed: u64) -> Vec<u64> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n)
        .map(|_| {
            let (u1, u2) = (rng.f64().max(f64::MIN_POSITIVE), rng.f64());
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            (mean_ms * (1.0 + cv_pct / 100.0 * z) * 1e6) as u64
        })
        .collect()
}

/// A mixture: exactly round(n·slow_share) runs near `slow_ms`, the rest near `fast_ms` (each with
/// 2% CV), interleaved in a seeded random order.
pub fn mixture(n: usize, fast_ms: f64, slow_ms: f64, slow_share: f64, seed: u64) -> Vec<u64> {
    let slow = (n as f64 * slow_share).round() as usize;
    let mut series = normal_series(n - slow, fast_ms, 2.0, seed);
    series.extend(normal_series(slow, slow_ms, 2.0, seed + 1));
    fastrand::Rng::with_seed(seed + 2).shuffle(&mut series);
    series
}
