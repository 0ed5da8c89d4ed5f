//! The Anthropic Messages API: tool definitions (`tools[]`), tool uses from
//! a streamed or a whole assistant message, and `tool_result` blocks.
//!
//! A streamed tool-use block arrives as `content_block_start` (with the
//! block's id and name), `input_json_delta` fragments (`partial_json`), and
//! `content_block_stop`. The input is parsed only at the stop; a block
//! whose JSON does not parse becomes an invalid use, to be answered with an
//! error (`is_error`), never dropped. Other events are ignored.

pub use super::Assembled;
use super::{items_of_type, name_problem, result_blocks, text_at};
use crate::call::ToolResult;
use airlock_core::descriptor::{Descriptor, schema_root_problems};
use airlock_core::tool::ContentBlock;
use serde_json::{Map, Value, json};
use std::collections::HashMap;

#[derive(Debug)]
struct Partial {
    id: String,
    name: String,
    start_input: Option<Value>,
    json: String,
}

/// Assembles tool uses from a stream of events, block by block.
#[derive(Debug, Default)]
pub struct StreamAssembler {
    open: HashMap<u64, Partial>,
}

impl StreamAssembler {
    /// A fresh assembler (one per message).
    pub fn new() -> Self {
        StreamAssembler::default()
    }

    /// Feeds one event (its JSON `data`); returns a use when a tool-use
    /// block just ended.
    pub fn push(&mut self, event: &Value) -> Option<Assembled> {
        let index = event.get("index").and_then(Value::as_u64);
        match event.get("type").and_then(Value::as_str)? {
            "content_block_start" => {
                let block = event.get("content_block")?;
                if block.get("type").and_then(Value::as_str) != Some("tool_use") {
                    return None;
                }
                self.open.insert(
                    index?,
                    Partial {
                        id: block
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        name: block
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        start_input: block.get("input").cloned(),
                        json: String::new(),
                    },
                );
                None
            }
            "content_block_delta" => {
                let delta = event.get("delta")?;
                if delta.get("type").and_then(Value::as_str) == Some("input_json_delta")
                    && let Some(partial) = self.open.get_mut(&index?)
                {
                    partial.json.push_str(
                        delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                    );
                }
                None
            }
            "content_block_stop" => {
                let partial = self.open.remove(&index?)?;
                Some(finish(partial))
            }
            _ => None,
        }
    }
}

fn finish(partial: Partial) -> Assembled {
    if partial.json.trim().is_empty() {
        let input = partial
            .start_input
            .unwrap_or_else(|| Value::Object(Map::new()));
        Assembled::from_value(partial.id, partial.name, input)
    } else {
        Assembled::from_json_text(partial.id, partial.name, partial.json)
    }
}

/// A tool's entry for the request's `tools` array: its prompt as the
/// description, and `defer_loading` when tool search should find it.
pub fn tool_definition(d: &Descriptor) -> Value {
    let mut def = json!({
        "name": d.name,
        "description": d.prompt,
        "input_schema": d.input_schema,
    });
    if d.defer_loading {
        def["defer_loading"] = Value::Bool(true);
    }
    def
}

/// What the Messages API would refuse in `d`'s definition: a name outside
/// `^[a-zA-Z0-9_-]{1,64}$` (no dots), an input schema whose root is not an
/// object or uses a combinator.
pub fn lint(d: &Descriptor) -> Vec<String> {
    let mut problems: Vec<String> = name_problem(&d.name).into_iter().collect();
    problems.extend(schema_root_problems("input schema", &d.input_schema));
    problems
}

/// The tool uses in an assistant message (`{"role": "assistant",
/// "content": [...]}`, or its `content` array), in order.
pub fn tool_uses(message: &Value) -> Vec<Assembled> {
    items_of_type(message, "content", "tool_use")
        .map(|b| {
            let input = b.get("input").cloned().unwrap_or(Value::Null);
            Assembled::from_value(text_at(b, "/id"), text_at(b, "/name"), input)
        })
        .collect()
}

