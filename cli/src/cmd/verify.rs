//! `npugate verify BUNDLE --pubkey KEY`: checks an evidence bundle offline. Exit 0 valid, 1 tampered
//! (each changed, missing or added file named, or the manifest or signature), 2 unusable input.

use std::path::PathBuf;

use anyhow::Result;

use npugate_engine::evidence::{read_public_key, verify};
use npugate_result::contract::{EXIT_FAIL, EXIT_PASS};
use npugate_result::report::{json_of, Finished, Report};

use super::console::Console;
use super::options::JsonArg;

/// Arguments of `npugate verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The bundle directory (`--evidence OUT` of `npugate run` or `npugate sweep`).
    #[arg(value_name = "BUNDLE")]
    pub bundle: PathBuf,
    /// The signer's public key (KEY.pub from `npugate keygen`).
    #[arg(long, value_name = "KEY")]
    pub pubkey: PathBuf,
    /// `--json`: the check (`npugate.verify/1`: `valid`, `problems[]`) instead of text.
    #[command(flatten)]
    pub json: JsonArg,
}

/// `npugate verify`'s finished result: the bundle, the key, and every problem found (none: valid).
#[derive(Debug, serde::Serialize)]
pub struct Checked {
    /// Always `npugate.verify/1`.
    schema: &'static str,
    /// The bundle directory.
    bundle: PathBuf,
    /// The public key it was checked with.
    pubkey: PathBuf,
    /// True when the signature holds and every file matches its sha256.
    valid: bool,
    /// Each changed, missing or added file, or the manifest or signature, one sentence each.
    problems: Vec<String>,
}

impl Report for Checked {
    fn schema(&self) -> &str {
        self.schema
    }
    fn exit_code(&self) -> u8 {
        if self.valid {
            EXIT_PASS
        } else {
            EXIT_FAIL
        }
    }
    fn text(&self, _color: bool) -> String {
        if self.valid {
            return format!(
                "valid: {} is signed by {} and every file matches its sha256\n",
                self.bundle.display(),
                self.pubkey.display()
            );
        }
        let mut text: String = self.problems.iter().map(|problem| format!("TAMPERED  {problem}\n")).collect();
        text.push_str(&format!("invalid: {} problem(s) in {}\n", self.problems.len(), self.bundle.display()));
        text
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// Runs `npugate verify`.
pub fn run(args: VerifyArgs, console: &Console) -> Result<u8> {
    let key = read_public_key(&args.pubkey)?;
    let problems: Vec<String> = verify(&args.bundle, &key)?.iter().map(ToString::to_string).collect();
    let checked = Checked {
        schema: "npugate.verify/1",
        valid: problems.is_empty(),
        bundle: args.bundle,
        pubkey: args.pubkey,
        problems,
    };
    Ok(console.finished(args.json.json, Finished::new(&checked)))
}
