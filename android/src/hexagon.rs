//! SoC → Hexagon (HTP) architecture, so that only the matching `libQnnHtpV##Stub/Skel.so` is pushed.
//!
//! Sources: QNN `soc_model` / arch pairs from pytorch/executorch `backends/qualcomm/serialization/
//! qc_schema.py`; kernel chip ids (`/sys/devices/soc0/soc_id`) from Linux
//! `include/dt-bindings/arm/qcom,ids.h`; platform codenames (`ro.board.platform`) from public device
//! trees (only `sun` = SM8750 is confirmed by a cited ORT issue, microsoft/onnxruntime#31353).

/// One known Snapdragon part.
struct Soc {
    model: &'static str,
    arch: &'static str,
    platforms: &'static [&'static str],
    chip_ids: &'static [u32],
}

const SOCS: &[Soc] = &[
    Soc { model: "SM8350", arch: "v68", platforms: &["lahaina"], chip_ids: &[439] },
    Soc { model: "QCM6490", arch: "v68", platforms: &[], chip_ids: &[] },
    Soc { model: "SA8295", arch: "v68", platforms: &[], chip_ids: &[] },
    Soc { model: "SM8450", arch: "v69", platforms: &["taro"], chip_ids: &[457, 480, 482] },
    Soc { model: "SM8475", arch: "v69", platforms: &["cape"], chip_ids: &[530, 531, 540] },
    Soc { model: "SM8550", arch: "v73", platforms: &["kalama"], chip_ids: &[519] },
    Soc { model: "SM8650", arch: "v75", platforms: &["pineapple"], chip_ids: &[557, 577] },
    Soc { model: "SM8750", arch: "v79", platforms: &["sun"], chip_ids: &[618] },
    Soc { model: "SM8850", arch: "v81", platforms: &[], chip_ids: &[] },
    Soc { model: "SM8845", arch: "v81", platforms: &[], chip_ids: &[] },
];

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
    fn identifies_by_model_with_variant_suffix_then_platform_then_chip_id() {
        let model = SocClues { soc_model: Some("SM8750P"), ..Default::default() };
        assert_eq!(identify(&model), Some(("SM8750", "v79")));
        let platform = SocClues { board_platform: Some("kalama"), ..Default::default() };
        assert_eq!(identify(&platform), Some(("SM8550", "v73")));
        let chip = SocClues { soc_id: Some("557\n"), ..Default::default() };
        assert_eq!(identify(&chip), Some(("SM8650", "v75")));
    }

    #[test]
    fn unknown_parts_have_no_arch() {
        let clues = SocClues { soc_model: Some("MT6989"), board_platform: Some("mt6989"), soc_id: Some("x") };
        assert_eq!(identify(&clues), None);
        assert_eq!(identify(&SocClues::default()), None);
    }
}
