//! npugate in CI, run the way CI runs it: the GitHub Action (`action.yml`) through a simulated
//! Actions runner and the GitLab template (`ci/gitlab/`) through a simulated pipeline
//! (tests/support/actions.rs, tests/support/gitlab.rs), on real models with real ONNX Runtime — on
//! this machine, on the adbd rig (also through a second, "remote" adb server) and on Qualcomm's host
//! HTP — and both files validated against their published schemas (tests/schemas/, with provenance).
//! Every output is checked against npugate's own JSON and, for the numbers, against a count made
//! here from the raw latencies and the per-EP FLOPs.

use std::path::{Path, PathBuf};
use std::process::Command;

use npugate_e2e::actions::{ActionRun, ActionRunner, Outcome};
use npugate_e2e::aihub::{self, StandIn};
use npugate_e2e::devices::Rig;
use npugate_e2e::gitlab::{yaml, JobRun, Pipeline};
use npugate_e2e::{bin, describe, model, run, runtime_file};
use serde_json::Value;

const OPENVINO_RUNTIME: &str = "openvino-1.24.1-linux-x86_64";
const HOST_RUNTIME: &str = "ort-1.31.1-linux-x86_64";
/// Timing noise of a shared 2-core CI machine is not under test: the CV rule is relaxed.
const CALM_CV: &str = "cv_pct=100000";

/// This checkout: the action's path, as `uses: owner/npugate@ref` checks it out.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("the checkout")
}

fn npugate_bin() -> String {
    bin("npugate").display().to_string()
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn num(value: &Value) -> f64 {
    value.as_f64().unwrap_or_else(|| panic!("not a number: {value}"))
}

/// An output number of the action.
fn output_number(run: &ActionRun, name: &str) -> f64 {
    run.output(name)
        .parse()
        .unwrap_or_else(|_| panic!("output {name} is not a number: {:?}\n{}", run.output(name), run.describe()))
}

/// Median and CV (sample stdev / mean) of the runs a verdict judged — its raw latencies but those it
/// set aside as slowed by a busy machine (`contention.runs.contended`) — counted here.
fn median_and_cv_ms(verdict: &Value) -> (f64, f64) {
    let set_aside: Vec<u64> = verdict["contention"]["runs"]["contended"]
        .as_array()
        .map(|runs| runs.iter().filter_map(|r| r["index"].as_u64()).collect())
        .unwrap_or_default();
    let latencies = verdict["latencies_ns"].as_array().expect("latencies_ns");
    let mut values: Vec<f64> = latencies
        .iter()
        .enumerate()
        .filter(|(index, _)| !set_aside.contains(&(*index as u64)))
        .map(|(_, v)| num(v))
        .collect();
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 };
    let mean = values.iter().sum::<f64>() / n as f64;
    let stdev = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    (median / 1e6, 100.0 * stdev / mean)
}

/// The preferred EP's share of FLOPs, counted here from the per-EP FLOPs of a placement.
fn preferred_share(placement: &Value) -> f64 {
    let per_ep = placement["per_ep"].as_array().expect("per_ep");
    let total: f64 = per_ep.iter().map(|e| num(&e["flops"])).sum();
    let preferred: f64 = per_ep.iter().filter(|e| e["ep"] == placement["preferred_ep"]).map(|e| num(&e["flops"])).sum();
    100.0 * preferred / total
}

/// Checks the action's median_ms, cv_pct and npu_flops_pct against a count made here from `verdict`.
fn assert_numbers_match(run: &ActionRun, verdict: &Value) {
    let (median_ms, cv_pct) = median_and_cv_ms(verdict);
    assert!(
        (output_number(run, "median_ms") - median_ms).abs() < 1e-4,
        "median_ms {} vs {median_ms} counted here",
        run.output("median_ms")
    );
    assert!(
        (output_number(run, "cv_pct") - cv_pct).abs() < 1e-3 * cv_pct.max(1.0),
        "cv_pct {} vs {cv_pct} counted here",
        run.output("cv_pct")
    );
    let share = preferred_share(&verdict["placement"]);
    assert!(
        (output_number(run, "npu_flops_pct") - share).abs() < 1e-4,
        "npu_flops_pct {} vs {share} counted here",
        run.output("npu_flops_pct")
    );
}

/// The test cases and failures of a JUnit file.
fn junit_counts(path: &Path) -> (usize, usize, String) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (text.matches("<testcase").count(), text.matches("<failure").count(), text)
}

/// The upload of the action's report, with everything the brief of the action promises in it.
fn assert_uploaded_report(run: &ActionRun) -> PathBuf {
    assert_eq!(run.uploads.len(), 1, "{}", run.describe());
    let upload = &run.uploads[0];
    let report_dir = PathBuf::from(run.output("report_dir"));
    assert_eq!(upload.paths, std::slice::from_ref(&report_dir), "the upload takes the report directory");
    for file in ["summary.md", "npugate.stderr"] {
        assert!(upload.files.contains(&report_dir.join(file)), "{file} is not in the artifact: {:?}", upload.files);
    }
    assert!(upload.files.iter().any(|f| f.ends_with("report.html")), "no report.html in the artifact");
    assert!(
        upload
            .files
            .iter()
            .any(|f| f.extension().is_some_and(|e| e == "xml") && f.starts_with(report_dir.join("junit"))),
        "no JUnit in the artifact"
    );
    report_dir
}

/// A copy of the test model `name` under a file name a shell would misread, in `dir`.
fn hostile_copy(name: &str, dir: &Path) -> PathBuf {
    let path = dir.join("my model; $(touch PWNED) 'quoted' \"double\" `tick`.onnx");
    std::fs::copy(model(name), &path).expect("copy the model");
    path
}

