//! `glob`: finds files whose path matches a glob pattern (`**/*.rs`,
//! `src/{a,b}/*.ts`), newest first, at most 100. Like Claude Code's Glob it
//! does not apply `.gitignore`; it skips `.git` directories.

use airlock_sdk::{
    Access, Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool, io_error,
};
use globset::{Glob as Pattern, GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use std::time::SystemTime;

const MAX_RESULTS: usize = 100;

/// Input of `glob`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GlobInput {
    /// The pattern, relative to `path`: `*` stays within a directory, `**`
    /// crosses directories, `{a,b}` is either.
    pattern: String,
    /// The directory to search (default: the working directory).
    path: Option<String>,
}

/// Output of `glob`: the whole result, as the text shows it.
#[derive(Serialize, JsonSchema)]
struct GlobOutput {
    /// The matching files, absolute, most recently modified first (at most 100).
    filenames: Vec<String>,
    /// How many files matched, including any not listed.
    num_files: usize,
    /// Whether more files matched than are listed.
    truncated: bool,
}

struct Glob;

impl Tool for Glob {
    type Input = GlobInput;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::VALIDATE;

    fn describe() -> Describe {
        Describe::new("glob", "Finds files by path pattern, newest first.")
            .alias("Glob")
            .title("Find files")
            .prompt(
                "Finds files whose path, relative to `path` (default: the working directory), \
                 matches `pattern`: `*` matches within one directory, `**` across directories, \
                 `?` one character, `{a,b}` either. For example `**/*.rs` or `src/**/*.{ts,tsx}`. \
                 Returns absolute paths, most recently modified first, at most 100. Files \
                 ignored by .gitignore are included; .git directories are not.",
            )
            .flags(
                Flags::READ_ONLY
                    | Flags::CONCURRENCY_SAFE
                    | Flags::IDEMPOTENT
                    | Flags::SEARCH_OR_READ,
            )
            .workspace(Access::Read)
            .output_schema::<GlobOutput>()
    }

    fn validate(input: &GlobInput, _cx: &Context) -> Result<(), String> {
        // Parsing finds every error; compiling the matcher finds none more.
        pattern(&input.pattern, true).map(drop)
    }

    fn call(input: GlobInput, cx: &Context) -> Result<Output, ToolError> {
        let root = cx.resolve(input.path.as_deref().unwrap_or("."))?;
        let shown_root = root.display().to_string();
        let meta = std::fs::metadata(&root).map_err(|e| io_error(&e, &shown_root))?;
        if !meta.is_dir() {
            return Err(ToolError::InvalidInput(format!(
                "{shown_root} is not a directory"
            )));
        }
        // A pattern with no `/` and no `**` matches only the files directly
        // in `root`: nothing below them is walked, and, since their names
        // hold no `/`, `*` may as well match one (globset then matches
        // `*.txt` by its extension, compiling no regular expression).
        let shallow = !input.pattern.contains('/') && !input.pattern.contains("**");
        let glob = matcher(&input.pattern, !shallow).map_err(ToolError::InvalidInput)?;
        let walker = ignore::WalkBuilder::new(&root)
            .standard_filters(false)
            .max_depth(shallow.then_some(1))
            .filter_entry(|e| e.file_name() != ".git")
            .build();
        let mut found: Vec<(SystemTime, String)> = Vec::new();
        for entry in walker {
            if cx.cancelled() {
                return Err(ToolError::Cancelled("the search was cancelled".into()));
            }
            let Ok(entry) = entry else { continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(&root) else {
                continue;
            };
            if glob.is_match(rel) {
                let modified = entry
                    .metadata()
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                found.push((modified, entry.path().display().to_string()));
            }
        }
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let total = found.len();
        let truncated = total > MAX_RESULTS;
        let files: Vec<String> = found
            .into_iter()
            .take(MAX_RESULTS)
            .map(|(_, p)| p)
            .collect();
        let mut text = if files.is_empty() {
            "No files found".to_string()
        } else {
            files.join("\n")
        };
        if truncated {
            text.push_str(&format!(
                "\n(Showing the {MAX_RESULTS} newest of {total} files. Use a more specific path or pattern.)"
            ));
        }
        Ok(Output::text(text).structured(&GlobOutput {
            filenames: files,
            num_files: total,
            truncated,
        }))
    }
}

/// The pattern, `*` and `?` matching no `/` when `literal_separator`.
fn pattern(pattern: &str, literal_separator: bool) -> Result<Pattern, String> {
    GlobBuilder::new(pattern)
        .literal_separator(literal_separator)
        .build()
        .map_err(|e| format!("the pattern is not a valid glob: {e}"))
}

/// The pattern's matcher. A set of one pattern matches as the pattern's own
/// matcher does, but compiles no regular expression for the common shapes
/// (`**/*.rs`, a literal path): compiling one is most of a call's work.
fn matcher(glob: &str, literal_separator: bool) -> Result<GlobSet, String> {
    GlobSetBuilder::new()
        .add(pattern(glob, literal_separator)?)
        .build()
        .map_err(|e| format!("the pattern is not a valid glob: {e}"))
}

export_tool!(Glob);
