//! The Anthropic Messages API's streaming events, assembled into tool uses.
//!
//! A tool-use block arrives as `content_block_start` (with the block's id
//! and name), `input_json_delta` fragments (`partial_json`), and
//! `content_block_stop`. The input is parsed only at the stop; a block
//! whose JSON does not parse becomes an invalid use, to be answered with an
//! error (`is_error`), never dropped. Other events are ignored.

use crate::pipeline::ToolUse;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// What a finished block turned into.
#[derive(Clone, Debug, PartialEq)]
pub enum Assembled {
    /// A tool use, ready for the executor.
    ToolUse(ToolUse),
    /// A tool-use block whose input is not a JSON object.
    Invalid {
        /// The block's id.
        id: String,
        /// The tool's name.
        name: String,
        /// The raw input text.
        raw: String,
        /// Why it did not parse.
        error: String,
    },
}

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
    let parsed = if partial.json.trim().is_empty() {
        Ok(partial
            .start_input
            .unwrap_or_else(|| Value::Object(Map::new())))
    } else {
        serde_json::from_str::<Value>(&partial.json).map_err(|e| e.to_string())
    };
    match parsed {
        Ok(input @ Value::Object(_)) => {
            Assembled::ToolUse(ToolUse::new(partial.id, partial.name, input))
        }
        Ok(other) => Assembled::Invalid {
            id: partial.id,
            name: partial.name,
            raw: partial.json,
            error: format!("the input is {}, not a JSON object", kind(&other)),
        },
        Err(error) => Assembled::Invalid {
            id: partial.id,
            name: partial.name,
            raw: partial.json,
            error,
        },
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
