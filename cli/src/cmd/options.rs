//! Options shared by several subcommands, each parsed once into the library's typed values.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use ed25519_dalek::SigningKey;
use npugate_result::report::Format;
use npugate_settings::EpKind;

use super::console::Console;
use npugate_android::adb::Adb;
use npugate_android::device_state::parse_celsius;
use npugate_android::devices::DeviceChoice;
use npugate_engine::pipeline::{GateSpec, Sinks};
use npugate_engine::rack::RackPolicy;
use npugate_engine::targets::adb::{AdbSettings, DEFAULT_WORK_DIR};
use npugate_plan::{AiHubPlace, Command, DevicePlace, NoisyDevices, Place, QnnChoice, QnnFlag, Request};
use npugate_result::hexagon::{Soc, SocChoice};

/// `--model`: the model every harness command runs.
#[derive(Debug, Clone, Args)]
pub struct ModelArg {
    /// The ONNX model (its external data and context binaries beside it are part of it).
    #[arg(long, value_name = "PATH")]
    pub model: PathBuf,
}

/// `--reference-model`: the model whose fp32 CPU run is the reference.
#[derive(Debug, Clone, Args)]
pub struct ReferenceArg {
    /// The model whose fp32 CPU run is the reference: the float model of a QDQ model (outputs
    /// checked against it), or the source model of a compiled (EPContext) model, which the CPU EP
    /// cannot run (its reference pass, FLOPs and output check) [default: the model itself; for a
    /// compiled model, the source recorded by npugate compile when it is at hand and unchanged].
    #[arg(long, value_name = "PATH")]
    pub reference_model: Option<PathBuf>,
}

/// `--out`: where a command writes.
#[derive(Debug, Clone, Args)]
pub struct OutArg {
    /// Where the results go [default: npugate-results/<model>/<where>, e.g. …/local, …/compare,
    /// …/preflight]. A directory that exists is replaced only when it holds npugate's own results.
    // `compile` and `sweep` replace this help with their own default (`mut_arg`).
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
}

/// `--json`: the command's typed report on stdout instead of text.
#[derive(Debug, Clone, Args)]
pub struct JsonArg {
    /// Print the command's versioned JSON report (`npugate.<report>/N`) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `--harness`: the harness binary, when the command should not find it.
#[derive(Debug, Clone, Args)]
pub struct HarnessArg {
    /// The harness binary [default: the one built for the runtime's target: next to npugate for
    /// this machine, the cargo layout's <triple>/release build for others].
    #[arg(long, value_name = "PATH")]
    pub harness: Option<PathBuf>,
}

/// `--runtime` and `--harness`: what runs the model, when the command should not choose.
#[derive(Debug, Clone, Args)]
pub struct RuntimeArgs {
    /// Runtime (library set) name or directory [default: the newest fetched runtime for the target
    /// with the --ep (and --qnn) asked for; the choice is printed].
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,
    /// `--harness`.
    #[command(flatten)]
    pub harness: HarnessArg,
}

/// `--soc` and `--qnn`: the Snapdragons and QNN versions of Qualcomm's host HTP emulator.
#[derive(Debug, Clone, Args)]
pub struct EmulatorArgs {
    /// Snapdragon the host HTP emulator is configured as (repeatable), e.g. SM8350, SM8650 (its exact
    /// name, in any case); `all` = every known SoC (v68 to v81) [default: SM8650]. The emulator
    /// only: a device is the SoC it is.
    #[arg(long = "soc", value_name = "SOC|all")]
    pub socs: Vec<SocChoice>,
    /// QNN version of the runtime (repeatable), e.g. 2.51 or 2.49.40 — whole dotted numbers: 2.49
    /// is the newest 2.49.x fetched, never 2.4; `all` = every QNN version fetched [default: the
    /// newest]. Each SoC × QNN version is one target.
    #[arg(long = "qnn", value_name = "VERSION|all")]
    pub qnn: Vec<QnnFlag>,
}

impl EmulatorArgs {
    /// The SoCs named, each once, in order.
    pub fn socs(&self) -> Vec<Soc> {
        let mut socs: Vec<Soc> = Vec::new();
        for soc in self.socs.iter().flat_map(|choice| choice.0.iter()) {
            if !socs.contains(soc) {
                socs.push(*soc);
            }
        }
        socs
    }

