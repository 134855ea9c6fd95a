//! `npugate runtime`: fetch, list and show runtimes.

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;

use npugate_host::runtime::{self, catalog, FetchOutcome, RuntimeManifest};
use npugate_result::contract::EXIT_PASS;

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
    },
    /// List the catalog and which runtimes are fetched.
    List,
    /// Print a fetched runtime's manifest (JSON).
    Show {
        /// Runtime name or directory.
        name: String,
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
    },
}

/// Runs a runtime subcommand.
pub fn run(command: RuntimeCommand) -> Result<u8> {
    match command {
        RuntimeCommand::Fetch { names, all } => {
            let names = if all { catalog::catalog()?.runtime.into_iter().map(|r| r.name).collect() } else { names };
            for name in names {
                match runtime::fetch(&name)? {
                    FetchOutcome::UpToDate(m) => {
                        println!("{name}: up to date ({} files) in {}", m.files.len(), m.dir.display())
                    }
                    FetchOutcome::Fetched(m) => {
                        println!("{name}: fetched {} files into {}", m.files.len(), m.dir.display())
                    }
                }
            }
        }
        RuntimeCommand::List => {
            for entry in catalog::catalog()?.runtime {
                let state = if RuntimeManifest::load(&entry.name).is_ok() { "fetched" } else { "not fetched" };
                println!("{:<40} {:<12} {}", entry.name, state, entry.description);
            }
        }
        RuntimeCommand::Show { name } => {
            println!("{}", serde_json::to_string_pretty(&RuntimeManifest::load(&name)?)?);
        }
        RuntimeCommand::ImportAar { path, name, ort_version } => {
            imported(npugate_android::runtime_import::aar::import(&path, &name, &ort_version)?)
        }
        RuntimeCommand::ImportQairt { dir, name, base, arches } => {
            imported(npugate_android::runtime_import::qairt::import(&dir, &name, &base, &arches)?)
        }
    }
    Ok(EXIT_PASS)
}

fn imported(manifest: RuntimeManifest) {
    println!("{}: imported {} files into {}", manifest.name, manifest.files.len(), manifest.dir.display());
}
