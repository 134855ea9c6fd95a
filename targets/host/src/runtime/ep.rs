//! How a runtime's accelerator EP reaches ONNX Runtime: one type the catalog (what is pinned) and
//! the manifest (what was fetched) both describe runtimes with.

use serde::{Deserialize, Serialize};

/// How a runtime's accelerator EP reaches ONNX Runtime.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct EpLibrary {
    /// ORT name of the EP, e.g. `QNNExecutionProvider`.
    pub name: String,
    /// `plugin` (a library registered at run time) or `builtin` (compiled into libonnxruntime).
    pub attach: String,
    /// File name of the plugin library (`plugin` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
}
