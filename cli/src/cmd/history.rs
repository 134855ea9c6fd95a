//! `npugate history`: how a model did on a SoC (device, runtime) over the last nights, and what
//! changed since the night before — as terminal sparklines, `npugate.history/1` JSON, or an HTML
//! page with inline-SVG trend charts.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use npugate_result::contract::EXIT_PASS;
use npugate_result::report::{json_of, write_all, Finished, Format, Report};
use npugate_sweeps::history::store::GenerationFigures;
use npugate_sweeps::history::trend::{self, sparkline, HistoryReport};
use npugate_sweeps::history::{chart, health, HistoryFilter, HistoryStore};

use super::options::{HistoryArg, JsonArg};
use npugate_android::devices::DeviceChoice;
use npugate_result::hexagon::SocChoice;

/// Arguments of `npugate history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// `--history`: the store to query.
    #[command(flatten)]
    pub history: HistoryArg,
    /// Only this model.
    #[arg(long)]
    pub model: Option<String>,
    /// Only this SoC (device class), e.g. SM8650 (its exact name, in any case; `all`: every SoC).
    #[arg(long, value_name = "SOC|all")]
    pub soc: Option<SocChoice>,
    /// Only this device (its exact serial; `all`: every device).
    #[arg(long, value_name = "SERIAL|all")]
    pub device: Option<DeviceChoice>,
    /// Only this runtime.
    #[arg(long)]
    pub runtime: Option<String>,
    /// The last N nights that have a matching sweep.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub nights: u32,
    /// Only nights up to this one (YYYY-MM-DD).
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = npugate_sweeps::sweep::parse_night)]
    pub until: Option<String>,
    /// Only series whose last night changed (a device's latency beyond the tolerance, gate outcome,
    /// compile, placement, outputs, fallback count, an axis the cell ran with); an emulated cell's
    /// latency is host time and never counts.
    #[arg(long)]
    pub changed: bool,
    /// A latency change counts when the median ratio's 95% interval lies entirely beyond ±this many
    /// percent (default: the gate's baseline_median_pct, 10; 0 = the interval alone decides).
    #[arg(long, value_name = "PCT")]
    pub tolerance_pct: Option<f64>,
    /// `--json`: `npugate.history/1` instead of the table.
    #[command(flatten)]
    pub json: JsonArg,
    /// Also write an HTML page with a trend chart per SoC and model.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// Runs `npugate history`.
pub fn run(args: HistoryArgs, console: &super::console::Console) -> Result<u8> {
    let path = args.history.path();
    if !path.is_file() {
        bail!("no history at {}; run `npugate sweep` first, or pass --history PATH", path.display());
    }
    let store = HistoryStore::open(&path)?;
    // `--soc all` and `--device all` filter nothing.
    let soc = args.soc.as_ref().and_then(|choice| match choice.0.as_slice() {
        [one] => Some(one.model.to_string()),
        _ => None,
    });
    let device = match &args.device {
        Some(DeviceChoice::Serial(serial)) => Some(serial.clone()),
        _ => None,
    };
    let filter = HistoryFilter {
        model: args.model.clone(),
        soc: soc.clone(),
        device: device.clone(),
        runtime: args.runtime.clone(),
        nights: args.nights as usize,
        until: args.until.clone(),
    };
    let tolerance = args.tolerance_pct.unwrap_or_else(trend::default_tolerance_pct);
    let mut report = trend::build(&filter, store.cells(&filter)?, tolerance);
    if args.changed {
        report.series.retain(|s| s.change.as_ref().is_some_and(|c| c.is_notable()));
    }
    report.devices = health::load(&path)?.unwrap_or_default();
    report.devices.retain(|h| {
        device.as_ref().is_none_or(|d| h.serial.eq_ignore_ascii_case(d))
            && soc.as_ref().is_none_or(|soc| h.soc.eq_ignore_ascii_case(soc))
    });
    if let Some(html) = &args.html {
        npugate_engine::layout::check_file(html, "--html", &[&path])?;
        write_all(&Trend(&report), &[Format::Html], html)?;
        eprintln!("npugate history: trend chart in {}", html.display());
    }
    Ok(console.finished(args.json.json, Finished::new(&Trend(&report))))
}