#[test]
fn action_yml_and_the_gitlab_template_validate_against_their_published_schemas() {
    let schemas = repo().join("tests/schemas");
    let validate = |schema: &str, document: &Value| -> Vec<String> {
        let validator =
            jsonschema::validator_for(&json(&schemas.join(schema))).unwrap_or_else(|e| panic!("{schema}: {e}"));
        validator.iter_errors(document).map(|e| format!("{} at {}", e, e.instance_path())).collect()
    };
    let action = yaml(&repo().join("action.yml"));
    let template = yaml(&repo().join("ci/gitlab/npugate.gitlab-ci.yml"));
    let example = yaml(&repo().join("ci/gitlab/example.gitlab-ci.yml"));
    assert_eq!(validate("github-action.json", &action), Vec::<String>::new(), "action.yml");
    assert_eq!(validate("gitlab-ci.json", &template), Vec::<String>::new(), "the GitLab template");
    assert_eq!(validate("gitlab-ci.json", &example), Vec::<String>::new(), "the documented .gitlab-ci.yml");
    // GitLab's schema lets a hidden key (`.npugate`) hold anything (it may be a YAML anchor), so the
    // template's job is also validated as the visible job it becomes, and so is every job of the
    // example as GitLab resolves it (include merged, extends applied).
    let as_job = |job: &Value| serde_json::json!({ "npugate": job });
    assert_eq!(validate("gitlab-ci.json", &as_job(&template[".npugate"])), Vec::<String>::new(), "the template's job");
    let (_project, pipeline) = gitlab_project(&repo());
    for name in ["npugate", "npugate-phone", "npugate-htp", "npugate-nightly", "npugate-nightly-merge"] {
        let job = Value::Object(pipeline.job(name).config);
        assert_eq!(validate("gitlab-ci.json", &as_job(&job)), Vec::<String>::new(), "job {name} as GitLab resolves it");
    }

    // The validators do validate: one broken key in each is refused.
    let mut broken_action = action.clone();
    let steps = broken_action["runs"]["steps"].as_array_mut().unwrap();
    let step = steps.iter_mut().find_map(|step| step.as_object_mut().filter(|s| s.contains_key("shell"))).unwrap();
    let shell = step.remove("shell").unwrap();
    step.insert("shel".into(), shell);
    assert!(!validate("github-action.json", &broken_action).is_empty(), "a step with `shel:` passed the action schema");
    let mut broken_job = template[".npugate"].clone();
    broken_job["artifacts"]["when"] = "sometimes".into();
    assert!(
        !validate("gitlab-ci.json", &as_job(&broken_job)).is_empty(),
        "artifacts:when sometimes passed GitLab's schema"
    );

    // Every npugate flag the brief names is an input, and every output is declared.
    let action_doc = &action;
    for input in
        ["model", "shape", "device", "runtime", "ep", "gate", "rules", "baseline", "baseline-model", "evidence-key"]
    {
        assert!(action_doc["inputs"].get(input).is_some(), "action.yml has no input {input}");
    }
    assert_eq!(action_doc["inputs"]["device"]["default"], "local");
    for output in ["verdict", "npu_flops_pct", "median_ms", "cv_pct", "report_dir"] {
        assert!(action_doc["outputs"].get(output).is_some(), "action.yml has no output {output}");
    }
}

#[test]
fn the_action_passes_a_model_that_runs_where_it_should_and_publishes_everything() {
    let runner = ActionRunner::new(&repo());
    // A user's model under a name that would run commands if a step pasted it into a script.
    let model = hostile_copy("dynamic.onnx", &runner.workspace());
    let key = runner.workspace().join("release.key");
    let keygen = run(Command::new(bin("npugate")).arg("keygen").arg("--out").arg(&key));
    assert!(keygen.status.success(), "{}", describe(&keygen));
    let pem = std::fs::read_to_string(&key).unwrap();

    let action = runner.run(&[
        ("npugate-bin", &npugate_bin()),
        ("model", model.file_name().unwrap().to_str().unwrap()),
        ("shape", "x=1x3x32x32"),
        ("rules", &format!("{CALM_CV}\nnpu_flops_pct=99\n")),
        ("args", "--runs 20 --warmup 2 --profile-runs 2"),
        ("evidence-key", &pem),
    ]);
    assert_eq!((action.conclusion, action.exit_code), (Outcome::Success, 0), "{}", action.describe());
    assert!(
        !runner.workspace().join("PWNED").exists() && !repo().join("PWNED").exists(),
        "the model's name ran a command"
    );
    let report_dir = assert_uploaded_report(&action);
    // With npugate-bin, the machine keeps its own runtime cache: no actions/cache steps.
    let (skipped, success) = (Outcome::Skipped, Outcome::Success);
    assert_eq!(
        action.steps.iter().map(|s| s.outcome).collect::<Vec<_>>(),
        [skipped, success, skipped, success, success]
    );

    // Outputs, read from verdict.json, equal what is counted here from its raw numbers.
    let verdict = json(&report_dir.join("result/verdict.json"));
    assert_eq!((verdict["schema"].as_str(), verdict["outcome"].as_str()), (Some("npugate.verdict/1.1"), Some("pass")));
    assert_eq!((action.output("verdict"), action.output("exit_code")), ("pass", "0"));
    assert_numbers_match(&action, &verdict);
    assert_eq!(output_number(&action, "npu_flops_pct"), 100.0, "a CPU-EP run is all on its preferred EP");

    // The step summary is npugate's Markdown verdict; the annotations its notice; JUnit one case per rule.
    let markdown = std::fs::read_to_string(report_dir.join("report/verdict.md")).unwrap();
    assert!(action.summary.contains(markdown.trim()), "summary:\n{}", action.summary);
    assert!(action.annotations("error").is_empty(), "{:?}", action.annotations);
    let notices = action.annotations("notice");
    assert!(notices.iter().any(|n| n.message.contains("rules passed")), "{:?}", action.annotations);
    let (cases, failures, _) = junit_counts(&report_dir.join("junit/local.xml"));
    assert_eq!((cases, failures), (verdict["checks"].as_array().unwrap().len(), 0));

    // The signed evidence bundle is in the artifact and verifies with the public key.
    let verified = run(Command::new(bin("npugate"))
        .arg("verify")
        .arg(report_dir.join("evidence"))
        .arg("--pubkey")
        .arg(key.with_extension("key.pub")));
    assert!(verified.status.success(), "{}", describe(&verified));
    // install put npugate on the PATH of the steps after it.
    assert!(action.step("install").stdout.trim().ends_with("/npugate"), "{}", action.describe());
}

#[test]
fn the_action_fails_on_a_planted_fallback_and_annotates_the_fallen_node() {
    runtime_file(OPENVINO_RUNTIME, "libonnxruntime_providers_openvino.so");
    let runner = ActionRunner::new(&repo());
    // mixed.onnx's Det is an op OpenVINO does not take: ONNX Runtime quietly gives it to the CPU.
    let action = runner.run(&[
        ("npugate-bin", &npugate_bin()),
        ("model", &model("mixed.onnx").display().to_string()),
        ("ep", "openvino"),
        ("runtime", OPENVINO_RUNTIME),
        ("rules", &format!("{CALM_CV}\nmax_fallback_nodes=0")),
        ("args", "--ep-option device_type=CPU --runs 20 --warmup 2 --profile-runs 2"),
    ]);
    assert_eq!((action.conclusion, action.exit_code), (Outcome::Failure, 1), "{}", action.describe());
    assert_eq!((action.output("verdict"), action.output("exit_code")), ("fail", "1"));
    // The report is uploaded although the gate failed.
    let report_dir = assert_uploaded_report(&action);
    let verdict = json(&report_dir.join("result/verdict.json"));
    assert_numbers_match(&action, &verdict);
    let share = output_number(&action, "npu_flops_pct");
    assert!(share > 99.0 && share < 100.0, "Det and Mul cost a few FLOPs: {share}");

    let errors = action.annotations("error");
    let fallback = errors
        .iter()
        .find(|a| a.title.as_deref() == Some("npugate max_fallback_nodes"))
        .unwrap_or_else(|| panic!("{:?}", action.annotations));
    assert!(
        fallback.message.contains("Det node det") && fallback.message.contains("off OpenVINOExecutionProvider"),
        "{}",
        fallback.message
    );
    assert!(action.summary.contains("FAIL") && action.summary.contains("det"), "summary:\n{}", action.summary);
    let (_, failures, junit) = junit_counts(&report_dir.join("junit/local.xml"));
    assert_eq!(failures, 1, "{junit}");
    assert!(junit.contains("Det node det"), "{junit}");
}

