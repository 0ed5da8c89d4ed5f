//! The Python interpreter the MCP tests run, with their pinned client: a
//! virtual environment under the target directory, created on first use
//! (`python3 -m venv`, then `pip install mcp==2.3.0`) and shared by every
//! test binary that includes this file. A file lock keeps two test binaries
//! from building it at once; a marker written last says it is complete.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The client the tests are written against.
const PIN: &str = "mcp==2.3.0";

/// Where the environment lives: the target directory's scratch space for
/// integration tests, the same for every test binary of the workspace.
const VENV: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/mcp-venv");

/// The environment's interpreter, with the pinned `mcp` importable;
/// created on first use. Panics with one line saying what is missing when
/// it cannot be.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| provision(Path::new(VENV)).unwrap_or_else(|message| panic!("{message}")))
}

fn provision(venv: &Path) -> Result<PathBuf, String> {
    let python = venv.join("bin").join("python");
    let marker = venv.join("provisioned");
    if ready(&python, &marker) {
        return Ok(python);
    }
    let parent = venv
        .parent()
        .ok_or("the environment's directory has no parent")?;
    std::fs::create_dir_all(parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    let lock_path = venv.with_extension("lock");
    let lock = File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    // Another test binary may have built it while this one waited.
    if ready(&python, &marker) {
        return Ok(python);
    }
    check_python3()?;
    if venv.exists() {
        std::fs::remove_dir_all(venv)
            .map_err(|e| format!("cannot remove the unfinished {}: {e}", venv.display()))?;
    }
    let created = run(Command::new("python3").args(["-m", "venv"]).arg(venv))?;
    if !created.status.success() {
        return Err(format!(
            "`python3 -m venv` failed (Debian/Ubuntu: apt-get install python3-venv): {}",
            last_line(&created)
        ));
    }
    pip_install(&python, PIN, None)?;
    if !imports_the_pin(&python) {
        return Err(format!(
            "{PIN} was installed into {} but does not import",
            venv.display()
        ));
    }
    std::fs::write(&marker, PIN).map_err(|e| format!("cannot write {}: {e}", marker.display()))?;
    Ok(python)
}

/// Installs `pin` with the environment whose interpreter is `python`:
/// into that environment, or into `target` (a directory for `PYTHONPATH`).
pub fn pip_install(python: &Path, pin: &str, target: Option<&Path>) -> Result<(), String> {
    let target: &[&std::ffi::OsStr] = match target {
        Some(dir) => &["--target".as_ref(), dir.as_os_str()],
        None => &[],
    };
    let installed = run(Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(target)
        .arg(pin))?;
    if !installed.status.success() {
        return Err(format!(
            "`pip install {pin}` with {} failed: {}",
            python.display(),
            last_line(&installed)
        ));
    }
    Ok(())
}

/// Whether the environment is complete and still works (its interpreter
/// may be gone, with the Python it was made from).
fn ready(python: &Path, marker: &Path) -> bool {
    std::fs::read_to_string(marker).is_ok_and(|pin| pin == PIN) && imports_the_pin(python)
}

fn imports_the_pin(python: &Path) -> bool {
    let version = PIN.trim_start_matches("mcp==");
    Command::new(python)
        .args([
            "-c",
            &format!(
                "import importlib.metadata, mcp, sys; \
                 sys.exit(importlib.metadata.version('mcp') != {version:?})"
            ),
        ])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// `python3` is there, 3.10 or later, with `venv` and `ensurepip` (which
/// Debian and Ubuntu package apart).
fn check_python3() -> Result<(), String> {
    const NEEDED: &str = "the MCP tests need python3 (3.10+) with venv on PATH: apt-get install python3 python3-venv";
    let probe = Command::new("python3")
        .args([
            "-c",
            "import sys\n\
             if sys.version_info < (3, 10): sys.exit('too old: ' + sys.version.split()[0])\n\
             try:\n    import venv, ensurepip\n\
             except ImportError as e: sys.exit('no venv: ' + str(e))",
        ])
        .output();
    match probe {
        Err(e) => Err(format!("{NEEDED} (python3: {e})")),
        Ok(out) if !out.status.success() => Err(format!("{NEEDED} ({})", last_line(&out))),
        Ok(_) => Ok(()),
    }
}

fn run(command: &mut Command) -> Result<Output, String> {
    command
        .env("PYTHONNOUSERSITE", "1")
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", command.get_program()))
}

/// The last line a failed command wrote, on stderr or else stdout.
fn last_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    [stderr, stdout]
        .iter()
        .filter_map(|text| text.lines().rev().find(|l| !l.trim().is_empty()))
        .map(|l| l.trim().to_string())
        .next()
        .unwrap_or_else(|| out.status.to_string())
}
