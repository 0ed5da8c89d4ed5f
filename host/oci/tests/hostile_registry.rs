//! What a registry may serve that is not a component artifact, against a
//! real registry on loopback (Debian's `docker-registry`): each is refused
//! with an error that names what is wrong, and a signature is bound to the
//! manifest digest it names. Against a registry that sends more than a
//! cap allows ([`flood`]), each read stops at its cap.

#[path = "../../../tests/support/debian.rs"]
mod debian;
#[path = "../../../tests/support/registry.rs"]
mod registry;

use airlock_oci::{Auth, ComponentInfo, OciRef, Options, SigningKey, Verdict};
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

fn local() -> Options {
    Options {
        insecure: true,
        ..Options::default()
    }
}

fn client() -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    })
}

/// Pushes `layers` under `config_type` to `reference` as they are.
async fn push_raw(reference: &str, config_type: &str, layers: &[(&[u8], &str)]) {
    let layers: Vec<ImageLayer> = layers
        .iter()
        .map(|(data, media_type)| ImageLayer::new(data.to_vec(), media_type.to_string(), None))
        .collect();
    let config = Config::new(b"{}".to_vec(), config_type.to_string(), None);
    let manifest = OciImageManifest::build(&layers, &config, None);
    let reference: Reference = reference.parse().unwrap();
    client()
        .push(
            &reference,
            &layers,
            config,
            &RegistryAuth::Anonymous,
            Some(manifest),
        )
        .await
        .expect("the push");
}

async fn pull_error(reference: &str, max_bytes: u64) -> String {
    let reference = OciRef::parse(&format!("oci://{reference}")).unwrap();
    airlock_oci::pull(&reference, &Auth::Anonymous, max_bytes, &local())
        .await
        .expect_err("refused")
        .to_string()
}

#[tokio::test]
async fn what_is_not_one_wasm_layer_under_the_wasm_config_is_refused() {
    let registry = registry::Registry::start();
    let at = |tag: &str| format!("{}/hostile/tool:{tag}", registry.addr);
    let wasm: &[u8] = b"\0asm\x0d\0\x01\0";
    let image_config = "application/vnd.oci.image.config.v1+json";

    push_raw(
        &at("image"),
        image_config,
        &[(wasm, airlock_oci::WASM_LAYER)],
    )
    .await;
    let error = pull_error(&at("image"), 1 << 20).await;
    assert!(
        error.contains(&format!("its config is {image_config}")),
        "{error}"
    );

    push_raw(
        &at("two"),
        airlock_oci::WASM_CONFIG,
        &[
            (wasm, airlock_oci::WASM_LAYER),
            (b"more", airlock_oci::WASM_LAYER),
        ],
    )
    .await;
    let error = pull_error(&at("two"), 1 << 20).await;
    assert!(error.contains("it has 2 layers"), "{error}");

    let tar = "application/vnd.oci.image.layer.v1.tar";
    push_raw(&at("tar"), airlock_oci::WASM_CONFIG, &[(wasm, tar)]).await;
    let error = pull_error(&at("tar"), 1 << 20).await;
    assert!(error.contains(&format!("its layer is {tar}")), "{error}");

    push_raw(
        &at("big"),
        airlock_oci::WASM_CONFIG,
        &[(wasm, airlock_oci::WASM_LAYER)],
    )
    .await;
    let error = pull_error(&at("big"), 4).await;
    assert!(error.contains("over the 4 bytes allowed"), "{error}");

    // A blob cut short in the registry's storage: its length is not the
    // manifest's.
    let cut = publish(&registry, "cut", b"\0asm\x0d\0\x01\0cut short").await;
    let blob = registry.blob_file(&cut.layer_digest);
    let bytes = std::fs::read(&blob).unwrap();
    std::fs::write(&blob, &bytes[..bytes.len() - 3]).unwrap();
    let error = pull_error(&format!("{}/acme/tool:cut", registry.addr), 1 << 20).await;
    assert!(error.contains(&cut.layer_digest), "{error}");

    let error = pull_error(&at("missing"), 1 << 20).await;
    assert!(error.contains(&registry.addr), "{error}");

    // A registry that is down: a clear error, no hang.
    let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = down.local_addr().unwrap().port();
    drop(down);
    let error = pull_error(&format!("127.0.0.1:{port}/hostile/tool:1"), 1 << 20).await;
    assert!(error.contains(&format!("127.0.0.1:{port}")), "{error}");
}

