//! `npugate`: the host side. Fetches runtimes, finds devices, deploys and runs the harness, then
//! turns the pulled result into a placement report and a gate verdict (see the library, [`npugate`]).

fn main() -> std::process::ExitCode {
    npugate::cmd::main()
}
