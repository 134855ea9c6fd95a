//! Energy per inference on a device from its battery fuel gauge (`--energy-window SECONDS`).
//!
//! The gauge is the battery's `current_now` (µA) and `voltage_now` (µV) under
//! `/sys/class/power_supply`. Before the run a probe finds it and refuses a device on external power
//! (charging, or plugged in and not charging: the supply then feeds the device and the battery's
//! gauge sees little of its draw). The run's shell script then starts a sampler beside the harness —
//! mksh's `read` builtin on the gauge's files every 0.1 s, stamped with `/proc/uptime` — sleeps
//! through an idle window of the same length before the harness starts, and the harness runs its
//! energy window (inferences back to back, timed on `/proc/uptime`). Both windows are read by the
//! same sampler, so its own cost cancels out. Energy per inference is the mean draw over the
//! inference window less the idle draw, times the window, over the inferences; its stated error is
//! twice the standard error of the two means (each over the gauge's distinct readings: a gauge
//! updates less often than it is sampled) plus one gauge step.
//!
//! Every device-side line is of the device command set ([`crate::adb::commands`]) and every path in
//! it is quoted.

use npugate_result::energy::{EnergyMeasurement, EnergyRecord, GaugeResolution};
use npugate_result::EnergyWindow;

use crate::adb::quote::quote;
use crate::adb::{AdbError, DeviceShell};

/// Where the kernel lists power supplies.
pub const POWER_SUPPLY: &str = "/sys/class/power_supply";
/// Seconds between gauge samples.
pub const SAMPLE_INTERVAL_S: f64 = 0.1;
/// A window must hold this many of the gauge's own updates.
const MIN_UPDATES: f64 = 5.0;
/// Fewest samples in each window.
const MIN_SAMPLES: usize = 3;

/// Device-side probe: every power supply's `type`, `status`, `online`, `current_now`,
/// `voltage_now` (those the shell can read), and `dumpsys battery` where Android has it.
pub const PROBE_SCRIPT: &str = r#"for d in /sys/class/power_supply/*; do
  [ -d "$d" ] || continue
  echo "supply ${d##*/}"
  for f in type status online current_now voltage_now; do
    [ -r "$d/$f" ] && echo "$f $(cat "$d/$f" 2>/dev/null)"
  done
done
command -v dumpsys >/dev/null 2>&1 && dumpsys battery 2>/dev/null | while read -r line; do echo "dumpsys $line"; done
true
"#;

/// A battery gauge the shell can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gauge {
    /// Its directory (`/sys/class/power_supply/battery`).
    pub dir: String,
}

/// Reads the device's power supplies: the gauge to sample, or why energy cannot be measured.
pub fn probe(shell: &dyn DeviceShell) -> Result<Result<Gauge, String>, AdbError> {
    let out = shell.run_ok(PROBE_SCRIPT, std::time::Duration::from_secs(30), "read the battery gauge")?;
    Ok(parse_probe(&out))
}

/// The power supplies the probe printed, in order, each with its fields.
fn supplies(text: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut supplies: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for line in text.lines() {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        match (key, supplies.last_mut()) {
            ("supply", _) => supplies.push((value.trim().to_string(), Vec::new())),
            ("dumpsys", _) => {}
            (_, Some((_, fields))) => fields.push((key.to_string(), value.trim().to_string())),
            _ => {}
        }
    }
    supplies
}

