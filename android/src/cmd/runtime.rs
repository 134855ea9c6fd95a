//! `npugate runtime`: fetch, list and show runtimes.

use anyhow::Result;
use clap::Subcommand;

use crate::runtime::{self, catalog, FetchOutcome, RuntimeManifest};

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
}

/// Runs a runtime subcommand.
pub fn run(command: RuntimeCommand) -> Result<u8> {
    match command {
        RuntimeCommand::Fetch { names, all } => {
            let names = if all { catalog::catalog()?.runtime.into_iter().map(|r| r.name).collect() } else { names };
            for name in names {
                match runtime::fetch(&name)? {
                    FetchOutcome::UpToDate(m) => println!("{name}: up to date ({} files) in {}", m.files.len(), m.dir.display()),
                    FetchOutcome::Fetched(m) => println!("{name}: fetched {} files into {}", m.files.len(), m.dir.display()),
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
    }
    Ok(crate::EXIT_PASS)
}
