//! `npugate doctor`: what is installed — this npugate, the harness of each target and its build,
//! the runtimes fetched, wine, qemu and adb — and every missing piece with its fix. Exit 0 when
//! the basics work (a harness for this machine of npugate's version, a runtime for it: `run
//! --local` can run), 1 with the list otherwise. `--version` prints the version part of it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use super::options::JsonArg;
use npugate_engine::harnesses::{self, HarnessTarget};
use npugate_engine::targets::{host_triple, wine};
use npugate_result::build::{Build, UNKNOWN_COMMIT};
use npugate_result::contract::{EXIT_FAIL, EXIT_PASS};
use npugate_result::report::{self, Finished};

/// The schema of `npugate doctor --json`.
pub const DOCTOR_SCHEMA: &str = "npugate.doctor/1";
/// The runtime `run --local` is documented with (fetched by `scripts/setup --demo`).
const HOST_RUNTIME: &str = npugate_plan::REFERENCE_RUNTIME;
/// How long one tool may take to say its version.
const PROBE_LIMIT: Duration = Duration::from_secs(20);

/// Arguments of `npugate doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// `--json`: `npugate.doctor/1` instead of text.
    #[command(flatten)]
    pub json: JsonArg,
}

/// What `npugate doctor` found (`npugate.doctor/1`).
#[derive(Debug, Serialize)]
pub struct Report {
    /// [`DOCTOR_SCHEMA`].
    pub schema: &'static str,
    /// This npugate: its build and where it runs from.
    pub npugate: Program,
    /// The harness of each target.
    pub harnesses: Vec<HarnessState>,
    /// The runtime cache and what is fetched there.
    pub runtimes: Runtimes,
    /// The programs some targets need: wine, qemu-aarch64, adb, pip.
    pub tools: Vec<Tool>,
    /// Every missing or mismatched piece with its fix, basic ones first.
    pub problems: Vec<Problem>,
    /// True when no basic piece is missing: `npugate run --local` can run.
    pub basics_work: bool,
}

/// The running npugate.
#[derive(Debug, Serialize)]
pub struct Program {
    /// Its build.
    pub build: Build,
    /// Its path.
    pub path: String,
}

/// The harness of one target as found.
#[derive(Debug, Serialize)]
pub struct HarnessState {
    /// The target's triple.
    pub target: String,
    /// What runs it.
    pub runs: &'static str,
    /// Where it is (absent: not found).
    pub path: Option<String>,
    /// Its stamped build (absent: not found, or no stamp).
    pub build: Option<Build>,
    /// Whether it can run.
    pub status: HarnessStatus,
}

/// Whether a harness can run with this npugate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HarnessStatus {
    /// Found, of npugate's version and commit.
    Ok,
    /// Of npugate's version, built from another commit: it runs, but may lag behind npugate.
    OtherCommit,
    /// Of another version: refused.
    OtherVersion,
    /// A file without a build stamp: refused.
    NoStamp,
    /// Not found.
    Missing,
}

impl HarnessStatus {
    /// Its name in the JSON and the text.
    fn name(self) -> &'static str {
        match self {
            HarnessStatus::Ok => "ok",
            HarnessStatus::OtherCommit => "other-commit",
            HarnessStatus::OtherVersion => "other-version",
            HarnessStatus::NoStamp => "no-stamp",
            HarnessStatus::Missing => "missing",
        }
    }
}

/// The runtime cache.
#[derive(Debug, Serialize)]
pub struct Runtimes {
    /// `<cache>/runtimes`.
    pub dir: String,
    /// Every fetched (or imported) runtime.
    pub fetched: Vec<FetchedRuntime>,
}

/// A runtime in the cache.
#[derive(Debug, Serialize)]
pub struct FetchedRuntime {
    /// Its name.
    pub name: String,
    /// The target it is built for.
    pub target: String,
}

/// A program some targets need.
#[derive(Debug, Serialize)]
pub struct Tool {
    /// Its name.
    pub name: &'static str,
    /// What needs it.
    pub needed_for: &'static str,
    /// Where it is on PATH (absent: not installed).
    pub path: Option<String>,
    /// The first line of its version output.
    pub version: Option<String>,
}

