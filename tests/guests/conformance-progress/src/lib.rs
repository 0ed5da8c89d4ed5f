//! `test_tool_with_progress`, a fixture of the MCP conformance suite
//! (`tools-call-with-progress`): reports progress 0, ½ and 1, 50 ms apart.

use airlock_sdk::{Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool};
use serde::Deserialize;
use std::time::Duration;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoInput {}

struct WithProgress;

impl Tool for WithProgress {
    type Input = NoInput;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::empty();

    fn describe() -> Describe {
        Describe::new(
            "test_tool_with_progress",
            "Reports progress three times, then returns.",
        )
        .flags(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE | Flags::IDEMPOTENT)
    }

    fn call(_input: NoInput, cx: &Context) -> Result<Output, ToolError> {
        for (step, fraction) in [0.0, 0.5, 1.0].into_iter().enumerate() {
            if step > 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
            cx.progress(&format!("step {} of 3", step + 1), Some(fraction));
        }
        Ok(Output::text("Progress reported three times."))
    }
}

export_tool!(WithProgress);
