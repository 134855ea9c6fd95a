//! Host-side sha256 remembered by file stat, as git's index does: a file whose device, inode,
//! size, mtime and ctime are unchanged since it was hashed is not read again, so an unchanged
//! multi-GiB model costs a `stat` per file. Entries live in `<cache>/hashes/<key>`, one small file
//! each, written atomically, so concurrent runs share them safely. A file modified in the last
//! two seconds is hashed but not remembered (a write in the same timestamp tick could otherwise
//! go unseen).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use npugate_result::digest::sha256_file;
use sha2::{Digest, Sha256};

/// How old a file's mtime must be before its hash is remembered.
const SETTLED: Duration = Duration::from_secs(2);

/// Remembered hashes in one directory. Clones share one count of the files asked for
/// ([`HashCache::lookups`]): a command builds one cache and hands it on, so the count is how many
/// times the command asked for a file's hash.
#[derive(Debug, Clone)]
pub struct HashCache {
    dir: PathBuf,
    lookups: Arc<AtomicUsize>,
}

impl HashCache {
    /// The cache in `dir` (created on first write).
    pub fn in_dir(dir: PathBuf) -> HashCache {
        HashCache { dir, lookups: Arc::default() }
    }

    /// How many times this cache and its clones were asked for a file's hash (remembered or read).
    pub fn lookups(&self) -> usize {
        self.lookups.load(Ordering::Relaxed)
    }

    /// The npugate cache's: `<cache>/hashes`.
    pub fn default_cache() -> HashCache {
        HashCache::in_dir(crate::paths::cache_dir().join("hashes"))
    }

    /// sha256 (lowercase hex) and size of `path`: remembered when the file's stat is unchanged,
    /// else read and hashed (and remembered once the file has settled).
    pub fn sha256(&self, path: &Path) -> std::io::Result<(String, u64)> {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        let before = std::fs::metadata(path)?;
        let entry = self.dir.join(stat_key(&before));
        if let Ok(text) = std::fs::read_to_string(&entry) {
            if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Ok((text, before.len()));
            }
        }
        let (sha256, bytes) = sha256_file(path)?;
        let after = std::fs::metadata(path)?;
        let settled = after
            .modified()
            .ok()
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .is_some_and(|age| age >= SETTLED);
        if stat_key(&after) == stat_key(&before) && settled {
            // A cache that cannot be written only costs a re-hash next time.
            let _ = std::fs::create_dir_all(&self.dir)
                .and_then(|()| npugate_result::contract::write_atomic(&entry, sha256.as_bytes()));
        }
        Ok((sha256, bytes))
    }
}

/// The name of a file version's entry: a digest of its device, inode, size, mtime and ctime.
fn stat_key(meta: &std::fs::Metadata) -> String {
    let stat = format!(
        "{}:{}:{}:{}.{}:{}.{}",
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    );
    format!("{:x}", Sha256::digest(stat.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets `path`'s mtime `seconds` into the past, so that its hash may be remembered.
    fn settle(path: &Path, seconds: u64) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(seconds)).unwrap();
    }

    #[test]
    fn an_unchanged_file_is_not_read_again_and_a_changed_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let cache = HashCache::in_dir(dir.path().join("hashes"));
        let file = dir.path().join("w.bin");
        std::fs::write(&file, b"one").unwrap();
        settle(&file, 60);
        let first = cache.sha256(&file).unwrap();
        assert_eq!(first, sha256_file(&file).unwrap());
        assert_eq!(std::fs::read_dir(dir.path().join("hashes")).unwrap().count(), 1, "remembered");

        // Proof that the second call does not read the file: make it unreadable.
        let mut permissions = std::fs::metadata(&file).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o000);
        std::fs::set_permissions(&file, permissions.clone()).unwrap();
        if std::fs::read(&file).is_err() {
            assert_eq!(cache.sha256(&file).unwrap(), first);
        }
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o644);
        std::fs::set_permissions(&file, permissions).unwrap();

        // Same size, content changed, mtime put back: the ctime still tells.
        std::fs::write(&file, b"two").unwrap();
        settle(&file, 60);
        assert_eq!(cache.sha256(&file).unwrap(), sha256_file(&file).unwrap());
        assert_ne!(cache.sha256(&file).unwrap(), first);
    }

    #[test]
    fn a_file_written_just_now_is_hashed_every_time() {
        let dir = tempfile::tempdir().unwrap();
        let cache = HashCache::in_dir(dir.path().join("hashes"));
        let file = dir.path().join("fresh.bin");
        std::fs::write(&file, b"fresh").unwrap();
        assert_eq!(cache.sha256(&file).unwrap(), sha256_file(&file).unwrap());
        assert!(!dir.path().join("hashes").exists(), "not remembered while it may still change within its mtime tick");
    }
}
