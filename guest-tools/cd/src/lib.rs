//! `cd`: changes the agent's working directory through a context change,
//! so later calls resolve relative paths against it. It runs exclusively
//! (not concurrency-safe): calls queued after it see the new directory.

use airlock_sdk::{
    Access, Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool, io_error,
};
use serde::{Deserialize, Serialize};

/// Input of `cd`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CdInput {
    /// The new working directory: absolute, or relative to the current one.
    path: String,
}

/// Output of `cd`.
#[derive(Serialize, JsonSchema)]
struct CdOutput {
    /// The new working directory, absolute.
    cwd: String,
}

struct Cd;

impl Tool for Cd {
    type Input = CdInput;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::empty();

    fn describe() -> Describe {
        Describe::new("cd", "Changes the working directory.")
            .title("Change directory")
            .prompt(
                "Changes the working directory to `path` (absolute, or relative to the current \
                 working directory). Relative paths given to later tool calls resolve against \
                 it. The directory must exist inside the workspace.",
            )
            .flags(Flags::READ_ONLY | Flags::IDEMPOTENT)
            .workspace(Access::Read)
            .output_schema::<CdOutput>()
    }

    fn call(input: CdInput, cx: &Context) -> Result<Output, ToolError> {
        let dir = cx.resolve(&input.path)?;
        let shown = dir.display().to_string();
        let meta = std::fs::metadata(&dir).map_err(|e| io_error(&e, &shown))?;
        if !meta.is_dir() {
            return Err(ToolError::InvalidInput(format!(
                "{shown} is not a directory"
            )));
        }
        Ok(
            Output::text(format!("The working directory is now {shown}."))
                .structured(&CdOutput { cwd: shown.clone() })
                .set_cwd(shown),
        )
    }
}

export_tool!(Cd);
