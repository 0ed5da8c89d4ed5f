//! Programs from Debian packages for the tests: found on PATH, or else
//! fetched with `apt-get download` (no root needed) and unpacked under the
//! target directory on first use, with the libraries those packages carry
//! found through `LD_LIBRARY_PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A program to run.
#[derive(Clone, Debug)]
pub struct Program {
    /// The executable.
    pub path: PathBuf,
    /// Where its unpacked libraries are (none for one found on PATH).
    libs: Option<PathBuf>,
}

impl Program {
    /// A command running it.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.path);
        if let Some(libs) = &self.libs {
            command.env("LD_LIBRARY_PATH", libs);
        }
        command
    }
}

/// `name` from PATH, or else `packages` unpacked into `dir` and the
/// program at `dir/root/BINARY` (`usr/bin/NAME` or `usr/sbin/NAME`).
pub fn program(name: &str, packages: &[&str], dir: &Path) -> Result<Program, String> {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    if let Some(path) = on_path {
        return Ok(Program { path, libs: None });
    }
    let root = dir.join("root");
    let unpacked = || {
        ["usr/bin", "usr/sbin"]
            .iter()
            .map(|bin| root.join(bin).join(name))
            .find(|p| p.exists())
    };
    let program = |path| Program {
        path,
        libs: Some(root.join("usr/lib/x86_64-linux-gnu")),
    };
    if let Some(path) = unpacked() {
        return Ok(program(path));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let missing = format!(
        "these tests need Debian's {}: install it (apt-get install {}), or have apt-get able \
         to download it",
        packages[0],
        packages.join(" ")
    );
    let downloaded = Command::new("apt-get")
        .arg("download")
        .args(packages)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("{missing} (apt-get: {e})"))?;
    if !downloaded.status.success() {
        return Err(format!(
            "{missing}: {}",
            String::from_utf8_lossy(&downloaded.stderr).trim()
        ));
    }
    let debs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "deb"))
        .collect();
    for deb in &debs {
        let extracted = Command::new("dpkg-deb")
            .arg("-x")
            .arg(deb)
            .arg(&root)
            .status()
            .map_err(|e| format!("{missing} (dpkg-deb: {e})"))?;
        if !extracted.success() {
            return Err(format!(
                "{missing}: dpkg-deb could not unpack {}",
                deb.display()
            ));
        }
    }
    unpacked()
        .map(program)
        .ok_or_else(|| format!("{missing}: the packages hold no {name}"))
}
