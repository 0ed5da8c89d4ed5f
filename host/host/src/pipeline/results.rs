//! Result processing: content longer than the tool's `max_result_size` is
//! written to a file in the results directory and replaced by a preview
//! and the file's path, in Claude Code's `<persisted-output>` form, so the
//! model can read the rest with `read` or `grep`.
//!
//! The results directory is `results_dir` from the configuration, or
//! `.airlock/results` in the workspace. The host writes it through a
//! `cap-std` handle and creates every file with `create_new`, so a link a
//! guest planted there is never followed: the write fails instead. A
//! configured directory is created private to the user and opened without
//! following a link in its place (no grant may reach it either).

use airlock_core::error::{CallError, ErrorClass};
use airlock_core::grants::HostMount;
use airlock_core::tool::{ContentBlock, ToolOutput};
use cap_std::fs::{Dir, OpenOptions};
use std::io::Write;
use std::sync::Arc;

/// How many characters of a spilled result the preview keeps.
pub const PREVIEW_CHARS: usize = 2000;
/// The results directory inside the workspace, when none is configured.
const WORKSPACE_RESULTS: &str = ".airlock/results";

/// Where spilled results go. The directory is created on the first spill,
/// so a workspace never gets one it does not need.
#[derive(Debug)]
pub struct ResultStore {
    place: Place,
    dir: std::sync::OnceLock<Dir>,
}

#[derive(Debug)]
enum Place {
    /// `results_dir` from the configuration.
    Configured(std::path::PathBuf),
    /// `.airlock/results` in the workspace, through its handle.
    Workspace(Arc<HostMount>),
}

