//! A Windows x64 harness on this Linux machine, under wine: what runs Qualcomm's x86_64 host build
//! of the QNN HTP backend (`QnnHtp.dll`) with the Windows x64 ONNX Runtime — per-SoC op validation,
//! graph compile, context binaries and the HTP emulator, without a device.
//!
//! Wine runs in npugate's own prefix inside the cache (`<cache>/wine/prefix`), never the user's:
//! it is created once (`wineboot -i`, about 10 s), checked before every run and rebuilt when it is
//! broken. Runs hold a shared lock on it and creation or repair an exclusive one, so any number of
//! concurrent runs (one per SoC of a preflight, several npugate processes) share it safely.
//!
//! A [`WineTarget::for_soc`] target is the host HTP configured as one Snapdragon: every QNN run on it
//! gets that SoC's QNN `soc_model`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use npugate_result::{contract, files};
use npugate_settings::{EpKind, HarnessSettings};

use super::host::LocalLaunch;
use super::{Execution, Job, Progress, Target};
use npugate_host::process::Stopped;
use npugate_result::hexagon::Soc;

/// The triple of the harness and runtimes wine runs.
pub const TRIPLE: &str = "x86_64-pc-windows-gnu";
/// The DLL the Windows harness needs next to it under Wine 8.0 (built by scripts/build-windows).
pub const PRNG_SHIM: &str = "bcryptprimitives.dll";
/// The line that says how to get wine and the Windows harness.
pub const SETUP_HINT: &str = "run scripts/setup (or scripts/build-windows), which installs wine64, wine and mingw-w64 and builds the Windows harness";
/// Written into the prefix once `wineboot` finished: a prefix without it is incomplete.
const READY_MARKER: &str = ".npugate-ready";
/// The longest prefix creation may take.
const WINEBOOT_LIMIT: Duration = Duration::from_secs(300);

/// A Windows x64 harness under wine, optionally configured as one Snapdragon's HTP.
#[derive(Debug, Clone)]
pub struct WineTarget {
    name: String,
    soc: Option<Soc>,
    prefix: WinePrefix,
}

impl WineTarget {
    /// Wine in npugate's own prefix; QNN runs use the SoC their settings give.
    pub fn new() -> WineTarget {
        WineTarget { name: "wine-x86_64".into(), soc: None, prefix: WinePrefix::default_location() }
    }

    /// The host HTP as `soc`: every QNN run gets the SoC's QNN `soc_model`; named after the SoC.
    pub fn for_soc(soc: Soc) -> WineTarget {
        WineTarget { name: soc.model.to_string(), soc: Some(soc), ..WineTarget::new() }
    }

    /// The same target under another name (in messages and result directories).
    pub fn named(self, name: &str) -> WineTarget {
        WineTarget { name: name.into(), ..self }
    }

    /// The same target in another prefix (tests).
    pub fn with_prefix(self, prefix: WinePrefix) -> WineTarget {
        WineTarget { prefix, ..self }
    }

    /// The SoC this target is configured as.
    pub fn soc(&self) -> Option<Soc> {
        self.soc
    }

    /// The settings a job runs with here: with a SoC, QNN runs get its `soc_model`.
    fn settings(&self, settings: &HarnessSettings) -> HarnessSettings {
        let mut settings = settings.clone();
        if let (Some(soc), EpKind::Qnn) = (self.soc, settings.ep) {
            settings.qnn.soc_model = Some(soc.qnn_soc_model);
            emulator_runs(&mut settings);
        }
        settings
    }
}

/// The runs an emulated HTP inference is worth: its speed is x86's, so the verdict judges no
/// latency of it (the latency rules are not applicable) — one timed run (the inference whose
/// outputs `--check-outputs` keeps), no warmup and one profiled run (placement and kernel times)
/// where the command line's defaults (30, 3 and 10) would emulate 43 inferences. A count the user
/// set to anything but the default is kept.
pub fn emulator_runs(settings: &mut HarnessSettings) {
    let defaults = HarnessSettings::default();
    if settings.runs == defaults.runs {
        settings.runs = EMULATOR_RUNS;
    }
    if settings.warmup == defaults.warmup {
        settings.warmup = 0;
    }
    if settings.profile_runs == defaults.profile_runs {
        settings.profile_runs = 1;
    }
}

/// Timed runs of the HTP emulator by default (see [`emulator_runs`]).
pub const EMULATOR_RUNS: u32 = 1;

