//! A GitLab CI pipeline, simulated: reads a project's `.gitlab-ci.yml` with its `include:`s, resolves a
//! job as GitLab does, and runs its script as the runner's shell executor does, without GitLab.
//!
//! What it does as GitLab does: `include:` of `local:` files and of `project:`/`file:` (the project is
//! mapped to a directory on this machine, as if GitLab had fetched the file from it), included files
//! merged under the including one, `extends:` merged deeply (hashes merged key by key, everything else
//! replaced), variables with their precedence (predefined < global `variables:` < the job's < a
//! `parallel:matrix` entry < pipeline variables) and `$NAME`/`${NAME}` expanded in their values; the
//! job's `before_script` and `script` lines run in one bash (`set -eo pipefail`) in `CI_PROJECT_DIR`,
//! stderr into the same log, `after_script` in another; artifacts collected by `artifacts:when`
//! (`paths`, `reports:junit`, `reports:dotenv` — a pattern matching nothing is a warning, as the
//! runner logs it; the dotenv report parsed into the variables later jobs get); `cache:` (`key`,
//! `paths`, `when`) extracted before the script and created after it per `when`, in a cache the
//! pipeline keeps for all its jobs (the runner's local cache), with the runner's log lines. `rules:`
//! are not evaluated: the test chooses the job. Unknown include kinds panic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value};

/// Reads a YAML file as JSON values (GitLab CI files use plain YAML: no tags here).
pub fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()))
}

/// A project's pipeline configuration, its includes merged in.
pub struct Pipeline {
    project_dir: PathBuf,
    config: Map<String, Value>,
    /// The runner's cache: one directory per cache key.
    cache: tempfile::TempDir,
}

/// A job as GitLab resolved it.
#[derive(Debug, Clone)]
pub struct Job {
    /// Its name.
    pub name: String,
    /// Its resolved configuration (after `extends:`).
    pub config: Map<String, Value>,
    /// Global and job variables, in precedence order applied (job over global).
    pub variables: BTreeMap<String, String>,
}

/// A job run to its end.
#[derive(Debug)]
pub struct JobRun {
    /// The script's exit code (0 = the job succeeded).
    pub exit_code: i32,
    /// The job log: every line the scripts printed, stdout and stderr interleaved.
    pub log: String,
    /// Files the artifact holds.
    pub artifacts: Vec<PathBuf>,
    /// JUnit reports GitLab would parse.
    pub junit: Vec<PathBuf>,
    /// Variables of the dotenv report.
    pub dotenv: BTreeMap<String, String>,
    /// What the runner warned about (a path or report pattern matching nothing).
    pub warnings: Vec<String>,
}

impl JobRun {
    /// Everything about the run, for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "exit {}\n--- log\n{}\n--- artifacts {:?}\n--- junit {:?}\n--- dotenv {:?}\n--- warnings {:?}",
            self.exit_code, self.log, self.artifacts, self.junit, self.dotenv, self.warnings
        )
    }
}

/// Merges `overlay` into `base` as GitLab merges `extends:` and includes: hashes deeply, the rest replaced.
fn deep_merge(base: &mut Map<String, Value>, overlay: &Map<String, Value>) {
    for (key, value) in overlay {
        match (base.get_mut(key), value) {
            (Some(Value::Object(into)), Value::Object(from)) => deep_merge(into, from),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// One value as a string (YAML scalars: strings, numbers, booleans).
fn scalar(value: &Value, what: &str) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => panic!("{what}: {other} is not a scalar"),
    }
}

/// A list of strings that may be given as one string.
fn strings(value: Option<&Value>, what: &str) -> Vec<String> {
    match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.iter().map(|item| scalar(item, what)).collect(),
        Some(other) => vec![scalar(other, what)],
    }
}

