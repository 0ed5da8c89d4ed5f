//! What requiring access tokens costs a request to `airlock mcp --http`:
//! [`Authenticator::check`] of an `Authorization` header, with the JWKS
//! already held (a file), for RS256 (the RSA key of the CLI tests'
//! fixtures) and ES256 (a fresh P-256 key).
//!
//! - `auth/{rs256,es256}/repeated`: the same token again, as a client
//!   sends it with every request until it expires (the verified-token
//!   cache).
//! - `auth/{rs256,es256}/first`: a token not seen before (tokens cycle
//!   through more than the cache holds): the signature and claims checked.
//! - `auth/{rs256,es256}/decode`: `jsonwebtoken::decode` alone with the same
//!   key and validation, the floor of a first check.
//!
//! Run with `cargo bench -p airlock-mcp --bench auth`.

use airlock_host::config::AuthConfig;
use airlock_mcp::auth::Authenticator;
use base64::Engine as _;
use criterion::{Criterion, criterion_group, criterion_main};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use std::hint::black_box;

const RESOURCE: &str = "https://mcp.bench/mcp";
const ISSUER: &str = "https://auth.bench";
/// More than the authenticator remembers, so that each is a first check.
const DISTINCT: usize = 5000;

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A signing key and its JWK.
struct Key {
    alg: Algorithm,
    encoding: EncodingKey,
    jwk: serde_json::Value,
}

fn rsa() -> Key {
    let der = include_bytes!("../../cli/tests/fixtures/auth-test-rsa.der");
    let pair = ring::signature::RsaKeyPair::from_der(der).expect("the test key");
    let public: ring::rsa::PublicKeyComponents<Vec<u8>> = pair.public().into();
    Key {
        alg: Algorithm::RS256,
        encoding: EncodingKey::from_rsa_der(der),
        jwk: serde_json::json!({"kty": "RSA", "kid": "rs256", "alg": "RS256",
                                "n": b64url(&public.n), "e": b64url(&public.e)}),
    }
}

fn ec() -> Key {
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("key");
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .expect("key");
    let point = pair.public_key().as_ref();
    Key {
        alg: Algorithm::ES256,
        encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
        jwk: serde_json::json!({"kty": "EC", "crv": "P-256", "kid": "es256", "alg": "ES256",
                                "x": b64url(&point[1..33]), "y": b64url(&point[33..65])}),
    }
}

fn token(key: &Key, n: usize) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    let claims = serde_json::json!({"iss": ISSUER, "aud": RESOURCE, "sub": format!("user-{n}"),
                                    "exp": now + 3600, "scope": "mcp:tools"});
    let mut header = Header::new(key.alg);
    header.kid = key.jwk["kid"].as_str().map(str::to_owned);
    jsonwebtoken::encode(&header, &claims, &key.encoding).expect("signed")
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let dir = tempfile::tempdir().expect("a temp dir");
    let (rsa, ec) = (rsa(), ec());
    let jwks = dir.path().join("jwks.json");
    std::fs::write(
        &jwks,
        serde_json::json!({"keys": [rsa.jwk, ec.jwk]}).to_string(),
    )
    .expect("written");
    let config = AuthConfig {
        resource: RESOURCE.into(),
        issuers: vec![ISSUER.into()],
        jwks_url: None,
        jwks_file: Some(jwks),
        algorithms: vec!["RS256".into(), "ES256".into()],
        scopes: vec!["mcp:tools".into()],
        tool_scopes: Default::default(),
        leeway_secs: 30,
        jwks_refresh_secs: 30,
    };
    let auth = runtime
        .block_on(Authenticator::new(&config))
        .expect("the authenticator");
    let mut group = c.benchmark_group("auth");
    for (name, key) in [("rs256", &rsa), ("es256", &ec)] {
        let header = |t: &str| http::HeaderValue::from_str(&format!("Bearer {t}")).expect("ASCII");
        let one = header(&token(key, 0));
        group.bench_function(format!("{name}/repeated"), |b| {
            b.iter(|| {
                runtime
                    .block_on(auth.check(Some(black_box(&one))))
                    .expect("valid")
            })
        });
        let many: Vec<_> = (1..=DISTINCT).map(|n| header(&token(key, n))).collect();
        let mut next = many.iter().cycle();
        group.bench_function(format!("{name}/first"), |b| {
            b.iter(|| {
                let h = next.next().expect("endless");
                runtime
                    .block_on(auth.check(Some(black_box(h))))
                    .expect("valid")
            })
        });
        let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(key.jwk.clone()).expect("a JWK");
        let decoding = jsonwebtoken::DecodingKey::from_jwk(&jwk).expect("a key");
        let mut validation = jsonwebtoken::Validation::new(key.alg);
        validation.set_audience(&[RESOURCE]);
        validation.set_issuer(&[ISSUER]);
        let raw = token(key, 0);
        group.bench_function(format!("{name}/decode"), |b| {
            b.iter(|| {
                jsonwebtoken::decode::<serde_json::Value>(black_box(&raw), &decoding, &validation)
                    .expect("valid")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
