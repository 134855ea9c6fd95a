//! `npugate runtime`: fetch, list and show runtimes.

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;

use npugate_host::runtime::{self, catalog, FetchOutcome, RuntimeManifest};
use npugate_result::contract::EXIT_PASS;
use npugate_result::report::{json_of, Finished, Report};
use serde::Serialize;

use super::console::Console;

/// Runtime management subcommands.
#[derive(Debug, Subcommand)]
pub enum RuntimeCommand {
    /// Fetch pinned runtimes from PyPI wheels (verified by sha256; idempotent; offline once cached).
    Fetch {
        /// Runtime names (see `npugate runtime list`).
        #[arg(required_unless_present = "all")]
        names: Vec<String>,
        /// Fetch every runtime in the catalog.
        #[arg(long)]
        all: bool,
        /// Print `npugate.runtimes-cached/1` JSON (`runtimes[]` {`name`, `how`, `files`, `dir`}) instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// List the catalog and which runtimes are fetched.
    List {
        /// Print `npugate.runtimes/1` JSON (`runtimes[]` {`name`, `fetched`, `description`}) instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Print a fetched runtime's manifest (JSON).
    Show {
        /// Runtime name or directory.
        name: String,
        /// Print the manifest as the `--json` report (it is one already: `npugate.runtime/1`).
        #[arg(long)]
        json: bool,
    },
    /// Import an Android AAR (onnxruntime-android-qnn, Qualcomm's or Microsoft's): jni/arm64-v8a/*.so.
    ImportAar {
        /// The .aar file.
        path: PathBuf,
        /// Name of the new runtime.
        #[arg(long)]
        name: String,
        /// ONNX Runtime version of its libonnxruntime.so (recorded in the manifest).
        #[arg(long, default_value = "unknown")]
        ort_version: String,
        /// Print `npugate.runtimes-cached/1` JSON instead of a line.
        #[arg(long)]
        json: bool,
    },
    /// Add a QAIRT SDK's Android QNN libraries and the Skels of the given Hexagon archs to a runtime.
    ImportQairt {
        /// The QAIRT SDK root (holds lib/aarch64-android and lib/hexagon-vNN/unsigned).
        dir: PathBuf,
        /// Name of the new runtime.
        #[arg(long)]
        name: String,
        /// The runtime with ONNX Runtime and the QNN EP to add the SDK to (e.g. from import-aar).
        #[arg(long)]
        base: String,
        /// Hexagon architecture of a target device (repeatable): v68, v69, v73, v75, v79, v81.
        #[arg(long = "arch", required = true)]
        arches: Vec<String>,
        /// Print `npugate.runtimes-cached/1` JSON instead of a line.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a runtime subcommand.
pub fn run(command: RuntimeCommand, console: &Console) -> Result<u8> {
    match command {
        RuntimeCommand::Fetch { names, all, json } => {
            let names = if all { catalog::catalog()?.runtime.into_iter().map(|r| r.name).collect() } else { names };
            let runtimes = names
                .iter()
                .map(|name| {
                    Ok(match runtime::fetch(name)? {
                        FetchOutcome::UpToDate(manifest) => Ready::of(&manifest, How::UpToDate),
                        FetchOutcome::Fetched(manifest) => Ready::of(&manifest, How::Fetched),
                    })
                })
                .collect::<Result<_>>()?;
            Ok(console.finished(json, Finished::new(&Cached::of(runtimes))))
        }
        RuntimeCommand::List { json } => {
            let runtimes = catalog::catalog()?
                .runtime
                .into_iter()
                .map(|entry| Listed {
                    fetched: RuntimeManifest::load(&entry.name).is_ok(),
                    name: entry.name,
                    description: entry.description,
                })
                .collect();
            Ok(console.finished(json, Finished::new(&Catalog { schema: "npugate.runtimes/1", runtimes })))
        }
        RuntimeCommand::Show { name, json } => {
            Ok(console.finished(json, Finished::new(&Shown(RuntimeManifest::load(&name)?))))
        }
        RuntimeCommand::ImportAar { path, name, ort_version, json } => {
            let manifest = npugate_android::runtime_import::aar::import(&path, &name, &ort_version)?;
            Ok(console.finished(json, Finished::new(&Cached::of(vec![Ready::of(&manifest, How::Imported)]))))
        }
        RuntimeCommand::ImportQairt { dir, name, base, arches, json } => {
            let manifest = npugate_android::runtime_import::qairt::import(&dir, &name, &base, &arches)?;
            Ok(console.finished(json, Finished::new(&Cached::of(vec![Ready::of(&manifest, How::Imported)]))))
        }
    }
}

/// `npugate runtime fetch`'s and `import-aar`'s / `import-qairt`'s finished result
/// (`npugate.runtimes-cached/1`): each runtime now in the cache, how it got there, where it is.
#[derive(Debug, Serialize)]
pub struct Cached {
    /// Always `npugate.runtimes-cached/1`.
    schema: &'static str,
    /// The runtimes, in the order they were asked for.
    runtimes: Vec<Ready>,
}

impl Cached {
    /// The report of `runtimes`.
    fn of(runtimes: Vec<Ready>) -> Cached {
        Cached { schema: "npugate.runtimes-cached/1", runtimes }
    }
}

/// One runtime in the cache.
#[derive(Debug, Serialize)]
pub struct Ready {
    /// Its name.
    name: String,
    /// How it got there.
    how: How,
    /// The files its manifest lists.
    files: usize,
    /// Its directory in the runtime cache.
    dir: PathBuf,
}

impl Ready {
    /// `manifest`'s runtime, there by `how`.
    fn of(manifest: &RuntimeManifest, how: How) -> Ready {
        Ready { name: manifest.name.clone(), how, files: manifest.files.len(), dir: manifest.dir.clone() }
    }
}

/// How a runtime came to be in the cache.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum How {
    /// It was there already, every file matching its manifest.
    UpToDate,
    /// It was (re)built from its pinned wheels.
    Fetched,
    /// It was imported from an AAR or a QAIRT SDK.
    Imported,
}

impl Report for Cached {
    fn schema(&self) -> &str {
        self.schema
    }
    fn exit_code(&self) -> u8 {
        EXIT_PASS
    }
    fn text(&self, _color: bool) -> String {
        let line = |r: &Ready| match r.how {
            How::UpToDate => format!("{}: up to date ({} files) in {}\n", r.name, r.files, r.dir.display()),
            How::Fetched => format!("{}: fetched {} files into {}\n", r.name, r.files, r.dir.display()),
            How::Imported => format!("{}: imported {} files into {}\n", r.name, r.files, r.dir.display()),
        };
        self.runtimes.iter().map(line).collect()
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// `npugate runtime list`'s finished result: the catalog, each runtime fetched or not.
#[derive(Debug, Serialize)]
pub struct Catalog {
    /// Always `npugate.runtimes/1`.
    schema: &'static str,
    /// Every runtime of the catalog, in its order.
    runtimes: Vec<Listed>,
}

/// One runtime of the catalog.
#[derive(Debug, Serialize)]
pub struct Listed {
    /// Its name.
    name: String,
    /// True when it is in the runtime cache.
    fetched: bool,
    /// What it holds.
    description: String,
}

impl Report for Catalog {
    fn schema(&self) -> &str {
        self.schema
    }
    fn exit_code(&self) -> u8 {
        EXIT_PASS
    }
    fn text(&self, _color: bool) -> String {
        let line = |r: &Listed| {
            let state = if r.fetched { "fetched" } else { "not fetched" };
            format!("{:<40} {:<12} {}\n", r.name, state, r.description)
        };
        self.runtimes.iter().map(line).collect()
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// `npugate runtime show`'s finished result: a fetched runtime's manifest (`runtime.json`, itself
/// the versioned document `npugate.runtime/1`), its text and its JSON alike.
#[derive(Debug)]
pub struct Shown(pub RuntimeManifest);

impl Report for Shown {
    fn schema(&self) -> &str {
        &self.0.schema
    }
    fn exit_code(&self) -> u8 {
        EXIT_PASS
    }
    fn text(&self, _color: bool) -> String {
        json_of(&self.0)
    }
    fn json(&self) -> String {
        json_of(&self.0)
    }
}
