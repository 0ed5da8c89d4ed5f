//! `ls`: lists a directory: subdirectories first (with a trailing `/`),
//! then files with their sizes, each group sorted by name, at most 1000.

use airlock_sdk::{
    Access, Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool, io_error,
};
use serde::Deserialize;

const MAX_ENTRIES: usize = 1000;

/// Input of `ls`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LsInput {
    /// The directory to list (default: the working directory).
    path: Option<String>,
}

struct Ls;

impl Tool for Ls {
    type Input = LsInput;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::empty();

    fn describe() -> Describe {
        Describe::new("ls", "Lists the entries of a directory.")
            .alias("LS")
            .title("List directory")
            .prompt(
                "Lists the directory at `path` (absolute, or relative to the working directory; \
                 default: the working directory): subdirectories first, marked with a trailing \
                 `/`, then files with their sizes. At most 1000 entries. Use glob to find files \
                 by pattern across directories.",
            )
            .flags(
                Flags::READ_ONLY
                    | Flags::CONCURRENCY_SAFE
                    | Flags::IDEMPOTENT
                    | Flags::SEARCH_OR_READ,
            )
            .workspace(Access::Read)
    }

    fn call(input: LsInput, cx: &Context) -> Result<Output, ToolError> {
        let dir = cx.resolve(input.path.as_deref().unwrap_or("."))?;
        let shown = dir.display().to_string();
        let entries = std::fs::read_dir(&dir).map_err(|e| io_error(&e, &shown))?;
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&e, &shown))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                dirs.push(format!("{name}/"));
            } else if kind.is_symlink() {
                files.push((name, None));
            } else {
                files.push((name, entry.metadata().ok().map(|m| m.len())));
            }
        }
        dirs.sort();
        files.sort();
        let total = dirs.len() + files.len();
        let mut lines: Vec<String> = dirs.to_vec();
        lines.extend(files.iter().map(|(name, size)| match size {
            Some(size) => format!("{name} ({size} bytes)"),
            None => format!("{name} (symlink)"),
        }));
        lines.truncate(MAX_ENTRIES);
        let mut text = format!("{shown}/\n");
        if lines.is_empty() {
            text.push_str("(empty)");
        } else {
            text.push_str(
                &lines
                    .iter()
                    .map(|l| format!("  {l}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
        }
        if total > MAX_ENTRIES {
            text.push_str(&format!("\n(showing {MAX_ENTRIES} of {total} entries)"));
        }
        Ok(Output::text(text).structured(&serde_json::json!({
            "path": shown,
            "directories": dirs,
            "files": files.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        })))
    }
}

export_tool!(Ls);
