//! One resolution step for every command that runs a harness (`run`, `compare`, `numerics`,
//! `preflight`, `compile`; a sweep resolves each cell's harness and runtime with the same rules):
//! the command's flags become a [`Request`], and [`Plan::resolve`] turns it into the targets to
//! run on, the runtime and harness of each, the SoCs of the host HTP emulator and the output
//! directory — with one set of rules:
//!
//! - **where**: `--local` is this machine, or Qualcomm's HTP emulator (under wine) when the EP is
//!   QNN and the runtime is a Windows one (the default); `--device` are devices over adb;
//!   `preflight` and `compile` always use the emulator (or qemu for `--backend saver`);
//! - **runtime**: `--runtime NAME` when given; else the newest fetched runtime built for the
//!   target that has the requested EP (and the `--qnn` version), on this machine and on devices
//!   alike — the choice is announced;
//! - **SoCs**: `--soc` names the SoCs of the emulator only (default [`npugate_engine::host_htp::DEFAULT_SOC`]);
//!   `--qnn` picks one emulator runtime per QNN version (each SoC × QNN version is a target);
//! - **out**: `--out`, else `npugate-results/<model>/<leaf>` (`out_dir`);
//!   `compile` writes beside the model (`<model>_ctx.onnx`, `<folder>_ctx/`, or one per QNN version
//!   in the model's folder);
//! - **the model**: looked at once ([`Subject`]: a single `.onnx`, a compiled one, an LLM folder),
//!   with the one rule of what each kind refuses, its fp32 reference, and — for the host HTP — the
//!   fp16 default ([`DEFAULT_HTP_FP16`](npugate_settings::qnn::DEFAULT_HTP_FP16)).
//!
//! Nothing here starts a process: what the machine has (fetched runtimes, built harnesses,
//! connected devices) comes through [`Resources`], so the rules are tested without any.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use npugate_settings::EpKind;

use npugate_aihub::Session;
use npugate_android::adb::Adb;
use npugate_android::devices::{DeviceChoice, DeviceInfo};
use npugate_engine::model::GivenModel;
use npugate_engine::targets::adb::{AdbSettings, AdbTarget};
use npugate_engine::targets::aihub::AiHubTarget;
use npugate_engine::targets::host::HostTarget;
use npugate_engine::targets::host_triple;
use npugate_engine::targets::qemu::{self, QemuTarget};
use npugate_engine::targets::wine::{self, WineTarget};
use npugate_engine::targets::Planned;
use npugate_engine::timeouts::Timeouts;
use npugate_host::hash_cache::HashCache;
use npugate_host::runtime::manifest::qnn_sdk_version;
use npugate_host::runtime::RuntimeManifest;
use npugate_result::hexagon::Soc;
use npugate_settings::HarnessSettings;

pub mod run;
pub mod subject;

pub use subject::{ModelFlags, ModelKind, Subject};

/// The host runtime of the fp32 reference runs (`--check-outputs`, `numerics`) when fetched.
pub const REFERENCE_RUNTIME: &str = "ort-1.31.1-linux-x86_64";

/// Where a command asks to run.
#[derive(Debug, Clone)]
pub enum Place {
    /// This machine (`--local`): natively, or on the host HTP emulator with `--ep qnn`.
    Local,
    /// Qualcomm's host HTP emulator, whatever the EP flag says (`preflight`, `compile`).
    Emulator,
    /// The aarch64 harness under qemu (`preflight --backend saver`).
    Qemu,
    /// Devices over adb (`--device`).
    Devices(DevicePlace),
    /// Qualcomm AI Hub's hosted devices (`--aihub`).
    AiHub(AiHubPlace),
}

/// The AI Hub devices of a command and the session that reaches them.
#[derive(Clone)]
pub struct AiHubPlace {
    /// The connection, with the official client's credentials.
    pub session: Arc<Session>,
    /// `--aihub` values: device names, parts of one, attribute selectors.
    pub selectors: Vec<String>,
    /// The longest one device's run may take (the local pass and the AI Hub job).
    pub run_timeout: Duration,
}

impl std::fmt::Debug for AiHubPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AiHubPlace")
            .field("api_url", &self.session.client().config().api_url)
            .field("selectors", &self.selectors)
            .finish()
    }
}

/// The devices of a command and how to reach them.
#[derive(Debug, Clone)]
pub struct DevicePlace {
    /// The adb client.
    pub adb: Adb,
    /// `--device` values (serials or `all`; empty: `ANDROID_SERIAL` or the only device).
    pub selectors: Vec<DeviceChoice>,
    /// Work dir, cooldown and lock timeout of every device run.
    pub settings: AdbSettings,
    /// The limit of one harness run on a device.
    pub run_timeout: Duration,
    /// `--skip-noisy`: the devices the history flags as noisy, left out.
    pub skip_noisy: Option<NoisyDevices>,
}

/// Devices whose noise floor drifted well above their peers' (see `npugate devices`): serial and
/// why, from the history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NoisyDevices(pub Vec<(String, String)>);

impl NoisyDevices {
    /// `serials` without the noisy ones (each named on stderr); an error when none is left.
    pub fn keep_healthy(&self, serials: Vec<String>) -> Result<Vec<String>> {
        let why = |serial: &str| self.0.iter().find(|(noisy, _)| noisy == serial).map(|(_, why)| why.clone());
        let (kept, skipped): (Vec<String>, Vec<String>) = serials.into_iter().partition(|serial| why(serial).is_none());
        for serial in &skipped {
            eprintln!("npugate: skipping {serial}: {}", why(serial).unwrap_or_default());
        }
        anyhow::ensure!(
            !kept.is_empty(),
            "every chosen device is flagged noisy ({}); see `npugate devices`, or run without --skip-noisy",
            skipped.join(", ")
        );
        Ok(kept)
    }
}

/// `--qnn`: which QNN version(s) the runtime must carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum QnnChoice {
    /// No `--qnn`: any (the newest wins).
    #[default]
    Any,
    /// These versions (`2.51`, `2.49.40`), in order; each must match a fetched runtime.
    Versions(Vec<QnnVersion>),
    /// `all`: every QNN version fetched for the target.
    All,
}

/// One `--qnn` value: a QNN version, or `all`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QnnFlag {
    /// Every QNN version fetched.
    All,
    /// This version.
    Version(QnnVersion),
}

/// A QNN version as the user writes it: whole dotted numbers (`2.51`, `2.49.40`, a leading `v`
/// allowed). It names every build whose leading components are these — `2.49` is 2.49.40, never
/// 2.4 nor 2.490 — and nothing else: `2.x` or `2.49.40abc` is refused when parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QnnVersion(Vec<u64>);

impl QnnVersion {
    /// True when `build` (`[2, 49, 40]`) starts with every component of this version.
    fn names(&self, build: &[u64]) -> bool {
        build.starts_with(&self.0)
    }
}

impl std::str::FromStr for QnnVersion {
    type Err = String;

    fn from_str(text: &str) -> Result<QnnVersion, String> {
        let bare = text.trim().strip_prefix(['v', 'V']).unwrap_or(text.trim());
        let parts: Option<Vec<u64>> = bare.split('.').map(|part| part.parse().ok()).collect();
        match parts {
            Some(parts) if !bare.is_empty() && bare.chars().all(|c| c.is_ascii_digit() || c == '.') => {
                Ok(QnnVersion(parts))
            }
            _ => Err(format!(
                "{text:?} is not a QNN version; write whole dotted numbers such as 2.51 or 2.49.40 (or all)"
            )),
        }
    }
}

