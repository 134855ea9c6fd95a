//! How an LLM model folder is measured: as token generation, with a seeded synthetic prompt of
//! `--prompt-tokens` ids (no tokenizer), `--gen-tokens` decode steps, discarded warmup generations
//! and timed ones. These flags apply to model folders only.

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;

use clap::Args;
use serde::Serialize;

/// Default prompt length when the model's context allows it.
pub const DEFAULT_PROMPT_TOKENS: u32 = 128;
/// Default decode steps per generation when the model's context allows them.
pub const DEFAULT_GEN_TOKENS: u32 = 32;
/// Default discarded generations.
pub const DEFAULT_WARMUP_GENERATIONS: u32 = 1;
/// Default timed generations.
pub const DEFAULT_GENERATIONS: u32 = 5;

/// A count that must be at least 1 (`--gen-tokens 0` is refused when parsed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Count(NonZeroU32);

impl Count {
    /// The count.
    pub fn get(self) -> u32 {
        self.0.get()
    }
}

impl FromStr for Count {
    type Err = String;

    fn from_str(text: &str) -> Result<Count, String> {
        match text.trim().parse::<u32>() {
            Ok(0) => Err("0 leaves nothing to measure; pass 1 or more".into()),
            Ok(n) => Ok(Count(NonZeroU32::new(n).ok_or("0 leaves nothing to measure")?)),
            Err(_) => Err(format!("{text:?} is not a whole number of at least 1")),
        }
    }
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for Count {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u32(self.get())
    }
}

/// Generation flags (`--model` an onnxruntime-genai folder). Unset flags take the defaults above,
/// shortened to what the model's context length holds; a flag given for a single `.onnx` is refused.
#[derive(Debug, Clone, Default, PartialEq, Args, Serialize)]
#[command(next_help_heading = "Generation (LLM model folders)")]
pub struct GenerationSettings {
    /// Prompt length in tokens: seeded synthetic ids, no tokenizer; with a static prompt graph a
    /// multiple of its sequence length [default: 128, or what the context length holds].
    #[arg(long, value_name = "P")]
    pub prompt_tokens: Option<Count>,
    /// Decode steps per generation, each feeding one token and timing the graphs up to its logits
    /// [default: 32, or what the context length holds].
    #[arg(long, value_name = "G")]
    pub gen_tokens: Option<Count>,
    /// Generations run and discarded before the timed ones [default: 1].
    #[arg(long, value_name = "N")]
    pub warmup_generations: Option<u32>,
    /// Timed generations: TTFT statistics are over these, decode statistics over all their steps [default: 5].
    #[arg(long, value_name = "N")]
    pub generations: Option<Count>,
}

impl GenerationSettings {
    /// The flags given (a single `.onnx` refuses them).
    pub fn given_flags(&self) -> Vec<String> {
        crate::table::given_flags(self)
    }

    /// Discarded generations.
    pub fn warmup_generations(&self) -> u32 {
        self.warmup_generations.unwrap_or(DEFAULT_WARMUP_GENERATIONS)
    }

    /// Timed generations.
    pub fn generations(&self) -> u32 {
        self.generations.map_or(DEFAULT_GENERATIONS, Count::get)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_tokens_are_refused_with_the_fix() {
        assert_eq!("7".parse::<Count>().unwrap().get(), 7);
        assert!("0".parse::<Count>().unwrap_err().contains("pass 1 or more"));
        assert!("-1".parse::<Count>().is_err());
        let table =
            crate::table::parse::<GenerationSettings>(&toml::from_str::<toml::Table>("gen_tokens = 0").unwrap());
        let error = table.unwrap_err();
        assert_eq!(error.field, "gen_tokens");
        assert!(error.message.contains("pass 1 or more"), "{error}");
    }
}
