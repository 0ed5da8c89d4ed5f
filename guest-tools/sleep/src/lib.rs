//! `sleep`: waits for a number of milliseconds, reporting progress and
//! stopping early when the call is cancelled. For demos, tests and
//! benchmarks of the scheduler.

use airlock_sdk::{Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// How often progress is reported.
const SLICE: Duration = Duration::from_millis(100);

/// Input of `sleep`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SleepInput {
    /// How long to wait, in milliseconds (at most 600000).
    #[schemars(range(max = 600000))]
    ms: u64,
}

/// Output of `sleep`.
#[derive(Serialize, JsonSchema)]
struct SleepOutput {
    /// How long the call waited, in milliseconds.
    slept_ms: u64,
}

struct Sleep;

impl Tool for Sleep {
    type Input = SleepInput;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::empty();

    fn describe() -> Describe {
        Describe::new(
            "sleep",
            "Waits for a number of milliseconds, reporting progress.",
        )
        .title("Sleep")
        .prompt(
            "Waits for `ms` milliseconds (at most 600000) and reports progress while it \
                 waits. Use it to wait for something outside the agent to finish.",
        )
        .flags(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE | Flags::IDEMPOTENT)
        .output_schema::<SleepOutput>()
    }

    fn call(input: SleepInput, cx: &Context) -> Result<Output, ToolError> {
        let total = Duration::from_millis(input.ms);
        let start = Instant::now();
        loop {
            let elapsed = start.elapsed();
            if elapsed >= total {
                break;
            }
            if cx.cancelled() {
                return Err(ToolError::Cancelled(format!(
                    "stopped after {} ms of {}",
                    elapsed.as_millis(),
                    input.ms
                )));
            }
            cx.progress(
                &format!("slept {} of {} ms", elapsed.as_millis(), input.ms),
                Some(elapsed.as_secs_f32() / total.as_secs_f32()),
            );
            std::thread::sleep(SLICE.min(total - elapsed));
        }
        Ok(Output::text(format!("Slept {} ms.", input.ms))
            .structured(&SleepOutput { slept_ms: input.ms }))
    }
}

export_tool!(Sleep);
