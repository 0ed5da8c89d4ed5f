//! `write`: writes a whole file atomically (a temporary file renamed over
//! the target), creating missing parent directories. The write is recorded
//! as a read, so the model can `edit` the file next without reading it again.

use airlock_sdk::fs::write_atomic;
use airlock_sdk::{
    Access, Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool,
};
use serde::{Deserialize, Serialize};

/// Input of `write`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteInput {
    /// The file to write: absolute, or relative to the working directory.
    file_path: String,
    /// The whole new content of the file.
    content: String,
}

/// Output of `write`: the whole result, as the text shows it.
#[derive(Serialize, JsonSchema)]
struct WriteOutput {
    /// The file written, absolute.
    file_path: String,
    /// Whether the file was created or replaced.
    #[serde(rename = "type")]
    kind: Change,
    /// How many bytes were written.
    bytes: usize,
}

/// What a write did to its file.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Change {
    /// The file was created.
    Create,
    /// The file existed and was replaced.
    Update,
}

struct Write;

impl Tool for Write {
    type Input = WriteInput;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::empty();

    fn describe() -> Describe {
        Describe::new("write", "Writes a whole file, replacing it if it exists.")
            .alias("Write")
            .title("Write file")
            .prompt(
                "Writes `content` to `file_path` (absolute, or relative to the working \
                 directory), replacing the whole file if it exists and creating missing parent \
                 directories. The write is atomic: readers see the old file or the new one, \
                 never half of it. Prefer `edit` to change part of an existing file.",
            )
            .flags(Flags::DESTRUCTIVE | Flags::IDEMPOTENT)
            .workspace(Access::ReadWrite)
            .output_schema::<WriteOutput>()
    }

    fn call(input: WriteInput, cx: &Context) -> Result<Output, ToolError> {
        let path = cx.resolve_writable(&input.file_path)?;
        let shown = path.display().to_string();
        let existed = write_atomic(&path, input.content.as_bytes())?;
        let (verb, kind) = if existed {
            ("Updated", Change::Update)
        } else {
            ("Created", Change::Create)
        };
        Ok(
            Output::text(format!("{verb} {shown} ({} bytes).", input.content.len()))
                .structured(&WriteOutput {
                    file_path: shown.clone(),
                    kind,
                    bytes: input.content.len(),
                })
                .record_file_read(shown),
        )
    }
}

export_tool!(Write);
