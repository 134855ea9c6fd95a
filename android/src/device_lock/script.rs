//! The lock's device side: the shell scripts that take, inspect, refresh, break and release the
//! lock dir and find or stop harnesses, and the parsing of what they print. Every script runs in
//! one `sh` on the device with `W` (work dir) and `L` (lock dir) set; every value reaches it
//! through [`quote`].
//!
//! Taking the lock is one `mkdir` of `<work-dir>/lock` — atomic on every filesystem and shell, so
//! two hosts sharing the device through any adb server cannot both succeed. The holder record and
//! the heartbeat (the device's `date +%s`, so host clocks never matter) are written into it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::holder::{Holder, RecordProblem};
use crate::adb::quote::assignment;
use crate::adb::{AdbError, DeviceShell};

/// Longest a lock script may take (stopping harnesses waits up to 3 s for them to exit).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);

/// Shell functions every script starts with.
///
/// `harnesses` prints `harness PID RUN` for every `npugate-harness` process (by its name in
/// `/proc/PID/stat`) whose working directory *is* a run dir below `$W/results` (compared by device
/// and inode with `-ef`, so a harness of another work dir, another user or another chroot with the
/// same paths never matches). It exits 0 whatever the last directory compared was.
const PRELUDE: &str = r#"harnesses() {
  for f in $(grep -l '(npugate-harness)' /proc/[0-9]*/stat 2>/dev/null); do
    p=${f#/proc/}; p=${p%/stat}
    for d in "$W"/results/*/; do
      if [ -d "$d" ] && [ "/proc/$p/cwd" -ef "$d" ]; then d=${d%/}; echo "harness $p ${d##*/}"; fi
    done
  done
}
owned_by() { [ "$(sed -n 's/^run=//p' "$L/holder" 2>/dev/null)" = "$1" ]; }
drop_lock() { mv "$L" "$W/.lock-gone-$$" && rm -rf "$W/.lock-gone-$$"; }
inspect() {
  echo "now $(date +%s)"
  echo "created $(stat -c %Y "$L" 2>/dev/null)"
  h=$(cat "$L/heartbeat" 2>/dev/null) && echo "heartbeat $h"
  harnesses
  echo holder
  cat "$L/holder" 2>/dev/null || true
}
"#;

/// A run's harness process on the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceHarness {
    /// Its process id on the device.
    pub pid: u32,
    /// Its run dir below `<work-dir>/results/`.
    pub run: String,
}

/// The lock as found by a taker that could not take it.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// The holder record, or why it cannot be used.
    pub holder: Result<Holder, RecordProblem>,
    /// Seconds since the holder's last heartbeat (device clock), when it has one.
    pub heartbeat_age_s: Option<u64>,
    /// Seconds since the lock dir was created (device clock).
    pub lock_age_s: Option<u64>,
    /// Harnesses running in this work dir.
    pub harnesses: Vec<DeviceHarness>,
}

impl Observation {
    /// True when a harness of `run` runs on the device.
    pub fn runs_harness_of(&self, run: &str) -> bool {
        self.harnesses.iter().any(|h| h.run == run)
    }
}

/// What an attempt to take the lock found.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// The lock is ours now.
    Taken,
    /// Someone holds it.
    Held(Observation),
    /// It was held when the taker tried and released before it could look: try again (what
    /// `mkdir` said, should it keep failing so: a full disk, say).
    Vanished(String),
    /// The work dir or the lock dir in it cannot be created (a read-only or foreign directory);
    /// what `mkdir` said.
    Unwritable(String),
}

/// The lock dir of a work dir.
pub fn lock_dir(work_dir: &str) -> String {
    format!("{work_dir}/lock")
}

/// Runs `body` after the prelude with `W`, `L` and `vars` set.
fn run(
    shell: &dyn DeviceShell,
    work_dir: &str,
    vars: &[(&str, &str)],
    body: &str,
    step: &str,
) -> Result<String, AdbError> {
    let mut script = format!("{}\n{}\n", assignment("W", work_dir), assignment("L", &lock_dir(work_dir)));
    for (name, value) in vars {
        script.push_str(&assignment(name, value));
        script.push('\n');
    }
    script.push_str(PRELUDE);
    script.push_str(body);
    shell.run_ok(&script, SCRIPT_TIMEOUT, step)
}

