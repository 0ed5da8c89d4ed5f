//! What a registry may serve that is not a component artifact, against a
//! real registry on loopback (Debian's `docker-registry`): each is refused
//! with an error that names what is wrong, and a signature is bound to the
//! manifest digest it names.

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
