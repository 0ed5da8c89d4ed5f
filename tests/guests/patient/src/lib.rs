//! A tool whose interrupt behaviour is `block`: a user interrupt does not
//! stop it; it finishes its wait and says whether it saw the cancellation.

use airlock_sdk::{
    Context, Describe, Flags, Interrupt, JsonSchema, Output, Tool, ToolError, export_tool,
};
use serde::Deserialize;

/// How long to work.
#[derive(Deserialize, JsonSchema)]
struct PatientInput {
    /// Milliseconds.
    ms: u64,
}

struct Patient;

impl Tool for Patient {
    type Input = PatientInput;

    fn describe() -> Describe {
        Describe::new("patient", "Works for a while and always finishes.")
            .flags(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE)
            .interrupt(Interrupt::Block)
    }

    fn call(input: PatientInput, cx: &Context) -> Result<Output, ToolError> {
        std::thread::sleep(std::time::Duration::from_millis(input.ms));
        Ok(Output::text(format!(
            "finished; cancelled seen: {}",
            cx.cancelled()
        )))
    }
}

export_tool!(Patient);
