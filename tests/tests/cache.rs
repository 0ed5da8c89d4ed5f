//! The compiled-artifact cache: a tool compiled once is listed from the
//! cache afterwards and loaded on its first use; an entry that does not
//! check out (a changed artifact, a link, a directory others can write) is
//! not loaded, and the tool still works.

use airlock_host::PermissionMode;
use airlock_host::{Airlock, Config, Engine, Grants, Registry, Tool, ToolOrigin, WasmTool};
use airlock_tests::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn ls_bytes() -> &'static [u8] {
    let (_, bytes) = airlock_host::bundled::BUNDLED
        .iter()
        .find(|(package, _)| *package == "airlock-tool-ls")
        .expect("ls is bundled");
    bytes
}

fn engine(dir: &Path) -> Engine {
    Engine::from_config(&Config {
        cache_dir: Some(dir.to_path_buf()),
        ..config()
    })
    .unwrap()
}

async fn load(engine: &Engine) -> Arc<WasmTool> {
    let tool = WasmTool::load(engine, ls_bytes(), ToolOrigin::Bundled("ls".into()))
        .await
        .expect("ls loads");
    Arc::new(tool)
}

/// The cache's files with extension `ext`.
fn entries(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    found.retain(|p| p.extension().is_some_and(|e| e == ext));
    found
}

/// Lists a workspace with `tool` through the whole pipeline, proving it runs.
async fn lists(engine: &Engine, tool: Arc<WasmTool>) {
    let ws = workspace(&[("marker.txt", "x")]);
    let mut config = workspace_config(ws.path());
    config.permissions.default_mode = PermissionMode::BypassPermissions;
    let grants = Arc::new(Grants::from_config(&config).unwrap());
    let mut registry = Registry::new();
    registry.add(tool, grants.for_tool("ls").unwrap()).unwrap();
    let airlock = Airlock::from_parts(config.clone(), engine.clone(), grants, registry)
        .await
        .unwrap();
    let mut cx = airlock.context();
    let listed = ok_text(&call(&airlock, &mut cx, "ls", serde_json::json!({})).await);
    assert!(listed.contains("marker.txt"), "{listed}");
}

#[tokio::test]
async fn a_compiled_tool_is_listed_from_the_cache_and_loaded_on_first_use() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("artifacts");
    let first = load(&engine(&dir)).await;
    assert!(first.is_ready(), "a tool compiled at load is ready");
    assert_eq!(entries(&dir, "cwasm").len(), 1);
    assert_eq!(entries(&dir, "json").len(), 1);
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "the cache is private");

    let engine = engine(&dir);
    let second = load(&engine).await;
    assert!(!second.is_ready(), "a cached tool waits for its first use");
    assert_eq!(second.descriptor(), first.descriptor());
    lists(&engine, second.clone()).await;
    assert!(second.is_ready());
}

#[tokio::test]
async fn a_changed_artifact_is_not_loaded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("artifacts");
    load(&engine(&dir)).await;
    let artifact = &entries(&dir, "cwasm")[0];
    let mut bytes = std::fs::read(artifact).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(artifact, &bytes).unwrap();

    let engine = engine(&dir);
    let tool = load(&engine).await;
    lists(&engine, tool).await;
    assert_ne!(
        std::fs::read(artifact).unwrap(),
        bytes,
        "the entry is rebuilt from the component"
    );
}

#[tokio::test]
async fn links_and_shared_directories_are_not_trusted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("artifacts");
    load(&engine(&dir)).await;
    // An entry replaced by a link to a file elsewhere is ignored.
    let sidecar = &entries(&dir, "json")[0];
    let elsewhere = tmp.path().join("elsewhere.json");
    std::fs::rename(sidecar, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, sidecar).unwrap();
    let tool = load(&engine(&dir)).await;
    assert!(tool.is_ready(), "the linked record is not used");

    // A directory others can write is not used at all.
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let engine = engine(&shared);
    assert_eq!(engine.cache_dir(), None);
    load(&engine).await;
    assert!(entries(&shared, "cwasm").is_empty());
}

#[tokio::test]
async fn the_cache_can_be_switched_off() {
    let engine = Engine::from_config(&Config {
        artifact_cache: false,
        ..config()
    })
    .unwrap();
    assert_eq!(engine.cache_dir(), None);
    assert!(load(&engine).await.is_ready());
}
