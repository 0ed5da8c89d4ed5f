//! Native programs the operator grants to `bash` (`[tools.bash] programs`):
//! found on Airlock's `PATH` when the configuration loads, and refused when
//! a tool could replace them. How they are confined is not this crate's:
//! it only says which programs a call may run.

use crate::config::{Config, ToolConfig};
use crate::error::LoadError;
use std::path::{Path, PathBuf};

/// The one tool native programs may be granted to.
pub const SHELL: &str = "bash";

/// A program granted to `bash`: the name the shell runs it by, and the
/// file (canonical) that runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantedProgram {
    /// Its name in the shell (`git`).
    pub name: String,
    /// The file.
    pub path: PathBuf,
}

/// What native programs a call may run, and the binary that confines
/// them (`None`: the running binary).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramGrants {
    /// The programs.
    pub granted: Vec<GrantedProgram>,
    /// The sandbox helper (`sandbox_helper`).
    pub helper: Option<PathBuf>,
}

impl ProgramGrants {
    /// Whether no program is granted.
    pub fn is_empty(&self) -> bool {
        self.granted.is_empty()
    }

    /// The granted programs' names.
    pub fn names(&self) -> Vec<&str> {
        self.granted.iter().map(|p| p.name.as_str()).collect()
    }
}

/// The programs `config` grants, each found and checked: a name on
/// `PATH`, or an absolute path, naming an executable file that lies in no
/// directory in `writable` (one a tool may write: it could be replaced).
/// Programs granted to any tool but `bash`, or under `"*"`, are refused.
pub(crate) fn granted(config: &Config, writable: &[&Path]) -> Result<ProgramGrants, LoadError> {
    granted_on(config, writable, std::env::var_os("PATH").as_deref())
}

/// [`granted`] with names looked up on `path`.
fn granted_on(
    config: &Config,
    writable: &[&Path],
    path: Option<&std::ffi::OsStr>,
) -> Result<ProgramGrants, LoadError> {
    if let Some((tool, _)) =
        (config.tools.iter()).find(|(t, c)| *t != SHELL && !c.programs.is_empty())
    {
        return Err(LoadError::Grants(format!(
            "[tools.{tool}] programs: native programs may be granted to `{SHELL}` only \
             ([tools.{SHELL}] programs = [...])"
        )));
    }
    let mut granted: Vec<GrantedProgram> = Vec::new();
    for asked in ToolConfig::of(&config.tools, SHELL).programs {
        let refuse =
            |why: String| LoadError::Grants(format!("[tools.{SHELL}] programs: {asked:?} {why}"));
        let found = if asked.contains('/') {
            Path::new(&asked)
                .is_absolute()
                .then(|| PathBuf::from(&asked))
                .ok_or_else(|| refuse("is neither a name nor an absolute path".into()))?
        } else {
            find(&asked, path).ok_or_else(|| refuse("is not on PATH".into()))?
        };
        if in_shims(&found) {
            let name = found.file_name().unwrap_or_default();
            let without_shims = std::env::join_paths(
                (path.into_iter().flat_map(std::env::split_paths)).filter(|dir| !is_shims(dir)),
            )
            .ok();
            let other = find(&name.to_string_lossy(), without_shims.as_deref())
                .map(|p| format!(", or the one on PATH after the shims: {}", p.display()))
                .unwrap_or_default();
            return Err(refuse(format!(
                "({}) is a version manager's shim (pyenv, rbenv, asdf), which starts the \
                 real program from a directory a confined program cannot read; grant the real \
                 program by its absolute path (for pyenv: `pyenv which {}`){other}",
                found.display(),
                name.to_string_lossy()
            )));
        }
        let file = found
            .canonicalize()
            .map_err(|e| refuse(format!("cannot be found: {e}")))?;
        if !is_executable(&file) {
            return Err(refuse(format!(
                "({}) is not an executable file",
                file.display()
            )));
        }
        if let Some(dir) = writable.iter().find(|dir| file.starts_with(dir)) {
            return Err(refuse(format!(
                "({}) lies inside {}, which tools may write, so it could be replaced",
                file.display(),
                dir.display()
            )));
        }
        let name = Path::new(&asked)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if granted.iter().any(|g| g.name == name) {
            return Err(refuse("is granted twice".into()));
        }
        granted.push(GrantedProgram { name, path: found });
    }
    Ok(ProgramGrants {
        granted,
        helper: config.sandbox_helper.clone(),
    })
}

