//! `airlock mcp --http` as an OAuth 2.1 resource server (MCP's
//! authorization spec): a request to `/mcp` needs a JWT access token,
//! verified here against the configured JWKS; the protected resource
//! metadata (RFC 9728) tells a client where to get one.
//!
//! [`Authenticator::check`] takes an `Authorization` header to an
//! [`Identity`] or a [`Rejection`], which [`Authenticator::challenge`]
//! turns into the 401 or 403 the spec asks for. The token itself is never
//! logged, kept, or handed on: the front end removes the header before the
//! request goes further. Knows nothing of sessions, tools or rmcp.

use airlock_host::config::AuthConfig;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The largest token taken, in bytes.
pub const MAX_TOKEN_BYTES: usize = 8 << 10;
/// How long a JWKS fetch may take.
const JWKS_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest JWKS taken, in bytes.
const MAX_JWKS_BYTES: usize = 1 << 20;
/// How long keys fetched from a URL are trusted before the next token
/// fetches them again (a key the authorization server retired goes).
const MAX_KEY_AGE: Duration = Duration::from_secs(600);
/// Tokens remembered as verified (a client sends the same token with
/// every request until it expires).
const VERIFIED_TOKENS: usize = 4096;

/// Who a verified token speaks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The token's `iss`.
    pub issuer: String,
    /// The token's `sub`.
    pub subject: String,
    /// The OAuth client it was issued to (`client_id`, else `azp`).
    pub client_id: Option<String>,
    /// Its scopes.
    pub scopes: Vec<String>,
}

impl Identity {
    /// Who this is, as a tool use records it.
    pub fn caller(&self) -> airlock_host::Caller {
        airlock_host::Caller {
            subject: self.subject.clone(),
            client_id: self.client_id.clone(),
        }
    }

    /// A short key naming this caller (its issuer and subject) and no
    /// other: what its own contexts (its default one and those it created)
    /// and its sessions are bound to.
    pub fn key(&self) -> String {
        let mut hasher = blake3::Hasher::new();
        hasher.update(self.issuer.as_bytes());
        hasher.update(&[0]);
        hasher.update(self.subject.as_bytes());
        hasher.finalize().to_hex()[..32].to_string()
    }
}

/// Why a request was not let through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// No `Authorization` header: 401, no error code (RFC 6750 §3.1).
    Missing,
    /// An `Authorization: Bearer` header that is not well formed: 400
    /// `invalid_request` (RFC 6750 §3.1), with what was wrong.
    Malformed(String),
    /// A token that fails verification: 401 `invalid_token`, with what
    /// was wrong.
    Invalid(String),
    /// A valid token without the scopes needed (these): 403
    /// `insufficient_scope`.
    InsufficientScope(Vec<String>),
}

/// The tools one caller may see and call, by its scopes
/// (`[auth.tool_scopes]`): the union of what each of its scopes gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolView {
    /// Per scope the caller holds: tool names (`*`: all), and whether only
    /// tools declared read-only.
    grants: Vec<(Vec<String>, bool)>,
}

impl ToolView {
    /// Whether the caller may see and call the tool `d` describes.
    pub fn allows(&self, d: &airlock_host::Descriptor) -> bool {
        self.grants
            .iter()
            .any(|(tools, read_only)| grants(tools, *read_only, d))
    }
}

/// Whether a scope giving `tools` (read-only when `read_only`) gives `d`.
fn grants(tools: &[String], read_only: bool, d: &airlock_host::Descriptor) -> bool {
    tools.iter().any(|t| t == "*" || *t == d.name)
        && (!read_only || d.flags.contains(airlock_host::SafetyFlags::READ_ONLY))
}

/// The keys of the JWKS, by key id.
#[derive(Default)]
struct Keys {
    by_id: HashMap<String, (Jwk, DecodingKey)>,
    /// Keys without an id (taken when the token names none).
    anonymous: Vec<(Jwk, DecodingKey)>,
    /// When they were fetched from the URL.
    fetched: Option<Instant>,
}

