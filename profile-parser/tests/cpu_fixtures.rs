//! Real ORT 1.31.1 CPU profiles: every variant parses, the placement agrees with the assignment,
//! ResNet-50's Conv+Gemm FLOPs match an independent count, graph-I/O Q/DQ are recognised.

mod common;

use npugate_profile::placement::{build_report, GraphIo, PlacementInputs, CPU_EP};
use npugate_profile::profile::Profile;
use npugate_profile::report::PlacementReport;
use npugate_result::Assignment;

const MODELS: [&str; 4] = ["smallcnn", "smallcnn_qdq", "mixed", "resnet50"];

fn cpu_report(model: &str, preferred: &str, assignment: &Assignment, io: &GraphIo) -> PlacementReport {
    let profile = common::profile(&format!("ort-1.31.1-python/{model}.profile.json"));
    let reference = common::profile(&format!("ort-1.31.1-python/{model}.reference_profile.json"));
    build_report(&PlacementInputs {
        model_sha256: model,
        preferred_ep: preferred,
        assignment,
        profile: Some(&profile),
        reference: Some(&reference),
        rejections: None,
        qnn: None,
        trace: None,
        emulated: None,
        graph_io: io.clone(),
        graph: None,
        io_offload: true,
        predicted: None,
        fusions: None,
    })
}

fn assignment(model: &str) -> Assignment {
    common::assignment(&format!("ort-1.31.1-python/{model}.assignment.json"))
}

#[test]
fn every_shared_fixture_parses_with_its_runs() {
    for (file, runs, kernels_per_run) in [
        ("ort-1.31.1/x86_resnet50_cpu.json", 13, 59),
        ("ort-1.31.1/x86_smallcnn_qdq_cpu.json", 7, 13),
        ("ort-1.31.1/a64_qemu_smallcnn_cpu.json", 7, 15),
        ("ort-1.31.1/a64_qemu_mixed_qnn_saver.json", 1, 3),
    ] {
        let p: Profile = common::profile(file);
        assert_eq!(p.runs.len(), runs, "{file}");
        assert!(p.run_executions().all(|run| run.len() == kernels_per_run), "{file}");
        assert!(p.warnings.is_empty(), "{file}: {:?}", p.warnings);
    }
}

#[test]
fn cpu_placement_agrees_with_the_assignment_node_for_node() {
    for model in MODELS {
        let assignment = assignment(model);
        let r = cpu_report(model, CPU_EP, &assignment, &GraphIo::default());
        assert_eq!(r.totals.nodes, assignment.subgraphs.iter().map(|s| s.nodes.len()).sum::<usize>(), "{model}");
        assert_eq!(r.runs_profiled, 3, "{model}");
        assert_eq!(r.per_ep.len(), 1, "{model}: {:?}", r.per_ep);
        assert_eq!(r.preferred_flops_pct, 100.0, "{model}");
        assert_eq!(r.preferred_time_pct, Some(100.0), "{model}");
        assert!(r.fallback.is_empty() && r.partitions.is_empty(), "{model}");
        assert_eq!(r.boundaries.per_run, [0, 0, 0], "{model}");
        assert_eq!(r.totals.flops_unknown_nodes, 0, "{model}: {:?}", r.warnings);
        let witnessed: Vec<_> = r.nodes.iter().filter(|n| n.profile_ep.is_some()).collect();
        assert!(witnessed.iter().all(|n| n.profile_ep.as_deref() == Some(n.ep.as_str())), "{model}");
        assert!(!witnessed.is_empty(), "{model}: no node tied to a kernel");
        assert!(r.warnings.iter().all(|w| !w.contains("another")), "{model}: {:?}", r.warnings);
    }
}

/// Independent ResNet-50 (v1.5: stride on the 3×3) MAC count at 224×224, layer by layer.
fn resnet50_conv_gemm_macs() -> u64 {
    let mut macs = 112 * 112 * 64 * 3 * 7 * 7; // conv1, stride 2
    let mut in_channels = 64;
    let mut size = 56; // after the stride-2 max pool
    for (blocks, mid, out, stride) in [(3, 64, 256, 1), (4, 128, 512, 2), (6, 256, 1024, 2), (3, 512, 2048, 2)] {
        for block in 0..blocks {
            let s = if block == 0 { stride } else { 1 };
            let out_size = size / s;
            macs += size * size * mid * in_channels; // 1×1 reduce
            macs += out_size * out_size * mid * mid * 9; // 3×3, strided
            macs += out_size * out_size * out * mid; // 1×1 expand
            if block == 0 {
                macs += out_size * out_size * out * in_channels; // projection shortcut
            }
            in_channels = out;
            size = out_size;
        }
    }
    macs + 2048 * 1000 // fc
}

#[test]
fn resnet50_conv_and_gemm_flops_match_the_hand_count_within_1_percent() {
    let hand = 2 * resnet50_conv_gemm_macs();
    assert!((8.1e9..8.3e9).contains(&(hand as f64)), "hand count {hand}");
    let assignment = assignment("resnet50");
    let r = cpu_report("resnet50", CPU_EP, &assignment, &GraphIo::default());
    let counted: u64 =
        r.nodes.iter().filter(|n| n.op_type == "Conv" || n.op_type == "Gemm").map(|n| n.flops.unwrap()).sum();
    let error = (counted as f64 - hand as f64).abs() / hand as f64;
    println!("ResNet-50 Conv+Gemm FLOPs: counted {counted}, hand count {hand}, error {:.4}%", 100.0 * error);
    assert!(error < 0.01, "counted {counted}, hand {hand}, error {:.4}%", 100.0 * error);
    assert!(r.totals.flops >= counted);
}

#[test]
fn graph_io_quantization_on_cpu_is_expected_mid_graph_dq_is_not() {
    let mut assignment = assignment("smallcnn_qdq");
    let on_cpu = ["input_QuantizeLinear", "probs_DequantizeLinear", "logits_DequantizeLinear"];
    for subgraph in &mut assignment.subgraphs {
        if !on_cpu.contains(&subgraph.nodes[0].name.as_str()) {
            subgraph.ep = "QNNExecutionProvider".to_string();
        }
    }
    let io =
        GraphIo { inputs: vec![vec![Some(1), Some(3), Some(64), Some(64)]], outputs: vec![vec![Some(1), Some(10)]] };
    let r = cpu_report("smallcnn_qdq", "QNNExecutionProvider", &assignment, &io);
    let expected = |name: &str| r.fallback.iter().find(|f| f.name == name).map(|f| f.expected);
    assert_eq!(expected("input_QuantizeLinear"), Some(true));
    assert_eq!(expected("probs_DequantizeLinear"), Some(true));
    assert_eq!(expected("logits_DequantizeLinear"), Some(false), "same shape as the output, but mid-graph");
    assert_eq!(r.fallback.len(), 3);
    assert_eq!(r.preferred_flops_pct, 100.0, "Q/DQ count 0 FLOPs by convention");
}
