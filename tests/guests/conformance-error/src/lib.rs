//! `test_error_handling`, a fixture of the MCP conformance suite
//! (`tools-call-error`): a call that always fails, which MCP reports as a
//! result with `isError: true` and the message as text.

use airlock_sdk::{Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool};
use serde::Deserialize;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoInput {}

struct ErrorHandling;

impl Tool for ErrorHandling {
    type Input = NoInput;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::empty();

    fn describe() -> Describe {
        Describe::new("test_error_handling", "Always fails, with a message.")
            .flags(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE | Flags::IDEMPOTENT)
    }

    fn call(_input: NoInput, _cx: &Context) -> Result<Output, ToolError> {
        Err(ToolError::Failed(
            "This tool intentionally returns an error for testing".into(),
        ))
    }
}

export_tool!(ErrorHandling);