/// Creates (0700) and opens a configured results directory, refusing a
/// link in its place.
fn open_configured(dir: &std::path::Path) -> std::io::Result<Dir> {
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

impl ResultStore {
    /// The configured results directory (`results_dir`), else the
    /// workspace's; `None` when there is neither.
    pub fn new(
        results_dir: Option<&std::path::Path>,
        workspace: Option<&Arc<HostMount>>,
    ) -> Option<ResultStore> {
        let place = match (results_dir, workspace) {
            (Some(dir), _) => Place::Configured(dir.to_path_buf()),
            (None, Some(ws)) => Place::Workspace(ws.clone()),
            (None, None) => return None,
        };
        Some(ResultStore {
            place,
            dir: std::sync::OnceLock::new(),
        })
    }

    /// The directory as tools see it.
    pub fn path(&self) -> String {
        match &self.place {
            Place::Configured(dir) => dir.display().to_string(),
            Place::Workspace(ws) => format!("{}/{WORKSPACE_RESULTS}", ws.guest),
        }
    }

    fn dir(&self) -> Result<&Dir, String> {
        if let Some(dir) = self.dir.get() {
            return Ok(dir);
        }
        let opened = match &self.place {
            Place::Configured(dir) => open_configured(dir),
            Place::Workspace(ws) => ws
                .dir
                .create_dir_all(WORKSPACE_RESULTS)
                .and_then(|()| ws.dir.open_dir(WORKSPACE_RESULTS)),
        }
        .map_err(|e| format!("cannot open {}: {e}", self.path()))?;
        Ok(self.dir.get_or_init(|| opened))
    }

    /// The content of a result this store saved, named by the path
    /// [`spill`] returned: only a file directly in the results directory,
    /// opened through the directory's handle (a regular file, never through
    /// a link, without blocking) and read with a cap of `cap` bytes. Any
    /// other path is `NotFound`.
    pub fn read(&self, path: &str, cap: u64) -> std::io::Result<Vec<u8>> {
        use cap_std::fs::OpenOptionsExt;
        let dir_path = self.path();
        let name = path
            .strip_prefix(dir_path.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
            .filter(|name| !name.is_empty() && !name.contains('/') && !name.starts_with('.'))
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{path} is not a result saved in {dir_path}"),
                )
            })?;
        let dir = self.dir().map_err(std::io::Error::other)?;
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
        let file = dir.open_with(name, &options)?;
        airlock_core::host_files::read_opened_capped(file.into_std(), cap)
    }

    /// Writes `text` to a new file named after the tool use; returns its path.
    fn write(&self, tool_use_id: &str, text: &str) -> Result<String, String> {
        let dir = self.dir()?;
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
                    return Ok(format!("{}/{name}", self.path()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(format!("cannot create {name}: {e}")),
            }
        }
        Err(format!(
            "{} already holds 100 results for {stem}",
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
/// the text goes to a file in `store`, and the model gets a preview and the
/// path instead. Structured output over the limit is dropped (its text is
/// in the file). Returns the file's path, if a file was written.
pub fn spill(
    output: &mut ToolOutput,
    max_chars: u32,
    store: Option<&ResultStore>,
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
            let path = store.write(tool_use_id, &text).map_err(|e| {
                CallError::new(
                    ErrorClass::Internal,
                    format!("the result was too large to return, and saving it failed: {e}"),
                )
            })?;
            (format!("Full output saved to: {path}"), Some(path))
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
    use airlock_core::config::Config;
    use airlock_core::grants::Grants;

    fn store(ws: &std::path::Path) -> (Grants, ResultStore) {
        let config = Config {
            workspace: Some(ws.to_path_buf()),
            ..Config::default()
        };
        let grants = Grants::from_config(&config).unwrap();
        let store = ResultStore::new(None, grants.workspace()).unwrap();
        (grants, store)
    }

    #[test]
    fn the_directory_is_created_on_the_first_spill_only() {
        let ws = tempfile::tempdir().unwrap();
        let (_grants, store) = store(ws.path());
        spill(&mut ToolOutput::text("small"), 10, Some(&store), "t").unwrap();
        assert!(!ws.path().join(".airlock").exists());
    }

    #[test]
    fn small_results_stay_inline() {
        let mut out = ToolOutput::text("short");
        assert_eq!(spill(&mut out, 10, None, "t").unwrap(), None);
        assert_eq!(out.text_content(), "short");
    }

    #[test]
    fn large_results_spill_to_a_file_with_a_preview() {
        let ws = tempfile::tempdir().unwrap();
        let (_grants, store) = store(ws.path());
        let long = "x".repeat(5000);
        let mut out = ToolOutput::text(long.clone());
        out.structured = Some(serde_json::json!({"big": long}));
        let path = spill(&mut out, 1000, Some(&store), "toolu_01/../x")
            .unwrap()
            .unwrap();
        assert!(
            path.ends_with(".airlock/results/toolu_01____x.txt"),
            "{path}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), long);
        let text = out.text_content();
        assert!(
            text.starts_with("<persisted-output>\nOutput too large (5000 characters"),
            "{text}"
        );
        assert!(text.contains(&format!("Full output saved to: {path}")));
        assert!(text.contains("Preview (first 2000 characters)"));
        assert!(out.structured.is_none());
        let again = spill(
            &mut ToolOutput::text(long.clone()),
            1000,
            Some(&store),
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
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let (_grants, store) = store(ws.path());
        let results = ws.path().join(".airlock/results");
        std::fs::create_dir_all(&results).unwrap();
        std::os::unix::fs::symlink(outside.path().join("victim"), results.join("t.txt")).unwrap();
        let path = spill(&mut ToolOutput::text("y".repeat(50)), 10, Some(&store), "t")
            .unwrap()
            .unwrap();
        assert!(path.ends_with("t-1.txt"), "{path}");
        assert!(
            !outside.path().join("victim").exists(),
            "the link's target was not created"
        );
    }

    #[test]
    fn only_saved_results_are_read_back_and_never_through_a_link() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "secret").unwrap();
        let (_grants, store) = store(ws.path());
        let long = "r".repeat(500);
        let path = spill(&mut ToolOutput::text(long.clone()), 10, Some(&store), "t")
            .unwrap()
            .unwrap();
        assert_eq!(store.read(&path, 1000).unwrap(), long.as_bytes());
        let capped = store.read(&path, 499).unwrap_err();
        assert!(capped.to_string().contains("larger than 499"), "{capped}");
        let results = ws.path().join(".airlock/results");
        let secret = outside.path().join("secret");
        for elsewhere in [
            secret.to_str().unwrap().to_string(),
            format!("{}/../../a.txt", store.path()),
            format!("{}/", store.path()),
            store.path(),
        ] {
            let e = store.read(&elsewhere, 1000).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{elsewhere}: {e}");
        }
        std::fs::remove_file(results.join("t.txt")).unwrap();
        std::os::unix::fs::symlink(&secret, results.join("t.txt")).unwrap();
        assert!(
            store.read(&path, 1000).is_err(),
            "a planted link is refused"
        );
        std::fs::remove_file(results.join("t.txt")).unwrap();
        std::fs::write(results.join("beside"), "beside").unwrap();
        std::os::unix::fs::symlink("beside", results.join("t.txt")).unwrap();
        let e = store.read(&path, 1000).unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(libc::ELOOP),
            "even one to a result: {e}"
        );
    }

    #[test]
    fn without_a_store_the_preview_says_so() {
        let mut out = ToolOutput::text("z".repeat(100));
        assert_eq!(spill(&mut out, 10, None, "t").unwrap(), None);
        assert!(
            out.text_content()
                .contains("No results directory is configured")
        );
    }
}
