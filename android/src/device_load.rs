//! What else keeps a device busy around a run: the load average, the busiest processes with their
//! CPU share, and the npugate harnesses running. Each sample reads every process's CPU counters
//! (`/proc/<pid>/stat`) twice, half a second apart; the last counters of the sample before the
//! harness and the first of the sample after it give the busiest processes over the run itself.
//! The harness of the run is not among them: it starts after the first sample and has ended
//! before the second.
//!
//! On Android `/proc` is mounted `hidepid=2,gid=readproc`: a shell outside the readproc group
//! sees only its own user's processes (pid 1, init, is then invisible). The sample says so, and
//! the gate then does not pass a background check it could not see (see
//! `npugate_gate::background`).

use std::collections::BTreeMap;

use npugate_result::background::ProcessCpu;
use serde::{Deserialize, Serialize};

/// The kernel's name (`comm`) of the harness process.
const HARNESS_NAME: &str = "npugate-harness";
/// Processes listed as busiest, at most.
const BUSIEST: usize = 5;
/// Processes below this share (percent of one core) are not listed.
const LISTED_PCT: f64 = 1.0;

/// Seconds between the two snapshots of a device's sample.
pub const DEVICE_SAMPLE_S: &str = "0.5";
/// Seconds between the two snapshots of this machine's sample around a local run: enough for
/// 10 clock ticks, short enough not to lengthen every local run by a second.
pub const LOCAL_SAMPLE_S: &str = "0.1";

/// Device-side script: its own shell's pid (the sample's processes are no load), load average,
/// clock ticks per second, whether other users' processes are hidden, then two snapshots of every
/// process's `stat` line `interval_s` seconds apart, each after a `snapshot <uptime>` line. A
/// process that ends while `cat` reads makes it fail; that is no failure of the sample.
pub fn sample_script(interval_s: &str) -> String {
    format!(
        r#"echo "sampler $$"
echo "loadavg $(cat /proc/loadavg 2>/dev/null)"
echo "ticks $(getconf CLK_TCK 2>/dev/null)"
[ -r /proc/1/stat ] || echo "hidden other users"
snap() {{ echo "snapshot $(cut -d' ' -f1 /proc/uptime)"; cat /proc/[0-9]*/stat 2>/dev/null || true; }}
snap
sleep {interval_s}
snap
"#
    )
}

/// The device's load at one moment.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DeviceLoad {
    /// Load averages over 1, 5 and 15 minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loadavg: Option<[f64; 3]>,
    /// Seconds the processes' CPU shares were measured over.
    pub sample_s: f64,
    /// The busiest processes over the sample, busiest first (at most 5, each at least 1% of a core).
    pub busiest: Vec<ProcessCpu>,
    /// npugate harnesses running on the device (of any work dir), with their share.
    pub harnesses: Vec<ProcessCpu>,
    /// True when the sample saw only the shell user's own processes (`/proc` mounted `hidepid`
    /// and the shell outside the readproc group): the busiest processes of other users are unknown.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub others_hidden: bool,
    /// The counters of the sample's first and last snapshot, for the window of the run.
    #[serde(skip)]
    snapshots: Option<(Snapshot, Snapshot)>,
}

/// The busiest other processes over the harness run (between the samples before and after it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunLoad {
    /// Seconds between the two counters read.
    pub seconds: f64,
    /// The busiest processes, busiest first (at most 5, each at least 1% of a core).
    pub busiest: Vec<ProcessCpu>,
}

/// Every process's CPU time at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
struct Snapshot {
    /// Seconds since boot.
    uptime_s: f64,
    /// Clock ticks per second of the counters.
    ticks_per_s: f64,
    /// (pid, start time in ticks) → (name, user + system ticks), the sample's own shell and its
    /// children left out.
    processes: BTreeMap<(u32, u64), (String, u64)>,
}

impl DeviceLoad {
    /// Parses what [`sample_script`] printed; lines it cannot read are skipped.
    pub fn parse(text: &str) -> DeviceLoad {
        let mut loadavg = None;
        let mut others_hidden = false;
        let mut ticks_per_s = 100.0;
        let mut sampler = None;
        let mut snapshots: Vec<Snapshot> = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("sampler ") {
                sampler = rest.trim().parse::<u32>().ok();
            } else if let Some(rest) = line.strip_prefix("loadavg ") {
                let values: Vec<f64> = rest.split_whitespace().take(3).filter_map(|v| v.parse().ok()).collect();
                loadavg = <[f64; 3]>::try_from(values).ok();
            } else if let Some(rest) = line.strip_prefix("ticks ") {
                ticks_per_s = rest.trim().parse::<f64>().ok().filter(|t| *t > 0.0).unwrap_or(ticks_per_s);
            } else if line == "hidden other users" {
                others_hidden = true;
            } else if let Some(rest) = line.strip_prefix("snapshot ") {
                snapshots.push(Snapshot {
                    uptime_s: rest.trim().parse().unwrap_or(f64::NAN),
                    ticks_per_s,
                    processes: BTreeMap::new(),
                });
            } else if let (Some(snapshot), Some(stat)) = (snapshots.last_mut(), parse_stat(line)) {
                if sampler.is_none_or(|own| stat.key.0 != own && stat.parent != own) {
                    snapshot.processes.insert(stat.key, (stat.name, stat.ticks));
                }
            }
        }
        let mut load = DeviceLoad { loadavg, others_hidden, ..DeviceLoad::default() };
        if let [first, .., last] = snapshots.as_slice() {
            let shares = shares(first, last);
            load.sample_s = round_to(last.uptime_s - first.uptime_s, 2);
            load.harnesses = shares.iter().filter(|p| p.name == HARNESS_NAME).cloned().collect();
            load.busiest = busiest(shares);
            load.snapshots = Some((first.clone(), last.clone()));
        }
        load
    }
}

