//! `airlock.lock`, beside the configuration: each tool (and each skill,
//! [`LockedSkill`]) installed from a registry, pinned. It records where the tool came from (the reference as
//! asked, and pinned to the manifest's digest), the manifest and layer
//! digests, the component's BLAKE3, its descriptor's BLAKE3, the file it
//! was installed as, the key that signed it and what it asks for. Every
//! load of that file checks its bytes against the lock, so a component
//! changed on disk after it was installed is refused, naming both digests.
//!
//! The lock travels: a file in the tool directory `airlock install` uses
//! is written relative to it (`file = "wc.wasm"`) and read against the
//! tool directory of the machine that reads it, so another HOME, or
//! another machine, installs and checks its own copy. (Locks written
//! before held absolute paths; those are read as they are.)
//!
//! ```
//! use airlock_core::lock::{LockedTool, Lockfile};
//! let mut lock = Lockfile::default();
//! lock.insert(LockedTool {
//!     name: "wc".into(),
//!     source: "oci://ghcr.io/acme/wc:1.0.0".into(),
//!     pinned: "oci://ghcr.io/acme/wc@sha256:00".into(),
//!     manifest_digest: "sha256:00".into(),
//!     layer_digest: "sha256:11".into(),
//!     blake3: "22".into(),
//!     descriptor_blake3: Some("33".into()),
//!     file: "/home/me/.local/share/airlock/tools/wc.wasm".into(),
//!     signed_by: Some("sha256:44 (/etc/airlock/acme.pub)".into()),
//!     asks: vec!["workspace read-only".into()],
//! });
//! let text = lock.to_toml();
//! assert_eq!(Lockfile::parse(&text).unwrap(), lock);
//!
//! // On disk, relative to the tool directory; read back against another.
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("airlock.lock");
//! lock.write(&path, Some("/home/me/.local/share/airlock/tools".as_ref())).unwrap();
//! assert!(std::fs::read_to_string(&path).unwrap().contains("file = \"wc.wasm\""));
//! let elsewhere = Lockfile::read(&path, Some("/srv/airlock/tools".as_ref())).unwrap();
//! assert_eq!(elsewhere.tools[0].file, std::path::Path::new("/srv/airlock/tools/wc.wasm"));
//! ```

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The tools and skills installed from registries, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lockfile {
    /// One entry per installed tool, sorted by name.
    #[serde(default, rename = "tool")]
    pub tools: Vec<LockedTool>,
    /// One entry per installed skill, sorted by name.
    #[serde(default, rename = "skill", skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<LockedSkill>,
}

/// One installed skill, pinned. Its folder is the one of its name in the
/// skills directory `airlock install` uses
/// ([`crate::config::default_skills_dir`]), so the entry names no path and
/// travels. Every load of that folder checks its files against `tree`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedSkill {
    /// The skill's name (its front matter's, and its folder's).
    pub name: String,
    /// The reference as the operator gave it (a tag, or a digest).
    pub source: String,
    /// The same reference pinned to the manifest's digest.
    pub pinned: String,
    /// The manifest's digest (`sha256:...`).
    pub manifest_digest: String,
    /// The tar layer's digest (`sha256:...`).
    pub layer_digest: String,
    /// The folder's digest ([`crate::skills::Skill::tree_digest`]).
    pub tree: String,
    /// The trusted key whose signature verified at install, as for a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
    /// What the skill's scripts need (the programs they are run with), as
    /// the operator approved it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asks: Vec<String>,
}

/// One installed tool, pinned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedTool {
    /// The tool's name (its descriptor's).
    pub name: String,
    /// The reference as the operator gave it (a tag, or a digest).
    pub source: String,
    /// The same reference pinned to the manifest's digest.
    pub pinned: String,
    /// The manifest's digest (`sha256:...`).
    pub manifest_digest: String,
    /// The component layer's digest (`sha256:...`).
    pub layer_digest: String,
    /// The component's BLAKE3 (hex).
    pub blake3: String,
    /// The BLAKE3 (hex) of the descriptor the component gave when it was
    /// installed, as JSON (none when it could not be described under the
    /// operator's grants then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor_blake3: Option<String>,
    /// The file it was installed as. In memory an absolute path; in the
    /// file, relative to the tool directory when it lies there
    /// ([`Lockfile::read`], [`Lockfile::write`]).
    pub file: PathBuf,
    /// The trusted key whose signature verified at install: its
    /// fingerprint and the file it was read from. None when the source's
    /// `[[trust]]` rule lets it be unsigned and it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
    /// What the tool asks for (workspace access, hosts, environment
    /// variables), as the operator approved it: an update that asks for
    /// more needs approving again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asks: Vec<String>,
}

/// The most an `airlock.lock` may hold.
const LOCK_BYTES: u64 = 4 << 20;

/// The header written at the top of the file.
const HEADER: &str = "# airlock.lock: the tools and skills `airlock install` fetched from registries, pinned.\n\
                      # Written by airlock; every load checks each tool's BLAKE3 and each skill's tree against it.\n\n";

impl Lockfile {
    /// Parses the text of a lock file.
    pub fn parse(text: &str) -> Result<Lockfile, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Reads the lock file at `path`, its relative files resolved against
    /// `tools` (the tool directory `airlock install` uses here,
    /// [`crate::config::default_tool_dir`]); a missing file is an empty
    /// lock.
    pub fn read(path: &Path, tools: Option<&Path>) -> Result<Lockfile, String> {
        Lockfile::read_as_written(path)?.resolved(path, tools)
    }

