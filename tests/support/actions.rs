//! A GitHub Actions runner, simulated: reads a composite action's `action.yml` and runs its steps in
//! order as the Actions runner does, without GitHub.
//!
//! What it does as the runner does: `${{ … }}` expressions over the `inputs`, `steps`, `env`, `github`
//! and `runner` contexts (string comparison ignoring case, `&&`/`||` returning an operand, an `if:`
//! without a status function meaning `success() && …`); `shell: bash` as `bash --noprofile --norc -eo
//! pipefail {0}` with the script in a file; per-step `GITHUB_OUTPUT`, `GITHUB_ENV`, `GITHUB_PATH` and
//! `GITHUB_STEP_SUMMARY` files read after the step (`name=value` and `name<<DELIMITER` blocks); workflow
//! commands on stdout (`::error title=…::…`, unescaped) as annotations; a failed step skipping the
//! steps after it unless their `if:` asks for `always()` or `failure()`; the action's outputs evaluated
//! after its steps. `actions/upload-artifact` is not uploaded: the step is recorded with its `with:`
//! and fails as the real one does on a missing path (`if-no-files-found: error`) or a bad name.
//! `actions/cache/restore` and `actions/cache/save` use a cache kept by the runner for all its runs,
//! as GitHub keeps one per repository (see [`ActionRunner::cache_restore`]).
//!
//! Inputs reach the steps only through the `inputs` context. GitHub gives a composite action's steps
//! no `INPUT_*` variables (actions/runner#665; JavaScript and Docker actions get them), and neither
//! does this runner, so an action that relied on them would fail here as it fails on GitHub.
//!
//! Anything the runner meets that it does not implement (another `uses:`, an unknown context or
//! function, a shell other than bash/sh) panics: a simulation must never pass by skipping.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

/// A composite action's metadata (`action.yml`), the parts the runner reads.
#[derive(Debug, Deserialize)]
pub struct Action {
    /// The action's inputs by name.
    #[serde(default)]
    pub inputs: BTreeMap<String, Input>,
    /// The action's outputs by name.
    #[serde(default)]
    pub outputs: BTreeMap<String, OutputDefinition>,
    /// `runs:` (must be `using: composite`).
    pub runs: Runs,
}

/// One input of an action.
#[derive(Debug, Deserialize)]
pub struct Input {
    /// Whether the workflow must give it.
    #[serde(default)]
    pub required: bool,
    /// Its value when not given (may hold expressions).
    #[serde(default)]
    pub default: Option<String>,
}

/// One output of a composite action.
#[derive(Debug, Deserialize)]
pub struct OutputDefinition {
    /// The expression giving its value.
    pub value: String,
}

/// `runs:` of a composite action.
#[derive(Debug, Deserialize)]
pub struct Runs {
    /// `composite`.
    pub using: String,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

/// One step of a composite action.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Its id (for `steps.<id>`).
    pub id: Option<String>,
    /// Display name.
    pub name: Option<String>,
    /// The condition.
    #[serde(rename = "if")]
    pub condition: Option<String>,
    /// A script to run.
    pub run: Option<String>,
    /// The script's shell.
    pub shell: Option<String>,
    /// An action to use instead of a script.
    pub uses: Option<String>,
    /// The used action's inputs.
    #[serde(default)]
    pub with: BTreeMap<String, String>,
    /// Environment of the step.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Where the script runs (default: the workspace).
    #[serde(rename = "working-directory")]
    pub working_directory: Option<String>,
    /// A failure of this step does not fail the action.
    #[serde(rename = "continue-on-error", default)]
    pub continue_on_error: bool,
}

impl Action {
    /// Reads `action.yml` in `dir`.
    pub fn load(dir: &Path) -> Action {
        let path = dir.join("action.yml");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let action: Action =
            serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{} is not an action: {e}", path.display()));
        assert_eq!(action.runs.using, "composite", "{}: the simulated runner runs composite actions", path.display());
        action
    }
}

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It ran and exited 0.
    Success,
    /// It ran and failed.
    Failure,
    /// Its `if:` was false.
    Skipped,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Skipped => "skipped",
        }
    }
}

/// A workflow command a step printed (`::error title=T::message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    /// `error`, `warning`, `notice` or `debug`.
    pub level: String,
    /// The `title=` property, if any.
    pub title: Option<String>,
    /// The message, unescaped.
    pub message: String,
}

