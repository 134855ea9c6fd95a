//! The files a model refers to, found on disk: every external-data file and EPContext context
//! file must be a regular file inside the model's folder (also after symlinks are resolved) and
//! long enough for every tensor that reads from it. Nothing outside the folder is opened.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::external::{ExternalDataError, FileReferences};
use crate::model::Model;

/// One file a model refers to, as found beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocatedFile {
    /// The path as the model names it, relative to the model's folder.
    pub name: String,
    /// Where it is: the model's folder joined with `name`.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Why a file a model refers to cannot be used. Each names the tensor or node and the path.
#[derive(Debug, thiserror::Error)]
pub enum LocateError {
    /// The reference itself is unusable (absolute, climbs out of the folder, no path).
    #[error(transparent)]
    Reference(#[from] ExternalDataError),
    /// The file is not there (or cannot be read).
    #[error("{site} refers to {path}, which cannot be read ({source}); copy the file beside the model")]
    Missing {
        /// The tensor or node.
        site: String,
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A directory or device instead of a file.
    #[error("{site} refers to {path}, which is not a regular file")]
    NotAFile {
        /// The tensor or node.
        site: String,
        /// The path.
        path: PathBuf,
    },
    /// A symlink (or a symlinked folder) that leads out of the model's folder.
    #[error("{site} refers to {path}, which resolves to {resolved}, outside the model's folder {folder}; copy the file into the folder")]
    Outside {
        /// The tensor or node.
        site: String,
        /// The path as named.
        path: PathBuf,
        /// Where it leads.
        resolved: PathBuf,
        /// The model's folder, resolved.
        folder: PathBuf,
    },
    /// Shorter than a tensor's `offset + length`.
    #[error("{site} reads bytes {offset}..{end} of {path}, but the file has only {bytes} bytes (truncated?); copy the whole file again")]
    Short {
        /// The tensor.
        site: String,
        /// The file.
        path: PathBuf,
        /// The tensor's offset.
        offset: u64,
        /// `offset + length`.
        end: u64,
        /// The file's size.
        bytes: u64,
    },
}

impl Model {
    /// Every distinct file the model (stored in `folder`) refers to, checked: a regular file inside
    /// the folder, long enough for each tensor reading from it. Sorted by name.
    pub fn locate_files(&self, folder: &Path) -> Result<Vec<LocatedFile>, LocateError> {
        locate(&self.file_references()?, folder)
    }
}

fn locate(references: &FileReferences, folder: &Path) -> Result<Vec<LocatedFile>, LocateError> {
    // Each file with the site that first named it, for messages.
    let mut sites: BTreeMap<&str, String> = BTreeMap::new();
    for tensor in &references.tensors {
        sites.entry(&tensor.location).or_insert_with(|| format!("tensor {:?} ({})", tensor.name, tensor.holder));
    }
    for context in &references.ep_contexts {
        sites.entry(&context.path).or_insert_with(|| format!("EPContext node {:?} in {}", context.node, context.graph));
    }
    if sites.is_empty() {
        return Ok(Vec::new());
    }
    let base = if folder.as_os_str().is_empty() { Path::new(".") } else { folder };
    let resolved_folder = base.canonicalize().map_err(|source| LocateError::Missing {
        site: "the model".into(),
        path: base.to_path_buf(),
        source,
    })?;
    let mut found = Vec::new();
    for (name, site) in sites {
        let path = base.join(name);
        let missing = |source| LocateError::Missing { site: site.clone(), path: path.clone(), source };
        let resolved = path.canonicalize().map_err(missing)?;
        if !resolved.starts_with(&resolved_folder) {
            return Err(LocateError::Outside { site, path, resolved, folder: resolved_folder });
        }
        let metadata = std::fs::metadata(&resolved).map_err(missing)?;
        if !metadata.is_file() {
            return Err(LocateError::NotAFile { site, path });
        }
        let bytes = metadata.len();
        for tensor in references.tensors.iter().filter(|t| t.location == name) {
            let end = tensor.offset.saturating_add(tensor.length.unwrap_or(0));
            if end > bytes {
                let site = format!("tensor {:?} ({})", tensor.name, tensor.holder);
                return Err(LocateError::Short { site, path, offset: tensor.offset, end, bytes });
            }
        }
        found.push(LocatedFile { name: name.to_string(), path, bytes });
    }
    Ok(found)
}
