//! Bad input gives clear errors or named warnings, never a panic; the result-directory entry point.

mod common;

use std::path::Path;

use npugate_profile::placement::{build_report, GraphIo, PlacementInputs, CPU_EP};
use npugate_profile::profile::parse_profile;
use npugate_profile::{analyze_result_dir, AnalyzeError};
use proptest::prelude::*;

fn copy_fixture(relative: &str, dir: &Path, name: &str) {
    std::fs::copy(common::fixture(relative), dir.join(name)).unwrap();
}

fn smallcnn_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let assignment = common::assignment("ort-1.31.1-python/smallcnn.assignment.json");
    common::write_result_json(dir.path(), CPU_EP, &assignment, &[1, 3, 64, 64]);
    copy_fixture("ort-1.31.1-python/smallcnn.profile.json", dir.path(), "profile.json");
    copy_fixture("ort-1.31.1-python/smallcnn.reference_profile.json", dir.path(), "reference_profile.json");
    dir
}

#[test]
fn analyzes_a_result_directory() {
    let dir = smallcnn_dir();
    let r = analyze_result_dir(dir.path()).unwrap();
    assert_eq!(r.totals.nodes, 12);
    assert_eq!(r.preferred_flops_pct, 100.0);
    assert!(r.totals.flops > 0);
    let json = serde_json::to_string(&r).unwrap();
    let back: npugate_profile::report::PlacementReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
}

#[test]
fn compressed_profiles_give_the_same_placement_as_the_plain_ones_of_an_older_result() {
    let dir = smallcnn_dir();
    let plain = analyze_result_dir(dir.path()).unwrap();
    for name in ["profile.json", "reference_profile.json"] {
        let text = std::fs::read(dir.path().join(name)).unwrap();
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut encoder, &text).unwrap();
        std::fs::write(dir.path().join(format!("{name}.gz")), encoder.finish().unwrap()).unwrap();
        std::fs::remove_file(dir.path().join(name)).unwrap();
    }
    let compressed = analyze_result_dir(dir.path()).unwrap();
    assert_eq!(compressed, plain);
    assert!(compressed.warnings.iter().all(|w| !w.contains("missing")), "{:?}", compressed.warnings);
}

#[test]
fn truncated_profile_is_an_error_naming_the_file() {
    let dir = smallcnn_dir();
    let text = std::fs::read(dir.path().join("profile.json")).unwrap();
    std::fs::write(dir.path().join("profile.json"), &text[..text.len() / 3]).unwrap();
    let err = analyze_result_dir(dir.path()).unwrap_err();
    assert!(matches!(err, AnalyzeError::Profile { .. }));
    let message = err.to_string();
    assert!(message.contains("profile.json is truncated at line"), "{message}");
}

#[test]
fn wrong_top_level_type_is_an_error_naming_the_file() {
    let dir = smallcnn_dir();
    std::fs::write(dir.path().join("reference_profile.json"), "\"not a profile\"").unwrap();
    let message = analyze_result_dir(dir.path()).unwrap_err().to_string();
    assert!(message.contains("reference_profile.json is not an ORT profile"), "{message}");
    assert!(message.contains("array of trace events"), "{message}");
}

#[test]
fn missing_assignment_is_an_error_naming_result_json() {
    let dir = tempfile::tempdir().unwrap();
    let empty = npugate_result::Assignment {
        source: "unavailable".into(),
        error: Some("ORT 1.22 has no Session_GetEpGraphAssignmentInfo".into()),
        subgraphs: vec![],
    };
    common::write_result_json(dir.path(), CPU_EP, &empty, &[1, 3, 64, 64]);
    let message = analyze_result_dir(dir.path()).unwrap_err().to_string();
    assert!(message.contains("result.json has no EP assignment (ORT 1.22"), "{message}");
}

#[test]
fn zero_runs_and_profiles_of_another_model_are_named_warnings() {
    let dir = smallcnn_dir();
    std::fs::write(dir.path().join("profile.json"), "[]").unwrap();
    let r = analyze_result_dir(dir.path()).unwrap();
    assert_eq!(r.runs_profiled, 0);
    assert!(r.warnings.iter().any(|w| w.contains("no model_run events: 0 runs")), "{:?}", r.warnings);

    copy_fixture("ort-1.31.1-python/resnet50.profile.json", dir.path(), "profile.json");
    copy_fixture("ort-1.31.1-python/resnet50.reference_profile.json", dir.path(), "reference_profile.json");
    let r = analyze_result_dir(dir.path()).unwrap();
    let all = r.warnings.join("\n");
    assert!(all.contains("is the reference profile from another model?"), "{all}");
    assert!(all.contains("is the profile from another model"), "{all}");
    assert!(all.contains("12 of 12 model node(s) are not in the reference profile"), "{all}");
    assert!(!all.contains("did not run"), "a reference of another model says nothing about what ran: {all}");
    assert_eq!(r.totals.flops_unknown_nodes, 11, "all but `flatten`, a known-zero op");
}

