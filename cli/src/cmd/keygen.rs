//! `npugate keygen --out KEY`: a new ed25519 signing key for evidence bundles — the private key in
//! KEY (PKCS#8 PEM, mode 0600), the public key in KEY.pub (and on stdout) for `npugate verify`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use npugate_engine::evidence::{generate, private_pem, public_pem};
use npugate_result::contract::EXIT_PASS;
use npugate_result::report::{json_of, Finished, Report};

use super::console::Console;
use super::options::JsonArg;

/// Arguments of `npugate keygen`.
#[derive(Debug, clap::Args)]
pub struct KeygenArgs {
    /// Private key file to write; the public key goes to the same path plus `.pub`.
    #[arg(long, value_name = "KEY")]
    pub out: PathBuf,
    /// Replace key files npugate wrote (never a file of another kind).
    #[arg(long)]
    pub force: bool,
    /// `--json`: the key files and the public key (`npugate.keygen/1`) instead of the public key.
    #[command(flatten)]
    pub json: JsonArg,
}

/// `npugate keygen`'s finished result: where the keys are, and the public key (PEM), which is
/// the terminal text.
#[derive(Debug, serde::Serialize)]
pub struct Keys {
    /// Always `npugate.keygen/1`.
    schema: &'static str,
    /// The private key file (mode 0600).
    private_key: PathBuf,
    /// The public key file.
    public_key: PathBuf,
    /// The public key, PEM.
    public_pem: String,
}

impl Report for Keys {
    fn schema(&self) -> &str {
        self.schema
    }
    fn exit_code(&self) -> u8 {
        EXIT_PASS
    }
    fn text(&self, _color: bool) -> String {
        self.public_pem.clone()
    }
    fn json(&self) -> String {
        json_of(self)
    }
}

/// Runs `npugate keygen`.
pub fn run(args: KeygenArgs, console: &Console) -> Result<u8> {
    let public_file = PathBuf::from(format!("{}.pub", args.out.display()));
    for file in [&args.out, &public_file] {
        npugate_engine::layout::check_file(file, "--out", &[])?;
        if file.exists() && !args.force {
            bail!("{} exists; choose another --out or pass --force to replace the key", file.display());
        }
    }
    let key = generate()?;
    let public = public_pem(&key.verifying_key())?;
    write_private(&args.out, private_pem(&key)?.as_bytes())?;
    std::fs::write(&public_file, &public).with_context(|| format!("cannot write {}", public_file.display()))?;
    let saved =
        format!("private key in {} (keep it secret), public key in {}", args.out.display(), public_file.display());
    let keys = Keys { schema: "npugate.keygen/1", private_key: args.out, public_key: public_file, public_pem: public };
    Ok(console.finished(args.json.json, Finished::saved(&keys, saved)))
}

/// Writes a file only its owner can read (on Unix).
fn write_private(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(bytes).with_context(|| format!("cannot write {}", path.display()))
}