impl Default for WineTarget {
    fn default() -> Self {
        WineTarget::new()
    }
}

impl Target for WineTarget {
    fn name(&self) -> &str {
        &self.name
    }

    fn execute(&self, job: &Job<'_>, out: &Path, progress: &Progress<'_>) -> Result<Execution> {
        super::check_runtime(self.name(), TRIPLE, job.runtime)?;
        let shim = job.harness.with_file_name(PRNG_SHIM);
        if !job.harness.is_file() || !shim.is_file() {
            bail!(
                "the Windows harness {} (with {PRNG_SHIM} beside it) is not built; {SETUP_HINT}",
                job.harness.display()
            );
        }
        progress.step("wine prefix");
        let _shared = self.prefix.ready()?;
        progress.step("run under wine");
        let settings = self.settings(job.settings);
        let job = Job { settings: &settings, ..*job };
        let mut program = Command::new("wine");
        program.arg(job.harness).envs(self.prefix.env());
        // An emulated inference takes seconds (13 s for YOLOv8n): each one is shown.
        let inferences = (settings.ep == EpKind::Qnn).then_some(progress);
        let execution = LocalLaunch { program, path: &windows_path, inferences }.run(&job, out).map_err(|error| {
            match error.downcast_ref::<Stopped>() {
                Some(Stopped::Spawn { .. }) => error.context(format!("wine is not installed; {SETUP_HINT}")),
                _ => error,
            }
        })?;
        as_host_result(&out.join(files::RESULT), self.soc)?;
        job.name_the_model_as_given(out)?;
        Ok(execution)
    }
}

/// The boundary between the Windows harness and the host, crossed once: its `result.json` is
/// rewritten with host paths (`Z:\a\b` → `/a/b`, whole values and paths inside messages) and,
/// on a SoC's target, the emulated SoC in the fingerprint (`soc.machine`), so that nothing after
/// — the terminal, `result.json`, `verdict.json` — shows a wine path or "SoC unknown".
fn as_host_result(path: &Path, soc: Option<Soc>) -> Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(()) };
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(&text) else { return Ok(()) };
    to_host_paths(&mut value);
    if let (Some(soc), Some(fingerprint)) = (soc, value.get_mut("fingerprint").and_then(|f| f.as_object_mut())) {
        let socs = fingerprint.entry("soc").or_insert_with(|| serde_json::json!({}));
        if let Some(socs) = socs.as_object_mut().filter(|socs| socs.is_empty()) {
            socs.insert("machine".into(), format!("{} (host HTP emulator)", soc.model).into());
        }
    }
    contract::write_json(path, &value).with_context(|| format!("cannot write {}", path.display()))
}

/// Every wine path in the strings of `value` as the host's.
fn to_host_paths(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(text) if text.contains("Z:\\") || text.contains("z:\\") => *text = host_text(text),
        serde_json::Value::Array(items) => items.iter_mut().for_each(to_host_paths),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(to_host_paths),
        _ => {}
    }
}

/// `text` with each wine path in it (`Z:\` up to a space, quote, bracket, comma or `: `) as the host's.
fn host_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("Z:\\").or_else(|| rest.find("z:\\")) {
        out.push_str(&rest[..start]);
        let path = &rest[start..];
        let end = path
            .char_indices()
            .find(|&(index, c)| {
                matches!(c, ' ' | '\n' | '\'' | '"' | ')' | ',' | ';')
                    || (c == ':' && index > 1 && path[index + 1..].starts_with(' '))
            })
            .map_or(path.len(), |(index, _)| index);
        out.push_str(&host_path(&path[..end]).display().to_string());
        rest = &path[end..];
    }
    out.push_str(rest);
    out
}

/// True when `wine` is on PATH.
pub fn installed() -> bool {
    npugate_host::process::on_path("wine").is_some()
}

/// The host path of a path a Windows program under wine wrote (`Z:\\a\\b` → `/a/b`); any other path
/// as it is.
pub fn host_path(path: &str) -> PathBuf {
    match path.strip_prefix("Z:").or_else(|| path.strip_prefix("z:")) {
        Some(rest) => PathBuf::from(rest.replace('\\', "/")),
        None => PathBuf::from(path),
    }
}