    /// The QNN choice.
    pub fn qnn(&self) -> QnnChoice {
        QnnChoice::from_flags(&self.qnn)
    }
}

/// `--local` or the devices: where `run`, `compare` and `numerics` run.
#[derive(Debug, Clone, Args)]
pub struct PlaceArgs {
    /// Run on this machine (no device needed); with `--ep qnn`, on Qualcomm's host HTP emulator.
    #[arg(long)]
    pub local: bool,
    /// Devices over adb (`--device SERIAL|all`, `--adb`, `--adb-server`, `--work-dir`, `--retries`, …).
    #[command(flatten)]
    pub devices: DeviceRunArgs,
    /// `--aihub DEVICE`: Qualcomm AI Hub's hosted devices.
    #[command(flatten)]
    pub aihub: AiHubArgs,
}

/// `--aihub DEVICE` (repeatable): run on Qualcomm AI Hub's hosted devices, with the official
/// client's credentials (`qai-hub configure --api_token …`).
#[derive(Debug, Clone, Args)]
pub struct AiHubArgs {
    /// A Qualcomm AI Hub device (repeatable; in parallel): its name ("Samsung Galaxy S24 (Family)"),
    /// a part of one name (S24) or attributes (chipset:qualcomm-snapdragon-8gen3); `npugate devices
    /// --aihub` lists them. Credentials from `qai-hub configure --api_token …`.
    #[arg(long = "aihub", value_name = "DEVICE")]
    pub aihub_devices: Vec<String>,
    /// The longest one AI Hub device's run may take, seconds (its queue, the job, the local pass).
    #[arg(long = "aihub-timeout", value_name = "SECONDS", default_value_t = 7200)]
    pub aihub_timeout: u64,
}

impl AiHubArgs {
    /// The AI Hub place of these flags, when `--aihub` was given: the official client's
    /// credentials are read here (none: an error naming `qai-hub configure`).
    pub fn place(&self) -> Result<Option<Place>> {
        if self.aihub_devices.is_empty() {
            return Ok(None);
        }
        Ok(Some(Place::AiHub(AiHubPlace {
            session: std::sync::Arc::new(aihub_session()?),
            selectors: self.aihub_devices.clone(),
            run_timeout: Duration::from_secs(self.aihub_timeout),
        })))
    }
}

/// A connection to AI Hub with the official client's credentials and npugate's upload cache.
pub fn aihub_session() -> Result<npugate_aihub::Session> {
    let config = npugate_aihub::ClientConfig::load()?;
    let cache = npugate_host::paths::cache_dir().join("aihub").join("uploads.json");
    Ok(npugate_aihub::Session::new(config, npugate_aihub::RetryPolicy::default(), cache))
}

impl PlaceArgs {
    /// `--local`, or the devices (`--device`, `ANDROID_SERIAL`; `--skip-noisy` leaves noisy ones
    /// out), or — neither given, but `--soc`/`--qnn` with `--ep qnn` — the host HTP emulator.
    /// Nothing of these: an error naming the choices.
    pub fn place(&self, ep: EpKind, emulator: Option<&EmulatorArgs>, health: Option<&HealthArgs>) -> Result<Place> {
        if self.local {
            anyhow::ensure!(
                self.aihub.aihub_devices.is_empty(),
                "--local and --aihub choose different places: give one"
            );
            return Ok(Place::Local);
        }
        if let Some(place) = self.aihub.place()? {
            anyhow::ensure!(
                self.devices.devices.devices.is_empty(),
                "--device and --aihub choose different places: run them as two commands"
            );
            return Ok(place);
        }
        if self.devices.devices.wanted() {
            return Ok(Place::Devices(DevicePlace {
                adb: self.devices.devices.adb()?,
                selectors: self.devices.devices.devices.clone(),
                settings: self.devices.adb_settings(),
                run_timeout: self.devices.run_timeout(),
                skip_noisy: health.map(HealthArgs::noisy).transpose()?.flatten(),
            }));
        }
        match emulator.filter(|e| !e.socs.is_empty() || !e.qnn.is_empty()) {
            Some(_) if ep == EpKind::Qnn => Ok(Place::Local),
            Some(_) => {
                anyhow::bail!("--soc and --qnn run the model on Qualcomm's host HTP emulator: they need --ep qnn")
            }
            None if emulator.is_some() => {
                anyhow::bail!("choose where to run: --local (this machine), --device SERIAL|all (over adb) or --ep qnn --soc SOC (the host HTP emulator)")
            }
            None => anyhow::bail!("choose where to run: --local (this machine), --device SERIAL|all (over adb) or --aihub DEVICE (Qualcomm AI Hub)"),
        }
    }
}

/// The model, what runs it and where results go: `--model`, `--runtime`, `--harness`, `--out`
/// (every command that runs a harness).
#[derive(Debug, Clone, Args)]
pub struct SubjectArgs {
    /// `--model`.
    #[command(flatten)]
    pub model: ModelArg,
    /// `--runtime`, `--harness`.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// `--out`.
    #[command(flatten)]
    pub out: OutArg,
}

impl SubjectArgs {
    /// The plan request of `command` at `place`, for `ep`, with the emulator's SoCs and QNN
    /// versions when the command takes them.
    pub fn request(&self, command: Command, place: Place, ep: EpKind, emulator: Option<&EmulatorArgs>) -> Request<'_> {
        Request {
            runtime: self.runtime.runtime.as_deref(),
            harness: self.runtime.harness.harness.as_deref(),
            socs: emulator.map(EmulatorArgs::socs).unwrap_or_default(),
            qnn: emulator.map(EmulatorArgs::qnn).unwrap_or_default(),
            out: self.out.out.as_deref(),
            ..Request::new(command, &self.model.model, place, ep)
        }
    }
}