/// The gauge, or why there is none to use (see the module doc).
pub fn parse_probe(text: &str) -> Result<Gauge, String> {
    let supplies = supplies(text);
    let field = |fields: &[(String, String)], name: &str| -> Option<String> {
        fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).filter(|v| !v.is_empty())
    };
    let external: Vec<&str> = supplies
        .iter()
        .filter(|(_, f)| field(f, "type").is_some_and(|t| !t.eq_ignore_ascii_case("battery")))
        .filter(|(_, f)| field(f, "online").as_deref() == Some("1"))
        .map(|(name, _)| name.as_str())
        .collect();
    let batteries: Vec<&(String, Vec<(String, String)>)> =
        supplies.iter().filter(|(_, f)| field(f, "type").is_some_and(|t| t.eq_ignore_ascii_case("battery"))).collect();
    let Some((name, fields)) = batteries.first() else {
        let dumpsys = dumpsys_power(text).map(|p| format!(" (dumpsys battery: {p})")).unwrap_or_default();
        return Err(format!(
            "no battery fuel gauge: {POWER_SUPPLY} lists no supply of type Battery the shell can read{dumpsys}"
        ));
    };
    let readable = |f: &str| field(fields, f).is_some_and(|v| v.trim().parse::<f64>().is_ok());
    if !readable("current_now") || !readable("voltage_now") {
        return Err(format!(
            "no battery fuel gauge: {POWER_SUPPLY}/{name} does not show current_now and voltage_now to the shell"
        ));
    }
    let status = field(fields, "status").unwrap_or_default();
    if let Some(why) = on_external_power(&status, &external) {
        return Err(why);
    }
    Ok(Gauge { dir: format!("{POWER_SUPPLY}/{name}") })
}

/// Why a device is refused for energy because of its power source, when it is.
fn on_external_power(status: &str, online: &[&str]) -> Option<String> {
    let plugged = match online {
        [] => String::new(),
        supplies => format!(", external supply online: {}", supplies.join(", ")),
    };
    let remedy =
        "unplug it (adb over Wi-Fi: `adb tcpip 5555`, then `adb connect`) or cut its charging input, and run again";
    match status {
        "Charging" | "Full" => Some(format!(
            "the device is charging (battery status {status}{plugged}): its gauge reads the charger's current, not the device's draw; {remedy}"
        )),
        "Not charging" => Some(format!(
            "the device is on external power (battery status Not charging{plugged}): the supply feeds it and the battery's gauge sees little of its draw; {remedy}"
        )),
        _ if !online.is_empty() => Some(format!(
            "the device is on external power (battery status {status}{plugged}): part of its draw comes from the supply, which the gauge does not see; {remedy}"
        )),
        _ => None,
    }
}

/// What `dumpsys battery` says about the power source, when the probe ran it.
fn dumpsys_power(text: &str) -> Option<String> {
    let lines: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("dumpsys "))
        .map(str::trim)
        .filter(|l| l.ends_with("powered: true") || l.starts_with("status:") || l.starts_with("voltage:"))
        .collect();
    (!lines.is_empty()).then(|| lines.join(", "))
}

/// The device-side shell function that samples `gauge` every 0.1 s until `/proc/uptime` passes
/// `end_after_s` seconds from now, one `UPTIME CURRENT VOLTAGE STATUS` line per sample.
pub fn sampler_function(gauge: &Gauge, end_after_s: u64) -> String {
    let g = quote(&gauge.dir);
    format!(
        "npugate_gauge() {{ end=$(( $(cut -d. -f1 /proc/uptime) + {end_after_s} )); while true; do \
         read -r up _ </proc/uptime; read -r c <{g}/current_now; read -r v <{g}/voltage_now; \
         s=Unknown; read -r s 2>/dev/null <{g}/status; echo \"$up $c $v $s\"; \
         [ \"${{up%.*}}\" -lt \"$end\" ] || break; sleep {SAMPLE_INTERVAL_S}; done; }}"
    )
}

/// What runs before the harness on a device measured for energy: the sampler in the background
/// into `file`, the idle window, its end marked (`idle_end UPTIME`). The caller ends the script with
/// [`EPILOGUE`].
pub fn prologue(gauge: &Gauge, file: &str, idle_s: f64, end_after_s: u64) -> String {
    let file = quote(file);
    format!(
        "{}; npugate_gauge >>{file} 2>/dev/null & gauge_pid=$!; sleep {idle_s}; \
         read -r up _ </proc/uptime; echo \"idle_end $up\" >>{file}; ",
        sampler_function(gauge, end_after_s)
    )
}

/// What ends the script after the harness: the sampler stopped, the harness's exit code kept.
pub const EPILOGUE: &str = "; code=$?; kill $gauge_pid 2>/dev/null; exit $code";

/// One gauge sample.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    uptime_s: f64,
    current: f64,
    voltage: f64,
    status: String,
}

