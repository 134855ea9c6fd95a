//! `npugate`, the command line: parses flags into the library's typed values and runs the command;
//! nothing below `cmd` knows clap. A library so that the docs test (tests/tests/docs.rs) can check
//! the guide's command lines against the very parser [`main`] uses ([`command`]), without running
//! them; the binary (`src/main.rs`) only calls [`main`].

mod cmd;
mod sweep;

pub use cmd::{command, main};
