//! SoC → Hexagon (HTP) architecture, so that only the matching `libQnnHtpV##Stub/Skel.so` is pushed,
//! and → QNN `soc_model` id, which Qualcomm's host HTP backend validates and compiles for.
//!
//! Sources: QNN `soc_model` / arch pairs from pytorch/executorch `backends/qualcomm/serialization/
//! qc_schema.py`; kernel chip ids (`/sys/devices/soc0/soc_id`) from Linux
//! `include/dt-bindings/arm/qcom,ids.h`; platform codenames (`ro.board.platform`) from public device
//! trees (only `sun` = SM8750 is confirmed by a cited ORT issue, microsoft/onnxruntime#31353).

use crate::names;

/// One known Snapdragon part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Soc {
    /// SoC model as `ro.soc.model` spells it, e.g. `SM8650`.
    pub model: &'static str,
    /// Hexagon (HTP) architecture, e.g. `v75`.
    pub arch: &'static str,
    /// QNN's `soc_model` id (the QNN EP option of the same name), e.g. 57.
    pub qnn_soc_model: u32,
    platforms: &'static [&'static str],
    chip_ids: &'static [u32],
}

const SOCS: &[Soc] = &[
    Soc { model: "SM8350", arch: "v68", qnn_soc_model: 30, platforms: &["lahaina"], chip_ids: &[439] },
    Soc { model: "QCM6490", arch: "v68", qnn_soc_model: 93, platforms: &[], chip_ids: &[] },
    Soc { model: "SA8295", arch: "v68", qnn_soc_model: 39, platforms: &[], chip_ids: &[] },
    Soc { model: "SM8450", arch: "v69", qnn_soc_model: 36, platforms: &["taro"], chip_ids: &[457, 480, 482] },
    Soc { model: "SM8475", arch: "v69", qnn_soc_model: 42, platforms: &["cape"], chip_ids: &[530, 531, 540] },
    Soc { model: "SM8550", arch: "v73", qnn_soc_model: 43, platforms: &["kalama"], chip_ids: &[519] },
    Soc { model: "SM8650", arch: "v75", qnn_soc_model: 57, platforms: &["pineapple"], chip_ids: &[557, 577] },
    Soc { model: "SM8750", arch: "v79", qnn_soc_model: 69, platforms: &["sun"], chip_ids: &[618] },
    Soc { model: "SM8850", arch: "v81", qnn_soc_model: 87, platforms: &[], chip_ids: &[] },
    Soc { model: "SM8845", arch: "v81", qnn_soc_model: 97, platforms: &[], chip_ids: &[] },
];

/// Every known SoC, oldest Hexagon arch first.
pub fn all() -> &'static [Soc] {
    SOCS
}

/// The SoC named exactly `name` (in any case), or an error naming the closest known SoC and
/// listing them all: a near miss (`SM86501`, `SM8650zzz`) is never taken for a SoC it starts with.
pub fn find(name: &str) -> Result<Soc, String> {
    let models = || SOCS.iter().map(|s| s.model);
    let model = names::exact(name, models()).ok_or_else(|| names::refusal("SoC", name, models()))?;
    Ok(*SOCS.iter().find(|s| s.model == model).expect("the name is one of the table's"))
}

/// What one `--soc` names: one SoC, or every known SoC (`all`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocChoice(pub Vec<Soc>);

impl std::str::FromStr for SocChoice {
    type Err = String;

    /// `SM8650` → that SoC; `all` → every known SoC.
    fn from_str(text: &str) -> Result<SocChoice, String> {
        if text.trim().eq_ignore_ascii_case("all") {
            return Ok(SocChoice(all().to_vec()));
        }
        find(text).map(|soc| SocChoice(vec![soc])).map_err(|error| format!("{error}; or all"))
    }
}

