//! The typed values of the harness's repeatable options, each parsed and validated once when it is
//! constructed — from the command line (clap uses `FromStr`), from a sweep plan (serde uses the
//! same `FromStr`) or in code — and written back in the same spelling (`Display`) on a harness
//! command line.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// `--shape name=1x3x224x224`: the concrete shape of one model input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ShapeSpec {
    /// The input's name.
    pub input: String,
    /// Its dimensions, each at least 1.
    pub dims: Vec<i64>,
}

/// `--ep-option key=value` or `--session-config key=value`: one entry passed to ONNX Runtime as is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct KeyValue {
    /// The key, never empty, without surrounding spaces.
    pub key: String,
    /// The value (may itself contain `=`).
    pub value: String,
}

/// `--input name=file.npy`: real data for one model input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct InputFile {
    /// The input's name.
    pub input: String,
    /// The `.npy` file, as the process that reads it sees it.
    pub path: PathBuf,
}

/// Splits `key=value`; the key must be non-empty, the value may contain `=`.
fn split_key_value(text: &str) -> Option<(&str, &str)> {
    text.split_once('=').map(|(key, value)| (key.trim(), value)).filter(|(key, _)| !key.is_empty())
}

impl FromStr for KeyValue {
    type Err = String;

    fn from_str(text: &str) -> Result<KeyValue, String> {
        let (key, value) = split_key_value(text).ok_or_else(|| format!("expected KEY=VALUE, got {text:?}"))?;
        Ok(KeyValue { key: key.to_string(), value: value.to_string() })
    }
}

impl FromStr for ShapeSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<ShapeSpec, String> {
        let (input, dims) =
            split_key_value(text).ok_or_else(|| format!("expected NAME=DIMS like x=1x3x224x224, got {text:?}"))?;
        let dims = dims
            .split(['x', 'X', ','])
            .map(|d| match d.trim().parse::<i64>() {
                Ok(v) if v > 0 => Ok(v),
                _ => Err(format!("dimension {d:?} in --shape {text:?} is not a positive integer")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ShapeSpec { input: input.to_string(), dims })
    }
}

impl FromStr for InputFile {
    type Err = String;

    fn from_str(text: &str) -> Result<InputFile, String> {
        let (input, path) = split_key_value(text).ok_or_else(|| format!("expected NAME=FILE.npy, got {text:?}"))?;
        if path.is_empty() {
            return Err(format!("--input {text:?} names no file"));
        }
        Ok(InputFile { input: input.to_string(), path: PathBuf::from(path) })
    }
}

impl fmt::Display for KeyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

impl fmt::Display for ShapeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.dims.iter().map(i64::to_string).collect();
        write!(f, "{}={}", self.input, dims.join("x"))
    }
}

impl fmt::Display for InputFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.input, self.path.display())
    }
}

/// `TryFrom<String>` and `Into<String>` through `FromStr` and `Display`, for serde.
macro_rules! string_conversions {
    ($($ty:ty),*) => {$(
        impl TryFrom<String> for $ty {
            type Error = String;
            fn try_from(text: String) -> Result<$ty, String> {
                text.parse()
            }
        }
        impl From<$ty> for String {
            fn from(value: $ty) -> String {
                value.to_string()
            }
        }
    )*};
}
string_conversions!(KeyValue, ShapeSpec, InputFile);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_once_and_print_back_the_same() {
        for text in ["x=1x3x224x224", "p2o.x=1", "a b=2x2"] {
            assert_eq!(text.parse::<ShapeSpec>().unwrap().to_string(), text);
        }
        assert_eq!("x=1,3".parse::<ShapeSpec>().unwrap().dims, [1, 3]);
        assert_eq!("a=b=c".parse::<KeyValue>().unwrap(), KeyValue { key: "a".into(), value: "b=c".into() });
        assert_eq!("x=/d/a.npy".parse::<InputFile>().unwrap().path, PathBuf::from("/d/a.npy"));
    }

    #[test]
    fn malformed_values_are_refused_with_the_fix() {
        for (text, needle) in [
            ("x=1x0", "not a positive integer"),
            ("x=1x-3", "not a positive integer"),
            ("x=", "not a positive"),
            ("=1x3", "NAME=DIMS"),
            ("x", "NAME=DIMS"),
        ] {
            let error = text.parse::<ShapeSpec>().unwrap_err();
            assert!(error.contains(needle), "{text}: {error}");
        }
        assert!("novalue".parse::<KeyValue>().is_err());
        assert!(" =v".parse::<KeyValue>().is_err());
        assert!("x=".parse::<InputFile>().unwrap_err().contains("names no file"));
    }
}