/// Tries once to take the lock with `holder`'s record.
pub fn try_take(shell: &dyn DeviceShell, work_dir: &str, holder: &Holder) -> Result<Attempt, AdbError> {
    // A work dir that cannot be created is named with mkdir's own words (`Permission denied`):
    // the lock's mkdir below would only say that its parent does not exist. A lock released
    // between the failed mkdir and the look at it has vanished: the taker tries again.
    const BODY: &str = r#"if ! e=$(mkdir -p "$W" 2>&1); then echo "unwritable $e"
elif e=$(mkdir "$L" 2>&1); then
  if printf '%s' "$REC" > "$L/holder.tmp" && mv -f "$L/holder.tmp" "$L/holder" && date +%s > "$L/heartbeat"; then
    echo taken
  else
    echo "unwritable cannot write $L/holder"; rm -rf "$L"
  fi
elif [ -d "$L" ]; then inspect
elif [ ! -e "$L" ] && [ -w "$W" ]; then echo "vanished $e"
else echo "unwritable $e"
fi
"#;
    let out = run(shell, work_dir, &[("REC", &holder.to_text())], BODY, "take the device lock")?;
    Ok(match out.lines().next().unwrap_or("") {
        "taken" => Attempt::Taken,
        first => match (first.strip_prefix("unwritable "), first.strip_prefix("vanished ")) {
            (Some(why), _) => Attempt::Unwritable(why.trim().to_string()),
            (_, Some(why)) => Attempt::Vanished(why.trim().to_string()),
            _ => Attempt::Held(parse_observation(&out)),
        },
    })
}

/// The lock as it is, without taking it; `None` when it is free.
pub fn inspect(shell: &dyn DeviceShell, work_dir: &str) -> Result<Option<Observation>, AdbError> {
    let out =
        run(shell, work_dir, &[], "if [ -d \"$L\" ]; then inspect; else echo free; fi\n", "inspect the device lock")?;
    Ok((out.lines().next() != Some("free")).then(|| parse_observation(&out)))
}

/// Removes the lock if it still belongs to `run` (`""`: a lock without a holder record); false
/// when it changed hands in the meantime.
pub fn break_lock(shell: &dyn DeviceShell, work_dir: &str, run: &str) -> Result<bool, AdbError> {
    let body = "if [ -d \"$L\" ] && owned_by \"$R\"; then drop_lock && echo broken; else echo changed; fi\n";
    Ok(self::run(shell, work_dir, &[("R", run)], body, "break a stale device lock")?.trim() == "broken")
}

/// Removes the lock whatever it holds (`npugate devices --unlock`).
pub fn clear(shell: &dyn DeviceShell, work_dir: &str) -> Result<(), AdbError> {
    run(shell, work_dir, &[], "[ ! -d \"$L\" ] || drop_lock\n", "clear the device lock")?;
    Ok(())
}

/// Refreshes `run`'s heartbeat; false when the lock is no longer `run`'s.
pub fn heartbeat(shell: &dyn DeviceShell, work_dir: &str, run: &str) -> Result<bool, AdbError> {
    let body = "if owned_by \"$R\"; then date +%s > \"$L/heartbeat.tmp\" && mv -f \"$L/heartbeat.tmp\" \"$L/heartbeat\" && echo beat; else echo lost; fi\n";
    Ok(self::run(shell, work_dir, &[("R", run)], body, "refresh the device lock")?.trim() == "beat")
}

/// Releases `run`'s lock; false when it was no longer `run`'s.
pub fn release(shell: &dyn DeviceShell, work_dir: &str, run: &str) -> Result<bool, AdbError> {
    let body = "if owned_by \"$R\"; then drop_lock && echo released; else echo lost; fi\n";
    Ok(self::run(shell, work_dir, &[("R", run)], body, "release the device lock")?.trim() == "released")
}

