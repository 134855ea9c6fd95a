//! Thermal, clock and load state of a device before and after a run: thermal zones, CPU
//! frequencies and governors, battery temperature (each where present), the load (see
//! [`crate::device_load`]), the `--cooldown-until` wait, and drift flags. Written host-side as
//! `device_state.json` next to the pulled result; the gate reads its background load.

use std::path::Path;
use std::time::{Duration, Instant};

use npugate_result::background::{BackgroundLoad, ProcessCpu};
use npugate_result::{contract, files};
use serde::{Deserialize, Serialize};

use crate::adb::{AdbError, DeviceShell};
use crate::device_load::{sample_script, DeviceLoad, RunLoad, DEVICE_SAMPLE_S};

/// Schema of `device_state.json`.
pub const DEVICE_STATE_SCHEMA: &str = "npugate.device-state/1";
/// File name of the record next to the pulled result.
pub const DEVICE_STATE_FILE: &str = "device_state.json";
/// A run whose hottest sensor rose by at least this much is flagged.
const TEMPERATURE_DRIFT_C: f64 = 5.0;

/// One reading of the device's thermal and clock state.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DeviceState {
    /// Thermal zones that could be read.
    pub thermal_zones: Vec<ThermalZone>,
    /// CPUs with a cpufreq directory.
    pub cpus: Vec<CpuClock>,
    /// Battery temperature (°C), when the device has a battery sensor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub battery_c: Option<f64>,
    /// Load average, busiest processes and running harnesses (absent in a cooldown reading).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<DeviceLoad>,
}

/// One `/sys/class/thermal/thermal_zone*`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThermalZone {
    /// Zone directory name (`thermal_zone3`).
    pub zone: String,
    /// Its `type` (`cpu-0-0-usr`, `x86_pkg_temp`, …).
    pub kind: String,
    /// Temperature in °C.
    pub celsius: f64,
}

/// One CPU's cpufreq state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CpuClock {
    /// CPU name (`cpu4`).
    pub cpu: String,
    /// `scaling_cur_freq` in kHz.
    pub cur_khz: Option<u64>,
    /// `scaling_max_freq` in kHz (lowered by thermal throttling).
    pub max_khz: Option<u64>,
    /// `scaling_governor`.
    pub governor: String,
}

/// What `--cooldown-until` did.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cooldown {
    /// Target temperature (°C) of the hottest sensor.
    pub target_c: f64,
    /// Seconds waited.
    pub waited_s: f64,
    /// Hottest temperature at the end of the wait, when any sensor exists.
    pub final_c: Option<f64>,
    /// `reached`, `timed_out` (ran anyway) or `no_sensor`.
    pub outcome: String,
}

/// `device_state.json`: the device's state around one run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceStateRecord {
    /// Always [`DEVICE_STATE_SCHEMA`].
    pub schema: String,
    /// Device serial.
    pub serial: String,
    /// The cooldown wait, when requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown: Option<Cooldown>,
    /// State right before the harness started.
    pub before: DeviceState,
    /// State right after it ended (absent when the device could not be read).
    pub after: Option<DeviceState>,
    /// One sentence per drift found between `before` and `after`; empty = steady.
    pub drift: Vec<String>,
    /// The busiest other processes while the harness ran (absent when a load sample failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub during: Option<RunLoad>,
}

impl contract::Document for DeviceStateRecord {
    const SCHEMA: contract::Schema = contract::Schema::new(DEVICE_STATE_SCHEMA);
}

/// Device-side script printing `thermal ZONE MILLI TYPE`, `cpu NAME CUR MAX GOV`, `battery TENTHS`.
const STATE_SCRIPT: &str = r#"for z in /sys/class/thermal/thermal_zone*; do
  t=$(cat "$z/temp" 2>/dev/null) && [ -n "$t" ] && echo "thermal ${z##*/} $t $(cat "$z/type" 2>/dev/null)"
done
for c in /sys/devices/system/cpu/cpu[0-9]*; do
  f=$c/cpufreq; [ -d "$f" ] || continue
  echo "cpu ${c##*/} $(cat $f/scaling_cur_freq 2>/dev/null || echo -) $(cat $f/scaling_max_freq 2>/dev/null || echo -) $(cat $f/scaling_governor 2>/dev/null)"
done
b=$(cat /sys/class/power_supply/battery/temp 2>/dev/null) && [ -n "$b" ] && echo "battery $b"
true
"#;