#[test]
fn the_host_htp_on_a_runner_without_wine_or_apt_get_is_one_annotation_naming_the_fix() {
    // A runner whose PATH has the shell and the few tools the install step uses, but neither wine nor apt-get.
    let tools = tempfile::tempdir().unwrap();
    for tool in ["bash", "dirname", "id"] {
        let found = npugate_e2e::on_path(tool).unwrap_or_else(|| panic!("{tool} is not installed"));
        std::os::unix::fs::symlink(found, tools.path().join(tool)).unwrap();
    }
    let runner = ActionRunner::new(&repo()).env("PATH", &tools.path().display().to_string());
    let action = runner.run(&[
        ("npugate-bin", &npugate_bin()),
        ("model", &model("smallcnn_qdq.onnx").display().to_string()),
        ("ep", "qnn"),
        ("soc", "SM8650"),
    ]);
    assert_eq!((action.conclusion, action.exit_code), (Outcome::Failure, 2), "{}", action.describe());
    let errors = action.annotations("error");
    assert_eq!(errors.len(), 1, "{:?}", action.annotations);
    assert!(
        errors[0].message.contains("wine, which is not installed and this runner has no apt-get: install wine"),
        "{}",
        errors[0].message
    );
    assert_eq!(action.step("run").outcome, Outcome::Skipped, "nothing ran");
}

#[test]
fn bad_input_is_one_annotation_naming_the_input_and_exit_2() {
    let runner = ActionRunner::new(&repo());
    let missing = runner.run(&[("npugate-bin", &npugate_bin()), ("model", "models/nowhere.onnx")]);
    assert_eq!((missing.conclusion, missing.exit_code), (Outcome::Failure, 2), "{}", missing.describe());
    let errors = missing.annotations("error");
    assert_eq!(errors.len(), 1, "{:?}", missing.annotations);
    assert!(
        errors[0].message.contains("model (NPUGATE_MODEL) models/nowhere.onnx: no such file"),
        "{}",
        errors[0].message
    );
    assert!(missing.uploads.is_empty(), "nothing ran, nothing to upload");

    let both = runner.run(&[
        ("npugate-bin", &npugate_bin()),
        ("model", &model("smallcnn.onnx").display().to_string()),
        ("baseline-model", &model("smallcnn.onnx").display().to_string()),
        ("baseline", &model("smallcnn.onnx").display().to_string()),
    ]);
    assert_eq!(both.exit_code, 2, "{}", both.describe());
    assert!(both.annotations("error")[0].message.contains("give baseline"), "{:?}", both.annotations);

    // npugate's own refusal (--soc without the host HTP) is judged "error", in npugate's words.
    let refused = runner.run(&[
        ("npugate-bin", &npugate_bin()),
        ("model", &model("smallcnn.onnx").display().to_string()),
        ("soc", "SM8650"),
    ]);
    assert_eq!((refused.exit_code, refused.output("verdict")), (2, "error"), "{}", refused.describe());
    let error = &refused.annotations("error")[0].message;
    assert!(error.contains("--soc"), "npugate's reason reaches the annotation: {error}");
    assert!(refused.summary.contains("could not judge"), "{}", refused.summary);
}

#[test]
fn the_action_compares_against_the_base_branch_model_and_names_the_node_that_moved() {
    runtime_file(OPENVINO_RUNTIME, "libonnxruntime_providers_openvino.so");
    let runner = ActionRunner::new(&repo());
    // The base branch's model runs wholly on OpenVINO; the PR's adds a Det that falls back to the CPU.
    let action = runner.run(&[
        ("npugate-bin", &npugate_bin()),
        ("model", &model("mixed.onnx").display().to_string()),
        ("baseline-model", &model("smallcnn.onnx").display().to_string()),
        ("ep", "openvino"),
        ("runtime", OPENVINO_RUNTIME),
        ("rules", "max_slowdown_pct=100000"),
        ("args", "--ep-option device_type=CPU --rounds 2 --runs-per-round 5 --warmup 1 --profile-runs 1"),
    ]);
    assert_eq!(
        (action.conclusion, action.exit_code, action.output("verdict")),
        (Outcome::Failure, 1, "fail"),
        "{}",
        action.describe()
    );
    let report_dir = assert_uploaded_report(&action);
    let comparison = json(&report_dir.join("result/compare.json"));
    assert_eq!(comparison["schema"], "npugate.compare/1");
    let candidate = &comparison["candidate"];
    // The candidate's statistics are of its clean runs (compare.json counts the ones set aside).
    let median_ms = num(&candidate["latency"]["median_ns"]) / 1e6;
    assert!(
        (output_number(&action, "median_ms") - median_ms).abs() < 1e-4,
        "{} vs {median_ms}",
        action.output("median_ms")
    );
    assert!((output_number(&action, "npu_flops_pct") - preferred_share(&candidate["placement"])).abs() < 1e-4);
    let moved = action
        .annotations("error")
        .into_iter()
        .find(|a| a.title.as_deref() == Some("npugate placement_must_match"))
        .unwrap_or_else(|| panic!("{:?}", action.annotations));
    assert!(moved.message.contains("det"), "{}", moved.message);
    assert!(action.summary.contains("det"), "{}", action.summary);
}

#[test]
fn the_action_installs_npugate_from_its_checkout_with_the_host_htp() {
    // install: source — install builds the checkout (`cargo build --release --workspace --bins`, a no-op
    // after scripts/setup's identical build) and, for `ep: qnn` on this machine, the Windows harness.
    npugate_e2e::htp::windows_harness();
    let target_dir = bin("npugate").parent().unwrap().parent().unwrap().display().to_string();
    let runner = ActionRunner::new(&repo()).env("CARGO_TARGET_DIR", &target_dir);
    let action = runner.run(&[
        ("install", "source"),
        ("cache-runtimes", "false"), // this machine keeps its own cache
        ("model", &model("smallcnn_qdq.onnx").display().to_string()),
        ("ep", "qnn"),
        ("soc", "SM8650"),
        ("args", "--runs 1 --warmup 0 --profile-runs 1"),
    ]);
    assert_eq!(
        (action.conclusion, action.exit_code, action.output("verdict")),
        (Outcome::Success, 0, "pass"),
        "{}",
        action.describe()
    );
    let installed = action.step("install").outputs.get("npugate").cloned().unwrap_or_default();
    assert_eq!(PathBuf::from(&installed), bin("npugate"), "install built the checkout's npugate into CARGO_TARGET_DIR");
    let log = &action.step("install").stderr;
    assert!(
        log.contains("building npugate in") && log.contains("building the Windows harness"),
        "{}",
        action.describe()
    );
    // The QDQ model's graph-input Quantize / graph-output Dequantize are on the CPU by design: expected, not fallback.
    let verdict = json(&PathBuf::from(action.output("report_dir")).join("result/verdict.json"));
    assert!((output_number(&action, "npu_flops_pct") - preferred_share(&verdict["placement"])).abs() < 1e-4);
}