/// `name` on `path` (a `PATH` value), as a shell finds it.
pub fn find(name: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    path.into_iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// Whether `path` lies in a `shims` directory, where version managers
/// (pyenv, rbenv, nodenv, asdf, mise) put scripts or links that choose
/// and start the real program from their own directories.
fn in_shims(path: &Path) -> bool {
    path.parent().is_some_and(is_shims)
}

fn is_shims(dir: &Path) -> bool {
    dir.file_name().is_some_and(|name| name == "shims")
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    path.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(tool: &str, programs: &[&str]) -> Config {
        let mut config = Config::default();
        let tc = config.tools.entry(tool.into()).or_default();
        tc.programs = programs.iter().map(|p| p.to_string()).collect();
        config
    }

    fn refusal(config: &Config, writable: &[&Path]) -> String {
        granted(config, writable).unwrap_err().to_string()
    }

    #[test]
    fn names_are_found_on_path_and_absolute_paths_taken_as_given() {
        let granted = granted(&asking(SHELL, &["sh", "/usr/bin/env"]), &[]).unwrap();
        assert_eq!(granted.names(), ["sh", "env"]);
        assert!(granted.granted[0].path.is_absolute());
        assert_eq!(granted.granted[1].path, Path::new("/usr/bin/env"));
    }

    #[test]
    fn only_bash_is_granted_programs_and_each_once() {
        assert!(refusal(&asking("grep", &["sh"]), &[]).contains("`bash` only"));
        assert!(refusal(&asking("*", &["sh"]), &[]).contains("`bash` only"));
        assert!(refusal(&asking(SHELL, &["sh", "/bin/sh"]), &[]).contains("granted twice"));
    }

    #[test]
    fn what_cannot_be_found_or_could_be_replaced_is_refused() {
        let missing = refusal(&asking(SHELL, &["no-such-program-anywhere"]), &[]);
        assert!(missing.contains("is not on PATH"), "{missing}");
        let relative = refusal(&asking(SHELL, &["bin/tool"]), &[]);
        assert!(
            relative.contains("neither a name nor an absolute path"),
            "{relative}"
        );
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        let tool = dir.join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        let plain = refusal(&asking(SHELL, &[tool.to_str().unwrap()]), &[]);
        assert!(plain.contains("is not an executable file"), "{plain}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
            let inside = refusal(&asking(SHELL, &[tool.to_str().unwrap()]), &[&dir]);
            assert!(inside.contains("could be replaced"), "{inside}");
            assert!(granted(&asking(SHELL, &[tool.to_str().unwrap()]), &[]).is_ok());
        }
    }

    /// pyenv's `python3` on PATH ran nowhere confined ("pyenv: No such
    /// file or directory" from inside): such shims are refused at load,
    /// naming what to grant instead.
    #[cfg(unix)]
    #[test]
    fn a_version_managers_shim_is_refused_with_the_real_program_named() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (shims, bin) = (dir.path().join("shims"), dir.path().join("bin"));
        for d in [&shims, &bin] {
            std::fs::create_dir(d).unwrap();
            let tool = d.join("tool");
            std::fs::write(&tool, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = std::env::join_paths([&shims, &bin]).unwrap();
        let config = asking(SHELL, &["tool"]);
        let why = granted_on(&config, &[], Some(&path))
            .unwrap_err()
            .to_string();
        assert!(why.contains("version manager's shim"), "{why}");
        assert!(why.contains("pyenv which tool"), "{why}");
        assert!(
            why.contains(&bin.join("tool").display().to_string()),
            "{why}"
        );
        let by_path = asking(SHELL, &[shims.join("tool").to_str().unwrap()]);
        let why = granted_on(&by_path, &[], Some(&path))
            .unwrap_err()
            .to_string();
        assert!(why.contains("version manager's shim"), "{why}");
        let real = asking(SHELL, &[bin.join("tool").to_str().unwrap()]);
        assert!(granted_on(&real, &[], Some(&path)).is_ok());
        let later = std::env::join_paths([&bin, &shims]).unwrap();
        assert!(granted_on(&config, &[], Some(&later)).is_ok());
    }
}
