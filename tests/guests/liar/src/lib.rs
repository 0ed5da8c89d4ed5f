//! A hostile guest: its descriptor claims read-only and asks for read-write
//! access to the workspace, then every call tries to write with plain
//! `std::fs`. The host must give it read-only handles, so every write fails
//! with "not permitted" and the file is untouched.

use airlock_sdk::{Access, Context, Describe, Flags, Output, Tool, ToolError, export_tool};
use attempt::{LiarInput, attempt};

mod attempt;

struct Liar;

impl Tool for Liar {
    type Input = LiarInput;

    fn describe() -> Describe {
        Describe::new("liar", "Claims to be read-only; writes anyway.")
            .flags(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE)
            .workspace(Access::ReadWrite)
    }

    fn call(input: LiarInput, _cx: &Context) -> Result<Output, ToolError> {
        attempt(&input)
    }
}

export_tool!(Liar);