/// An `actions/upload-artifact` step as the runner recorded it.
#[derive(Debug, Clone)]
pub struct Upload {
    /// The artifact's name.
    pub name: String,
    /// The paths of `with: path`, resolved against the workspace.
    pub paths: Vec<PathBuf>,
    /// Every file under those paths, as it would be uploaded.
    pub files: Vec<PathBuf>,
}

/// One step as it ran.
#[derive(Debug, Clone)]
pub struct StepRun {
    /// Its id or name.
    pub label: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Its exit code (scripts).
    pub exit_code: Option<i32>,
    /// What it printed.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
    /// Its outputs (`GITHUB_OUTPUT`).
    pub outputs: BTreeMap<String, String>,
}

/// An action run to its end.
#[derive(Debug)]
pub struct ActionRun {
    /// Every step in order.
    pub steps: Vec<StepRun>,
    /// Every workflow-command annotation, in order.
    pub annotations: Vec<Annotation>,
    /// The job summary: every step's `GITHUB_STEP_SUMMARY`, in order.
    pub summary: String,
    /// The action's outputs.
    pub outputs: BTreeMap<String, String>,
    /// The artifacts uploaded.
    pub uploads: Vec<Upload>,
    /// Success unless a step failed without `continue-on-error`.
    pub conclusion: Outcome,
    /// 0, or the exit code of the step that failed the action.
    pub exit_code: i32,
}

impl ActionRun {
    /// The step with this id or name.
    pub fn step(&self, label: &str) -> &StepRun {
        self.steps.iter().find(|s| s.label == label).unwrap_or_else(|| panic!("no step {label}: {}", self.describe()))
    }

    /// An output of the action (empty when it has none).
    pub fn output(&self, name: &str) -> &str {
        self.outputs.get(name).map(String::as_str).unwrap_or("")
    }

    /// The annotations of one level (`error`, `warning`, `notice`).
    pub fn annotations(&self, level: &str) -> Vec<&Annotation> {
        self.annotations.iter().filter(|a| a.level == level).collect()
    }

    /// Everything about the run, for assertion messages.
    pub fn describe(&self) -> String {
        let mut text =
            format!("conclusion {} (exit {}), outputs {:?}\n", self.conclusion.name(), self.exit_code, self.outputs);
        for step in &self.steps {
            text += &format!(
                "--- step {} {} (exit {:?})\n--- stdout\n{}\n--- stderr\n{}\n",
                step.label,
                step.outcome.name(),
                step.exit_code,
                step.stdout,
                step.stderr
            );
        }
        text + &format!(
            "--- summary\n{}\n--- uploads {:?}",
            self.summary,
            self.uploads.iter().map(|u| (&u.name, &u.paths)).collect::<Vec<_>>()
        )
    }
}

/// A simulated runner of one action, with its own workspace and runner temp directory.
pub struct ActionRunner {
    action_path: PathBuf,
    action: Action,
    root: tempfile::TempDir,
    env: BTreeMap<String, String>,
}

