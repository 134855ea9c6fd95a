//! Result directories on the host: where a run's result goes by default, and how it gets there.
//! A run is built in a staging directory next to its destination and moved into place when it
//! ends, so a run that fails leaves nothing that makes the next one refuse the directory, and a
//! complete result is only ever replaced by a complete one. Every file name lives in
//! [`npugate_result::files`].

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use npugate_onnx::genai::GENAI_CONFIG;
use npugate_result::{contract, files};

/// What proves a directory is npugate's own before npugate replaces, clears or writes into it: a
/// JSON document in it whose `schema` is npugate's (its marker), or — for a directory an
/// interrupted run left — nothing but names npugate writes there and directories that are
/// themselves npugate result directories. Anything else is the user's: refused, naming the path.
#[derive(Debug, Clone, Copy)]
pub struct Ownership {
    /// The document that marks a finished directory (`result.json`, `manifest.json`, …).
    pub marker: &'static str,
    /// What such a directory is, for messages (`npugate result`, `evidence bundle`, …).
    pub what: &'static str,
    /// Other names npugate writes there (a name ending in `*` is a prefix).
    pub own_names: &'static [&'static str],
}

/// A result directory of one run (`result.json`).
pub const RESULT_DIR: Ownership = Ownership { marker: files::RESULT, what: "npugate result", own_names: OWN_LEFTOVERS };

impl Ownership {
    /// Checks that `dir` may be taken over: missing, empty or npugate's (see [`Ownership`]).
    pub fn check(&self, dir: &Path, option: &str) -> Result<()> {
        if !dir.exists() {
            return Ok(());
        }
        if !dir.is_dir() {
            bail!("{} is a file; {option} needs a directory", dir.display());
        }
        let marker = dir.join(self.marker);
        if contract::is_npugate_document(&marker) {
            return Ok(());
        }
        if marker.exists() {
            bail!(
                "{} holds no {}: its {} is not npugate's (no npugate schema); nothing was changed — choose another {option}",
                dir.display(),
                self.what,
                self.marker
            );
        }
        for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
            let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let named = self
                .own_names
                .iter()
                .any(|own| own.strip_suffix('*').map_or(*own == name, |prefix| name.starts_with(prefix)));
            let result_dir = entry.path().is_dir() && contract::is_npugate_document(&entry.path().join(files::RESULT));
            if !(named || result_dir || name.starts_with(".tmp-") || name.contains(".staging-")) {
                bail!(
                    "{} is not empty and holds no {} ({name} is not npugate's, and there is no {} of npugate's); \
                     nothing was changed — choose another {option}",
                    dir.display(),
                    self.what,
                    self.marker
                );
            }
        }
        Ok(())
    }

    /// Makes `dir` an empty directory: missing, or npugate's (removed first); else refused.
    pub fn replace(&self, dir: &Path, option: &str) -> Result<()> {
        self.check(dir, option)?;
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("cannot replace {}", dir.display()))?;
        }
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
    }
}

/// Checks that npugate may write the file `path` (named by `option` in messages): it is missing,
/// or a file npugate wrote ([`written_by_npugate`]) that is none of the command's `inputs`.
/// Anything else — the user's file, a directory, the command's own input — is refused in one line
/// naming the path; nothing is changed. The one rule every command that writes a file follows.
pub fn check_file(path: &Path, option: &str, inputs: &[&Path]) -> Result<()> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    refuse_input(path, option, inputs)?;
    if path.is_dir() {
        bail!("{option} {} is a directory; nothing was changed — name a file", path.display());
    }
    if !written_by_npugate(path) {
        bail!(
            "{option} {} exists and is not a file npugate wrote; nothing was changed — choose another {option} or move it away",
            path.display()
        );
    }
    Ok(())
}

/// Checks that npugate may write files into the folder `dir` (a compiled model folder): it is
/// missing or empty, or every model in it is one npugate wrote (each `.onnx` carries npugate's
/// metadata) and every other file is npugate's or a context binary (`.bin`) beside them; and it
/// is none of the command's `inputs`. Else refused in one line naming the folder.
pub fn check_model_folder(dir: &Path, option: &str, inputs: &[&Path]) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    refuse_input(dir, option, inputs)?;
    if !dir.is_dir() {
        bail!("{} is a file; {option} needs a folder; nothing was changed", dir.display());
    }
    let mut models = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry.with_context(|| format!("cannot read {}", dir.display()))?.path();
        let onnx = path.extension().is_some_and(|ext| ext == "onnx");
        models += usize::from(onnx);
        let beside = !onnx
            && (path.extension().is_some_and(|ext| ext == "bin") || path.file_name() == Some(GENAI_CONFIG.as_ref()));
        if !(path.is_file() && (beside || written_by_npugate(&path))) {
            bail!(
                "{option} {} holds {}, which npugate did not write; nothing was changed — choose another {option}",
                dir.display(),
                path.display()
            );
        }
    }
    if models == 0 && std::fs::read_dir(dir).map(|mut entries| entries.next().is_some()).unwrap_or(true) {
        bail!(
            "{option} {} is not empty and holds no model npugate wrote; nothing was changed — choose another {option}",
            dir.display()
        );
    }
    Ok(())
}

