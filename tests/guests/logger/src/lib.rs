//! A tool that logs the lines it is given, each at its level and in order,
//! waiting between them if asked, then returns how many it logged: for the
//! tests of log lines as MCP `notifications/message` (levels, filtering,
//! order before the result, sanitising).

use airlock_sdk::{
    Context, Describe, Flags, JsonSchema, LogLevel, Output, Tool, ToolError, export_tool,
};
use serde::Deserialize;
use std::time::Duration;

/// One line to log.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Line {
    /// `trace`, `debug`, `info`, `warn` or `error`.
    level: String,
    /// The text.
    message: String,
}

/// What to log.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LoggerInput {
    /// The lines, in order.
    lines: Vec<Line>,
    /// Milliseconds to wait before each line after the first.
    #[serde(default)]
    gap_ms: u64,
}

struct Logger;

impl Tool for Logger {
    type Input = LoggerInput;

    fn describe() -> Describe {
        Describe::new("logger", "Logs the lines it is given, then returns.")
            .flags(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE | Flags::IDEMPOTENT)
    }

    fn call(input: LoggerInput, cx: &Context) -> Result<Output, ToolError> {
        for (i, line) in input.lines.iter().enumerate() {
            let level = match line.level.as_str() {
                "trace" => LogLevel::Trace,
                "debug" => LogLevel::Debug,
                "info" => LogLevel::Info,
                "warn" => LogLevel::Warn,
                "error" => LogLevel::Error,
                other => return Err(ToolError::InvalidInput(format!("no level {other:?}"))),
            };
            if i > 0 && input.gap_ms > 0 {
                std::thread::sleep(Duration::from_millis(input.gap_ms));
            }
            cx.log(level, &line.message);
        }
        Ok(Output::text(format!("logged {} lines", input.lines.len())))
    }
}

export_tool!(Logger);