/// Separates the thermal part of [`read`]'s output from the load sample.
const LOAD_MARKER: &str = "--- npugate load sample";

/// Reads the device's thermal and clock state and samples its load (one shell call, ~0.5 s).
pub fn read(shell: &dyn DeviceShell) -> Result<DeviceState, AdbError> {
    read_sampled(shell, DEVICE_SAMPLE_S)
}

/// Reads the thermal and clock state and samples the load over `interval_s` seconds (one shell
/// call): [`read`] with another interval, e.g. for this machine around a local run.
pub fn read_sampled(shell: &dyn DeviceShell, interval_s: &str) -> Result<DeviceState, AdbError> {
    let script = format!("{STATE_SCRIPT}echo '{LOAD_MARKER}'\n{}", sample_script(interval_s));
    let out = shell.run_ok(&script, Duration::from_secs(30), "read device state")?;
    let (thermal, load) = out.split_once(LOAD_MARKER).unwrap_or((&out, ""));
    Ok(DeviceState { load: Some(DeviceLoad::parse(load)), ..parse_state(thermal) })
}

/// Reads the thermal and clock state only (a cooldown's poll).
fn read_thermal(shell: &dyn DeviceShell) -> Result<DeviceState, AdbError> {
    Ok(parse_state(&shell.run_ok(STATE_SCRIPT, Duration::from_secs(30), "read device state")?))
}

/// Waits until the hottest sensor is at or below `target_c`, polling every `poll`, for at most
/// `limit`; runs anyway after that (the record says so).
pub fn cool_down(
    shell: &dyn DeviceShell,
    target_c: f64,
    limit: Duration,
    poll: Duration,
    mut on_wait: impl FnMut(f64),
) -> Result<Cooldown, AdbError> {
    let start = Instant::now();
    loop {
        let hottest = read_thermal(shell)?.hottest_c();
        let outcome = match hottest {
            None => Some("no_sensor"),
            Some(t) if t <= target_c => Some("reached"),
            Some(_) if start.elapsed() + poll > limit => Some("timed_out"),
            Some(t) => {
                on_wait(t);
                None
            }
        };
        if let Some(outcome) = outcome {
            let waited_s = start.elapsed().as_secs_f64();
            return Ok(Cooldown { target_c, waited_s, final_c: hottest, outcome: outcome.into() });
        }
        std::thread::sleep(poll);
    }
}

/// Parses a temperature such as `40C`, `40`, `38.5c` into °C.
pub fn parse_celsius(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches(['C', 'c']).trim();
    match number.parse::<f64>() {
        Ok(c) if (-40.0..=150.0).contains(&c) => Ok(c),
        _ => Err(format!("{text:?} is not a temperature like 40C")),
    }
}

impl DeviceState {
    /// The hottest plausible reading across thermal zones and battery.
    pub fn hottest_c(&self) -> Option<f64> {
        self.thermal_zones.iter().map(|z| z.celsius).chain(self.battery_c).reduce(f64::max)
    }
}

impl DeviceStateRecord {
    /// A record for `serial` with its drift and the load during the run computed from
    /// `before`/`after`.
    pub fn new(serial: &str, cooldown: Option<Cooldown>, before: DeviceState, after: Option<DeviceState>) -> Self {
        let drift = after.as_ref().map(|a| drift(&before, a)).unwrap_or_default();
        let during = match (&before.load, after.as_ref().and_then(|a| a.load.as_ref())) {
            (Some(before), Some(after)) => RunLoad::between(before, after),
            _ => None,
        };
        DeviceStateRecord {
            schema: DEVICE_STATE_SCHEMA.into(),
            serial: serial.into(),
            cooldown,
            before,
            after,
            drift,
            during,
        }
    }

    /// The record in a result dir, when there is one (device runs write it).
    pub fn read_in(dir: &Path) -> Result<Option<DeviceStateRecord>, contract::ReadError> {
        contract::read_if_present(&dir.join(files::DEVICE_STATE))
    }

