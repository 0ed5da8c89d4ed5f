//! The MCP conformance suite, for the conformance test: installed from
//! `tests/conformance/package.json` with its lock file (`npm ci`, by the
//! Node of `node.rs`), under the target directory. Made on first use,
//! locked against a second test binary, a marker written last.

use super::node::{Node, node};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Where the suite is installed.
const SUITE: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/mcp-conformance");

/// The suite's package and lock file, in the repository.
const PACKAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/conformance");

/// How to run the suite: Node, and the suite's command-line entry point.
pub struct Suite {
    /// The `node` executable (24.x).
    pub node: PathBuf,
    /// The suite's `dist/index.js`.
    pub cli: PathBuf,
}

/// The suite, installed on first use. Panics with one line saying what is
/// missing when it cannot be.
pub fn suite() -> &'static Suite {
    static SUITE_ONCE: OnceLock<Suite> = OnceLock::new();
    SUITE_ONCE.get_or_init(|| provision().unwrap_or_else(|message| panic!("{message}")))
}

fn provision() -> Result<Suite, String> {
    let dir = Path::new(SUITE);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let lock_path = dir.with_extension("lock");
    let lock = File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;

    let Node { node, npm } = node()?;
    let cli = dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let lock_file = Path::new(PACKAGE).join("package-lock.json");
    let wanted = std::fs::read(&lock_file)
        .map_err(|e| format!("cannot read {}: {e}", lock_file.display()))?;
    let marker = dir.join("installed-lock.json");
    if std::fs::read(&marker).is_ok_and(|installed| installed == wanted) && cli.is_file() {
        return Ok(Suite { node, cli });
    }
    for file in ["package.json", "package-lock.json"] {
        let from = Path::new(PACKAGE).join(file);
        std::fs::copy(&from, dir.join(file))
            .map_err(|e| format!("cannot copy {}: {e}", from.display()))?;
    }
    let installed = Command::new(&node)
        .arg(&npm)
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", node.display()))?;
    if !installed.status.success() {
        return Err(format!(
            "`npm ci` of the conformance suite in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&installed.stderr).trim()
        ));
    }
    if !cli.is_file() {
        return Err(format!("`npm ci` did not install {}", cli.display()));
    }
    std::fs::write(&marker, &wanted)
        .map_err(|e| format!("cannot write {}: {e}", marker.display()))?;
    Ok(Suite { node, cli })
}
