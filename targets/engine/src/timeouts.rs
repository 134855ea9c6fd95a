//! How long each phase of a command may run before it is stopped: one policy, [`Timeouts`], which
//! the plan carries (`npugate_plan::Plan::timeouts`) and every phase reads its limit from.

use std::time::Duration;

/// The limit of each phase of a command; a phase past its limit is stopped with everything it
/// started (a [`Retryable`](crate::targets::Retryable) timeout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// One harness run on a plan's target: a day on this machine (natively, under wine or qemu);
    /// on a device or an AI Hub device, `--run-timeout`.
    pub run: Duration,
    /// The output check's fp32 reference run on this machine's CPU.
    pub reference: Duration,
    /// One job of a tool on this machine: a preflight or compile on the host HTP emulator, the
    /// Saver's partition under qemu, a host EP's preflight.
    pub tool: Duration,
    /// Loading one context binary with another QNN version (`compile --qnn A --qnn B`).
    pub context_load: Duration,
}

impl Timeouts {
    /// The limits of a command on this machine.
    pub const LOCAL: Timeouts = Timeouts {
        run: Duration::from_secs(24 * 3600),
        reference: Duration::from_secs(3600),
        tool: Duration::from_secs(3600),
        context_load: Duration::from_secs(600),
    };

    /// These limits with `run` as the limit of one harness run (a device's `--run-timeout`).
    pub fn with_run(self, run: Duration) -> Timeouts {
        Timeouts { run, ..self }
    }
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts::LOCAL
    }
}