    /// What else ran on the device, as the gate reads it: the busiest processes during the run
    /// (else just before it), every other harness seen before or after it, and how the device's
    /// state drifted; `None` when no load was recorded.
    pub fn background(&self) -> Option<BackgroundLoad> {
        let after = self.after.as_ref().and_then(|a| a.load.as_ref());
        let (window, busiest) = match (&self.during, &self.before.load) {
            (Some(during), _) => (format!("during the {:.1} s harness run", during.seconds), during.busiest.clone()),
            (None, Some(before)) => {
                (format!("in the {:.1} s sampled just before the run", before.sample_s), before.busiest.clone())
            }
            (None, None) => return None,
        };
        let mut other_harnesses: Vec<ProcessCpu> = Vec::new();
        for harness in self.before.load.iter().chain(after).flat_map(|l| &l.harnesses) {
            if !other_harnesses.iter().any(|h| h.pid == harness.pid) {
                other_harnesses.push(harness.clone());
            }
        }
        let blind = self.before.load.iter().chain(after).any(|l| l.others_hidden).then(|| {
            format!(
                "device {}'s shell sees only its own user's processes (/proc is mounted hidepid and adb's shell is not in the \
                 readproc group), so what else kept the device busy {window} is unknown",
                self.serial
            )
        });
        Some(BackgroundLoad { window, busiest, other_harnesses, blind, state_changes: self.drift.clone() })
    }
}

/// Sentences describing how `after` drifted from `before` (temperature rise, throttled or
/// re-governed CPUs).
fn drift(before: &DeviceState, after: &DeviceState) -> Vec<String> {
    let mut found = Vec::new();
    if let (Some(b), Some(a)) = (before.hottest_c(), after.hottest_c()) {
        if a - b >= TEMPERATURE_DRIFT_C {
            found.push(format!("hottest sensor rose from {b:.1}°C to {a:.1}°C during the run"));
        }
    }
    for cpu in &before.cpus {
        let Some(later) = after.cpus.iter().find(|c| c.cpu == cpu.cpu) else { continue };
        if let (Some(b), Some(a)) = (cpu.max_khz, later.max_khz) {
            if a < b {
                found.push(format!("{} max clock dropped from {b} kHz to {a} kHz (throttled)", cpu.cpu));
            }
        }
        if cpu.governor != later.governor {
            found.push(format!("{} governor changed from {} to {}", cpu.cpu, cpu.governor, later.governor));
        }
    }
    found
}

fn parse_state(text: &str) -> DeviceState {
    let mut state = DeviceState::default();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("thermal") => {
                let (Some(zone), Some(raw)) = (words.next(), words.next()) else { continue };
                let Some(celsius) = raw.parse::<f64>().ok().map(sysfs_celsius).filter(|c| plausible(*c)) else {
                    continue;
                };
                let kind = words.collect::<Vec<_>>().join(" ");
                state.thermal_zones.push(ThermalZone { zone: zone.into(), kind, celsius });
            }
            Some("cpu") => {
                let (Some(cpu), Some(cur), Some(max)) = (words.next(), words.next(), words.next()) else { continue };
                let governor = words.collect::<Vec<_>>().join(" ");
                state.cpus.push(CpuClock {
                    cpu: cpu.into(),
                    cur_khz: cur.parse().ok(),
                    max_khz: max.parse().ok(),
                    governor,
                });
            }
            Some("battery") => {
                state.battery_c =
                    words.next().and_then(|t| t.parse::<f64>().ok()).map(|t| t / 10.0).filter(|c| plausible(*c));
            }
            _ => {}
        }
    }
    state
}

/// Thermal zones report millidegrees; a few drivers report whole degrees.
fn sysfs_celsius(raw: f64) -> f64 {
    if raw.abs() >= 1000.0 {
        raw / 1000.0
    } else {
        raw
    }
}