/// A host path as a Windows program under wine sees it: `/a/b` → `Z:\a\b` (wine maps `Z:` to `/`).
pub fn windows_path(path: &Path) -> PathBuf {
    PathBuf::from(format!("Z:{}", path.display().to_string().replace('/', "\\")))
}

/// npugate's wine prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WinePrefix {
    dir: PathBuf,
}

/// A held lock on a prefix: shared while a run uses it (released on drop).
#[derive(Debug)]
pub struct PrefixLock(#[allow(dead_code)] File);

impl WinePrefix {
    /// `<cache>/wine/prefix`.
    pub fn default_location() -> WinePrefix {
        WinePrefix { dir: npugate_host::paths::cache_dir().join("wine").join("prefix") }
    }

    /// A prefix in `dir` (created on first use).
    pub fn at(dir: &Path) -> WinePrefix {
        WinePrefix { dir: dir.to_path_buf() }
    }

    /// The prefix directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The environment every wine process in this prefix gets: the prefix, 64-bit, no debug
    /// channels, and no Mono/Gecko installers (never needed, and they would prompt).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("WINEPREFIX", self.dir.display().to_string()),
            ("WINEARCH", "win64".into()),
            ("WINEDEBUG", "-all".into()),
            ("WINEDLLOVERRIDES", "mscoree,mshtml=".into()),
        ]
    }

    /// Makes the prefix usable — creating it, or rebuilding it when a check fails — and returns a
    /// shared lock that keeps it from being rebuilt while the caller uses it.
    pub fn ready(&self) -> Result<PrefixLock> {
        let parent = self.dir.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        let lock_path = self.dir.with_extension("lock");
        let open = || File::options().create(true).truncate(false).write(true).open(&lock_path);
        let lock = open().with_context(|| format!("cannot open {}", lock_path.display()))?;
        lock.lock_shared().with_context(|| format!("cannot lock {}", lock_path.display()))?;
        if self.problem().is_none() {
            return Ok(PrefixLock(lock));
        }
        drop(lock);
        let exclusive = open().with_context(|| format!("cannot open {}", lock_path.display()))?;
        exclusive.lock().with_context(|| format!("cannot lock {}", lock_path.display()))?;
        // Another process may have built it while this one waited for the lock.
        if let Some(problem) = self.problem() {
            if self.dir.exists() {
                eprintln!("npugate: the wine prefix {} is broken ({problem}); rebuilding it", self.dir.display());
            }
            self.create()?;
        }
        exclusive.lock_shared().with_context(|| format!("cannot lock {}", lock_path.display()))?;
        Ok(PrefixLock(exclusive))
    }

    /// What is wrong with the prefix, if anything (checked before every run, cheaply).
    pub fn problem(&self) -> Option<String> {
        if !self.dir.join(READY_MARKER).is_file() {
            return Some("it was never completed".into());
        }
        for registry in ["system.reg", "user.reg"] {
            let head = std::fs::read(self.dir.join(registry)).unwrap_or_default();
            if !head.starts_with(b"WINE REGISTRY Version") {
                return Some(format!("{registry} is missing or damaged"));
            }
        }
        if !self.dir.join("dosdevices/z:").exists() {
            return Some("drive Z: (the host's /) is missing".into());
        }
        if !self.dir.join("drive_c/windows/system32/kernel32.dll").is_file() {
            return Some("drive_c/windows/system32 is incomplete".into());
        }
        None
    }

    /// Removes a broken prefix. Its wineserver may outlive the last run by seconds and write the
    /// registry back while the directory is being removed, so it is stopped (`wineserver -k`; the
    /// caller holds the exclusive lock, so nothing of ours runs in the prefix) and waited for first.
    fn remove(&self) -> Result<()> {
        for args in [["-k"], ["-w"]] {
            let mut server = Command::new("wineserver");
            server.args(args).envs(self.env());
            let _ = npugate_host::process::run(server, WINEBOOT_LIMIT, &|| false);
        }
        let mut attempt = 0;
        loop {
            match std::fs::remove_dir_all(&self.dir) {
                Ok(()) => return Ok(()),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(_) if attempt < 5 => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(200 * attempt));
                }
                Err(error) => {
                    return Err(error)
                        .with_context(|| format!("cannot remove the broken wine prefix {}", self.dir.display()))
                }
            }
        }
    }

    /// Creates the prefix from scratch with `wineboot -i` (the caller holds the exclusive lock).
    fn create(&self) -> Result<()> {
        if self.dir.exists() {
            self.remove()?;
        }
        let mut wineboot = Command::new("wine");
        wineboot.args(["wineboot", "-i"]).envs(self.env());
        let finished =
            npugate_host::process::run(wineboot, WINEBOOT_LIMIT, &|| false).map_err(|error| match error {
                Stopped::Spawn { .. } => anyhow::anyhow!("wine is not installed; {SETUP_HINT}"),
                other => anyhow::anyhow!("creating the wine prefix {}: {other}", self.dir.display()),
            })?;
        // wineboot returns before the prefix is flushed; wait for its wineserver to write it out.
        let mut server = Command::new("wineserver");
        server.arg("-w").envs(self.env());
        let _ = npugate_host::process::run(server, WINEBOOT_LIMIT, &|| false);
        std::fs::write(self.dir.join(READY_MARKER), b"created by npugate with wineboot -i\n")
            .with_context(|| format!("cannot complete the wine prefix {}", self.dir.display()))?;
        if let Some(problem) = self.problem() {
            bail!(
                "wine could not create its prefix {} ({problem}; wineboot exit {:?}: {}); {SETUP_HINT}",
                self.dir.display(),
                finished.code,
                finished.stderr.lines().last().unwrap_or("no message")
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emulator_runs_what_its_verdict_uses_unless_the_user_asked_for_more() {
        let mut defaults = HarnessSettings::default();
        emulator_runs(&mut defaults);
        assert_eq!((defaults.runs, defaults.warmup, defaults.profile_runs), (1, 0, 1));
        let mut asked = HarnessSettings { runs: 5, warmup: 1, profile_runs: 2, ..HarnessSettings::default() };
        emulator_runs(&mut asked);
        assert_eq!((asked.runs, asked.warmup, asked.profile_runs), (5, 1, 2));
    }

    #[test]
    fn wine_paths_in_a_result_become_host_paths_and_the_soc_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(files::RESULT);
        let result = serde_json::json!({
            "model": {"path": "Z:\\tmp\\m.onnx"},
            "session_error": "cannot create a session for model Z:\\tmp\\a\\m.onnx: bad (see Z:\\tmp\\log)",
            "fingerprint": {"arch": "x86_64"},
        });
        std::fs::write(&path, result.to_string()).unwrap();
        as_host_result(&path, Some(npugate_result::hexagon::find("SM8650").unwrap())).unwrap();
        let host: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(host["model"]["path"], "/tmp/m.onnx");
        assert_eq!(host["session_error"], "cannot create a session for model /tmp/a/m.onnx: bad (see /tmp/log)");
        assert_eq!(host["fingerprint"]["soc"]["machine"], "SM8650 (host HTP emulator)");
    }

    #[test]
    fn host_paths_become_drive_z_paths() {
        assert_eq!(
            windows_path(Path::new("/root/.cache/npugate/m a.onnx")),
            PathBuf::from("Z:\\root\\.cache\\npugate\\m a.onnx")
        );
        assert_eq!(host_path("Z:\\root\\m a.onnx"), PathBuf::from("/root/m a.onnx"));
        assert_eq!(host_path("/root/m.onnx"), PathBuf::from("/root/m.onnx"));
    }

    #[test]
    fn a_soc_target_sets_the_soc_model_of_qnn_runs_only() {
        let target = WineTarget::for_soc(npugate_result::hexagon::find("SM8350").unwrap());
        assert_eq!(target.name(), "SM8350");
        let qnn = HarnessSettings::from(npugate_settings::SessionSettings { ep: EpKind::Qnn, ..Default::default() });
        assert_eq!(target.settings(&qnn).qnn.soc_model, Some(30));
        assert_eq!(target.settings(&HarnessSettings::default()).qnn.soc_model, None, "CPU runs stay CPU runs");
        assert_eq!(WineTarget::new().settings(&qnn).qnn.soc_model, None);
    }

    #[test]
    fn an_incomplete_prefix_names_its_problem() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = WinePrefix::at(&dir.path().join("prefix"));
        assert!(prefix.problem().unwrap().contains("never completed"));
        std::fs::create_dir_all(prefix.dir()).unwrap();
        std::fs::write(prefix.dir().join(READY_MARKER), "").unwrap();
        std::fs::write(prefix.dir().join("system.reg"), "garbage").unwrap();
        assert!(prefix.problem().unwrap().contains("system.reg"));
    }
}