impl RunLoad {
    /// The busiest processes between the end of the sample `before` and the start of `after`.
    pub fn between(before: &DeviceLoad, after: &DeviceLoad) -> Option<RunLoad> {
        let (_, start) = before.snapshots.as_ref()?;
        let (end, _) = after.snapshots.as_ref()?;
        let seconds = round_to(end.uptime_s - start.uptime_s, 2);
        (seconds > 0.0).then(|| RunLoad { seconds, busiest: busiest(shares(start, end)) })
    }
}

/// Each process's share of one core between two snapshots: processes in both, and those started
/// in between (counted from zero). Ones that ended in between are not seen.
fn shares(from: &Snapshot, to: &Snapshot) -> Vec<ProcessCpu> {
    let (seconds, ticks_per_s) = (to.uptime_s - from.uptime_s, to.ticks_per_s);
    // NaN (an unreadable uptime) and a clock that did not advance give no shares.
    if seconds.is_nan() || seconds <= 0.0 {
        return Vec::new();
    }
    let started_after = from.uptime_s * ticks_per_s;
    to.processes
        .iter()
        .filter_map(|(key @ (pid, start), (name, ticks))| {
            let before = match from.processes.get(key) {
                Some((_, before)) => *before,
                None if *start as f64 >= started_after => 0,
                None => return None,
            };
            let cpu_pct = round_to(ticks.saturating_sub(before) as f64 / ticks_per_s / seconds * 100.0, 1);
            Some(ProcessCpu::single(*pid, name, cpu_pct))
        })
        .collect()
}

/// The busiest processes, those of one name together (two `sh` burners are one `sh ×2` with
/// their summed share, ranked by that sum), at most [`BUSIEST`], none below [`LISTED_PCT`].
fn busiest(mut shares: Vec<ProcessCpu>) -> Vec<ProcessCpu> {
    shares.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
    let mut by_name: Vec<ProcessCpu> = Vec::new();
    for share in shares {
        match by_name.iter_mut().find(|p| p.name == share.name) {
            Some(group) => {
                group.cpu_pct = round_to(group.cpu_pct + share.cpu_pct, 1);
                group.same_name.push(share.pid);
            }
            None => by_name.push(share),
        }
    }
    by_name.retain(|p| p.cpu_pct >= LISTED_PCT);
    by_name.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
    by_name.truncate(BUSIEST);
    by_name
}

