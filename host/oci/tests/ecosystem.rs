//! Airlock and the wasm ecosystem's OCI client (`oci-wasm`, which wkg and
//! Wassette use) against one real registry on loopback: a component each
//! publishes, the other pulls, byte for byte.

#[path = "../../../tests/support/debian.rs"]
mod debian;
#[path = "../../../tests/support/registry.rs"]
#[allow(dead_code, reason = "shared with the tests that tamper with storage")]
mod registry;

use airlock_oci::{Auth, OciRef, Options};
use oci_client_ecosystem::client::{ClientConfig, ClientProtocol};
use oci_client_ecosystem::secrets::RegistryAuth;
use oci_client_ecosystem::{Client, Reference};
use oci_wasm::{WasmClient, WasmConfig};

/// A real component: the test guest `patient`.
fn component() -> Vec<u8> {
    std::fs::read(airlock_tests::guests::PATIENT).expect("the patient guest is built")
}

fn wasm_client() -> WasmClient {
    let _ = rustls::crypto::ring::default_provider().install_default();
    WasmClient::new(Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    }))
}

fn local() -> Options {
    Options {
        insecure: true,
        ..Options::default()
    }
}

#[tokio::test]
async fn what_oci_wasm_pushes_airlock_pulls_and_the_other_way_round() {
    let registry = registry::Registry::start();
    let bytes = component();
    let client = wasm_client();

    // oci-wasm pushes; Airlock pulls.
    let theirs: Reference = format!("{}/ecosystem/patient:1", registry.addr)
        .parse()
        .unwrap();
    let (config, layer) = WasmConfig::from_raw_component(bytes.clone(), None).unwrap();
    client
        .push(&theirs, &RegistryAuth::Anonymous, layer, config, None)
        .await
        .expect("oci-wasm pushes");
    let reference = OciRef::parse(&format!("oci://{theirs}")).unwrap();
    let pulled = airlock_oci::pull(&reference, &Auth::Anonymous, 10 << 20, &local())
        .await
        .expect("Airlock pulls what oci-wasm pushed");
    assert_eq!(pulled.bytes, bytes);

    // Airlock publishes; oci-wasm pulls, and reads the config as its own.
    let ours = OciRef::parse(&format!("oci://{}/airlock/patient:1", registry.addr)).unwrap();
    let info = airlock_oci::component_info(&bytes).unwrap();
    let artifact = airlock_oci::publish(&ours, &bytes, &info, &Auth::Anonymous, &local())
        .await
        .expect("Airlock publishes");
    let pinned: Reference = format!(
        "{}/airlock/patient@{}",
        registry.addr, artifact.manifest_digest
    )
    .parse()
    .unwrap();
    let image = client
        .pull(&pinned, &RegistryAuth::Anonymous)
        .await
        .expect("oci-wasm pulls what Airlock published");
    assert_eq!(image.layers[0].data.as_ref(), bytes.as_slice());
    let (_, config, _) = client
        .pull_manifest_and_config(&pinned, &RegistryAuth::Anonymous)
        .await
        .expect("oci-wasm reads Airlock's manifest and config");
    assert_eq!(config.os, "wasip2");
    assert_eq!(
        config.layer_digests,
        std::slice::from_ref(&artifact.layer_digest)
    );
    let component = config.component.expect("the component's interfaces");
    assert_eq!(component.imports, info.imports);
    assert_eq!(component.exports, info.exports);
}
