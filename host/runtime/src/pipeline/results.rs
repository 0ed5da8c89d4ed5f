//! Result processing: content longer than the tool's `max_result_size` is
//! written to a file in the results directory and replaced by a preview
//! and the file's path, in Claude Code's `<persisted-output>` form.
//!
//! A saved result is its [`Owner`]'s: the caller that asked for the call
//! (its authenticated identity, when a front end has one) and the agent
//! context it ran in. Each owner's results go in a directory of their own,
//! named by a BLAKE3 hash of the owner keyed with a random key of this
//! process, and [`ResultStore::read`] serves a path only from the
//! directory of the owner asking: another's result is `NotFound`, as one
//! that does not exist is. The host names that directory itself from the
//! owner asking, never from the path it is given.
//!
//! The results directory is `results_dir` from the configuration, or
//! `$XDG_STATE_HOME/airlock/results` (`~/.local/state/airlock/results`):
//! never in the workspace, and no grant may reach it, read-only or not
//! (`Config::host_paths`), so no tool lists or reads a saved result, its
//! caller's or another's; the model gets it from its front end (over MCP,
//! `resources/read` of the result's resource link). It is created private
//! to the user (0700) and opened without following a link in its place; the
//! host writes through its `cap-std` handle, creates each owner's directory
//! 0700 and opens it without following a link, and creates every file with
//! `create_new`, so a link planted there is never followed: the write
//! fails instead. Owners' directories untouched for a day are removed when
//! a host first opens the results directory ([`RESULTS_KEPT`]): named with
//! another process's key, no later process could serve them.

use crate::call::Caller;
use crate::context::ToolContext;
use airlock_core::error::{CallError, ErrorClass};
use airlock_core::tool::{ContentBlock, ToolOutput};
use cap_std::fs::{Dir, DirBuilder, DirBuilderExt, OpenOptions, OpenOptionsExt};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// How many characters of a spilled result the preview keeps.
pub const PREVIEW_CHARS: usize = 2000;

/// Whose a saved result is: the caller that asked for the call and the
/// agent context it ran in. Only the same owner reads it back
/// ([`ResultStore::read`]).
#[derive(Clone, Copy, Debug)]
pub struct Owner<'a> {
    /// The caller a front end authenticated (its subject and client);
    /// `None` for a call with no identity (stdio, HTTP without `[auth]`,
    /// a library call without one).
    pub caller: Option<&'a Caller>,
    /// The context's name for its results ([`ToolContext::results_key`]).
    pub context: &'a str,
}

impl<'a> Owner<'a> {
    /// The owner of what `caller`'s calls in `cx` save.
    pub fn of(cx: &'a ToolContext, caller: Option<&'a Caller>) -> Owner<'a> {
        Owner {
            caller,
            context: cx.results_key(),
        }
    }

    /// The name of this owner's directory: 32 hex digits of a BLAKE3 hash
    /// of the owner keyed with [`process_key`], so the name says nothing of
    /// whose it is.
    fn directory(&self) -> String {
        fn field(hasher: &mut blake3::Hasher, value: &str) {
            hasher.update(&(value.len() as u64).to_le_bytes());
            hasher.update(value.as_bytes());
        }
        let mut hasher = blake3::Hasher::new_keyed(process_key());
        match self.caller {
            None => {
                hasher.update(&[0]);
            }
            Some(caller) => {
                hasher.update(&[1]);
                field(&mut hasher, &caller.subject);
                match &caller.client_id {
                    None => {
                        hasher.update(&[0]);
                    }
                    Some(client) => {
                        hasher.update(&[1]);
                        field(&mut hasher, client);
                    }
                }
            }
        }
        field(&mut hasher, self.context);
        hasher.finalize().to_hex()[..32].to_string()
    }
}

/// This process's key for owners' directory names: 256 random bits, made
/// once. Without system randomness, a key from the process and the time:
/// the owner check does not rest on the key (the host names the directory
/// from the owner asking), only the names' saying nothing of their owners.
fn process_key() -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut key = [0u8; 32];
        if getrandom::fill(&mut key).is_err() {
            let mut hasher = blake3::Hasher::new_derive_key("airlock results owner key");
            hasher.update(&std::process::id().to_le_bytes());
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            hasher.update(&now.as_nanos().to_le_bytes());
            key = *hasher.finalize().as_bytes();
        }
        key
    })
}

/// Where spilled results go: a directory outside every grant. It is
/// created on the first spill, so a host never makes one it does not need.
#[derive(Debug)]
pub struct ResultStore {
    path: PathBuf,
    dir: OnceLock<Dir>,
}

