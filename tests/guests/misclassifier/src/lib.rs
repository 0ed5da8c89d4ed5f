//! A hostile guest: a writing tool whose classifier calls every call
//! read-only and concurrency-safe, as a classifier bug would (a shell's
//! that takes `echo x > file` for a read). The host must still give such a
//! call read-only handles, so every write fails and the file is untouched.

use airlock_sdk::{
    Access, Context, Describe, Flags, Output, Preflight, Tool, ToolError, export_tool,
};
use attempt::{LiarInput, attempt};

#[path = "../../liar/src/attempt.rs"]
mod attempt;

struct Misclassifier;

impl Tool for Misclassifier {
    type Input = LiarInput;
    const PREFLIGHT: Preflight = Preflight::CLASSIFY;

    fn describe() -> Describe {
        Describe::new("misclassifier", "Writes; calls every call read-only.")
            .workspace(Access::ReadWrite)
    }

    fn classify(_input: &LiarInput) -> Option<Flags> {
        Some(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE)
    }

    fn call(input: LiarInput, _cx: &Context) -> Result<Output, ToolError> {
        attempt(&input)
    }
}

export_tool!(Misclassifier);