/// What identified the SoC, strongest first: `ro.soc.model`, then `ro.board.platform`, then the
/// kernel's `/sys/devices/soc0/soc_id`.
#[derive(Debug, Clone, Default)]
pub struct SocClues<'a> {
    /// `ro.soc.model`, e.g. `SM8650` or `SM8750P` (variant suffixes are prefix-matched).
    pub soc_model: Option<&'a str>,
    /// `ro.board.platform`, e.g. `pineapple`.
    pub board_platform: Option<&'a str>,
    /// `/sys/devices/soc0/soc_id`, e.g. `557`.
    pub soc_id: Option<&'a str>,
}

/// The SoC model and its Hexagon arch (`v75`), when the clues identify a known part.
pub fn identify(clues: &SocClues) -> Option<(&'static str, &'static str)> {
    let by_model = clues.soc_model.and_then(|m| {
        let m = m.trim().to_ascii_uppercase();
        SOCS.iter().find(|s| m.starts_with(s.model))
    });
    let by_platform = || {
        let p = clues.board_platform?.trim().to_ascii_lowercase();
        SOCS.iter().find(|s| s.platforms.contains(&p.as_str()))
    };
    let by_chip_id = || {
        let id: u32 = clues.soc_id?.trim().parse().ok()?;
        SOCS.iter().find(|s| s.chip_ids.contains(&id))
    };
    by_model.or_else(by_platform).or_else(by_chip_id).map(|s| (s.model, s.arch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_soc_choice_is_one_soc_or_all() {
        assert_eq!("all".parse::<SocChoice>().unwrap().0, all());
        assert_eq!("sm8350".parse::<SocChoice>().unwrap().0.iter().map(|s| s.model).collect::<Vec<_>>(), ["SM8350"]);
        assert!("x".parse::<SocChoice>().unwrap_err().contains("known: SM8350"));
        assert!(" ALL ".parse::<SocChoice>().is_ok());
    }

    #[test]
    fn identifies_by_model_with_variant_suffix_then_platform_then_chip_id() {
        let model = SocClues { soc_model: Some("SM8750P"), ..Default::default() };
        assert_eq!(identify(&model), Some(("SM8750", "v79")));
        let platform = SocClues { board_platform: Some("kalama"), ..Default::default() };
        assert_eq!(identify(&platform), Some(("SM8550", "v73")));
        let chip = SocClues { soc_id: Some("557\n"), ..Default::default() };
        assert_eq!(identify(&chip), Some(("SM8650", "v75")));
    }

    #[test]
    fn socs_are_found_by_name_with_their_qnn_id_and_unknown_ones_list_the_known() {
        let soc = find("sm8650").unwrap();
        assert_eq!((soc.model, soc.arch, soc.qnn_soc_model), ("SM8650", "v75", 57));
        assert_eq!(find(" SM8750 ").unwrap().qnn_soc_model, 69);
        let error = find("SM9999").unwrap_err();
        assert!(
            error.contains("unknown SoC \"SM9999\"") && error.contains("SM8350, ") && error.contains("SM8850"),
            "{error}"
        );
        assert!(find("").is_err());
    }

    #[test]
    fn a_near_miss_is_no_soc_and_the_closest_is_named() {
        for (near_miss, meant) in
            [("SM86501", "SM8650"), ("SM8650zzz", "SM8650"), ("SM8350-typo", "SM8350"), ("SM8750P", "SM8750")]
        {
            let error = find(near_miss).unwrap_err();
            assert!(error.contains(&format!("did you mean {meant}?")), "{near_miss}: {error}");
            let choice = near_miss.parse::<SocChoice>().unwrap_err();
            assert!(choice.contains(&format!("did you mean {meant}?")) && choice.ends_with("; or all"), "{choice}");
        }
        let archs: Vec<&str> = all().iter().map(|s| s.arch).collect();
        assert!(archs.windows(2).all(|w| w[0] <= w[1]), "oldest arch first: {archs:?}");
    }

    #[test]
    fn unknown_parts_have_no_arch() {
        let clues = SocClues { soc_model: Some("MT6989"), board_platform: Some("mt6989"), soc_id: Some("x") };
        assert_eq!(identify(&clues), None);
        assert_eq!(identify(&SocClues::default()), None);
    }
}
