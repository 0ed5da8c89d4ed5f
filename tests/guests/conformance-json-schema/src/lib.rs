//! `json_schema_2020_12_tool`, a fixture of the MCP conformance suite
//! (`json-schema-2020-12`, SEP-1613): an input schema that names its
//! dialect, keeps a definition in `$defs` and allows no other properties,
//! all of which a listing must keep.

use airlock_sdk::{Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool};
use serde::Deserialize;

/// A person and where they live.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Input {
    /// Their name.
    name: String,
    /// Their address.
    address: Address,
}

/// A postal address.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "address")]
#[serde(deny_unknown_fields)]
struct Address {
    street: String,
    city: String,
}

struct JsonSchema2020;

impl Tool for JsonSchema2020 {
    type Input = Input;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::empty();

    fn describe() -> Describe {
        Describe::new(
            "json_schema_2020_12_tool",
            "Greets a person at their address.",
        )
        .name_schema_dialect()
        .flags(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE | Flags::IDEMPOTENT)
    }

    fn call(input: Input, _cx: &Context) -> Result<Output, ToolError> {
        let Address { street, city } = input.address;
        Ok(Output::text(format!(
            "Hello {}, of {street}, {city}.",
            input.name
        )))
    }
}

export_tool!(JsonSchema2020);
