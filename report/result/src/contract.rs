//! The contracts every stage shares: versioned JSON documents read through one schema check,
//! written through one atomic write, and the process exit codes.
//!
//! A schema id is `name/major` (`npugate.run-result/1`). A reader accepts its own name with its own
//! major version (and any `major.minor` of it) and refuses everything else, naming the file and
//! both versions.

use std::io::Write;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Exit code when every rule passed.
pub const EXIT_PASS: u8 = 0;
/// Exit code when at least one gate rule failed (a verdict).
pub const EXIT_FAIL: u8 = 1;
/// Exit code when the run could not be judged: bad input, a missing library, an unreachable device.
pub const EXIT_ERROR: u8 = 2;
/// `npugate-harness` only: the accelerator did not start (its device is absent, its backend is
/// dead), so nothing can be said about the model on it. Infrastructure worth another attempt;
/// npugate retries it on a rack and reports [`EXIT_ERROR`] when it stays so.
pub const EXIT_DID_NOT_START: u8 = 3;

/// A schema id such as `npugate.run-result/1`: a document name and its major version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schema(&'static str);

impl Schema {
    /// The schema with id `id` (`name/major`).
    pub const fn new(id: &'static str) -> Schema {
        Schema(id)
    }

    /// The id written into documents, e.g. `npugate.run-result/1`.
    pub const fn id(self) -> &'static str {
        self.0
    }

    /// Checks the `schema` field a reader found: same name, same major version.
    pub fn accepts(self, found: &str) -> bool {
        let (name, major) = split_id(self.0);
        let (found_name, found_major) = split_id(found);
        name == found_name && major == found_major && !major.is_empty()
    }
}

impl std::fmt::Display for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// `name/major.minor` → (`name`, `major`).
fn split_id(id: &str) -> (&str, &str) {
    let (name, version) = id.rsplit_once('/').unwrap_or((id, ""));
    (name, version.split('.').next().unwrap_or(""))
}

/// A JSON document with a `schema` field that says what it is.
pub trait Document: Serialize + DeserializeOwned {
    /// The schema this type reads and writes.
    const SCHEMA: Schema;
}

/// Why a document could not be read. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// File path.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The file is not valid JSON for this schema.
    #[error("{path} is not a valid {expected} document: {source}")]
    Json {
        /// File path.
        path: String,
        /// Schema expected.
        expected: &'static str,
        /// Cause.
        source: serde_json::Error,
    },
    /// The schema field names another document or another major version.
    #[error("{path} has schema {found:?}; this npugate reads {expected:?}")]
    Schema {
        /// File path.
        path: String,
        /// Schema found (`<missing>` when absent).
        found: String,
        /// Schema expected.
        expected: &'static str,
    },
}

impl ReadError {
    /// True when the file does not exist (as opposed to existing and being unreadable or wrong).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Parses a document from JSON text, checking its schema first; `path` names it in errors.
pub fn parse<T: Document>(text: &str, path: &Path) -> Result<T, ReadError> {
    let shown = path.display().to_string();
    let expected = T::SCHEMA.id();
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|source| ReadError::Json { path: shown.clone(), expected, source })?;
    let found = value.get("schema").and_then(|s| s.as_str()).unwrap_or("<missing>");
    if !T::SCHEMA.accepts(found) {
        return Err(ReadError::Schema { path: shown, found: found.to_string(), expected });
    }
    serde_json::from_value(value).map_err(|source| ReadError::Json { path: shown, expected, source })
}

/// Reads a document from `path`, checking its schema.
pub fn read<T: Document>(path: &Path) -> Result<T, ReadError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ReadError::Io { path: path.display().to_string(), source })?;
    parse(&text, path)
}

