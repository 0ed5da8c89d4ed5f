//! What the tool sources look like now, so a watcher can tell when to
//! reload.

use airlock_core::config::Config;
use airlock_engine::component_files;
use std::path::PathBuf;

/// What the tool directories hold, and the approvals file: each file with
/// its size and modification time, in order. Two equal stamps mean nothing
/// to reload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceStamp(Vec<(PathBuf, u64, Option<std::time::SystemTime>)>);

impl SourceStamp {
    /// Stamps the component files in `config`'s tool directories and its
    /// approvals file now (a directory that cannot be listed counts as
    /// empty).
    pub fn of(config: &Config) -> SourceStamp {
        let files = config
            .effective_tool_dirs()
            .iter()
            .flat_map(|dir| component_files(dir).unwrap_or_default())
            .chain(config.effective_approvals_file())
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