impl Pipeline {
    /// Loads `ci_file` of the project in `project_dir`; `projects` maps the `project:` of an include to
    /// a directory holding that project's files.
    pub fn load(project_dir: &Path, ci_file: &Path, projects: &[(&str, &Path)]) -> Pipeline {
        let Value::Object(main) = yaml(ci_file) else { panic!("{} is not a mapping", ci_file.display()) };
        let mut config = Map::new();
        let includes = match main.get("include") {
            None => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(item) => vec![item.clone()],
        };
        for include in includes {
            let file = match &include {
                Value::String(local) => project_dir.join(local.trim_start_matches('/')),
                Value::Object(item) if item.contains_key("local") => {
                    project_dir.join(scalar(&item["local"], "include:local").trim_start_matches('/'))
                }
                Value::Object(item) if item.contains_key("project") => {
                    let project = scalar(&item["project"], "include:project");
                    let (_, dir) = projects
                        .iter()
                        .find(|(name, _)| *name == project)
                        .unwrap_or_else(|| panic!("include of project {project}: no directory given for it"));
                    dir.join(scalar(&item["file"], "include:file").trim_start_matches('/'))
                }
                other => panic!("the simulated pipeline does not include {other}"),
            };
            let Value::Object(included) = yaml(&file) else { panic!("{} is not a mapping", file.display()) };
            deep_merge(&mut config, &included);
        }
        let mut main = main;
        main.remove("include");
        deep_merge(&mut config, &main);
        let cache = tempfile::Builder::new().prefix("gitlab-cache-").tempdir().expect("cache directory");
        Pipeline { project_dir: project_dir.to_path_buf(), config, cache }
    }

    /// The job `name`, its `extends:` resolved.
    pub fn job(&self, name: &str) -> Job {
        let config = self.resolve(name, 0);
        let mut variables = BTreeMap::new();
        for source in [self.config.get("variables"), config.get("variables")].into_iter().flatten() {
            let Value::Object(map) = source else { panic!("variables of {name} are not a mapping") };
            for (key, value) in map {
                let value = match value {
                    Value::Object(full) => scalar(&full["value"], key),
                    other => scalar(other, key),
                };
                variables.insert(key.clone(), value);
            }
        }
        Job { name: name.to_string(), config, variables }
    }

    fn resolve(&self, name: &str, depth: usize) -> Map<String, Value> {
        assert!(depth < 11, "extends of {name} nest deeper than GitLab allows (11)");
        let Some(Value::Object(job)) = self.config.get(name) else { panic!("the pipeline has no job {name}") };
        let mut resolved = Map::new();
        for parent in strings(job.get("extends"), "extends") {
            deep_merge(&mut resolved, &self.resolve(&parent, depth + 1));
        }
        deep_merge(&mut resolved, job);
        resolved.remove("extends");
        resolved
    }

