//! The static shapes an LLM folder's graphs run with, from the folder's own config: what a graph
//! with dynamic dims (onnxruntime-genai's model builder writes `batch_size`, `sequence_length`,
//! `total_sequence_length`, `past_sequence_length`) needs before an accelerator that takes only
//! static shapes (QNN's HTP) can judge or compile it. A graph runs with one set of shapes per
//! phase of a generation (the prompt, a generated token), so each phase is resolved on its own.

use crate::genai::{layer_name, GenaiError, LlmGraph, LlmModel};
use crate::value::Dim;

/// The lengths a graph's shapes are resolved for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenerationLengths {
    /// Prompt tokens (a multiple of a static prompt graph's length).
    pub prompt: u32,
    /// The context: the most positions a generation holds (its last token attends to all of them).
    pub context: u32,
}

/// One phase of a generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenerationPhase {
    /// The prompt's run(s).
    Prompt,
    /// A generated token's run.
    Token,
}

impl GenerationPhase {
    /// `prompt` or `token`.
    pub fn name(self) -> &'static str {
        match self {
            GenerationPhase::Prompt => "prompt",
            GenerationPhase::Token => "token",
        }
    }
}

/// The shapes one graph runs with in one phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseShapes {
    /// The phase.
    pub phase: GenerationPhase,
    /// Every input the graph declares with a dynamic dim, as (name, dims), in the graph's order.
    pub inputs: Vec<(String, Vec<i64>)>,
}

/// The shapes `graph`'s dynamic inputs take in each phase it runs in, for `lengths`, as
/// onnxruntime-genai feeds them: batch 1; ids and positions the tokens of one run (the prompt, or
/// a static prompt graph's chunk; 1 for a token); the mask every position so far (the prompt; the
/// whole context at the last token); the past KV cache the whole buffer when
/// `search.past_present_share_buffer` (genai's max-length buffer, bound as past and present) or a
/// static cache, else the positions before the run (0 for the prompt, `context - 1` at the last
/// token). Empty when the graph has no dynamic dim. Refused, naming the input: a dynamic dim of
/// an input the loop does not feed, an input of unknown rank, a prompt that leaves no room for a
/// token, a context beyond `model.context_length`.
pub fn phase_shapes(
    llm: &LlmModel,
    graph: &LlmGraph,
    lengths: GenerationLengths,
) -> Result<Vec<PhaseShapes>, GenaiError> {
    let error = |field: &str, message: String| GenaiError { file: llm.config.clone(), field: field.into(), message };
    if !graph.inputs.iter().any(is_dynamic) {
        return Ok(Vec::new());
    }
    let capacity = llm.capacity();
    if lengths.context > capacity {
        return Err(error(
            "model.context_length",
            format!("--context {}: the folder holds {capacity} positions; pass at most {capacity}", lengths.context),
        ));
    }
    if lengths.prompt >= lengths.context {
        return Err(error(
            "model.context_length",
            format!(
                "--prompt-tokens {} leaves no room for a generated token in a context of {}; pass fewer than {}",
                lengths.prompt, lengths.context, lengths.context
            ),
        ));
    }
    let mut phases = Vec::new();
    for (runs, phase) in
        [(graph.run_on_prompt, GenerationPhase::Prompt), (graph.run_on_token_gen, GenerationPhase::Token)]
    {
        if !runs {
            continue;
        }
        let mut inputs = Vec::new();
        for input in graph.inputs.iter().filter(|i| is_dynamic(i)) {
            let field = format!("{} input {:?}", graph.file, input.name);
            let declared = input.dims.as_ref().ok_or_else(|| {
                error(&field, "has no recorded shape; the graph must declare every input's rank".into())
            })?;
            let wanted = role_shape(llm, graph, &input.name, phase, lengths).ok_or_else(|| {
                error(&field, format!("has dynamic dims ({}) the generation does not size: npugate sizes ids, mask, positions and the KV cache only", input.shape_pattern()))
            })?;
            if wanted.len() != declared.len() {
                return Err(error(
                    &field,
                    format!("has rank {} where the generation feeds {wanted:?}", declared.len()),
                ));
            }
            let dims = declared.iter().zip(&wanted).map(|(dim, size)| dim.fixed().unwrap_or(*size)).collect();
            inputs.push((input.name.clone(), dims));
        }
        phases.push(PhaseShapes { phase, inputs });
    }
    Ok(phases)
}

/// The values genai feeds a phase's ids, mask and positions, as (input name, dims, values) for
/// each of them in `shapes`: ids in the vocabulary's range (`position mod vocab`), the mask all
/// ones over its length, positions `0..n` for the prompt and the last past length (`mask length − 1`)
/// for a token — what keeps GroupQueryAttention's `seqlens_k` within its caches. The KV cache is
/// not among them (any values of its shape do).
pub fn phase_feeds(llm: &LlmModel, shapes: &PhaseShapes) -> Vec<(String, Vec<i64>, Vec<i64>)> {
    let names = &llm.names;
    let vocab = llm.vocabulary().map_or(1, |v| v as i64);
    let mask =
        shapes.inputs.iter().find(|(name, _)| *name == names.attention_mask).map(|(_, dims)| dims.iter().product());
    let mut feeds = Vec::new();
    for (name, dims) in &shapes.inputs {
        let count: i64 = dims.iter().product();
        let values: Vec<i64> = if *name == names.input_ids {
            (0..count).map(|i| i % vocab).collect()
        } else if *name == names.attention_mask {
            vec![1; count as usize]
        } else if *name == names.position_ids {
            let start = match shapes.phase {
                GenerationPhase::Prompt => 0,
                GenerationPhase::Token => mask.map_or(0, |total: i64| total - count),
            };
            (start..start + count).collect()
        } else {
            continue;
        };
        feeds.push((name.clone(), dims.clone(), values));
    }
    feeds
}

fn is_dynamic(input: &crate::value::ValueSignature) -> bool {
    input.dims.as_ref().is_some_and(|dims| dims.iter().any(|d| matches!(d, Dim::Named(_))))
}

/// The dims the generation loop feeds input `name` with in `phase` (at the phase's longest: the
/// last token of the context), or `None` for an input it does not feed.
fn role_shape(
    llm: &LlmModel,
    graph: &LlmGraph,
    name: &str,
    phase: GenerationPhase,
    lengths: GenerationLengths,
) -> Option<Vec<i64>> {
    let names = &llm.names;
    let (prompt, context) = (i64::from(lengths.prompt), i64::from(lengths.context));
    let sequence = match phase {
        GenerationPhase::Prompt => graph.fixed_sequence(names).unwrap_or(prompt),
        GenerationPhase::Token => 1,
    };
    let total = match phase {
        GenerationPhase::Prompt => sequence,
        GenerationPhase::Token => context,
    };
    if name == names.input_ids || name == names.position_ids {
        return Some(vec![1, sequence]);
    }
    if name == names.attention_mask {
        return Some(vec![1, total]);
    }
    let is_past = (0..llm.layers)
        .any(|layer| name == layer_name(&names.past_key, layer) || name == layer_name(&names.past_value, layer));
    if !is_past {
        return None;
    }
    let declared = graph.input(name)?.dims.as_ref()?;
    let fixed = |axis: usize| declared.get(axis).and_then(Dim::fixed);
    let heads = fixed(1).or(llm.kv_heads.map(i64::from))?;
    let head_size = fixed(3).or(llm.head_size.map(i64::from))?;
    let past = match (llm.share_buffer, fixed(2)) {
        (_, Some(length)) => length,
        (true, None) => context,
        (false, None) => total - sequence,
    };
    Some(vec![1, heads, past, head_size])
}
