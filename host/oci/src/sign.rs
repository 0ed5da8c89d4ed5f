//! cosign signatures in the layout cosign verifies offline with a key
//! (`cosign verify --key KEY --insecure-ignore-tlog`): beside the signed
//! manifest, under the tag `sha256-<hex>.sig` of the same repository, an OCI
//! manifest with one `application/vnd.dev.cosign.simplesigning.v1+json`
//! layer per signature. The layer is cosign's "simple signing" payload,
//! naming the manifest's digest; its annotation
//! `dev.cosignproject.cosign/signature` is the base64 of an ECDSA P-256
//! SHA-256 signature (DER) over the payload's exact bytes.
//!
//! [`verify`] trusts nothing in the registry but those bytes: a signature
//! counts only if it verifies with one of the operator's keys and its
//! payload names the very digest being installed.
//!
//! Signing keys are read as PEM, unencrypted ([`SigningKey::from_pem`]) or
//! as `cosign generate-key-pair` writes them ([`SigningKey::from_encrypted_pem`]).

use super::{Artifact, Auth, Error, OciRef, Options, Session, sha256};
use base64::Engine as _;
use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::pkcs8::{DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding};
use std::collections::BTreeMap;

/// The media type of a signature layer (cosign's simple signing payload).
pub const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation that holds the signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The config media type of a signature manifest.
const SIGNATURE_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// The most signatures read for one manifest.
const MAX_SIGNATURES: usize = 32;
/// The most a signature payload may be.
const MAX_PAYLOAD: u64 = 64 << 10;
/// The PEM labels of cosign's encrypted private keys (`SIGSTORE` since
/// cosign 1.13, `COSIGN` before).
const COSIGN_LABELS: [&str; 2] = [
    "ENCRYPTED SIGSTORE PRIVATE KEY",
    "ENCRYPTED COSIGN PRIVATE KEY",
];
/// The most memory an encrypted key's scrypt parameters may ask for
/// (cosign asks for 64 MiB: N = 2^16, r = 8).
const MAX_SCRYPT_MEMORY: u64 = 256 << 20;
/// The most passes an encrypted key's scrypt parameters may ask for, each
/// as long as the first (cosign asks for one).
const MAX_SCRYPT_P: u32 = 16;

/// A private key that signs published tools: ECDSA on P-256.
pub struct SigningKey(p256::ecdsa::SigningKey);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SigningKey({}, [private])",
            self.public_key().fingerprint()
        )
    }
}

impl SigningKey {
    /// A new key, from the operating system's random source.
    pub fn generate() -> Result<SigningKey, String> {
        loop {
            let mut bytes = [0u8; 32];
            getrandom::fill(&mut bytes).map_err(|e| format!("no random source: {e}"))?;
            // A value at or over the curve's order (about 2^-32 of them) is
            // not a key: draw again.
            if let Ok(key) = p256::ecdsa::SigningKey::from_bytes(&bytes.into()) {
                return Ok(SigningKey(key));
            }
        }
    }

    /// Reads a PEM private key: PKCS#8 (`BEGIN PRIVATE KEY`, as `airlock
    /// keygen` and `openssl genpkey` write it) or SEC1 (`BEGIN EC PRIVATE
    /// KEY`), on P-256.
    pub fn from_pem(text: &str) -> Result<SigningKey, String> {
        use p256::pkcs8::DecodePrivateKey;
        if SigningKey::is_encrypted(text) {
            return Err(
                "it is an encrypted key (as `cosign generate-key-pair` writes): \
                 it opens only with its password"
                    .into(),
            );
        }
        if text.contains("ENCRYPTED") {
            return Err(
                "it is an encrypted PKCS#8 key; give an unencrypted one (as `airlock \
                 keygen` writes) or a cosign key"
                    .into(),
            );
        }
        if let Ok(key) = p256::ecdsa::SigningKey::from_pkcs8_pem(text) {
            return Ok(SigningKey(key));
        }
        p256::SecretKey::from_sec1_pem(text)
            .map(|k| SigningKey(k.into()))
            .map_err(|_| "it is not a PEM private key on the P-256 curve".into())
    }

