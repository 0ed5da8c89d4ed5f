//! Tools in OCI registries, in the layout the wasm ecosystem uses (the CNCF
//! wasm OCI artifact, as `wkg oci push` and Wassette write and read it): an
//! OCI image manifest with one `application/wasm` layer, the component's
//! bytes, and a config of type `application/vnd.wasm.config.v0+json`.
//!
//! [`publish`] pushes a component under a tag; [`pull`] reads the tag's
//! manifest once, takes its SHA-256 as the digest, and fetches the layer
//! by digest, with the checks a hostile registry calls for: exactly one
//! layer, of the wasm type, under the wasm config type; the layer's
//! declared size capped before a byte is read; its SHA-256 checked before
//! the bytes are returned. Every read from a registry (manifest, layer,
//! signature, token, error answer) has a cap held to while reading (see
//! `Session::read_capped`). Credentials come from the environment or
//! Docker's credential file and are never logged.
//!
//! Skills travel the same way, in a layout of their own ([`skill`]): one
//! tar layer of the skill's folder under an Airlock skill config;
//! [`pull_any`] pulls either kind.
//!
//! Knows nothing of wasmtime, of where tools are installed, or of what a
//! tool may do: the caller checks the component or skill it gets.

use base64::Engine as _;
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{OCI_IMAGE_INDEX_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};
use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

mod sign;
pub mod skill;
pub use sign::{PublicKey, SigningKey, Verdict, sign, verify};
pub use skill::{SKILL_CONFIG, SKILL_LAYER, publish_skill};

/// The media type of the layer that holds the component.
pub const WASM_LAYER: &str = "application/wasm";

/// The media type of the artifact's config.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";

/// What went wrong, for a person to act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The reference does not parse.
    #[error("{0}")]
    Reference(String),
    /// The registry refused or failed a request.
    #[error("the registry {registry}: {message}")]
    Registry {
        /// The registry's host (and port).
        registry: String,
        /// What it said, or what failed on the way.
        message: String,
    },
    /// The artifact is not a component or a skill in the expected layout.
    #[error("{reference} is not an artifact airlock installs: {why}")]
    Layout {
        /// The reference, pinned to the manifest's digest.
        reference: String,
        /// What does not match.
        why: String,
    },
    /// The bytes the registry sent are not the ones its manifest names.
    #[error("{reference}: {why}")]
    Integrity {
        /// The reference, pinned to the manifest's digest.
        reference: String,
        /// Which check failed, with both values.
        why: String,
    },
}

/// An `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]` reference. The
/// registry is always named: a bare `owner/name` would silently mean
/// Docker Hub.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OciRef(Reference);

impl OciRef {
    /// Parses `text`, which starts with `oci://`.
    ///
    /// ```
    /// let r = airlock_oci::OciRef::parse("oci://ghcr.io/acme/wc:1.2.0").unwrap();
    /// assert_eq!((r.registry(), r.repository(), r.tag()), ("ghcr.io", "acme/wc", Some("1.2.0")));
    /// assert!(airlock_oci::OciRef::parse("oci://acme/wc:1.2.0").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<OciRef, Error> {
        let bad = |why: &str| {
            Error::Reference(format!(
                "{text}: {why} (write oci://REGISTRY/REPOSITORY:TAG, for example \
                 oci://ghcr.io/owner/tool:1.0.0, or @sha256:DIGEST instead of the tag)"
            ))
        };
        let rest = text
            .strip_prefix("oci://")
            .ok_or_else(|| bad("an OCI reference starts with oci://"))?;
        let first = rest.split('/').next().unwrap_or_default();
        let named = first.contains('.') || first.contains(':') || first == "localhost";
        if !named || !rest.contains('/') {
            return Err(bad("it does not name a registry"));
        }
        let reference: Reference = rest.parse().map_err(|e| bad(&format!("{e}")))?;
        Ok(OciRef(reference))
    }

    /// The registry's host, with its port if one was given.
    pub fn registry(&self) -> &str {
        self.0.registry()
    }

    /// The repository within the registry.
    pub fn repository(&self) -> &str {
        self.0.repository()
    }

    /// The tag, if one was given.
    pub fn tag(&self) -> Option<&str> {
        self.0.tag()
    }

    /// The manifest digest, if one was given.
    pub fn digest(&self) -> Option<&str> {
        self.0.digest()
    }

    /// This repository at the manifest `digest`.
    pub fn pinned(&self, digest: &str) -> OciRef {
        OciRef(Reference::with_digest(
            self.registry().to_string(),
            self.repository().to_string(),
            digest.to_string(),
        ))
    }

    /// Whether the registry is on this machine, where plain HTTP is used.
    fn is_loopback(&self) -> bool {
        let host = self
            .registry()
            .rsplit_once(':')
            .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
            .map_or(self.registry(), |(host, _)| host);
        host == "localhost" || host == "[::1]" || host.starts_with("127.")
    }
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.registry(), self.repository())?;
        if let Some(tag) = self.tag() {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = self.digest() {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// Credentials for a registry. `Debug` never shows the password.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum Auth {
    /// No credentials.
    #[default]
    Anonymous,
    /// A user name and password (or token).
    Basic {
        /// The user name.
        username: String,
        /// The password or token.
        password: String,
    },
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::Anonymous => f.write_str("Anonymous"),
            Auth::Basic { username, .. } => write!(f, "Basic({username}, [password])"),
        }
    }
}