#[test]
fn unknown_op_is_a_warning_with_flops_none() {
    let mut assignment = common::assignment("ort-1.31.1-python/smallcnn.assignment.json");
    assignment.subgraphs[0].nodes[0].op_type = "MysteryConv".into();
    let reference = common::profile("ort-1.31.1-python/smallcnn.reference_profile.json");
    let r = build_report(&PlacementInputs {
        model_sha256: "",
        preferred_ep: CPU_EP,
        assignment: &assignment,
        profile: None,
        reference: Some(&reference),
        rejections: None,
        qnn: None,
        trace: None,
        emulated: None,
        graph_io: GraphIo::default(),
        graph: None,
        io_offload: true,
        predicted: None,
        fusions: None,
    });
    assert!(r.warnings.iter().any(|w| w == "FLOPs unknown for MysteryConv (1 node(s))"), "{:?}", r.warnings);
    assert_eq!(r.nodes[0].flops, None);
    assert_eq!(r.totals.flops_unknown_nodes, 1);
    assert_eq!(r.preferred_time_pct, None);
    // The unknown node's FLOPs are estimated at the model's rate in the reference pass, so the
    // coverage is the known nodes' share of the reference kernel time, not 100%.
    let time_of = |keep: &dyn Fn(&str) -> bool| -> f64 {
        (0..reference.nodes.len())
            .filter(|&i| keep(&reference.nodes[i].name))
            .map(|i| reference.node_time_per_run(i).iter().sum::<f64>())
            .sum()
    };
    let unknown = &r.nodes[0].name;
    let (unknown_time, known_time) = (time_of(&|n| n == unknown), time_of(&|n| n != unknown));
    assert!(unknown_time > 0.0 && known_time > 0.0);
    let expected = 100.0 * known_time / (known_time + unknown_time);
    assert!(expected < 99.0, "the first conv is a visible share of the time: {expected}");
    assert!((r.totals.flops_covered_pct - expected).abs() < 0.01, "{} vs {expected}", r.totals.flops_covered_pct);
    let estimate = r.totals.flops_unknown_estimate.expect("an estimate from the reference times");
    assert!(estimate > 0);
}

#[test]
fn coverage_without_reference_times_falls_to_the_node_share() {
    use npugate_profile::report::covered_pct;
    assert_eq!(covered_pct(0, 0, None, 0, 4), 100.0, "a model of known-zero FLOPs is covered");
    assert_eq!(covered_pct(0, 0, None, 4, 4), 0.0, "a model of unknown FLOPs is not");
    assert_eq!(covered_pct(300, 400, None, 1, 4), 56.25, "75% of the known FLOPs, 3 of 4 nodes known");
    assert_eq!(covered_pct(300, 300, Some(100), 1, 4), 75.0, "the estimate joins the whole");
}

fn real_profile_bytes() -> Vec<u8> {
    std::fs::read(common::fixture("ort-1.31.1/a64_qemu_mixed_qnn_saver.json")).unwrap()
}

/// Parses and, when that succeeds, builds a report using it as profile and as reference: no panic.
fn parse_and_report(bytes: &[u8]) {
    if let Ok(profile) = parse_profile(bytes) {
        let assignment = common::assignment("ort-1.31.1-python/mixed.assignment.json");
        build_report(&PlacementInputs {
            model_sha256: "",
            preferred_ep: "QNNExecutionProvider",
            assignment: &assignment,
            profile: Some(&profile),
            reference: Some(&profile),
            rejections: None,
            qnn: None,
            trace: None,
            emulated: None,
            graph_io: GraphIo { inputs: vec![vec![Some(1)]], outputs: vec![vec![None]] },
            graph: None,
            io_offload: true,
            predicted: None,
            fusions: None,
        });
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        parse_and_report(&bytes);
    }

    #[test]
    fn mutated_real_profiles_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = real_profile_bytes();
        for (at, byte) in edits {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        parse_and_report(&bytes);
        let end = cut.index(bytes.len());
        parse_and_report(&bytes[..end]);
    }

    #[test]
    fn huge_or_negative_numbers_never_panic(number in "-?[0-9]{1,19}", which in 0usize..5, nth in 0usize..8) {
        // Replace the nth occurrence of a dimension or time in a real reference profile, whose node
        // names match the assignment, so FLOPs are computed from the mutated shapes.
        let text = std::fs::read_to_string(common::fixture("ort-1.31.1-python/mixed.reference_profile.json")).unwrap();
        let target = ["[1,", ",64,64]", "[16,", "\"dur\" :", "\"ts\" :"][which];
        let replacement = match which {
            0 | 2 => format!("[{number},"),
            1 => format!(",{number},64]"),
            3 => format!("\"dur\" :{number}"),
            _ => format!("\"ts\" :{number}"),
        };
        let mut pieces: Vec<&str> = text.split(target).collect();
        let at = 1 + nth % pieces.len().saturating_sub(1).max(1);
        let mutated = if pieces.len() > at {
            let tail = pieces.split_off(at);
            format!("{}{replacement}{}", pieces.join(target), tail.join(target))
        } else {
            text.clone()
        };
        parse_and_report(mutated.as_bytes());
    }
}