    /// Whether `text` is a private key as `cosign generate-key-pair` writes
    /// it, which [`SigningKey::from_encrypted_pem`] opens with its password.
    pub fn is_encrypted(text: &str) -> bool {
        COSIGN_LABELS
            .iter()
            .any(|label| text.contains(&format!("-----BEGIN {label}-----")))
    }

    /// Opens a private key as `cosign generate-key-pair` writes it: JSON in
    /// PEM, holding the PKCS#8 P-256 key sealed with NaCl's secretbox
    /// (XSalsa20-Poly1305) under a key that scrypt derives from
    /// `password` (cosign reads it from `COSIGN_PASSWORD`, and it may be
    /// empty). A wrong password is told apart from a damaged key only in
    /// that the seal does not open; the derived key and the PKCS#8 bytes
    /// are wiped after use.
    ///
    /// ```
    /// use airlock_oci::SigningKey;
    ///
    /// let pem = include_str!("../tests/fixtures/cosign-qwerty.key");
    /// assert!(SigningKey::is_encrypted(pem));
    /// assert!(SigningKey::from_encrypted_pem(pem, b"qwerty").is_ok());
    /// assert!(SigningKey::from_encrypted_pem(pem, b"querty").is_err());
    /// ```
    pub fn from_encrypted_pem(text: &str, password: &[u8]) -> Result<SigningKey, String> {
        use crypto_secretbox::aead::{Aead, KeyInit};
        use p256::pkcs8::DecodePrivateKey;
        use p256::pkcs8::der::pem;
        use zeroize::Zeroizing;

        #[derive(serde::Deserialize)]
        struct Sealed {
            kdf: Kdf,
            cipher: Cipher,
            ciphertext: String,
        }
        #[derive(serde::Deserialize)]
        struct Kdf {
            name: String,
            params: Cost,
            salt: String,
        }
        #[derive(serde::Deserialize)]
        struct Cost {
            #[serde(rename = "N")]
            n: u64,
            r: u32,
            p: u32,
        }
        #[derive(serde::Deserialize)]
        struct Cipher {
            name: String,
            nonce: String,
        }

        let (label, json) = pem::decode_vec(text.trim().as_bytes())
            .map_err(|e| format!("it is not a PEM key ({e})"))?;
        if !COSIGN_LABELS.contains(&label) {
            return Err(format!(
                "it is a PEM `{label}`, not a key as `cosign generate-key-pair` writes it"
            ));
        }
        let sealed: Sealed = serde_json::from_slice(&json)
            .map_err(|e| format!("its sealed key is not cosign's JSON ({e})"))?;
        if sealed.kdf.name != "scrypt" || sealed.cipher.name != "nacl/secretbox" {
            return Err(format!(
                "it is sealed with {} and {}; only cosign's scrypt and nacl/secretbox are read",
                sealed.kdf.name, sealed.cipher.name
            ));
        }
        let Cost { n, r, p } = sealed.kdf.params;
        let memory = 128u64.saturating_mul(u64::from(r)).saturating_mul(n);
        if !n.is_power_of_two() || n < 2 || memory > MAX_SCRYPT_MEMORY || p > MAX_SCRYPT_P {
            return Err(format!(
                "its scrypt cost (N = {n}, r = {r}, p = {p}) is not one cosign writes \
                 (N a power of two, at most {} MiB, p at most {MAX_SCRYPT_P})",
                MAX_SCRYPT_MEMORY >> 20
            ));
        }
        let log_n = u8::try_from(n.trailing_zeros()).expect("a u64 has at most 64 bits");
        let params = scrypt::Params::new(log_n, r, p, 32)
            .map_err(|e| format!("its scrypt parameters are not usable ({e})"))?;
        let decode = |what: &str, b64: &str| {
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| format!("its {what} is not base64 ({e})"))
        };
        let salt = decode("salt", &sealed.kdf.salt)?;
        let nonce = decode("nonce", &sealed.cipher.nonce)?;
        let ciphertext = decode("ciphertext", &sealed.ciphertext)?;
        let nonce: [u8; 24] = nonce
            .try_into()
            .map_err(|_| "its nonce is not 24 bytes".to_string())?;
        let mut key = Zeroizing::new([0u8; 32]);
        scrypt::scrypt(password, &salt, &params, key.as_mut())
            .map_err(|e| format!("scrypt failed ({e})"))?;
        let der = Zeroizing::new(
            crypto_secretbox::XSalsa20Poly1305::new(&(*key).into())
                .decrypt(&nonce.into(), ciphertext.as_slice())
                .map_err(|_| "the password does not open it (or the key is damaged)".to_string())?,
        );
        p256::ecdsa::SigningKey::from_pkcs8_der(&der)
            .map(SigningKey)
            .map_err(|_| "it opened, but holds no PKCS#8 private key on the P-256 curve".into())
    }

    /// The key as PKCS#8 PEM.
    pub fn to_pem(&self) -> Result<String, String> {
        self.0
            .to_pkcs8_pem(LineEnding::LF)
            .map(|pem| pem.to_string())
            .map_err(|e| e.to_string())
    }

    /// Its public half.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(*self.0.verifying_key())
    }
}