/// A missing or mismatched piece.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Problem {
    /// What is wrong.
    pub what: String,
    /// How to fix it.
    pub fix: String,
    /// True when `run --local` cannot work without it.
    pub basic: bool,
}

/// Runs `npugate doctor`.
pub fn run(args: DoctorArgs, console: &super::console::Console) -> Result<u8> {
    let report = examine()?;
    Ok(console.finished(args.json.json, Finished::new(&report)))
}

/// `npugate doctor`'s finished result: [`text`] on a terminal, exit 1 unless the basics work.
impl report::Report for Report {
    fn schema(&self) -> &str {
        self.schema
    }
    fn exit_code(&self) -> u8 {
        match self.basics_work {
            true => EXIT_PASS,
            false => EXIT_FAIL,
        }
    }
    fn text(&self, _color: bool) -> String {
        text(self)
    }
    fn json(&self) -> String {
        report::json_of(self)
    }
}

/// `npugate --version`: this npugate's build and each harness's.
pub fn version_text() -> Result<String> {
    let npugate = this_npugate()?;
    let rows = harness_states(&npugate.build)?.into_iter().map(|h| {
        let build = h.build.as_ref().map_or_else(|| h.status.name().to_string(), brief);
        vec![h.target, build, h.path.unwrap_or_default()]
    });
    Ok(format!("npugate {}\n{}", npugate.build, npugate_result::table::plain(&["HARNESS", "BUILD", "PATH"], rows)))
}

/// A build in a table cell: `0.1.0 (commit 4ed23d7a1b2c)`.
fn brief(build: &Build) -> String {
    format!("{} (commit {})", build.version, build.short_commit())
}

/// This npugate's build and path.
fn this_npugate() -> Result<Program> {
    let path = std::env::current_exe()?;
    Ok(Program { build: npugate_result::this_build!(), path: path.display().to_string() })
}

/// Everything the report says, looked at on this machine.
pub fn examine() -> Result<Report> {
    let npugate = this_npugate()?;
    let harnesses = harness_states(&npugate.build)?;
    let fetched = npugate_host::runtime::choose::fetched();
    let runtimes = Runtimes {
        dir: npugate_host::paths::runtimes_dir().display().to_string(),
        fetched: fetched.iter().map(|r| FetchedRuntime { name: r.name.clone(), target: r.target.clone() }).collect(),
    };
    let tools = tools();
    let mut problems = harness_problems(&harnesses, &npugate.build);
    problems.extend(runtime_problems(&runtimes));
    problems.extend(tool_problems(&tools));
    problems.sort_by_key(|p| !p.basic);
    let basics_work = !problems.iter().any(|p| p.basic);
    Ok(Report { schema: DOCTOR_SCHEMA, npugate, harnesses, runtimes, tools, problems, basics_work })
}

/// The harness of every target, found and read.
fn harness_states(npugate: &Build) -> Result<Vec<HarnessState>> {
    let exe = std::env::current_exe()?;
    let states = harnesses::targets().into_iter().map(|HarnessTarget { triple, runs, .. }| {
        let path = harnesses::places(&exe, &triple).into_iter().find(|p| p.is_file());
        let build = path.as_deref().and_then(|p| Build::of_file(p).ok().flatten());
        let status = match (&path, &build) {
            (None, _) => HarnessStatus::Missing,
            (Some(_), None) => HarnessStatus::NoStamp,
            (Some(_), Some(b)) if b.version != npugate.version => HarnessStatus::OtherVersion,
            (Some(_), Some(b)) if known(&b.commit) && known(&npugate.commit) && b.commit != npugate.commit => {
                HarnessStatus::OtherCommit
            }
            _ => HarnessStatus::Ok,
        };
        HarnessState { target: triple, runs, path: path.map(|p| p.display().to_string()), build, status }
    });
    Ok(states.collect())
}

fn known(commit: &str) -> bool {
    commit != UNKNOWN_COMMIT
}