/// Verifies access tokens for one server.
pub struct Authenticator {
    config: AuthConfig,
    algorithms: Vec<Algorithm>,
    /// Where the protected resource metadata is, for the challenge.
    metadata_url: String,
    /// The paths it is served at ([`Authenticator::metadata_paths`]).
    metadata_paths: [String; 2],
    keys: tokio::sync::RwLock<Keys>,
    /// One fetch at a time; the time of the last one.
    refresh: tokio::sync::Mutex<Option<Instant>>,
    client: Option<reqwest::Client>,
    /// Fetch failures are logged once per cause, not per request.
    last_failure: Mutex<Option<String>>,
    /// Tokens already verified, by their BLAKE3, with their `exp`: checked
    /// again only for expiry. Emptied whenever the keys change.
    verified: Mutex<Verified>,
}

/// The verified tokens, and the generation of the keys they were verified
/// with: a check that began under older keys does not add its token.
struct Verified {
    generation: u64,
    /// When the keys were last fetched from the URL (`None` for a file):
    /// past [`MAX_KEY_AGE`], a remembered token is checked again, which
    /// fetches the keys again.
    fetched: Option<Instant>,
    tokens: lru::LruCache<[u8; 32], (Identity, u64)>,
}

#[derive(Deserialize)]
struct Claims {
    iss: String,
    exp: u64,
    /// Required (`set_required_spec_claims`): checked after this is read.
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    azp: Option<String>,
    #[serde(default)]
    scope: Option<ScopeClaim>,
    #[serde(default)]
    scp: Option<ScopeClaim>,
}

/// A scope claim: a space-separated string (RFC 8693, and Entra ID's
/// `scp`) or an array.
#[derive(Deserialize)]
#[serde(untagged)]
enum ScopeClaim {
    Text(String),
    List(Vec<String>),
}