impl std::fmt::Display for QnnVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u64::to_string).collect();
        f.write_str(&parts.join("."))
    }
}

impl std::str::FromStr for QnnFlag {
    type Err = String;

    fn from_str(text: &str) -> Result<QnnFlag, String> {
        match text.trim() {
            all if all.eq_ignore_ascii_case("all") => Ok(QnnFlag::All),
            version => version.parse().map(QnnFlag::Version),
        }
    }
}

impl QnnChoice {
    /// The choice the `--qnn` values make (`all` anywhere means all; each version once).
    pub fn from_flags(values: &[QnnFlag]) -> QnnChoice {
        let mut versions: Vec<QnnVersion> = Vec::new();
        for value in values {
            match value {
                QnnFlag::All => return QnnChoice::All,
                QnnFlag::Version(version) if !versions.contains(version) => versions.push(version.clone()),
                QnnFlag::Version(_) => {}
            }
        }
        if versions.is_empty() {
            QnnChoice::Any
        } else {
            QnnChoice::Versions(versions)
        }
    }
}

/// The command a plan is for: it decides the default output directory and what the plan refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `npugate run`.
    Run,
    /// `npugate compare`: speed, so never on the emulator.
    Compare,
    /// `npugate numerics`.
    Numerics,
    /// `npugate preflight` (the host HTP, the Saver backend under qemu, or a host EP).
    Preflight,
    /// `npugate compile`.
    Compile,
    /// `npugate estimate`: the model's node shapes from one CPU run on this machine.
    Estimate,
    /// `npugate choose`: a model's variants per SoC on the host HTP emulator (the plan's model is
    /// the float variant).
    Choose,
}

/// What a command asks for, in the library's types.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The command.
    pub command: Command,
    /// The model (the file the user named).
    pub model: &'a Path,
    /// `model` as the command looked at it before the plan (choose's float variant, read and
    /// hashed with the other variants): the plan takes it and its hash cache instead of building
    /// a cache and hashing it again.
    pub given: Option<&'a GivenModel>,
    /// Where.
    pub place: Place,
    /// The EP the model should run on.
    pub ep: EpKind,
    /// `--runtime`: a runtime name or directory.
    pub runtime: Option<&'a str>,
    /// `--harness`: the harness binary.
    pub harness: Option<&'a Path>,
    /// `--soc`: SoCs of the host HTP emulator (deduplicated, in order).
    pub socs: Vec<Soc>,
    /// `--qnn`.
    pub qnn: QnnChoice,
    /// `--out`.
    pub out: Option<&'a Path>,
    /// `--reference-model`.
    pub reference_model: Option<&'a Path>,
    /// `compare --baseline-model`.
    pub baseline: Option<&'a Path>,
    /// The flags given that shape the model's run (what a kind of model refuses).
    pub flags: ModelFlags,
    /// `--enable-htp-fp16-precision`, when given.
    pub fp16: Option<bool>,
    /// The run's settings, when the command runs the model as `run` does (`run`, `compare`): the
    /// model is checked against them before any device is touched.
    pub settings: Option<&'a HarnessSettings>,
}

impl<'a> Request<'a> {
    /// The request of `command` for `model` at `place` on `ep`, everything else not given.
    pub fn new(command: Command, model: &'a Path, place: Place, ep: EpKind) -> Request<'a> {
        Request {
            command,
            model,
            given: None,
            place,
            ep,
            runtime: None,
            harness: None,
            socs: Vec::new(),
            qnn: QnnChoice::Any,
            out: None,
            reference_model: None,
            baseline: None,
            flags: ModelFlags::default(),
            fp16: None,
            settings: None,
        }
    }
}

/// How `run` and `numerics` name a compiled model's source.
pub const NAME_IT_BY_FLAG: &str = "pass --reference-model <its source .onnx>";

/// How a compare's user keeps a compiled side's source (compare has no `--reference-model`).
pub const NAME_IT_BY_KEEPING: &str = "keep its source model where npugate compile recorded it (beside it, unchanged)";

/// Where a plan runs, as resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// This machine, natively.
    Host,
    /// The host HTP emulator under wine: outputs and placement, never speed.
    Emulator,
    /// The aarch64 harness under qemu.
    Qemu,
    /// Devices over adb.
    Devices,
    /// Qualcomm AI Hub's hosted devices.
    AiHub,
}

/// A resolved plan: the model, every target with its runtime and harness, and where results go.
#[derive(Debug)]
pub struct Plan {
    /// The model, looked at once.
    pub model: Subject,
    /// `compare`'s baseline model, looked at once.
    pub baseline: Option<Subject>,
    /// Float graphs run in fp16 on the HTP (`--enable-htp-fp16-precision`, else the default).
    pub fp16: bool,
    /// What kind of targets these are.
    pub kind: Kind,
    /// The targets, in order (SoC-major for the emulator).
    pub targets: Vec<Planned>,
    /// The output directory (`--out`, or the default layout).
    pub out: PathBuf,
    /// The limit of each phase: one harness run (this machine's, or the place's `--run-timeout`),
    /// the reference run, a tool's job.
    pub timeouts: Timeouts,
    /// Choices made for the user (a runtime picked), one sentence each: [`Plan::announce`] prints them.
    pub notes: Vec<String>,
    /// Warnings found while resolving (an untested compiled-context pair), one sentence each.
    pub warnings: Vec<String>,
}

/// What the machine has: fetched runtimes, built harnesses, devices. [`Installed`] is this
/// machine; tests give a fixed inventory.
pub trait Resources {
    /// Every fetched runtime.
    fn fetched_runtimes(&self) -> Vec<RuntimeManifest>;
    /// A runtime by name or directory (fetched or not: the error names the fetch command).
    fn runtime(&self, name_or_dir: &str) -> Result<RuntimeManifest>;
    /// The QNN build of a runtime's HTP backend (`v2.51.0.…`), if it has one.
    fn qnn_build(&self, runtime: &RuntimeManifest) -> Option<String>;
    /// The harness built for a target triple.
    fn harness(&self, triple: &str) -> Result<PathBuf>;
    /// True when wine can run the Windows harness here.
    fn wine_installed(&self) -> bool;
    /// The serials `selectors` choose (`all`, serials; none: `ANDROID_SERIAL` or the only device).
    fn select_devices(&self, adb: &Adb, selectors: &[DeviceChoice]) -> Result<Vec<String>>;
    /// What a device is (its target triple, SoC, arch).
    fn probe(&self, adb: &Adb, serial: &str) -> Result<DeviceInfo>;
    /// The hash cache of the command: its model is hashed with it once ([`Subject::given`]).
    fn hash_cache(&self) -> HashCache {
        HashCache::default_cache()
    }
}

/// This machine's resources: the runtime cache, the harnesses next to `npugate`, adb.
pub struct Installed;

impl Resources for Installed {
    fn fetched_runtimes(&self) -> Vec<RuntimeManifest> {
        npugate_host::runtime::choose::fetched()
    }

    fn runtime(&self, name_or_dir: &str) -> Result<RuntimeManifest> {
        RuntimeManifest::load(name_or_dir)
    }

    fn qnn_build(&self, runtime: &RuntimeManifest) -> Option<String> {
        runtime.qnn_build()
    }

    fn harness(&self, triple: &str) -> Result<PathBuf> {
        npugate_engine::harnesses::for_target(triple)
    }

    fn wine_installed(&self) -> bool {
        wine::installed()
    }

    fn select_devices(&self, adb: &Adb, selectors: &[DeviceChoice]) -> Result<Vec<String>> {
        npugate_android::devices::select(adb, selectors)
    }

