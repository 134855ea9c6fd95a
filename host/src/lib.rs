//! What every host layer of npugate stands on: runtimes (named, hashed sets of ONNX Runtime and EP
//! libraries: the pinned catalog, PyPI wheels, choosing one), sample models, the cache they live in,
//! host file digests remembered by stat, the Snapdragon SoC table, child processes with a limit and
//! cancellation, and plain terminal tables. Nothing here knows devices, targets or the command line.

pub mod hash_cache;
pub mod hexagon;
pub mod paths;
pub mod process;
pub mod runtime;
pub mod samples;
pub mod table;
