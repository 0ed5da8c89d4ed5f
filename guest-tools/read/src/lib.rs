//! `read`: reads a file the way Claude Code's Read does: `cat -n` line
//! numbers, a 1-based `offset`, a `limit` (2000 lines by default), long
//! lines truncated, binary files refused, images returned as images. Each
//! read is recorded (a context change) so `edit` can check the file is
//! unchanged since the model saw it.

use airlock_sdk::fs::{looks_binary, numbered};
use airlock_sdk::{
    Access, Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool, io_error,
};
use serde::Deserialize;
use std::io::{BufRead, BufReader};

const DEFAULT_LIMIT: usize = 2000;
const MAX_LINE_CHARS: usize = 2000;
const MAX_IMAGE_BYTES: u64 = 5 << 20;

/// Input of `read`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadInput {
    /// The file to read: absolute, or relative to the working directory.
    file_path: String,
    /// The line to start at (1 is the first line).
    #[schemars(range(min = 1))]
    offset: Option<usize>,
    /// How many lines to read (default 2000).
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

struct Read_;

impl Tool for Read_ {
    type Input = ReadInput;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::empty();

    fn describe() -> Describe {
        Describe::new(
            "read",
            "Reads a file from the workspace, with line numbers.",
        )
        .alias("Read")
        .title("Read file")
        .prompt(
            "Reads a file. `file_path` is absolute or relative to the working directory. \
                 Lines come back in `cat -n` form: the line number, a tab, the line. By default \
                 up to 2000 lines are read from the start; use `offset` (1-based) and `limit` to \
                 read other parts of long files. Lines longer than 2000 characters are \
                 truncated. Images (PNG, JPEG, GIF, WebP) come back as images; other binary \
                 files are refused. Read a file before editing it: `edit` refuses files that \
                 were not read, or that changed since.",
        )
        .flags(
            Flags::READ_ONLY | Flags::CONCURRENCY_SAFE | Flags::IDEMPOTENT | Flags::SEARCH_OR_READ,
        )
        .workspace(Access::Read)
        .max_result_size(100_000)
    }

    fn call(input: ReadInput, cx: &Context) -> Result<Output, ToolError> {
        let path = cx.resolve(&input.file_path)?;
        let shown = path.display().to_string();
        let meta = std::fs::metadata(&path).map_err(|e| io_error(&e, &shown))?;
        if meta.is_dir() {
            return Err(ToolError::InvalidInput(format!(
                "{shown} is a directory; use ls to list it"
            )));
        }
        if let Some(mime) = image_type(&shown) {
            if meta.len() > MAX_IMAGE_BYTES {
                return Err(ToolError::InvalidInput(format!(
                    "{shown} is a {} byte image; the most read returns is {MAX_IMAGE_BYTES}",
                    meta.len()
                )));
            }
            let bytes = std::fs::read(&path).map_err(|e| io_error(&e, &shown))?;
            return Ok(
                Output::text(format!("Image {shown} ({} bytes):", bytes.len()))
                    .with_image(mime, bytes)
                    .record_file_read(shown),
            );
        }

        let file = std::fs::File::open(&path).map_err(|e| io_error(&e, &shown))?;
        let mut reader = BufReader::new(file);
        if looks_binary(&peek(&mut reader).map_err(|e| io_error(&e, &shown))?) {
            return Err(ToolError::InvalidInput(format!(
                "{shown} is a binary file ({} bytes); read only shows text",
                meta.len()
            )));
        }
        let offset = input.offset.unwrap_or(1).max(1);
        let limit = input.limit.unwrap_or(DEFAULT_LIMIT);
        let mut text = String::new();
        let mut total = 0usize;
        let mut shown_lines = 0usize;
        let mut truncated = 0usize;
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| io_error(&e, &shown))?;
            if n == 0 {
                break;
            }
            total += 1;
            if total < offset || shown_lines >= limit {
                continue;
            }
            let content = String::from_utf8_lossy(&line);
            let content = content.trim_end_matches('\n').trim_end_matches('\r');
            let content = match content.char_indices().nth(MAX_LINE_CHARS) {
                Some((cut, _)) => {
                    truncated += 1;
                    format!("{}… [line truncated]", &content[..cut])
                }
                None => content.to_string(),
            };
            if shown_lines > 0 {
                text.push('\n');
            }
            text.push_str(&numbered(total, &content));
            shown_lines += 1;
        }

        let mut notes = Vec::new();
        if total == 0 {
            notes.push(format!("{shown} exists but is empty."));
        } else if shown_lines == 0 {
            notes.push(format!(
                "{shown} has {total} lines; offset {offset} is past its end."
            ));
        } else if shown_lines < total {
            notes.push(format!(
                "PARTIAL view: lines {offset} to {} of {total}. Use offset and limit to read more.",
                offset + shown_lines - 1
            ));
        }
        if truncated > 0 {
            notes.push(format!(
                "{truncated} lines longer than {MAX_LINE_CHARS} characters were truncated."
            ));
        }
        for note in notes {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&format!("({note})"));
        }
        Ok(Output::text(text).record_file_read(shown))
    }
}

/// The start of the file (up to the reader's buffer), without consuming it.
fn peek(reader: &mut BufReader<std::fs::File>) -> std::io::Result<Vec<u8>> {
    Ok(reader.fill_buf()?.to_vec())
}

fn image_type(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    match ext.as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

export_tool!(Read_);