    fn probe(&self, adb: &Adb, serial: &str) -> Result<DeviceInfo> {
        npugate_android::devices::probe(adb, serial).with_context(|| format!("cannot probe device {serial}"))
    }
}

impl Plan {
    /// Resolves `request` against what `resources` has (see the module doc for the rules): the
    /// model first (nothing is touched for a model the command refuses), then where it runs.
    pub fn resolve(request: &Request<'_>, resources: &dyn Resources) -> Result<Plan> {
        let (model, baseline) = models(request, resources)?;
        if let Some(harness) = request.harness {
            // A harness of another npugate is refused before any device is asked anything.
            usable(harness)?;
        }
        let kind = match &request.place {
            Place::Local if request.ep == EpKind::Qnn && windows_runtime(request.runtime, resources) => Kind::Emulator,
            Place::Local => Kind::Host,
            Place::Emulator => Kind::Emulator,
            Place::Qemu => Kind::Qemu,
            Place::Devices(_) => Kind::Devices,
            Place::AiHub(_) => Kind::AiHub,
        };
        check_place(request, kind)?;
        if kind == Kind::Emulator {
            model.refuse_on_emulator()?;
        }
        let mut plan = Plan {
            out: PathBuf::new(),
            model,
            baseline,
            fp16: request.fp16.unwrap_or(npugate_settings::qnn::DEFAULT_HTP_FP16),
            kind,
            targets: Vec::new(),
            timeouts: Timeouts::LOCAL,
            notes: Vec::new(),
            warnings: Vec::new(),
        };
        plan.targets(request, resources)?;
        plan.out = out_dir(request, &plan);
        plan.check_compiled(resources)?;
        Ok(plan)
    }

    /// The targets of the plan's kind, each with its runtime and harness.
    fn targets(&mut self, request: &Request<'_>, resources: &dyn Resources) -> Result<()> {
        match self.kind {
            Kind::Host => {
                let runtime = self.runtime_for(&host_triple(), request.ep, request, resources)?.remove(0);
                let harness = harness(request, &runtime, resources)?;
                self.targets.push(Planned {
                    target: Box::new(HostTarget::new()),
                    runtime,
                    harness,
                    soc: None,
                    device: None,
                });
            }
            Kind::Emulator => self.emulator(request, resources)?,
            Kind::Qemu => {
                let runtime = self.runtime_for(qemu::TRIPLE, EpKind::Qnn, request, resources)?.remove(0);
                let harness = harness(request, &runtime, resources)?;
                self.targets.push(Planned { target: Box::new(QemuTarget), runtime, harness, soc: None, device: None });
            }
            Kind::Devices => {
                let Place::Devices(place) = &request.place else {
                    unreachable!("Kind::Devices comes from Place::Devices")
                };
                self.devices(place, request, resources)?;
            }
            Kind::AiHub => {
                let Place::AiHub(place) = &request.place else { unreachable!("Kind::AiHub comes from Place::AiHub") };
                self.aihub(place, request, resources)?;
            }
        }
        Ok(())
    }

    /// The AI Hub devices the selectors choose (each once), each run with this machine's harness
    /// and CPU runtime for the local pass.
    fn aihub(&mut self, place: &AiHubPlace, request: &Request<'_>, resources: &dyn Resources) -> Result<()> {
        if place.selectors.is_empty() {
            bail!("--aihub needs a device (`npugate devices --aihub` lists them)");
        }
        let runtime = self.runtime_for(&host_triple(), EpKind::Cpu, request, resources)?.remove(0);
        let harness = harness(request, &runtime, resources)?;
        let listed = npugate_aihub::devices::list(place.session.client())?;
        let service = place.session.client().config().service();
        self.notes.push(format!("AI Hub: {service}, {} devices listed", listed.len()));
        self.timeouts = self.timeouts.with_run(place.run_timeout);
        let mut chosen: Vec<String> = Vec::new();
        for selector in &place.selectors {
            let pick = choose_aihub_device(&listed, selector)?;
            self.notes.extend(pick.note);
            let device = pick.device;
            if chosen.contains(&device.name) {
                continue;
            }
            chosen.push(device.name.clone());
            self.targets.push(Planned {
                target: Box::new(AiHubTarget::new(Arc::clone(&place.session), device)),
                runtime: runtime.clone(),
                harness: harness.clone(),
                soc: None,
                device: None,
            });
        }
        Ok(())
    }

    /// Prints the choices made for the user and the warnings, one line each, on stderr.
    pub fn announce(&self) {
        for note in &self.notes {
            eprintln!("npugate: {note}");
        }
        for warning in &self.warnings {
            eprintln!("npugate: warning: {warning}");
        }
    }

    /// The one target, when the plan runs its work in `out` itself (this machine, or one emulated
    /// SoC with one QNN version); `None` for a rack (devices, several emulated targets), whose
    /// targets each work in `out/<name>/`.
    pub fn single(&self) -> Option<&Planned> {
        match (self.kind, self.targets.as_slice()) {
            (Kind::Host | Kind::Emulator, [one]) => Some(one),
            _ => None,
        }
    }

    /// The one runtime every target shares (`run`, `compare` and `numerics` on devices or this
    /// machine; the emulator with one QNN version).
    pub fn shared_runtime(&self) -> Option<&RuntimeManifest> {
        let first = &self.targets.first()?.runtime;
        self.targets.iter().all(|t| t.runtime.dir == first.dir).then_some(first)
    }

    /// The emulator's targets: every SoC × every runtime of the QNN choice.
    fn emulator(&mut self, request: &Request<'_>, resources: &dyn Resources) -> Result<()> {
        if !resources.wine_installed() {
            bail!("wine is not installed; {}", wine::SETUP_HINT);
        }
        let runtimes = self.runtime_for(wine::TRIPLE, EpKind::Qnn, request, resources)?;
        if request.runtime.is_some() {
            npugate_engine::host_htp::check_runtime(&runtimes[0])?;
        }
        let default_soc;
        let socs = match request.socs.as_slice() {
            [] => {
                default_soc =
                    [npugate_result::hexagon::find(npugate_engine::host_htp::DEFAULT_SOC)
                        .map_err(anyhow::Error::msg)?];
                &default_soc[..]
            }
            socs => socs,
        };
        let several = runtimes.len() > 1;
        for soc in socs {
            for runtime in &runtimes {
                let harness = harness(request, runtime, resources)?;
                let mut target = WineTarget::for_soc(*soc);
                if several {
                    let build = resources
                        .qnn_build(runtime)
                        .map(|b| qnn_sdk_version(&b).to_string())
                        .unwrap_or_else(|| runtime.name.clone());
                    target = target.named(&format!("{}-qnn-{build}", soc.model));
                }
                self.targets.push(Planned {
                    target: Box::new(target),
                    runtime: runtime.clone(),
                    harness,
                    soc: Some(*soc),
                    device: None,
                });
            }
        }
        Ok(())
    }

    /// The devices' targets: the selected devices (noisy ones left out with `--skip-noisy`), probed,
    /// one runtime for their common target.
    fn devices(&mut self, place: &DevicePlace, request: &Request<'_>, resources: &dyn Resources) -> Result<()> {
        let mut serials = resources.select_devices(&place.adb, &place.selectors)?;
        if let Some(noisy) = &place.skip_noisy {
            serials = noisy.keep_healthy(serials)?;
        }
        let mut probed = Vec::new();
        for serial in &serials {
            probed.push(resources.probe(&place.adb, serial)?);
        }
        // With --runtime, devices whose ABI the probe could not tell take the runtime's word for it.
        let triple = match (common_target(&probed), request.runtime) {
            (Ok(triple), _) => triple,
            (Err(_), Some(_)) => String::new(),
            (Err(error), None) => return Err(error),
        };
        let runtime = self.runtime_for(&triple, request.ep, request, resources)?.remove(0);
        let harness = harness(request, &runtime, resources)?;
        self.timeouts = self.timeouts.with_run(place.run_timeout);
        for info in probed {
            let target = AdbTarget::new(&place.adb, &info.serial, &place.settings);
            self.targets.push(Planned {
                target: Box::new(target),
                runtime: runtime.clone(),
                harness: harness.clone(),
                soc: None,
                device: Some(info),
            });
        }
        Ok(())
    }

