//! The matrix report of a sweep (`matrix.html` with inline SVG, and `matrix.md`): per cell median,
//! CV, NPU FLOP share, fallback count and verdict; per model the placement differences between
//! runtimes on the same device; per device class the trend against previous nights from the history.

mod html;
mod markdown;
mod report;

use std::path::{Path, PathBuf};

use anyhow::Context;

pub use report::{placement_differences, Matrix, PlacementMove, MATRIX_HTML, MATRIX_MD};

/// Writes `matrix.html` and `matrix.md` of `matrix` into `sweep_dir`; returns their paths.
pub fn write(matrix: &Matrix<'_>, sweep_dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let files = [(MATRIX_HTML, html::render(matrix)), (MATRIX_MD, markdown::render(matrix))];
    files
        .into_iter()
        .map(|(name, text)| {
            let path = sweep_dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
            Ok(path)
        })
        .collect()
}
