//! MCP tool definitions (`tools/list` entries) as plain JSON, so they can
//! be printed without an MCP server; the server (`crate::mcp`) serves the
//! same shape.

use airlock_core::descriptor::{Descriptor, SafetyFlags};
use serde_json::{Map, Value, json};

/// A tool as MCP lists it: the prompt as the description, the flags as
/// annotations (hints only: Airlock enforces them), the output schema when
/// its root is an object (older clients drop any other), and `_meta` for
/// Claude Code: the result size, whether every call needs the user, and
/// `anthropic/alwaysLoad` for a tool that is not deferred (the client's own
/// tool search defers MCP tools otherwise).
pub fn tool_definition(d: &Descriptor) -> Value {
    let flag = |f| d.flags.contains(f);
    let mut meta = Map::new();
    meta.insert(
        "anthropic/maxResultSizeChars".into(),
        d.max_result_size.into(),
    );
    if !d.defer_loading {
        meta.insert("anthropic/alwaysLoad".into(), true.into());
    }
    if flag(SafetyFlags::REQUIRES_USER_INTERACTION) {
        meta.insert("anthropic/requiresUserInteraction".into(), true.into());
    }
    let mut def = json!({
        "name": d.name,
        "title": d.title,
        "description": d.prompt,
        "inputSchema": d.input_schema,
        "annotations": {
            "readOnlyHint": flag(SafetyFlags::READ_ONLY),
            "destructiveHint": flag(SafetyFlags::DESTRUCTIVE),
            "idempotentHint": flag(SafetyFlags::IDEMPOTENT),
            "openWorldHint": flag(SafetyFlags::OPEN_WORLD),
        },
        "_meta": meta,
    });
    if let Some(out) = output_schema(d) {
        def["outputSchema"] = out.clone();
    }
    def
}

/// The output schema MCP lists for `d`: its own when the root is an object,
/// else none. A result's structured output goes to an MCP client only when
/// its tool lists one (as `structuredContent`, which such clients as Claude
/// Code then show the model instead of the content).
pub fn output_schema(d: &Descriptor) -> Option<&Value> {
    d.output_schema
        .as_ref()
        .filter(|out| out.get("type").and_then(Value::as_str) == Some("object"))
}

/// What MCP clients would refuse or mangle in `d`'s definition.
pub fn lint(d: &Descriptor) -> Vec<String> {
    let mut problems = Vec::new();
    let valid = (1..=128).contains(&d.name.len())
        && d.name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !valid {
        problems.push(format!(
            "the name {:?} is not accepted: use 1 to 128 of [A-Za-z0-9_.-]",
            d.name
        ));
    }
    if d.input_schema.get("type").and_then(Value::as_str) != Some("object") {
        problems.push("the input schema root must have \"type\": \"object\"".into());
    }
    if let Some(out) = &d.output_schema
        && out.get("type").and_then(Value::as_str) != Some("object")
    {
        problems.push(
            "the output schema's root is not an object: clients before 2026-07-28 drop it".into(),
        );
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_read_file_tool_has_the_reference_shape() {
        let mut d = Descriptor::new("read_file", "Read a UTF-8 text file.");
        d.title = "Read file".into();
        d.input_schema = json!({"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"],"additionalProperties":false});
        d.output_schema = Some(
            json!({"type":"object","properties":{"content":{"type":"string"}},"required":["content"]}),
        );
        d.flags = SafetyFlags::READ_ONLY;
        d.max_result_size = 200_000;
        assert_eq!(
            tool_definition(&d),
            json!({"name":"read_file","title":"Read file","description":"Read a UTF-8 text file.",
                "inputSchema": d.input_schema, "outputSchema": d.output_schema,
                "annotations":{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":false,"openWorldHint":false},
                "_meta":{"anthropic/maxResultSizeChars":200000,"anthropic/alwaysLoad":true}})
        );
        assert!(lint(&d).is_empty());
        assert_eq!(output_schema(&d), d.output_schema.as_ref());
        d.name = "files.read".into();
        d.output_schema = Some(json!({"type":"string"}));
        assert!(tool_definition(&d).get("outputSchema").is_none());
        assert!(output_schema(&d).is_none());
        assert_eq!(lint(&d).len(), 1, "dots are fine in MCP: {:?}", lint(&d));
    }
}
