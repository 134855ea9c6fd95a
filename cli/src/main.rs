//! `npugate`: the command line ([`npugate::main`]).

fn main() -> std::process::ExitCode {
    npugate::main()
}
