//! End to end: nothing of the user's is overwritten by any command that writes. Each writing
//! command is pointed at a file of the user's (or at its own input) and must refuse in one line,
//! exit 2, leaving the file as it was; a file npugate wrote is replaced.

use std::path::Path;
use std::process::Output;

use npugate_e2e::htp::npugate;
use npugate_e2e::{describe, harness, model};

/// What the user keeps in the way.
const MINE: &str = "my own notes\n";

/// Asserts that `output` refused in one line naming `path` and left `path` holding `before`.
fn refused(output: &Output, path: &Path, before: &[u8], says: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{}", describe(output));
    assert!(stderr.contains(says) && stderr.contains(&path.display().to_string()), "{}", describe(output));
    assert_eq!(std::fs::read(path).unwrap(), before, "{} was changed: {}", path.display(), describe(output));
}

#[test]
fn every_writing_command_refuses_a_users_file_in_the_way() {
    let work = tempfile::tempdir().unwrap();
    let at = |name: &str| work.path().join(name);
    let notes = at("notes.txt");
    std::fs::write(&notes, MINE).unwrap();
    let source = at("smallcnn_qdq.onnx");
    std::fs::copy(model("smallcnn_qdq.onnx"), &source).unwrap();
    let source_bytes = std::fs::read(&source).unwrap();
    let not_npugate_s = "is not a file npugate wrote; nothing was changed";

    // compile: into its own input, or over the user's file (refused before anything is compiled).
    let compile = |out: &Path| {
        npugate(&["compile", "--soc", "SM8650"], &[Path::new("--model"), &source, Path::new("--out"), out])
    };
    refused(&compile(&source), &source, &source_bytes, "is the command's own input");
    refused(&compile(&notes), &notes, MINE.as_bytes(), not_npugate_s);

    // preflight --out DIR with the user's preflight.json in it.
    let preflight_dir = at("checks");
    std::fs::create_dir(&preflight_dir).unwrap();
    let users_report = preflight_dir.join("preflight.json");
    std::fs::write(&users_report, MINE).unwrap();
    let preflight = npugate(
        &["preflight", "--soc", "SM8650"],
        &[Path::new("--model"), &source, Path::new("--out"), &preflight_dir],
    );
    let said = String::from_utf8_lossy(&preflight.stderr);
    assert_eq!(preflight.status.code(), Some(2), "{}", describe(&preflight));
    assert!(said.contains(&format!("{} holds no npugate preflight", preflight_dir.display())), "{said}");
    assert_eq!(std::fs::read_to_string(&users_report).unwrap(), MINE);

    // keygen, even with --force: --force replaces only a key.
    for force in [&[][..], &["--force"][..]] {
        let keygen = npugate(&[&["keygen"][..], force].concat(), &[Path::new("--out"), &notes]);
        refused(&keygen, &notes, MINE.as_bytes(), not_npugate_s);
    }

    // A real run for the commands that read one: baseline save and gate --report.
    let result = at("result");
    let measured = harness(&model("smallcnn.onnx"), &result, &["--runs", "5"]);
    assert!(measured.status.success(), "{}", describe(&measured));
    let baseline = |out: &Path| npugate(&["baseline", "save"], &[&result, Path::new("--out"), out]);
    refused(&baseline(&notes), &notes, MINE.as_bytes(), not_npugate_s);
    let result_json = result.join("result.json");
    let result_bytes = std::fs::read(&result_json).unwrap();
    refused(&baseline(&result_json), &result_json, &result_bytes, "is the command's own input");
    let gate = |out: &Path| {
        npugate(
            &["gate", "--rule", "disable=[\"cv_pct\"]", "--format", "markdown"],
            &[&result, Path::new("--report"), out],
        )
    };
    refused(&gate(&notes), &notes, MINE.as_bytes(), not_npugate_s);

    // What npugate wrote is replaced: a baseline and a report written twice.
    for _ in 0..2 {
        let saved = baseline(&at("baseline.json"));
        assert_eq!(saved.status.code(), Some(0), "{}", describe(&saved));
        let reported = gate(&at("verdict.md"));
        assert_eq!(reported.status.code(), Some(0), "{}", describe(&reported));
    }
}