impl ScopeClaim {
    fn into_vec(self) -> Vec<String> {
        match self {
            ScopeClaim::Text(text) => text.split_whitespace().map(str::to_string).collect(),
            ScopeClaim::List(list) => list,
        }
    }
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("resource", &self.config.resource)
            .field("issuers", &self.config.issuers)
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Checks `config` and reads a JWKS file; a JWKS URL is fetched by
    /// [`Authenticator::warm`] or by the first token that needs it.
    pub async fn new(config: &AuthConfig) -> anyhow::Result<Authenticator> {
        let resource = reqwest::Url::parse(&config.resource).map_err(|e| {
            anyhow::anyhow!("auth.resource: {:?} is not a URL: {e}", config.resource)
        })?;
        if !matches!(resource.scheme(), "https" | "http") || resource.host_str().is_none() {
            anyhow::bail!("auth.resource: {:?} is not an http(s) URL", config.resource);
        }
        if resource.fragment().is_some() {
            anyhow::bail!("auth.resource: a resource URI has no fragment (RFC 8707)");
        }
        if config.issuers.is_empty() {
            anyhow::bail!("auth.issuers: name the authorization servers whose tokens are taken");
        }
        let mut algorithms = Vec::new();
        for name in &config.algorithms {
            let algorithm = Algorithm::from_str(name)
                .ok()
                .filter(|a| !matches!(a, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512))
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "auth.algorithms: {name:?} is not taken (RS256, RS384, RS512, PS256, \
                         PS384, PS512, ES256, ES384, EdDSA; never none or an HMAC, whose key \
                         would have to be shared)"
                    )
                })?;
            algorithms.push(algorithm);
        }
        if algorithms.is_empty() {
            anyhow::bail!("auth.algorithms: name at least one");
        }
        let client = match (&config.jwks_url, &config.jwks_file) {
            (Some(url), None) => {
                let parsed = reqwest::Url::parse(url)
                    .map_err(|e| anyhow::anyhow!("auth.jwks_url: {url:?}: {e}"))?;
                let loopback = parsed.host_str().is_some_and(|h| {
                    h == "localhost"
                        || h.trim_start_matches('[')
                            .trim_end_matches(']')
                            .parse::<std::net::IpAddr>()
                            .is_ok_and(|ip| ip.is_loopback())
                });
                if parsed.scheme() != "https" && !(parsed.scheme() == "http" && loopback) {
                    anyhow::bail!(
                        "auth.jwks_url: {url:?} must be HTTPS (plain HTTP only to a loopback host)"
                    );
                }
                let _ = rustls::crypto::ring::default_provider().install_default();
                Some(
                    reqwest::Client::builder()
                        .timeout(JWKS_TIMEOUT)
                        .redirect(reqwest::redirect::Policy::none())
                        .build()?,
                )
            }
            (None, Some(_)) => None,
            _ => anyhow::bail!("auth: give exactly one of `jwks_url` and `jwks_file`"),
        };
        let mut metadata_url = resource.clone();
        let path = resource.path().trim_end_matches('/');
        metadata_url.set_path(&format!("/.well-known/oauth-protected-resource{path}"));
        metadata_url.set_query(None);
        let auth = Authenticator {
            config: config.clone(),
            algorithms,
            metadata_paths: [
                metadata_url.path().to_string(),
                "/.well-known/oauth-protected-resource".into(),
            ],
            metadata_url: metadata_url.to_string(),
            keys: tokio::sync::RwLock::default(),
            refresh: tokio::sync::Mutex::default(),
            client,
            last_failure: Mutex::default(),
            verified: Mutex::new(Verified {
                generation: 0,
                fetched: None,
                tokens: lru::LruCache::new(
                    std::num::NonZeroUsize::new(VERIFIED_TOKENS).expect("not zero"),
                ),
            }),
        };
        if let Some(file) = &config.jwks_file {
            let text = std::fs::read(file)
                .map_err(|e| anyhow::anyhow!("auth.jwks_file: {}: {e}", file.display()))?;
            let keys = parse_jwks(&text)
                .map_err(|e| anyhow::anyhow!("auth.jwks_file: {}: {e}", file.display()))?;
            *auth.keys.write().await = keys;
        }
        Ok(auth)
    }

    /// The paths the protected resource metadata is served at: the one
    /// RFC 9728 derives from the resource URI, and the bare one.
    pub fn metadata_paths(&self) -> &[String; 2] {
        &self.metadata_paths
    }

    /// The protected resource metadata (RFC 9728).
    pub fn metadata(&self) -> serde_json::Value {
        let mut metadata = serde_json::json!({
            "resource": self.config.resource,
            "authorization_servers": self.config.issuers,
            "bearer_methods_supported": ["header"],
        });
        let supported = self.supported_scopes();
        if !supported.is_empty() {
            metadata["scopes_supported"] = serde_json::json!(supported);
        }
        metadata
    }

    /// Every scope this server knows: those every token needs, then those
    /// that give tools.
    fn supported_scopes(&self) -> Vec<String> {
        let mut scopes = self.config.scopes.clone();
        scopes.extend(self.config.tool_scopes.keys().cloned());
        scopes
    }

    /// What `identity` may see and call: `None` when no scope decides it
    /// (every tool).
    pub fn view(&self, identity: &Identity) -> Option<ToolView> {
        if self.config.tool_scopes.is_empty() {
            return None;
        }
        Some(ToolView {
            grants: self
                .config
                .tool_scopes
                .iter()
                .filter(|(scope, _)| identity.scopes.contains(scope))
                .map(|(_, given)| (given.tools.clone(), given.read_only))
                .collect(),
        })
    }

    /// The first of the tool scopes that gives the tool `d` describes:
    /// what a caller without it would need to call it (step-up). `None`
    /// when no scope gives it: then no caller sees or calls it.
    pub fn scope_for(&self, d: &airlock_host::Descriptor) -> Option<&str> {
        self.config
            .tool_scopes
            .iter()
            .find(|(_, given)| grants(&given.tools, given.read_only, d))
            .map(|(scope, _)| scope.as_str())
    }

    /// The refusal of a call that needs the tool scope `scope`: its
    /// challenge lists the scopes every token needs and `scope`, all of
    /// them needed (RFC 6750 §3).
    pub fn step_up(&self, scope: &str) -> Rejection {
        let mut scopes = self.config.scopes.clone();
        scopes.push(scope.to_string());
        Rejection::InsufficientScope(scopes)
    }

    /// The `WWW-Authenticate` value for `rejection` (RFC 6750 §3, with
    /// RFC 9728's `resource_metadata`).
    pub fn challenge(&self, rejection: &Rejection) -> String {
        let mut value = format!("Bearer resource_metadata=\"{}\"", self.metadata_url);
        let scopes = match rejection {
            Rejection::InsufficientScope(needed) => needed.clone(),
            _ => self.supported_scopes(),
        };
        if !scopes.is_empty() {
            value.push_str(&format!(", scope=\"{}\"", scopes.join(" ")));
        }
        match rejection {
            Rejection::Missing => {}
            Rejection::Malformed(why) => value.push_str(&format!(
                ", error=\"invalid_request\", error_description=\"{}\"",
                why.replace(['"', '\\'], "'")
            )),
            Rejection::Invalid(why) => value.push_str(&format!(
                ", error=\"invalid_token\", error_description=\"{}\"",
                why.replace(['"', '\\'], "'")
            )),
            Rejection::InsufficientScope(_) => value.push_str(", error=\"insufficient_scope\""),
        }
        value
    }

    /// Verifies the `Authorization` header's bearer token: the signature
    /// against a key of the JWKS (fetched again, at most every
    /// `jwks_refresh_secs`, for a key id it does not hold, after a failed
    /// signature, and when the keys are [`MAX_KEY_AGE`] old), an algorithm
    /// of the allowlist, `exp` and `nbf` (with the configured leeway),
    /// `iss` among the issuers, `aud` this resource, and the scopes. A
    /// token verified before, under keys fetched within [`MAX_KEY_AGE`],
    /// is checked only for expiry.
    pub async fn check(&self, header: Option<&http::HeaderValue>) -> Result<Identity, Rejection> {
        let header = header.ok_or(Rejection::Missing)?;
        let invalid = |why: &str| Rejection::Invalid(why.to_string());
        if header.len() > MAX_TOKEN_BYTES + "Bearer ".len() {
            return Err(invalid("the token is too long"));
        }
        let malformed =
            || Rejection::Malformed("the Authorization header is not `Bearer TOKEN`".into());
        let header = header.to_str().map_err(|_| malformed())?;
        let (scheme, token) = header.split_once(' ').unwrap_or((header, ""));
        // Another scheme (Basic, say) is no bearer token at all: the
        // challenge alone says what is needed (RFC 6750 §3.1).
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(Rejection::Missing);
        }
        let token = token.trim();
        if token.is_empty() || token.contains(' ') {
            return Err(malformed());
        }
        let digest: [u8; 32] = blake3::hash(token.as_bytes()).into();
        let generation = {
            let mut verified = self.verified();
            let keys_fresh = self.client.is_none()
                || verified.fetched.is_some_and(|t| t.elapsed() < MAX_KEY_AGE);
            if let Some((identity, exp)) = verified.tokens.get(&digest)
                && keys_fresh
                && unix_now() <= exp.saturating_add(self.config.leeway_secs)
            {
                return Ok(identity.clone());
            }
            verified.generation
        };
        let jwt_header =
            jsonwebtoken::decode_header(token).map_err(|_| invalid("the token is not a JWT"))?;
        if !self.algorithms.contains(&jwt_header.alg) {
            return Err(invalid("the token's algorithm is not taken"));
        }
        if names_critical(token) {
            return Err(invalid(
                "the token's header names critical parameters (crit), which this server does \
                 not understand",
            ));
        }
        let (kid, alg) = (jwt_header.kid.as_deref(), jwt_header.alg);
        let untrusted = || invalid("the token is signed by no key this server trusts");
        let (jwk, key) = self.key(kid, alg).await.ok_or_else(untrusted)?;
        let mut validation = Validation::new(alg);
        validation.leeway = self.config.leeway_secs;
        validation.validate_nbf = true;
        validation.set_audience(&[&self.config.resource]);
        validation.set_issuer(&self.config.issuers);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let mut decoded = jsonwebtoken::decode::<Claims>(token, &key, &validation);
        // A key replaced under the same id: fetch the keys again (within
        // the rate limit) and try the new one.
        if decoded
            .as_ref()
            .is_err_and(|e| *e.kind() == jsonwebtoken::errors::ErrorKind::InvalidSignature)
            && self.refetched(kid, alg, &jwk).await
        {
            let (_, key) = self.key(kid, alg).await.ok_or_else(untrusted)?;
            decoded = jsonwebtoken::decode::<Claims>(token, &key, &validation);
        }
        let claims = decoded
            .map_err(|e| {
                use jsonwebtoken::errors::ErrorKind;
                invalid(match e.kind() {
                    ErrorKind::ExpiredSignature => "the token has expired",
                    ErrorKind::ImmatureSignature => "the token is not valid yet",
                    ErrorKind::InvalidAudience => "the token is for another audience",
                    ErrorKind::InvalidIssuer => {
                        "the token is from an issuer this server does not trust"
                    }
                    ErrorKind::InvalidSignature => "the token's signature does not verify",
                    ErrorKind::MissingRequiredClaim(_) => {
                        "the token lacks a claim (exp, iss, aud and sub are required)"
                    }
                    _ => "the token does not verify",
                })
            })?
            .claims;
        let scopes = claims
            .scope
            .or(claims.scp)
            .map_or_else(Vec::new, ScopeClaim::into_vec);
        let tool_scopes = &self.config.tool_scopes;
        if !self.config.scopes.iter().all(|s| scopes.contains(s))
            || (!tool_scopes.is_empty() && !tool_scopes.keys().any(|s| scopes.contains(s)))
        {
            return Err(Rejection::InsufficientScope(self.supported_scopes()));
        }
        let identity = Identity {
            issuer: claims.iss,
            subject: claims.sub.unwrap_or_default(),
            client_id: claims.client_id.or(claims.azp),
            scopes,
        };
        let mut verified = self.verified();
        if verified.generation == generation {
            verified.tokens.put(digest, (identity.clone(), claims.exp));
        }
        Ok(identity)
    }

    fn verified(&self) -> std::sync::MutexGuard<'_, Verified> {
        self.verified.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The key for `kid` that can verify `alg`, fetching the JWKS again
    /// when it is not held, or when the keys from the URL are older than
    /// [`MAX_KEY_AGE`].
    async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Option<(Jwk, DecodingKey)> {
        let fresh = |keys: &Keys| {
            self.client.is_none() || keys.fetched.is_some_and(|t| t.elapsed() < MAX_KEY_AGE)
        };
        {
            let keys = self.keys.read().await;
            if let Some(found) = keys.find(kid, alg)
                && fresh(&keys)
            {
                return Some(found.clone());
            }
        }
        self.refresh(|keys| keys.find(kid, alg).is_some() && fresh(keys))
            .await;
        self.keys.read().await.find(kid, alg).cloned()
    }

    /// Fetches the keys again (within the rate limit) after `jwk` failed to
    /// verify a signature; whether the key for `kid` is another now.
    async fn refetched(&self, kid: Option<&str>, alg: Algorithm, jwk: &Jwk) -> bool {
        let changed = |keys: &Keys| keys.find(kid, alg).is_some_and(|(k, _)| k != jwk);
        self.refresh(changed).await;
        changed(&*self.keys.read().await)
    }

    /// Fetches the JWKS from its URL, so that the first token need not
    /// wait for it (a server calls this once at start).
    pub async fn warm(&self) {
        self.refresh(|keys| !keys.is_empty()).await;
    }

    /// Fetches the JWKS again, unless `enough` says the keys held already
    /// do, or one was fetched in the last `jwks_refresh_secs` (so tokens
    /// naming made-up key ids cannot make the server hammer the
    /// authorization server). One fetch at a time: the others wait for it.
    async fn refresh(&self, enough: impl Fn(&Keys) -> bool) {
        if self.client.is_none() {
            return;
        }
        let mut last = self.refresh.lock().await;
        if enough(&*self.keys.read().await) {
            return;
        }
        let every = Duration::from_secs(self.config.jwks_refresh_secs);
        if last.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        *last = Some(Instant::now());
        self.fetch().await;
    }

    /// Fetches the JWKS; on failure the keys held stay, and the cause is
    /// logged (once while it stays the same).
    async fn fetch(&self) {
        let (Some(client), Some(url)) = (&self.client, &self.config.jwks_url) else {
            return;
        };
        let fetched = async {
            let mut response = client.get(url).send().await.map_err(|e| e.to_string())?;
            if !response.status().is_success() {
                return Err(format!("HTTP {}", response.status()));
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
                body.extend_from_slice(&chunk);
                if body.len() > MAX_JWKS_BYTES {
                    return Err(format!("the JWKS is larger than {MAX_JWKS_BYTES} bytes"));
                }
            }
            parse_jwks(&body)
        }
        .await;
        match fetched {
            Ok(mut keys) => {
                let now = Instant::now();
                keys.fetched = Some(now);
                *self.keys.write().await = keys;
                // A token of a key the JWKS no longer holds is not taken.
                let mut verified = self.verified();
                verified.generation += 1;
                verified.fetched = Some(now);
                verified.tokens.clear();
                *self.last_failure.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
            Err(why) => {
                let mut last = self.last_failure.lock().unwrap_or_else(|e| e.into_inner());
                if last.as_deref() != Some(&why) {
                    tracing::warn!("fetching the JWKS from {url} failed: {why}");
                    *last = Some(why);
                }
            }
        }
    }
}

