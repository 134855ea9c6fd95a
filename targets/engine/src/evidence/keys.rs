//! ed25519 signing keys: private keys as PKCS#8 PEM (a file, or the PEM text in
//! `NPUGATE_SIGNING_KEY`), public keys as SubjectPublicKeyInfo PEM — the formats OpenSSL reads.

use std::path::Path;

use anyhow::{bail, Context, Result};
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{SigningKey, VerifyingKey};

/// Environment variable holding the private key's PEM text, when no key file is given.
pub const SIGNING_KEY_ENV: &str = "NPUGATE_SIGNING_KEY";

/// The signing key of an evidence bundle: from `file` (PKCS#8 PEM), else from the PEM text in
/// `NPUGATE_SIGNING_KEY`; neither is an error saying how to make one.
pub fn signing_key(file: Option<&Path>) -> Result<SigningKey> {
    match file {
        Some(file) => read_signing_key(file),
        None => match std::env::var(SIGNING_KEY_ENV) {
            Ok(pem) if !pem.trim().is_empty() => SigningKey::from_pkcs8_pem(pem.trim()).map_err(|e| {
                anyhow::anyhow!("{SIGNING_KEY_ENV} is not an ed25519 private key in PKCS#8 PEM ({e}); set it to the text of a key from `npugate keygen`")
            }),
            _ => bail!(
                "--evidence needs a signing key: pass --signing-key FILE or set {SIGNING_KEY_ENV} to the key's PEM text \
                 (create one with `npugate keygen --out KEY`)"
            ),
        },
    }
}

/// Reads a PKCS#8 PEM ed25519 private key.
pub fn read_signing_key(file: &Path) -> Result<SigningKey> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read signing key {}", file.display()))?;
    SigningKey::from_pkcs8_pem(String::from_utf8_lossy(&bytes).trim()).map_err(|e| {
        anyhow::anyhow!(
            "{} is not an ed25519 private key in PKCS#8 PEM ({e}); create one with `npugate keygen --out KEY`",
            file.display()
        )
    })
}

/// Reads a public key: SubjectPublicKeyInfo PEM (`KEY.pub` from `npugate keygen`), or the public
/// half of a PKCS#8 private key.
pub fn read_public_key(file: &Path) -> Result<VerifyingKey> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read public key {}", file.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let pem = text.trim();
    VerifyingKey::from_public_key_pem(pem)
        .or_else(|_| SigningKey::from_pkcs8_pem(pem).map(|key| key.verifying_key()))
        .map_err(|_| {
            anyhow::anyhow!(
                "{} is not an ed25519 public key in PEM; pass the KEY.pub that `npugate keygen` wrote",
                file.display()
            )
        })
}

/// A fresh key from the operating system's random source.
pub fn generate() -> Result<SigningKey> {
    let mut seed = [0u8; ed25519_dalek::SECRET_KEY_LENGTH];
    getrandom::fill(&mut seed).map_err(|e| anyhow::anyhow!("the operating system gave no random bytes: {e}"))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// The private key as PKCS#8 PEM.
pub fn private_pem(key: &SigningKey) -> Result<String> {
    Ok(key.to_pkcs8_pem(LineEnding::LF).map_err(|e| anyhow::anyhow!("cannot encode the private key: {e}"))?.to_string())
}

/// The public key as SubjectPublicKeyInfo PEM.
pub fn public_pem(key: &VerifyingKey) -> Result<String> {
    key.to_public_key_pem(LineEnding::LF).map_err(|e| anyhow::anyhow!("cannot encode the public key: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_pem_files() {
        let dir = tempfile::tempdir().unwrap();
        let key = generate().unwrap();
        let (private, public) = (dir.path().join("key"), dir.path().join("key.pub"));
        std::fs::write(&private, private_pem(&key).unwrap()).unwrap();
        std::fs::write(&public, public_pem(&key.verifying_key()).unwrap()).unwrap();
        assert_eq!(read_signing_key(&private).unwrap().to_bytes(), key.to_bytes());
        assert_eq!(read_public_key(&public).unwrap(), key.verifying_key());
        assert_eq!(read_public_key(&private).unwrap(), key.verifying_key());
        let err = read_signing_key(&public).unwrap_err().to_string();
        assert!(err.contains("key.pub") && err.contains("npugate keygen"), "{err}");
    }
}
