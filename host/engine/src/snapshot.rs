//! What the bundled tools said about themselves at build time: the
//! descriptor and imports of each, as its `describe()` gave them, keyed by
//! the BLAKE3 digest of the exact component bytes they came from
//! (`host/bundled/bundled-descriptors.json`, committed and embedded by
//! `airlock-bundled`, and parsed here; a test checks
//! it against every bundled tool and says how to regenerate it).
//!
//! A component whose digest is in the snapshot can be listed before it is
//! compiled (see `WasmTool::list_from`): the snapshot is part of the
//! binary, like the bundled bytes themselves, and the component is still
//! compiled and asked to describe itself before its first use. A component
//! whose digest is not there (another build, a stale snapshot) is compiled
//! first, as any other.

use super::linker::Needs;
use airlock_core::descriptor::Descriptor;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One component, as it described itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Described {
    /// The package it was built from (for people reading the file).
    pub package: String,
    /// The BLAKE3 digest of its bytes, as hex.
    pub blake3: String,
    /// What its `describe()` returned.
    pub descriptor: Descriptor,
    /// Its imports, checked against the linker's allowlist.
    pub(crate) imports: Vec<(String, Needs)>,
}

/// Descriptors by component digest.
#[derive(Debug, Default)]
pub struct Snapshot {
    by_digest: HashMap<String, Described>,
}

impl Snapshot {
    /// The snapshot in `text` (the committed JSON; empty, with a warning,
    /// if it cannot be parsed: every component is then compiled first).
    pub fn parse(text: &str) -> Snapshot {
        let entries = serde_json::from_str(text).unwrap_or_else(|e| {
            tracing::warn!("the bundled tools' descriptors cannot be read: {e}");
            Vec::new()
        });
        Snapshot::of(entries)
    }

    /// A snapshot of `entries`.
    pub fn of(entries: Vec<Described>) -> Snapshot {
        let by_digest = entries.into_iter().map(|d| (d.blake3.clone(), d)).collect();
        Snapshot { by_digest }
    }

    /// The entry for the component whose digest is `digest`.
    pub(crate) fn get(&self, digest: &str) -> Option<&Described> {
        self.by_digest.get(digest)
    }
}

/// Test helpers for the crates above: a component described now.
#[cfg(any(test, feature = "test-support"))]
pub mod testing {
    pub use super::Described;
    use crate::linker;
    use crate::{Bytes, Engine, WasmTool};
    use airlock_core::config::Limits;
    use airlock_core::tool::{Tool, ToolOrigin};

    /// What the component `bytes` (built from `package`) says about itself
    /// now: compiled (no cache) and asked.
    pub async fn describe_now(package: &str, bytes: &[u8]) -> Described {
        let engine = Engine::new(&Limits::default()).unwrap();
        let origin = ToolOrigin::Bundled(package.to_string());
        let tool = WasmTool::load(&engine, Bytes::copy_from_slice(bytes), origin)
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
}

#[cfg(test)]
mod tests {
    use super::testing::describe_now;

    /// The command that writes the snapshot anew.
    const BLESS: &str = "AIRLOCK_BLESS=1 cargo test -p airlock-engine --lib snapshot";

    #[tokio::test]
    async fn the_snapshot_is_what_every_bundled_tool_describes_now() {
        let mut entries = Vec::new();
        for (package, bytes) in airlock_bundled::BUNDLED {
            entries.push(describe_now(package, bytes).await);
        }
        entries.sort_by(|a, b| a.package.cmp(&b.package));
        let text = serde_json::to_string_pretty(&entries).unwrap() + "\n";
        if std::env::var_os("AIRLOCK_BLESS").is_some() {
            std::fs::write(airlock_bundled::DESCRIPTORS_PATH, &text).unwrap();
            return;
        }
        assert!(
            text == airlock_bundled::DESCRIPTORS,
            "host/bundled/bundled-descriptors.json is not what the bundled tools describe now \
             (a guest tool, the SDK or the host's cleaning of descriptors changed): \
             regenerate it with\n\n    {BLESS}\n\nand commit it. Until then the bundled \
             tools are compiled before `airlock mcp` lists them."
        );
    }

    /// The paths of this machine that a build could leave in a component:
    /// the checkout, the cargo home, and the toolchain (whose `rust-src`
    /// sources rustc names by their place when the component is installed).
    fn machine_paths() -> Vec<String> {
        let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .unwrap()
            .to_path_buf();
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cargo")))
            .unwrap();
        let sysroot = std::process::Command::new("rustc")
            .args(["--print", "sysroot"])
            .current_dir(&workspace)
            .output()
            .expect("rustc runs");
        let sysroot = String::from_utf8(sysroot.stdout)
            .unwrap()
            .trim()
            .to_string();
        assert!(!sysroot.is_empty());
        vec![
            workspace.display().to_string(),
            cargo_home.display().to_string(),
            sysroot,
        ]
    }

    /// Otherwise the committed digests hold only on a machine like the one
    /// that recorded them, and everywhere else the bundled tools are
    /// compiled before `airlock mcp` lists them.
    #[test]
    fn the_bundled_components_name_no_path_of_the_machine_that_built_them() {
        let paths = machine_paths();
        for (package, bytes) in airlock_bundled::BUNDLED {
            for path in &paths {
                let needle = path.as_bytes();
                assert!(
                    !bytes.windows(needle.len()).any(|w| w == needle),
                    "{package} names {path}: its bytes depend on the machine that built it"
                );
            }
        }
    }
}