/// The pinned onnxruntime wheel `scripts/setup` downloaded, copied into a fresh runner's npugate cache:
/// what pip would download there (this test downloads nothing), so the runtime is fetched for real.
fn seed_host_runtime_wheel(cache: &Path) {
    let wheel = "onnxruntime-1.31.1-cp311-cp311-manylinux_2_28_x86_64.whl";
    let from = npugate_e2e::cache_dir().join("wheels").join(wheel);
    assert!(from.is_file(), "{} is missing: run scripts/setup (npugate runtime fetch {HOST_RUNTIME})", from.display());
    std::fs::create_dir_all(cache.join("wheels")).unwrap();
    std::fs::copy(&from, cache.join("wheels").join(wheel)).unwrap();
}

#[test]
fn the_action_installs_the_wheel_and_keeps_the_runtimes_between_jobs() {
    let work = tempfile::Builder::new().prefix("npugate-wheel-action-").tempdir().unwrap();
    let dist = work.path().join("dist");
    let (wheel, _) = npugate_e2e::install::package(&dist);
    let cls = npugate_e2e::sample("ppocr-cls").display().to_string();
    let inputs = |install: &str| {
        [
            ("install", install.to_string()),
            ("model", cls.clone()),
            ("shape", "x=1x3x48x192".into()),
            ("rules", CALM_CV.into()),
            ("args", "--runs 20 --warmup 2 --profile-runs 1".into()),
        ]
    };
    let run_job = |runner: &ActionRunner, install: &str| {
        let _ = std::fs::remove_dir_all(runner.temp().join("npugate-venv")); // each job on a fresh runner
        let inputs = inputs(install);
        let action = runner.run(&inputs.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>());
        assert_eq!(
            (action.conclusion, action.exit_code, action.output("verdict")),
            (Outcome::Success, 0, "pass"),
            "{}",
            action.describe()
        );
        action
    };

    // Job 1, on a runner with nothing of npugate: the wheel, pip-installed; the runtime fetched, then saved.
    // (Each job's runner has its npugate cache at the same path, as each hosted runner has its HOME.)
    let cache = work.path().join("runner-cache");
    let runner = ActionRunner::new(&repo()).env("NPUGATE_CACHE", &cache.display().to_string());
    seed_host_runtime_wheel(&cache);
    let first = run_job(&runner, &wheel.display().to_string());
    let installed = first.step("install").outputs.get("npugate").cloned().unwrap_or_default();
    assert_eq!(PathBuf::from(&installed), runner.temp().join("npugate-venv/bin/npugate"), "{}", first.describe());
    let log = &first.step("install").stderr;
    for harness in ["x86_64-unknown-linux-gnu/npugate-harness", "x86_64-pc-windows-gnu/npugate-harness.exe"] {
        let path = runner.temp().join("npugate-venv/lib/npugate").join(harness);
        assert!(log.contains(&path.display().to_string()), "install names the wheel's {harness}: {log}");
    }
    assert!(log.contains(&format!("{HOST_RUNTIME}: fetched")), "{log}");
    assert_eq!(first.step("runtimes").outputs.get("cache-hit"), None, "nothing to restore yet");
    assert!(first.step("Save npugate's runtimes").stdout.contains("Cache saved with key"), "{}", first.describe());

    // Job 2, on another fresh runner: npugate by version from a package index (here the wheel's folder),
    // the runtimes restored from the cache — nothing fetched, nothing saved again.
    std::fs::remove_dir_all(&cache).unwrap();
    let mut runner = runner;
    runner.set_env("PIP_FIND_LINKS", &dist.display().to_string());
    runner.set_env("PIP_NO_INDEX", "1");
    let second = run_job(&runner, env!("CARGO_PKG_VERSION"));
    assert_eq!(second.step("runtimes").outputs.get("cache-hit").map(String::as_str), Some("true"));
    assert_eq!(second.step("Save npugate's runtimes").outcome, Outcome::Skipped);
    let log = &second.step("install").stderr;
    let fetched = format!("{HOST_RUNTIME}: fetched");
    assert!(log.contains(&format!("npugate=={}", env!("CARGO_PKG_VERSION"))) && !log.contains(&fetched), "{log}");
    assert!(cache.join("runtimes").join(HOST_RUNTIME).join("runtime.json").is_file());
}

#[test]
fn the_action_gates_devices_on_the_rig_and_through_a_remote_adb_server() {
    runtime_file(OPENVINO_RUNTIME, "libonnxruntime_providers_openvino.so");
    let rig = Rig::up(&[6431, 6432, 6433]);
    // 6433 moves to a second adb server (port 5038): the phones of another host.
    let adb = |args: &[&str]| run(rig.command("adb").args(args));
    assert!(adb(&["disconnect", &Rig::serial(6433)]).status.success());
    let moved = adb(&["-P", "5038", "connect", &Rig::serial(6433)]);
    assert!(String::from_utf8_lossy(&moved.stdout).contains("connected"), "{}", describe(&moved));
    let launcher = |program: &Path| rig.command(program);
    let runner = ActionRunner::new(&repo());

    // Every device of the local server, each with the planted fallback.
    let rack = runner.run_with(
        &[
            ("npugate-bin", &npugate_bin()),
            ("model", &model("mixed.onnx").display().to_string()),
            ("device", "all"),
            ("ep", "openvino"),
            ("runtime", OPENVINO_RUNTIME),
            ("rules", &format!("{CALM_CV}\nmax_fallback_nodes=0")),
            ("args", "--ep-option device_type=CPU --runs 20 --warmup 2 --profile-runs 2"),
            ("artifact-name", "npugate-rack"),
        ],
        &launcher,
    );
    assert_eq!(
        (rack.conclusion, rack.exit_code, rack.output("verdict")),
        (Outcome::Failure, 1, "fail"),
        "{}",
        rack.describe()
    );
    let report_dir = assert_uploaded_report(&rack);
    let rack_json = json(&report_dir.join("result/rack.json"));
    let serials: Vec<&str> =
        rack_json["devices"].as_array().unwrap().iter().map(|d| d["serial"].as_str().unwrap()).collect();
    assert_eq!(serials, [Rig::serial(6431), Rig::serial(6432)], "only the local server's devices");
    let fallbacks: Vec<_> =
        rack.annotations("error").into_iter().filter(|a| a.message.contains("Det node det")).collect();
    assert_eq!(fallbacks.len(), 2, "one annotation per device: {:?}", rack.annotations);
    for serial in &serials {
        assert!(rack.summary.contains(&format!("### {serial}")), "a section per device:\n{}", rack.summary);
        assert!(report_dir.join(format!("junit/{}.xml", serial.replace(':', "_"))).is_file());
    }
    let lowest = serials
        .iter()
        .map(|s| {
            preferred_share(
                &json(&report_dir.join(format!("result/{}/verdict.json", s.replace(':', "_"))))["placement"],
            )
        })
        .fold(f64::INFINITY, f64::min);
    assert!((output_number(&rack, "npu_flops_pct") - lowest).abs() < 1e-4, "the lowest share over the devices");

    // The phone of the other host, through its adb server, passing.
    let remote = runner.run_with(
        &[
            ("npugate-bin", &npugate_bin()),
            ("model", &model("smallcnn.onnx").display().to_string()),
            ("device", &Rig::serial(6433)),
            ("adb-server", "127.0.0.1:5038"),
            ("runtime", HOST_RUNTIME),
            ("rules", CALM_CV),
            ("artifact-name", "npugate-remote"),
        ],
        &launcher,
    );
    assert_eq!(
        (remote.conclusion, remote.exit_code, remote.output("verdict")),
        (Outcome::Success, 0, "pass"),
        "{}",
        remote.describe()
    );
    let report_dir = assert_uploaded_report(&remote);
    let verdict = json(&report_dir.join(format!("result/{}/verdict.json", Rig::serial(6433).replace(':', "_"))));
    assert_numbers_match(&remote, &verdict);
    assert!(
        remote.annotations("notice").iter().any(|n| n.message.contains("rules passed")),
        "{:?}",
        remote.annotations
    );
}

