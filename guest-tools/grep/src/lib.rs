//! `grep`: searches file contents with ripgrep's own engine (the
//! `grep-regex`, `grep-searcher` and `ignore` crates), with the inputs of
//! Claude Code's Grep: output modes `files_with_matches` (default),
//! `content` and `count`; `-i`, `-n`, `-A`, `-B`, `-C`; `glob` and `type`
//! filters; `multiline`; `head_limit` and `offset`. Like ripgrep it honours
//! `.gitignore` (even outside a git repository), skips hidden and binary
//! files, and uses Rust regex syntax.

use airlock_sdk::{
    Access, Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool, io_error,
};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

const DEFAULT_HEAD_LIMIT: usize = 250;
const MAX_LINE_CHARS: usize = 500;

/// Input of `grep`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GrepInput {
    /// The regular expression (Rust regex syntax, as in ripgrep).
    pattern: String,
    /// A file or directory to search (default: the working directory).
    path: Option<String>,
    /// Only search files matching this glob (ripgrep's --glob; `!` excludes).
    glob: Option<String>,
    /// Only search files of this type (ripgrep's --type: rust, py, js, ...).
    #[serde(rename = "type")]
    file_type: Option<String>,
    /// `files_with_matches` (default), `content` or `count`.
    output_mode: Option<OutputMode>,
    /// Case-insensitive search.
    #[serde(rename = "-i")]
    case_insensitive: Option<bool>,
    /// Show line numbers (content mode; default true).
    #[serde(rename = "-n")]
    line_numbers: Option<bool>,
    /// Lines of context after each match (content mode).
    #[serde(rename = "-A")]
    after: Option<usize>,
    /// Lines of context before each match (content mode).
    #[serde(rename = "-B")]
    before: Option<usize>,
    /// Lines of context around each match (content mode).
    #[serde(rename = "-C")]
    context: Option<usize>,
    /// Let patterns span lines, and `.` match newlines.
    multiline: Option<bool>,
    /// At most this many output entries (lines, files or counts); default 250, 0 for no limit.
    head_limit: Option<usize>,
    /// Skip this many output entries first.
    offset: Option<usize>,
}

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum OutputMode {
    /// Paths of the files that match, most recently modified first.
    FilesWithMatches,
    /// Matching lines, as `path:line:text` (context lines use `-`).
    Content,
    /// Matching lines per file, as `path:count`.
    Count,
}

/// Output of `grep`: the whole result, as the text shows it. Which list is
/// there depends on the mode.
#[derive(Serialize, JsonSchema)]
struct GrepOutput {
    /// The output mode of the search.
    mode: OutputMode,
    /// `files_with_matches`: the files shown, most recently modified first.
    #[serde(skip_serializing_if = "Option::is_none")]
    filenames: Option<Vec<String>>,
    /// `content`: the lines shown, as `path:line:text` (`path-line-text` for
    /// context lines, no line number with `-n` false, `--` between groups).
    #[serde(skip_serializing_if = "Option::is_none")]
    lines: Option<Vec<String>>,
    /// `count`: the files shown, with how many lines matched in each.
    #[serde(skip_serializing_if = "Option::is_none")]
    counts: Option<Vec<FileCount>>,
    /// How many files matched (in `content` mode, among the files searched
    /// before enough lines were found).
    num_files: usize,
    /// How many lines matched, in those files.
    num_matches: u64,
    /// How many entries were skipped first (`offset`).
    applied_offset: usize,
    /// The most entries shown (`head_limit`), unless unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    applied_limit: Option<usize>,
    /// Whether there are more entries than shown: raise `head_limit` or
    /// `offset` to see them.
    truncated: bool,
}

/// How many lines matched in one file.
#[derive(Serialize, JsonSchema)]
struct FileCount {
    /// The file.
    path: String,
    /// How many lines matched in it.
    count: u64,
}

struct Grep;

impl Tool for Grep {
    type Input = GrepInput;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::VALIDATE;

    fn describe() -> Describe {
        Describe::new(
            "grep",
            "Searches file contents with a regular expression (ripgrep's engine).",
        )
        .alias("Grep")
        .title("Search files")
        .prompt(
            "Searches the contents of files under `path` (a file or directory; default: the \
                 working directory) for `pattern`, a Rust regular expression as in ripgrep \
                 (escape braces: `interface\\{\\}`). `output_mode` is `files_with_matches` (the \
                 default: paths, newest first), `content` (matching lines as path:line:text, \
                 with `-A`/`-B`/`-C` context and `-n` line numbers) or `count` (path:count). \
                 Filter files with `glob` (`*.rs`, `!*.min.js`) or `type` (`rust`, `py`, `js`). \
                 `-i` ignores case; `multiline` lets a match span lines. Results are limited to \
                 `head_limit` entries (default 250; 0 for all), after skipping `offset`. Files \
                 ignored by .gitignore, hidden files and binary files are skipped.",
        )
        .flags(
            Flags::READ_ONLY | Flags::CONCURRENCY_SAFE | Flags::IDEMPOTENT | Flags::SEARCH_OR_READ,
        )
        .workspace(Access::Read)
        .output_schema::<GrepOutput>()
    }