/// Publishes `bytes` at `acme/tool:TAG`.
async fn publish(registry: &registry::Registry, tag: &str, bytes: &[u8]) -> airlock_oci::Artifact {
    let reference = OciRef::parse(&format!("oci://{}/acme/tool:{tag}", registry.addr)).unwrap();
    airlock_oci::publish(
        &reference,
        bytes,
        &ComponentInfo::default(),
        &Auth::Anonymous,
        &local(),
    )
    .await
    .expect("published")
}

/// What the wasm ecosystem's client (oci-wasm 0.6, under wkg and
/// Wassette) requires of a component artifact beyond the layout `pull`
/// checks: the manifest names its media type, and the config carries
/// `created`, `architecture`, `os`, `layerDigests` and `component`.
#[tokio::test]
async fn a_published_artifact_has_what_the_wasm_ecosystems_client_requires() {
    let registry = registry::Registry::start();
    let artifact = publish(&registry, "1", b"\0asm\x0d\0\x01\0").await;
    let reference: Reference = format!("{}/acme/tool@{}", registry.addr, artifact.manifest_digest)
        .parse()
        .unwrap();
    let (manifest, _, config) = client()
        .pull_manifest_and_config(&reference, &RegistryAuth::Anonymous)
        .await
        .unwrap();
    assert_eq!(manifest.media_type.as_deref(), Some(OCI_IMAGE_MEDIA_TYPE));
    assert_eq!(manifest.config.media_type, airlock_oci::WASM_CONFIG);
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    assert_eq!(
        config["layerDigests"][0].as_str(),
        Some(artifact.layer_digest.as_str())
    );
    assert!(config["component"]["imports"].is_array() && config["created"].is_string());
}

#[tokio::test]
async fn a_signature_counts_only_for_the_digest_it_names() {
    let registry = registry::Registry::start();
    let auth = Auth::Anonymous;
    let signed = publish(&registry, "signed", b"\0asm\x0d\0\x01\0signed").await;
    let other = publish(&registry, "other", b"\0asm\x0d\0\x01\0other").await;
    let key = SigningKey::generate().unwrap();
    airlock_oci::sign(&signed, &key, &auth, &local())
        .await
        .expect("signed");
    // Signing again with the same key adds nothing.
    airlock_oci::sign(&signed, &key, &auth, &local())
        .await
        .expect("signed");
    let trusted = [key.public_key()];
    assert_eq!(
        airlock_oci::verify(&signed, &trusted, &auth, &local())
            .await
            .unwrap(),
        Verdict::Signed { key: 0 }
    );
    assert_eq!(
        airlock_oci::verify(&other, &trusted, &auth, &local())
            .await
            .unwrap(),
        Verdict::Unsigned
    );

    // The signature manifest copied to the other digest's signature tag:
    // its payload names the first digest, so it does not count.
    let sig_tag = |digest: &str| {
        format!(
            "{}/acme/tool:{}.sig",
            registry.addr,
            digest.replacen(':', "-", 1)
        )
    };
    let client = client();
    let (raw, _) = client
        .pull_manifest_raw(
            &sig_tag(&signed.manifest_digest).parse().unwrap(),
            &RegistryAuth::Anonymous,
            &[OCI_IMAGE_MEDIA_TYPE],
        )
        .await
        .unwrap();
    let manifest: OciImageManifest = serde_json::from_slice(&raw).unwrap();
    assert_eq!(manifest.layers.len(), 1, "one signature, not two");
    client
        .push_manifest(
            &sig_tag(&other.manifest_digest).parse().unwrap(),
            &manifest.into(),
        )
        .await
        .unwrap();
    assert_eq!(
        airlock_oci::verify(&other, &trusted, &auth, &local())
            .await
            .unwrap(),
        Verdict::Untrusted { count: 1 }
    );
    // Another key's signature beside it: the first still verifies.
    let second = SigningKey::generate().unwrap();
    airlock_oci::sign(&signed, &second, &auth, &local())
        .await
        .expect("signed");
    assert_eq!(
        airlock_oci::verify(&signed, &trusted, &auth, &local())
            .await
            .unwrap(),
        Verdict::Signed { key: 0 }
    );
}

/// A registry that sends more than any cap allows: a tokio server on
/// loopback that speaks just enough of the distribution API for
/// `airlock_oci`, counting the body bytes it manages to write.
mod flood {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// What a flooding answer offers: 512 MiB.
    pub const OFFERED: u64 = 512 << 20;