/// [`SubjectArgs`], where it runs ([`PlaceArgs`]) and `--json`: `run`, `compare`, `numerics`.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// `--model`, `--runtime`, `--harness`, `--out`.
    #[command(flatten)]
    pub subject: SubjectArgs,
    /// `--local`, or devices over adb (`--device SERIAL|all`, `--adb`, `--work-dir`, `--retries`, …).
    #[command(flatten)]
    pub place: PlaceArgs,
    /// `--json`: the command's typed report instead of text.
    #[command(flatten)]
    pub json: JsonArg,
}

impl TargetArgs {
    /// The plan request of `command` (see [`PlaceArgs::place`] for where it runs).
    pub fn request(
        &self,
        command: Command,
        ep: EpKind,
        emulator: Option<&EmulatorArgs>,
        health: Option<&HealthArgs>,
    ) -> Result<Request<'_>> {
        let place = self.place.place(ep, emulator, health)?;
        Ok(self.subject.request(command, place, ep, emulator))
    }

    /// The model.
    pub fn model(&self) -> &std::path::Path {
        &self.subject.model.model
    }
}

/// Gate rules: `--gate FILE` and `--rule NAME=VALUE`.
#[derive(Debug, Clone, Args)]
pub struct RulesArgs {
    /// Gate rules file (TOML); defaults: cv_pct <= 8, npu_flops_pct >= 98 (`compare`:
    /// max_slowdown_pct 5, placement_must_match).
    #[arg(long = "gate", value_name = "FILE")]
    pub rules_file: Option<PathBuf>,
    /// Override one rule, `name=value` (repeatable), e.g. `--rule median_ms=12`.
    #[arg(long = "rule", value_name = "NAME=VALUE")]
    pub rule_overrides: Vec<String>,
}

/// Where a verdict goes: `--format` (repeatable) and `--report`.
#[derive(Debug, Clone, Args)]
pub struct FormatArgs {
    /// Output format (repeatable): terminal, json, markdown, github, junit, html.
    #[arg(long = "format", value_name = "FORMAT", default_value = "terminal")]
    pub formats: Vec<Format>,
    /// Write the formats to this file (one format) or directory (several) instead of stdout.
    #[arg(long = "report", value_name = "PATH")]
    pub report: Option<PathBuf>,
}

impl FormatArgs {
    /// Where the verdict goes; `json` (from `--json`) replaces the formats with JSON; the terminal
    /// format on stdout is coloured when `color`.
    pub fn sinks(&self, json: bool, color: bool) -> Sinks {
        let formats = if json { vec![Format::Json] } else { self.formats.clone() };
        Sinks { formats, report: self.report.clone(), color }
    }
}

/// Gate options of every command that judges a run: rules, baseline, formats.
#[derive(Debug, Clone, Args)]
pub struct GateArgs {
    /// `--gate`, `--rule`.
    #[command(flatten)]
    pub rules: RulesArgs,
    /// Baseline to compare against (from `npugate baseline save`).
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Compare against a baseline even when the fingerprints differ.
    #[arg(long)]
    pub force: bool,
    /// `--format`, `--report`.
    #[command(flatten)]
    pub output: FormatArgs,
}