impl ActionRunner {
    /// A runner for the action in `action_path` (its `action.yml`), as a workflow's `uses:` would check it out.
    pub fn new(action_path: &Path) -> ActionRunner {
        let root = tempfile::Builder::new().prefix("npugate-actions-").tempdir().expect("runner directory");
        for dir in ["workspace", "temp", "files"] {
            std::fs::create_dir_all(root.path().join(dir)).expect("runner directories");
        }
        let mut env: BTreeMap<String, String> =
            crate::RUNNER_ENV.iter().filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?))).collect();
        env.extend(
            [("CI", "true"), ("GITHUB_ACTIONS", "true"), ("RUNNER_OS", "Linux")]
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        ActionRunner { action_path: action_path.to_path_buf(), action: Action::load(action_path), root, env }
    }

    /// The job's workspace (`GITHUB_WORKSPACE`, the steps' working directory).
    pub fn workspace(&self) -> PathBuf {
        self.root.path().join("workspace")
    }

    /// The runner's temp directory (`RUNNER_TEMP`).
    pub fn temp(&self) -> PathBuf {
        self.root.path().join("temp")
    }

    /// Sets a variable of the job's environment (as a workflow's `env:` does).
    pub fn env(mut self, name: &str, value: &str) -> ActionRunner {
        self.set_env(name, value);
        self
    }

    /// Sets a variable of the environment of the jobs run from now on (another job of the workflow).
    pub fn set_env(&mut self, name: &str, value: &str) {
        self.env.insert(name.to_string(), value.to_string());
    }

    /// Runs the action with the workflow's `with:` inputs, each step's shell started directly.
    pub fn run(&self, with: &[(&str, &str)]) -> ActionRun {
        self.run_with(with, &|program: &Path| Command::new(program))
    }

    /// Runs the action with the workflow's `with:` inputs; `launcher` makes the command that starts a
    /// step's shell (the adb rig runs it inside its network namespace).
    pub fn run_with(&self, with: &[(&str, &str)], launcher: &dyn Fn(&Path) -> Command) -> ActionRun {
        for (name, _) in with {
            assert!(
                self.action.inputs.contains_key(*name),
                "the workflow gives input {name:?}, which action.yml does not declare"
            );
        }
        let mut contexts = Contexts {
            github: self.github_context(),
            runner: [("temp".to_string(), self.temp().display().to_string()), ("os".to_string(), "Linux".to_string())]
                .into(),
            env: self.env.clone(),
            step_ids: self.action.runs.steps.iter().filter_map(|s| s.id.clone()).collect(),
            ..Contexts::default()
        };
        for (name, input) in &self.action.inputs {
            let value = match with.iter().find(|(given, _)| given == name) {
                Some((_, value)) => value.to_string(),
                None => {
                    assert!(!input.required, "input {name:?} is required and the workflow does not give it");
                    interpolate(input.default.as_deref().unwrap_or(""), &contexts)
                }
            };
            contexts.inputs.insert(name.clone(), value);
        }
        let mut run = ActionRun {
            steps: Vec::new(),
            annotations: Vec::new(),
            summary: String::new(),
            outputs: BTreeMap::new(),
            uploads: Vec::new(),
            conclusion: Outcome::Success,
            exit_code: 0,
        };
        let mut path_prefix: Vec<String> = Vec::new();
        for (index, step) in self.action.runs.steps.iter().enumerate() {
            let label = step.id.clone().or_else(|| step.name.clone()).unwrap_or_else(|| format!("step {}", index + 1));
            contexts.failed = run.conclusion == Outcome::Failure;
            let record = if !condition_holds(step.condition.as_deref(), &contexts) {
                StepRun {
                    label,
                    outcome: Outcome::Skipped,
                    exit_code: None,
                    stdout: String::new(),
                    stderr: String::new(),
                    outputs: BTreeMap::new(),
                }
            } else if let Some(uses) = &step.uses {
                let with: BTreeMap<&str, String> =
                    step.with.iter().map(|(k, v)| (k.as_str(), interpolate(v, &contexts))).collect();
                match uses.split_once('@').map(|(name, _)| name) {
                    Some("actions/upload-artifact") => self.upload(label, &with, &mut run),
                    Some("actions/cache/restore") => self.cache_restore(label, &with, &contexts),
                    Some("actions/cache/save") => self.cache_save(label, &with, &contexts, &mut run),
                    _ => panic!("step {label}: the simulated runner knows actions/upload-artifact and actions/cache/restore|save, not {uses}"),
                }
            } else {
                let files = StepFiles::create(&self.root.path().join("files"), index);
                let record = self.script(label, step, &contexts, &files, &path_prefix, launcher);
                run.annotations.extend(workflow_commands(&record.stdout));
                run.summary += &read(&files.summary);
                contexts.env.extend(key_values(&read(&files.env)));
                path_prefix.splice(0..0, read(&files.path).lines().filter(|l| !l.is_empty()).map(String::from).rev());
                StepRun { outputs: key_values(&read(&files.output)), ..record }
            };
            if record.outcome == Outcome::Failure && !step.continue_on_error && run.conclusion == Outcome::Success {
                run.conclusion = Outcome::Failure;
                run.exit_code = record.exit_code.unwrap_or(1);
            }
            if let Some(id) = &step.id {
                contexts.steps.insert(id.clone(), (record.outcome, record.outputs.clone()));
            }
            run.steps.push(record);
        }
        for (name, output) in &self.action.outputs {
            run.outputs.insert(name.clone(), interpolate(&output.value, &contexts));
        }
        run
    }

    /// The `github` context: where the action and the workspace are.
    fn github_context(&self) -> BTreeMap<String, String> {
        [
            ("action_path", self.action_path.display().to_string()),
            ("workspace", self.workspace().display().to_string()),
            ("job", "npugate".to_string()),
            ("event_name", "pull_request".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Runs a `run:` step.
    fn script(
        &self,
        label: String,
        step: &Step,
        contexts: &Contexts,
        files: &StepFiles,
        path_prefix: &[String],
        launcher: &dyn Fn(&Path) -> Command,
    ) -> StepRun {
        let script =
            interpolate(step.run.as_deref().unwrap_or_else(|| panic!("step {label}: neither run nor uses")), contexts);
        let script_file = files.dir.join("script.sh");
        std::fs::write(&script_file, script).expect("write the step's script");
        let mut command = match step.shell.as_deref() {
            Some("bash") => {
                let mut command = launcher(Path::new("bash"));
                command.args(["--noprofile", "--norc", "-eo", "pipefail"]).arg(&script_file);
                command
            }
            Some("sh") => {
                let mut command = launcher(Path::new("sh"));
                command.arg("-e").arg(&script_file);
                command
            }
            other => panic!(
                "step {label}: shell {other:?}: a composite action's run step must name its shell (bash or sh here)"
            ),
        };
        let mut env = contexts.env.clone();
        for (name, value) in &step.env {
            env.insert(name.clone(), interpolate(value, contexts));
        }
        if !path_prefix.is_empty() {
            let path = env.get("PATH").cloned().unwrap_or_default();
            env.insert("PATH".into(), format!("{}:{path}", path_prefix.join(":")));
        }
        env.extend(
            [
                ("GITHUB_WORKSPACE", self.workspace()),
                ("RUNNER_TEMP", self.temp()),
                ("GITHUB_ACTION_PATH", self.action_path.clone()),
                ("GITHUB_OUTPUT", files.output.clone()),
                ("GITHUB_ENV", files.env.clone()),
                ("GITHUB_PATH", files.path.clone()),
                ("GITHUB_STEP_SUMMARY", files.summary.clone()),
            ]
            .map(|(k, v)| (k.to_string(), v.display().to_string())),
        );
        let cwd = match &step.working_directory {
            Some(dir) => self.workspace().join(interpolate(dir, contexts)),
            None => self.workspace(),
        };
        command.env_clear().envs(&env).current_dir(cwd);
        let output = crate::run(&mut command);
        StepRun {
            label,
            outcome: if output.status.success() { Outcome::Success } else { Outcome::Failure },
            exit_code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            outputs: BTreeMap::new(),
        }
    }

    /// `uses: actions/upload-artifact@v4`: checks and records what would be uploaded.
    fn upload(&self, label: String, with: &BTreeMap<&str, String>, run: &mut ActionRun) -> StepRun {
        let name = with.get("name").cloned().unwrap_or_else(|| "artifact".into());
        let mut problems = Vec::new();
        if name.is_empty() || name.contains(['"', ':', '<', '>', '|', '*', '?', '\r', '\n', '\\', '/']) {
            problems.push(format!("The artifact name is not valid: {name:?}"));
        }
        if run.uploads.iter().any(|u| u.name == name) {
            problems.push(format!("an artifact named {name:?} was already uploaded in this run"));
        }
        let paths: Vec<PathBuf> = with
            .get("path")
            .map(String::as_str)
            .unwrap_or("")
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| {
                assert!(!line.contains(['*', '?', '!']), "step {label}: path patterns ({line}) are not simulated");
                self.workspace().join(line.trim())
            })
            .collect();
        let files: Vec<PathBuf> = paths.iter().flat_map(|p| crate::files_under(p)).collect();
        if files.is_empty() {
            match with.get("if-no-files-found").map(String::as_str).unwrap_or("warn") {
                "error" => problems.push(format!(
                    "No files were found with the provided path: {paths:?}. No artifacts will be uploaded."
                )),
                "ignore" => {}
                _ => run.annotations.push(Annotation {
                    level: "warning".into(),
                    title: None,
                    message: format!("No files were found with the provided path: {paths:?}"),
                }),
            }
        }
        let outcome = if problems.is_empty() { Outcome::Success } else { Outcome::Failure };
        for problem in &problems {
            run.annotations.push(Annotation { level: "error".into(), title: None, message: problem.clone() });
        }
        if outcome == Outcome::Success {
            run.uploads.push(Upload { name, paths, files });
        }
        StepRun {
            label,
            outcome,
            exit_code: None,
            stdout: String::new(),
            stderr: problems.join("\n"),
            outputs: BTreeMap::new(),
        }
    }
}

impl ActionRunner {
    /// The cache entries, oldest first: (directory, key, the `path:` lines they were saved with).
    fn cache_entries(&self) -> Vec<(PathBuf, String, Vec<String>)> {
        let mut entries: Vec<(usize, PathBuf)> = std::fs::read_dir(self.root.path().join("caches"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
            .collect();
        entries.sort();
        entries
            .into_iter()
            .map(|(_, dir)| {
                let meta: serde_json::Value =
                    serde_json::from_str(&read(&dir.join("entry.json"))).expect("cache entry");
                let paths = meta["paths"].as_array().expect("paths").iter().map(|p| p.as_str().unwrap().to_string());
                (dir.clone(), meta["key"].as_str().expect("key").to_string(), paths.collect())
            })
            .collect()
    }

    /// The `path:` lines of a cache step, and each as the directory it names (`~` is HOME, relative is
    /// in the workspace).
    fn cache_paths(&self, with: &BTreeMap<&str, String>, contexts: &Contexts) -> Vec<(String, PathBuf)> {
        let home = contexts.env.get("HOME").cloned().unwrap_or_default();
        let lines = input_lines(with, "path");
        assert!(!lines.is_empty(), "actions/cache: Input required and not supplied: path");
        lines
            .into_iter()
            .map(|line| {
                assert!(!line.contains(['*', '?', '!']), "cache path patterns ({line}) are not simulated");
                let path = match line.strip_prefix("~/") {
                    Some(rest) => Path::new(&home).join(rest),
                    None => self.workspace().join(line),
                };
                (line.to_string(), path)
            })
            .collect()
    }

    /// `uses: actions/cache/restore@v4`: the entry of `key`, else the newest whose key starts with the first
    /// `restore-keys` line that matches one — only entries saved with the same `path:` (GitHub's cache
    /// version) — copied into place. Outputs as the action sets them: `cache-primary-key` always,
    /// `cache-hit` (`true` on the exact key) and `cache-matched-key` only when an entry was restored.
    fn cache_restore(&self, label: String, with: &BTreeMap<&str, String>, contexts: &Contexts) -> StepRun {
        let key = with.get("key").cloned().unwrap_or_default();
        assert!(!key.is_empty(), "actions/cache/restore: Input required and not supplied: key");
        let paths = self.cache_paths(with, contexts);
        let lines: Vec<String> = paths.iter().map(|(line, _)| line.clone()).collect();
        let entries: Vec<_> = self.cache_entries().into_iter().filter(|(_, _, saved)| *saved == lines).collect();
        let prefixes = input_lines(with, "restore-keys");
        let found = entries.iter().rev().find(|(_, saved, _)| *saved == key).or_else(|| {
            prefixes.iter().find_map(|prefix| entries.iter().rev().find(|(_, saved, _)| saved.starts_with(prefix)))
        });
        let mut outputs = BTreeMap::from([("cache-primary-key".to_string(), key.clone())]);
        let stdout = match found {
            None => format!(
                "Cache not found for input keys: {}",
                [key.as_str()].into_iter().chain(prefixes).collect::<Vec<_>>().join(", ")
            ),
            Some((dir, matched, _)) => {
                for (index, (_, path)) in paths.iter().enumerate() {
                    copy_tree(&dir.join(index.to_string()), path);
                }
                outputs.insert("cache-hit".into(), (*matched == key).to_string());
                outputs.insert("cache-matched-key".into(), matched.clone());
                format!("Cache restored from key: {matched}")
            }
        };
        StepRun { label, outcome: Outcome::Success, exit_code: None, stdout, stderr: String::new(), outputs }
    }

    /// `uses: actions/cache/save@v4`: a new entry with the paths' files under `key`. As the action, it
    /// never fails the job: a key already saved or a path that does not exist is a warning.
    fn cache_save(
        &self,
        label: String,
        with: &BTreeMap<&str, String>,
        contexts: &Contexts,
        run: &mut ActionRun,
    ) -> StepRun {
        let key = with.get("key").cloned().unwrap_or_default();
        let paths = self.cache_paths(with, contexts);
        let problem = if key.is_empty() {
            Some("Key is not specified.".to_string())
        } else if self.cache_entries().iter().any(|(_, saved, _)| *saved == key) {
            Some(format!(
                "Failed to save: Unable to reserve cache with key {key}, another job may be creating this cache."
            ))
        } else if !paths.iter().any(|(_, path)| path.exists()) {
            Some("Path Validation Error: Path(s) specified in the action for caching do(es) not exist, hence no cache is being saved.".into())
        } else {
            None
        };
        let stdout = match &problem {
            Some(message) => {
                for warning in [message.as_str(), "Cache save failed."] {
                    run.annotations.push(Annotation { level: "warning".into(), title: None, message: warning.into() });
                }
                message.clone()
            }
            None => {
                let dir = self.root.path().join("caches").join(self.cache_entries().len().to_string());
                for (index, (_, path)) in paths.iter().enumerate() {
                    copy_tree(path, &dir.join(index.to_string()));
                }
                let lines: Vec<&String> = paths.iter().map(|(line, _)| line).collect();
                std::fs::write(dir.join("entry.json"), serde_json::json!({ "key": key, "paths": lines }).to_string())
                    .expect("cache entry");
                format!("Cache saved with key: {key}")
            }
        };
        StepRun {
            label,
            outcome: Outcome::Success,
            exit_code: None,
            stdout,
            stderr: String::new(),
            outputs: BTreeMap::new(),
        }
    }
}

/// The non-empty lines of an input, trimmed (the actions toolkit's `getInputAsArray`).
fn input_lines<'a>(with: &'a BTreeMap<&str, String>, name: &str) -> Vec<&'a str> {
    with.get(name).map(String::as_str).unwrap_or("").lines().map(str::trim).filter(|l| !l.is_empty()).collect()
}

/// Copies the tree at `from` into `to` (files, directories, symlinks as links), as a cache archive
/// carries it; nothing when `from` does not exist.
pub fn copy_tree(from: &Path, to: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(from) else { return };
    if meta.file_type().is_symlink() {
        let _ = std::fs::remove_file(to);
        std::os::unix::fs::symlink(std::fs::read_link(from).expect("read link"), to).expect("copy a link");
    } else if meta.is_dir() {
        std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
        for entry in std::fs::read_dir(from).expect("read a cached directory").flatten() {
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
    }
}

/// The files a step's script writes its outputs, environment, path and summary to.
struct StepFiles {
    dir: PathBuf,
    output: PathBuf,
    env: PathBuf,
    path: PathBuf,
    summary: PathBuf,
}

impl StepFiles {
    fn create(root: &Path, index: usize) -> StepFiles {
        let dir = root.join(format!("step-{index}"));
        std::fs::create_dir_all(&dir).expect("step directory");
        let files = StepFiles {
            output: dir.join("output"),
            env: dir.join("env"),
            path: dir.join("path"),
            summary: dir.join("step_summary"),
            dir,
        };
        for file in [&files.output, &files.env, &files.path, &files.summary] {
            std::fs::write(file, "").expect("step file");
        }
        files
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `name=value` lines and `name<<DELIMITER` … `DELIMITER` blocks, as GITHUB_OUTPUT and GITHUB_ENV hold them.
pub fn key_values(text: &str) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.is_empty() {
            continue;
        }
        let heredoc = line.split_once("<<").filter(|(name, _)| !name.contains('='));
        match (heredoc, line.split_once('=')) {
            (Some((name, delimiter)), _) => {
                let body: Vec<&str> = lines.by_ref().take_while(|l| *l != delimiter).collect();
                values.insert(name.to_string(), body.join("\n"));
            }
            (_, Some((name, value))) => {
                values.insert(name.to_string(), value.to_string());
            }
            _ => {
                panic!("a line of a GITHUB_OUTPUT/GITHUB_ENV file is neither name=value nor name<<DELIMITER: {line:?}")
            }
        }
    }
    values
}

/// The workflow commands among a step's stdout lines.
pub fn workflow_commands(stdout: &str) -> Vec<Annotation> {
    let unescape = |text: &str| text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%");
    let unescape_property = |text: &str| unescape(&text.replace("%3A", ":").replace("%2C", ","));
    stdout
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("::")?;
            let (command, message) = rest.split_once("::")?;
            let (level, properties) = command.split_once(' ').unwrap_or((command, ""));
            if !["error", "warning", "notice", "debug"].contains(&level) {
                return None;
            }
            let title = properties.split(',').find_map(|p| p.strip_prefix("title=")).map(unescape_property);
            Some(Annotation { level: level.to_string(), title, message: unescape(message) })
        })
        .collect()
}

