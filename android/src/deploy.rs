//! Content-addressed deploy: every file lives once on the device as `<work>/blobs/<sha256>`, and
//! the names the harness sees (`bin/…`, `runtimes/<name>/…`, `models/…`) are hard links to it —
//! not symlinks, because some libraries find their siblings by their own resolved path (OpenVINO
//! looks for its device plugins and ONNX frontend next to the real `libopenvino.so`). A blob whose content the device hashes to its name (`sha256sum` on the device; the result is
//! remembered per file stat) is not pushed again.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::adb::quote::{command_line, quote};
use crate::adb::{Adb, AdbError};

/// One host file and where it appears on the device.
#[derive(Debug, Clone)]
pub struct DeployFile {
    /// Path on the host.
    pub local: PathBuf,
    /// Path on the device, relative to the work dir (`models/smallcnn.onnx`).
    pub remote: String,
    /// sha256 of the content, lowercase hex.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Whether the device needs it executable (the harness).
    pub executable: bool,
}

impl DeployFile {
    /// Describes `local` for deployment as `remote`, hashing it (or taking its hash from the
    /// host's hash cache when unchanged).
    pub fn hashed(local: &Path, remote: String, executable: bool) -> anyhow::Result<DeployFile> {
        let (sha256, bytes) = npugate_host::hash_cache::HashCache::default_cache()
            .sha256(local)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", local.display()))?;
        Ok(DeployFile { local: local.to_path_buf(), remote, sha256, bytes, executable })
    }
}

/// One deployed file in the report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeployedFile {
    /// Path on the device, relative to the work dir.
    pub remote: String,
    /// sha256 of the content.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
    /// True when its bytes crossed the cable in this deploy; false when the device had them.
    pub pushed: bool,
}

/// What a deploy moved and what it could skip.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DeployReport {
    /// Absolute work dir on the device.
    pub work_dir: String,
    /// Every file, in deploy order.
    pub files: Vec<DeployedFile>,
    /// Files whose content was pushed.
    pub files_pushed: usize,
    /// Files whose content was already on the device.
    pub files_skipped: usize,
    /// Bytes pushed.
    pub bytes_pushed: u64,
    /// Bytes not pushed because the device already had them.
    pub bytes_skipped: u64,
    /// Wall time of the whole deploy (hash check, pushes, links), seconds.
    pub seconds: f64,
    /// Host time spent locating and hashing the model's files for this deploy, seconds (near zero
    /// when the host's hash cache knew them).
    #[serde(default)]
    pub model_hash_seconds: f64,
}