/// `npugate history`'s finished result: [`terminal`] on a terminal, the trend chart page as `--html`;
/// it judges nothing (exit 0).
struct Trend<'a>(&'a HistoryReport);

impl Report for Trend<'_> {
    fn schema(&self) -> &str {
        &self.0.schema
    }
    fn exit_code(&self) -> u8 {
        EXIT_PASS
    }
    fn text(&self, _color: bool) -> String {
        terminal(self.0)
    }
    fn json(&self) -> String {
        json_of(self.0)
    }
    fn document(&self, format: Format) -> Option<String> {
        (format == Format::Html).then(|| chart::history_page(self.0))
    }
}

/// One block per model and SoC, one line per device and runtime with its sparkline.
fn terminal(report: &HistoryReport) -> String {
    if report.series.is_empty() {
        // Nights without series: --changed left out every series, none changed.
        return match report.nights.last() {
            Some(last) => format!("nothing changed since the night before (latest night {last})\n"),
            None => "no matching sweeps in the history\n".into(),
        };
    }
    let mut out = series_lines(report);
    if !report.devices.is_empty() {
        out.push_str(&format!("\nDevice health (noise floor over the last {} nights)\n", health::HEALTH_NIGHTS));
        out.push_str(&health::lines(&report.devices));
    }
    out
}

/// An LLM cell's generation in words: `TTFT 0.210 ms, prefill 76066 tok/s, decode 10491 tok/s`.
fn generation_figures(generation: &GenerationFigures) -> String {
    let ttft = generation.ttft_ns.map(npugate_gate::units::fmt_ms).unwrap_or_else(|| "–".into());
    format!("TTFT {ttft}, prefill {:.0} tok/s, decode {:.0} tok/s", generation.prefill_tok_s, generation.decode_tok_s)
}

/// One block per model and SoC, one line per device and runtime with its sparkline; an emulated
/// series with its gate outcome night by night and its findings instead (host time labelled).
fn series_lines(report: &HistoryReport) -> String {
    let mut out = format!("{} night(s): {}\n", report.nights.len(), report.nights.join(" "));
    let device_width = report.series.iter().map(|s| s.device.len()).max().unwrap_or(0);
    let runtime_width = report.series.iter().map(|s| s.runtime.len()).max().unwrap_or(0);
    for ((soc, model), members) in chart::by_class_and_model(&report.series) {
        out.push_str(&format!("\n{model} on SoC {soc}\n"));
        for s in members {
            let last = s.points.last();
            let latest = last
                .map(|p| {
                    let median = p.median_ns.map(npugate_gate::units::fmt_ms).unwrap_or_else(|| "–".into());
                    let resources = match p.resources.describe() {
                        d if d.is_empty() => String::new(),
                        d => format!(", {d}"),
                    };
                    match &p.generation {
                        Some(generation) => {
                            format!("{median}/token ({}), {}{resources}", p.outcome, generation_figures(generation))
                        }
                        None => format!("{median} ({}){resources}", p.outcome),
                    }
                })
                .unwrap_or_default();
            let change = s.change.as_ref().map(|c| c.sentence()).unwrap_or_else(|| "first night".into());
            let (by_night, latest) = match (s.emulated, last) {
                (true, Some(last)) => (chart::outcomes_by_night(s, &report.nights), last.emulated_sentence()),
                _ => (sparkline(&s.medians_by_night(&report.nights)), latest),
            };
            out.push_str(&format!(
                "  {:device_width$}  {:runtime_width$}  {by_night}  {latest}  {change}\n",
                s.device, s.runtime
            ));
        }
    }
    out
}