/// The contexts expressions read.
#[derive(Debug, Default)]
struct Contexts {
    inputs: BTreeMap<String, String>,
    steps: BTreeMap<String, (Outcome, BTreeMap<String, String>)>,
    env: BTreeMap<String, String>,
    github: BTreeMap<String, String>,
    runner: BTreeMap<String, String>,
    /// The ids of the action's steps (a reference to another one is a mistake in action.yml).
    step_ids: Vec<String>,
    /// Whether a step before failed (for `success()` and `failure()`).
    failed: bool,
}

/// A value of an expression.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Null,
    Bool(bool),
    Number(f64),
    Text(String),
}

impl Value {
    fn truthy(&self) -> bool {
        match self {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => *n != 0.0 && !n.is_nan(),
            Value::Text(s) => !s.is_empty(),
        }
    }

    fn text(&self) -> String {
        match self {
            Value::Null => String::new(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.to_string(),
            Value::Text(s) => s.clone(),
        }
    }

    fn number(&self) -> f64 {
        match self {
            Value::Null => 0.0,
            Value::Bool(b) => f64::from(u8::from(*b)),
            Value::Number(n) => *n,
            Value::Text(s) if s.trim().is_empty() => 0.0,
            Value::Text(s) => s.trim().parse().unwrap_or(f64::NAN),
        }
    }

    /// GitHub's `==`: strings compare ignoring case; other pairs as numbers.
    fn equals(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Text(a), Value::Text(b)) => a.to_lowercase() == b.to_lowercase(),
            (Value::Null, Value::Null) => true,
            _ => self.number() == other.number(),
        }
    }
}

