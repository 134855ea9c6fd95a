//! A model in memory: read from a file or bytes, written back atomically, its metadata.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use prost::Message;

use crate::proto::{ModelProto, StringStringEntryProto};

/// The largest protobuf message there can be: 2 GiB − 1 bytes (sizes are 32-bit signed).
pub const MAX_PROTOBUF_BYTES: u64 = i32::MAX as u64;

/// An ONNX model: the decoded `ModelProto`.
///
/// Tensor bytes (`raw_data`) are [`Bytes`] slices of the buffer the model was decoded from, so
/// reading a model allocates no second copy of its weights.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    proto: ModelProto,
}

/// Why a model could not be read. Every variant names the file (`<memory>` for bytes).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("cannot read ONNX model {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Larger than a protobuf can be.
    #[error(
        "{path} is {bytes} bytes, larger than the 2 GiB a single protobuf can hold: it cannot be an ONNX model \
         file; save the model with its weights as external data (onnx.save_model(..., save_as_external_data=True))"
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
    /// Not a decodable `ModelProto`.
    #[error("{path} is not an ONNX model (truncated or corrupt protobuf: {source}); re-export or re-download it")]
    Decode {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: prost::DecodeError,
    },
    /// Decodes, but has no graph: an empty file or some other protobuf.
    #[error("{path} is not an ONNX model: it has no graph (an empty file, or another kind of protobuf)")]
    NoGraph {
        /// The file.
        path: PathBuf,
    },
}

/// Why a model could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The encoded model would exceed what a protobuf can hold.
    #[error(
        "cannot write {path}: the model encodes to {bytes} bytes, larger than the 2 GiB a single protobuf can hold; \
         keep its weights in external data"
    )]
    TooLarge {
        /// The file (`<memory>` when encoding to bytes).
        path: PathBuf,
        /// The encoded size.
        bytes: u64,
    },
    /// The file could not be written.
    #[error("cannot write ONNX model {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// How errors name a model that did not come from a file.
fn memory() -> PathBuf {
    PathBuf::from("<memory>")
}

impl Model {
    /// Reads and decodes the model file at `path`.
    pub fn read(path: impl AsRef<Path>) -> Result<Model, ReadError> {
        let path = path.as_ref();
        let io = |source| ReadError::Io { path: path.to_path_buf(), source };
        let bytes = std::fs::metadata(path).map_err(io)?.len();
        if bytes > MAX_PROTOBUF_BYTES {
            return Err(ReadError::TooLarge { path: path.to_path_buf(), bytes });
        }
        let data = std::fs::read(path).map_err(io)?;
        Model::decode(Bytes::from(data), path)
    }

    /// Decodes a model from its bytes (errors name it `<memory>`). Tensor bytes stay slices of
    /// `bytes`.
    pub fn from_bytes(bytes: impl Into<Bytes>) -> Result<Model, ReadError> {
        Model::decode(bytes.into(), &memory())
    }

    fn decode(bytes: Bytes, path: &Path) -> Result<Model, ReadError> {
        let size = bytes.len() as u64;
        if size > MAX_PROTOBUF_BYTES {
            return Err(ReadError::TooLarge { path: path.to_path_buf(), bytes: size });
        }
        let proto =
            ModelProto::decode(bytes).map_err(|source| ReadError::Decode { path: path.to_path_buf(), source })?;
        if proto.graph.is_none() {
            return Err(ReadError::NoGraph { path: path.to_path_buf() });
        }
        Ok(Model { proto })
    }

    /// The encoded model. The same model always encodes to the same bytes: fields in field-number
    /// order, repeated fields in their order (ONNX's schema has no `map` fields). Fields the
    /// vendored schema does not know are not kept.
    pub fn to_bytes(&self) -> Result<Vec<u8>, WriteError> {
        self.encode(&memory())
    }

    fn encode(&self, path: &Path) -> Result<Vec<u8>, WriteError> {
        let bytes = self.proto.encoded_len() as u64;
        if bytes > MAX_PROTOBUF_BYTES {
            return Err(WriteError::TooLarge { path: path.to_path_buf(), bytes });
        }
        Ok(self.proto.encode_to_vec())
    }

    /// Writes the model to `path` atomically (a reader never sees half a file).
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), WriteError> {
        let path = path.as_ref();
        let bytes = self.encode(path)?;
        npugate_result::contract::write_atomic(path, &bytes)
            .map_err(|source| WriteError::Io { path: path.to_path_buf(), source })
    }

    /// The decoded protobuf, for what this crate has no method for (e.g. node attributes).
    pub fn proto(&self) -> &ModelProto {
        &self.proto
    }

    /// The decoded protobuf, to edit freely.
    pub fn proto_mut(&mut self) -> &mut ModelProto {
        &mut self.proto
    }

    /// The protobuf, consuming the model.
    pub fn into_proto(self) -> ModelProto {
        self.proto
    }

    /// The value of `metadata_props` entry `key`.
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.proto.metadata_props.iter().find(|entry| entry.key() == key).map(|entry| entry.value())
    }

    /// Every `metadata_props` entry as (key, value), in file order.
    pub fn metadata_entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.proto.metadata_props.iter().map(|entry| (entry.key(), entry.value()))
    }

    /// Sets `metadata_props` entry `key` to `value`: replaces its value where it is (dropping any
    /// later duplicates of the key), or appends it.
    pub fn set_metadata(&mut self, key: &str, value: &str) {
        let props = &mut self.proto.metadata_props;
        match props.iter().position(|entry| entry.key() == key) {
            Some(first) => {
                props[first].value = Some(value.to_string());
                let later = props.split_off(first + 1);
                props.extend(later.into_iter().filter(|entry| entry.key() != key));
            }
            None => props.push(StringStringEntryProto { key: Some(key.to_string()), value: Some(value.to_string()) }),
        }
    }
}

impl From<ModelProto> for Model {
    /// Wraps a protobuf built in code (no checks).
    fn from(proto: ModelProto) -> Model {
        Model { proto }
    }
}