/// Makes `files` available under `work_dir` on the device, pushing only blobs it lacks;
/// `on_pushed(bytes)` is called after each push (for a progress bar).
pub fn deploy(
    adb: &Adb,
    serial: &str,
    work_dir: &str,
    files: &[DeployFile],
    total_bytes: impl FnOnce(u64),
    mut on_pushed: impl FnMut(u64),
) -> Result<DeployReport, AdbError> {
    let start = Instant::now();
    let blobs = format!("{work_dir}/blobs");
    let wanted: BTreeSet<&str> = files.iter().map(|f| f.sha256.as_str()).collect();
    let present = blobs_present(adb, serial, &blobs, &wanted)?;
    let mut to_push: Vec<&DeployFile> = Vec::new();
    for file in files {
        if !present.contains(&file.sha256) && !to_push.iter().any(|p| p.sha256 == file.sha256) {
            to_push.push(file);
        }
    }
    total_bytes(to_push.iter().map(|f| f.bytes).sum());
    for file in &to_push {
        let timeout = Duration::from_secs(60 + file.bytes / 2_000_000);
        adb.push(serial, &file.local, &format!("{blobs}/{}", file.sha256), timeout)?;
        on_pushed(file.bytes);
    }
    link(adb, serial, work_dir, files, &to_push)?;
    let mut report = DeployReport { work_dir: work_dir.to_string(), ..Default::default() };
    for file in files {
        let pushed = to_push.iter().any(|p| std::ptr::eq(*p, file));
        if pushed {
            report.files_pushed += 1;
            report.bytes_pushed += file.bytes;
        } else {
            report.files_skipped += 1;
            report.bytes_skipped += file.bytes;
        }
        report.files.push(DeployedFile {
            remote: file.remote.clone(),
            sha256: file.sha256.clone(),
            bytes: file.bytes,
            pushed,
        });
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

/// The `stat -c` format that identifies one version of a blob file: size, mtime, inode.
const BLOB_STAT: &str = "%s.%Y.%i";

/// Device-side check of the blobs named in `$@`: prints `present <sha256>` for each blob whose
/// content hashes to its name. Like git's index, a verified blob's `stat` (size, mtime, inode) is
/// remembered in `<sha256>.ok`, so unchanged blobs are not re-hashed on every run; any change to
/// the file (an interrupted or damaged push) changes its stat and it is hashed again.
const CHECK_BLOBS: &str = r#"for h in "$@"; do
  [ -f "$h" ] || continue
  s=$(stat -c "$BLOB_STAT" "$h" 2>/dev/null)
  if [ -n "$s" ] && [ "$(cat "$h.ok" 2>/dev/null)" = "$s" ]; then echo "present $h"; continue; fi
  [ "$(sha256sum "$h" 2>/dev/null | cut -d' ' -f1)" = "$h" ] || continue
  [ -n "$s" ] && echo "$s" > "$h.ok"
  echo "present $h"
done"#;

/// The wanted blobs whose content on the device really hashes to their name (a partial push
/// from an interrupted run does not count). A device without `sha256sum` has none.
fn blobs_present(adb: &Adb, serial: &str, blobs: &str, wanted: &BTreeSet<&str>) -> Result<BTreeSet<String>, AdbError> {
    let timeout = Duration::from_secs(120);
    let out = adb.shell_ok(serial, &check_script(blobs, wanted), timeout, "check blobs on the device")?;
    Ok(out
        .lines()
        .filter_map(|line| line.strip_prefix("present "))
        .filter(|hash| wanted.contains(hash))
        .map(str::to_string)
        .collect())
}

/// The device-side script of [`blobs_present`]: [`CHECK_BLOBS`] in `blobs` over `wanted`.
pub fn check_script(blobs: &str, wanted: &BTreeSet<&str>) -> String {
    format!(
        "mkdir -p {dir} && cd {dir} && BLOB_STAT={stat} && set -- {names} && {CHECK_BLOBS}",
        dir = quote(blobs),
        stat = quote(BLOB_STAT),
        names = command_line(wanted.iter().copied()),
    )
}

/// Creates the named hard links to the blobs (and makes executables executable) and records the
/// stat of the blobs just pushed, in one shell call.
fn link(adb: &Adb, serial: &str, work_dir: &str, files: &[DeployFile], pushed: &[&DeployFile]) -> Result<(), AdbError> {
    adb.shell_ok(serial, &link_script(work_dir, files, pushed), Duration::from_secs(60), "link deployed files")?;
    Ok(())
}

/// The device-side script of [`link`]. `ln -f` replaces what a name pointed to before (an older
/// blob, or a symlink of an older npugate).
pub fn link_script(work_dir: &str, files: &[DeployFile], pushed: &[&DeployFile]) -> String {
    let mut steps = Vec::new();
    // A blob that just arrived in full is verified: remember its stat (see CHECK_BLOBS).
    for file in pushed {
        let blob = format!("{work_dir}/blobs/{}", file.sha256);
        steps.push(format!(
            "{{ stat -c {} {} > {} || true; }}",
            quote(BLOB_STAT),
            quote(&blob),
            quote(&format!("{blob}.ok"))
        ));
    }
    let dirs: BTreeSet<String> =
        files.iter().filter_map(|f| f.remote.rsplit_once('/').map(|(dir, _)| format!("{work_dir}/{dir}"))).collect();
    if !dirs.is_empty() {
        steps.push(format!("mkdir -p {}", command_line(&dirs)));
    }
    for file in files {
        if file.executable {
            steps.push(format!("chmod 755 {}", quote(&format!("{work_dir}/blobs/{}", file.sha256))));
        }
        let (blob, link) = (format!("{work_dir}/blobs/{}", file.sha256), format!("{work_dir}/{}", file.remote));
        let (blob, link) = (quote(&blob), quote(&link));
        // Only when it is not that blob already: toybox's `ln -f` links to a `<name>_XXXXXX` temp
        // and renames it over the name, and a rename between two links of one file does nothing
        // (POSIX), which would leave the temp link behind.
        steps.push(format!("{{ [ {link} -ef {blob} ] || ln -f {blob} {link}; }}"));
    }
    steps.join(" && ")
}