impl Keys {
    fn is_empty(&self) -> bool {
        self.by_id.is_empty() && self.anonymous.is_empty()
    }

    /// The key for `kid` that can verify `alg`, with its JWK.
    fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<&(Jwk, DecodingKey)> {
        let fits = |jwk: &Jwk| {
            jwk.common
                .key_algorithm
                .is_none_or(|a| Algorithm::from_str(&a.to_string()).ok() == Some(alg))
        };
        match kid {
            Some(kid) => self.by_id.get(kid).filter(|(jwk, _)| fits(jwk)),
            None => match self.anonymous.as_slice() {
                [found] if fits(&found.0) => Some(found),
                _ => None,
            },
        }
    }
}

/// Whether the token's JOSE header has a `crit` parameter. It lists
/// extensions a recipient must understand or refuse the token (RFC 7515
/// §4.1.11), and this server understands none; jsonwebtoken does not look.
/// A header that does not decode is left to jsonwebtoken to refuse.
fn names_critical(token: &str) -> bool {
    use base64::Engine as _;
    let Some(header) = token.split('.').next() else {
        return false;
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .ok()
        .and_then(|bytes| {
            serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&bytes).ok()
        })
        .is_some_and(|header| header.contains_key("crit"))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The usable keys of a JWKS: public keys for signatures; a key this
/// library cannot use (or a symmetric one) is skipped, not fatal.
fn parse_jwks(bytes: &[u8]) -> Result<Keys, String> {
    #[derive(Deserialize)]
    struct Set {
        keys: Vec<serde_json::Value>,
    }
    let set: Set = serde_json::from_slice(bytes).map_err(|e| format!("not a JWKS: {e}"))?;
    let mut keys = Keys::default();
    for value in set.keys {
        let Ok(jwk) = serde_json::from_value::<Jwk>(value) else {
            continue;
        };
        if matches!(
            jwk.algorithm,
            jsonwebtoken::jwk::AlgorithmParameters::OctetKey(_)
        ) || jwk
            .common
            .public_key_use
            .as_ref()
            .is_some_and(|u| *u != jsonwebtoken::jwk::PublicKeyUse::Signature)
        {
            continue;
        }
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        match jwk.common.key_id.clone() {
            Some(kid) => {
                keys.by_id.insert(kid, (jwk, key));
            }
            None => keys.anonymous.push((jwk, key)),
        }
    }
    if keys.is_empty() {
        return Err("the JWKS holds no public signing key".into());
    }
    Ok(keys)
}
