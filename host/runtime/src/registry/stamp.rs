//! What the tool sources look like now, so a watcher can tell when to
//! reload.

use airlock_core::config::Config;
use airlock_engine::component_files;
use std::path::PathBuf;

/// What the tool directories hold, the approvals file, what the skill
/// directories hold, and `airlock.lock` (which the installed skills are
/// held to): each file with its size and modification time, in
/// order. Two equal stamps mean nothing to reload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceStamp(Vec<(PathBuf, u64, Option<std::time::SystemTime>)>);

/// The most entries of the skill directories a stamp looks at.
const SKILL_ENTRIES: usize = 20_000;

impl SourceStamp {
    /// Stamps the component files in `config`'s tool directories, its
    /// approvals file, the files of its skill directories and its lock
    /// file now (a
    /// directory that cannot be listed counts as empty).
    pub fn of(config: &Config) -> SourceStamp {
        let mut skill_files = Vec::new();
        for dir in config.skill_dirs() {
            walk(&dir, &mut skill_files);
        }
        let files = config
            .effective_tool_dirs()
            .iter()
            .flat_map(|dir| component_files(dir).unwrap_or_default())
            .chain(config.effective_approvals_file())
            .chain(skill_files)
            .chain(config.lock_path())
            .map(|file| {
                let meta = std::fs::metadata(&file).ok();
                let len = meta.as_ref().map_or(0, |m| m.len());
                let modified = meta.and_then(|m| m.modified().ok());
                (file, len, modified)
            })
            .collect();
        SourceStamp(files)
    }
}

/// Every entry under `dir` (links not followed), in order, into `found`,
/// up to [`SKILL_ENTRIES`] in all.
fn walk(dir: &std::path::Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if found.len() >= SKILL_ENTRIES {
            return;
        }
        found.push(entry.path());
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk(&entry.path(), found);
        }
    }
}