/// How long an owner's directory is kept untouched (no result saved in it)
/// before a host that opens the results directory removes it.
pub const RESULTS_KEPT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Removes the owners' directories untouched for [`RESULTS_KEPT`]. They
/// are named with a key of the process that wrote them, so no later
/// process can serve them again, and they would only pile up; a day
/// leaves a long-lived server its recent ones. Nothing in the directory
/// is followed: a link or a file is left alone.
fn forget_old_owners(results: &Dir) {
    let Ok(entries) = results.entries() else {
        return;
    };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        let untouched = meta
            .modified()
            .ok()
            .and_then(|at| now.duration_since(at.into_std()).ok())
            .is_some_and(|age| age > RESULTS_KEPT);
        if meta.is_dir() && untouched {
            let _ = results.remove_dir_all(entry.file_name());
        }
    }
}

/// Creates (0700) and opens the results directory, refusing a link in its
/// place.
fn open_results_dir(dir: &Path) -> std::io::Result<Dir> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)?;
    Ok(Dir::from_std_file(file))
}

/// The error for a result the asking owner does not have: the same whether
/// it is another's, never existed, or is no path of a result at all.
fn no_such_result(path: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("{path} is no saved result of this caller and context"),
    )
}

impl ResultStore {
    /// The results directory `dir` (`Config::effective_results_dir`).
    pub fn new(dir: &Path) -> ResultStore {
        ResultStore {
            path: dir.to_path_buf(),
            dir: OnceLock::new(),
        }
    }

    /// The directory, as the host names it.
    pub fn path(&self) -> String {
        self.path.display().to_string()
    }