/// The samples and the idle window's end from the sampler's file; lines it cannot read (a file
/// read while the kernel rewrote it) are skipped.
fn parse_samples(text: &str) -> (Vec<Sample>, Option<f64>) {
    let mut samples = Vec::new();
    let mut idle_end = None;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["idle_end", up] => idle_end = up.parse().ok(),
            [up, current, voltage, status @ ..] => {
                if let (Ok(uptime_s), Ok(current), Ok(voltage)) = (up.parse(), current.parse(), voltage.parse()) {
                    samples.push(Sample { uptime_s, current, voltage, status: status.join(" ") });
                }
            }
            _ => {}
        }
    }
    (samples, idle_end)
}

/// Energy per inference from the sampler's file and the harness's energy window (see the module doc).
pub fn measure(samples_text: &str, window: &EnergyWindow, gauge: &Gauge) -> EnergyRecord {
    match compute(samples_text, window, gauge) {
        Ok(measurement) => EnergyRecord::measured(measurement),
        Err(why) => EnergyRecord::not_measured(why),
    }
}

fn compute(samples_text: &str, window: &EnergyWindow, gauge: &Gauge) -> Result<EnergyMeasurement, String> {
    let (samples, idle_end) = parse_samples(samples_text);
    let idle_end =
        idle_end.ok_or("the idle window's end was not recorded (the run stopped before the harness started)")?;
    if let Some(charging) = samples.iter().find(|s| matches!(s.status.as_str(), "Charging" | "Full" | "Not charging")) {
        return Err(format!(
            "the device went on external power during the measurement (battery status {} at uptime {:.1} s): its gauge no longer reads the device's draw",
            charging.status, charging.uptime_s
        ));
    }
    if window.inferences == 0 || window.seconds() <= 0.0 {
        return Err("the energy window ran no inference".into());
    }
    let idle: Vec<&Sample> = samples.iter().filter(|s| s.uptime_s <= idle_end).collect();
    let busy: Vec<&Sample> =
        samples.iter().filter(|s| s.uptime_s >= window.start_uptime_s && s.uptime_s <= window.end_uptime_s).collect();
    if idle.len() < MIN_SAMPLES || busy.len() < MIN_SAMPLES {
        return Err(format!(
            "too few gauge samples: {} in the idle window and {} in the inference window (at least {MIN_SAMPLES} each); pass a longer --energy-window",
            idle.len(),
            busy.len()
        ));
    }
    // The ABI says µA and µV; a gauge that reports a phone battery's volts in mV reports mA too.
    let volts =
        npugate_result::stats::median(&samples.iter().map(|s| s.voltage.abs()).collect::<Vec<_>>()).unwrap_or(0.0);
    let scale = if volts < 100_000.0 { 1000.0 } else { 1.0 };
    let resolution = resolution(&samples, scale);
    if let Some(interval) = resolution.update_interval_s.filter(|i| window.seconds() < MIN_UPDATES * i) {
        return Err(format!(
            "the gauge updates its reading every {interval:.1} s: the {:.1} s window holds fewer than {MIN_UPDATES} updates; pass --energy-window {:.0} or more",
            window.seconds(),
            (MIN_UPDATES * interval).ceil()
        ));
    }
    let (busy_mw, busy_se) = mean_power(&busy, scale);
    let (idle_mw, idle_se) = mean_power(&idle, scale);
    let step_mw = resolution.current_step_ua.unwrap_or(0.0) * volts * scale / 1e9;
    let per_inference = window.seconds() / window.inferences as f64;
    let idle_s = idle.last().map_or(0.0, |l| l.uptime_s) - idle.first().map_or(0.0, |f| f.uptime_s);
    Ok(EnergyMeasurement {
        energy_mj: (busy_mw - idle_mw) * per_inference,
        error_mj: (2.0 * (busy_se.powi(2) + idle_se.powi(2)).sqrt() + step_mw) * per_inference,
        method: format!(
            "battery fuel gauge {}: current_now × voltage_now sampled every {:.2} s by the device's shell; the mean draw over {:.1} s of back-to-back inferences less the mean idle draw over the {idle_s:.1} s before the run, × the window / {} inferences",
            gauge.dir,
            resolution.sample_interval_s,
            window.seconds(),
            window.inferences
        ),
        gauge: gauge.dir.clone(),
        busy_mw,
        idle_mw,
        window_s: window.seconds(),
        inferences: window.inferences,
        idle_s,
        samples: [busy.len(), idle.len()],
        resolution,
    })
}

