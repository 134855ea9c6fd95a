//! The record a lock holder leaves on the device (`<work-dir>/lock/holder`): who holds the lock —
//! host, process, command, start — and which run dir its harness works in. Plain `key=value`
//! lines under a `schema=` line, so any shell can write it and a person can read it; unknown keys
//! are ignored, a record of another schema is refused by name.

use serde::{Deserialize, Serialize};

/// Schema of the holder record.
pub const LOCK_SCHEMA: &str = "npugate.device-lock/1";
/// The schema family; a later version of it is a newer npugate's lock.
const SCHEMA_FAMILY: &str = "npugate.device-lock/";
/// Longest command recorded (the whole argv of a sweep can be long).
const COMMAND_CHARS: usize = 400;

/// Who holds a device's lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The holder's run: the name of its dir below `<work-dir>/results/`, unique per lock taken
    /// (it is also the lock's token: only the holder of this run may refresh or release it).
    pub run: String,
    /// Host name of the machine that took the lock.
    pub host: String,
    /// Boot id and PID namespace of that host; when they equal this process's, the holder's
    /// process can be checked directly (empty when unknown).
    pub host_id: String,
    /// Process id of the npugate that took the lock, on that host.
    pub pid: u32,
    /// Start time of that process (clock ticks since the host booted), to tell a reused pid.
    pub pid_start: Option<u64>,
    /// The npugate command line that took the lock.
    pub command: String,
    /// When the lock was taken (RFC 3339, the host's clock).
    pub started_at: String,
}

/// Why a holder record could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordProblem {
    /// The lock dir holds no record (it is being written, or its writer died right after `mkdir`).
    Missing,
    /// The record is not a valid lock record; the reason names the line or field.
    Corrupt(String),
    /// The record has a later schema than this npugate reads.
    Newer(String),
}

impl Holder {
    /// A record for this process, holding the lock for the run dir `run`.
    pub fn for_this_process(run: &str) -> Holder {
        // The program by its file name: `npugate run …`, not the path it was started from.
        let program = std::env::args().next().map(|p| p.rsplit('/').next().unwrap_or(&p).to_string());
        let words = program.into_iter().chain(std::env::args().skip(1));
        let command = words.map(|a| shell_words::quote(&a).into_owned()).collect::<Vec<_>>().join(" ");
        Holder {
            run: run.to_string(),
            host: one_line(
                &read_trimmed("/proc/sys/kernel/hostname")
                    .or_else(|| std::env::var("HOSTNAME").ok())
                    .unwrap_or_else(|| "unknown-host".into()),
            ),
            host_id: this_host_id(),
            pid: std::process::id(),
            pid_start: process_start(std::process::id()),
            command: one_line(&command).chars().take(COMMAND_CHARS).collect(),
            started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }
    }

    /// The record as written to the device.
    pub fn to_text(&self) -> String {
        let mut lines = vec![format!("schema={LOCK_SCHEMA}"), format!("run={}", one_line(&self.run))];
        lines.push(format!("host={}", one_line(&self.host)));
        lines.push(format!("host_id={}", one_line(&self.host_id)));
        lines.push(format!("pid={}", self.pid));
        if let Some(start) = self.pid_start {
            lines.push(format!("pid_start={start}"));
        }
        lines.push(format!("command={}", one_line(&self.command)));
        lines.push(format!("started_at={}", one_line(&self.started_at)));
        lines.join("\n") + "\n"
    }

    /// Parses a record read from the device.
    pub fn parse(text: &str) -> Result<Holder, RecordProblem> {
        if text.trim().is_empty() {
            return Err(RecordProblem::Missing);
        }
        let mut fields = std::collections::BTreeMap::new();
        for (index, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let Some((key, value)) = line.split_once('=') else {
                return Err(RecordProblem::Corrupt(format!("line {}: {:?} is not key=value", index + 1, clip(line))));
            };
            fields.insert(key.trim(), value.trim());
        }
        match fields.get("schema") {
            Some(&LOCK_SCHEMA) => {}
            Some(schema) if schema.starts_with(SCHEMA_FAMILY) => return Err(RecordProblem::Newer(schema.to_string())),
            Some(schema) => {
                return Err(RecordProblem::Corrupt(format!("schema {:?} is not {LOCK_SCHEMA}", clip(schema))))
            }
            None => return Err(RecordProblem::Corrupt("no schema line".into())),
        }
        let text_field = |key: &str| {
            fields
                .get(key)
                .filter(|v| !v.is_empty())
                .map(|v| v.to_string())
                .ok_or_else(|| RecordProblem::Corrupt(format!("field {key} is missing")))
        };
        let pid = text_field("pid")?;
        let pid = pid
            .parse()
            .map_err(|_| RecordProblem::Corrupt(format!("field pid: {:?} is not a process id", clip(&pid))))?;
        let pid_start =
            match fields.get("pid_start") {
                None => None,
                Some(start) => Some(start.parse().map_err(|_| {
                    RecordProblem::Corrupt(format!("field pid_start: {:?} is not a number", clip(start)))
                })?),
            };
        Ok(Holder {
            run: text_field("run")?,
            host: text_field("host")?,
            host_id: fields.get("host_id").map(|v| v.to_string()).unwrap_or_default(),
            pid,
            pid_start,
            command: fields.get("command").map(|v| v.to_string()).unwrap_or_default(),
            started_at: fields.get("started_at").map(|v| v.to_string()).unwrap_or_default(),
        })
    }