    /// An answer's body.
    #[derive(Clone)]
    pub enum Body {
        /// These bytes, with their `Content-Length`.
        Bytes(Vec<u8>),
        /// [`OFFERED`] bytes, with a `Content-Length` that says so.
        Long,
        /// [`OFFERED`] bytes in chunks (`Transfer-Encoding: chunked`), with
        /// no length.
        Chunked,
    }

    /// An answer: its status and its body.
    pub type Answer = (u16, Body);

    /// A running server; it stops with the test's runtime.
    pub struct Server {
        /// `127.0.0.1:PORT`.
        pub addr: String,
        written: Arc<AtomicU64>,
        requests: Arc<Mutex<Vec<String>>>,
    }

    impl Server {
        /// Serves `answers` by path (in lower case, without the query);
        /// `GET /v2/` asks for a bearer token from `/token`, which `token`
        /// answers; any other path is 404.
        pub async fn start(token: Body, answers: Vec<(String, Answer)>) -> Server {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            let mut routes: HashMap<String, Answer> = answers.into_iter().collect();
            routes.insert("/token".into(), (200, token));
            let challenge =
                format!("WWW-Authenticate: Bearer realm=\"http://{addr}/token\",service=\"flood\"");
            let written = Arc::new(AtomicU64::new(0));
            let requests = Arc::new(Mutex::new(Vec::new()));
            let server = Server {
                addr,
                written: written.clone(),
                requests: requests.clone(),
            };
            let routes = Arc::new(routes);
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let (routes, challenge) = (routes.clone(), challenge.clone());
                    let (written, requests) = (written.clone(), requests.clone());
                    tokio::spawn(async move {
                        // A client that hangs up mid-answer ends it.
                        let _ = serve(stream, &routes, &challenge, &written, &requests).await;
                    });
                }
            });
            server
        }

        /// The body bytes written so far, over all answers.
        pub fn written(&self) -> u64 {
            self.written.load(Ordering::Relaxed)
        }

        /// The request heads received so far, in lower case.
        pub fn requests(&self) -> Vec<String> {
            self.requests.lock().unwrap().clone()
        }
    }

    /// Answers one request on `stream`, then closes it.
    async fn serve(
        mut stream: tokio::net::TcpStream,
        routes: &HashMap<String, Answer>,
        challenge: &str,
        written: &AtomicU64,
        requests: &Mutex<Vec<String>>,
    ) -> std::io::Result<()> {
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await?;
            if n == 0 || head.len() > 64 << 10 {
                return Ok(());
            }
            head.extend_from_slice(&buf[..n]);
        }
        let head = String::from_utf8_lossy(&head).to_lowercase();
        requests.lock().unwrap().push(head.clone());
        let mut words = head.split_whitespace();
        let method = words.next().unwrap_or_default().to_string();
        let target = words.next().unwrap_or_default();
        let path = target.split('?').next().unwrap_or_default();
        let (status, body, extra) = match (path, routes.get(path)) {
            ("/v2/", _) => (401, Body::Bytes(b"{}".to_vec()), challenge),
            (_, Some((status, body))) => (*status, body.clone(), ""),
            (_, None) => (404, Body::Bytes(b"{}".to_vec()), ""),
        };
        let length = match &body {
            Body::Bytes(bytes) => format!("Content-Length: {}", bytes.len()),
            Body::Long => format!("Content-Length: {OFFERED}"),
            Body::Chunked => "Transfer-Encoding: chunked".into(),
        };
        let mut reply = format!("HTTP/1.1 {status} X\r\nConnection: close\r\n{length}\r\n");
        if !extra.is_empty() {
            reply += &format!("{extra}\r\n");
        }
        reply += "\r\n";
        stream.write_all(reply.as_bytes()).await?;
        if method == "head" {
            return Ok(());
        }
        let chunk = vec![0u8; 64 << 10];
        match body {
            Body::Bytes(bytes) => stream.write_all(&bytes).await?,
            Body::Long | Body::Chunked => {
                let chunked = matches!(body, Body::Chunked);
                let mut sent = 0;
                while sent < OFFERED {
                    if chunked {
                        stream
                            .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                            .await?;
                    }
                    stream.write_all(&chunk).await?;
                    if chunked {
                        stream.write_all(b"\r\n").await?;
                    }
                    sent += chunk.len() as u64;
                    written.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                }
                if chunked {
                    stream.write_all(b"0\r\n\r\n").await?;
                }
            }
        }
        stream.shutdown().await
    }
}