/// A missing or mismatched harness, with its fix; the one of this machine is basic.
fn harness_problems(states: &[HarnessState], npugate: &Build) -> Vec<Problem> {
    let reinstall = format!("reinstall npugate (pip install --force-reinstall npugate=={})", npugate.version);
    states
        .iter()
        .zip(harnesses::targets())
        .filter(|(state, _)| state.status != HarnessStatus::Ok)
        .map(|(state, target)| {
            let what = match (state.status, &state.build) {
                (HarnessStatus::Missing, _) => format!("no harness for {} ({})", state.target, target.runs),
                (_, Some(build)) => format!(
                    "the {} harness {} is {build}, npugate is {}",
                    state.target,
                    state.path.as_deref().unwrap_or_default(),
                    npugate
                ),
                _ => format!(
                    "{} is not an npugate harness of this version (no build stamp)",
                    state.path.as_deref().unwrap_or_default()
                ),
            };
            let fix = match state.target == harnesses::ANDROID_TRIPLE {
                true => format!("{} (the wheel carries none)", target.build),
                false => format!("{reinstall}, or build it from source: {}", target.build),
            };
            Problem { what, fix, basic: state.target == host_triple() && state.status != HarnessStatus::OtherCommit }
        })
        .collect()
}

/// No runtime for this machine (basic), none for the host HTP.
fn runtime_problems(runtimes: &Runtimes) -> Vec<Problem> {
    let has = |triple: &str| runtimes.fetched.iter().any(|runtime| runtime.target == triple);
    let mut problems = Vec::new();
    if !has(&host_triple()) {
        problems.push(Problem {
            what: format!("no runtime for this machine ({}) is fetched in {}", host_triple(), runtimes.dir),
            fix: format!("npugate runtime fetch {HOST_RUNTIME}"),
            basic: true,
        });
    }
    if !has(wine::TRIPLE) {
        problems.push(Problem {
            what: "no runtime for Qualcomm's host HTP (preflight, compile) is fetched".into(),
            fix: format!("npugate runtime fetch {}", npugate_engine::host_htp::HOST_HTP_RUNTIME),
            basic: false,
        });
    }
    problems
}

/// The programs some targets need, with how each says its version.
fn tools() -> Vec<Tool> {
    let probe = |name: &'static str, path: Option<PathBuf>, needed_for: &'static str, args: &[&str]| {
        let version = path.as_ref().and_then(|p| first_line_of(p, args));
        Tool { name, needed_for, path: path.map(|p| p.display().to_string()), version }
    };
    let on_path = npugate_host::process::on_path;
    let python = npugate_host::runtime::pypi::python();
    let python = if python.components().count() > 1 { Some(python) } else { on_path(&python.display().to_string()) };
    vec![
        probe("wine", on_path("wine"), "Qualcomm's host HTP: preflight, compile, run --local --ep qnn", &["--version"]),
        probe(
            "qemu-aarch64",
            on_path("qemu-aarch64"),
            "the aarch64 harness here: preflight --backend saver",
            &["--version"],
        ),
        probe("adb", on_path("adb"), "Android devices: run --device, devices, sweep", &["version"]),
        probe(
            "pip",
            python,
            "fetching runtimes and sample models (python3 -m pip download)",
            &["-m", "pip", "--version"],
        ),
    ]
}

/// The first non-empty line `program args` prints, if it runs and succeeds.
fn first_line_of(program: &Path, args: &[&str]) -> Option<String> {
    let mut command = std::process::Command::new(program);
    command.args(args);
    let finished = npugate_host::process::run(command, PROBE_LIMIT, &|| false).ok()?;
    let line = finished.stdout.lines().map(str::trim).find(|l| !l.is_empty())?.to_string();
    (finished.code == Some(0)).then_some(line)
}

/// A missing tool, with the Debian/Ubuntu package that brings it.
fn tool_problems(tools: &[Tool]) -> Vec<Problem> {
    let mut problems: Vec<Problem> = tools
        .iter()
        .filter(|tool| tool.version.is_none())
        .map(|tool| {
            let package = match tool.name {
                "wine" => "sudo apt-get install wine64 wine",
                "qemu-aarch64" => "sudo apt-get install qemu-user libc6-arm64-cross",
                "adb" => "sudo apt-get install adb (or Android's platform-tools)",
                _ => "sudo apt-get install python3-pip (or use npugate from a venv, which has pip)",
            };
            let state = if tool.path.is_some() { "does not run" } else { "is not installed" };
            Problem {
                what: format!("{} {state}: needed for {}", tool.name, tool.needed_for),
                fix: package.into(),
                basic: false,
            }
        })
        .collect();
    let aarch64_libc = Path::new("/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1");
    if std::env::consts::ARCH == "x86_64" && !aarch64_libc.is_file() {
        problems.push(Problem {
            what: format!("the aarch64 C library ({}) is missing: qemu-aarch64 needs it", aarch64_libc.display()),
            fix: "sudo apt-get install libc6-arm64-cross".into(),
            basic: false,
        });
    }
    problems
}