    /// `host ci-7 pid 4242 (npugate sweep --plan nightly.toml, since 2026-11-23T02:00:00Z)`.
    pub fn describe(&self) -> String {
        let command = match self.command.chars().count() {
            0 => "command unknown".to_string(),
            n if n > 80 => format!("{}…", self.command.chars().take(80).collect::<String>()),
            _ => self.command.clone(),
        };
        format!("host {} pid {} ({command}, since {})", self.host, self.pid, self.started_at)
    }

    /// Whether the holder's process still runs, when it ran on this very host (same boot and PID
    /// namespace); `None` for another host, which only its heartbeat can tell.
    pub fn alive_here(&self) -> Option<bool> {
        if self.host_id.is_empty() || self.host_id != this_host_id() {
            return None;
        }
        Some(match (process_start(self.pid), self.pid_start) {
            (None, _) => false,
            (Some(now), Some(recorded)) => now == recorded,
            (Some(_), None) => true,
        })
    }
}

/// This host's boot id and PID namespace (`<boot id>/pid:[4026531836]`), empty when unreadable.
fn this_host_id() -> String {
    let boot = read_trimmed("/proc/sys/kernel/random/boot_id");
    let namespace = std::fs::read_link("/proc/self/ns/pid").ok().map(|p| p.display().to_string());
    match (boot, namespace) {
        (Some(boot), Some(namespace)) => format!("{boot}/{namespace}"),
        _ => String::new(),
    }
}

/// Start time of a local process (field 22 of `/proc/<pid>/stat`), `None` when it does not exist.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// A value on one line: control characters (newlines in a command) become spaces.
fn one_line(value: &str) -> String {
    value.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// At most 60 characters of device output, for messages.
fn clip(text: &str) -> String {
    text.chars().take(60).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_its_holder_is_this_live_process() {
        let holder = Holder::for_this_process("run-1-abc");
        assert_eq!(Holder::parse(&holder.to_text()), Ok(holder.clone()));
        assert_eq!(holder.alive_here(), Some(true));
        assert!(holder.describe().contains(&format!("pid {}", std::process::id())), "{}", holder.describe());
        let elsewhere = Holder { host_id: "another-boot/pid:[1]".into(), ..holder.clone() };
        assert_eq!(elsewhere.alive_here(), None, "another host's process cannot be checked here");
        let reused = Holder { pid_start: holder.pid_start.map(|s| s + 1), ..holder };
        assert_eq!(reused.alive_here(), Some(false), "same pid, other start time: a reused pid");
    }

    #[test]
    fn a_dead_holder_process_on_this_host_is_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let holder = Holder { pid, pid_start: Some(1), ..Holder::for_this_process("run-2") };
        assert_eq!(holder.alive_here(), Some(false));
    }

    #[test]
    fn newlines_in_values_cannot_forge_fields() {
        let holder = Holder { command: "npugate run\npid=1\nrun=evil".into(), ..Holder::for_this_process("run-3") };
        let parsed = Holder::parse(&holder.to_text()).unwrap();
        assert_eq!((parsed.pid, parsed.run.as_str()), (std::process::id(), "run-3"));
        assert_eq!(parsed.command, "npugate run pid=1 run=evil");
    }

    #[test]
    fn bad_records_are_missing_corrupt_or_newer() {
        assert_eq!(Holder::parse(" \n"), Err(RecordProblem::Missing));
        let corrupt = |text: &str| match Holder::parse(text) {
            Err(RecordProblem::Corrupt(why)) => why,
            other => panic!("{text:?}: {other:?}"),
        };
        assert!(corrupt("\u{1}\u{2}garbage").contains("line 1"));
        assert!(corrupt("run=x\nhost=h\npid=1\n").contains("no schema"));
        assert!(corrupt("schema=npugate.device-lock/1\nrun=x\nhost=h\npid=12ab\n").contains("field pid"));
        assert!(corrupt("schema=npugate.device-lock/1\nhost=h\npid=1\n").contains("field run is missing"));
        assert!(corrupt("schema=something-else\n").contains("something-else"));
        assert_eq!(
            Holder::parse("schema=npugate.device-lock/2\nanything=new\n"),
            Err(RecordProblem::Newer("npugate.device-lock/2".into()))
        );
    }
}
