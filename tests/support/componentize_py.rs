//! componentize-py, pinned, installed into the tests' Python environment
//! (see `python.rs`) on first use.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The release the Python SDK is tested with (`airlock build` names it).
pub const PIN: &str = "componentize-py==0.25.1";

/// The `componentize-py` executable, installed when missing. Panics with
/// one line saying why when it cannot be.
pub fn componentize_py() -> PathBuf {
    install(super::python::python()).unwrap_or_else(|message| panic!("{message}"))
}

fn install(python: &Path) -> Result<PathBuf, String> {
    let version = PIN.trim_start_matches("componentize-py==");
    let bin = python.with_file_name("componentize-py");
    let installed = || {
        Command::new(python)
            .args([
                "-c",
                &format!(
                    "import importlib.metadata, sys; \
                     sys.exit(importlib.metadata.version('componentize-py') != {version:?})"
                ),
            ])
            .env("PYTHONNOUSERSITE", "1")
            .output()
            .is_ok_and(|out| out.status.success())
    };
    if installed() && bin.is_file() {
        return Ok(bin);
    }
    super::python::pip_install(python, PIN, None)?;
    if !bin.is_file() {
        return Err(format!(
            "`pip install {PIN}` did not install {}",
            bin.display()
        ));
    }
    Ok(bin)
}