    /// Runs `job`: `matrix` picks one `parallel:matrix` combination, `pipeline_variables` are the
    /// pipeline's own (they override the file's); `launcher` makes the command that starts the shell.
    pub fn run(
        &self,
        job: &Job,
        matrix: &[(&str, &str)],
        pipeline_variables: &[(&str, &str)],
        launcher: &dyn Fn(&Path) -> Command,
    ) -> JobRun {
        let mut variables: BTreeMap<String, String> = [
            ("CI", "true".to_string()),
            ("GITLAB_CI", "true".to_string()),
            ("CI_PROJECT_DIR", self.project_dir.display().to_string()),
            ("CI_JOB_NAME", job.name.clone()),
            ("CI_PIPELINE_SOURCE", "merge_request_event".to_string()),
            ("CI_SERVER_URL", "https://gitlab.example".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        variables.extend(job.variables.clone());
        if !matrix.is_empty() {
            let entries = job
                .config
                .get("parallel")
                .and_then(|p| p.get("matrix"))
                .and_then(Value::as_array)
                .unwrap_or_else(|| panic!("job {} has no parallel:matrix", job.name));
            let offered = entries.iter().any(|entry| {
                matrix.iter().all(|(key, value)| strings(entry.get(*key), key).iter().any(|v| v == value))
            });
            assert!(offered, "job {}'s parallel:matrix offers no combination {matrix:?}", job.name);
            variables.extend(matrix.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        }
        variables.extend(pipeline_variables.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let variables = expand_all(&variables);

        let lines: Vec<String> =
            ["before_script", "script"].iter().flat_map(|key| strings(job.config.get(*key), key)).collect();
        assert!(!lines.is_empty(), "job {} has no script", job.name);
        let cache = job.config.get("cache");
        let mut log = cache.map(|cache| self.extract_cache(cache, &variables)).unwrap_or_default();
        let (exit_code, script_log) = self.shell(&lines, &variables, launcher);
        log += &script_log;
        let after = strings(job.config.get("after_script"), "after_script");
        if !after.is_empty() {
            log += &self.shell(&after, &variables, launcher).1;
        }
        if let Some(cache) = cache {
            log += &self.create_cache(cache, &variables, exit_code);
        }
        let mut run = JobRun {
            exit_code,
            log,
            artifacts: Vec::new(),
            junit: Vec::new(),
            dotenv: BTreeMap::new(),
            warnings: Vec::new(),
        };
        self.collect_artifacts(job, &mut run);
        run
    }

    /// Runs `lines` in one bash as the shell executor does; the exit code and the log.
    fn shell(
        &self,
        lines: &[String],
        variables: &BTreeMap<String, String>,
        launcher: &dyn Fn(&Path) -> Command,
    ) -> (i32, String) {
        let mut script = String::from("exec 2>&1\nset -eo pipefail\nset +o noclobber\n");
        for line in lines {
            script += &format!("printf '%s\\n' {}\n{line}\n", shell_quote(&format!("$ {line}")));
        }
        let file = tempfile::Builder::new().prefix("gitlab-job-").suffix(".sh").tempfile().expect("script file");
        std::fs::write(file.path(), script).expect("write the job script");
        let mut command = launcher(Path::new("bash"));
        command.arg(file.path()).env_clear().envs(variables).current_dir(&self.project_dir);
        for name in crate::RUNNER_ENV {
            if let (Some(value), false) = (std::env::var_os(name), variables.contains_key(name)) {
                command.env(name, value);
            }
        }
        let output = crate::run(&mut command);
        (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// The cache of `cache:key` (variables expanded; `default` when none) in the runner's cache.
    fn cache_entry(&self, cache: &Value, variables: &BTreeMap<String, String>) -> (String, PathBuf) {
        let key = cache.get("key").map(|k| expand(&scalar(k, "cache:key"), variables)).unwrap_or("default".into());
        assert!(!key.contains('/') && key != "." && key != "..", "GitLab refuses the cache key {key:?}");
        let entry = self.cache.path().join(&key);
        (key, entry)
    }

    /// Extracts the job's cache into the project, as the runner does before the job; its log lines.
    fn extract_cache(&self, cache: &Value, variables: &BTreeMap<String, String>) -> String {
        let (key, entry) = self.cache_entry(cache, variables);
        if !entry.is_dir() {
            return format!("Checking cache for {key}...\nWARNING: file does not exist\nFailed to extract cache\n");
        }
        crate::actions::copy_tree(&entry, &self.project_dir);
        format!("Checking cache for {key}...\nSuccessfully extracted cache\n")
    }

    /// Creates the job's cache from its `paths` when `when` says so (default `on_success`), replacing
    /// the key's former content; its log lines.
    fn create_cache(&self, cache: &Value, variables: &BTreeMap<String, String>, exit_code: i32) -> String {
        let when = cache.get("when").and_then(Value::as_str).unwrap_or("on_success");
        let now = match when {
            "always" => true,
            "on_success" => exit_code == 0,
            "on_failure" => exit_code != 0,
            other => panic!("cache:when {other}"),
        };
        if !now {
            return String::new();
        }
        let (key, entry) = self.cache_entry(cache, variables);
        let mut log = format!("Creating cache {key}...\n");
        let _ = std::fs::remove_dir_all(&entry);
        for pattern in strings(cache.get("paths"), "cache:paths") {
            let found = glob(&self.project_dir, &pattern);
            if found.is_empty() {
                log += &format!("WARNING: {pattern}: no matching files\n");
            }
            for path in found {
                let relative = path.strip_prefix(&self.project_dir).expect("cache paths are in the project");
                crate::actions::copy_tree(&path, &entry.join(relative));
            }
        }
        log + "Created cache\n"
    }

    /// Collects the artifact, JUnit and dotenv reports as `artifacts:` says.
    fn collect_artifacts(&self, job: &Job, run: &mut JobRun) {
        let Some(artifacts) = job.config.get("artifacts") else { return };
        let when = artifacts.get("when").and_then(Value::as_str).unwrap_or("on_success");
        let collect = match when {
            "always" => true,
            "on_success" => run.exit_code == 0,
            "on_failure" => run.exit_code != 0,
            other => panic!("artifacts:when {other}"),
        };
        if !collect {
            return;
        }
        let matched = |pattern: &str, kind: &str, run: &mut JobRun| {
            let found = glob(&self.project_dir, pattern);
            if found.is_empty() {
                run.warnings.push(format!("{kind} {pattern}: no matching files"));
            }
            found
        };
        for pattern in strings(artifacts.get("paths"), "artifacts:paths") {
            let found = matched(&pattern, "artifacts:paths", run);
            run.artifacts.extend(found.iter().flat_map(|p| crate::files_under(p)));
        }
        let reports = artifacts.get("reports");
        for pattern in strings(reports.and_then(|r| r.get("junit")), "reports:junit") {
            let found = matched(&pattern, "reports:junit", run);
            run.junit.extend(found);
        }
        for pattern in strings(reports.and_then(|r| r.get("dotenv")), "reports:dotenv") {
            for file in matched(&pattern, "reports:dotenv", run) {
                let text = std::fs::read_to_string(&file).expect("dotenv report");
                for line in text.lines().filter(|l| !l.trim().is_empty()) {
                    let (key, value) =
                        line.split_once('=').unwrap_or_else(|| panic!("dotenv line without =: {line:?}"));
                    assert!(
                        !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                        "GitLab refuses the dotenv key {key:?} of {}",
                        file.display()
                    );
                    run.dotenv.insert(key.to_string(), value.to_string());
                }
            }
        }
    }
}

/// `$NAME` and `${NAME}` in every value replaced by the variable's value (unknown: empty), as the
/// runner expands variables that refer to others.
fn expand_all(variables: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    variables.iter().map(|(k, v)| (k.clone(), expand(v, variables))).collect()
}

/// `value` with `$NAME` and `${NAME}` replaced by the variables' values (unknown: empty).
fn expand(value: &str, variables: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let chars: Vec<char> = value.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '$' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let braced = chars.get(i + 1) == Some(&'{');
        let start = i + 1 + usize::from(braced);
        let mut end = start;
        while end < chars.len() && (chars[end].is_ascii_alphanumeric() || chars[end] == '_') {
            end += 1;
        }
        if end == start {
            out.push('$');
            i += 1;
            continue;
        }
        let name: String = chars[start..end].iter().collect();
        out += variables.get(&name).map(String::as_str).unwrap_or("");
        i = end + usize::from(braced);
    }
    out
}

/// `text` quoted for bash.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Paths under `root` matching `pattern` (`*` within one path component; a trailing `/` matches a directory).
fn glob(root: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut found = vec![root.to_path_buf()];
    for part in pattern.trim_end_matches('/').split('/') {
        found = found
            .into_iter()
            .flat_map(|dir| {
                if !part.contains('*') {
                    return vec![dir.join(part)].into_iter().filter(|p| p.exists()).collect::<Vec<_>>();
                }
                let mut matches: Vec<PathBuf> = std::fs::read_dir(&dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter(|entry| wildcard(part, &entry.file_name().to_string_lossy()))
                    .map(|entry| entry.path())
                    .collect();
                matches.sort();
                matches
            })
            .collect();
    }
    found
}

/// `*` matching any run of characters.
fn wildcard(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((prefix, rest)) => {
            name.starts_with(prefix)
                && (0..=name.len() - prefix.len()).any(|skip| {
                    name.is_char_boundary(prefix.len() + skip) && wildcard(rest, &name[prefix.len() + skip..])
                })
        }
    }
}