/// A public key the operator trusts to sign tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey(p256::ecdsa::VerifyingKey);

impl PublicKey {
    /// Reads a PEM public key (`BEGIN PUBLIC KEY`, as `cosign.pub` and
    /// `airlock keygen`'s `.pub` hold it) on P-256.
    pub fn from_pem(text: &str) -> Result<PublicKey, String> {
        p256::ecdsa::VerifyingKey::from_public_key_pem(text)
            .map(PublicKey)
            .map_err(|_| "it is not a PEM public key on the P-256 curve".into())
    }

    /// The key as PEM.
    pub fn to_pem(&self) -> String {
        self.0
            .to_public_key_pem(LineEnding::LF)
            .expect("a P-256 public key encodes")
    }

    /// `sha256:` and the hex SHA-256 of the key's DER encoding: how the
    /// key is named in `airlock.lock` and `airlock tools`.
    pub fn fingerprint(&self) -> String {
        let der = self
            .0
            .to_public_key_der()
            .expect("a P-256 public key encodes");
        sha256(der.as_bytes())
    }
}

/// What the registry holds for a manifest, judged against trusted keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A signature by `keys[key]` over the manifest's digest verified.
    Signed {
        /// The index of the key in the list given to [`verify`].
        key: usize,
    },
    /// The registry holds no signature for the manifest.
    Unsigned,
    /// It holds `count` signatures, none of them by a trusted key over
    /// this manifest's digest.
    Untrusted {
        /// How many signatures were read.
        count: usize,
    },
}

/// The tag under which signatures of the manifest `digest` live.
fn signature_tag(reference: &OciRef, digest: &str) -> Result<OciRef, Error> {
    let tag = format!("{}.sig", digest.replacen(':', "-", 1));
    let text = format!(
        "oci://{}/{}:{tag}",
        reference.registry(),
        reference.repository()
    );
    OciRef::parse(&text)
}

/// cosign's simple signing payload for `artifact`, as it signs it.
fn payload(artifact: &Artifact) -> Vec<u8> {
    let pinned = &artifact.pinned;
    // serde_json writes keys sorted, which is cosign's order too.
    let payload = serde_json::json!({
        "critical": {
            "identity": {
                "docker-reference": format!("{}/{}", pinned.registry(), pinned.repository())
            },
            "image": {"docker-manifest-digest": artifact.manifest_digest},
            "type": "cosign container image signature",
        },
        "optional": null,
    });
    serde_json::to_vec(&payload).expect("a JSON value serialises")
}

