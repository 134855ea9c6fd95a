//! This harness's build (version, commit, target) as a stamp in its bytes: npugate reads it from the
//! file without running the harness (`npugate_result::build`).

use npugate_result::build::Build;

/// The stamp. `--version` and `result.json` read it back through [`build`], which keeps it in the binary.
static STAMP: &str = concat!(
    "npugate-harness-build:",
    env!("CARGO_PKG_VERSION"),
    " ",
    env!("NPUGATE_COMMIT"),
    " ",
    env!("NPUGATE_TARGET"),
    "\0"
);

/// This harness's build, read back from its stamp.
pub fn build() -> Build {
    Build::from_binary(std::hint::black_box(STAMP).as_bytes()).expect("the harness's own stamp parses")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_stamp_is_what_npugate_reads_as_this_build() {
        assert_eq!(super::STAMP, npugate_result::this_build!().stamp());
        assert_eq!(super::build(), npugate_result::this_build!());
    }
}