/// `value` to `decimals` decimals (uptime has centisecond resolution; shares need no more than a
/// tenth of a percent).
fn round_to(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// What a `/proc/<pid>/stat` line says of its process.
struct StatLine {
    /// (pid, start time in ticks).
    key: (u32, u64),
    /// Its parent's pid.
    parent: u32,
    /// Its name.
    name: String,
    /// User + system ticks.
    ticks: u64,
}

/// One `/proc/<pid>/stat` line.
fn parse_stat(line: &str) -> Option<StatLine> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let pid = line.get(..open)?.trim().parse().ok()?;
    let name = line.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = line.get(close + 1..)?.split_whitespace().collect();
    // After the name: state(0) ppid(1) … utime(11) stime(12) … starttime(19).
    let number = |index: usize| fields.get(index)?.parse::<u64>().ok();
    let parent = u32::try_from(number(1)?).ok()?;
    Some(StatLine { key: (pid, number(19)?), parent, name, ticks: number(11)? + number(12)? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::{DeviceShell, LocalShell};
    use std::time::Duration;

    fn stat(pid: u32, name: &str, utime: u64, stime: u64, start: u64) -> String {
        format!("{pid} ({name}) R 1 1 1 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 {start} 0 0")
    }

    #[test]
    fn shares_come_from_counters_and_odd_names_and_lines_are_survived() {
        let text = [
            "sampler 77".to_string(),
            "loadavg 2.50 1.00 0.50 3/200 999".to_string(),
            "ticks 100".into(),
            "snapshot 1000.00".into(),
            stat(10, "busy) loop", 500, 100, 5),
            stat(11, "npugate-harness", 0, 0, 6),
            stat(12, "idle", 7, 0, 7),
            "garbage (line".into(),
            "snapshot 1000.50".into(),
            stat(10, "busy) loop", 530, 115, 5),
            stat(11, "npugate-harness", 50, 0, 6),
            stat(12, "idle", 7, 0, 7),
            stat(13, "newcomer", 10, 0, 100_020),
            stat(14, "unseen-before", 90, 0, 3),
            // The sample's own shell and its `cat`, started in the window: no load.
            stat(77, "sh", 40, 0, 100_010),
            stat(78, "cat", 30, 0, 100_030).replacen(" R 1 ", " R 77 ", 1),
        ]
        .join("\n");
        let load = DeviceLoad::parse(&text);
        assert_eq!(load.loadavg, Some([2.5, 1.0, 0.5]));
        assert!((load.sample_s - 0.5).abs() < 1e-9);
        let names: Vec<(&str, f64)> = load.busiest.iter().map(|p| (p.name.as_str(), p.cpu_pct.round())).collect();
        assert_eq!(names, [("npugate-harness", 100.0), ("busy) loop", 90.0), ("newcomer", 20.0)]);
        assert_eq!(load.harnesses.len(), 1);
        assert!(!load.others_hidden);
        assert!(DeviceLoad::parse(&format!("hidden other users\n{text}")).others_hidden);
        assert_eq!(DeviceLoad::parse("nothing useful"), DeviceLoad::default());
    }

    #[test]
    fn the_run_window_spans_the_two_samples() {
        let sample = |uptime: f64, ticks: u64| {
            DeviceLoad::parse(&format!(
                "snapshot {uptime}\n{}\nsnapshot {}\n{}\n",
                stat(10, "busy", ticks, 0, 1),
                uptime + 0.5,
                stat(10, "busy", ticks, 0, 1)
            ))
        };
        let during = RunLoad::between(&sample(100.0, 0), &sample(110.5, 500)).unwrap();
        assert_eq!(during.seconds, 10.0);
        assert_eq!((during.busiest[0].name.as_str(), during.busiest[0].cpu_pct), ("busy", 50.0));
        assert!(RunLoad::between(&DeviceLoad::default(), &sample(1.0, 0)).is_none());
    }

    #[test]
    fn processes_of_one_name_are_ranked_by_their_summed_share_over_the_window() {
        // Two snapshots 10 s apart at 100 ticks/s: two `sh` burners at 45% each, one rustc at
        // 60%, a rustc started in the window at 20%, a tiny sh at 0.5% (folded in, not listed).
        let snapshot = |uptime_s: f64, processes: &[(u32, &str, u64, u64)]| Snapshot {
            uptime_s,
            ticks_per_s: 100.0,
            processes: processes
                .iter()
                .map(|(pid, name, start, ticks)| ((*pid, *start), (name.to_string(), *ticks)))
                .collect(),
        };
        let from =
            snapshot(100.0, &[(41, "sh", 5, 1_000), (42, "sh", 6, 2_000), (50, "rustc", 7, 300), (60, "sh", 8, 0)]);
        let to = snapshot(
            110.0,
            &[
                (41, "sh", 5, 1_450),
                (42, "sh", 6, 2_450),
                (50, "rustc", 7, 900),
                (51, "rustc", 10_500, 200),
                (60, "sh", 8, 5),
            ],
        );
        let ranked = busiest(shares(&from, &to));
        let got: Vec<(&str, usize, f64)> = ranked.iter().map(|p| (p.name.as_str(), p.processes(), p.cpu_pct)).collect();
        assert_eq!(got, [("sh", 3, 90.5), ("rustc", 2, 80.0)]);
        assert_eq!(ranked[0].describe(), "sh ×3 (pid 41, 42, 60) at 90% of a core");
        assert_eq!(ranked[1].describe(), "rustc ×2 (pid 50, 51) at 80% of a core");
        // A single process keeps the plain form.
        assert_eq!(
            busiest(shares(&from, &snapshot(110.0, &[(50, "rustc", 7, 900)])))[0].describe(),
            "rustc (pid 50) at 60% of a core"
        );
    }

    /// A process that keeps one core busy until dropped.
    struct Spinner(std::process::Child);

    impl Drop for Spinner {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_busy_local_process_shows_up_in_a_real_sample() {
        let mut command = std::process::Command::new("sh");
        command
            .arg("-c")
            .arg("while :; do :; done")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let spinner = Spinner(command.spawn().unwrap());
        let out = LocalShell.run_ok(&sample_script(DEVICE_SAMPLE_S), Duration::from_secs(30), "sample").unwrap();
        let load = DeviceLoad::parse(&out);
        assert!(load.loadavg.is_some() && load.sample_s > 0.3, "{load:?}");
        // Every process's share (the listed top 5 may all be busier on a shared machine).
        let (first, last) = load.snapshots.as_ref().unwrap();
        let all = shares(first, last);
        let seen = all.iter().find(|p| p.pid == spinner.0.id());
        // On a loaded 2-core machine the spinner still gets a fair part of a core.
        assert!(seen.is_some_and(|p| p.name == "sh" && p.cpu_pct > 10.0), "spinner {}: {seen:?}", spinner.0.id());
    }
}