/// Refuses `path` when it is one of the command's `inputs` (npugate never writes over its input).
fn refuse_input(path: &Path, option: &str, inputs: &[&Path]) -> Result<()> {
    match inputs.iter().find(|input| same_file(path, input)) {
        Some(input) => bail!(
            "{option} {} is the command's own input {}; nothing was changed — choose another {option}",
            path.display(),
            input.display()
        ),
        None => Ok(()),
    }
}

/// True when `a` and `b` name the same existing file (through links or different spellings).
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// True when the file at `path` is recognisably npugate's: a JSON document with npugate's
/// `schema` (the only proof a `.json` gives); an ONNX model carrying npugate's `metadata_props` (`npugate.*`, e.g. a compiled
/// model's `npugate.compiled_for.*`); an ed25519 key file in the PEM form `npugate keygen` writes;
/// or a report (markdown, JUnit, HTML, GitHub annotations, text) whose first 4 KiB name npugate.
pub fn written_by_npugate(path: &Path) -> bool {
    if contract::is_npugate_document(path) {
        return true;
    }
    if path.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("json")) {
        return false;
    }
    if path.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("onnx")) {
        return npugate_onnx::Model::read(path)
            .is_ok_and(|model| model.metadata_entries().any(|(key, _)| key.starts_with("npugate.")));
    }
    let Ok(file) = std::fs::File::open(path) else { return false };
    let mut head = Vec::with_capacity(4096);
    if std::io::Read::read_to_end(&mut std::io::Read::take(file, 4096), &mut head).is_err() || head.contains(&0) {
        return false;
    }
    let text = String::from_utf8_lossy(&head);
    let key_headers = ["-----BEGIN PRIVATE KEY-----", "-----BEGIN PUBLIC KEY-----"];
    key_headers.iter().any(|header| text.starts_with(header)) || text.contains("npugate")
}

/// Names npugate itself leaves in a result directory, besides `result.json`: a directory holding
/// only these (e.g. the `ort.log` of a run that failed before measuring) is npugate's own and may
/// be replaced.
const OWN_LEFTOVERS: &[&str] = &[
    files::ORT_LOG,
    files::HARNESS_STDOUT,
    files::HARNESS_STDERR,
    files::PROFILE,
    files::PROFILE_UNCOMPRESSED,
    files::REFERENCE_PROFILE,
    files::REFERENCE_PROFILE_UNCOMPRESSED,
    files::QNN_PROFILE,
    files::OUTPUTS_DIR,
    files::OUTPUT_REFERENCE_DIR,
    ".qemu-cpuinfo",
    "result.json.tmp",
];

/// Links every file below `from` into `to` (hard links; copies where linking fails), keeping the
/// tree, except the top-level files named in `rewritten` (the caller writes them anew, and writing
/// through a hard link would change the attempt's own copy).
pub fn link_tree(from: &Path, to: &Path, rewritten: &[&str]) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))? {
        let entry = entry?;
        if rewritten.iter().any(|name| entry.file_name() == *name) {
            continue;
        }
        let (source, target): (PathBuf, PathBuf) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            link_tree(&source, &target, &[])?;
        } else if std::fs::hard_link(&source, &target).is_err() {
            std::fs::copy(&source, &target)
                .with_context(|| format!("cannot copy {} to {}", source.display(), target.display()))?;
        }
    }
    Ok(())
}

/// A result directory under construction next to its destination.
#[derive(Debug)]
pub struct Staging {
    dir: tempfile::TempDir,
    out: PathBuf,
}

/// Where a staged result went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// Into the destination.
    Out(PathBuf),
    /// Beside a complete result it must not replace (`<out>.incomplete`).
    Beside(PathBuf),
}

impl Placed {
    /// The directory the result is in now.
    pub fn dir(&self) -> &Path {
        match self {
            Placed::Out(dir) | Placed::Beside(dir) => dir,
        }
    }
}