/// The most of a flood the host may take in: the cap, the network's
/// buffers and one read, far under the [`flood::OFFERED`] 512 MiB.
const TAKEN_IN: u64 = 64 << 20;

/// The process's peak resident memory so far, in bytes (`VmHWM`).
fn peak_memory() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status");
    kib << 10
}

/// Runs `refused`, which must fail, and checks that neither the bytes the
/// server wrote nor the process's peak memory grew by more than
/// [`TAKEN_IN`]; returns the error.
async fn refused_bounded<T: std::fmt::Debug>(
    server: &flood::Server,
    refused: impl std::future::Future<Output = Result<T, airlock_oci::Error>>,
) -> String {
    let peak = peak_memory();
    let started = std::time::Instant::now();
    let error = refused.await.expect_err("refused").to_string();
    let (written, grown) = (server.written(), peak_memory().saturating_sub(peak));
    eprintln!(
        "{error}\n  server wrote {written} body bytes, peak memory grew {grown} bytes, in {:?}",
        started.elapsed()
    );
    assert!(
        written < TAKEN_IN,
        "the server wrote {written} bytes: {error}"
    );
    assert!(grown < TAKEN_IN, "peak memory grew {grown} bytes: {error}");
    error
}

/// The answers that serve a manifest naming one wasm layer of `size`
/// bytes at `hostile/tool:1`, by its tag and by its digest.
fn manifest_of(size: u64) -> Vec<(String, flood::Answer)> {
    use sha2::Digest as _;
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_IMAGE_MEDIA_TYPE,
        "config": {"mediaType": airlock_oci::WASM_CONFIG, "digest": format!("sha256:{}", "cd".repeat(32)), "size": 2},
        "layers": [{"mediaType": airlock_oci::WASM_LAYER, "digest": format!("sha256:{}", "ab".repeat(32)), "size": size}],
    });
    let bytes = serde_json::to_vec(&manifest).unwrap();
    let digest: String = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    ["1".to_string(), format!("sha256:{digest}")]
        .map(|at| {
            let answer = (200, flood::Body::Bytes(bytes.clone()));
            (format!("/v2/hostile/tool/manifests/{at}"), answer)
        })
        .into()
}

