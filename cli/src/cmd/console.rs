//! What `main` decides once for the whole process and hands to every command: whether standard
//! output is coloured, the interrupt flag (one Ctrl-C/SIGTERM handler for the process) and the
//! reporter every target's progress goes to (`--progress`); and the one way a command shows its
//! finished result ([`Console::finished`]).

use std::io::IsTerminal;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use clap::ValueEnum;
use npugate_engine::progress::{Reporter, Shown};
use npugate_engine::rack::RackPolicy;
use npugate_engine::targets::Cancel;
use npugate_result::report::{self, Finished};

/// `--progress`: how the work's progress is shown on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProgressArg {
    /// A progress bar per target when stderr is a terminal, plain lines otherwise.
    Auto,
    /// A progress bar per target.
    Bars,
    /// Plain lines: notes (a wait for a device lock), retries and each emulated inference.
    Lines,
    /// One JSON object per event (`npugate.event/1`): steps, pushes, inferences, notes, retries, ends.
    Json,
    /// Nothing.
    None,
}

/// The process-wide choices every command shares.
pub struct Console {
    /// Colour the text on standard output (a terminal, `NO_COLOR` unset).
    pub color: bool,
    /// Set by Ctrl-C (SIGINT) or SIGTERM: work stops at its next check, a running harness is
    /// stopped, and the command ends with what was finished so far.
    pub cancel: Cancel,
    /// Where every target's progress goes.
    pub reporter: Arc<dyn Reporter>,
}

impl Console {
    /// The choices of this process: colour from stdout and `NO_COLOR`, the interrupt flag, and the
    /// reporter `progress` names.
    pub fn decide(progress: ProgressArg) -> Console {
        let shown = match progress {
            ProgressArg::Auto => Shown::Auto,
            ProgressArg::Bars => Shown::Bars,
            ProgressArg::Lines => Shown::Lines,
            ProgressArg::Json => Shown::Json,
            ProgressArg::None => Shown::Nothing,
        };
        Console {
            color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
            cancel: interrupt_flag(),
            reporter: Arc::from(shown.reporter()),
        }
    }

    /// Shows a command's finished result with the reporter `--json` chooses (the versioned JSON
    /// document, or the terminal text) and returns the command's exit code, the report's.
    pub fn finished(&self, json: bool, finished: Finished<'_>) -> u8 {
        report::reporter(json, self.color).finished(&finished)
    }

    /// How a rack of this command retries (`retries` times, a second apart), stops and reports.
    pub fn policy(&self, retries: u32) -> RackPolicy {
        RackPolicy {
            retries,
            retry_pause: Duration::from_secs(1),
            cancel: self.cancel.clone(),
            reporter: self.reporter.clone(),
        }
    }
}

/// The process's interrupt flag. The first call installs the one Ctrl-C (SIGINT) / SIGTERM handler
/// of the process; every call returns the same flag, so each holder sees the interrupt (a handler
/// per call would fail from the second on, and that flag would never be set).
pub fn interrupt_flag() -> Cancel {
    static FLAG: OnceLock<Cancel> = OnceLock::new();
    FLAG.get_or_init(|| {
        let cancel = Cancel::new();
        let flag = cancel.clone();
        if let Err(error) = ctrlc::set_handler(move || flag.cancel()) {
            eprintln!("npugate: warning: Ctrl-C will end npugate at once, not cleanly: {error}");
        }
        cancel
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_holder_of_the_interrupt_flag_sees_an_interrupt() {
        let (first, second) = (interrupt_flag(), interrupt_flag());
        assert!(!first.is_cancelled() && !second.is_cancelled());
        // SAFETY: raise() sends SIGINT to this process, whose handler (ctrlc's) only writes to a pipe.
        assert_eq!(unsafe { libc::raise(libc::SIGINT) }, 0);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !(first.is_cancelled() && second.is_cancelled()) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(first.is_cancelled() && second.is_cancelled(), "both flags are the process's one flag");
        assert!(interrupt_flag().is_cancelled(), "and so is every later one");
    }
}