/// One signature layer as the registry holds it.
struct Found {
    /// The payload's exact bytes.
    payload: Vec<u8>,
    /// The signature (DER), decoded from its annotation.
    signature: Vec<u8>,
    /// The layer's annotations, kept when a signature is added beside it.
    annotations: BTreeMap<String, String>,
}

/// The signatures held at `at` (a signature tag), read and checked
/// against their descriptors.
async fn signatures(session: &Session<'_>, at: &OciRef) -> Result<Vec<Found>, Error> {
    let Some(raw) = session.manifest(at).await? else {
        return Ok(Vec::new());
    };
    let manifest: OciImageManifest = serde_json::from_slice(&raw).map_err(|e| Error::Layout {
        reference: at.to_string(),
        why: format!("its signature manifest is not an OCI image manifest: {e}"),
    })?;
    let mut found = Vec::new();
    for layer in manifest
        .layers
        .iter()
        .filter(|l| l.media_type == SIMPLE_SIGNING)
        .take(MAX_SIGNATURES)
    {
        let annotations = layer.annotations.clone().unwrap_or_default();
        let Some(signature) = annotations
            .get(SIGNATURE_ANNOTATION)
            .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        else {
            continue;
        };
        let payload = session.blob(at, layer, MAX_PAYLOAD).await?;
        found.push(Found {
            payload,
            signature,
            annotations,
        });
    }
    Ok(found)
}

/// Whether `payload` is a simple signing payload naming `digest`.
fn names_digest(payload: &[u8], digest: &str) -> bool {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(payload) else {
        return false;
    };
    let critical = &value["critical"];
    critical["type"] == "cosign container image signature"
        && critical["image"]["docker-manifest-digest"] == digest
}

/// Whether `signature` (DER) is `key`'s over `payload`.
fn verifies(key: &PublicKey, payload: &[u8], signature: &[u8]) -> bool {
    p256::ecdsa::DerSignature::from_bytes(signature)
        .ok()
        .and_then(|der| p256::ecdsa::Signature::from_der(der.as_bytes()).ok())
        .is_some_and(|sig| key.0.verify(payload, &sig).is_ok())
}

/// Signs the published `artifact` with `key`, adding the signature to
/// those the registry already holds for it; returns the signature tag.
pub async fn sign(
    artifact: &Artifact,
    key: &SigningKey,
    auth: &Auth,
    options: &Options,
) -> Result<OciRef, Error> {
    let at = signature_tag(&artifact.pinned, &artifact.manifest_digest)?;
    let session = Session::open(&artifact.pinned, auth, options)?;
    session
        .within(async {
            let public = key.public_key();
            let mut layers = Vec::new();
            for Found {
                payload,
                signature,
                annotations,
            } in signatures(&session, &at).await?
            {
                if verifies(&public, &payload, &signature) {
                    // Signed by this key already.
                    return Ok(at.clone());
                }
                layers.push(ImageLayer::new(
                    payload,
                    SIMPLE_SIGNING.to_string(),
                    Some(annotations),
                ));
            }
            let payload = payload(artifact);
            let signature: p256::ecdsa::Signature = key.0.sign(&payload);
            let encoded =
                base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes());
            layers.push(ImageLayer::new(
                payload,
                SIMPLE_SIGNING.to_string(),
                Some(BTreeMap::from([(
                    SIGNATURE_ANNOTATION.to_string(),
                    encoded,
                )])),
            ));
            let config = Config::new(b"{}".to_vec(), SIGNATURE_CONFIG.to_string(), None);
            let mut manifest = OciImageManifest::build(&layers, &config, None);
            manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_string());
            session
                .client
                .push(&at.0, &layers, config, &session.auth, Some(manifest))
                .await
                .map_err(|e| session.registry_error(super::with_causes(&e)))?;
            Ok(at.clone())
        })
        .await
}