/// The mean draw of `samples` (mW) and its standard error over the gauge's distinct readings.
fn mean_power(samples: &[&Sample], scale: f64) -> (f64, f64) {
    let powers: Vec<f64> =
        samples.iter().map(|s| (s.current * scale).abs() * (s.voltage * scale).abs() / 1e9).collect();
    let n = powers.len() as f64;
    let mean = powers.iter().sum::<f64>() / n;
    let variance = powers.iter().map(|p| (p - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    let readings = 1 + samples.windows(2).filter(|w| w[0].current != w[1].current).count();
    (mean, (variance / readings as f64).sqrt())
}

/// The gauge's step and update interval as seen over every sample, and the sampling interval.
fn resolution(samples: &[Sample], scale: f64) -> GaugeResolution {
    let changes: Vec<(f64, f64)> = samples
        .windows(2)
        .filter(|w| w[0].current != w[1].current)
        .map(|w| (w[1].uptime_s, ((w[1].current - w[0].current) * scale).abs()))
        .collect();
    let intervals: Vec<f64> = changes.windows(2).map(|c| c[1].0 - c[0].0).collect();
    let gaps: Vec<f64> = samples.windows(2).map(|w| w[1].uptime_s - w[0].uptime_s).collect();
    GaugeResolution {
        current_step_ua: changes.iter().map(|c| c.1).filter(|d| *d > 0.0).min_by(f64::total_cmp),
        update_interval_s: npugate_result::stats::median(&intervals),
        sample_interval_s: npugate_result::stats::median(&gaps).unwrap_or(SAMPLE_INTERVAL_S),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adb::commands::outside_the_set;
    use crate::adb::{DeviceShell, LocalShell};

    const PHONE: &str = "supply battery\ntype Battery\nstatus Discharging\ncurrent_now -412000\nvoltage_now 3987000\n\
                         supply usb\ntype USB\nonline 0\n";

    #[test]
    fn the_probe_finds_the_gauge_and_refuses_external_power_naming_why() {
        assert_eq!(parse_probe(PHONE), Ok(Gauge { dir: "/sys/class/power_supply/battery".into() }));
        let charging = PHONE.replace("Discharging", "Charging").replace("online 0", "online 1");
        let why = parse_probe(&charging).unwrap_err();
        assert!(
            why.starts_with("the device is charging (battery status Charging, external supply online: usb)"),
            "{why}"
        );
        assert!(why.contains("adb tcpip"), "{why}");
        let bypass = PHONE.replace("Discharging", "Not charging");
        assert!(parse_probe(&bypass).unwrap_err().contains("on external power (battery status Not charging"));
        let board = "dumpsys AC powered: true\ndumpsys status: 2\n";
        let why = parse_probe(board).unwrap_err();
        assert!(
            why.contains("lists no supply of type Battery") && why.contains("AC powered: true, status: 2"),
            "{why}"
        );
        let hidden = "supply battery\ntype Battery\nstatus Discharging\n";
        assert!(parse_probe(hidden).unwrap_err().contains("does not show current_now and voltage_now"));
    }

    /// A window of `seconds` from uptime 100 with `inferences`, and the samples of a gauge that
    /// reads `idle_ua` before uptime `switch` and `busy_ua` after (±1 mA of noise), at 4 V.
    fn run(idle_ua: f64, busy_ua: f64, switch: f64) -> (String, EnergyWindow) {
        let mut text = String::new();
        for i in 0..300 {
            let up = 80.0 + f64::from(i) * 0.1;
            let noise = if i % 2 == 0 { 1000.0 } else { -1000.0 };
            let current = if up < switch { idle_ua } else { busy_ua } + noise;
            text.push_str(&format!("{up:.2} -{current} 4000000 Discharging\n"));
            if (up - 90.0).abs() < 1e-9 {
                text.push_str("idle_end 90.00\n");
            }
        }
        (text, EnergyWindow { requested_s: 5.0, start_uptime_s: 100.0, end_uptime_s: 105.0, inferences: 500 })
    }

    #[test]
    fn a_known_draw_gives_the_known_energy_within_the_stated_error() {
        let gauge = Gauge { dir: "/sys/class/power_supply/battery".into() };
        let (text, window) = run(100_000.0, 350_000.0, 95.0);
        let m = measure(&text, &window, &gauge).measured.unwrap();
        // 250 mA more at 4 V is 1000 mW; 5 s over 500 inferences is 10 ms each: 10 mJ.
        assert!((m.energy_mj - 10.0).abs() <= m.error_mj, "{m:?}");
        assert!(m.error_mj > 0.0 && m.error_mj < 0.2, "{m:?}");
        assert_eq!((m.samples[0] > 40, m.samples[1] > 90), (true, true), "{m:?}");
        assert_eq!(m.resolution.current_step_ua, Some(2000.0));
        assert!(m.method.contains("/sys/class/power_supply/battery") && m.method.contains("500 inferences"));
    }

    #[test]
    fn charging_a_short_window_and_a_lost_idle_mark_are_refused_with_why() {
        let gauge = Gauge { dir: "/sys/class/power_supply/battery".into() };
        let (text, window) = run(100_000.0, 350_000.0, 95.0);
        let charging = text.replacen("102.00 -351000 4000000 Discharging", "102.00 -351000 4000000 Charging", 1);
        let why = measure(&charging, &window, &gauge).not_measured.unwrap();
        assert!(why.contains("battery status Charging at uptime 102.0 s"), "{why}");
        let why = measure(&text.replace("idle_end 90.00\n", ""), &window, &gauge).not_measured.unwrap();
        assert!(why.contains("idle window's end was not recorded"), "{why}");
        // A gauge that changes its reading once a second cannot resolve a 2 s window.
        let slow: String = text
            .lines()
            .map(|l| match l.split(' ').collect::<Vec<_>>().as_slice() {
                [up, _, v, s] => {
                    let t: f64 = up.parse().unwrap();
                    format!("{up} -{} {v} {s}\n", 100_000 + 1000 * (t as i64 % 7))
                }
                _ => format!("{l}\n"),
            })
            .collect();
        let short = EnergyWindow { end_uptime_s: 102.0, ..window };
        let why = measure(&slow, &short, &gauge).not_measured.unwrap();
        assert!(why.contains("updates its reading every 1.0 s") && why.contains("--energy-window 5"), "{why}");
    }

    #[test]
    fn the_device_side_scripts_run_in_a_phone_shell_with_its_commands_only() {
        let gauge = Gauge { dir: "/sys/class/power_supply/bat tery".into() };
        let script = format!("{}true{EPILOGUE}", prologue(&gauge, "/data/local/tmp/g s.txt", 0.1, 1));
        for script in [PROBE_SCRIPT, script.as_str()] {
            assert!(outside_the_set(script).is_empty(), "{:?} in {script}", outside_the_set(script));
        }
        // The sampler reads a gauge of this machine's shell: a directory the test makes.
        let dir = tempfile::tempdir().unwrap();
        let battery = dir.path().join("bat tery");
        std::fs::create_dir(&battery).unwrap();
        for (file, value) in [("current_now", "-250000"), ("voltage_now", "4000000"), ("status", "Discharging")] {
            std::fs::write(battery.join(file), format!("{value}\n")).unwrap();
        }
        let gauge = Gauge { dir: battery.display().to_string() };
        let samples = dir.path().join("s.txt");
        let script = format!("{}true{EPILOGUE}", prologue(&gauge, &samples.display().to_string(), 0.5, 1));
        let out = LocalShell.run(&script, std::time::Duration::from_secs(30), "sample").unwrap();
        assert_eq!(out.exit_code, 0, "{}", out.stderr);
        let (parsed, idle_end) = parse_samples(&std::fs::read_to_string(&samples).unwrap());
        assert!(idle_end.is_some() && parsed.len() >= 2, "{parsed:?}");
        assert_eq!(
            (parsed[0].current, parsed[0].voltage, parsed[0].status.as_str()),
            (-250000.0, 4000000.0, "Discharging")
        );
    }
}
