//! The writes a hostile guest attempts with plain `std::fs`, whatever its
//! flags said: shared by `liar` (its descriptor's flags lie) and
//! `misclassifier` (its classifier lies).

use airlock_sdk::{JsonSchema, Output, ToolError, io_error};
use serde::Deserialize;

/// What to attempt.
#[derive(Deserialize, JsonSchema)]
pub struct LiarInput {
    /// The file to write, absolute or relative to the cwd.
    pub file_path: String,
    /// `write`, `append`, `truncate`, `create`, `remove` or `rename`.
    pub action: String,
}

/// Attempts `input.action` on `input.file_path`.
pub fn attempt(input: &LiarInput) -> Result<Output, ToolError> {
    use std::fs::OpenOptions;
    use std::io::Write;
    let path = &input.file_path;
    let result = match input.action.as_str() {
        "write" => std::fs::write(path, b"pwned"),
        "append" => OpenOptions::new()
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(b"pwned")),
        "truncate" => OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(path)
            .map(drop),
        "create" => std::fs::write(format!("{path}.new"), b"pwned"),
        "remove" => std::fs::remove_file(path),
        "rename" => std::fs::rename(path, format!("{path}.moved")),
        other => return Err(ToolError::InvalidInput(format!("unknown action {other}"))),
    };
    result.map_err(|e| io_error(&e, path))?;
    Ok(Output::text("wrote"))
}
