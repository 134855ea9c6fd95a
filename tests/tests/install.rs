//! npugate installed with pip, as a user installs it: the wheel `scripts/package` packs from the
//! binaries `scripts/setup` built, pip-installed into a fresh venv outside the repository (no
//! index: nothing downloaded), then run from there on real models — this machine's CPU and
//! Qualcomm's host HTP under wine — with nothing of the repository or its `target/` in reach.
//! And `npugate doctor` on a machine that lacks the pieces.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use npugate_e2e::install::{package, venv_with};
use npugate_e2e::{bin, describe, run};
use serde_json::Value;

/// The harnesses the wheel must hold, with the file each needs beside it.
const HARNESSES: [&str; 4] = [
    "x86_64-unknown-linux-gnu/npugate-harness",
    "aarch64-unknown-linux-gnu/npugate-harness",
    "x86_64-pc-windows-gnu/npugate-harness.exe",
    "x86_64-pc-windows-gnu/bcryptprimitives.dll",
];

/// Timing noise of a shared 2-core machine is not under test: the CV rule is relaxed.
const CALM_CV: &str = "cv_pct=100000";

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", describe(output)))
}

/// This machine's glibc (`ldd --version`'s first line ends with it), as (major, minor).
fn glibc() -> (u32, u32) {
    let out = run(Command::new("ldd").arg("--version"));
    let first = String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default().to_string();
    let version = first.rsplit(' ').next().unwrap_or_default();
    let (major, minor) = version.split_once('.').unwrap_or_else(|| panic!("ldd --version: {first}"));
    (major.parse().unwrap(), minor.parse().unwrap())
}

