//! Android runtimes npugate does not fetch from PyPI: ONNX Runtime's Android AAR ([`aar`]) and the
//! QNN libraries of a QAIRT SDK folder ([`qairt`]), each installed as a runtime with its manifest.

pub mod aar;
pub mod qairt;
