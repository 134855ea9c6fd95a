//! QNN versions as an axis: `--qnn VERSION` (repeatable; `all`) chooses the host-HTP runtimes — the
//! Windows x64 QNN plugin runtimes run under wine — by the QNN version of their HTP backend, read
//! from the library (`RuntimeManifest::qnn_build`) for fetched runtimes and from the catalog's
//! `qnn_sdk` (checked against the library when fetched) for the others.

use std::str::FromStr;

use anyhow::{bail, Result};

use crate::runtime::catalog;
use crate::runtime::manifest::qnn_sdk_version;
use crate::runtime::RuntimeManifest;
use crate::targets::wine;

/// One `--qnn` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QnnChoice {
    /// Every fetched host-HTP runtime.
    All,
    /// A QNN version: `2.49.40` (exact), `2.49` (that minor release) or a full build
    /// `v2.49.40.260810104044`.
    Version(String),
}

impl FromStr for QnnChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<QnnChoice, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("all") {
            return Ok(QnnChoice::All);
        }
        let digits = text.trim_start_matches('v');
        let parts: Vec<&str> = digits.split('.').collect();
        if parts.len() < 2 || parts.iter().any(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit())) {
            return Err(format!("--qnn {text:?} is not a QNN version; pass e.g. --qnn 2.49.40, --qnn 2.49 or --qnn all"));
        }
        Ok(QnnChoice::Version(digits.to_string()))
    }
}

/// A host-HTP runtime and the QNN version of its backend.
#[derive(Debug, Clone)]
struct Candidate {
    /// Runtime name.
    name: String,
    /// QNN SDK version, e.g. `2.49.40`.
    sdk: String,
    /// Full build when known (fetched runtimes).
    build: Option<String>,
    /// The manifest when the runtime is fetched.
    fetched: Option<RuntimeManifest>,
}

impl Candidate {
    /// `2.49.40 (qnn-2.5.0-ort-1.31.1-windows-x86_64)`, or `…, not fetched`.
    fn describe(&self) -> String {
        let state = if self.fetched.is_some() { "" } else { ", not fetched" };
        format!("{} ({}{state})", self.sdk, self.name)
    }

    /// True when `version` (as [`QnnChoice::Version`] holds it) names this runtime's QNN.
    fn matches(&self, version: &str) -> bool {
        let exact = self.sdk == version || self.build.as_deref().is_some_and(|b| b.trim_start_matches('v') == version);
        exact || (version.split('.').count() == 2 && self.sdk.starts_with(&format!("{version}.")))
    }
}

/// True for a runtime the host HTP can use: Windows x64 with the QNN plugin.
fn is_host_htp(target: &str, ep: Option<&crate::runtime::EpLibrary>) -> bool {
    target == wine::TRIPLE && ep.is_some_and(|ep| ep.name == "QNNExecutionProvider" && ep.attach == "plugin")
}

/// Every host-HTP runtime known — the catalog's (fetched or not) and any other fetched one —
/// oldest QNN first, one per QNN version (a fetched runtime wins, then catalog order).
fn candidates(fetched: &[RuntimeManifest]) -> Result<Vec<Candidate>> {
    let mut found: Vec<Candidate> = Vec::new();
    for entry in catalog::catalog()?.runtime.into_iter().filter(|e| is_host_htp(&e.target, e.ep.as_ref())) {
        let Some(sdk) = entry.qnn_sdk.clone() else { continue };
        let manifest = fetched.iter().find(|r| r.name == entry.name).cloned();
        found.push(Candidate { build: manifest.as_ref().and_then(RuntimeManifest::qnn_build), name: entry.name, sdk, fetched: manifest });
    }
    let others: Vec<&RuntimeManifest> = fetched.iter().filter(|r| is_host_htp(&r.target, r.ep.as_ref()) && !found.iter().any(|c| c.name == r.name)).collect();
    for runtime in others {
        if let Some(build) = runtime.qnn_build() {
            found.push(Candidate { name: runtime.name.clone(), sdk: qnn_sdk_version(&build).to_string(), build: Some(build), fetched: Some(runtime.clone()) });
        }
    }
    found.sort_by(|a, b| version_key(&a.sdk).cmp(&version_key(&b.sdk)).then(b.fetched.is_some().cmp(&a.fetched.is_some())));
    found.dedup_by(|later, kept| later.sdk == kept.sdk);
    Ok(found)
}

/// `2.49.40` → [2, 49, 40] for ordering.
fn version_key(version: &str) -> Vec<u64> {
    version.split('.').map(|part| part.parse().unwrap_or(0)).collect()
}