    /// Reads the lock file at `path` as it is written: its files relative
    /// to a tool directory stay so ([`Lockfile::resolved`]); a missing file
    /// is an empty lock.
    pub fn read_as_written(path: &Path) -> Result<Lockfile, String> {
        match crate::host_files::read_text_capped(
            path,
            LOCK_BYTES,
            crate::host_files::Links::Follow,
        ) {
            Ok(text) => Lockfile::parse(&text).map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Lockfile::default()),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// This lock as written, its relative files resolved against `tools`;
    /// `path` (the lock file's) names it in errors.
    pub fn resolved(&self, path: &Path, tools: Option<&Path>) -> Result<Lockfile, String> {
        let mut lock = self.clone();
        for tool in &mut lock.tools {
            if tool.file.is_absolute() {
                continue;
            }
            let relative = tool
                .file
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
            tool.file = match tools {
                Some(tools) if relative => tools.join(&tool.file),
                Some(_) => {
                    return Err(format!(
                        "{}: the file of {} ({}) must be a name in the tool directory or an \
                         absolute path",
                        path.display(),
                        tool.name,
                        tool.file.display()
                    ));
                }
                None => {
                    return Err(format!(
                        "{}: {} is relative to the tool directory, and there is none here \
                         (set HOME or XDG_DATA_HOME)",
                        path.display(),
                        tool.file.display()
                    ));
                }
            };
        }
        Ok(lock)
    }

    /// The file's text.
    pub fn to_toml(&self) -> String {
        let body = toml::to_string(self).expect("a lock file serialises");
        format!("{HEADER}{body}")
    }

    /// Writes the lock file at `path`, whole or not at all, each file
    /// that lies in `tools` written relative to it.
    pub fn write(&self, path: &Path, tools: Option<&Path>) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut on_disk = self.clone();
        for tool in &mut on_disk.tools {
            if let Some(name) = tools.and_then(|t| tool.file.strip_prefix(t).ok()) {
                tool.file = name.to_path_buf();
            }
        }
        crate::host_files::write_private(path, on_disk.to_toml().as_bytes())
    }

    /// The entry for the tool `name`.
    pub fn get(&self, name: &str) -> Option<&LockedTool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The entry that installed `file`.
    pub fn for_file(&self, file: &Path) -> Option<&LockedTool> {
        self.tools.iter().find(|t| t.file == file)
    }

    /// Adds `tool`, replacing an entry of the same name.
    pub fn insert(&mut self, tool: LockedTool) {
        self.tools.retain(|t| t.name != tool.name);
        self.tools.push(tool);
        self.tools.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Removes the entry for `name`, returning it.
    pub fn remove(&mut self, name: &str) -> Option<LockedTool> {
        let at = self.tools.iter().position(|t| t.name == name)?;
        Some(self.tools.remove(at))
    }

    /// The entry for the skill `name`.
    pub fn skill(&self, name: &str) -> Option<&LockedSkill> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// Adds `skill`, replacing an entry of the same name.
    pub fn insert_skill(&mut self, skill: LockedSkill) {
        self.skills.retain(|s| s.name != skill.name);
        self.skills.push(skill);
        self.skills.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Removes the entry for the skill `name`, returning it.
    pub fn remove_skill(&mut self, name: &str) -> Option<LockedSkill> {
        let at = self.skills.iter().position(|s| s.name == name)?;
        Some(self.skills.remove(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_lock_is_empty_and_a_bad_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("airlock.lock");
        assert_eq!(Lockfile::read(&path, None).unwrap(), Lockfile::default());
        std::fs::write(&path, "[[tool]]\nname = 1\n").unwrap();
        assert!(
            Lockfile::read(&path, None)
                .unwrap_err()
                .contains("airlock.lock")
        );
    }

    #[test]
    fn files_are_relative_to_the_tool_directory_on_disk_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("airlock.lock");
        let entry = |file: &str| LockedTool {
            name: "wc".into(),
            source: "oci://r/wc:1".into(),
            pinned: "oci://r/wc@sha256:00".into(),
            manifest_digest: "sha256:00".into(),
            layer_digest: "sha256:11".into(),
            blake3: "22".into(),
            descriptor_blake3: None,
            file: file.into(),
            signed_by: None,
            asks: Vec::new(),
        };
        let mut lock = Lockfile::default();
        lock.insert(entry("/a/tools/wc.wasm"));
        lock.write(&path, Some(Path::new("/a/tools"))).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("file = \"wc.wasm\"") && !text.contains("/a/"),
            "{text}"
        );
        let read = Lockfile::read(&path, Some(Path::new("/b/tools"))).unwrap();
        assert_eq!(read.tools, vec![entry("/b/tools/wc.wasm")]);
        assert!(
            Lockfile::read(&path, None)
                .unwrap_err()
                .contains("XDG_DATA_HOME")
        );

        // Outside the tool directory, and in locks written before: as is.
        lock.insert(entry("/elsewhere/wc.wasm"));
        lock.write(&path, Some(Path::new("/a/tools"))).unwrap();
        let read = Lockfile::read(&path, Some(Path::new("/b/tools"))).unwrap();
        assert_eq!(read.tools, vec![entry("/elsewhere/wc.wasm")]);

        // A relative file may only name a file in the directory.
        lock.insert(entry("../../etc/wc.wasm"));
        std::fs::write(&path, lock.to_toml()).unwrap();
        let refused = Lockfile::read(&path, Some(Path::new("/b/tools"))).unwrap_err();
        assert!(
            refused.contains("must be a name in the tool directory"),
            "{refused}"
        );
    }
}