#[test]
fn a_nightly_sweep_spreads_over_two_adb_servers_as_two_matrix_jobs() {
    let rig = Rig::up(&[6441, 6442, 6443]);
    let adb = |args: &[&str]| run(rig.command("adb").args(args));
    assert!(adb(&["disconnect", &Rig::serial(6443)]).status.success());
    assert!(String::from_utf8_lossy(&adb(&["-P", "5038", "connect", &Rig::serial(6443)]).stdout).contains("connected"));
    let launcher = |program: &Path| rig.command(program);
    let runner = ActionRunner::new(&repo());
    let plan = npugate_e2e::sweeps::write_plan(&runner.workspace(), &[], &["smallcnn"]);

    // One job per rack, as a matrix over adb servers: each sweeps the devices its server sees, with its own history.
    let mut swept = Vec::new();
    for (shard, server) in [("rack-a", "127.0.0.1:5037"), ("rack-b", "127.0.0.1:5038")] {
        let history = runner.workspace().join(format!("history-{shard}.sqlite"));
        let job = runner.run_with(
            &[
                ("npugate-bin", &npugate_bin()),
                ("plan", &plan.display().to_string()),
                ("device", "all"),
                ("adb-server", server),
                ("args", &format!("--history {} --night 2026-11-23", history.display())),
                ("artifact-name", &format!("npugate-{shard}")),
            ],
            &launcher,
        );
        assert_eq!(
            (job.conclusion, job.exit_code, job.output("verdict")),
            (Outcome::Success, 0, "pass"),
            "{}",
            job.describe()
        );
        let report_dir = PathBuf::from(job.output("report_dir"));
        let sweep = json(&report_dir.join("result/sweep.json"));
        assert_eq!(sweep["schema"], "npugate.sweep/1");
        let matrix = std::fs::read_to_string(report_dir.join("result/matrix.md")).unwrap();
        assert!(job.summary.contains(matrix.trim()), "the summary is the matrix report:\n{}", job.summary);
        assert!(history.is_file(), "the shard's own history");
        let medians: Vec<f64> =
            sweep["cells"].as_array().unwrap().iter().map(|c| num(&c["record"]["median_ns"]) / 1e6).collect();
        let highest = medians.iter().copied().fold(f64::MIN, f64::max);
        assert!((output_number(&job, "median_ms") - highest).abs() < 1e-4, "{} vs {highest}", job.output("median_ms"));
        assert_eq!(job.uploads[0].paths, [report_dir]);
        swept.push(
            sweep["devices"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["serial"].as_str().unwrap().to_string())
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(
        swept,
        [vec![Rig::serial(6441), Rig::serial(6442)], vec![Rig::serial(6443)]],
        "each phone in exactly one shard"
    );
}

#[test]
fn a_nightly_sweep_in_three_shard_jobs_is_merged_into_one_sweep_by_a_fourth() {
    let ports = [6451, 6452, 6453];
    let rig = Rig::up(&ports);
    let launcher = |program: &Path| rig.command(program);
    let runner = ActionRunner::new(&repo());
    let plan = npugate_e2e::sweeps::write_plan(&runner.workspace(), &ports.map(Rig::serial), &["smallcnn"]);
    // Where actions/download-artifact (pattern nightly-shard-*, merge-multiple) unpacks the shard jobs' artifacts.
    let downloaded = runner.workspace().join("shards");
    for shard in 1..=3 {
        let history = runner.workspace().join(format!("shard-{shard}.sqlite"));
        let job = runner.run_with(
            &[
                ("npugate-bin", &npugate_bin()),
                ("plan", &plan.display().to_string()),
                ("shard", &format!("{shard}/3")),
                ("args", &format!("--history {} --night 2026-11-23", history.display())),
                ("artifact-name", &format!("nightly-shard-{shard}")),
            ],
            &launcher,
        );
        assert_eq!(
            (job.conclusion, job.exit_code, job.output("verdict")),
            (Outcome::Success, 0, "pass"),
            "{}",
            job.describe()
        );
        let report_dir = PathBuf::from(job.output("report_dir"));
        let result = report_dir.join(format!("shard-{shard}-of-3"));
        let sweep = json(&result.join("sweep.json"));
        assert_eq!(sweep["shard"]["shard"]["index"], shard);
        assert_eq!(
            sweep["devices"][0]["serial"],
            Rig::serial(ports[shard as usize - 1]),
            "shard {shard} takes the plan's device {shard}"
        );
        assert!(
            job.summary.contains(std::fs::read_to_string(result.join("matrix.md")).unwrap().trim()),
            "{}",
            job.summary
        );
        let upload = &job.uploads[0];
        assert!(upload.files.contains(&result.join("sweep.json")), "{:?}", upload.files);
        for file in &upload.files {
            let target = downloaded.join(file.strip_prefix(&report_dir).unwrap());
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::copy(file, target).unwrap();
        }
    }

    let merge = |shards: &str, name: &str| {
        let history = runner.workspace().join(format!("{name}.sqlite"));
        let inputs = [
            ("npugate-bin", npugate_bin()),
            ("merge", shards.to_string()),
            ("args", format!("--history {}", history.display())),
            ("artifact-name", name.to_string()),
        ];
        runner.run_with(&inputs.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>(), &launcher)
    };
    let merged = merge("shards/shard-*", "nightly");
    assert_eq!(
        (merged.conclusion, merged.exit_code, merged.output("verdict")),
        (Outcome::Success, 0, "pass"),
        "{}",
        merged.describe()
    );
    let report_dir = PathBuf::from(merged.output("report_dir"));
    let sweep = json(&report_dir.join("result/sweep.json"));
    assert_eq!(sweep["merged"]["shards"].as_array().unwrap().len(), 3);
    let cells = sweep["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 6, "3 devices × 2 runtimes");
    let highest = cells.iter().map(|c| num(&c["record"]["median_ns"]) / 1e6).fold(f64::MIN, f64::max);
    assert!(
        (output_number(&merged, "median_ms") - highest).abs() < 1e-4,
        "{} vs {highest}",
        merged.output("median_ms")
    );
    let matrix = std::fs::read_to_string(report_dir.join("result/matrix.md")).unwrap();
    assert!(matrix.contains("3 device(s) × 2 runtime(s) × 1 model(s): **6 passed"), "{matrix}");
    assert!(merged.summary.contains(matrix.trim()), "the summary is the merged matrix report:\n{}", merged.summary);
    assert!(merged.uploads[0].files.contains(&report_dir.join("result/sweep.json")));

    // The job of shard 2 failed to deliver: its cells are named, the check fails as not judged.
    let partial = merge("shards/shard-1-of-3 shards/shard-3-of-3", "nightly-partial");
    assert_eq!(
        (partial.conclusion, partial.exit_code, partial.output("verdict")),
        (Outcome::Failure, 2, "error"),
        "{}",
        partial.describe()
    );
    let absent: Vec<&str> =
        partial.annotations("error").iter().map(|a| a.message.as_str()).filter(|m| m.contains("absent")).collect();
    assert_eq!(absent.len(), 2, "{:?}", partial.annotations);
    assert!(
        absent.iter().all(|m| m.starts_with("smallcnn on 127.0.0.1_6452 with ort-")
            && m.ends_with(": absent: shard 2/3 was not merged")),
        "{absent:?}"
    );
    assert!(partial.summary.contains("## Absent cells"), "{}", partial.summary);
    let nothing = merge("shards/shard-9-of-*", "nightly-nothing");
    assert_eq!((nothing.conclusion, nothing.exit_code), (Outcome::Failure, 2), "{}", nothing.describe());
    assert!(
        nothing
            .annotations("error")
            .iter()
            .any(|a| a.message.contains("merge (NPUGATE_MERGE) shards/shard-9-of-* matches no shard result")),
        "{:?}",
        nothing.annotations
    );
}

#[test]
fn the_action_judges_placement_on_a_snapdragon_without_a_device() {
    npugate_e2e::htp::windows_harness();
    let runner = ActionRunner::new(&repo());
    // htp_reject.onnx: an int32 MatMul the QNN EP's builder takes and the HTP backend refuses.
    let action = runner.run(&[
        ("npugate-bin", &npugate_bin()),
        ("model", &model("htp_reject.onnx").display().to_string()),
        ("ep", "qnn"),
        ("soc", "SM8650"),
        ("rules", "max_fallback_nodes=0"),
        ("args", "--runs 1 --warmup 0 --profile-runs 1"),
    ]);
    assert_eq!(
        (action.conclusion, action.exit_code, action.output("verdict")),
        (Outcome::Failure, 1, "fail"),
        "{}",
        action.describe()
    );
    let report_dir = assert_uploaded_report(&action);
    let verdict = json(&report_dir.join("result/verdict.json"));
    assert!((output_number(&action, "npu_flops_pct") - preferred_share(&verdict["placement"])).abs() < 1e-4);
    let named = action.annotations("error").into_iter().any(|a| a.message.contains("matmul_int32"));
    assert!(named, "the node the HTP refused is named: {:?}", action.annotations);
    // The emulator's speed says nothing about a phone: the latency rules are not applicable, and say so.
    assert!(
        action.annotations("notice").iter().any(|n| n.title.as_deref().is_some_and(|t| t.contains("not applicable"))),
        "{:?}",
        action.annotations
    );
}

/// A GitLab project with the documented `.gitlab-ci.yml`, the npugate project it includes mapped to `npugate_dir`.
fn gitlab_project(npugate_dir: &Path) -> (tempfile::TempDir, Pipeline) {
    let project = tempfile::Builder::new().prefix("npugate-gitlab-").tempdir().unwrap();
    std::fs::create_dir_all(project.path().join("models")).unwrap();
    let ci_file = project.path().join(".gitlab-ci.yml");
    std::fs::copy(repo().join("ci/gitlab/example.gitlab-ci.yml"), &ci_file).unwrap();
    let pipeline = Pipeline::load(project.path(), &ci_file, &[("tools/npugate", npugate_dir)]);
    (project, pipeline)
}

fn junit_of(run: &JobRun) -> (usize, usize, String) {
    assert_eq!(run.junit.len(), 1, "{}", run.describe());
    junit_counts(&run.junit[0])
}

#[test]
fn the_gitlab_template_passes_a_real_model_in_a_merge_request_job() {
    let (project, pipeline) = gitlab_project(&repo());
    let cls = npugate_e2e::sample("ppocr-cls");
    std::fs::copy(&cls, project.path().join("models/cls.onnx")).unwrap();
    let job = pipeline.job("npugate");
    assert_eq!(job.variables["NPUGATE_RULES"], "cv_pct=15\nnpu_flops_pct=98\n", "the documented job's rules");
    let launcher = |program: &Path| Command::new(program);
    let run = pipeline.run(
        &job,
        &[],
        &[
            ("NPUGATE_SOURCE", &repo().display().to_string()),
            ("NPUGATE_BIN", &npugate_bin()),
            ("NPUGATE_CACHE", &npugate_e2e::cache_dir().display().to_string()), // a runner keeping its own cache
            ("NPUGATE_MODEL", "models/cls.onnx"),
            ("NPUGATE_SHAPE", "x=1x3x48x192"),
            ("NPUGATE_RULES", &format!("{CALM_CV}\nnpu_flops_pct=98")),
        ],
        &launcher,
    );
    assert_eq!(run.exit_code, 0, "{}", run.describe());
    assert!(run.warnings.is_empty(), "{}", run.describe());
    let report_dir = project.path().join("npugate-report");
    let verdict = json(&report_dir.join("result/verdict.json"));
    assert_eq!(run.dotenv["NPUGATE_VERDICT"], "pass");
    assert_eq!(run.dotenv["NPUGATE_EXIT_CODE"], "0");
    let (median_ms, _) = median_and_cv_ms(&verdict);
    assert!((run.dotenv["NPUGATE_MEDIAN_MS"].parse::<f64>().unwrap() - median_ms).abs() < 1e-4);
    assert_eq!(run.dotenv["NPUGATE_NPU_FLOPS_PCT"], "100.0", "a CPU-EP run is all on its preferred EP");
    let (cases, failures, _) = junit_of(&run);
    assert_eq!((cases, failures), (verdict["checks"].as_array().unwrap().len(), 0));
    let markdown = std::fs::read_to_string(report_dir.join("report/verdict.md")).unwrap();
    assert!(run.log.contains(markdown.trim()), "the Markdown summary is in the job log");
    for file in ["summary.md", "result/report.html", "outputs.env"] {
        assert!(run.artifacts.contains(&report_dir.join(file)), "{file} not in the artifact: {:?}", run.artifacts);
    }
}

#[test]
fn the_gitlab_template_cloned_from_its_repository_fails_a_planted_fallback() {
    runtime_file(OPENVINO_RUNTIME, "libonnxruntime_providers_openvino.so");
    // npugate's repository as the runner would clone it: the template and scripts of this checkout, tagged v1.
    let origin = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let out = run(Command::new("git")
            .arg("-C")
            .arg(origin.path())
            .args(["-c", "user.name=ci", "-c", "user.email=ci@localhost"])
            .args(args));
        assert!(out.status.success(), "git {args:?}: {}", describe(&out));
    };
    git(&["init", "--quiet"]);
    for file in ["ci/npugate-ci", "ci/publish.py", "ci/gitlab/npugate.gitlab-ci.yml"] {
        let to = origin.path().join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(repo().join(file), &to).unwrap();
    }
    git(&["add", "."]);
    git(&["commit", "--quiet", "-m", "npugate"]);
    git(&["tag", "v1"]);

    let (project, pipeline) = gitlab_project(origin.path());
    std::fs::copy(model("mixed.onnx"), project.path().join("models/det.onnx")).unwrap();
    let job = pipeline.job("npugate");
    assert_eq!(job.variables["NPUGATE_REF"], "v1");
    let launcher = |program: &Path| Command::new(program);
    let run = pipeline.run(
        &job,
        &[],
        &[
            ("NPUGATE_REPOSITORY", &origin.path().display().to_string()),
            ("NPUGATE_BIN", &npugate_bin()),
            ("NPUGATE_CACHE", &npugate_e2e::cache_dir().display().to_string()),
            ("NPUGATE_SHAPE", ""),
            ("NPUGATE_EP", "openvino"),
            ("NPUGATE_RUNTIME", OPENVINO_RUNTIME),
            ("NPUGATE_RULES", &format!("{CALM_CV}\nmax_fallback_nodes=0")),
            ("NPUGATE_ARGS", "--ep-option device_type=CPU --runs 20 --warmup 2 --profile-runs 2"),
        ],
        &launcher,
    );
    assert_eq!(run.exit_code, 1, "{}", run.describe());
    assert!(project.path().join(".npugate-source/ci/npugate-ci").is_file(), "the job cloned npugate");
    assert_eq!((run.dotenv["NPUGATE_VERDICT"].as_str(), run.dotenv["NPUGATE_EXIT_CODE"].as_str()), ("fail", "1"));
    let (_, failures, junit) = junit_of(&run);
    assert_eq!(failures, 1, "{junit}");
    assert!(junit.contains("Det node det"), "the JUnit failure names the node: {junit}");
    assert!(run.log.contains("Det node det"), "the log names it too");
    assert!(
        run.artifacts.iter().any(|f| f.ends_with("report.html")),
        "artifacts are kept when the job fails: {:?}",
        run.artifacts
    );
}

#[test]
fn the_gitlab_template_installs_the_wheel_and_caches_the_runtimes_between_jobs() {
    let (project, pipeline) = gitlab_project(&repo());
    let (wheel, _) = npugate_e2e::install::package(&project.path().join("dist"));
    std::fs::copy(npugate_e2e::sample("ppocr-cls"), project.path().join("models/cls.onnx")).unwrap();
    let job = pipeline.job("npugate");
    let wheel = format!("dist/{}", wheel.file_name().unwrap().to_string_lossy());
    let run_job = || {
        let variables = [
            ("NPUGATE_SOURCE", repo().display().to_string()),
            ("NPUGATE_INSTALL", wheel.clone()),
            ("NPUGATE_CACHE", String::new()), // a runner without a cache of its own
            ("NPUGATE_MODEL", "models/cls.onnx".into()),
            ("NPUGATE_SHAPE", "x=1x3x48x192".into()),
            ("NPUGATE_RULES", CALM_CV.into()),
            ("NPUGATE_ARGS", "--runs 20 --warmup 2 --profile-runs 1".into()),
        ];
        let variables: Vec<(&str, &str)> = variables.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let run = pipeline.run(&job, &[], &variables, &|program: &Path| Command::new(program));
        assert_eq!(
            (run.exit_code, run.dotenv.get("NPUGATE_VERDICT").map(String::as_str)),
            (0, Some("pass")),
            "{}",
            run.describe()
        );
        run
    };
    // The first job fetches the runtime (from the pinned wheel, seeded where pip would put it) into
    // the project's npugate cache, and GitLab's cache keeps it.
    let cache = project.path().join(".npugate-cache");
    seed_host_runtime_wheel(&cache);
    let first = run_job();
    assert!(first.log.contains(&format!("{HOST_RUNTIME}: fetched")), "{}", first.describe());
    let harness = project.path().join(".npugate-venv/lib/npugate/x86_64-pc-windows-gnu/npugate-harness.exe");
    assert!(first.log.contains(&harness.display().to_string()), "npugate --version names the wheel's harnesses");
    // The next job starts from a clean checkout (the runner removes untracked files): the runtime comes
    // back from GitLab's cache, nothing is fetched.
    std::fs::remove_dir_all(&cache).unwrap();
    std::fs::remove_dir_all(project.path().join(".npugate-venv")).unwrap();
    let second = run_job();
    assert!(
        second.log.contains("Successfully extracted cache")
            && !second.log.contains(&format!("{HOST_RUNTIME}: fetched")),
        "{}",
        second.describe()
    );
    assert!(cache.join("runtimes").join(HOST_RUNTIME).join("runtime.json").is_file());
}

#[test]
fn the_simulated_runner_behaves_as_github_does() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("action.yml"),
        r#"name: probe
description: what the simulated runner must do as GitHub does
inputs:
  who: { description: d, required: true }
  mode: { description: d, default: Fast }
outputs:
  greeting: { description: d, value: "${{ steps.first.outputs.greeting }}" }
  block: { description: d, value: "${{ steps.first.outputs.block }}" }
runs:
  using: composite
  steps:
    - id: first
      shell: bash
      env: { WHO: "${{ inputs.who }}" }
      run: |
        echo "input variable: ${INPUT_WHO:-none}"
        echo "greeting=hello $WHO" >> "$GITHUB_OUTPUT"
        printf 'block<<END\nline 1\nline 2\nEND\n' >> "$GITHUB_OUTPUT"
        echo "CARRIED=from the first step" >> "$GITHUB_ENV"
        mkdir -p "$RUNNER_TEMP/bin" && printf '#!/bin/sh\necho tool ran\n' > "$RUNNER_TEMP/bin/probe-tool" && chmod +x "$RUNNER_TEMP/bin/probe-tool"
        echo "$RUNNER_TEMP/bin" >> "$GITHUB_PATH"
        echo "::warning title=a%3Ab::50%25 done"
        echo "probe summary" >> "$GITHUB_STEP_SUMMARY"
    - id: second
      if: inputs.mode == 'FAST'
      shell: bash
      run: |
        echo "$CARRIED"
        probe-tool
        false | true
        echo "pipefail did not stop the step"
    - id: skipped
      shell: bash
      run: echo never
    - id: cleanup
      if: ${{ failure() }}
      shell: bash
      run: echo "cleanup after ${{ steps.second.outcome }}"
"#,
    )
    .unwrap();
    let run = ActionRunner::new(dir.path()).run(&[("who", "World")]);
    let step = |id: &str| run.steps.iter().find(|s| s.label == id).unwrap();
    // No INPUT_* for a composite action's steps (actions/runner#665): inputs come through expressions only.
    assert!(step("first").stdout.contains("input variable: none"), "{}", run.describe());
    assert_eq!((run.output("greeting"), run.output("block")), ("hello World", "line 1\nline 2"));
    // `==` ignores case; GITHUB_ENV and GITHUB_PATH reach the next step; pipefail fails it.
    let second = step("second");
    assert_eq!((second.outcome, second.exit_code), (Outcome::Failure, Some(1)), "{}", run.describe());
    assert!(second.stdout.contains("from the first step") && second.stdout.contains("tool ran"), "{}", run.describe());
    assert!(!second.stdout.contains("pipefail did not stop"), "{}", run.describe());
    assert_eq!(step("skipped").outcome, Outcome::Skipped, "a failed step skips the next unless it asks");
    assert_eq!(step("cleanup").stdout.trim(), "cleanup after failure");
    assert_eq!((run.conclusion, run.exit_code), (Outcome::Failure, 1));
    assert_eq!((run.annotations[0].title.as_deref(), run.annotations[0].message.as_str()), (Some("a:b"), "50% done"));
    assert_eq!(run.summary, "probe summary\n");
}