/// Stops the harnesses of this work dir — of the given runs, or every one when `runs` is empty —
/// with SIGTERM, then SIGKILL after 3 s, and removes their run dirs. Returns what it stopped.
pub fn stop_harnesses(shell: &dyn DeviceShell, work_dir: &str, runs: &[&str]) -> Result<Vec<DeviceHarness>, AdbError> {
    const BODY: &str = r#"victims() {
  harnesses | while read -r _ p r; do
    if [ -z "$RUNS" ] || printf '%s\n' "$RUNS" | grep -qxF -e "$r"; then echo "$p $r"; fi
  done
}
v=$(victims)
if [ -n "$v" ]; then
  echo "$v" | while read -r p r; do kill -TERM "$p" 2>/dev/null; done
  i=0
  while [ $i -lt 30 ] && [ -n "$(victims)" ]; do sleep 0.1; i=$((i+1)); done
  victims | while read -r p r; do kill -KILL "$p" 2>/dev/null; done
  echo "$v" | while read -r p r; do echo "stopped $p $r"; rm -rf "$W/results/$r"; done
fi
"#;
    let out = run(shell, work_dir, &[("RUNS", &runs.join("\n"))], BODY, "stop harnesses")?;
    Ok(out.lines().filter_map(|line| parse_harness(line.strip_prefix("stopped ")?)).collect())
}

/// The harnesses running in this work dir (tests watch their fake harnesses come up with it).
#[cfg(test)]
pub fn harnesses(shell: &dyn DeviceShell, work_dir: &str) -> Result<Vec<DeviceHarness>, AdbError> {
    let out = run(shell, work_dir, &[], "harnesses\n", "list harnesses")?;
    Ok(out.lines().filter_map(|line| parse_harness(line.strip_prefix("harness ")?)).collect())
}

/// Parses what `inspect` printed: `now`, `created`, `heartbeat` and `harness` lines, then the
/// holder record after a `holder` line.
fn parse_observation(text: &str) -> Observation {
    let (head, record) = match text.split_once("\nholder\n") {
        Some((head, record)) => (head, record),
        None => (text.strip_suffix("\nholder").unwrap_or(text), ""),
    };
    let mut numbers = std::collections::BTreeMap::new();
    let mut harnesses = Vec::new();
    for line in head.lines() {
        if let Some(harness) = line.strip_prefix("harness ").and_then(parse_harness) {
            harnesses.push(harness);
        } else if let Some((key, value)) = line.split_once(' ') {
            if let Ok(number) = value.trim().parse::<u64>() {
                numbers.insert(key, number);
            }
        }
    }
    let age = |key: &str| Some(numbers.get("now")?.saturating_sub(*numbers.get(key)?));
    Observation {
        holder: Holder::parse(record),
        heartbeat_age_s: age("heartbeat"),
        lock_age_s: age("created"),
        harnesses,
    }
}

/// `PID RUN` → a harness.
fn parse_harness(text: &str) -> Option<DeviceHarness> {
    let (pid, run) = text.trim().split_once(' ')?;
    Some(DeviceHarness { pid: pid.parse().ok()?, run: run.trim().to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inspection_is_parsed_and_odd_lines_are_ignored() {
        let holder = Holder::for_this_process("run-9");
        let text = format!(
            "now 1000\ncreated 990\nheartbeat 997\nharness 42 run-9\nharness x run-1\nnoise\nholder\n{}",
            holder.to_text()
        );
        let seen = parse_observation(&text);
        assert_eq!((seen.heartbeat_age_s, seen.lock_age_s), (Some(3), Some(10)));
        assert_eq!(seen.harnesses, [DeviceHarness { pid: 42, run: "run-9".into() }]);
        assert!(seen.runs_harness_of("run-9") && !seen.runs_harness_of("run-1"));
        assert_eq!(seen.holder, Ok(holder));

        let bare = parse_observation("now 5\ncreated \nholder\n");
        assert_eq!((bare.heartbeat_age_s, bare.lock_age_s, bare.holder), (None, None, Err(RecordProblem::Missing)));
        let future = parse_observation("now 5\nheartbeat 9\nholder\n");
        assert_eq!(future.heartbeat_age_s, Some(0), "a heartbeat from the future is fresh, not a panic");
    }
}
