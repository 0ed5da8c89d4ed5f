//! `test_tool_with_logging`, a fixture of the MCP conformance suite
//! (`tools-call-with-logging`): three info log lines, 50 ms apart, all
//! before the result.

use airlock_sdk::{
    Context, Describe, Flags, JsonSchema, LogLevel, Output, Tool, ToolError, export_tool,
};
use serde::Deserialize;
use std::time::Duration;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoInput {}

struct WithLogging;

impl Tool for WithLogging {
    type Input = NoInput;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::empty();

    fn describe() -> Describe {
        Describe::new(
            "test_tool_with_logging",
            "Logs three lines while it runs, then returns.",
        )
        .flags(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE | Flags::IDEMPOTENT)
    }

    fn call(_input: NoInput, cx: &Context) -> Result<Output, ToolError> {
        for (step, line) in [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ]
        .into_iter()
        .enumerate()
        {
            if step > 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
            cx.log(LogLevel::Info, line);
        }
        Ok(Output::text("Logged three lines."))
    }
}

export_tool!(WithLogging);
