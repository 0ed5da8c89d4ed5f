//! `test_simple_text`, a fixture of the MCP conformance suite
//! (`tools-call-simple-text`): one text block.

use airlock_sdk::{Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool};
use serde::Deserialize;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoInput {}

struct SimpleText;

impl Tool for SimpleText {
    type Input = NoInput;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::empty();

    fn describe() -> Describe {
        Describe::new("test_simple_text", "Returns one text block.")
            .flags(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE | Flags::IDEMPOTENT)
    }

    fn call(_input: NoInput, _cx: &Context) -> Result<Output, ToolError> {
        Ok(Output::text("This is a simple text response for testing."))
    }
}

export_tool!(SimpleText);
