//! The model's real inputs and fixing their dynamic dims to concrete sizes.
//!
//! ONNX Runtime's QNN execution provider needs static shapes and rejects every node of a model
//! whose inputs have dynamic dims. ORT's free-dimension overrides work per symbolic name, which
//! cannot give two dims that share a name (PP-OCR's `?` for both H and W) different sizes — so the
//! graph inputs' dims themselves are rewritten; ORT's shape inference does the rest.
//!
//! Error messages speak in terms of the `--shape name=AxBxC` option every npugate command takes.

use std::collections::HashSet;

use crate::model::Model;
use crate::proto::tensor_shape_proto::dimension::Value as DimValue;
use crate::proto::tensor_shape_proto::Dimension;
use crate::proto::type_proto::Value as TypeValue;
use crate::proto::{GraphProto, TensorShapeProto, ValueInfoProto};
use crate::value::{Dim, ValueKind, ValueSignature};

/// Why `--shape` values cannot be applied. Each names the input and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// The name is no graph input at all.
    #[error("--shape {name}=…: the model has no input {name:?}; its inputs are: {inputs}")]
    NoSuchInput {
        /// The name given.
        name: String,
        /// The model's real inputs, comma-separated (`(none)` when it has none).
        inputs: String,
    },
    /// The name is a graph input that is also an initializer: a weight, not a real input.
    #[error(
        "--shape {name}=…: {name:?} is a graph input that is also an initializer (a weight with a stored value), \
         not a real input; the model's inputs are: {inputs}"
    )]
    Initializer {
        /// The name given.
        name: String,
        /// The model's real inputs, comma-separated.
        inputs: String,
    },
    /// The same input given twice.
    #[error("--shape {name}=… is given twice; give each input once")]
    Repeated {
        /// The input.
        name: String,
    },
    /// The input is a sequence, map, … — only tensors have a shape.
    #[error("--shape {name}=…: input {name:?} is a {kind}, not a tensor; only tensor inputs have a shape")]
    NotATensor {
        /// The input.
        name: String,
        /// What it is.
        kind: ValueKind,
    },
    /// A different number of dims than the input has.
    #[error("--shape {name}={given} gives {given_rank} dims, but input {name:?} has {rank} ({declared}); pass {flag}")]
    Rank {
        /// The input.
        name: String,
        /// The dims given, `AxBxC`.
        given: String,
        /// How many were given.
        given_rank: usize,
        /// The input's rank.
        rank: usize,
        /// The input as declared.
        declared: String,
        /// The flag to pass instead, with `N` for each size to choose.
        flag: String,
    },
    /// A dim that is zero or negative.
    #[error("--shape {name}={given}: dim {index} is {value}; every dim must be a positive integer")]
    NotPositive {
        /// The input.
        name: String,
        /// The dims given, `AxBxC`.
        given: String,
        /// Which dim (0-based).
        index: usize,
        /// Its value.
        value: i64,
    },
    /// A dim the model fixes to another size.
    #[error("--shape {name}={given}: dim {index} is {value}, but the model fixes it to {fixed}; pass {flag}")]
    Conflict {
        /// The input.
        name: String,
        /// The dims given, `AxBxC`.
        given: String,
        /// Which dim (0-based).
        index: usize,
        /// The value given.
        value: i64,
        /// The model's value.
        fixed: i64,
        /// The flag with the model's fixed sizes put in.
        flag: String,
    },
}

/// One input whose declared dims were replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedInput {
    /// The input.
    pub name: String,
    /// Its dims before (`None`: the rank was unknown).
    pub before: Option<Vec<Dim>>,
    /// Its dims now.
    pub after: Vec<i64>,
}

/// What [`Model::fix_input_shapes`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedShapes {
    /// Each input given, in the order given.
    pub fixed: Vec<FixedInput>,
    /// Real inputs that still have a dynamic dim (or an unknown rank).
    pub still_dynamic: Vec<ValueSignature>,
}

impl Model {
    /// The real inputs, in graph order: the main graph's inputs that are not also initializers
    /// (an input that has an initializer is a weight with a default value, not fed by the caller).
    pub fn input_signatures(&self) -> Vec<ValueSignature> {
        let Some(graph) = self.proto().graph.as_ref() else { return Vec::new() };
        real_inputs(graph).map(ValueSignature::from_value_info).collect()
    }

    /// The real tensor inputs with a dynamic dim or an unknown rank: those a caller must give
    /// `--shape` for before ONNX Runtime's QNN EP can run the model.
    pub fn dynamic_inputs(&self) -> Vec<ValueSignature> {
        self.input_signatures()
            .into_iter()
            .filter(|input| matches!(input.kind, ValueKind::Tensor | ValueKind::SparseTensor) && !input.is_static())
            .collect()
    }

    /// The `--shape name=AxBxC` flags still needed, one per dynamic input: fixed sizes as
    /// numbers, each size to choose as `N` (e.g. `--shape x=Nx3xNxN`).
    pub fn dynamic_shape_flags(&self) -> Vec<String> {
        self.dynamic_inputs().iter().map(ValueSignature::shape_flag).collect()
    }

