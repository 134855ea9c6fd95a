//! This machine's resources: the runtimes it holds (named, hashed sets of ONNX Runtime and EP
//! libraries: the pinned catalog, PyPI wheels, choosing one), its sample models, the cache they live
//! in, its file digests remembered by stat, and the child processes it runs with a limit and
//! cancellation. Nothing here knows devices, targets or the command line.

pub mod hash_cache;
pub mod paths;
pub mod process;
pub mod runtime;
pub mod samples;
