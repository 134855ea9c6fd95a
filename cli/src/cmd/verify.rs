//! `npugate verify BUNDLE --pubkey KEY`: checks an evidence bundle offline. Exit 0 valid, 1 tampered
//! (each changed, missing or added file named, or the manifest or signature), 2 unusable input.

use std::path::PathBuf;

use anyhow::Result;

use npugate_engine::evidence::{read_public_key, verify};
use npugate_result::contract::{EXIT_FAIL, EXIT_PASS};

/// Arguments of `npugate verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The bundle directory (`--evidence OUT` of `npugate run` or `npugate sweep`).
    #[arg(value_name = "BUNDLE")]
    pub bundle: PathBuf,
    /// The signer's public key (KEY.pub from `npugate keygen`).
    #[arg(long, value_name = "KEY")]
    pub pubkey: PathBuf,
}

/// Runs `npugate verify`.
pub fn run(args: VerifyArgs) -> Result<u8> {
    let key = read_public_key(&args.pubkey)?;
    let problems = verify(&args.bundle, &key)?;
    if problems.is_empty() {
        println!(
            "valid: {} is signed by {} and every file matches its sha256",
            args.bundle.display(),
            args.pubkey.display()
        );
        return Ok(EXIT_PASS);
    }
    for problem in &problems {
        println!("TAMPERED  {problem}");
    }
    println!("invalid: {} problem(s) in {}", problems.len(), args.bundle.display());
    Ok(EXIT_FAIL)
}
