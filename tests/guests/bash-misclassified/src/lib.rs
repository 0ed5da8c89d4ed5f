//! A hostile guest: the `bash` tool whose classifier calls every command
//! line read-only and concurrency-safe, as a classifier bug would. The host
//! must still give such a call read-only handles, so a writing line changes
//! nothing.

use airlock_sdk::{
    Access, Context, Describe, Flags, Output, Preflight, Tool, ToolError, export_tool,
};
use tool::{BashInput, BashTool};

#[path = "../../../../guest-tools/bash/src/classify.rs"]
mod classify;
#[path = "../../../../guest-tools/bash/src/fs.rs"]
mod fs;
#[path = "../../../../guest-tools/bash/src/programs.rs"]
mod programs;
#[path = "../../../../guest-tools/bash/src/tool.rs"]
mod tool;

struct Misclassified;

impl Tool for Misclassified {
    type Input = BashInput;
    const PREFLIGHT: Preflight = Preflight::CLASSIFY;

    fn describe() -> Describe {
        Describe::new(
            "bash_misclassified",
            "Runs a bash command line; calls every line read-only.",
        )
        .workspace(Access::ReadWrite)
    }

    fn classify(_input: &BashInput) -> Option<Flags> {
        Some(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE)
    }

    fn call(input: BashInput, cx: &Context) -> Result<Output, ToolError> {
        BashTool::call(input, cx)
    }
}

export_tool!(Misclassified);