impl Staging {
    /// Checks that `out` may take a result (missing, empty, or npugate's own, [`RESULT_DIR`]) and
    /// makes an empty staging directory next to it.
    pub fn next_to(out: &Path) -> Result<Staging> {
        RESULT_DIR.check(out, "--out")?;
        let parent = match out.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).with_context(|| format!("cannot create {}", parent.display()))?;
        let dir = tempfile::Builder::new()
            .prefix(&format!(".{}.staging-", leaf(out)))
            .tempdir_in(&parent)
            .with_context(|| format!("cannot create a staging directory in {}", parent.display()))?;
        Ok(Staging { dir, out: out.to_path_buf() })
    }

    /// The staging directory (empty when made).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The destination.
    pub fn out(&self) -> &Path {
        &self.out
    }

    /// Moves the staged result into place: into the destination when it is `complete` or the
    /// destination holds no complete result; else beside it as `<out>.incomplete`, so nothing
    /// measured is lost and nothing complete is replaced by less.
    pub fn commit(self, complete: bool) -> Result<Placed> {
        let placed = if complete || !holds_complete_result(&self.out) {
            Placed::Out(self.out.clone())
        } else {
            Placed::Beside(self.out.with_file_name(format!("{}.incomplete", leaf(&self.out))))
        };
        let destination = placed.dir();
        if destination.exists() {
            std::fs::remove_dir_all(destination)
                .with_context(|| format!("cannot replace {}", destination.display()))?;
        }
        let staged = self.dir.keep();
        std::fs::rename(&staged, destination).with_context(|| {
            format!("cannot move the result from {} to {}", staged.display(), destination.display())
        })?;
        Ok(placed)
    }
}