    /// The runtime(s) for `triple` and `ep`: `--runtime` (one), else the fetched runtimes the QNN
    /// choice names, else the newest fetched runtime with the EP; each choice noted.
    fn runtime_for(
        &mut self,
        triple: &str,
        ep: EpKind,
        request: &Request<'_>,
        resources: &dyn Resources,
    ) -> Result<Vec<RuntimeManifest>> {
        if let Some(name) = request.runtime {
            let runtime = resources.runtime(name)?;
            if !triple.is_empty() && runtime.target != triple {
                bail!("runtime {} is built for {}, but {} runs {triple}; pass a runtime built for {triple} (npugate runtime list)", runtime.name, runtime.target, describe_triple(triple));
            }
            if request.qnn != QnnChoice::Any {
                bail!("--runtime and --qnn both choose the runtime; drop one");
            }
            return Ok(vec![runtime]);
        }
        let ep_name = ep.ort_name();
        let fetched = resources.fetched_runtimes();
        let newest = || npugate_host::runtime::choose::newest_for(triple, ep_name, &fetched);
        let chosen = match (&request.qnn, ep) {
            // The newest QNN build first, then the newest ONNX Runtime.
            (QnnChoice::Any, EpKind::Qnn) => match by_qnn(triple, &QnnChoice::All, &fetched, resources) {
                Ok(mut all) => all.split_off(all.len() - 1),
                Err(_) => vec![newest()?],
            },
            (QnnChoice::Any, _) => vec![newest()?],
            (choice, _) => by_qnn(triple, choice, &fetched, resources)?,
        };
        let with = ep_name.filter(|n| *n != "CPUExecutionProvider").map(|n| format!(" with {n}")).unwrap_or_default();
        for runtime in &chosen {
            let qnn =
                resources.qnn_build(runtime).map(|b| format!(", QNN {}", qnn_sdk_version(&b))).unwrap_or_default();
            self.notes.push(format!(
                "no --runtime given: using {} (ONNX Runtime {}{qnn}; the newest fetched runtime{with} for {triple})",
                runtime.name, runtime.ort_version
            ));
        }
        Ok(chosen)
    }

    /// Refuses targets a model compiled by `npugate compile` does not fit (another Hexagon arch,
    /// a QNN version known not to load it), naming both sides, before anything runs; keeps the
    /// warnings.
    fn check_compiled(&mut self, resources: &dyn Resources) -> Result<()> {
        let Some(compiled) = self.model.compiled().cloned() else {
            return Ok(());
        };
        let model = self.model.path.clone();
        let model = model.as_path();
        for planned in &self.targets {
            let (name, soc, arch) = match (&planned.soc, &planned.device) {
                (Some(soc), _) => (
                    format!("the host HTP emulator as {}", soc.model),
                    Some(soc.model.to_string()),
                    Some(soc.arch.to_string()),
                ),
                (None, Some(device)) => {
                    (format!("device {}", device.serial), device.soc.clone(), device.hexagon_arch.clone())
                }
                (None, None) => continue,
            };
            let build = resources.qnn_build(&planned.runtime);
            self.warnings.extend(compiled.check(
                model,
                &name,
                soc.as_deref(),
                arch.as_deref(),
                &planned.runtime.name,
                build.as_deref(),
            )?);
        }
        Ok(())
    }
}

/// The model (and compare's baseline) looked at once, refused when its kind does not take the
/// flags given, and checked against the run's settings.
fn models(request: &Request<'_>, resources: &dyn Resources) -> Result<(Subject, Option<Subject>)> {
    let name_it = if request.command == Command::Compare { NAME_IT_BY_KEEPING } else { NAME_IT_BY_FLAG };
    if let Some(settings) = request.settings {
        settings.check()?;
    }
    let given = request.given.filter(|given| given.path == request.model);
    let hashes = given.map_or_else(|| resources.hash_cache(), |given| given.hashes.clone());
    let look = |path: &Path, reference: Option<&Path>| -> Result<Subject> {
        let subject = Subject::classify_in(path, reference, name_it, hashes.clone())?;
        let subject = match given.filter(|given| given.path == path) {
            Some(given) => subject.looked_at(given.clone()),
            None => subject,
        };
        subject.refuse(request.command, &request.flags)?;
        if let Some(settings) = request.settings {
            npugate_engine::model::check_run(path, subject.llm(), settings)?;
        }
        subject.given()?;
        Ok(subject)
    };
    let baseline = request.baseline.map(|path| look(path, None)).transpose()?;
    Ok((look(request.model, request.reference_model)?, baseline))
}

/// Refuses choices that do not fit where the plan runs.
fn check_place(request: &Request<'_>, kind: Kind) -> Result<()> {
    if kind != Kind::Emulator && !request.socs.is_empty() {
        bail!("--soc chooses the Snapdragon of Qualcomm's host HTP emulator (--local --ep qnn, preflight, compile, numerics --ep qnn); a device is the SoC it is");
    }
    if request.flags.context_cache && matches!(request.command, Command::Preflight | Command::Compile | Command::Choose)
    {
        bail!("--context-cache times a run's cold and warm session creation; preflight and compile create their own sessions (compile writes the context model itself, to --out): drop it");
    }
    if let (Kind::Emulator, Some(flag)) = (kind, request.flags.soc_flags.first()) {
        bail!("{flag} does not apply to Qualcomm's host HTP emulator: it runs the HTP backend as the SoC that --soc names (its model and arch); drop {flag} and choose the SoC with --soc (SM8650, SM8550, … or all)");
    }
    if kind == Kind::Emulator && request.command == Command::Compare {
        bail!("compare judges speed, and the host HTP emulator's speed is not a device's; compare on --device, or check each model with `npugate run --local --ep qnn`");
    }
    if kind == Kind::AiHub {
        check_aihub(request)?;
    }
    if request.qnn != QnnChoice::Any && request.ep != EpKind::Qnn && kind != Kind::Emulator && kind != Kind::Qemu {
        bail!("--qnn chooses the QNN version of a QNN runtime: it needs --ep qnn");
    }
    Ok(())
}

/// The AI Hub device `selector` chooses among `listed` (a name, a part of one, attributes), refused
/// when it does not run ONNX models.
pub fn choose_aihub_device(listed: &[npugate_aihub::Device], selector: &str) -> Result<npugate_aihub::devices::Chosen> {
    let pick = npugate_aihub::devices::select(listed, selector).map_err(anyhow::Error::msg)?;
    let device = &pick.device;
    if !device.attributes.iter().any(|a| a == "framework:onnx") {
        bail!("AI Hub device {} does not run ONNX models (no framework:onnx among its attributes: {}); choose one that does (`npugate devices --aihub`)", device.name, device.attributes.join(", "));
    }
    Ok(pick)
}

