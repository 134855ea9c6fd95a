//! What a binary was built from: the package version, the git commit and the target triple,
//! embedded at build time (`harness/build.rs`, the build script of the harness and of the CLI).
//!
//! The harness also carries its build as a *stamp* in its bytes — `npugate-harness-build:` then
//! `<version> <commit> <target>` and a NUL — so that npugate reads the build of any harness from the
//! file without running it: a Windows harness needs wine to run, an Android one a device, and a
//! harness of another version must be refused before either.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// What starts the stamp in a harness binary.
pub const STAMP_PREFIX: &str = "npugate-harness-build:";
/// The commit of a build made outside git without `NPUGATE_COMMIT` set.
pub const UNKNOWN_COMMIT: &str = "unknown";

/// The build of one binary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Build {
    /// The package version (`0.1.0`): a harness of another version than npugate's is refused.
    pub version: String,
    /// The git commit it was built from (40 hex digits), or [`UNKNOWN_COMMIT`].
    pub commit: String,
    /// The target triple it was built for (`aarch64-unknown-linux-gnu`).
    pub target: String,
}

/// The build of the crate this macro is expanded in (its build script must be `harness/build.rs`,
/// which sets `NPUGATE_COMMIT` and `NPUGATE_TARGET`).
#[macro_export]
macro_rules! this_build {
    () => {
        $crate::build::Build {
            version: env!("CARGO_PKG_VERSION").to_string(),
            commit: env!("NPUGATE_COMMIT").to_string(),
            target: env!("NPUGATE_TARGET").to_string(),
        }
    };
}

impl Build {
    /// The stamp text of this build (what the harness embeds, NUL included).
    pub fn stamp(&self) -> String {
        format!("{STAMP_PREFIX}{} {} {}\0", self.version, self.commit, self.target)
    }

    /// The build a stamp's text names (`<version> <commit> <target>`, after the prefix).
    pub fn parse(text: &str) -> Option<Build> {
        let mut words = text.split(' ');
        let (version, commit, target) = (words.next()?, words.next()?, words.next()?);
        let plain = |word: &str| !word.is_empty() && word.chars().all(|c| c.is_ascii_graphic());
        (words.next().is_none() && [version, commit, target].into_iter().all(plain)).then(|| Build {
            version: version.into(),
            commit: commit.into(),
            target: target.into(),
        })
    }

    /// The build stamped into `bytes` (a binary), if any.
    pub fn from_binary(bytes: &[u8]) -> Option<Build> {
        memchr::memmem::find_iter(bytes, STAMP_PREFIX.as_bytes()).find_map(|at| {
            let rest = &bytes[at + STAMP_PREFIX.len()..];
            let end = memchr::memchr(0, rest)?;
            Build::parse(std::str::from_utf8(&rest[..end]).ok()?)
        })
    }

    /// The build stamped into the binary at `path`: `Ok(None)` when it carries no stamp.
    pub fn of_file(path: &Path) -> std::io::Result<Option<Build>> {
        Ok(Build::from_binary(&std::fs::read(path)?))
    }

    /// The first 12 digits of the commit (all of [`UNKNOWN_COMMIT`]).
    pub fn short_commit(&self) -> &str {
        self.commit.get(..12).unwrap_or(&self.commit)
    }
}

impl std::fmt::Display for Build {
    /// `0.1.0 (commit 4ed23d7a1b2c, aarch64-unknown-linux-gnu)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (commit {}, {})", self.version, self.short_commit(), self.target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build() -> Build {
        Build {
            version: "0.1.0".into(),
            commit: "4ed23d7a1b2c3d4e5f60718293a4b5c6d7e8f901".into(),
            target: "aarch64-unknown-linux-gnu".into(),
        }
    }

    #[test]
    fn a_stamp_is_found_among_other_bytes_and_read_back() {
        let mut binary = b"\x7fELF\0npugate-harness-build:\0garbage npugate-harness-build:1 2\0".to_vec();
        binary.extend_from_slice(build().stamp().as_bytes());
        binary.extend_from_slice(b"\x00\xff trailing");
        assert_eq!(Build::from_binary(&binary), Some(build()), "the broken stamps before it are skipped");
        assert_eq!(Build::from_binary(b"no stamp here"), None);
        assert_eq!(build().to_string(), "0.1.0 (commit 4ed23d7a1b2c, aarch64-unknown-linux-gnu)");
        let unknown = Build { commit: UNKNOWN_COMMIT.into(), ..build() };
        assert_eq!(unknown.short_commit(), "unknown");
    }

    #[test]
    fn a_stamp_names_three_plain_words() {
        assert_eq!(
            Build::parse("0.1.0 abc x86_64-pc-windows-gnu").map(|b| b.target),
            Some("x86_64-pc-windows-gnu".into())
        );
        for bad in ["0.1.0 abc", "0.1.0 abc t extra", "0.1.0  t", "0.1.0 a\u{1}b t"] {
            assert_eq!(Build::parse(bad), None, "{bad:?}");
        }
    }
}
