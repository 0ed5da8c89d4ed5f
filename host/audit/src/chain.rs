//! The chain: how a record's line carries its hash, and how a checkpoint
//! signs the chain's head.
//!
//! A line is a JSON object whose last member is `"hash"`: `sha256:` and
//! the hex SHA-256 of the line's bytes without that member (the text up
//! to `,"hash":`, then `}`). Every record names the hash of the one before
//! as `prev` (the first of a trail names [`GENESIS`]) and counts itself in
//! `seq`, so an edited, removed, inserted or reordered record breaks the
//! chain where it happened. A checkpoint record signs the hash of the
//! record before it ([`checkpoint_message`]) with the operator's key.

use base64::Engine as _;
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey};
use sha2::{Digest, Sha256};

/// The `prev` of a trail's first record.
pub const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// `sha256:` and the hex SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    sha256_of([bytes])
}

/// [`sha256`] of `parts` one after another, without joining them first.
pub fn sha256_of(parts: impl IntoIterator<Item = impl AsRef<[u8]>>) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_ref());
    }
    let mut text = String::with_capacity("sha256:".len() + 64);
    text.push_str("sha256:");
    for byte in hasher.finalize() {
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 15)]));
    }
    text
}

/// The hash `line` claims, and whether it is the hash of its bytes.
pub(crate) fn unseal(line: &str) -> Result<(String, bool), String> {
    const TAIL: usize = ",\"hash\":\"sha256:\"}".len() + 64;
    let cut = line
        .len()
        .checked_sub(TAIL)
        .filter(|&at| line.is_char_boundary(at) && line[at..].starts_with(",\"hash\":\"sha256:"))
        .filter(|_| line.ends_with("\"}"))
        .ok_or("it does not end with its hash")?;
    let claimed = line[cut + ",\"hash\":\"".len()..line.len() - 2].to_string();
    let body = format!("{}}}", &line[..cut]);
    let matches = sha256(body.as_bytes()) == claimed;
    Ok((claimed, matches))
}

/// What a checkpoint signs: the head of the chain (the hash of the record
/// before it) and that record's `seq`.
pub fn checkpoint_message(head: &str, head_seq: u64) -> Vec<u8> {
    format!("airlock-audit-checkpoint\n{head}\n{head_seq}\n").into_bytes()
}

/// A private key that signs checkpoints: P-256, PKCS#8 PEM, as `airlock
/// keygen` writes it.
#[derive(Clone)]
pub struct SigningKey(p256::ecdsa::SigningKey);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({})", self.public_key().fingerprint())
    }
}

impl SigningKey {
    /// Reads an unencrypted PEM private key on P-256.
    pub fn from_pem(text: &str) -> Result<SigningKey, String> {
        p256::ecdsa::SigningKey::from_pkcs8_pem(text)
            .or_else(|_| p256::SecretKey::from_sec1_pem(text).map(Into::into))
            .map(SigningKey)
            .map_err(|_| {
                "it is not an unencrypted PEM private key on the P-256 curve (make one with \
                 `airlock keygen`)"
                    .into()
            })
    }

    /// Its public half.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(*self.0.verifying_key())
    }

    /// The signature of `message` (DER, base64).
    pub fn sign(&self, message: &[u8]) -> String {
        let signature: p256::ecdsa::Signature = self.0.sign(message);
        base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes())
    }
}

/// A public key that checkpoints are verified with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey(p256::ecdsa::VerifyingKey);

impl PublicKey {
    /// Reads a PEM public key on P-256 (`airlock keygen`'s `.pub`).
    pub fn from_pem(text: &str) -> Result<PublicKey, String> {
        p256::ecdsa::VerifyingKey::from_public_key_pem(text)
            .map(PublicKey)
            .map_err(|_| "it is not a PEM public key on the P-256 curve".into())
    }

    /// `sha256:` and the hex SHA-256 of the key's DER encoding, as `airlock
    /// keygen` and `airlock tools` name keys.
    pub fn fingerprint(&self) -> String {
        let der = self
            .0
            .to_public_key_der()
            .expect("a P-256 public key encodes");
        sha256(der.as_bytes())
    }

    /// Whether `signature` (DER, base64) signs `message` under this key.
    pub fn verifies(&self, message: &[u8], signature: &str) -> bool {
        base64::engine::general_purpose::STANDARD
            .decode(signature)
            .ok()
            .and_then(|der| p256::ecdsa::Signature::from_der(&der).ok())
            .is_some_and(|s| self.0.verify(message, &s).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_carries_the_hash_of_its_other_bytes() {
        let body = r#"{"seq":1,"note":"a \"quoted\" é"}"#;
        let hash = sha256(body.as_bytes());
        let line = format!("{},\"hash\":\"{hash}\"}}", &body[..body.len() - 1]);
        assert!(line.ends_with(&format!(",\"hash\":\"{hash}\"}}")), "{line}");
        assert_eq!(unseal(&line).unwrap(), (hash.clone(), true));
        let edited = line.replace("quoted", "QUOTED");
        assert_eq!(unseal(&edited).unwrap(), (hash, false));
        assert!(unseal("{\"seq\":1}").is_err());
        assert!(unseal("").is_err());
    }
}
