//! One module per subcommand; each exposes clap arguments and `run(args) -> anyhow::Result<u8>`.

pub mod baseline;
pub mod devices;
pub mod gate;
pub mod history;
pub mod keygen;
pub mod model;
pub mod outputs;
pub mod placement;
pub mod preflight;
pub mod run;
pub mod runtime;
pub mod sweep;
pub mod verify;