/// A result as a `tool_result` block for the next user message: text,
/// JSON as text, images as base64 sources, links as text, tools found by
/// `tool_search` as `tool_reference` blocks (the API loads their
/// definitions); `is_error` for a failure; the hooks' additional context
/// as text after the output.
pub fn tool_result(result: &ToolResult) -> Value {
    let content: Vec<Value> = result_blocks(result)
        .into_iter()
        .map(|block| match block {
            ContentBlock::Image { mime_type, data } => {
                use base64::Engine as _;
                json!({"type": "image", "source": {
                    "type": "base64",
                    "media_type": mime_type,
                    "data": base64::engine::general_purpose::STANDARD.encode(data),
                }})
            }
            ContentBlock::ToolReference { name, .. } => {
                json!({"type": "tool_reference", "tool_name": name})
            }
            other => json!({"type": "text", "text": other.to_text()}),
        })
        .collect();
    json!({
        "type": "tool_result",
        "tool_use_id": result.id,
        "content": content,
        "is_error": result.is_error(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::ToolUse;
    use serde_json::json;

    /// The event sequence of the Messages API streaming docs.
    fn recorded() -> Vec<Value> {
        vec![
            json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[]}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me check."}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}),
            json!({"type":"ping"}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San Francisco, CA\"}"}}),
            json!({"type":"content_block_stop","index":1}),
            json!({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_02","name":"read","input":{}}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"file_path\": \"a"}}),
            json!({"type":"content_block_stop","index":2}),
            json!({"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_03","name":"ls","input":{}}}),
            json!({"type":"content_block_stop","index":3}),
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":89}}),
            json!({"type":"message_stop"}),
        ]
    }

    #[test]
    fn assembles_tool_uses_at_their_stop() {
        let mut a = StreamAssembler::new();
        let out: Vec<Assembled> = recorded().iter().filter_map(|e| a.push(e)).collect();
        assert_eq!(out.len(), 3);
        assert_eq!(
            out[0],
            Assembled::ToolUse(ToolUse::new(
                "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                "get_weather",
                json!({"location": "San Francisco, CA"})
            ))
        );
        assert!(
            matches!(&out[1], Assembled::Invalid { id, raw, .. } if id == "toolu_02" && raw == "{\"file_path\": \"a")
        );
        assert_eq!(
            out[2],
            Assembled::ToolUse(ToolUse::new("toolu_03", "ls", json!({})))
        );
    }

    #[test]
    fn definitions_lints_messages_and_results_have_the_reference_shapes() {
        let mut d = Descriptor::new("get_weather", "Get the current weather in a given location");
        d.input_schema = json!({"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]});
        assert_eq!(
            tool_definition(&d),
            json!({"name":"get_weather","description":"Get the current weather in a given location",
                "input_schema": d.input_schema})
        );
        assert!(lint(&d).is_empty());
        d.defer_loading = true;
        assert_eq!(tool_definition(&d)["defer_loading"], true);
        d.name = "mcp.get_weather".into();
        d.input_schema = json!({"type":"object","anyOf":[{"required":["a"]},{"required":["b"]}]});
        let problems = lint(&d);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("mcp.get_weather") && problems[1].contains("anyOf"));

        let message = json!({"role":"assistant","stop_reason":"tool_use","content":[
            {"type":"text","text":"I'll check the weather."},
            {"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"location":"San Francisco, CA","unit":"celsius"}},
            {"type":"tool_use","id":"toolu_02","name":"ls","input":"nope"}]});
        let uses = tool_uses(&message);
        assert_eq!(
            uses[0],
            Assembled::ToolUse(ToolUse::new(
                "toolu_01A09q90qw90lq917835lq9",
                "get_weather",
                json!({"location":"San Francisco, CA","unit":"celsius"})
            ))
        );
        assert!(matches!(&uses[1], Assembled::Invalid { id, .. } if id == "toolu_02"));
        assert_eq!(tool_uses(&message["content"]), uses);

        let mut ok = ToolResult::failed(
            "toolu_01A09q90qw90lq917835lq9",
            "get_weather",
            crate::CallError::cancelled("x"),
        );
        ok.outcome = Ok(crate::ToolOutput {
            content: vec![
                ContentBlock::Text("15 degrees".into()),
                ContentBlock::Image {
                    mime_type: "image/png".into(),
                    data: vec![1, 2, 3],
                },
            ],
            ..crate::ToolOutput::default()
        });
        ok.additional_context = vec!["from a hook".into()];
        assert_eq!(
            tool_result(&ok),
            json!({"type":"tool_result","tool_use_id":"toolu_01A09q90qw90lq917835lq9","content":[
                {"type":"text","text":"15 degrees"},
                {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AQID"}},
                {"type":"text","text":"from a hook"}],"is_error":false})
        );
        let failed = ToolResult::failed(
            "toolu_02",
            "ls",
            crate::CallError::invalid_input("Rate limit exceeded."),
        );
        assert_eq!(
            tool_result(&failed),
            json!({"type":"tool_result","tool_use_id":"toolu_02","content":[{"type":"text","text":"Rate limit exceeded."}],"is_error":true})
        );
    }

    #[test]
    fn a_non_object_input_is_invalid() {
        let mut a = StreamAssembler::new();
        a.push(&json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"x","input":{}}}));
        a.push(&json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"[1]"}}));
        let out = a
            .push(&json!({"type":"content_block_stop","index":0}))
            .unwrap();
        assert!(matches!(out, Assembled::Invalid { error, .. } if error.contains("an array")));
    }
}