    fn validate(input: &GrepInput, _cx: &Context) -> Result<(), String> {
        build_matcher(input).map(drop)?;
        if let Some(t) = &input.file_type {
            types(t).map(drop)?;
        }
        Ok(())
    }

    fn call(input: GrepInput, cx: &Context) -> Result<Output, ToolError> {
        let root = cx.resolve(input.path.as_deref().unwrap_or("."))?;
        let shown_root = root.display().to_string();
        let meta = std::fs::metadata(&root).map_err(|e| io_error(&e, &shown_root))?;
        let matcher = build_matcher(&input).map_err(ToolError::InvalidInput)?;
        let mode = input.output_mode.unwrap_or(OutputMode::FilesWithMatches);
        let multiline = input.multiline.unwrap_or(false);
        let content = mode == OutputMode::Content;
        let (before, after) = match input.context {
            Some(c) => (c, c),
            None => (input.before.unwrap_or(0), input.after.unwrap_or(0)),
        };
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .multi_line(multiline)
            .before_context(if content { before } else { 0 })
            .after_context(if content { after } else { 0 })
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .build();
        let limit = match input.head_limit.unwrap_or(DEFAULT_HEAD_LIMIT) {
            0 => usize::MAX,
            n => n,
        };
        let skip = input.offset.unwrap_or(0);
        let wanted = skip.saturating_add(limit).saturating_add(1);

        let files = if meta.is_dir() {
            walk(&root, &input, cx)?
        } else {
            vec![root.clone()]
        };

        let mut out = Collected::default();
        let numbers = input.line_numbers.unwrap_or(true);
        for file in &files {
            if cx.cancelled() {
                return Err(ToolError::Cancelled("the search was cancelled".into()));
            }
            let shown = file.display().to_string();
            let mut sink = FileSink {
                path: &shown,
                mode,
                numbers,
                lines: &mut out.lines,
                matched_lines: 0,
                keep_lines: wanted,
            };
            // Unreadable files are skipped, as ripgrep skips them.
            if searcher.search_path(&matcher, file, &mut sink).is_err() {
                continue;
            }
            let matched = sink.matched_lines;
            if matched > 0 {
                out.total_matches += matched;
                out.files.push((shown, matched));
            }
            if content && out.lines.len() >= wanted {
                out.stopped_early = true;
                break;
            }
        }
        Ok(render(mode, out, skip, limit))
    }
}

/// What a search collected.
#[derive(Default)]
struct Collected {
    /// Content lines (content mode).
    lines: Vec<String>,
    /// Files with matches, and how many lines matched in each.
    files: Vec<(String, u64)>,
    total_matches: u64,
    stopped_early: bool,
}

fn render(mode: OutputMode, out: Collected, skip: usize, limit: usize) -> Output {
    let num_files = out.files.len();
    let stopped_early = out.stopped_early;
    let page = |entries| paged(entries, skip, limit, stopped_early);
    let mut structured = GrepOutput {
        mode,
        filenames: None,
        lines: None,
        counts: None,
        num_files,
        num_matches: out.total_matches,
        applied_offset: skip,
        applied_limit: (limit != usize::MAX).then_some(limit),
        truncated: false,
    };
    let (mut text, noun) = match mode {
        OutputMode::Content => {
            let (lines, more) = page(out.lines);
            structured.truncated = more;
            let text = if lines.is_empty() && num_files == 0 {
                "No matches found".to_string()
            } else {
                lines.join("\n")
            };
            structured.lines = Some(lines);
            (text, "lines")
        }
        OutputMode::Count => {
            let all = out
                .files
                .into_iter()
                .map(|(path, count)| FileCount { path, count });
            let (counts, more) = paged(all.collect(), skip, limit, stopped_early);
            structured.truncated = more;
            let text = if counts.is_empty() && num_files == 0 {
                "No matches found".to_string()
            } else {
                format!(
                    "{}\n\nFound {} matching lines across {num_files} files",
                    counts
                        .iter()
                        .map(|c| format!("{}:{}", c.path, c.count))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    out.total_matches
                )
            };
            structured.counts = Some(counts);
            (text, "files")
        }
        OutputMode::FilesWithMatches => {
            let mut by_age: Vec<(SystemTime, &String)> = out
                .files
                .iter()
                .map(|(p, _)| {
                    let t = std::fs::metadata(p)
                        .and_then(|m| m.modified())
                        .unwrap_or(SystemTime::UNIX_EPOCH);
                    (t, p)
                })
                .collect();
            by_age.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
            let (files, more) = page(by_age.into_iter().map(|(_, p)| p.clone()).collect());
            structured.truncated = more;
            let text = if num_files == 0 {
                "No files found".to_string()
            } else {
                format!("Found {num_files} files\n{}", files.join("\n"))
            };
            structured.filenames = Some(files);
            (text, "files")
        }
    };
    if structured.truncated {
        text.push_str(&format!(
            "\n(more {noun} than shown: limit {}, offset {skip}; raise head_limit or offset to see more)",
            if limit == usize::MAX { "none".to_string() } else { limit.to_string() }
        ));
    }
    Output::text(text).structured(&structured)
}