impl Auth {
    /// The credentials for `registry`: `AIRLOCK_REGISTRY_USERNAME` and
    /// `AIRLOCK_REGISTRY_PASSWORD` if both are set, else the entry for it
    /// in Docker's credential file (`$DOCKER_CONFIG/config.json` or
    /// `~/.docker/config.json`; its `auth` or `username`/`password`
    /// fields; credential helpers are never run), else anonymous.
    pub fn for_registry(registry: &str) -> Auth {
        let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        if let (Some(username), Some(password)) = (
            var("AIRLOCK_REGISTRY_USERNAME"),
            var("AIRLOCK_REGISTRY_PASSWORD"),
        ) {
            return Auth::Basic { username, password };
        }
        let file = std::env::var_os("DOCKER_CONFIG")
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".docker")))
            .map(|dir| dir.join("config.json"));
        file.and_then(|f| std::fs::read(f).ok())
            .and_then(|bytes| Auth::from_docker_config(&bytes, registry))
            .unwrap_or_default()
    }

    /// The entry for `registry` in a Docker credential file's `auths`
    /// (Docker Hub's is keyed by its legacy index URL).
    fn from_docker_config(bytes: &[u8], registry: &str) -> Option<Auth> {
        let config: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        let entry = config
            .get("auths")?
            .as_object()?
            .iter()
            .find_map(|(key, entry)| {
                let host = key
                    .trim_start_matches("https://")
                    .trim_start_matches("http://")
                    .split('/')
                    .next()
                    .unwrap_or_default();
                (docker_hub_as_one(host) == docker_hub_as_one(registry)).then_some(entry)
            })?;
        if let Some(encoded) = entry.get("auth").and_then(|a| a.as_str()) {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()?;
            let (username, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
            return Some(Auth::Basic {
                username: username.to_string(),
                password: password.to_string(),
            });
        }
        let field = |name| entry.get(name)?.as_str().map(str::to_string);
        Some(Auth::Basic {
            username: field("username")?,
            password: field("password")?,
        })
    }

    fn registry_auth(&self) -> RegistryAuth {
        match self {
            Auth::Anonymous => RegistryAuth::Anonymous,
            Auth::Basic { username, password } => {
                RegistryAuth::Basic(username.clone(), password.clone())
            }
        }
    }
}

/// Docker Hub's names for its registry, as one (`docker login` keys its
/// credentials by `https://index.docker.io/v1/`).
fn docker_hub_as_one(host: &str) -> &str {
    match host {
        "docker.io" | "index.docker.io" | "registry-1.docker.io" => "docker.io",
        other => other,
    }
}

/// What the artifact's config says about the component: the interfaces it
/// imports and exports, by their WIT names.
#[derive(Clone, Debug, Default)]
pub struct ComponentInfo {
    /// The component's imports, for example `wasi:filesystem/types@0.2.12`.
    pub imports: Vec<String>,
    /// The component's exports, for example `airlock:tool/tool@0.1.0`.
    pub exports: Vec<String>,
}