impl GateArgs {
    /// The rules and baseline.
    pub fn spec(&self) -> Result<GateSpec> {
        GateSpec::load(
            self.rules.rules_file.as_deref(),
            &self.rules.rule_overrides,
            self.baseline.as_deref(),
            self.force,
        )
    }
}

/// The device-selection and adb-connection options every device command takes.
#[derive(Debug, Clone, Args)]
pub struct DeviceArgs {
    /// Device serial (repeatable; its exact serial, in any case), or `all` for every online device.
    /// Default: `ANDROID_SERIAL`, else the only online device.
    #[arg(long = "device", value_name = "SERIAL|all")]
    pub devices: Vec<DeviceChoice>,
    /// The adb binary (default: `adb` from PATH).
    #[arg(long, value_name = "PATH")]
    pub adb: Option<PathBuf>,
    /// A remote adb server `host:port` (default: adb's own, which honours `ADB_SERVER_SOCKET`).
    #[arg(long, value_name = "HOST:PORT")]
    pub adb_server: Option<String>,
}

impl DeviceArgs {
    /// The adb client these options describe.
    pub fn adb(&self) -> Result<Adb> {
        Adb::new(self.adb.clone(), self.adb_server.as_deref())
    }

    /// True when `--device` (or `ANDROID_SERIAL`) asks for devices.
    pub fn wanted(&self) -> bool {
        !self.devices.is_empty() || std::env::var_os("ANDROID_SERIAL").is_some_and(|s| !s.is_empty())
    }
}

/// `--work-dir`: npugate's directory on a device.
#[derive(Debug, Clone, Args)]
pub struct WorkDirArg {
    /// Work dir on the device: blobs, runtimes, models, results and the device lock live below it.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_WORK_DIR)]
    pub work_dir: String,
}

/// `--confirm K`: a failure confirmed by reruns before it counts.
#[derive(Debug, Clone, Args)]
pub struct ConfirmArg {
    /// When only timing rules fail (`run`: latency; `compare`: the slowdown), run K more times and
    /// fail only when most attempts fail; every attempt is kept (`attempt-N/`) and listed.
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub confirm: u32,
}

/// How runs on devices over adb are done: work dir, retries, cooldown, timeouts.
#[derive(Debug, Clone, Args)]
pub struct DeviceRunArgs {
    /// Devices, adb binary and adb server.
    #[command(flatten)]
    pub devices: DeviceArgs,
    /// `--work-dir`.
    #[command(flatten)]
    pub work_dir: WorkDirArg,
    /// Retries of a device whose transport failed (device gone, timeout); gate failures never retry.
    #[arg(long, default_value_t = 0)]
    pub retries: u32,
    /// Wait until the device's hottest sensor is at or below this temperature (e.g. `40C`).
    #[arg(long, value_name = "TEMP", value_parser = parse_celsius)]
    pub cooldown_until: Option<f64>,
    /// Longest cooldown wait in seconds; the run starts anyway after it (and says so).
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub cooldown_timeout: u64,
    /// Limit for one harness run on a device, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1800)]
    pub run_timeout: u64,
    /// Longest wait, in seconds, for a device another npugate (on any host) is measuring on;
    /// 0 fails at once (exit 2, naming the holder). Default: wait as long as it takes.
    #[arg(long, value_name = "SECONDS")]
    pub lock_timeout: Option<u64>,
    /// Measure energy per inference from the battery gauge: an idle window, then inferences back
    /// to back, each this long (`energy.json`; a charging device is refused, saying why).
    #[arg(long, value_name = "SECONDS", value_parser = npugate_settings::command::parse_window)]
    pub energy_window: Option<f64>,
}

impl DeviceRunArgs {
    /// Work dir, cooldown, lock timeout and energy window of every device run.
    pub fn adb_settings(&self) -> AdbSettings {
        AdbSettings {
            work_dir: self.work_dir.work_dir.clone(),
            cooldown: self.cooldown_until.map(|c| (c, Duration::from_secs(self.cooldown_timeout))),
            lock_timeout: self.lock_timeout.map(Duration::from_secs),
            energy_window: self.energy_window,
        }
    }

    /// The limit of one harness run.
    pub fn run_timeout(&self) -> Duration {
        Duration::from_secs(self.run_timeout)
    }

    /// `--retries`, with the console's interrupt flag and reporter.
    pub fn policy(&self, console: &Console) -> RackPolicy {
        console.policy(self.retries)
    }
}

