//! Names taken exactly: an enum-like value the user types (a SoC, an EP, a QNN version, a runtime, a
//! device serial) is one of the known names, ignoring ASCII case — never a prefix or a near miss.
//! A name that is none of them is refused with the known names and the closest one, so `SM86501`
//! says "did you mean SM8650?" instead of measuring a chip the user did not name.

/// How close (Jaro-Winkler, 0–1) a known name must be to be offered as the one meant; clap offers
/// its own suggestions from 0.7 (Jaro).
const CLOSE_ENOUGH: f64 = 0.7;

/// The known name `given` spells, ignoring ASCII case and surrounding spaces.
pub fn exact<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let given = given.trim();
    known.into_iter().find(|name| name.eq_ignore_ascii_case(given))
}

/// The known name closest to `given`, when one is close enough to be the one meant.
pub fn closest<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let given = given.trim().to_ascii_lowercase();
    known
        .into_iter()
        .map(|name| (strsim::jaro_winkler(&given, &name.to_ascii_lowercase()), name))
        .filter(|(score, _)| *score >= CLOSE_ENOUGH)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
}

/// One line refusing `given` as a `what`: the closest known name first (when one is close), then
/// every known name, e.g. `unknown SoC "SM86501": did you mean SM8650? Known: SM8350, …`.
pub fn refusal<'a>(what: &str, given: &str, known: impl IntoIterator<Item = &'a str> + Clone) -> String {
    let list: Vec<&str> = known.clone().into_iter().collect();
    let listed = if list.is_empty() { "none".to_string() } else { list.join(", ") };
    match closest(given, known) {
        Some(near) => format!("unknown {what} {given:?}: did you mean {near}? Known: {listed}"),
        None => format!("unknown {what} {given:?}; known: {listed}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOCS: &[&str] = &["SM8350", "SM8450", "SM8550", "SM8650", "SM8750"];

    #[test]
    fn a_name_is_taken_whole_in_any_case() {
        assert_eq!(exact("sm8650", SOCS.iter().copied()), Some("SM8650"));
        assert_eq!(exact(" SM8650 ", SOCS.iter().copied()), Some("SM8650"));
        for near_miss in ["SM86501", "SM8650zzz", "SM8350-typo", "SM865", ""] {
            assert_eq!(exact(near_miss, SOCS.iter().copied()), None, "{near_miss}");
        }
    }

    #[test]
    fn a_near_miss_is_refused_with_the_closest_name_and_the_list() {
        for (given, meant) in [("SM86501", "SM8650"), ("SM8650zzz", "SM8650"), ("SM8350-typo", "SM8350")] {
            let refused = refusal("SoC", given, SOCS.iter().copied());
            assert!(refused.contains(&format!("did you mean {meant}?")), "{refused}");
            assert!(refused.contains("Known: SM8350, SM8450, SM8550, SM8650, SM8750"), "{refused}");
        }
        let far = refusal("SoC", "MT6989", ["SM8650"]);
        assert_eq!(far, "unknown SoC \"MT6989\"; known: SM8650");
        assert_eq!(refusal("runtime", "x", std::iter::empty()), "unknown runtime \"x\"; known: none");
    }
}
