//! Front-end formats: tool definitions in each API's shape (with what each
//! API would refuse), tool calls parsed from what a model API returns, and
//! results rendered back into what it expects. Pure functions and small
//! state machines; no I/O.
//!
//! - [`anthropic`]: the Messages API (`tools[]`, `tool_use`, streaming
//!   events, `tool_result`);
//! - [`openai`]: the Responses API (`function_call`, `function_call_output`)
//!   and Chat Completions (`tool_calls`, `role: "tool"` messages);
//! - [`mcp`]: MCP tool definitions (`tools/list` entries).
//!
//! Invariants: a call whose input is not a JSON object becomes
//! [`Assembled::Invalid`], to be answered with an error, never dropped; a
//! definition is never rewritten to satisfy an API: what it lacks is
//! reported by the API's `lint`.

pub mod anthropic;
pub mod mcp;
pub mod openai;

use crate::call::{ToolResult, ToolUse};
use crate::executor::ExecutorHandle;
use airlock_core::error::CallError;
use airlock_core::tool::ContentBlock;
use serde_json::Value;

/// What a model's tool call turned into.
#[derive(Clone, Debug, PartialEq)]
pub enum Assembled {
    /// A tool use, ready for the executor.
    ToolUse(ToolUse),
    /// A call whose input is not a JSON object.
    Invalid {
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
        /// The raw input text.
        raw: String,
        /// Why it is not usable.
        error: String,
    },
}

impl Assembled {
    /// A call whose input arrived as JSON text (OpenAI's `arguments`, a
    /// streamed Anthropic block): a use when it parses to an object.
    pub fn from_json_text(
        id: impl Into<String>,
        name: impl Into<String>,
        raw: impl Into<String>,
    ) -> Assembled {
        let raw = raw.into();
        match serde_json::from_str::<Value>(&raw) {
            Ok(input) => match Assembled::from_value(id, name, input) {
                Assembled::Invalid {
                    id, name, error, ..
                } => Assembled::Invalid {
                    id,
                    name,
                    raw,
                    error,
                },
                ok => ok,
            },
            Err(e) => Assembled::Invalid {
                id: id.into(),
                name: name.into(),
                raw,
                error: e.to_string(),
            },
        }
    }

    /// A call whose input arrived as a JSON value: a use when it is an
    /// object.
    pub fn from_value(id: impl Into<String>, name: impl Into<String>, input: Value) -> Assembled {
        match input {
            Value::Object(_) => Assembled::ToolUse(ToolUse::new(id, name, input)),
            other => Assembled::Invalid {
                id: id.into(),
                name: name.into(),
                raw: other.to_string(),
                error: format!("the input is {}, not a JSON object", kind(&other)),
            },
        }
    }

    /// Hands the call to an executor: a use is added; an invalid call is
    /// added as failed, so it is answered in its place with an error that
    /// quotes the input (`INVALID_JSON`).
    pub fn feed(self, executor: &ExecutorHandle) {
        match self {
            Assembled::ToolUse(tool_use) => executor.add(tool_use),
            Assembled::Invalid {
                id,
                name,
                raw,
                error,
            } => executor.add_failed(
                ToolUse::new(id, name, Value::Null),
                CallError::invalid_input(format!(
                    "The tool input is not valid JSON ({error}). INVALID_JSON: {raw}"
                )),
            ),
        }
    }
}

/// The items of type `kind` in `value`'s `field` array (or in `value`
/// itself, when it is that array), in order.
fn items_of_type<'a>(
    value: &'a Value,
    field: &str,
    kind: &'a str,
) -> impl Iterator<Item = &'a Value> + 'a {
    value
        .get(field)
        .unwrap_or(value)
        .as_array()
        .into_iter()
        .flatten()
        .filter(move |item| item.get("type").and_then(Value::as_str) == Some(kind))
}

/// The string at `pointer` in `value`, empty when there is none.
fn text_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Why the Anthropic and OpenAI APIs refuse `name`, if they do: both take
/// `^[a-zA-Z0-9_-]{1,64}$` (no dots).
fn name_problem(name: &str) -> Option<String> {
    (!airlock_core::descriptor::is_portable_name(name))
        .then(|| format!("the name {name:?} is not accepted: use 1 to 64 of [a-zA-Z0-9_-]"))
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

/// What the model gets back, as blocks: the output's blocks (the
/// structured output as JSON when there is nothing else), or the error's
/// message; then the hooks' additional context.
fn result_blocks(result: &ToolResult) -> Vec<ContentBlock> {
    let mut blocks = match &result.outcome {
        Ok(output) => {
            let mut blocks = output.content.clone();
            if blocks.is_empty()
                && let Some(structured) = &output.structured
            {
                blocks.push(ContentBlock::Json(structured.clone()));
            }
            blocks
        }
        Err(error) => vec![ContentBlock::Text(error.message.clone())],
    };
    blocks.extend(
        result
            .additional_context
            .iter()
            .cloned()
            .map(ContentBlock::Text),
    );
    blocks
}

/// The whole result as one text, blocks joined by newlines: what APIs
/// without content arrays (OpenAI) get.
fn result_text(result: &ToolResult) -> String {
    result_blocks(result)
        .iter()
        .map(ContentBlock::to_text)
        .collect::<Vec<_>>()
        .join("\n")
}