/// `--history`: the SQLite history store of sweeps, noise floors and trends.
#[derive(Debug, Clone, Args)]
pub struct HistoryArg {
    /// The history store (SQLite) [default: <cache>/history.sqlite].
    #[arg(long, value_name = "PATH")]
    pub history: Option<PathBuf>,
}

impl HistoryArg {
    /// `--history`, or the default store.
    pub fn path(&self) -> PathBuf {
        self.history.clone().unwrap_or_else(npugate_sweeps::history::default_path)
    }
}

/// Leaving noisy devices out of a rack (`run`, `compare`): their noise floor, learned from the
/// history, drifted well above their peers' (see `npugate devices`).
#[derive(Debug, Clone, Args)]
pub struct HealthArgs {
    /// Skip the devices the history flags as noisy (each named on stderr).
    #[arg(long)]
    pub skip_noisy: bool,
    /// `--history`: the store the noise floors are learned from.
    #[command(flatten)]
    pub history: HistoryArg,
}

impl HealthArgs {
    /// With `--skip-noisy`: the devices the history flags as noisy, each with why (none when there
    /// is no history yet, which is said).
    pub fn noisy(&self) -> Result<Option<NoisyDevices>> {
        if !self.skip_noisy {
            return Ok(None);
        }
        let path = self.history.path();
        let Some(health) = npugate_sweeps::history::health::load(&path)? else {
            eprintln!("npugate: --skip-noisy: no history at {} yet, so no device is skipped", path.display());
            return Ok(Some(NoisyDevices::default()));
        };
        Ok(Some(NoisyDevices(health.into_iter().filter(|h| h.noisy).map(|h| (h.serial, h.summary)).collect())))
    }
}

/// Options of commands that write a signed evidence bundle (`run`, `sweep`).
#[derive(Debug, Clone, Args)]
pub struct EvidenceArgs {
    /// Write a signed evidence bundle to this directory (see `npugate verify`).
    #[arg(long, value_name = "OUT")]
    pub evidence: Option<PathBuf>,
    /// ed25519 private key to sign the bundle with (PKCS#8 PEM, from `npugate keygen`); default: the
    /// PEM text in $NPUGATE_SIGNING_KEY.
    #[arg(long, value_name = "FILE", requires = "evidence")]
    pub signing_key: Option<PathBuf>,
}

impl EvidenceArgs {
    /// The bundle directory and the key to sign it with, when `--evidence` is given (the key is
    /// loaded up front, so a missing key fails before anything runs).
    pub fn bundle(&self) -> Result<Option<(PathBuf, SigningKey)>> {
        match &self.evidence {
            None => Ok(None),
            Some(out) => Ok(Some((out.clone(), npugate_engine::evidence::signing_key(self.signing_key.as_deref())?))),
        }
    }
}

/// `--prompt-tokens`, `--context`: the lengths an LLM folder's graphs with dynamic dims are sized
/// for when an accelerator needs static shapes (`preflight`).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Generation (LLM model folders)")]
pub struct LlmLengthArgs {
    /// Prompt tokens the prompt phase is sized for (its ids and mask) [default: 128, at most half
    /// the context].
    #[arg(long, value_name = "P")]
    pub prompt_tokens: Option<npugate_settings::generation::Count>,
    /// Positions the token phase is sized for: the mask and past KV cache of the context's last
    /// token (with `past_present_share_buffer`, the KV buffer's length) [default: model.context_length].
    #[arg(long, value_name = "C")]
    pub context: Option<npugate_settings::generation::Count>,
}

impl LlmLengthArgs {
    /// The flags given (a single `.onnx` refuses them).
    pub fn given_flags(&self) -> Vec<String> {
        let given = [(self.prompt_tokens.is_some(), "--prompt-tokens"), (self.context.is_some(), "--context")];
        given.iter().filter(|(given, _)| *given).map(|(_, flag)| flag.to_string()).collect()
    }

    /// The lengths for `llm`: as given, else its whole context and the default prompt.
    pub fn resolve(&self, llm: &npugate_onnx::genai::LlmModel) -> npugate_onnx::llm_shapes::GenerationLengths {
        let context = self.context.map_or(llm.capacity(), |c| c.get());
        let default = npugate_settings::generation::DEFAULT_PROMPT_TOKENS;
        let prompt = self.prompt_tokens.map_or_else(|| llm.default_prompt(default, context), |p| p.get());
        npugate_onnx::llm_shapes::GenerationLengths { prompt, context }
    }
}