/// The interfaces `wasm`, a component, imports and exports at its top
/// level, by their names.
pub fn component_info(wasm: &[u8]) -> Result<ComponentInfo, Error> {
    use wasmparser::{Parser, Payload};
    let bad = |e: wasmparser::BinaryReaderError| {
        Error::Reference(format!("the file is not a valid component: {e}"))
    };
    let mut info = ComponentInfo::default();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(wasm) {
        match payload.map_err(bad)? {
            Payload::Version { encoding, .. }
                if depth == 0 && encoding != wasmparser::Encoding::Component =>
            {
                return Err(Error::Reference(
                    "the file is a core wasm module, not a component".into(),
                ));
            }
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    info.imports
                        .push(import.map_err(bad)?.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    info.exports
                        .push(export.map_err(bad)?.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    Ok(info)
}

/// Where a component was published, or what was pulled.
#[derive(Clone, Debug)]
pub struct Artifact {
    /// The reference pinned to the manifest's digest.
    pub pinned: OciRef,
    /// The manifest's digest (`sha256:...`).
    pub manifest_digest: String,
    /// The layer's digest (`sha256:...`).
    pub layer_digest: String,
}

/// What an artifact holds, by its config's media type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A wasm component: one [`WASM_LAYER`] under a [`WASM_CONFIG`].
    Component,
    /// A skill's folder: one [`SKILL_LAYER`] (a tar) under a
    /// [`SKILL_CONFIG`] (see [`skill`]).
    Skill,
}

impl Kind {
    /// Its config's media type.
    pub fn config(self) -> &'static str {
        match self {
            Kind::Component => WASM_CONFIG,
            Kind::Skill => SKILL_CONFIG,
        }
    }

    /// Its layer's media type.
    pub fn layer(self) -> &'static str {
        match self {
            Kind::Component => WASM_LAYER,
            Kind::Skill => SKILL_LAYER,
        }
    }

    /// "a component" or "a skill".
    fn article(self) -> &'static str {
        match self {
            Kind::Component => "a component",
            Kind::Skill => "a skill",
        }
    }
}

/// An artifact pulled from a registry, checked.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// Where it came from.
    pub artifact: Artifact,
    /// What it holds.
    pub kind: Kind,
    /// Its layer's bytes (a component, or a skill's tar), whose SHA-256
    /// is `artifact.layer_digest`.
    pub bytes: Vec<u8>,
}

/// How to reach a registry.
#[derive(Clone, Debug)]
pub struct Options {
    /// Plain HTTP instead of HTTPS (`--insecure-registry`): only for a
    /// registry on a loopback address.
    pub insecure: bool,
    /// The most one whole operation (a push, a pull, a signature check)
    /// may take.
    pub timeout: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            insecure: false,
            timeout: Duration::from_secs(300),
        }
    }
}

/// The most a manifest (or image index) may be (the distribution server's
/// own cap).
const MANIFEST_BYTES: u64 = 4 << 20;
/// The most a token service's answer may be.
const TOKEN_BYTES: u64 = 1 << 20;
/// The most of an error answer that is read.
const ERROR_BYTES: u64 = 64 << 10;

/// The process's HTTP client for reads (manifests, blobs, tokens), which
/// [`Session::read_capped`] holds to their caps; pushes go through
/// oci-client.
fn reader() -> Result<reqwest::Client, String> {
    static READER: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    READER
        .get_or_init(|| {
            // Another part of the process may have installed a provider already.
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .read_timeout(Duration::from_secs(30))
                .build()
                .map_err(|e| format!("no HTTP client: {}", with_causes(&e)))
        })
        .clone()
}

/// `e` with its causes, for a person to read.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}