/// `text` with every `${{ expression }}` replaced by its value.
fn interpolate(text: &str, contexts: &Contexts) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").unwrap_or_else(|| panic!("unterminated ${{{{ in {text:?}")) + start;
        out.push_str(&evaluate(&rest[start + 3..end], contexts).text());
        rest = &rest[end + 2..];
    }
    out + rest
}

/// Whether a step runs: its `if:`, `success()` when it has none or names no status function.
fn condition_holds(condition: Option<&str>, contexts: &Contexts) -> bool {
    let Some(condition) = condition else {
        return !contexts.failed;
    };
    let expression = condition.trim();
    let expression = expression.strip_prefix("${{").and_then(|e| e.strip_suffix("}}")).unwrap_or(expression);
    let tokens = tokenize(expression);
    let names_status = tokens
        .iter()
        .any(|t| matches!(t, Token::Name(n) if ["always", "success", "failure", "cancelled"].contains(&n.as_str())));
    let value = evaluate(expression, contexts).truthy();
    if names_status {
        value
    } else {
        !contexts.failed && value
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Name(String),
    Text(String),
    Number(f64),
    Operator(&'static str),
}

fn tokenize(expression: &str) -> Vec<Token> {
    let chars: Vec<char> = expression.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '\'' {
            let mut text = String::new();
            i += 1;
            loop {
                assert!(i < chars.len(), "unterminated string in {expression:?}");
                if chars[i] == '\'' && chars.get(i + 1) == Some(&'\'') {
                    text.push('\'');
                    i += 2;
                } else if chars[i] == '\'' {
                    i += 1;
                    break;
                } else {
                    text.push(chars[i]);
                    i += 1;
                }
            }
            tokens.push(Token::Text(text));
        } else if let Some(op) = ["==", "!=", "&&", "||", "(", ")", "!"]
            .into_iter()
            .find(|op| chars[i..].starts_with(&op.chars().collect::<Vec<_>>()))
        {
            tokens.push(Token::Operator(op));
            i += op.len();
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            tokens.push(Token::Number(chars[start..i].iter().collect::<String>().parse().expect("number")));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || ['_', '-', '.'].contains(&chars[i])) {
                i += 1;
            }
            tokens.push(Token::Name(chars[start..i].iter().collect()));
        } else {
            panic!("the simulated runner cannot read {c:?} in the expression {expression:?}");
        }
    }
    tokens
}

/// Evaluates one expression (without its `${{ }}`).
fn evaluate(expression: &str, contexts: &Contexts) -> Value {
    let tokens = tokenize(expression);
    let mut parser = Parser { tokens: &tokens, at: 0, contexts, expression };
    let value = parser.or();
    assert_eq!(parser.at, tokens.len(), "unexpected {:?} in the expression {expression:?}", tokens.get(parser.at));
    value
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    contexts: &'a Contexts,
    expression: &'a str,
}

impl Parser<'_> {
    fn eat(&mut self, op: &'static str) -> bool {
        let found = self.tokens.get(self.at) == Some(&Token::Operator(op));
        self.at += usize::from(found);
        found
    }

    fn or(&mut self) -> Value {
        let mut left = self.and();
        while self.eat("||") {
            let right = self.and();
            left = if left.truthy() { left } else { right };
        }
        left
    }

    fn and(&mut self) -> Value {
        let mut left = self.comparison();
        while self.eat("&&") {
            let right = self.comparison();
            left = if left.truthy() { right } else { left };
        }
        left
    }

    fn comparison(&mut self) -> Value {
        let left = self.unary();
        if self.eat("==") {
            let right = self.unary();
            return Value::Bool(left.equals(&right));
        }
        if self.eat("!=") {
            let right = self.unary();
            return Value::Bool(!left.equals(&right));
        }
        left
    }

    fn unary(&mut self) -> Value {
        if self.eat("!") {
            return Value::Bool(!self.unary().truthy());
        }
        if self.eat("(") {
            let value = self.or();
            assert!(self.eat(")"), "missing ) in {:?}", self.expression);
            return value;
        }
        let token = self
            .tokens
            .get(self.at)
            .cloned()
            .unwrap_or_else(|| panic!("the expression {:?} ends early", self.expression));
        self.at += 1;
        match token {
            Token::Text(text) => Value::Text(text),
            Token::Number(n) => Value::Number(n),
            Token::Name(name) if self.eat("(") => {
                assert!(
                    self.eat(")"),
                    "the simulated runner knows only status functions without arguments, not {name}(… in {:?}",
                    self.expression
                );
                match name.as_str() {
                    "always" => Value::Bool(true),
                    "success" => Value::Bool(!self.contexts.failed),
                    "failure" => Value::Bool(self.contexts.failed),
                    "cancelled" => Value::Bool(false),
                    other => {
                        panic!("the simulated runner does not know the function {other}() in {:?}", self.expression)
                    }
                }
            }
            Token::Name(name) => self.lookup(&name),
            Token::Operator(op) => panic!("unexpected {op} in {:?}", self.expression),
        }
    }

    /// A context value: `inputs.x`, `steps.id.outputs.x`, `steps.id.outcome`, `env.X`, `github.x`, `runner.x`.
    fn lookup(&self, name: &str) -> Value {
        let parts: Vec<&str> = name.split('.').collect();
        let c = self.contexts;
        match parts.as_slice() {
            ["true"] => Value::Bool(true),
            ["false"] => Value::Bool(false),
            ["null"] => Value::Null,
            ["inputs", input] => Value::Text(
                c.inputs
                    .get(*input)
                    .unwrap_or_else(|| panic!("{name}: action.yml declares no input {input:?}"))
                    .clone(),
            ),
            ["steps", id, rest @ ..] => match (c.steps.get(*id), rest) {
                (Some((_, outputs)), ["outputs", output]) => {
                    outputs.get(*output).map_or(Value::Null, |v| Value::Text(v.clone()))
                }
                (Some((outcome, _)), ["outcome" | "conclusion"]) => Value::Text(outcome.name().into()),
                (None, _) if c.step_ids.iter().any(|declared| declared == id) => Value::Null,
                (None, _) => panic!("{name}: action.yml has no step with id {id:?}"),
                _ => panic!("the simulated runner cannot read {name}"),
            },
            ["env", variable] => c.env.get(*variable).map_or(Value::Null, |v| Value::Text(v.clone())),
            ["github", field] => Value::Text(
                c.github.get(*field).unwrap_or_else(|| panic!("the simulated runner has no {name}")).clone(),
            ),
            ["runner", field] => Value::Text(
                c.runner.get(*field).unwrap_or_else(|| panic!("the simulated runner has no {name}")).clone(),
            ),
            _ => panic!("the simulated runner does not know the context {name} (in {:?})", self.expression),
        }
    }
}