/// Judges the signatures the registry holds for `artifact` against `keys`.
pub async fn verify(
    artifact: &Artifact,
    keys: &[PublicKey],
    auth: &Auth,
    options: &Options,
) -> Result<Verdict, Error> {
    let at = signature_tag(&artifact.pinned, &artifact.manifest_digest)?;
    let session = Session::open(&artifact.pinned, auth, options)?;
    let found = session.within(signatures(&session, &at)).await?;
    if found.is_empty() {
        return Ok(Verdict::Unsigned);
    }
    for f in &found {
        if !names_digest(&f.payload, &artifact.manifest_digest) {
            continue;
        }
        if let Some(key) = keys
            .iter()
            .position(|k| verifies(k, &f.payload, &f.signature))
        {
            return Ok(Verdict::Signed { key });
        }
    }
    Ok(Verdict::Untrusted { count: found.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn artifact(digest: &str) -> Artifact {
        let pinned = OciRef::parse("oci://127.0.0.1:5000/acme/wc:1.0.0")
            .unwrap()
            .pinned(digest);
        Artifact {
            pinned,
            manifest_digest: digest.to_string(),
            layer_digest: String::new(),
        }
    }

    #[test]
    fn a_signature_verifies_with_its_key_over_its_digest_only() {
        let key = SigningKey::generate().unwrap();
        let other = SigningKey::generate().unwrap();
        let digest = format!("sha256:{}", "ab".repeat(32));
        let payload = payload(&artifact(&digest));
        assert!(names_digest(&payload, &digest));
        assert!(!names_digest(
            &payload,
            &format!("sha256:{}", "cd".repeat(32))
        ));
        let signature: p256::ecdsa::Signature = key.0.sign(&payload);
        let der = signature.to_der().as_bytes().to_vec();
        assert!(verifies(&key.public_key(), &payload, &der));
        assert!(!verifies(&other.public_key(), &payload, &der));
        let mut changed = payload.clone();
        changed[0] ^= 1;
        assert!(!verifies(&key.public_key(), &changed, &der));
        assert!(!verifies(&key.public_key(), &payload, b"not der"));
    }

    #[test]
    fn keys_round_trip_through_pem_and_encrypted_ones_are_named() {
        let key = SigningKey::generate().unwrap();
        let pem = key.to_pem().unwrap();
        let again = SigningKey::from_pem(&pem).unwrap();
        assert_eq!(again.public_key(), key.public_key());
        let public = PublicKey::from_pem(&key.public_key().to_pem()).unwrap();
        assert_eq!(public.fingerprint(), key.public_key().fingerprint());
        assert!(public.fingerprint().starts_with("sha256:"));
        let encrypted = "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAA==\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n";
        assert!(SigningKey::is_encrypted(encrypted));
        assert!(
            SigningKey::from_pem(encrypted)
                .unwrap_err()
                .contains("password")
        );
        let pkcs8 =
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAA==\n-----END ENCRYPTED PRIVATE KEY-----\n";
        assert!(!SigningKey::is_encrypted(pkcs8));
        assert!(SigningKey::from_pem(pkcs8).unwrap_err().contains("PKCS#8"));
        assert!(PublicKey::from_pem(&pem).is_err());
        assert!(SigningKey::from_pem("garbage").is_err());
    }

    /// Keys `cosign generate-key-pair` made (tests/fixtures/README.md).
    #[test]
    fn cosigns_encrypted_keys_open_with_their_password_only() {
        let qwerty = include_str!("../tests/fixtures/cosign-qwerty.key");
        let public = PublicKey::from_pem(include_str!("../tests/fixtures/cosign-qwerty.pub"))
            .expect("cosign's public key");
        let key = SigningKey::from_encrypted_pem(qwerty, b"qwerty").expect("the right password");
        assert_eq!(key.public_key(), public, "the private half of cosign.pub");
        let payload = payload(&artifact(&format!("sha256:{}", "cd".repeat(32))));
        let signature: p256::ecdsa::Signature = key.0.sign(&payload);
        assert!(verifies(&public, &payload, signature.to_der().as_bytes()));
        for wrong in [&b"Qwerty"[..], b"", b"qwerty "] {
            let e = SigningKey::from_encrypted_pem(qwerty, wrong).unwrap_err();
            assert!(e.contains("password does not open it"), "{e}");
        }
        assert!(
            SigningKey::from_pem(qwerty)
                .unwrap_err()
                .contains("password")
        );

        let empty = include_str!("../tests/fixtures/cosign-empty-password.key");
        assert!(SigningKey::is_encrypted(empty));
        assert!(SigningKey::from_encrypted_pem(empty, b"").is_ok());
        assert!(SigningKey::from_encrypted_pem(empty, b"qwerty").is_err());
    }

    /// What an encrypted key may hold that is not a key cosign writes.
    #[test]
    fn damaged_or_costly_encrypted_keys_are_refused_with_the_reason() {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let pem = |label: &str, json: &serde_json::Value| {
            let body = b64(json.to_string().as_bytes());
            let lines: Vec<&str> = body
                .as_bytes()
                .chunks(64)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect();
            format!(
                "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
                lines.join("\n")
            )
        };
        let sealed = |n: u64, kdf: &str, nonce: &[u8], ciphertext: &[u8]| {
            serde_json::json!({
                "kdf": {"name": kdf, "params": {"N": n, "r": 8, "p": 1}, "salt": b64(b"salt")},
                "cipher": {"name": "nacl/secretbox", "nonce": b64(nonce)},
                "ciphertext": b64(ciphertext),
            })
        };
        let label = "ENCRYPTED SIGSTORE PRIVATE KEY";
        let refused = |text: String| SigningKey::from_encrypted_pem(&text, b"").unwrap_err();
        let costly = refused(pem(label, &sealed(1 << 30, "scrypt", &[0; 24], &[0; 48])));
        assert!(costly.contains("scrypt cost"), "{costly}");
        let mut slow = sealed(16, "scrypt", &[0; 24], &[0; 48]);
        slow["kdf"]["params"]["p"] = serde_json::json!(1 << 20);
        let slow = refused(pem(label, &slow));
        assert!(slow.contains("p = 1048576"), "{slow}");
        let odd = refused(pem(label, &sealed(3, "scrypt", &[0; 24], &[0; 48])));
        assert!(odd.contains("scrypt cost"), "{odd}");
        let other = refused(pem(label, &sealed(16, "argon2", &[0; 24], &[0; 48])));
        assert!(other.contains("argon2"), "{other}");
        let nonce = refused(pem(label, &sealed(16, "scrypt", &[0; 12], &[0; 48])));
        assert!(nonce.contains("24 bytes"), "{nonce}");
        let sealed_wrong = refused(pem(label, &sealed(16, "scrypt", &[0; 24], &[0; 48])));
        assert!(sealed_wrong.contains("does not open"), "{sealed_wrong}");
        let not_json = refused(pem(label, &serde_json::json!("a string")));
        assert!(not_json.contains("not cosign's JSON"), "{not_json}");
        let key = SigningKey::generate().unwrap().to_pem().unwrap();
        assert!(refused(key).contains("PRIVATE KEY`, not a key"));
    }

    #[test]
    fn signatures_live_beside_the_manifest_under_cosigns_tag() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let at = signature_tag(&artifact(&digest).pinned, &digest).unwrap();
        assert_eq!(
            at.to_string(),
            format!(
                "oci://127.0.0.1:5000/acme/wc:sha256-{}.sig",
                "ab".repeat(32)
            )
        );
    }
}