/// Refuses what an AI Hub profile job cannot take: another command than `run` and `compare`, the
/// emulator's choices, EP options and session settings (AI Hub chooses them), an output check (a
/// profile job returns no outputs).
fn check_aihub(request: &Request<'_>) -> Result<()> {
    if !matches!(request.command, Command::Run | Command::Compare) {
        bail!("--aihub runs `npugate run` and `npugate compare` on AI Hub's devices; this command does not take AI Hub devices yet");
    }
    if request.qnn != QnnChoice::Any {
        bail!("--qnn chooses a QNN runtime here; AI Hub runs the model with its own tools (recorded as the result's tool versions): drop --qnn");
    }
    if let Some(settings) = request.settings {
        if !settings.session.ep_options.is_empty() || !settings.session.session_config.is_empty() {
            bail!("AI Hub chooses the EP options and session settings of its runs: drop --ep-option and --session-config with --aihub");
        }
        if settings.check_outputs {
            bail!(
                "--check-outputs compares saved outputs, and an AI Hub profile job returns none: drop it with --aihub"
            );
        }
        if request.flags.context_cache {
            bail!("--context-cache times a local cold and warm session; AI Hub reports its own cold and warm load: drop it with --aihub");
        }
    }
    Ok(())
}

/// Where a plan's results go: `--out` (for `compile` of one model into an existing folder, its
/// `<model>_ctx.onnx` there); else for `compile` beside the model (`<model>_ctx.onnx`,
/// an LLM folder's `<folder>_ctx/`, the model's folder for one model per QNN version); else
/// `npugate-results/<model>/<leaf>`.
fn out_dir(request: &Request<'_>, plan: &Plan) -> PathBuf {
    let model = request.model;
    let stem =
        |path: &Path| path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    let one_compiled_model =
        request.command == Command::Compile && plan.model.llm().is_none() && plan.targets.len() == 1;
    match request.out {
        // `compile --out DIR`: the model's `<model>_ctx.onnx` in that folder.
        Some(out) if one_compiled_model && out.is_dir() => return out.join(format!("{}_ctx.onnx", stem(model))),
        Some(out) => return out.to_path_buf(),
        None => {}
    }
    match (request.command, plan.model.llm(), plan.targets.len()) {
        (Command::Compile, Some(llm), _) => {
            let name =
                llm.folder.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
            llm.folder.with_file_name(format!("{name}_ctx"))
        }
        (Command::Compile, None, 1) => model.with_file_name(format!("{}_ctx.onnx", stem(model))),
        (Command::Compile, None, _) => model.parent().map(PathBuf::from).unwrap_or_default(),
        (command, _, _) => {
            PathBuf::from("npugate-results").join(stem(model)).join(default_leaf(command, plan.kind, request.ep))
        }
    }
}

/// The host harness and runtime of fp32 reference runs (`--check-outputs`, `numerics`): the
/// pinned [`REFERENCE_RUNTIME`] when fetched, else the newest fetched CPU runtime of this machine.
pub fn reference_tools(resources: &dyn Resources) -> Result<(PathBuf, RuntimeManifest)> {
    let runtime = match resources.runtime(REFERENCE_RUNTIME) {
        Ok(runtime) => runtime,
        Err(_) => npugate_host::runtime::choose::newest_for(&host_triple(), None, &resources.fetched_runtimes())
            .context("the fp32 reference runs on this machine's CPU")?,
    };
    Ok((resources.harness(&runtime.target)?, runtime))
}

/// The last component of a command's default output directory: one folder per command and
/// place, so that no two of them replace each other's results.
pub fn default_leaf(command: Command, kind: Kind, ep: EpKind) -> String {
    match (command, kind) {
        (Command::Run, Kind::Host) => "local".into(),
        (Command::Run, Kind::Emulator) => "htp".into(),
        (Command::Run, Kind::AiHub) => "aihub".into(),
        (Command::Run, _) => "devices".into(),
        (Command::Compare, _) => "compare".into(),
        (Command::Numerics, _) => "numerics".into(),
        (Command::Preflight, Kind::Emulator) => "preflight".into(),
        (Command::Preflight, Kind::Qemu) => "preflight-saver".into(),
        (Command::Preflight, _) => format!("preflight-{}", ep.cli_name()),
        (Command::Compile, _) => "compile".into(),
        (Command::Estimate, _) => "estimate".into(),
        (Command::Choose, _) => "choose".into(),
    }
}

/// True when the runtime the user named is a Windows one (the host HTP's), or none was named.
fn windows_runtime(runtime: Option<&str>, resources: &dyn Resources) -> bool {
    match runtime {
        None => true,
        Some(name) => resources.runtime(name).is_ok_and(|r| r.target == wine::TRIPLE),
    }
}

/// The harness for `runtime`'s target: `--harness`, else the one built for it; it must exist.
fn harness(request: &Request<'_>, runtime: &RuntimeManifest, resources: &dyn Resources) -> Result<PathBuf> {
    harness_for(request.harness, runtime, resources)
}

/// The harness that runs `runtime`: `explicit` (`--harness`), else the one built for the runtime's
/// target; it must exist and be of this npugate's version. The rule of every plan and of every sweep cell.
pub fn harness_for(explicit: Option<&Path>, runtime: &RuntimeManifest, resources: &dyn Resources) -> Result<PathBuf> {
    let path = match explicit {
        Some(path) => path.to_path_buf(),
        None => resources.harness(&runtime.target)?,
    };
    usable(&path)?;
    Ok(path)
}

/// Checks that the harness at `path` exists and is of this npugate's version.
fn usable(path: &Path) -> Result<()> {
    if !path.is_file() {
        bail!("harness {} does not exist; build it (scripts/setup) or pass --harness PATH", path.display());
    }
    npugate_engine::harnesses::check(path).map(|_| ())
}

/// The one target triple of the probed devices.
fn common_target(devices: &[DeviceInfo]) -> Result<String> {
    let mut targets = std::collections::BTreeMap::<&str, Vec<&str>>::new();
    for device in devices {
        let target = device.target.as_deref().with_context(|| {
            format!(
                "device {}: unknown ABI {:?}; pass --runtime NAME",
                device.serial,
                device.abi.clone().unwrap_or_default()
            )
        })?;
        targets.entry(target).or_default().push(&device.serial);
    }
    match targets.len() {
        0 => bail!("no device chosen"),
        1 => Ok(targets.into_keys().next().unwrap_or_default().to_string()),
        _ => {
            let groups: Vec<String> =
                targets.iter().map(|(target, serials)| format!("{target}: {}", serials.join(", "))).collect();
            bail!(
                "the chosen devices run different targets ({}); choose devices of one target, or pass --runtime NAME",
                groups.join("; ")
            )
        }
    }
}