fn token() -> flood::Body {
    flood::Body::Bytes(br#"{"token": "t0ken"}"#.to_vec())
}

async fn pull_from(
    server: &flood::Server,
    tag: &str,
    auth: &Auth,
) -> Result<(), airlock_oci::Error> {
    let reference = OciRef::parse(&format!("oci://{}/hostile/tool:{tag}", server.addr)).unwrap();
    airlock_oci::pull(&reference, auth, 1 << 20, &local())
        .await
        .map(drop)
}

#[tokio::test]
async fn a_manifest_longer_than_its_cap_is_refused_by_its_content_length() {
    let at = "/v2/hostile/tool/manifests/long".to_string();
    let server = flood::Server::start(token(), vec![(at, (200, flood::Body::Long))]).await;
    let error = refused_bounded(&server, pull_from(&server, "long", &Auth::Anonymous)).await;
    assert!(error.contains("the manifest oci://"), "{error}");
    assert!(error.contains("cap of 4194304 bytes"), "{error}");
    assert!(error.contains("Content-Length 536870912"), "{error}");
    // It was asked for with the registry's token.
    let asked = server.requests();
    assert!(
        asked
            .iter()
            .any(|r| r.starts_with("get /v2/hostile/tool/manifests/long")
                && r.contains("authorization: bearer t0ken")),
        "{asked:?}"
    );
}

#[tokio::test]
async fn a_chunked_manifest_without_a_length_is_cut_off_at_its_cap() {
    let at = "/v2/hostile/tool/manifests/chunked".to_string();
    let server = flood::Server::start(token(), vec![(at, (200, flood::Body::Chunked))]).await;
    let error = refused_bounded(&server, pull_from(&server, "chunked", &Auth::Anonymous)).await;
    assert!(error.contains("the manifest oci://"), "{error}");
    assert!(error.contains("cap of 4194304 bytes"), "{error}");
    assert!(error.contains("without a Content-Length"), "{error}");
}

/// A layer's cap is its declared size. The credentials go to the token
/// service only.
#[tokio::test]
async fn a_layer_without_a_length_is_cut_off_at_its_declared_size() {
    let blob = format!("/v2/hostile/tool/blobs/sha256:{}", "ab".repeat(32));
    let mut answers = manifest_of(100_000);
    answers.push((blob.clone(), (200, flood::Body::Chunked)));
    let server = flood::Server::start(token(), answers).await;
    let auth = Auth::Basic {
        username: "u".into(),
        password: "p".into(),
    };
    let error = refused_bounded(&server, pull_from(&server, "1", &auth)).await;
    assert!(
        error.contains(&format!("the layer sha256:{}", "ab".repeat(32))),
        "{error}"
    );
    assert!(error.contains("cap of 100000 bytes"), "{error}");
    let asked = server.requests();
    assert!(
        asked
            .iter()
            .any(|r| r.starts_with("get /token?") && r.contains("authorization: basic dtpw")),
        "{asked:?}"
    );
    assert!(
        asked
            .iter()
            .filter(|r| r.starts_with("get /v2/hostile/"))
            .all(|r| r.contains("authorization: bearer t0ken") && !r.contains("basic")),
        "{asked:?}"
    );
}

/// Of an error answer, 64 KiB are read.
#[tokio::test]
async fn an_error_answer_without_a_length_is_cut_off_at_its_cap() {
    let blob = format!("/v2/hostile/tool/blobs/sha256:{}", "ab".repeat(32));
    let mut answers = manifest_of(100_000);
    answers.push((blob, (500, flood::Body::Chunked)));
    let server = flood::Server::start(token(), answers).await;
    let error = refused_bounded(&server, pull_from(&server, "1", &Auth::Anonymous)).await;
    assert!(error.contains("HTTP 500"), "{error}");
    assert!(error.contains("cap of 65536 bytes"), "{error}");
}

#[tokio::test]
async fn a_token_without_a_length_is_cut_off_at_its_cap() {
    let server = flood::Server::start(flood::Body::Chunked, Vec::new()).await;
    let error = refused_bounded(&server, pull_from(&server, "1", &Auth::Anonymous)).await;
    assert!(error.contains("the token from http://"), "{error}");
    assert!(error.contains("cap of 1048576 bytes"), "{error}");
}

/// cosign's signature manifest and its layers, under the same caps.
#[tokio::test]
async fn signatures_longer_than_their_caps_are_refused_while_read() {
    let digest = format!("sha256:{}", "ef".repeat(32));
    let signatures = format!("/v2/hostile/tool/manifests/sha256-{}.sig", "ef".repeat(32));
    let artifact = |server: &flood::Server| airlock_oci::Artifact {
        pinned: OciRef::parse(&format!("oci://{}/hostile/tool@{digest}", server.addr)).unwrap(),
        manifest_digest: digest.clone(),
        layer_digest: String::new(),
    };
    let trusted = [SigningKey::generate().unwrap().public_key()];

    let server = flood::Server::start(
        token(),
        vec![(signatures.clone(), (200, flood::Body::Chunked))],
    )
    .await;
    let error = refused_bounded(
        &server,
        airlock_oci::verify(&artifact(&server), &trusted, &Auth::Anonymous, &local()),
    )
    .await;
    assert!(error.contains("the manifest oci://"), "{error}");
    assert!(error.contains("cap of 4194304 bytes"), "{error}");

    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_IMAGE_MEDIA_TYPE,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": format!("sha256:{}", "cd".repeat(32)), "size": 2},
        "layers": [{
            "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
            "digest": format!("sha256:{}", "ab".repeat(32)),
            "size": 1000,
            "annotations": {"dev.cosignproject.cosign/signature": "AAAA"},
        }],
    });
    let server = flood::Server::start(
        token(),
        vec![
            (
                signatures,
                (
                    200,
                    flood::Body::Bytes(serde_json::to_vec(&manifest).unwrap()),
                ),
            ),
            (
                format!("/v2/hostile/tool/blobs/sha256:{}", "ab".repeat(32)),
                (200, flood::Body::Long),
            ),
        ],
    )
    .await;
    let error = refused_bounded(
        &server,
        airlock_oci::verify(&artifact(&server), &trusted, &Auth::Anonymous, &local()),
    )
    .await;
    assert!(error.contains("the layer sha256:"), "{error}");
    assert!(error.contains("cap of 1000 bytes"), "{error}");
}