/// Removes staging directories of `out` that a killed npugate left next to it (a sweep cell's
/// directory belongs to one device's worker, so nothing else is staging there).
pub fn remove_stale_staging(out: &Path) {
    let (Some(parent), prefix) = (out.parent(), format!(".{}.staging-", leaf(out))) else { return };
    for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// True when `dir` holds a result whose status is complete.
fn holds_complete_result(dir: &Path) -> bool {
    npugate_result::RunResult::read(dir).is_ok_and(|run| run.status == npugate_result::RunStatus::Complete)
}

fn leaf(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "result".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model with the given `metadata_props`, written to `path`.
    fn onnx_with(path: &Path, metadata: &[(&str, &str)]) {
        let graph = Some(npugate_onnx::proto::GraphProto::default());
        let mut model = npugate_onnx::Model::from(npugate_onnx::proto::ModelProto { graph, ..Default::default() });
        for (key, value) in metadata {
            model.set_metadata(key, value);
        }
        std::fs::write(path, model.to_bytes().unwrap()).unwrap();
    }

    #[test]
    fn a_file_is_replaced_only_when_npugate_wrote_it_and_never_an_input() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        std::fs::write(at("notes.txt"), "my notes").unwrap();
        std::fs::write(at("mine.json"), r#"{"schema": "mine/1"}"#).unwrap();
        std::fs::write(at("verdict.json"), r#"{"schema": "npugate.verdict/3"}"#).unwrap();
        std::fs::write(at("report.md"), "## npugate gate: PASS\n").unwrap();
        std::fs::write(at("key"), "-----BEGIN PRIVATE KEY-----\nMC4CAQ==\n-----END PRIVATE KEY-----\n").unwrap();
        onnx_with(&at("m.onnx"), &[("author", "me")]);
        onnx_with(&at("m_ctx.onnx"), &[("npugate.compiled_for.soc", "SM8650")]);
        std::fs::create_dir(at("folder")).unwrap();
        for name in ["missing.onnx", "verdict.json", "report.md", "key", "m_ctx.onnx"] {
            check_file(&at(name), "--out", &[&at("m.onnx")]).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        }
        let refused =
            |name: &str, inputs: &[&Path]| format!("{:#}", check_file(&at(name), "--out", inputs).unwrap_err());
        for name in ["notes.txt", "mine.json", "m.onnx"] {
            assert!(refused(name, &[]).contains("is not a file npugate wrote; nothing was changed"), "{name}");
        }
        assert!(refused("folder", &[]).contains("is a directory"));
        let own = refused("m_ctx.onnx", &[&at("./m_ctx.onnx")]);
        assert!(own.contains("is the command's own input"), "{own}");
        assert_eq!(std::fs::read_to_string(at("notes.txt")).unwrap(), "my notes");
    }

    #[test]
    fn a_model_folder_is_written_into_only_when_its_models_are_npugate_s() {
        let dir = tempfile::tempdir().unwrap();
        let (ours, theirs, source) = (dir.path().join("ours"), dir.path().join("theirs"), dir.path().join("src"));
        for folder in [&ours, &theirs, &source] {
            std::fs::create_dir(folder).unwrap();
            std::fs::write(folder.join("genai_config.json"), "{}").unwrap();
            std::fs::write(folder.join("ctx.bin"), [0u8; 4]).unwrap();
        }
        onnx_with(&ours.join("token_ctx.onnx"), &[("npugate.compiled_for.soc", "SM8650")]);
        onnx_with(&theirs.join("token.onnx"), &[]);
        check_model_folder(&ours, "--out", &[&source]).unwrap();
        check_model_folder(&dir.path().join("new"), "--out", &[&source]).unwrap();
        let message = format!("{:#}", check_model_folder(&theirs, "--out", &[&source]).unwrap_err());
        assert!(message.contains("token.onnx, which npugate did not write"), "{message}");
        let message = format!("{:#}", check_model_folder(&source, "--out", &[&source]).unwrap_err());
        assert!(message.contains("own input"), "{message}");
    }

    fn result_with_status(dir: &Path, status: &str) {
        let template = crate::targets::mock::template_dir();
        std::fs::create_dir_all(dir).unwrap();
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(template.join(files::RESULT)).unwrap()).unwrap();
        json["status"] = status.into();
        std::fs::write(dir.join(files::RESULT), serde_json::to_vec(&json).unwrap()).unwrap();
    }

    #[test]
    fn a_failed_run_leaves_nothing_and_the_next_one_lands() {
        let work = tempfile::tempdir().unwrap();
        let out = work.path().join("npugate-results/m/local");
        let failed = Staging::next_to(&out).unwrap();
        std::fs::write(failed.path().join(files::ORT_LOG), "log").unwrap();
        drop(failed);
        assert!(!out.exists());
        assert_eq!(std::fs::read_dir(out.parent().unwrap()).unwrap().count(), 0, "the staging dir is gone");
        let good = Staging::next_to(&out).unwrap();
        result_with_status(good.path(), "complete");
        assert_eq!(good.commit(true).unwrap(), Placed::Out(out.clone()));
        assert!(out.join(files::RESULT).is_file());
    }

    #[test]
    fn a_complete_result_is_replaced_only_by_a_complete_one() {
        let work = tempfile::tempdir().unwrap();
        let out = work.path().join("local");
        result_with_status(&out, "complete");
        let incomplete = Staging::next_to(&out).unwrap();
        result_with_status(incomplete.path(), "incomplete");
        let placed = incomplete.commit(false).unwrap();
        assert_eq!(placed, Placed::Beside(work.path().join("local.incomplete")));
        assert!(holds_complete_result(&out));
        let incomplete = Staging::next_to(&out).unwrap();
        result_with_status(incomplete.path(), "incomplete");
        incomplete.commit(false).unwrap();
        let complete = Staging::next_to(&out).unwrap();
        result_with_status(complete.path(), "complete");
        assert_eq!(complete.commit(true).unwrap(), Placed::Out(out));
    }

    #[test]
    fn only_npugate_directories_are_replaced() {
        let work = tempfile::tempdir().unwrap();
        let leftovers = work.path().join("old");
        std::fs::create_dir_all(&leftovers).unwrap();
        std::fs::write(leftovers.join(files::ORT_LOG), "log of a run that failed").unwrap();
        assert!(Staging::next_to(&leftovers).is_ok(), "npugate's own leftovers are recognised");
        let foreign = work.path().join("photos");
        std::fs::create_dir_all(&foreign).unwrap();
        std::fs::write(foreign.join("cat.jpg"), "meow").unwrap();
        let error = Staging::next_to(&foreign).unwrap_err().to_string();
        assert!(error.contains("photos") && error.contains("holds no npugate result"), "{error}");
        // A result.json of the user's (any content but npugate's schema) does not make a folder npugate's.
        let user = work.path().join("experiment");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::write(user.join(files::RESULT), r#"{"accuracy": 0.93}"#).unwrap();
        std::fs::write(user.join("notes.txt"), "keep me").unwrap();
        let error = Staging::next_to(&user).unwrap_err().to_string();
        assert!(
            error.contains("experiment") && error.contains("its result.json is not npugate's") && !error.contains('\n'),
            "{error}"
        );
        assert_eq!(std::fs::read_to_string(user.join("notes.txt")).unwrap(), "keep me");
        // Result directories of npugate's below a folder (a rack's devices) count as npugate's.
        let rack = work.path().join("rack");
        result_with_status(&rack.join("phone-a"), "complete");
        std::fs::write(rack.join(files::ORT_LOG), "").unwrap();
        assert!(RESULT_DIR.check(&rack, "--out").is_ok());
    }
}