/// The page of `entries` after skipping `skip`, at most `limit` long, and
/// whether there are more than it shows.
fn paged<T>(entries: Vec<T>, skip: usize, limit: usize, stopped_early: bool) -> (Vec<T>, bool) {
    let available = entries.len();
    let page: Vec<T> = entries.into_iter().skip(skip).take(limit).collect();
    let more = available > skip.saturating_add(page.len()) || stopped_early;
    (page, more)
}

/// Collects one file's results.
struct FileSink<'a> {
    path: &'a str,
    mode: OutputMode,
    numbers: bool,
    lines: &'a mut Vec<String>,
    matched_lines: u64,
    /// Stop collecting content once this many lines are held.
    keep_lines: usize,
}

impl FileSink<'_> {
    fn push(&mut self, number: Option<u64>, sep: char, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches('\n').trim_end_matches('\r');
        let text = match text.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => format!("{}… [line truncated]", &text[..cut]),
            None => text.to_string(),
        };
        let line = match (self.numbers, number) {
            (true, Some(n)) => format!("{}{sep}{n}{sep}{text}", self.path),
            _ => format!("{}{sep}{text}", self.path),
        };
        self.lines.push(line);
    }
}

impl Sink for FileSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let spanned = m.lines().count() as u64;
        self.matched_lines += spanned.max(1);
        match self.mode {
            OutputMode::FilesWithMatches => Ok(false),
            OutputMode::Count => Ok(true),
            OutputMode::Content => {
                let first = m.line_number();
                for (i, line) in m.lines().enumerate() {
                    self.push(first.map(|n| n + i as u64), ':', line);
                }
                Ok(self.lines.len() < self.keep_lines)
            }
        }
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if self.mode == OutputMode::Content {
            self.push(c.line_number(), '-', c.bytes());
        }
        Ok(self.lines.len() < self.keep_lines)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        if self.mode == OutputMode::Content {
            self.lines.push("--".into());
        }
        Ok(true)
    }
}

fn build_matcher(input: &GrepInput) -> Result<RegexMatcher, String> {
    let multiline = input.multiline.unwrap_or(false);
    let mut builder = RegexMatcherBuilder::new();
    builder
        .case_insensitive(input.case_insensitive.unwrap_or(false))
        .multi_line(true)
        .dot_matches_new_line(multiline);
    if !multiline {
        builder.line_terminator(Some(b'\n'));
    }
    builder
        .build(&input.pattern)
        .map_err(|e| format!("the pattern is not a valid regular expression: {e}"))
}

fn types(name: &str) -> Result<ignore::types::Types, String> {
    let mut builder = ignore::types::TypesBuilder::new();
    builder.add_defaults();
    builder.select(name);
    builder
        .build()
        .map_err(|e| format!("unknown file type {name:?}: {e}"))
}

/// The files under `root` to search, in path order.
fn walk(root: &Path, input: &GrepInput, cx: &Context) -> Result<Vec<PathBuf>, ToolError> {
    let mut builder = ignore::WalkBuilder::new(root);
    builder
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b));
    if let Some(t) = &input.file_type {
        builder.types(types(t).map_err(ToolError::InvalidInput)?);
    }
    if let Some(glob) = &input.glob {
        let mut overrides = ignore::overrides::OverrideBuilder::new(root);
        overrides
            .add(glob)
            .map_err(|e| ToolError::InvalidInput(format!("the glob {glob:?} is not valid: {e}")))?;
        builder.overrides(overrides.build().map_err(|e| {
            ToolError::InvalidInput(format!("the glob {glob:?} is not valid: {e}"))
        })?);
    }
    let mut files = Vec::new();
    for entry in builder.build() {
        if cx.cancelled() {
            return Err(ToolError::Cancelled("the search was cancelled".into()));
        }
        let Ok(entry) = entry else { continue };
        if entry.file_type().is_some_and(|t| t.is_file()) {
            files.push(entry.into_path());
        }
    }
    Ok(files)
}

export_tool!(Grep);
