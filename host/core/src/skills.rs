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
    /// The file at `path` (`/`-separated, in the skill's folder).
    pub fn file(&self, path: &str) -> Option<&SkillFile> {
        self.files.iter().find(|f| f.path == path)
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