/// The process's client for `protocol`, `registry` and `auth`, made on
/// first use: making one loads the system's root certificates (some 300
/// files here), which costs more than a whole pull from a registry on
/// this machine. (A client keeps the first credentials it is given for a
/// registry, hence one per credentials.)
fn shared_client(protocol: ClientProtocol, registry: &str, auth: &Auth) -> Client {
    type Key = (bool, String, Auth);
    static CLIENTS: OnceLock<std::sync::Mutex<Vec<(Key, Client)>>> = OnceLock::new();
    let key = (
        matches!(protocol, ClientProtocol::Http),
        registry.to_string(),
        auth.clone(),
    );
    let mut clients = CLIENTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, client)) = clients.iter().find(|(k, _)| *k == key) {
        return client.clone();
    }
    // Another part of the process may have installed a provider already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Each connection and read has its own limit; a whole operation has its
    // `Options::timeout` (see `Session::within`).
    let client = Client::new(ClientConfig {
        protocol,
        connect_timeout: Some(Duration::from_secs(10)),
        read_timeout: Some(Duration::from_secs(30)),
        ..ClientConfig::default()
    });
    clients.push((key, client.clone()));
    client
}

/// One operation's connection to the registry `reference` names.
struct Session<'a> {
    /// For pushes.
    client: Client,
    /// The credentials, for pushes.
    auth: RegistryAuth,
    /// For reads.
    reader: reqwest::Client,
    /// The credentials as an `Authorization` header, if any.
    basic: Option<String>,
    /// What reads send as `Authorization`, found on the first read.
    authorization: tokio::sync::OnceCell<Option<String>>,
    /// `http` or `https`.
    scheme: &'static str,
    reference: &'a OciRef,
    timeout: Duration,
    /// A hint for errors: HTTPS to a registry on loopback.
    https_to_loopback: bool,
}

