//! `npugate`: the command line. Parses flags into the library's typed values ([`cmd`]) and runs the
//! command; nothing below `cmd` knows clap.

mod cmd;
mod sweep;

fn main() -> std::process::ExitCode {
    cmd::main()
}