    /// Replaces the declared dims of the named real inputs with the given sizes (keeping each
    /// dim's denotation); nothing else in the model changes. Every shape is checked first: on an
    /// error the model is unchanged.
    pub fn fix_input_shapes(&mut self, shapes: &[(String, Vec<i64>)]) -> Result<FixedShapes, ShapeError> {
        let mut fixed = Vec::with_capacity(shapes.len());
        if let Some(graph) = self.proto().graph.as_ref() {
            let mut seen = HashSet::new();
            for (name, dims) in shapes {
                if !seen.insert(name.as_str()) {
                    return Err(ShapeError::Repeated { name: name.clone() });
                }
                let declared = check(graph, name, dims)?;
                fixed.push(FixedInput { name: name.clone(), before: declared.dims, after: dims.clone() });
            }
        } else if let Some((name, _)) = shapes.first() {
            return Err(ShapeError::NoSuchInput { name: name.clone(), inputs: "(none)".to_string() });
        }
        if let Some(graph) = self.proto_mut().graph.as_mut() {
            let initializers = initializer_names(graph);
            for input in graph.input.iter_mut().filter(|input| !initializers.contains(input.name())) {
                if let Some((_, dims)) = shapes.iter().find(|(name, _)| name == input.name()) {
                    set_dims(input, dims);
                }
            }
        }
        Ok(FixedShapes { fixed, still_dynamic: self.dynamic_inputs() })
    }
}

/// The main graph's inputs that no initializer backs.
fn real_inputs(graph: &GraphProto) -> impl Iterator<Item = &ValueInfoProto> {
    let initializers = initializer_names(graph);
    graph.input.iter().filter(move |input| !initializers.contains(input.name()))
}

/// The names of a graph's dense and sparse initializers.
fn initializer_names(graph: &GraphProto) -> HashSet<String> {
    let dense = graph.initializer.iter().map(|t| t.name().to_string());
    let sparse = graph.sparse_initializer.iter().filter_map(|s| s.values.as_ref()).map(|v| v.name().to_string());
    dense.chain(sparse).collect()
}

/// Checks one `--shape` against the model; returns the input as declared.
fn check(graph: &GraphProto, name: &str, dims: &[i64]) -> Result<ValueSignature, ShapeError> {
    let inputs = || {
        let names: Vec<&str> = real_inputs(graph).map(|input| input.name()).collect();
        if names.is_empty() {
            "(none)".to_string()
        } else {
            names.join(", ")
        }
    };
    let Some(input) = real_inputs(graph).find(|input| input.name() == name) else {
        return Err(if graph.input.iter().any(|input| input.name() == name) {
            ShapeError::Initializer { name: name.to_string(), inputs: inputs() }
        } else {
            ShapeError::NoSuchInput { name: name.to_string(), inputs: inputs() }
        });
    };
    let declared = ValueSignature::from_value_info(input);
    if !matches!(declared.kind, ValueKind::Tensor | ValueKind::SparseTensor) {
        return Err(ShapeError::NotATensor { name: name.to_string(), kind: declared.kind });
    }
    let given = join(dims);
    if let Some(declared_dims) = &declared.dims {
        if declared_dims.len() != dims.len() {
            return Err(ShapeError::Rank {
                name: name.to_string(),
                given,
                given_rank: dims.len(),
                rank: declared_dims.len(),
                declared: declared.to_string(),
                flag: declared.shape_flag(),
            });
        }
    }
    if let Some((index, &value)) = dims.iter().enumerate().find(|(_, &value)| value <= 0) {
        return Err(ShapeError::NotPositive { name: name.to_string(), given, index, value });
    }
    if let Some(declared_dims) = &declared.dims {
        let conflict = declared_dims.iter().zip(dims).enumerate().find_map(|(index, (declared, &value))| {
            declared.fixed().filter(|&fixed| fixed != value).map(|fixed| (index, value, fixed))
        });
        if let Some((index, value, fixed)) = conflict {
            let corrected: Vec<i64> = declared_dims.iter().zip(dims).map(|(d, &v)| d.fixed().unwrap_or(v)).collect();
            let flag = format!("--shape {name}={}", join(&corrected));
            return Err(ShapeError::Conflict { name: name.to_string(), given, index, value, fixed, flag });
        }
    }
    Ok(declared)
}

/// Sets a tensor input's dims, keeping each existing dim's denotation.
fn set_dims(input: &mut ValueInfoProto, dims: &[i64]) {
    let shape = match input.r#type.as_mut().and_then(|t| t.value.as_mut()) {
        Some(TypeValue::TensorType(tensor)) => tensor.shape.get_or_insert_with(TensorShapeProto::default),
        Some(TypeValue::SparseTensorType(sparse)) => sparse.shape.get_or_insert_with(TensorShapeProto::default),
        _ => return,
    };
    shape.dim.resize_with(dims.len(), Dimension::default);
    for (dim, &value) in shape.dim.iter_mut().zip(dims) {
        dim.value = Some(DimValue::DimValue(value));
    }
}

/// `1x3x640x640`.
fn join(dims: &[i64]) -> String {
    dims.iter().map(i64::to_string).collect::<Vec<_>>().join("x")
}
