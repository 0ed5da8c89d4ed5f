//! `ls`: lists a directory: subdirectories first (with a trailing `/`),
//! then files with their sizes, each group sorted by name, at most 1000.

use airlock_sdk::{
    Access, Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool, io_error,
};
use serde::{Deserialize, Serialize};

const MAX_ENTRIES: usize = 1000;

/// Input of `ls`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LsInput {
    /// The directory to list (default: the working directory).
    path: Option<String>,
}

/// Output of `ls`: the whole listing, as the text shows it.
#[derive(Serialize, JsonSchema)]
struct LsOutput {
    /// The directory listed, absolute.
    path: String,
    /// Its entries: subdirectories first, then the rest, each group by name
    /// (at most 1000).
    entries: Vec<Entry>,
    /// How many entries the directory has, including any not listed.
    total: usize,
    /// Whether the directory has more entries than are listed.
    truncated: bool,
}

/// One entry of a directory.
#[derive(Serialize, JsonSchema)]
struct Entry {
    /// The entry's name.
    name: String,
    /// What it is.
    #[serde(rename = "type")]
    kind: Kind,
    /// Its size in bytes (not for directories and symbolic links).
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
}

/// The kind of a directory entry.
#[derive(Serialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Kind {
    /// A directory.
    Directory,
    /// A symbolic link (not followed).
    Symlink,
    /// A file, or anything else that is not a directory or a link.
    File,
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
            .output_schema::<LsOutput>()
    }

    fn call(input: LsInput, cx: &Context) -> Result<Output, ToolError> {
        let dir = cx.resolve(input.path.as_deref().unwrap_or("."))?;
        let shown = dir.display().to_string();
        let entries = std::fs::read_dir(&dir).map_err(|e| io_error(&e, &shown))?;
        let mut listed = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&e, &shown))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            let (kind, size) = if file_type.is_dir() {
                (Kind::Directory, None)
            } else if file_type.is_symlink() {
                (Kind::Symlink, None)
            } else {
                (Kind::File, entry.metadata().ok().map(|m| m.len()))
            };
            listed.push(Entry { name, kind, size });
        }
        listed.sort_by(|a, b| {
            let not_a_directory = |e: &Entry| !matches!(e.kind, Kind::Directory);
            not_a_directory(a)
                .cmp(&not_a_directory(b))
                .then_with(|| a.name.cmp(&b.name))
        });
        let total = listed.len();
        listed.truncate(MAX_ENTRIES);
        let mut text = format!("{shown}/\n");
        if listed.is_empty() {
            text.push_str("(empty)");
        } else {
            text.push_str(&listed.iter().map(line).collect::<Vec<_>>().join("\n"));
        }
        if total > MAX_ENTRIES {
            text.push_str(&format!("\n(showing {MAX_ENTRIES} of {total} entries)"));
        }
        Ok(Output::text(text).structured(&LsOutput {
            path: shown,
            entries: listed,
            total,
            truncated: total > MAX_ENTRIES,
        }))
    }
}

/// One entry as a line of the text.
fn line(entry: &Entry) -> String {
    match (entry.kind, entry.size) {
        (Kind::Directory, _) => format!("  {}/", entry.name),
        (Kind::Symlink, _) => format!("  {} (symlink)", entry.name),
        (Kind::File, Some(size)) => format!("  {} ({size} bytes)", entry.name),
        (Kind::File, None) => format!("  {}", entry.name),
    }
}

export_tool!(Ls);