/// The runtimes for `triple` whose QNN build the choice names, in the choice's order (`all`:
/// every QNN build, oldest first); an unknown version lists the fetched ones.
fn by_qnn(
    triple: &str,
    choice: &QnnChoice,
    fetched: &[RuntimeManifest],
    resources: &dyn Resources,
) -> Result<Vec<RuntimeManifest>> {
    let mut candidates: Vec<(Vec<u64>, String, &RuntimeManifest)> = fetched
        .iter()
        .filter(|r| {
            r.target == triple
                && r.ep.as_ref().is_some_and(|ep| ep.name == "QNNExecutionProvider")
                && npugate_host::runtime::catalog::pickable(&r.name)
        })
        .filter_map(|r| {
            resources
                .qnn_build(r)
                .map(|build| (version_key(qnn_sdk_version(&build)), qnn_sdk_version(&build).to_string(), r))
        })
        .collect();
    candidates.sort_by(|a, b| a.0.cmp(&b.0).then(a.2.ort_version.cmp(&b.2.ort_version)));
    let available = || {
        let mut versions: Vec<&str> = candidates.iter().map(|c| c.1.as_str()).collect();
        versions.dedup();
        let fetched = if versions.is_empty() {
            format!("none is fetched for {triple} (npugate runtime list shows what can be fetched)")
        } else {
            format!("fetched for {triple}: {}", versions.join(", "))
        };
        let fetchable: Vec<String> = npugate_host::runtime::catalog::catalog()
            .map(|catalog| catalog.runtime)
            .unwrap_or_default()
            .into_iter()
            .filter(|entry| entry.target == triple)
            .filter_map(|entry| {
                entry
                    .qnn_sdk
                    .filter(|sdk| !versions.contains(&sdk.as_str()))
                    .map(|sdk| format!("{sdk} (npugate runtime fetch {})", entry.name))
            })
            .collect();
        match fetchable.is_empty() {
            true => fetched,
            false => format!("{fetched}; in the catalog, not fetched: {}", fetchable.join(", ")),
        }
    };
    match choice {
        QnnChoice::Any => unreachable!("by_qnn is called with a QNN choice"),
        QnnChoice::All => {
            // One runtime per QNN build: the newest ONNX Runtime among those with the same build.
            let mut chosen: Vec<RuntimeManifest> = Vec::new();
            let mut last: Option<&str> = None;
            for (_, build, runtime) in candidates.iter().rev() {
                if last != Some(build.as_str()) {
                    chosen.push((*runtime).clone());
                    last = Some(build);
                }
            }
            chosen.reverse();
            anyhow::ensure!(!chosen.is_empty(), "--qnn all: no QNN runtime is {}", available());
            Ok(chosen)
        }
        QnnChoice::Versions(versions) => versions
            .iter()
            .map(|wanted| {
                candidates.iter().rev().find(|(have, _, _)| wanted.names(have)).map(|(_, _, runtime)| (*runtime).clone()).with_context(|| {
                    let builds: Vec<&str> = candidates.iter().map(|c| c.1.as_str()).collect();
                    let near = npugate_result::names::closest(&wanted.to_string(), builds)
                        .map(|near| format!("did you mean {near}? "))
                        .unwrap_or_default();
                    format!(
                        "--qnn {wanted}: no runtime with QNN {wanted} is {} ({near}a version names the builds that begin with its whole dotted numbers: 2.49 is 2.49.40, not 2.4)",
                        available()
                    )
                })
            })
            .collect(),
    }
}

/// `2.49.40` → [2, 49, 40] (a QNN build's version as the runtime reports it; a part that is no
/// number counts as 0), for ordering and matching.
fn version_key(text: &str) -> Vec<u64> {
    text.trim_start_matches('v').split('.').map(|part| part.parse().unwrap_or(0)).collect()
}

/// `x86_64-pc-windows-gnu` → what runs it, for messages.
fn describe_triple(triple: &str) -> String {
    match triple {
        t if t == wine::TRIPLE => "the host HTP emulator (wine)".into(),
        t if t == host_triple() => "this machine".into(),
        t => format!("a {t} target"),
    }
}

/// A fixed inventory for tests: runtimes (with their QNN builds), harness files, devices.
#[cfg(any(test, feature = "testing"))]
pub mod fake {
    use super::*;
    use npugate_host::runtime::EpLibrary;

    /// What the fake machine has.
    pub struct Fake {
        /// Fetched runtimes with the QNN build of each.
        pub runtimes: Vec<(RuntimeManifest, Option<String>)>,
        /// Devices as their probe would describe them.
        pub devices: Vec<DeviceInfo>,
        /// Holds a harness file per triple.
        pub dir: tempfile::TempDir,
        /// The hash cache every plan of this machine hashes its model with (in `dir`).
        pub hashes: HashCache,
    }

    /// A runtime named `name` for `target` with ORT `ort` and, when given, the EP `ep` (a plugin).
    pub fn runtime(name: &str, target: &str, ort: &str, ep: Option<&str>) -> RuntimeManifest {
        let mut runtime = RuntimeManifest::for_tests(Path::new("/nowhere").join(name).as_path());
        runtime.name = name.into();
        runtime.target = target.into();
        runtime.ort_version = ort.into();
        runtime.ep = ep.map(|ep| EpLibrary { name: ep.into(), attach: "plugin".into(), library: Some("ep.so".into()) });
        runtime
    }

    impl Fake {
        /// This build machine as the tests know it: the pinned host runtimes, OpenVINO (built in and
        /// the Intel-only plugin), the host HTP at QNN 2.49.40 and 2.51.0, Android runtimes, and two
        /// Android devices.
        pub fn machine() -> Fake {
            let host = "x86_64-unknown-linux-gnu";
            let android = "aarch64-linux-android";
            let qnn = Some("QNNExecutionProvider");
            let mut openvino =
                runtime("openvino-1.24.1-linux-x86_64", host, "1.24.1", Some("OpenVINOExecutionProvider"));
            if let Some(ep) = openvino.ep.as_mut() {
                ep.attach = "builtin".into();
            }
            let runtimes = vec![
                (runtime("ort-1.24.4-linux-x86_64", host, "1.24.4", None), None),
                (runtime("ort-1.31.1-linux-x86_64", host, "1.31.1", None), None),
                (openvino, None),
                (
                    runtime(
                        "openvino-plugin-1.8.1-ort-1.31.1-linux-x86_64",
                        host,
                        "1.31.1",
                        Some("OpenVINOExecutionProvider"),
                    ),
                    None,
                ),
                (
                    runtime("qnn-2.5.0-ort-1.31.1-windows-x86_64", wine::TRIPLE, "1.31.1", qnn),
                    Some("v2.49.40.250101000000".into()),
                ),
                (
                    runtime("qnn-2.7.0-ort-1.31.1-windows-x86_64", wine::TRIPLE, "1.31.1", qnn),
                    Some("v2.51.0.260929181845".into()),
                ),
                (runtime("ort-1.31.1-android", android, "1.31.1", None), None),
                (runtime("qnn-2.7.0-ort-1.31.1-android", android, "1.31.1", qnn), Some("v2.51.0.260929181845".into())),
            ];
            let phone = |serial: &str, soc: &str, arch: &str| DeviceInfo {
                serial: serial.into(),
                state: "device".into(),
                soc: Some(soc.into()),
                hexagon_arch: Some(arch.into()),
                target: Some(android.into()),
                ..DeviceInfo::default()
            };
            let dir = tempfile::tempdir().expect("temp dir");
            for triple in [host, wine::TRIPLE, android, qemu::TRIPLE] {
                npugate_engine::harnesses::write_stand_in(&dir.path().join(triple), triple).expect("harness file");
            }
            let hashes = HashCache::in_dir(dir.path().join("hashes"));
            let devices = vec![phone("phone-a", "SM8650", "v75"), phone("phone-b", "SM8550", "v73")];
            Fake { runtimes, devices, dir, hashes }
        }
    }

    impl Resources for Fake {
        fn fetched_runtimes(&self) -> Vec<RuntimeManifest> {
            self.runtimes.iter().map(|(r, _)| r.clone()).collect()
        }

        fn runtime(&self, name_or_dir: &str) -> Result<RuntimeManifest> {
            self.runtimes
                .iter()
                .find(|(r, _)| r.name == name_or_dir)
                .map(|(r, _)| r.clone())
                .with_context(|| format!("runtime {name_or_dir:?} is not fetched"))
        }

        fn qnn_build(&self, runtime: &RuntimeManifest) -> Option<String> {
            self.runtimes.iter().find(|(r, _)| r.name == runtime.name).and_then(|(_, build)| build.clone())
        }