/// Readings outside −40…150 °C are sensor placeholders, not temperatures.
fn plausible(celsius: f64) -> bool {
    (-40.0..=150.0).contains(&celsius)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PHONE: &str = "thermal thermal_zone0 41200 cpu-0-0-usr\nthermal thermal_zone1 -273000 bogus\n\
                         thermal thermal_zone2 39 skin therm\ncpu cpu0 1200000 2016000 schedutil\n\
                         cpu cpu7 - 3302400 schedutil\nbattery 312\n";

    #[test]
    fn parses_zones_clocks_and_battery_skipping_placeholders() {
        let s = parse_state(PHONE);
        assert_eq!(s.thermal_zones.len(), 2);
        assert_eq!(s.thermal_zones[1].kind, "skin therm");
        assert_eq!(s.thermal_zones[1].celsius, 39.0);
        assert_eq!(s.cpus[1].cur_khz, None);
        assert_eq!(s.cpus[1].max_khz, Some(3302400));
        assert_eq!(s.battery_c, Some(31.2));
        assert_eq!(s.hottest_c(), Some(41.2));
    }

    #[test]
    fn flags_heat_and_throttling_but_not_a_steady_device() {
        let before = parse_state(PHONE);
        assert!(drift(&before, &before).is_empty());
        let hot = PHONE.replace("41200", "52000").replace("3302400", "2400000");
        let found = drift(&before, &parse_state(&hot));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("41.2°C to 52.0°C"));
        assert!(found[1].contains("cpu7") && found[1].contains("throttled"));
    }

    #[test]
    fn a_device_without_sensors_has_an_empty_state() {
        let s = parse_state("");
        assert_eq!(s, DeviceState::default());
        assert_eq!(s.hottest_c(), None);
    }

    /// A load sample: `snapshot` lines at `uptime` and half a second later, each with a busy
    /// process at `ticks` and, when `harness`, another npugate harness.
    fn load_sample(uptime: f64, ticks: u64, harness: bool) -> String {
        let mut lines = vec!["loadavg 1.0 1.0 1.0 1/100 1".to_string(), "ticks 100".into()];
        for at in [uptime, uptime + 0.5] {
            lines.push(format!("snapshot {at}"));
            lines.push(format!("812 (cc1plus) R 1 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 5 0 0"));
            if harness {
                lines.push("99 (npugate-harness) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 6 0 0".into());
            }
        }
        lines.join("\n")
    }

    #[test]
    fn the_gate_sees_the_busiest_processes_during_the_run_and_other_harnesses() {
        let state = |uptime: f64, ticks: u64, harness: bool| DeviceState {
            load: Some(crate::device_load::DeviceLoad::parse(&load_sample(uptime, ticks, harness))),
            ..parse_state(PHONE)
        };
        let record = DeviceStateRecord::new("R5CX", None, state(100.0, 0, true), Some(state(110.5, 900, false)));
        let during = record.during.as_ref().unwrap();
        assert_eq!((during.seconds, during.busiest[0].cpu_pct), (10.0, 90.0));
        let background = record.background().unwrap();
        assert_eq!(background.window, "during the 10.0 s harness run");
        assert_eq!(background.busiest[0].name, "cc1plus");
        assert_eq!(background.other_harnesses.iter().map(|h| h.pid).collect::<Vec<_>>(), [99]);

        let without_after = DeviceStateRecord::new("R5CX", None, state(100.0, 0, false), None);
        assert!(without_after.background().unwrap().window.contains("just before the run"));
        assert!(DeviceStateRecord::new("R5CX", None, parse_state(PHONE), None).background().is_none());
    }

    #[test]
    fn a_sample_that_saw_only_its_own_user_says_the_background_is_unknown() {
        let state = |uptime: f64, hidden: bool| {
            let sample =
                format!("{}{}", if hidden { "hidden other users\n" } else { "" }, load_sample(uptime, 0, false));
            DeviceState { load: Some(crate::device_load::DeviceLoad::parse(&sample)), ..parse_state(PHONE) }
        };
        let blind = DeviceStateRecord::new("R5CX", None, state(100.0, true), Some(state(110.5, true)))
            .background()
            .unwrap()
            .blind;
        let blind = blind.expect("a blind sample is named");
        assert!(
            blind.contains("device R5CX's shell sees only its own user's processes") && blind.contains("readproc"),
            "{blind}"
        );
        assert!(blind.contains("during the 10.0 s harness run"), "{blind}");
        let seeing = DeviceStateRecord::new("R5CX", None, state(100.0, false), Some(state(110.5, false)));
        assert_eq!(seeing.background().unwrap().blind, None);
    }

    #[test]
    fn a_record_of_an_older_npugate_without_load_still_reads() {
        let old = r#"{"schema":"npugate.device-state/1","serial":"R5CX","before":{"thermal_zones":[],"cpus":[]},"after":null,"drift":[]}"#;
        let record = contract::parse::<DeviceStateRecord>(old, Path::new("device_state.json")).unwrap();
        assert!(record.during.is_none() && record.before.load.is_none() && record.background().is_none());
    }

    #[test]
    fn celsius_option_accepts_suffix_and_rejects_nonsense() {
        assert_eq!(parse_celsius("40C"), Ok(40.0));
        assert_eq!(parse_celsius("38.5c"), Ok(38.5));
        assert!(parse_celsius("hot").unwrap_err().contains("hot"));
        assert!(parse_celsius("400").is_err());
    }
}