/// The report as text: the program, a table per section, then the problems and the verdict.
pub fn text(report: &Report) -> String {
    let mut out = format!("npugate {}  {}\n\nharnesses\n", report.npugate.build, report.npugate.path);
    out += &npugate_result::table::plain(
        &["TARGET", "STATUS", "BUILD", "PATH", "RUNS"],
        report.harnesses.iter().map(|h| {
            let build = h.build.as_ref().map_or("-".into(), brief);
            vec![h.target.clone(), h.status.name().into(), build, h.path.clone().unwrap_or("-".into()), h.runs.into()]
        }),
    );
    let names: Vec<&str> = report.runtimes.fetched.iter().map(|runtime| runtime.name.as_str()).collect();
    out += &format!(
        "\nruntimes in {}: {}\n",
        report.runtimes.dir,
        if names.is_empty() { "none fetched".into() } else { names.join(", ") }
    );
    out += "\ntools\n";
    out += &npugate_result::table::plain(
        &["TOOL", "VERSION", "PATH", "NEEDED FOR"],
        report.tools.iter().map(|t| {
            let version = t.version.clone().unwrap_or_else(|| "missing".into());
            vec![t.name.into(), version, t.path.clone().unwrap_or("-".into()), t.needed_for.into()]
        }),
    );
    if !report.problems.is_empty() {
        out += &format!("\n{} to fix:\n", report.problems.len());
        for problem in &report.problems {
            let basic = if problem.basic { "[basic] " } else { "" };
            out += &format!("  - {basic}{}: {}\n", problem.what, problem.fix);
        }
    }
    out + match report.basics_work {
        true => "\nthe basics work: npugate run --local --model MODEL.onnx\n",
        false => "\nthe basics do not work: fix the [basic] pieces above\n",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(target: &str, status: HarnessStatus, version: &str) -> HarnessState {
        let build = Build { version: version.into(), commit: "c2".into(), target: target.into() };
        let found = status != HarnessStatus::Missing;
        HarnessState {
            target: target.into(),
            runs: "r",
            path: found.then(|| format!("/p/{target}")),
            build: found.then_some(build),
            status,
        }
    }

    #[test]
    fn only_this_machines_harness_of_another_version_or_missing_is_basic() {
        let npugate = Build { version: "0.2.0".into(), commit: "c1".into(), target: host_triple() };
        let triples: Vec<String> = harnesses::targets().into_iter().map(|t| t.triple).collect();
        let states = vec![
            state(&triples[0], HarnessStatus::OtherVersion, "0.1.0"),
            state(&triples[1], HarnessStatus::OtherCommit, "0.2.0"),
            state(&triples[2], HarnessStatus::Ok, "0.2.0"),
            state(&triples[3], HarnessStatus::Missing, ""),
        ];
        let problems = harness_problems(&states, &npugate);
        assert_eq!(problems.iter().map(|p| p.basic).collect::<Vec<_>>(), [true, false, false]);
        assert!(problems[0].what.contains("is 0.1.0 (commit c2") && problems[0].fix.contains("npugate==0.2.0"));
        assert!(
            problems[2].what.starts_with("no harness for aarch64-linux-android") && problems[2].fix.contains("NDK")
        );
    }

    #[test]
    fn no_runtime_for_this_machine_is_basic_and_names_the_fetch() {
        let empty = Runtimes { dir: "/c/runtimes".into(), fetched: Vec::new() };
        let problems = runtime_problems(&empty);
        assert_eq!(problems.iter().map(|p| p.basic).collect::<Vec<_>>(), [true, false]);
        assert_eq!(problems[0].fix, format!("npugate runtime fetch {HOST_RUNTIME}"));
        let both = Runtimes {
            dir: "/c/runtimes".into(),
            fetched: [host_triple(), wine::TRIPLE.into()]
                .map(|target| FetchedRuntime { name: "r".into(), target })
                .into(),
        };
        assert!(runtime_problems(&both).is_empty());
    }
}