#[test]
fn the_simulated_pipeline_resolves_and_runs_a_job_as_gitlab_does() {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join("base.yml"),
        ".base:\n  variables: { BASE: from-base, OVER: base }\n  before_script: [echo before]\n  artifacts:\n    when: always\n    paths: [out/]\n    reports: { junit: \"out/*.xml\", dotenv: out/vars.env }\n",
    )
    .unwrap();
    let ci_file = project.path().join(".gitlab-ci.yml");
    std::fs::write(
        &ci_file,
        r#"include:
  - local: base.yml
variables: { GLOBAL: g, OVER: global }
job:
  extends: .base
  variables: { OVER: job, REF: "${GLOBAL}-$OVER" }
  parallel: { matrix: [{ AXIS: [a, b] }] }
  script:
    - echo "over=$OVER ref=$REF axis=$AXIS pipeline=$FROM_PIPELINE base=$BASE"
    - mkdir -p out && echo "KEY=v" > out/vars.env && echo '<testsuite/>' > out/r.xml
    - false | true
    - echo "pipefail did not stop the job"
  after_script: [echo after]
"#,
    )
    .unwrap();
    let pipeline = Pipeline::load(project.path(), &ci_file, &[]);
    let job = pipeline.job("job");
    let run = pipeline.run(&job, &[("AXIS", "b")], &[("FROM_PIPELINE", "p")], &|program: &Path| Command::new(program));
    assert!(run.log.contains("over=job ref=g-job axis=b pipeline=p base=from-base"), "{}", run.describe());
    assert!(
        run.log.contains("before") && run.log.contains("after") && !run.log.contains("pipefail did not stop"),
        "{}",
        run.describe()
    );
    assert_eq!(run.exit_code, 1, "{}", run.describe());
    assert_eq!(
        (run.junit.len(), run.dotenv.get("KEY").map(String::as_str)),
        (1, Some("v")),
        "artifacts: when always keeps them"
    );
    assert!(run.artifacts.contains(&project.path().join("out/vars.env")));
}