/// A copy of `harness` whose build stamp names version 0.0.1: a harness of another npugate.
fn other_version_copy(harness: &Path, to: &Path) -> PathBuf {
    let mut bytes = std::fs::read(harness).unwrap();
    let stamp = format!("npugate-harness-build:{} ", env!("CARGO_PKG_VERSION"));
    let at = bytes.windows(stamp.len()).position(|w| w == stamp.as_bytes()).expect("the harness carries its stamp");
    let old = format!("npugate-harness-build:{:<width$}", "0.0.1", width = env!("CARGO_PKG_VERSION").len());
    bytes.splice(at..at + old.len(), old.bytes());
    std::fs::write(to, bytes).unwrap();
    std::fs::set_permissions(to, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    to.to_path_buf()
}

#[test]
fn the_wheel_installs_into_a_fresh_venv_and_runs_real_models_from_there() {
    let work = tempfile::Builder::new().prefix("npugate-install-").tempdir().unwrap();
    let (wheel, members) = package(&work.path().join("dist"));

    // The wheel: npugate, and the harness of every target; a platform tag this machine satisfies.
    let data = format!("npugate-{}.data", env!("CARGO_PKG_VERSION"));
    assert!(members.contains(&format!("{data}/scripts/npugate")), "{members:#?}");
    for harness in HARNESSES {
        assert!(members.contains(&format!("{data}/data/lib/npugate/{harness}")), "no {harness} in {members:#?}");
    }
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    let tag = name.split('-').next_back().unwrap().trim_end_matches(".whl").to_string();
    let floor: Vec<u32> = tag.split('_').skip(1).take(2).map(|n| n.parse().unwrap()).collect();
    assert!(tag.starts_with("manylinux_2_") && tag.ends_with("_x86_64"), "{name}");
    assert!((floor[0], floor[1]) <= glibc(), "{name} asks for a newer glibc than this machine's {:?}", glibc());

    let venv = work.path().join("venv");
    let npugate = venv_with(&venv, &wheel.display().to_string(), &[]);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().canonicalize().unwrap();
    assert!(!venv.starts_with(&repo), "the venv is outside the repository");
    let in_work = |args: &[&str]| run(Command::new(&npugate).current_dir(work.path()).args(args));

    // Every harness found inside the venv, of npugate's own build.
    let version = in_work(&["--version"]);
    assert!(version.status.success(), "{}", describe(&version));
    let doctor = in_work(&["doctor", "--json"]);
    let report = json(&doctor);
    let build = &report["npugate"]["build"];
    for harness in report["harnesses"].as_array().unwrap().iter().filter(|h| h["target"] != "aarch64-linux-android") {
        let path = PathBuf::from(harness["path"].as_str().unwrap_or_else(|| panic!("{harness}")));
        assert!(path.starts_with(venv.join("lib/npugate")), "{harness}");
        assert_eq!((harness["status"].as_str(), &harness["build"]["commit"]), (Some("ok"), &build["commit"]));
        assert!(
            String::from_utf8_lossy(&version.stdout).contains(&path.display().to_string()),
            "{}",
            describe(&version)
        );
    }
    assert_eq!(doctor.status.code(), Some(0), "the basics work here: {}", describe(&doctor));

    // A real model on this machine's CPU.
    let magika = String::from_utf8_lossy(&in_work(&["model", "fetch", "magika"]).stdout).trim().to_string();
    let local = in_work(&[
        "run",
        "--local",
        "--model",
        &magika,
        "--shape",
        "bytes=1x2048",
        "--rule",
        CALM_CV,
        "--out",
        "local",
    ]);
    assert_eq!(local.status.code(), Some(0), "{}", describe(&local));
    let verdict: Value =
        serde_json::from_slice(&std::fs::read(work.path().join("local/verdict.json")).unwrap()).unwrap();
    assert_eq!((verdict["schema"].as_str(), verdict["outcome"].as_str()), (Some("npugate.verdict/1.1"), Some("pass")));

    // A real model on Qualcomm's host HTP as a Galaxy S24's Snapdragon, with the wheel's Windows harness.
    let cls = String::from_utf8_lossy(&in_work(&["model", "fetch", "ppocr-cls"]).stdout).trim().to_string();
    let preflight = in_work(&[
        "preflight",
        "--soc",
        "SM8650",
        "--model",
        &cls,
        "--shape",
        "x=1x3x48x192",
        "--json",
        "--out",
        "pre",
    ]);
    assert_eq!(preflight.status.code(), Some(0), "{}", describe(&preflight));
    let soc = &json(&preflight)["socs"][0];
    assert_eq!((soc["soc"].as_str(), soc["outcome"].as_str()), (Some("SM8650"), Some("pass")), "{soc}");
    let result: Value = serde_json::from_slice(
        &std::fs::read(work.path().join(soc["result_dir"].as_str().unwrap()).join("result.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(result["tool"]["commit"], build["commit"], "the wheel's Windows harness ran");

    // A harness of another npugate is refused before it runs, with the fix.
    let old = other_version_copy(
        &venv.join("lib/npugate/x86_64-unknown-linux-gnu/npugate-harness"),
        &work.path().join("old"),
    );
    let refused =
        in_work(&["run", "--local", "--model", &magika, "--shape", "bytes=1x2048", "--harness", "old", "--out", "o"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(
        stderr.contains("is npugate-harness 0.0.1") && stderr.contains("pip install --force-reinstall"),
        "{stderr}"
    );
    assert!(!work.path().join("o").exists(), "nothing ran");
    assert!(run(Command::new(&old).arg("--version")).stdout.starts_with(b"npugate-harness 0.0.1 (commit"));
}

#[test]
fn doctor_lists_every_missing_piece_with_its_fix_and_fails_without_the_basics() {
    let empty = tempfile::tempdir().unwrap();
    // No runtime fetched, and none of wine, qemu, adb or python on the PATH.
    let doctor = run(Command::new(bin("npugate"))
        .args(["doctor", "--json"])
        .env("NPUGATE_CACHE", empty.path().join("cache"))
        .env("PATH", empty.path())
        .env_remove("NPUGATE_PYTHON"));
    assert_eq!(doctor.status.code(), Some(1), "{}", describe(&doctor));
    let report = json(&doctor);
    assert_eq!((report["schema"].as_str(), report["basics_work"].as_bool()), (Some("npugate.doctor/1"), Some(false)));
    let problems = report["problems"].as_array().unwrap();
    let fix_of = |what: &str| {
        problems
            .iter()
            .find(|p| p["what"].as_str().unwrap().contains(what))
            .unwrap_or_else(|| panic!("no problem about {what}: {problems:#?}"))
    };
    let runtime = fix_of("no runtime for this machine");
    assert_eq!(
        (runtime["basic"].as_bool(), runtime["fix"].as_str()),
        (Some(true), Some("npugate runtime fetch ort-1.31.1-linux-x86_64"))
    );
    for (tool, fix) in
        [("wine", "apt-get install wine64 wine"), ("qemu-aarch64", "qemu-user"), ("adb", "apt-get install adb")]
    {
        let problem = fix_of(&format!("{tool} is not installed"));
        assert_eq!(problem["basic"], false, "{problem}");
        assert!(problem["fix"].as_str().unwrap().contains(fix), "{problem}");
    }
    assert!(problems.iter().take_while(|p| p["basic"] == true).count() >= 1, "basic problems come first");
    // The same as text: each problem on its own line, the verdict last.
    let text =
        run(Command::new(bin("npugate")).arg("doctor").env("NPUGATE_CACHE", empty.path()).env("PATH", empty.path()));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("[basic] no runtime for this machine") && text.ends_with("fix the [basic] pieces above\n"),
        "{text}"
    );
}
