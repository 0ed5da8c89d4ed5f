//! `edit`: replaces exact text in a file, the way Claude Code's Edit does.
//! `old_string` must occur exactly once unless `replace_all` is set; the
//! file must have been read (and be unchanged since) so the model edits
//! what it saw. The write is atomic, and recorded as a read.

use airlock_sdk::fs::{numbered, write_atomic};
use airlock_sdk::{
    Access, Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool, io_error,
};
use serde::{Deserialize, Serialize};

/// Lines of context around an edit in the snippet shown back.
const SNIPPET_CONTEXT: usize = 3;

/// Input of `edit`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EditInput {
    /// The file to edit: absolute, or relative to the working directory.
    file_path: String,
    /// The exact text to replace (without read's line-number prefixes). Empty
    /// creates the file with `new_string`, if it does not exist.
    old_string: String,
    /// The text to put in its place; must differ from `old_string`.
    new_string: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default)]
    replace_all: bool,
}

/// Output of `edit`: the whole result, as the text shows it.
#[derive(Serialize, JsonSchema)]
struct EditOutput {
    /// The file edited, absolute.
    file_path: String,
    /// Whether text was replaced or, with an empty `old_string`, the file
    /// created.
    #[serde(rename = "type")]
    kind: Change,
    /// How many occurrences were replaced (0 when the file was created).
    replacements: usize,
    /// The file's size afterwards, in bytes.
    bytes: usize,
    /// The file around the first replacement, numbered like `read` (empty
    /// when the file was created).
    snippet: String,
}

/// What an edit did to its file.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Change {
    /// Text was replaced.
    Update,
    /// The file was created.
    Create,
}

struct Edit;

impl Tool for Edit {
    type Input = EditInput;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::VALIDATE;

    fn describe() -> Describe {
        Describe::new("edit", "Replaces exact text in a file.")
            .alias("Edit")
            .title("Edit file")
            .prompt(
                "Replaces `old_string` with `new_string` in `file_path`. `old_string` must \
                 match the file exactly, including whitespace and indentation, and must not \
                 include the line-number prefix that read adds. It must occur exactly once; \
                 add surrounding lines to make it unique, or set `replace_all` to replace \
                 every occurrence. Read the file first: the edit is refused if the file was not \
                 read, or changed since it was read. An empty `old_string` creates a new file.",
            )
            .flags(Flags::empty())
            .workspace(Access::ReadWrite)
            .output_schema::<EditOutput>()
    }

    fn validate(input: &EditInput, _cx: &Context) -> Result<(), String> {
        if input.old_string == input.new_string {
            return Err(
                "old_string and new_string are the same, so the edit would change nothing".into(),
            );
        }
        Ok(())
    }

    fn call(input: EditInput, cx: &Context) -> Result<Output, ToolError> {
        let path = cx.resolve_writable(&input.file_path)?;
        let shown = path.display().to_string();

        if input.old_string.is_empty() {
            return create(&path, &shown, &input.new_string);
        }

        let Some(unchanged) = cx.file_unchanged_since_read(&path) else {
            return match std::fs::metadata(&path) {
                Err(e) => Err(io_error(&e, &shown)),
                Ok(_) => Err(ToolError::Conflict(format!(
                    "{shown} has not been read yet. Read it first, then edit it."
                ))),
            };
        };
        if !unchanged {
            std::fs::metadata(&path).map_err(|e| io_error(&e, &shown))?;
            return Err(ToolError::Conflict(format!(
                "{shown} has changed since it was read (by the user or another program). \
                 Read it again, then edit it."
            )));
        }
        let original = std::fs::read(&path).map_err(|e| io_error(&e, &shown))?;
        let original = String::from_utf8(original).map_err(|_| {
            ToolError::InvalidInput(format!(
                "{shown} is not UTF-8 text; edit only changes text files"
            ))
        })?;

        let (old, new) = matching_strings(&original, &input.old_string, &input.new_string);
        let count = original.matches(old.as_str()).count();
        if count == 0 {
            return Err(ToolError::InvalidInput(format!(
                "old_string was not found in {shown}. It must match exactly, including \
                 whitespace and indentation, and without read's line-number prefixes."
            )));
        }
        if count > 1 && !input.replace_all {
            return Err(ToolError::InvalidInput(format!(
                "Found {count} matches of old_string in {shown}, but replace_all is false. To \
                 replace every one, set replace_all to true; to replace one, include more \
                 surrounding lines so it is unique."
            )));
        }
        let first = original.find(old.as_str()).unwrap_or(0);
        let updated = if input.replace_all {
            original.replace(old.as_str(), &new)
        } else {
            original.replacen(old.as_str(), &new, 1)
        };
        write_atomic(&path, updated.as_bytes())?;

        let replaced = if input.replace_all { count } else { 1 };
        let snippet = snippet(&updated, first, new.len());
        Ok(Output::text(format!(
            "Edited {shown}: {replaced} replacement{}. The result around the first one:\n{snippet}",
            if replaced == 1 { "" } else { "s" }
        ))
        .structured(&EditOutput {
            file_path: shown.clone(),
            kind: Change::Update,
            replacements: replaced,
            bytes: updated.len(),
            snippet,
        })
        .record_file_read(shown))
    }
}

/// Creates a file from an edit with an empty `old_string`.
fn create(path: &std::path::Path, shown: &str, content: &str) -> Result<Output, ToolError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.len() > 0 => Err(ToolError::InvalidInput(format!(
            "old_string is empty, which creates a file, but {shown} already exists and is not \
             empty. Give the text to replace."
        ))),
        _ => {
            write_atomic(path, content.as_bytes())?;
            Ok(
                Output::text(format!("Created {shown} ({} bytes).", content.len()))
                    .structured(&EditOutput {
                        file_path: shown.to_string(),
                        kind: Change::Create,
                        replacements: 0,
                        bytes: content.len(),
                        snippet: String::new(),
                    })
                    .record_file_read(shown.to_string()),
            )
        }
    }
}

/// The strings to match: as given, or with `\n` turned into `\r\n` when the
/// file uses CRLF line endings and the model's text (which cannot show
/// them) does not match as given.
fn matching_strings(file: &str, old: &str, new: &str) -> (String, String) {
    if !file.contains(old) && file.contains("\r\n") && old.contains('\n') && !old.contains('\r') {
        let crlf = |s: &str| s.replace('\n', "\r\n");
        return (crlf(old), crlf(new));
    }
    (old.to_string(), new.to_string())
}

/// The edited region with a few lines around it, numbered like `read`.
fn snippet(text: &str, start: usize, len: usize) -> String {
    let first_line = text[..start.min(text.len())].matches('\n').count();
    let end = (start + len).min(text.len());
    let last_line = text[..end].matches('\n').count();
    let from = first_line.saturating_sub(SNIPPET_CONTEXT);
    let to = last_line + SNIPPET_CONTEXT;
    text.lines()
        .enumerate()
        .skip(from)
        .take(to - from + 1)
        .map(|(i, line)| numbered(i + 1, line.trim_end_matches('\r')))
        .collect::<Vec<_>>()
        .join("\n")
}

export_tool!(Edit);
