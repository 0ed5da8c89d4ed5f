//! `test_image_content`, a fixture of the MCP conformance suite
//! (`tools-call-image`): one image block, a 1×1 red PNG.

use airlock_sdk::{Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool};
use serde::Deserialize;

/// A 1×1 red pixel, as PNG.
const RED_PIXEL: [u8; 69] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoInput {}

struct ImageContent;

impl Tool for ImageContent {
    type Input = NoInput;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::empty();

    fn describe() -> Describe {
        Describe::new(
            "test_image_content",
            "Returns one image block: a red pixel.",
        )
        .flags(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE | Flags::IDEMPOTENT)
    }

    fn call(_input: NoInput, _cx: &Context) -> Result<Output, ToolError> {
        Ok(Output::new().with_image("image/png", RED_PIXEL.to_vec()))
    }
}

export_tool!(ImageContent);