impl<'a> Session<'a> {
    fn open(reference: &'a OciRef, auth: &Auth, options: &Options) -> Result<Session<'a>, Error> {
        let (protocol, scheme) = match (options.insecure, reference.is_loopback()) {
            (false, _) => (ClientProtocol::Https, "https"),
            (true, true) => (ClientProtocol::Http, "http"),
            (true, false) => {
                return Err(Error::Reference(format!(
                    "{reference}: plain HTTP (--insecure-registry) is only for a registry on a \
                     loopback address"
                )));
            }
        };
        let basic = match auth {
            Auth::Anonymous => None,
            Auth::Basic { username, password } => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"))
            )),
        };
        Ok(Session {
            client: shared_client(protocol, reference.registry(), auth),
            auth: auth.registry_auth(),
            reader: reader().map_err(|message| Error::Registry {
                registry: reference.registry().to_string(),
                message,
            })?,
            basic,
            authorization: tokio::sync::OnceCell::new(),
            scheme,
            reference,
            timeout: options.timeout,
            https_to_loopback: !options.insecure && reference.is_loopback(),
        })
    }

    fn registry_error(&self, e: impl fmt::Display) -> Error {
        let hint = if self.https_to_loopback {
            " (spoken to over HTTPS: a registry on this machine that serves plain HTTP needs \
             --insecure-registry)"
        } else {
            ""
        };
        Error::Registry {
            registry: self.reference.registry().to_string(),
            message: format!("{e}{hint}"),
        }
    }

    /// Runs `work` within the operation's time limit.
    async fn within<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        tokio::time::timeout(self.timeout, work)
            .await
            .unwrap_or_else(|_| {
                Err(Error::Registry {
                    registry: self.reference.registry().to_string(),
                    message: format!(
                        "it did not finish within {} s (is the registry up, and reachable?)",
                        self.timeout.as_secs_f64()
                    ),
                })
            })
    }

    /// The raw manifest `at` (a reference by tag or digest) names, an OCI
    /// image manifest or index of at most [`MANIFEST_BYTES`]; `None` when
    /// there is none.
    async fn manifest(&self, at: &OciRef) -> Result<Option<Vec<u8>>, Error> {
        let url = format!(
            "{}://{}/v2/{}/manifests/{}",
            self.scheme,
            at.0.resolve_registry(),
            at.repository(),
            at.digest().or(at.tag()).unwrap_or("latest")
        );
        let accept = format!("{OCI_IMAGE_MEDIA_TYPE}, {OCI_IMAGE_INDEX_MEDIA_TYPE}");
        let request = self.reader.get(url).header(reqwest::header::ACCEPT, accept);
        self.read(request, MANIFEST_BYTES, &format!("the manifest {at}"))
            .await
    }

    /// The blob `layer` describes, in `at`'s repository: at most
    /// `max_bytes`, exactly its declared size, and of its digest.
    async fn blob(
        &self,
        at: &OciRef,
        layer: &oci_client::manifest::OciDescriptor,
        max_bytes: u64,
    ) -> Result<Vec<u8>, Error> {
        let integrity = |why: String| Error::Integrity {
            reference: at.to_string(),
            why,
        };
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > max_bytes {
            return Err(Error::Layout {
                reference: at.to_string(),
                why: format!(
                    "its layer {} is {size} bytes, over the {max_bytes} bytes allowed",
                    layer.digest
                ),
            });
        }
        let url = format!(
            "{}://{}/v2/{}/blobs/{}",
            self.scheme,
            at.0.resolve_registry(),
            at.repository(),
            layer.digest
        );
        let what = format!("the layer {} of {at}", layer.digest);
        let bytes = self
            .read(self.reader.get(url), size, &what)
            .await?
            .ok_or_else(|| integrity(format!("the registry has no layer {}", layer.digest)))?;
        if bytes.len() as u64 != size {
            return Err(integrity(format!(
                "the layer {} is {} bytes, not the {size} its manifest says",
                layer.digest,
                bytes.len()
            )));
        }
        let received = sha256(&bytes);
        if received != layer.digest {
            return Err(integrity(format!(
                "the layer's digest is {received}, not {}",
                layer.digest
            )));
        }
        Ok(bytes)
    }

    /// Sends `request` (a read from the registry, authorised as it asks)
    /// and reads the answer's body, `what`, of at most `cap` bytes; `None`
    /// when the registry has none (404).
    async fn read(
        &self,
        request: reqwest::RequestBuilder,
        cap: u64,
        what: &str,
    ) -> Result<Option<Vec<u8>>, Error> {
        let request = match self.authorization().await? {
            Some(authorization) => request.header(reqwest::header::AUTHORIZATION, authorization),
            None => request,
        };
        self.fetch(request, cap, what).await
    }

    /// Sends `request` and reads the answer's body, `what`, of at most
    /// `cap` bytes: `None` for a 404, an error naming the status (and the
    /// start of what the registry said, at most [`ERROR_BYTES`] of it) for
    /// another failure.
    async fn fetch(
        &self,
        request: reqwest::RequestBuilder,
        cap: u64,
        what: &str,
    ) -> Result<Option<Vec<u8>>, Error> {
        let response = request
            .send()
            .await
            .map_err(|e| self.registry_error(format!("{what}: {}", with_causes(&e))))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            let what = format!("the HTTP {status} answer for {what}");
            let said = self.read_capped(response, ERROR_BYTES, &what).await?;
            let said = String::from_utf8_lossy(&said);
            let said: String = said.trim().chars().take(300).collect();
            return Err(self.registry_error(format!("{what}: {said}")));
        }
        self.read_capped(response, cap, what).await.map(Some)
    }

    /// The body of `response`, `what`, if it is at most `cap` bytes. Every
    /// read from a registry goes through here, so that none holds more
    /// than its cap (and one network read): a `Content-Length` over the
    /// cap is refused before a byte of the body is read, and a body
    /// without one (chunked, or up to the connection's end) is cut off as
    /// soon as it passes the cap.
    async fn read_capped(
        &self,
        mut response: reqwest::Response,
        cap: u64,
        what: &str,
    ) -> Result<Vec<u8>, Error> {
        let too_large = |how: String| {
            self.registry_error(format!("{what} is over its cap of {cap} bytes ({how})"))
        };
        let declared = response.content_length();
        if let Some(length) = declared.filter(|&length| length > cap) {
            return Err(too_large(format!(
                "Content-Length {length}; none of it was read"
            )));
        }
        let mut body = Vec::with_capacity(usize::try_from(declared.unwrap_or(0)).unwrap_or(0));
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.registry_error(format!("{what}: {}", with_causes(&e))))?
        {
            let read = body.len() as u64 + chunk.len() as u64;
            if read > cap {
                return Err(too_large(format!(
                    "sent without a Content-Length; reading stopped at {read} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// What reads send as `Authorization`, as the registry's `GET /v2/`
    /// asks (once per operation): nothing when it asks for nothing, the
    /// credentials for a `Basic` challenge, and for a `Bearer` one a token
    /// to pull the repository from its token service (sent the
    /// credentials, if any).
    async fn authorization(&self) -> Result<Option<String>, Error> {
        let found = self.authorization.get_or_try_init(|| async {
            let v2 = format!(
                "{}://{}/v2/",
                self.scheme,
                self.reference.0.resolve_registry()
            );
            let response = self
                .reader
                .get(v2)
                .send()
                .await
                .map_err(|e| self.registry_error(with_causes(&e)))?;
            let Some(challenge) = response
                .headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
            else {
                return Ok(None);
            };
            let Some(params) = bearer_challenge(challenge) else {
                return Ok(self.basic.clone());
            };
            let param = |name: &str| params.iter().find(|(n, _)| n == name).map(|(_, v)| v);
            let realm = param("realm").ok_or_else(|| {
                self.registry_error(format!("its challenge names no token service: {challenge}"))
            })?;
            let mut url = reqwest::Url::parse(realm).map_err(|e| {
                self.registry_error(format!("its token service {realm} is not a URL: {e}"))
            })?;
            let scope = format!("repository:{}:pull", self.reference.repository());
            url.query_pairs_mut().append_pair("scope", &scope);
            if let Some(service) = param("service") {
                url.query_pairs_mut().append_pair("service", service);
            }
            let mut request = self.reader.get(url);
            if let Some(basic) = &self.basic {
                request = request.header(reqwest::header::AUTHORIZATION, basic);
            }
            let what = format!("the token from {realm}");
            #[derive(serde::Deserialize)]
            struct Token {
                token: Option<String>,
                access_token: Option<String>,
            }
            let answer = self
                .fetch(request, TOKEN_BYTES, &what)
                .await?
                .ok_or_else(|| self.registry_error(format!("{what}: HTTP 404")))?;
            let token = serde_json::from_slice::<Token>(&answer)
                .ok()
                .and_then(|t| t.token.or(t.access_token))
                .ok_or_else(|| self.registry_error(format!("{what}: no token in its answer")))?;
            Ok(Some(format!("Bearer {token}")))
        });
        found.await.cloned()
    }
}

/// The parameters (`realm`, `service`, ...; names in lower case) of a
/// `WWW-Authenticate` challenge of the `Bearer` scheme; `None` for another.
fn bearer_challenge(challenge: &str) -> Option<Vec<(String, String)>> {
    let (scheme, mut rest) = challenge.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut params = Vec::new();
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        let Some((name, after)) = rest.split_once('=') else {
            return Some(params);
        };
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"')?,
            None => after.split_once(',').unwrap_or((after, "")),
        };
        params.push((name.trim().to_ascii_lowercase(), value.to_string()));
        rest = after;
    }
}

fn sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The config's `created`: `SOURCE_DATE_EPOCH` when it is set (the
/// reproducible-builds convention), else the epoch; never the time of the
/// push, so the same bytes make the same manifest under any tag and at any
/// time, with one digest.
fn created() -> String {
    let seconds = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or(0);
    chrono::DateTime::from_timestamp(seconds, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Pushes `wasm` to `reference` (which names a tag) as a wasm component
/// artifact, and returns where it is, by digest.
pub async fn publish(
    reference: &OciRef,
    wasm: &[u8],
    info: &ComponentInfo,
    auth: &Auth,
    options: &Options,
) -> Result<Artifact, Error> {
    let config = serde_json::json!({
        "created": created(),
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [sha256(wasm)],
        "component": {"imports": info.imports, "exports": info.exports, "target": null},
    });
    push(reference, Kind::Component, wasm, config, auth, options).await
}

/// Pushes `layer`, an artifact of `kind`, with `config` (JSON) to
/// `reference` (which names a tag), and returns where it is, by digest.
async fn push(
    reference: &OciRef,
    kind: Kind,
    layer: &[u8],
    config: serde_json::Value,
    auth: &Auth,
    options: &Options,
) -> Result<Artifact, Error> {
    if reference.tag().is_none() || reference.digest().is_some() {
        return Err(Error::Reference(format!(
            "{reference}: publish to a tag (oci://REGISTRY/REPOSITORY:TAG); the digest is the \
             registry's to give"
        )));
    }
    let session = Session::open(reference, auth, options)?;
    let layer_digest = sha256(layer);
    let config = Config::new(
        serde_json::to_vec(&config).expect("a JSON value serialises"),
        kind.config().to_string(),
        None,
    );
    let layers = [ImageLayer::new(
        layer.to_vec(),
        kind.layer().to_string(),
        None,
    )];
    let mut manifest = OciImageManifest::build(&layers, &config, None);
    // oci-client leaves it out; the wasm ecosystem's client (oci-wasm, under
    // wkg and Wassette) refuses a manifest without it.
    manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_string());
    session
        .within(async {
            session
                .client
                .push(&reference.0, &layers, config, &session.auth, Some(manifest))
                .await
                .map_err(|e| session.registry_error(with_causes(&e)))?;
            let (manifest_digest, _) = resolve(&session).await?;
            Ok(Artifact {
                pinned: reference.pinned(&manifest_digest),
                manifest_digest,
                layer_digest,
            })
        })
        .await
}

/// Reads the manifest `reference` names (once: a tag that moves meanwhile
/// changes nothing), pins the reference to its digest, and pulls the
/// component it names, checked: one `application/wasm` layer of at most
/// `max_bytes`, under the wasm config type, with the size and SHA-256 its
/// manifest gives.
pub async fn pull(
    reference: &OciRef,
    auth: &Auth,
    max_bytes: u64,
    options: &Options,
) -> Result<Pulled, Error> {
    pull_kinds(reference, auth, |_| max_bytes, options, &[Kind::Component]).await
}

/// As [`pull`], for a component or a skill ([`Pulled::kind`] says which),
/// each held to its own layout, its layer to at most `max_bytes(kind)`.
pub async fn pull_any(
    reference: &OciRef,
    auth: &Auth,
    max_bytes: impl Fn(Kind) -> u64,
    options: &Options,
) -> Result<Pulled, Error> {
    pull_kinds(
        reference,
        auth,
        max_bytes,
        options,
        &[Kind::Component, Kind::Skill],
    )
    .await
}

async fn pull_kinds(
    reference: &OciRef,
    auth: &Auth,
    max_bytes: impl Fn(Kind) -> u64,
    options: &Options,
    kinds: &[Kind],
) -> Result<Pulled, Error> {
    let session = Session::open(reference, auth, options)?;
    session
        .within(async {
            let (manifest_digest, raw) = resolve(&session).await?;
            let pinned = reference.pinned(&manifest_digest);
            let layout = |why: String| Error::Layout {
                reference: pinned.to_string(),
                why,
            };
            let manifest: OciImageManifest = serde_json::from_slice(&raw)
                .map_err(|e| layout(format!("its manifest is not an OCI image manifest: {e}")))?;
            let expected = kinds
                .iter()
                .map(|k| k.config())
                .collect::<Vec<_>>()
                .join(" or ");
            let kind = *kinds
                .iter()
                .find(|k| k.config() == manifest.config.media_type)
                .ok_or_else(|| {
                    layout(format!(
                        "its config is {}, not {expected}",
                        manifest.config.media_type
                    ))
                })?;
            let [layer] = manifest.layers.as_slice() else {
                return Err(layout(format!(
                    "it has {} layers; {} artifact has one",
                    manifest.layers.len(),
                    kind.article()
                )));
            };
            if layer.media_type != kind.layer() {
                return Err(layout(format!(
                    "its layer is {}, not {}",
                    layer.media_type,
                    kind.layer()
                )));
            }
            let bytes = session.blob(&pinned, layer, max_bytes(kind)).await?;
            Ok(Pulled {
                artifact: Artifact {
                    pinned,
                    manifest_digest,
                    layer_digest: layer.digest.clone(),
                },
                kind,
                bytes,
            })
        })
        .await
}

/// The manifest `session`'s reference names, read once, and its digest:
/// the SHA-256 of its bytes, which must be the reference's own digest
/// when it has one.
async fn resolve(session: &Session<'_>) -> Result<(String, Vec<u8>), Error> {
    let reference = session.reference;
    let raw = session
        .manifest(reference)
        .await?
        .ok_or_else(|| session.registry_error(format!("it has no manifest {reference}")))?;
    let digest = sha256(&raw);
    if let Some(pinned) = reference.digest()
        && pinned != digest
    {
        return Err(Error::Integrity {
            reference: reference.to_string(),
            why: format!("the manifest's digest is {digest}, not {pinned}"),
        });
    }
    Ok((digest, raw))
}

/// What `reference`'s tag resolves to now (its own digest when pinned).
pub async fn resolve_digest(
    reference: &OciRef,
    auth: &Auth,
    options: &Options,
) -> Result<String, Error> {
    let session = Session::open(reference, auth, options)?;
    session
        .within(async { resolve(&session).await.map(|(digest, _)| digest) })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_their_registry() {
        let r = OciRef::parse("oci://127.0.0.1:5123/airlock/wc:1.0.0").unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5123");
        assert!(r.is_loopback());
        assert_eq!(r.to_string(), "oci://127.0.0.1:5123/airlock/wc:1.0.0");
        let digest = format!("sha256:{}", "ab".repeat(32));
        let pinned = r.pinned(&digest);
        assert_eq!(pinned.digest(), Some(digest.as_str()));
        assert!(
            !OciRef::parse("oci://ghcr.io/acme/wc")
                .unwrap()
                .is_loopback()
        );
        for bad in [
            "ghcr.io/acme/wc",
            "oci://wc",
            "oci://acme/wc:1",
            "oci://ghcr.io/Acme/wc",
        ] {
            assert!(OciRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn plain_http_is_only_for_a_registry_on_loopback() {
        let insecure = Options {
            insecure: true,
            ..Options::default()
        };
        let remote = OciRef::parse("oci://ghcr.io/acme/wc:1").unwrap();
        let error = Session::open(&remote, &Auth::Anonymous, &insecure)
            .err()
            .expect("refused");
        assert!(error.to_string().contains("loopback"), "{error}");
        assert!(Session::open(&remote, &Auth::Anonymous, &Options::default()).is_ok());
        let local = OciRef::parse("oci://127.0.0.1:5000/acme/wc:1").unwrap();
        assert!(Session::open(&local, &Auth::Anonymous, &insecure).is_ok());
    }

    #[test]
    fn bearer_challenges_are_read_with_commas_in_quotes() {
        let params = bearer_challenge(
            r#"Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull,push""#,
        )
        .unwrap();
        let param = |name: &str| {
            params
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(param("realm"), Some("https://ghcr.io/token"));
        assert_eq!(param("service"), Some("ghcr.io"));
        assert_eq!(param("scope"), Some("repository:a/b:pull,push"));
        let unquoted = bearer_challenge("bearer realm=https://r.example/token, service=r").unwrap();
        assert_eq!(unquoted[1], ("service".to_string(), "r".to_string()));
        assert!(bearer_challenge(r#"Basic realm="Registry""#).is_none());
    }

    #[test]
    fn docker_credentials_are_found_by_registry_and_never_shown() {
        let file = br#"{"auths": {"https://ghcr.io": {"auth": "dXNlcjpzM2NyZXQ="},
                        "127.0.0.1:5123": {"username": "u", "password": "p"}}}"#;
        let auth = Auth::from_docker_config(file, "ghcr.io").unwrap();
        assert!(
            matches!(&auth, Auth::Basic { username, password } if username == "user" && password == "s3cret")
        );
        assert!(!format!("{auth:?}").contains("s3cret"));
        assert!(Auth::from_docker_config(file, "127.0.0.1:5123").is_some());
        assert!(Auth::from_docker_config(file, "docker.io").is_none());
        let hub = br#"{"auths": {"https://index.docker.io/v1/": {"auth": "dXNlcjpzM2NyZXQ="}}}"#;
        assert!(Auth::from_docker_config(hub, "docker.io").is_some());
        assert!(Auth::from_docker_config(hub, "registry-1.docker.io").is_some());
    }
}
