//! Test helpers for the crates above (feature `test-support`): tools
//! listed from a snapshot under a throwaway configuration.

use super::*;
use crate::Airlock;
use airlock_core::config::Config;
use airlock_core::permissions::PermissionMode;
use airlock_engine::testing::{Described, describe_now};
use airlock_engine::{Engine, Snapshot};

/// A workspace holding `a.txt`, a tool directory holding `files`,
/// and an empty artifact cache.
pub struct Setup {
    /// The directory holding everything.
    pub tmp: tempfile::TempDir,
    /// The configuration.
    pub config: Config,
    /// Its grants.
    pub grants: Arc<Grants>,
    /// Its engine.
    pub engine: Engine,
}

/// [`Setup`] with `files` in its tool directory.
pub fn setup(files: &[(&str, &[u8])]) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let (ws, tools) = (tmp.path().join("ws"), tmp.path().join("tools"));
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "hello").unwrap();
    std::fs::create_dir(&tools).unwrap();
    for (name, bytes) in files {
        std::fs::write(tools.join(name), bytes).unwrap();
    }
    let mut config = Config {
        workspace: Some(ws),
        tool_dirs: Some(vec![tools]),
        bundled_tools: false,
        cache_dir: Some(tmp.path().join("cache")),
        approvals: Some(tmp.path().join("approved.json")),
        ..Config::default()
    };
    config.permissions.default_mode = PermissionMode::BypassPermissions;
    let grants = Arc::new(Grants::from_config(&config).unwrap());
    let engine = Engine::from_config(&config).unwrap();
    Setup {
        tmp,
        config,
        grants,
        engine,
    }
}

impl Setup {
    /// A host over `registry` under this setup's configuration.
    pub async fn airlock(&self, registry: Registry) -> Airlock {
        Airlock::from_parts(
            self.config.clone(),
            self.engine.clone(),
            self.grants.clone(),
            registry,
        )
        .await
        .unwrap()
    }
}

/// The bundled `ls` component (feature `bundled-tools`).
pub fn ls_bytes() -> &'static [u8] {
    airlock_bundled::BUNDLED
        .iter()
        .find(|(p, _)| *p == "airlock-tool-ls")
        .map(|(_, bytes)| *bytes)
        .unwrap()
}

/// `s`'s tools, listed from a snapshot of `entries`.
pub async fn listed(s: &Setup, entries: Vec<Described>) -> Registry {
    let snapshot = Arc::new(Snapshot::of(entries));
    Registry::list_from(&s.engine, &s.config, &s.grants, snapshot).await
}

/// What the bundled `ls` says about itself now.
pub async fn describe_ls() -> Described {
    describe_now("airlock-tool-ls", ls_bytes()).await
}