        fn harness(&self, triple: &str) -> Result<PathBuf> {
            Ok(self.dir.path().join(triple))
        }

        fn wine_installed(&self) -> bool {
            true
        }

        fn select_devices(&self, _adb: &Adb, selectors: &[DeviceChoice]) -> Result<Vec<String>> {
            let all: Vec<String> = self.devices.iter().map(|d| d.serial.clone()).collect();
            match selectors {
                [] if all.len() == 1 => Ok(all),
                [] => bail!("{} devices online; choose with --device SERIAL or --device all", all.len()),
                some => {
                    let mut chosen = Vec::new();
                    for choice in some {
                        let admitted: Vec<String> = all.iter().filter(|a| choice.admits(a)).cloned().collect();
                        anyhow::ensure!(!admitted.is_empty(), "device {choice} not found");
                        chosen.extend(admitted);
                    }
                    Ok(chosen)
                }
            }
        }

        fn probe(&self, _adb: &Adb, serial: &str) -> Result<DeviceInfo> {
            self.devices
                .iter()
                .find(|d| d.serial == serial)
                .cloned()
                .with_context(|| format!("cannot probe device {serial}"))
        }

        fn hash_cache(&self) -> HashCache {
            self.hashes.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::Fake;
    use super::*;

    /// The tests' model: an empty graph, no metadata (not a compiled model).
    static MODEL: std::sync::LazyLock<tempfile::TempDir> = std::sync::LazyLock::new(|| {
        let dir = tempfile::tempdir().unwrap();
        let proto = npugate_onnx::proto::ModelProto { graph: Some(Default::default()), ..Default::default() };
        npugate_onnx::Model::from(proto).write(dir.path().join("m.onnx")).unwrap();
        dir
    });

    fn request(command: Command, place: Place, ep: EpKind) -> Request<'static> {
        let model = MODEL.path().join("m.onnx").into_boxed_path();
        Request::new(command, Box::leak(model), place, ep)
    }

    fn devices(selectors: &[&str]) -> Place {
        Place::Devices(DevicePlace {
            adb: Adb::new(None, None).unwrap(),
            selectors: selectors.iter().map(|s| s.parse().unwrap()).collect(),
            settings: AdbSettings {
                work_dir: "/data/local/tmp/npugate".into(),
                cooldown: None,
                lock_timeout: None,
                energy_window: None,
            },
            run_timeout: Duration::from_secs(60),
            skip_noisy: None,
        })
    }

    /// The choice `--qnn` values make.
    fn qnn(values: &[&str]) -> QnnChoice {
        QnnChoice::from_flags(&values.iter().map(|v| v.parse().unwrap()).collect::<Vec<QnnFlag>>())
    }

    fn names(plan: &Plan) -> Vec<(String, String)> {
        plan.targets.iter().map(|t| (t.target.name().to_string(), t.runtime.name.clone())).collect()
    }

    #[test]
    fn the_runtime_with_the_ep_is_picked_on_this_machine_and_announced() {
        let fake = Fake::machine();
        let cpu = Plan::resolve(&request(Command::Run, Place::Local, EpKind::Cpu), &fake).unwrap();
        assert_eq!((cpu.kind, names(&cpu)), (Kind::Host, vec![("local".into(), "ort-1.31.1-linux-x86_64".into())]));
        assert!(cpu.notes[0].contains("no --runtime given: using ort-1.31.1-linux-x86_64"), "{:?}", cpu.notes);
        assert_eq!(cpu.out, PathBuf::from("npugate-results/m/local"));
        let openvino = Plan::resolve(&request(Command::Compare, Place::Local, EpKind::OpenVino), &fake).unwrap();
        assert_eq!(
            names(&openvino)[0].1,
            "openvino-1.24.1-linux-x86_64",
            "the Intel-only plugin is never picked unnamed"
        );
        assert!(openvino.notes[0].contains("with OpenVINOExecutionProvider"), "{:?}", openvino.notes);
        assert_eq!(openvino.out, PathBuf::from("npugate-results/m/compare"));
    }

    #[test]
    fn devices_get_the_newest_runtime_of_their_target_with_the_ep() {
        let fake = Fake::machine();
        let plan = Plan::resolve(&request(Command::Numerics, devices(&["all"]), EpKind::Qnn), &fake).unwrap();
        assert_eq!(plan.kind, Kind::Devices);
        assert_eq!(
            names(&plan),
            vec![
                ("phone-a".into(), "qnn-2.7.0-ort-1.31.1-android".into()),
                ("phone-b".into(), "qnn-2.7.0-ort-1.31.1-android".into())
            ]
        );
        assert_eq!(plan.timeouts.run, Duration::from_secs(60));
        assert_eq!(plan.out, PathBuf::from("npugate-results/m/numerics"));
        let cpu = Plan::resolve(&request(Command::Run, devices(&["phone-b"]), EpKind::Cpu), &fake).unwrap();
        assert_eq!(names(&cpu), vec![("phone-b".into(), "ort-1.31.1-android".into())]);
        let error = Plan::resolve(&request(Command::Run, devices(&[]), EpKind::Cpu), &fake).unwrap_err().to_string();
        assert!(error.contains("choose with --device"), "{error}");
        let noisy = |serials: &[&str]| {
            let Place::Devices(mut place) = devices(&["all"]) else { unreachable!() };
            place.skip_noisy =
                Some(NoisyDevices(serials.iter().map(|s| (s.to_string(), "noise floor 30%".to_string())).collect()));
            Plan::resolve(&request(Command::Compare, Place::Devices(place), EpKind::Cpu), &fake)
        };
        assert_eq!(names(&noisy(&["phone-b"]).unwrap()), vec![("phone-a".into(), "ort-1.31.1-android".into())]);
        let none_left = noisy(&["phone-a", "phone-b"]).unwrap_err().to_string();
        assert!(none_left.contains("every chosen device is flagged noisy (phone-a, phone-b)"), "{none_left}");
    }