/// True when `path` is a JSON document npugate wrote: its `schema` is one of npugate's
/// (`npugate.<name>/<major>`), whatever its version. What proves a directory is npugate's before
/// npugate replaces it.
pub fn is_npugate_document(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else { return false };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else { return false };
    let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or_default();
    let (name, major) = split_id(schema);
    name.strip_prefix("npugate.").is_some_and(|rest| !rest.is_empty())
        && !major.is_empty()
        && major.bytes().all(|b| b.is_ascii_digit())
}

/// Reads a document when `path` exists; `Ok(None)` when it does not.
pub fn read_if_present<T: Document>(path: &Path) -> Result<Option<T>, ReadError> {
    match read(path) {
        Ok(document) => Ok(Some(document)),
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(error),
    }
}

/// Writes `value` as pretty JSON to `path` atomically ([`write_atomic`]).
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    write_atomic(path, &json)
}

/// Writes `bytes` to `path` so that a reader (or a writer killed half-way) never sees half a file:
/// a temporary file in the same directory, written and synced, renamed over `path`, then the
/// directory synced so the rename survives a crash.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".tmp-");
    // Readable by all, as a file written in place would be (the process umask still applies);
    // the temporary file's own default, 0600, would make every result private.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
    let mut file = builder.tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    sync_dir(dir);
    Ok(())
}

/// Syncs a directory's entries (best effort: not every platform can open a directory).
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(handle) = std::fs::File::open(dir) {
        let _ = handle.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Note {
        schema: String,
        text: String,
    }

    impl Document for Note {
        const SCHEMA: Schema = Schema::new("npugate.note/2");
    }

    #[test]
    fn same_major_is_accepted_and_everything_else_refused() {
        let schema = Schema::new("npugate.note/2");
        assert!(schema.accepts("npugate.note/2"));
        assert!(schema.accepts("npugate.note/2.1"));
        for other in ["npugate.note/1", "npugate.note/3", "npugate.notes/2", "npugate.note", "", "npugate.note/"] {
            assert!(!schema.accepts(other), "{other}");
        }
    }

    #[test]
    fn read_names_the_file_and_both_versions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("note.json");
        write_json(&path, &Note { schema: "npugate.note/2".into(), text: "hi".into() }).unwrap();
        assert_eq!(read::<Note>(&path).unwrap().text, "hi");
        std::fs::write(&path, r#"{"schema":"npugate.note/3","text":"x"}"#).unwrap();
        let error = read::<Note>(&path).unwrap_err().to_string();
        assert!(
            error.contains("note.json") && error.contains("npugate.note/3") && error.contains("npugate.note/2"),
            "{error}"
        );
        std::fs::write(&path, r#"{"text":"x"}"#).unwrap();
        assert!(read::<Note>(&path).unwrap_err().to_string().contains("<missing>"));
        std::fs::write(&path, "{").unwrap();
        assert!(matches!(read::<Note>(&path), Err(ReadError::Json { .. })));
        assert!(read_if_present::<Note>(&dir.path().join("absent.json")).unwrap().is_none());
    }

    #[test]
    fn only_documents_with_an_npugate_schema_are_npugate_documents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("result.json");
        for (text, ours) in [
            (r#"{"schema":"npugate.run-result/1"}"#, true),
            (r#"{"schema":"npugate.evidence/12","x":1}"#, true),
            (r#"{"schema":"npugate./1"}"#, false),
            (r#"{"schema":"other.run-result/1"}"#, false),
            (r#"{"accuracy": 0.93}"#, false),
            ("my notes", false),
        ] {
            std::fs::write(&path, text).unwrap();
            assert_eq!(is_npugate_document(&path), ours, "{text}");
        }
        assert!(!is_npugate_document(&dir.path().join("absent.json")));
    }

    #[test]
    #[cfg(unix)]
    fn atomic_write_leaves_a_file_others_can_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("result.json");
        write_atomic(&path, b"{}").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        // 0644 under the usual umask 022; never owner-only.
        assert_eq!(mode & 0o044, 0o044, "mode {mode:o}");
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