    fn dir(&self) -> std::io::Result<&Dir> {
        if let Some(dir) = self.dir.get() {
            return Ok(dir);
        }
        let opened = open_results_dir(&self.path).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot open {}: {e}", self.path()))
        })?;
        forget_old_owners(&opened);
        Ok(self.dir.get_or_init(|| opened))
    }

    /// The directory of `owner`'s results, named `name`, opened without
    /// following a link; created (0700) first when `create`.
    fn owner_dir(&self, name: &str, create: bool) -> std::io::Result<Dir> {
        let dir = self.dir()?;
        if create {
            let mut builder = DirBuilder::new();
            builder.mode(0o700);
            match dir.create_dir_with(name, &builder) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
        }
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW);
        Ok(Dir::from_std_file(
            dir.open_with(name, &options)?.into_std(),
        ))
    }

    /// The content of a result `owner` saved, named by the path [`spill`]
    /// returned: only a file in `owner`'s own directory, opened through
    /// its handle (a regular file, never through a link, without blocking)
    /// and read with a cap of `cap` bytes. Anything else, another owner's
    /// result included, is `NotFound` with the same message as a result
    /// that does not exist.
    ///
    /// ```
    /// use airlock_host::pipeline::results::{Owner, ResultStore, spill};
    /// use airlock_host::{Caller, ToolOutput};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = ResultStore::new(dir.path());
    /// let alice = Caller { subject: "alice".into(), client_id: None };
    /// let owner = Owner { caller: Some(&alice), context: "ctx" };
    /// let mut output = ToolOutput::text("x".repeat(100));
    /// let path = spill(&mut output, 10, Some(&store), owner, "use-1").unwrap().unwrap();
    /// assert_eq!(store.read(&path, owner, 1000).unwrap(), "x".repeat(100).as_bytes());
    /// let bob = Caller { subject: "bob".into(), client_id: None };
    /// let e = store.read(&path, Owner { caller: Some(&bob), ..owner }, 1000).unwrap_err();
    /// assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    /// ```
    pub fn read(&self, path: &str, owner: Owner<'_>, cap: u64) -> std::io::Result<Vec<u8>> {
        let directory = owner.directory();
        let name = path
            .strip_prefix(self.path().as_str())
            .and_then(|rest| rest.strip_prefix('/'))
            .and_then(|rest| rest.strip_prefix(directory.as_str()))
            .and_then(|rest| rest.strip_prefix('/'))
            .filter(|name| !name.is_empty() && !name.contains('/') && !name.starts_with('.'))
            .ok_or_else(|| no_such_result(path))?;
        let missing = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::NotFound {
                no_such_result(path)
            } else {
                e
            }
        };
        let dir = self.owner_dir(&directory, false).map_err(missing)?;
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
        let file = dir.open_with(name, &options).map_err(missing)?;
        airlock_core::host_files::read_opened_capped(file.into_std(), cap)
    }

    /// The paths of the results `owner` saved (as [`spill`] returned them),
    /// by name; none when it saved none. No other owner's are listed.
    ///
    /// ```
    /// use airlock_host::pipeline::results::{Owner, ResultStore, spill};
    /// use airlock_host::ToolOutput;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = ResultStore::new(dir.path());
    /// let owner = Owner { caller: None, context: "ctx" };
    /// let mut output = ToolOutput::text("x".repeat(100));
    /// let path = spill(&mut output, 10, Some(&store), owner, "use-1").unwrap().unwrap();
    /// assert_eq!(store.list(owner).unwrap(), [path]);
    /// assert!(store.list(Owner { context: "other", ..owner }).unwrap().is_empty());
    /// ```
    pub fn list(&self, owner: Owner<'_>) -> std::io::Result<Vec<String>> {
        let directory = owner.directory();
        let dir = match self.owner_dir(&directory, false) {
            Ok(dir) => dir,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut names = Vec::new();
        for entry in dir.entries()? {
            let entry = entry?;
            if entry.file_type()?.is_file()
                && let Some(name) = entry.file_name().to_str()
            {
                names.push(format!("{}/{directory}/{name}", self.path()));
            }
        }
        names.sort();
        Ok(names)
    }

    /// Writes `text` to a new file in `owner`'s directory, named after the
    /// tool use; returns its path.
    fn write(&self, owner: Owner<'_>, tool_use_id: &str, text: &str) -> Result<String, String> {
        let directory = owner.directory();
        let dir = self
            .owner_dir(&directory, true)
            .map_err(|e| format!("cannot open {}/{directory}: {e}", self.path()))?;
        let stem: String = tool_use_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        let stem = if stem.is_empty() {
            "result".to_string()
        } else {
            stem
        };
        for n in 0..100 {
            let name = if n == 0 {
                format!("{stem}.txt")
            } else {
                format!("{stem}-{n}.txt")
            };
            let mut options = OpenOptions::new();
            options.write(true).create_new(true);
            match dir.open_with(&name, &options) {
                Ok(mut file) => {
                    file.write_all(text.as_bytes())
                        .map_err(|e| format!("cannot write {name}: {e}"))?;
                    return Ok(format!("{}/{directory}/{name}", self.path()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(format!("cannot create {name}: {e}")),
            }
        }
        Err(format!(
            "{}/{directory} already holds 100 results for {stem}",
            self.path()
        ))
    }
}

/// The text of the content blocks that count toward the size limit (images
/// and links do not; a tool reference counts its definition).
fn countable_text(output: &ToolOutput) -> String {
    output
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.clone()),
            ContentBlock::Json(v) => {
                Some(serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()))
            }
            ContentBlock::ToolReference { .. } => Some(b.to_text()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Spills `output`'s text content when it is longer than `max_chars`:
/// the text goes to a file of `owner`'s in `store`, and the model gets a
/// preview and the path instead, told that no tool reads it there. Structured output over the limit is dropped (its
/// text is in the file). Returns the file's path, if a file was written.
pub fn spill(
    output: &mut ToolOutput,
    max_chars: u32,
    store: Option<&ResultStore>,
    owner: Owner<'_>,
    tool_use_id: &str,
) -> Result<Option<String>, CallError> {
    let text = countable_text(output);
    let chars = text.chars().count();
    if chars <= max_chars as usize {
        return Ok(None);
    }
    let preview_end = text
        .char_indices()
        .nth(PREVIEW_CHARS)
        .map_or(text.len(), |(i, _)| i);
    let preview = &text[..preview_end];
    let (saved, path) = match store {
        Some(store) => {
            let path = store.write(owner, tool_use_id, &text).map_err(|e| {
                CallError::new(
                    ErrorClass::Internal,
                    format!("the result was too large to return, and saving it failed: {e}"),
                )
            })?;
            (
                format!(
                    "Full output saved to: {path}\nNo tool can read it there: the host gives it \
                     only to the caller that made this call (an MCP client reads it with \
                     resources/read of this result's resource link)."
                ),
                Some(path),
            )
        }
        None => (
            "No results directory is configured, so the rest is not saved.".to_string(),
            None,
        ),
    };
    let replacement = format!(
        "<persisted-output>\nOutput too large ({chars} characters; this tool returns at most {max_chars}). {saved}\nPreview (first {} characters):\n{preview}\n</persisted-output>",
        preview.chars().count()
    );
    let images: Vec<ContentBlock> = output
        .content
        .drain(..)
        .filter(|b| {
            matches!(
                b,
                ContentBlock::Image { .. } | ContentBlock::ResourceLink { .. }
            )
        })
        .collect();
    output.content = std::iter::once(ContentBlock::Text(replacement))
        .chain(images)
        .collect();
    if output
        .structured
        .as_ref()
        .is_some_and(|s| s.to_string().chars().count() > max_chars as usize)
    {
        output.structured = None;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOBODY: Owner<'static> = Owner {
        caller: None,
        context: "cx",
    };

    fn store() -> (tempfile::TempDir, ResultStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = ResultStore::new(&dir.path().join("results"));
        (dir, store)
    }

    fn caller(subject: &str, client: Option<&str>) -> Caller {
        Caller {
            subject: subject.into(),
            client_id: client.map(str::to_string),
        }
    }

    #[test]
    fn the_directory_is_created_on_the_first_spill_only() {
        let (dir, store) = store();
        spill(
            &mut ToolOutput::text("small"),
            10,
            Some(&store),
            NOBODY,
            "t",
        )
        .unwrap();
        assert!(!dir.path().join("results").exists());
        spill(&mut ToolOutput::text("large"), 1, Some(&store), NOBODY, "t").unwrap();
        use std::os::unix::fs::PermissionsExt;
        let results = dir.path().join("results");
        let owners: Vec<_> = std::fs::read_dir(&results).unwrap().collect();
        assert_eq!(owners.len(), 1);
        for dir in [results, owners[0].as_ref().unwrap().path()] {
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
        }
    }

    #[test]
    fn owners_directories_untouched_for_a_day_are_removed() {
        let (dir, store) = store();
        let results = dir.path().join("results");
        for owner in ["old", "fresh"] {
            std::fs::create_dir_all(results.join(owner)).unwrap();
            std::fs::write(results.join(owner).join("r.txt"), "x").unwrap();
        }
        let two_days_ago = std::time::SystemTime::now() - 2 * RESULTS_KEPT;
        std::fs::File::open(results.join("old"))
            .unwrap()
            .set_modified(two_days_ago)
            .unwrap();
        spill(&mut ToolOutput::text("large"), 1, Some(&store), NOBODY, "t").unwrap();
        assert!(
            !results.join("old").exists(),
            "an owner untouched for two days stays"
        );
        assert!(results.join("fresh/r.txt").exists());
    }

    #[test]
    fn small_results_stay_inline() {
        let mut out = ToolOutput::text("short");
        assert_eq!(spill(&mut out, 10, None, NOBODY, "t").unwrap(), None);
        assert_eq!(out.text_content(), "short");
    }

    #[test]
    fn large_results_spill_to_a_file_with_a_preview() {
        let (_dir, store) = store();
        let long = "x".repeat(5000);
        let mut out = ToolOutput::text(long.clone());
        out.structured = Some(serde_json::json!({"big": long}));
        let path = spill(&mut out, 1000, Some(&store), NOBODY, "toolu_01/../x")
            .unwrap()
            .unwrap();
        let owner = NOBODY.directory();
        assert!(
            path.ends_with(&format!("results/{owner}/toolu_01____x.txt")),
            "{path}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), long);
        let text = out.text_content();
        assert!(
            text.starts_with("<persisted-output>\nOutput too large (5000 characters"),
            "{text}"
        );
        assert!(text.contains(&format!(
            "Full output saved to: {path}\nNo tool can read it"
        )));
        assert!(text.contains("resources/read"), "{text}");
        assert!(text.contains("Preview (first 2000 characters)"));
        assert!(out.structured.is_none());
        let again = spill(
            &mut ToolOutput::text(long.clone()),
            1000,
            Some(&store),
            NOBODY,
            "toolu_01/../x",
        )
        .unwrap()
        .unwrap();
        assert!(
            again.ends_with("toolu_01____x-1.txt"),
            "names never collide: {again}"
        );
    }

    #[test]
    fn planted_links_are_never_followed() {
        let (dir, store) = store();
        let outside = tempfile::tempdir().unwrap();
        let own = dir.path().join("results").join(NOBODY.directory());
        std::fs::create_dir_all(&own).unwrap();
        std::os::unix::fs::symlink(outside.path().join("victim"), own.join("t.txt")).unwrap();
        let path = spill(
            &mut ToolOutput::text("y".repeat(50)),
            10,
            Some(&store),
            NOBODY,
            "t",
        )
        .unwrap()
        .unwrap();
        assert!(path.ends_with("t-1.txt"), "{path}");
        assert!(
            !outside.path().join("victim").exists(),
            "the link's target was not created"
        );

        // A link in place of an owner's directory is not followed either.
        let other = Owner {
            context: "other",
            ..NOBODY
        };
        let results = dir.path().join("results");
        std::os::unix::fs::symlink(outside.path(), results.join(other.directory())).unwrap();
        let e = spill(
            &mut ToolOutput::text("y".repeat(50)),
            10,
            Some(&store),
            other,
            "t",
        )
        .unwrap_err();
        assert!(e.message.contains("saving it failed"), "{e}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn only_saved_results_are_read_back_and_never_through_a_link() {
        let (dir, store) = store();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "secret").unwrap();
        let long = "r".repeat(500);
        let path = spill(
            &mut ToolOutput::text(long.clone()),
            10,
            Some(&store),
            NOBODY,
            "t",
        )
        .unwrap()
        .unwrap();
        assert_eq!(store.read(&path, NOBODY, 1000).unwrap(), long.as_bytes());
        let capped = store.read(&path, NOBODY, 499).unwrap_err();
        assert!(capped.to_string().contains("larger than 499"), "{capped}");
        let own = dir.path().join("results").join(NOBODY.directory());
        let secret = outside.path().join("secret");
        let own_path = own.display().to_string();
        for elsewhere in [
            secret.to_str().unwrap().to_string(),
            format!("{own_path}/../../a.txt"),
            format!("{own_path}/"),
            own_path.clone(),
            format!("{}/t.txt", store.path()),
        ] {
            let e = store.read(&elsewhere, NOBODY, 1000).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{elsewhere}: {e}");
        }
        std::fs::remove_file(own.join("t.txt")).unwrap();
        std::os::unix::fs::symlink(&secret, own.join("t.txt")).unwrap();
        assert!(
            store.read(&path, NOBODY, 1000).is_err(),
            "a planted link is refused"
        );
        std::fs::remove_file(own.join("t.txt")).unwrap();
        std::fs::write(own.join("beside"), "beside").unwrap();
        std::os::unix::fs::symlink("beside", own.join("t.txt")).unwrap();
        let e = store.read(&path, NOBODY, 1000).unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(libc::ELOOP),
            "even one to a result: {e}"
        );
    }

    /// A result is read back only by its owner: the same caller (subject
    /// and client), or the same absence of one, in the same context. To
    /// anyone else it is what a result that was never saved is.
    #[test]
    fn a_result_is_read_back_by_its_owner_alone() {
        let (_dir, store) = store();
        let (alice, alice_elsewhere, bob) = (
            caller("alice", Some("app")),
            caller("alice", Some("other-app")),
            caller("bob", Some("app")),
        );
        let owner = Owner {
            caller: Some(&alice),
            context: "ctx_1",
        };
        let path = spill(
            &mut ToolOutput::text("a".repeat(100)),
            10,
            Some(&store),
            owner,
            "t",
        )
        .unwrap()
        .unwrap();
        assert_eq!(store.read(&path, owner, 1000).unwrap(), [b'a'; 100]);
        let never_saved = path.replace("/t.txt", "/u.txt");
        let missing = store.read(&never_saved, owner, 1000).unwrap_err();
        for other in [
            Owner {
                caller: Some(&bob),
                ..owner
            },
            Owner {
                caller: Some(&alice_elsewhere),
                ..owner
            },
            Owner {
                caller: None,
                ..owner
            },
            Owner {
                context: "ctx_2",
                ..owner
            },
        ] {
            assert_ne!(other.directory(), owner.directory(), "{other:?}");
            let e = store.read(&path, other, 1000).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{other:?}");
            assert_eq!(
                e.to_string(),
                missing.to_string().replace(&never_saved, &path),
                "{other:?}: told apart from a result never saved"
            );
            // Its own result of the same name is another file.
            let own = spill(
                &mut ToolOutput::text("b".repeat(100)),
                10,
                Some(&store),
                other,
                "t",
            )
            .unwrap()
            .unwrap();
            assert_ne!(own, path);
            assert_eq!(store.read(&path, owner, 1000).unwrap(), [b'a'; 100]);
        }
        // The directory's name is a keyed hash: it names no one.
        let name = owner.directory();
        assert!(
            name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit()),
            "{name}"
        );
        assert!(!path.contains("alice"), "{path}");
    }

    #[test]
    fn without_a_store_the_preview_says_so() {
        let mut out = ToolOutput::text("z".repeat(100));
        assert_eq!(spill(&mut out, 10, None, NOBODY, "t").unwrap(), None);
        assert!(
            out.text_content()
                .contains("No results directory is configured")
        );
    }
}