    #[test]
    fn the_emulator_is_every_soc_times_every_qnn_version() {
        let fake = Fake::machine();
        let sm8350 = npugate_result::hexagon::find("SM8350").unwrap();
        let sm8650 = npugate_result::hexagon::find("SM8650").unwrap();
        let one = Plan::resolve(&request(Command::Run, Place::Local, EpKind::Qnn), &fake).unwrap();
        assert_eq!(
            (one.kind, names(&one)),
            (Kind::Emulator, vec![("SM8650".into(), "qnn-2.7.0-ort-1.31.1-windows-x86_64".into())])
        );
        assert_eq!(one.out, PathBuf::from("npugate-results/m/htp"));
        let mut matrix = request(Command::Preflight, Place::Emulator, EpKind::Qnn);
        (matrix.socs, matrix.qnn) = (vec![sm8350, sm8650], qnn(&["all"]));
        let plan = Plan::resolve(&matrix, &fake).unwrap();
        let expected: Vec<(String, String)> = [
            ("SM8350-qnn-2.49.40", "qnn-2.5.0-ort-1.31.1-windows-x86_64"),
            ("SM8350-qnn-2.51.0", "qnn-2.7.0-ort-1.31.1-windows-x86_64"),
            ("SM8650-qnn-2.49.40", "qnn-2.5.0-ort-1.31.1-windows-x86_64"),
            ("SM8650-qnn-2.51.0", "qnn-2.7.0-ort-1.31.1-windows-x86_64"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .to_vec();
        assert_eq!(names(&plan), expected);
        assert_eq!(plan.out, PathBuf::from("npugate-results/m/preflight"));
        matrix.qnn = qnn(&["2.49"]);
        assert_eq!(names(&Plan::resolve(&matrix, &fake).unwrap())[0].1, "qnn-2.5.0-ort-1.31.1-windows-x86_64");
        matrix.qnn = qnn(&["2.40"]);
        let unknown = Plan::resolve(&matrix, &fake).unwrap_err().to_string();
        assert!(unknown.contains("--qnn 2.40") && unknown.contains("2.49.40, 2.51.0"), "{unknown}");
        assert!(unknown.contains("did you mean 2.49.40?") && unknown.contains("2.49 is 2.49.40, not 2.4"), "{unknown}");
        matrix.qnn = qnn(&["2.4"]);
        assert!(Plan::resolve(&matrix, &fake).is_err(), "2.4 is not a prefix of 2.49.40");
        matrix.qnn = qnn(&["V2.51.0"]);
        assert_eq!(names(&Plan::resolve(&matrix, &fake).unwrap())[0].1, "qnn-2.7.0-ort-1.31.1-windows-x86_64");
    }

    #[test]
    fn a_qnn_version_is_whole_dotted_numbers() {
        for near_miss in ["2.x", "2.49.40abc", "2..49", "", "v", "2.49-rc1", "latest"] {
            let error = near_miss.parse::<QnnFlag>().unwrap_err();
            assert!(error.contains("is not a QNN version") && error.contains("2.49.40"), "{near_miss}: {error}");
        }
        assert_eq!("ALL".parse::<QnnFlag>().unwrap(), QnnFlag::All);
        assert_eq!(
            qnn(&["2.51", "v2.51", "2.49.40"]),
            QnnChoice::Versions(vec!["2.51".parse().unwrap(), "2.49.40".parse().unwrap()])
        );
        assert_eq!(qnn(&["2.51", "all"]), QnnChoice::All);
    }

    #[test]
    fn aihub_refuses_what_a_profile_job_cannot_take_before_asking_the_service() {
        // A service nobody answers: every refusal comes before the device list is asked for.
        let config = npugate_aihub::ClientConfig {
            api_url: "http://127.0.0.1:9".into(),
            web_url: "http://127.0.0.1:9".into(),
            api_token: "t".into(),
            file: PathBuf::from("client.ini"),
        };
        let session = Session::new(config, npugate_aihub::RetryPolicy::default(), PathBuf::from("uploads.json"));
        let place = Place::AiHub(AiHubPlace {
            session: Arc::new(session),
            selectors: vec!["S24".into()],
            run_timeout: Duration::from_secs(60),
        });
        let fake = Fake::machine();
        let refused = |request: &Request<'_>| Plan::resolve(request, &fake).unwrap_err().to_string();
        let numerics = refused(&request(Command::Numerics, place.clone(), EpKind::Qnn));
        assert!(numerics.contains("this command does not take AI Hub devices yet"), "{numerics}");
        let mut settings = HarnessSettings::default();
        settings.session.ep = EpKind::Qnn;
        settings.session.ep_options = vec!["htp_performance_mode=burst".parse().unwrap()];
        let with_options = Request { settings: Some(&settings), ..request(Command::Run, place.clone(), EpKind::Qnn) };
        let options = refused(&with_options);
        assert!(options.contains("AI Hub chooses the EP options"), "{options}");
        let checked = HarnessSettings { check_outputs: true, ..HarnessSettings::default() };
        let with_check = Request { settings: Some(&checked), ..request(Command::Run, place, EpKind::Qnn) };
        let check = refused(&with_check);
        assert!(check.contains("an AI Hub profile job returns none"), "{check}");
    }

    #[test]
    fn choices_that_do_not_fit_the_place_are_refused_with_the_fix() {
        let fake = Fake::machine();
        let mut on_device = request(Command::Run, devices(&["phone-a"]), EpKind::Qnn);
        on_device.socs = vec![npugate_result::hexagon::find("SM8350").unwrap()];
        assert!(Plan::resolve(&on_device, &fake).unwrap_err().to_string().contains("a device is the SoC it is"));
        let emulated_compare =
            Plan::resolve(&request(Command::Compare, Place::Local, EpKind::Qnn), &fake).unwrap_err().to_string();
        assert!(emulated_compare.contains("compare on --device"), "{emulated_compare}");
        // The emulator's --soc sets the SoC's model, arch and backend: the flags for them are refused.
        for (flag, qnn_flags) in [
            ("--soc-model", npugate_settings::QnnArgs { soc_model: Some(57), ..Default::default() }),
            ("--htp-arch", npugate_settings::QnnArgs { htp_arch: Some("73".into()), ..Default::default() }),
            (
                "--qnn-backend",
                npugate_settings::QnnArgs {
                    qnn_backend: Some(npugate_settings::qnn::QnnBackend::Type("cpu")),
                    ..Default::default()
                },
            ),
        ] {
            let session = npugate_settings::SessionSettings { qnn: qnn_flags, ..Default::default() };
            let preflight = Request {
                flags: ModelFlags::of(&session, None),
                ..request(Command::Preflight, Place::Emulator, EpKind::Qnn)
            };
            let error = Plan::resolve(&preflight, &fake).unwrap_err().to_string();
            assert!(error.starts_with(&format!("{flag} does not apply to Qualcomm's host HTP emulator")), "{error}");
        }
        // A context cache is a timed run's; preflight and compile make their own sessions.
        for command in [Command::Preflight, Command::Compile] {
            let session =
                npugate_settings::SessionSettings { context_cache: Some("cache".into()), ..Default::default() };
            let cached =
                Request { flags: ModelFlags::of(&session, None), ..request(command, Place::Emulator, EpKind::Qnn) };
            let error = Plan::resolve(&cached, &fake).unwrap_err().to_string();
            assert!(error.starts_with("--context-cache times a run's"), "{command:?}: {error}");
        }
        let mut cpu_qnn = request(Command::Run, Place::Local, EpKind::Cpu);
        cpu_qnn.qnn = qnn(&["2.51"]);
        assert!(Plan::resolve(&cpu_qnn, &fake).unwrap_err().to_string().contains("it needs --ep qnn"));
        let mut wrong = request(Command::Run, devices(&["phone-a"]), EpKind::Cpu);
        wrong.runtime = Some("ort-1.31.1-linux-x86_64");
        let error = Plan::resolve(&wrong, &fake).unwrap_err().to_string();
        assert!(
            error.contains("built for x86_64-unknown-linux-gnu") && error.contains("aarch64-linux-android"),
            "{error}"
        );
        let saver =
            Plan::resolve(&request(Command::Preflight, Place::Qemu, EpKind::Qnn), &fake).unwrap_err().to_string();
        assert!(
            saver.contains("no runtime with QNNExecutionProvider is fetched for aarch64-unknown-linux-gnu"),
            "{saver}"
        );
    }

    #[test]
    fn each_command_and_place_has_its_own_default_folder() {
        let leaves: Vec<String> = [
            (Command::Run, Kind::Host, EpKind::Cpu),
            (Command::Run, Kind::Emulator, EpKind::Qnn),
            (Command::Run, Kind::Devices, EpKind::Qnn),
            (Command::Preflight, Kind::Emulator, EpKind::Qnn),
            (Command::Preflight, Kind::Qemu, EpKind::Qnn),
            (Command::Preflight, Kind::Host, EpKind::OpenVino),
        ]
        .into_iter()
        .map(|(c, k, e)| default_leaf(c, k, e))
        .collect();
        assert_eq!(leaves, ["local", "htp", "devices", "preflight", "preflight-saver", "preflight-openvino"]);
    }
}