#[test]
fn the_action_runs_on_aihub_devices_with_a_token_secret_against_the_standin() {
    let dir = tempfile::tempdir().unwrap();
    let standin = StandIn::start(dir.path(), &npugate_e2e::aihub::scenario());
    let runner = ActionRunner::new(&repo()).env("NPUGATE_CACHE", &standin.cache.display().to_string());
    std::fs::copy(model("fallback_det.onnx"), runner.workspace().join("det.onnx")).unwrap();
    let inputs = |token: &str| -> Vec<(&'static str, String)> {
        vec![
            ("npugate-bin", npugate_bin()),
            ("model", "det.onnx".into()),
            ("aihub", "S24\nSamsung Galaxy S25 (Family)\n".into()),
            ("aihub-token", token.into()),
            ("aihub-api-url", standin.url.clone()),
            ("args", "--runs 40".into()),
        ]
    };
    let given = inputs(aihub::TOKEN);
    let action = runner.run(&given.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>());
    assert_eq!((action.conclusion, action.exit_code), (Outcome::Failure, 1), "{}", action.describe());
    assert_eq!(action.output("verdict"), "fail", "the S24's CPU fallback fails");
    let report_dir = assert_uploaded_report(&action);
    for device in ["samsung-galaxy-s24-family", "samsung-galaxy-s25-family"] {
        let result = json(&report_dir.join("result").join(device).join("result.json"));
        assert_eq!(result["aihub"]["api_url"], standin.url.as_str(), "{device}");
        let job = result["aihub"]["job"]["id"].as_str().unwrap();
        assert!(standin.recorded("jobs.jsonl").iter().any(|j| j["id"] == job), "{device}: {job}");
    }
    assert!(
        standin.recorded("requests.jsonl").len() > 4,
        "npugate reached the stand-in with the token the Action wrote"
    );
    let everything = format!("{}{:?}", action.describe(), action.annotations);
    assert!(!everything.contains(aihub::TOKEN), "the token was printed: {everything}");
    let leftovers: Vec<_> = std::fs::read_dir(runner.temp()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(
        leftovers.iter().all(|name| !name.to_string_lossy().starts_with("npugate-aihub.")),
        "the client's file is removed: {leftovers:?}"
    );

    let no_token = inputs("");
    let refused = runner.env("HOME", &dir.path().display().to_string());
    let action = refused.run(&no_token.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>());
    assert_eq!(action.exit_code, 2, "{}", action.describe());
    assert!(
        action.annotations("error").iter().any(|a| a.message.contains("aihub-token (NPUGATE_AIHUB_TOKEN) is empty")),
        "{}",
        action.describe()
    );
}

#[test]
fn the_gitlab_template_runs_on_an_aihub_device_with_a_masked_token_variable() {
    let dir = tempfile::tempdir().unwrap();
    let standin = StandIn::start(dir.path(), &npugate_e2e::aihub::scenario());
    let (project, pipeline) = gitlab_project(&repo());
    std::fs::copy(model("fallback_det.onnx"), project.path().join("models/det.onnx")).unwrap();
    let job = pipeline.job("npugate");
    let launcher = |program: &Path| Command::new(program);
    let run = pipeline.run(
        &job,
        &[],
        &[
            ("NPUGATE_SOURCE", &repo().display().to_string()),
            ("NPUGATE_BIN", &npugate_bin()),
            ("NPUGATE_CACHE", &standin.cache.display().to_string()),
            ("NPUGATE_MODEL", "models/det.onnx"),
            ("NPUGATE_SHAPE", ""),
            ("NPUGATE_RULES", ""),
            ("NPUGATE_AIHUB", "Samsung Galaxy S25 (Family)"),
            ("NPUGATE_AIHUB_TOKEN", aihub::TOKEN),
            ("NPUGATE_AIHUB_API_URL", &standin.url),
            ("NPUGATE_ARGS", "--runs 40"),
        ],
        &launcher,
    );
    assert_eq!(run.exit_code, 0, "{}", run.describe());
    assert_eq!(run.dotenv["NPUGATE_VERDICT"], "pass");
    let result = json(&project.path().join("npugate-report/result/samsung-galaxy-s25-family/result.json"));
    assert_eq!(result["aihub"]["api_url"], standin.url.as_str());
    assert!(!run.log.contains(aihub::TOKEN), "the token was printed: {}", run.log);
}