/// The host-HTP runtimes `choices` name among `fetched`, oldest QNN first, each once. An unknown
/// version lists the known ones; a known one that is not fetched names the fetch command.
pub fn choose(choices: &[QnnChoice], fetched: &[RuntimeManifest]) -> Result<Vec<RuntimeManifest>> {
    let known = candidates(fetched)?;
    let listed = || known.iter().map(Candidate::describe).collect::<Vec<_>>().join(", ");
    let mut chosen: Vec<&Candidate> = Vec::new();
    for choice in choices {
        let matching: Vec<&Candidate> = match choice {
            QnnChoice::All => {
                let all: Vec<&Candidate> = known.iter().filter(|c| c.fetched.is_some()).collect();
                if all.is_empty() {
                    let fetch: Vec<String> = known.iter().map(|c| format!("npugate runtime fetch {}", c.name)).collect();
                    bail!("--qnn all: no host-HTP runtime is fetched; fetch one or more ({})", fetch.join(", or "));
                }
                all
            }
            QnnChoice::Version(version) => {
                let matching: Vec<&Candidate> = known.iter().filter(|c| c.matches(version)).collect();
                match matching.as_slice() {
                    [] => bail!("unknown QNN version {version:?}; the host-HTP runtimes have QNN {}, or pass --qnn all", listed()),
                    [one] if one.fetched.is_none() => {
                        bail!("QNN {} is runtime {}, which is not fetched; run `npugate runtime fetch {}`", one.sdk, one.name, one.name)
                    }
                    [_] => matching,
                    several => bail!(
                        "--qnn {version} matches QNN {}; pass the full version",
                        several.iter().map(|c| c.sdk.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                }
            }
        };
        for candidate in matching {
            if !chosen.iter().any(|c| c.name == candidate.name) {
                chosen.push(candidate);
            }
        }
    }
    chosen.sort_by_key(|c| version_key(&c.sdk));
    Ok(chosen.into_iter().filter_map(|c| c.fetched.clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::EpLibrary;

    fn host_htp(name: &str, build: &str) -> RuntimeManifest {
        let mut runtime = RuntimeManifest::for_tests(std::path::Path::new("/nowhere"));
        runtime.name = name.into();
        runtime.target = wine::TRIPLE.into();
        runtime.ep = Some(EpLibrary { name: "QNNExecutionProvider".into(), attach: "plugin".into(), library: Some("onnxruntime_providers_qnn.dll".into()) });
        runtime.qnn_build = Some(build.into());
        runtime
    }

    fn versions(runtimes: &[RuntimeManifest]) -> Vec<String> {
        runtimes.iter().map(|r| qnn_sdk_version(r.qnn_build.as_deref().unwrap()).to_string()).collect()
    }

    #[test]
    fn choices_parse_versions_and_all_and_refuse_the_rest() {
        assert_eq!("all".parse::<QnnChoice>(), Ok(QnnChoice::All));
        assert_eq!("2.49.40".parse::<QnnChoice>(), Ok(QnnChoice::Version("2.49.40".into())));
        assert_eq!("v2.49.40.260810104044".parse::<QnnChoice>(), Ok(QnnChoice::Version("2.49.40.260810104044".into())));
        for bad in ["2", "latest", "2.x", "2..1", ""] {
            assert!(bad.parse::<QnnChoice>().unwrap_err().contains("is not a QNN version"), "{bad}");
        }
    }

    #[test]
    fn versions_are_chosen_by_the_backends_qnn_oldest_first() {
        let fetched = [
            host_htp("qnn-2.7.0-ort-1.31.1-windows-x86_64", "v2.51.0.260929181845"),
            host_htp("qnn-2.5.0-ort-1.31.1-windows-x86_64", "v2.49.40.260810104044"),
            RuntimeManifest::for_tests(std::path::Path::new("/nowhere")),
        ];
        let pick = |text: &[&str]| choose(&text.iter().map(|t| t.parse().unwrap()).collect::<Vec<_>>(), &fetched);
        assert_eq!(versions(&pick(&["2.49.40"]).unwrap()), ["2.49.40"]);
        assert_eq!(versions(&pick(&["2.51", "2.49"]).unwrap()), ["2.49.40", "2.51.0"]);
        assert_eq!(versions(&pick(&["all"]).unwrap()), ["2.49.40", "2.51.0"]);
        assert_eq!(versions(&pick(&["all", "2.51.0"]).unwrap()), ["2.49.40", "2.51.0"], "each once");
        assert_eq!(versions(&pick(&["v2.51.0.260929181845"]).unwrap()), ["2.51.0"]);
        let unknown = pick(&["2.52"]).unwrap_err().to_string();
        assert!(unknown.starts_with("unknown QNN version \"2.52\""), "{unknown}");
        assert!(unknown.contains("2.49.40 (qnn-2.5.0-ort-1.31.1-windows-x86_64)") && unknown.contains("2.51.0 (qnn-2.7.0-ort-1.31.1-windows-x86_64)"), "{unknown}");
        assert!(unknown.contains("2.47.0 (qnn-2.3.0-ort-1.27.0-windows-x86_64, not fetched)"), "the catalog's others are listed: {unknown}");
        let not_fetched = pick(&["2.48.40"]).unwrap_err().to_string();
        assert!(not_fetched.contains("npugate runtime fetch qnn-2.4.0-ort-1.31.1-windows-x86_64"), "{not_fetched}");
        assert!(choose(&[QnnChoice::All], &[]).unwrap_err().to_string().contains("no host-HTP runtime is fetched"));
    }
}
