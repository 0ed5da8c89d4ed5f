//! What the bundled tools said about themselves at build time: the
//! descriptor and imports of each, as its `describe()` gave them, keyed by
//! the BLAKE3 digest of the exact component bytes they came from
//! (`host/bundled-descriptors.json`, committed and embedded; a test checks
//! it against every bundled tool and says how to regenerate it).
//!
//! A component whose digest is in the snapshot can be listed before it is
//! compiled (see `WasmTool::list_from`): the snapshot is part of the
//! binary, like the bundled bytes themselves, and the component is still
//! compiled and asked to describe itself before its first use. A component
//! whose digest is not there (another build, a stale snapshot) is compiled
//! first, as any other.

use super::linker::Needs;
use crate::descriptor::Descriptor;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// The snapshot as committed.
const BUNDLED_JSON: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/bundled-descriptors.json"
));

/// One component, as it described itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Described {
    /// The package it was built from (for people reading the file).
    pub(crate) package: String,
    /// The BLAKE3 digest of its bytes, as hex.
    pub(crate) blake3: String,
    /// What its `describe()` returned.
    pub(crate) descriptor: Descriptor,
    /// Its imports, checked against the linker's allowlist.
    pub(crate) imports: Vec<(String, Needs)>,
}

/// Descriptors by component digest.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    by_digest: HashMap<String, Described>,
}

impl Snapshot {
    /// The snapshot embedded in this binary (empty, with a warning, if it
    /// cannot be parsed: every component is then compiled first).
    pub(crate) fn bundled() -> Arc<Snapshot> {
        static BUNDLED: OnceLock<Arc<Snapshot>> = OnceLock::new();
        BUNDLED
            .get_or_init(|| {
                let entries = serde_json::from_str(BUNDLED_JSON).unwrap_or_else(|e| {
                    tracing::warn!("the bundled tools' descriptors cannot be read: {e}");
                    Vec::new()
                });
                Arc::new(Snapshot::of(entries))
            })
            .clone()
    }

    /// A snapshot of `entries`.
    pub(crate) fn of(entries: Vec<Described>) -> Snapshot {
        let by_digest = entries.into_iter().map(|d| (d.blake3.clone(), d)).collect();
        Snapshot { by_digest }
    }

    /// The entry for the component whose digest is `digest`.
    pub(crate) fn get(&self, digest: &str) -> Option<&Described> {
        self.by_digest.get(digest)
    }

    /// The committed text, for the test that checks it.
    #[cfg(test)]
    pub(crate) fn committed_text() -> &'static str {
        BUNDLED_JSON
    }
}

#[cfg(all(test, feature = "bundled-tools"))]
pub(crate) mod tests {
    use super::*;
    use crate::config::Limits;
    use crate::engine::{Engine, WasmTool, linker};
    use crate::tool::{Tool, ToolOrigin};

    /// The command that writes the snapshot anew.
    const BLESS: &str = "AIRLOCK_BLESS=1 cargo test -p airlock-host --lib engine::snapshot";

    /// What the bundled tool built from `package` says about itself now:
    /// compiled (no cache) and asked.
    pub(crate) async fn describe_now(package: &str) -> Described {
        let (_, bytes) = crate::bundled::BUNDLED
            .iter()
            .find(|(p, _)| *p == package)
            .unwrap_or_else(|| panic!("{package} is bundled"));
        let engine = Engine::new(&Limits::default()).unwrap();
        let origin = ToolOrigin::Bundled(package.to_string());
        let tool = WasmTool::load(&engine, Arc::from(*bytes), origin)
            .await
            .unwrap_or_else(|e| panic!("{package} loads: {e}"));
        let imports = tool
            .imports()
            .map(|name| (name.to_string(), linker::classify_import(name).unwrap()))
            .collect();
        Described {
            package: package.to_string(),
            blake3: tool.digest().unwrap().to_string(),
            descriptor: tool.descriptor().clone(),
            imports,
        }
    }

    #[tokio::test]
    async fn the_snapshot_is_what_every_bundled_tool_describes_now() {
        let mut entries = Vec::new();
        for (package, _) in crate::bundled::BUNDLED {
            entries.push(describe_now(package).await);
        }
        entries.sort_by(|a, b| a.package.cmp(&b.package));
        let text = serde_json::to_string_pretty(&entries).unwrap() + "\n";
        if std::env::var_os("AIRLOCK_BLESS").is_some() {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/bundled-descriptors.json");
            std::fs::write(path, &text).unwrap();
            return;
        }
        assert!(
            text == Snapshot::committed_text(),
            "host/bundled-descriptors.json is not what the bundled tools describe now \
             (a guest tool, the SDK or the host's cleaning of descriptors changed): \
             regenerate it with\n\n    {BLESS}\n\nand commit it. Until then the bundled \
             tools are compiled before `airlock mcp` lists them."
        );
    }
}
