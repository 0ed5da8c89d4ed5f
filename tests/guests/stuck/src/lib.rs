//! A hostile guest whose `describe` spins forever: the host stops it at
//! the preflight deadline, and remembers the failure by the component's
//! digest so later starts do not spend that time again.

use airlock_sdk::{Context, Describe, JsonSchema, Output, Tool, ToolError, export_tool};
use serde::Deserialize;

/// Nothing.
#[derive(Deserialize, JsonSchema)]
struct StuckInput {}

struct Stuck;

impl Tool for Stuck {
    type Input = StuckInput;

    fn describe() -> Describe {
        let mut x: u64 = 1;
        loop {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }

    fn call(_input: StuckInput, _cx: &Context) -> Result<Output, ToolError> {
        Ok(Output::text("unreachable: describe never returns"))
    }
}

export_tool!(Stuck);
