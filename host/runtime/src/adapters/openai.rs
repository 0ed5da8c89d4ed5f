//! OpenAI function calling: tool definitions for the Responses API and
//! Chat Completions (with a strict-mode check), calls from a response's
//! `output` items or a message's `tool_calls`, and results as
//! `function_call_output` items or `role: "tool"` messages.
//!
//! Streamed calls are assembled by [`ResponsesStream`] (the Responses
//! API's `response.function_call_arguments.*` events, keyed by item id)
//! and [`ChatStream`] (Chat Completions' `delta.tool_calls` fragments, by
//! index): arguments are accumulated and parsed only once a call is
//! complete. A call's `id` and `name` are taken from its first fragment
//! that has them (some providers repeat them in every chunk).
//!
//! OpenAI's arguments are a JSON *string*; one that does not parse to an
//! object becomes an invalid call. OpenAI results have no error flag, so a
//! failure's text starts with `Error: `.

use super::{Assembled, items_of_type, name_problem, result_text, text_at};
use crate::call::ToolResult;
use airlock_core::descriptor::Descriptor;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};

/// A call whose arguments are still arriving.
#[derive(Debug, Default)]
struct Partial {
    id: String,
    name: String,
    arguments: String,
}

impl Partial {
    fn finish(self) -> Assembled {
        Assembled::from_json_text(self.id, self.name, self.arguments)
    }
}

/// Assembles function calls from a Responses API event stream: a call
/// starts with `response.output_item.added` (a `function_call` item), its
/// arguments arrive as `response.function_call_arguments.delta`, and it is
/// complete at `response.function_call_arguments.done` (whose `arguments`,
/// when present, are taken as final). The id is the item's `call_id`.
#[derive(Debug, Default)]
pub struct ResponsesStream {
    open: HashMap<String, Partial>,
}

impl ResponsesStream {
    /// A fresh assembler (one per response).
    pub fn new() -> Self {
        ResponsesStream::default()
    }

    /// Feeds one event (its JSON `data`); returns a call when one is done.
    pub fn push(&mut self, event: &Value) -> Option<Assembled> {
        match event.get("type").and_then(Value::as_str)? {
            "response.output_item.added" => {
                let item = event.get("item")?;
                if item.get("type").and_then(Value::as_str) != Some("function_call") {
                    return None;
                }
                self.open.insert(
                    text_at(item, "/id").to_string(),
                    Partial {
                        id: text_at(item, "/call_id").to_string(),
                        name: text_at(item, "/name").to_string(),
                        arguments: text_at(item, "/arguments").to_string(),
                    },
                );
                None
            }
            "response.function_call_arguments.delta" => {
                let partial = self.open.get_mut(text_at(event, "/item_id"))?;
                partial.arguments.push_str(text_at(event, "/delta"));
                None
            }
            "response.function_call_arguments.done" => {
                let mut partial = self.open.remove(text_at(event, "/item_id"))?;
                if let Some(arguments) = event.get("arguments").and_then(Value::as_str) {
                    partial.arguments = arguments.to_string();
                }
                if let Some(name) = event.get("name").and_then(Value::as_str) {
                    partial.name = name.to_string();
                }
                Some(partial.finish())
            }
            _ => None,
        }
    }

    /// The calls still open when the stream ended early, in no particular
    /// order: each answered as its arguments stand (an invalid call when
    /// they were cut off).
    pub fn finish(&mut self) -> Vec<Assembled> {
        self.open.drain().map(|(_, p)| p.finish()).collect()
    }
}

/// Assembles tool calls from a Chat Completions stream: each chunk's
/// `choices[0].delta.tool_calls[]` carries an `index` and fragments of the
/// `id`, `function.name` and `function.arguments`. Calls stream one after
/// another, so a call is complete when a later index starts, and the rest
/// when the choice has a `finish_reason` (or at [`ChatStream::finish`]).
#[derive(Debug, Default)]
pub struct ChatStream {
    open: BTreeMap<u64, Partial>,
    /// The lowest index a fragment may still have: every call below it is
    /// complete.
    next: u64,
}

impl ChatStream {
    /// A fresh assembler (one per completion).
    pub fn new() -> Self {
        ChatStream::default()
    }

    /// Feeds one chunk; returns the calls it completed, in order.
    pub fn push(&mut self, chunk: &Value) -> Vec<Assembled> {
        let Some(choice) = chunk.pointer("/choices/0") else {
            return Vec::new();
        };
        let mut done = Vec::new();
        let fragments = choice
            .pointer("/delta/tool_calls")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for fragment in fragments {
            let index = fragment.get("index").and_then(Value::as_u64).unwrap_or(0);
            if index < self.next {
                tracing::warn!(
                    index,
                    "a fragment of a tool call that was already complete; dropped"
                );
                continue;
            }
            let earlier: Vec<u64> = self.open.range(..index).map(|(i, _)| *i).collect();
            done.extend(earlier.into_iter().filter_map(|i| self.open.remove(&i)));
            self.next = index;
            let partial = self.open.entry(index).or_default();
            for (field, at) in [
                (&mut partial.id, "/id"),
                (&mut partial.name, "/function/name"),
            ] {
                if field.is_empty() {
                    field.push_str(text_at(fragment, at));
                }
            }
            partial
                .arguments
                .push_str(text_at(fragment, "/function/arguments"));
        }
        if choice.get("finish_reason").is_some_and(|r| !r.is_null()) {
            done.extend(std::mem::take(&mut self.open).into_values());
        }
        done.into_iter().map(Partial::finish).collect()
    }

    /// The calls still open when the stream ended (`[DONE]` without a
    /// `finish_reason`), in order.
    pub fn finish(&mut self) -> Vec<Assembled> {
        std::mem::take(&mut self.open)
            .into_values()
            .map(Partial::finish)
            .collect()
    }
}

/// Which OpenAI API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// The Responses API: flat `{"type": "function", "name", ...}`.
    Responses,
    /// Chat Completions: `{"type": "function", "function": {...}}`.
    ChatCompletions,
}

/// A tool's definition for `api`. `strict` is claimed only when the schema
/// meets strict mode ([`strict_problems`] is empty); the schema is never
/// rewritten to get there.
pub fn tool_definition(d: &Descriptor, api: Api) -> Value {
    let strict = strict_problems(&d.input_schema).is_empty();
    let function = json!({
        "name": d.name,
        "description": d.prompt,
        "parameters": d.input_schema,
        "strict": strict,
    });
    match api {
        Api::Responses => {
            let mut def = json!({"type": "function"});
            if let (Some(def), Some(function)) = (def.as_object_mut(), function.as_object()) {
                def.extend(function.clone());
            }
            if d.defer_loading {
                def["defer_loading"] = Value::Bool(true);
            }
            def
        }
        Api::ChatCompletions => json!({"type": "function", "function": function}),
    }
}

/// What OpenAI would refuse in `d`'s definition (the name), and why it
/// cannot be strict (what the schema lacks).
pub fn lint(d: &Descriptor) -> Vec<String> {
    let mut problems: Vec<String> = name_problem(&d.name).into_iter().collect();
    problems.extend(
        strict_problems(&d.input_schema)
            .into_iter()
            .map(|p| format!("not strict: {p}")),
    );
    problems
}

/// Why `schema` cannot be used in strict mode: every object schema must
/// say `"additionalProperties": false` and list every property in
/// `required` (optional fields are unions with `null`). Paths are JSON
/// pointers into the schema.
pub fn strict_problems(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let mut stack = vec![(String::new(), schema)];
    while let Some((path, node)) = stack.pop() {
        let Some(obj) = node.as_object() else {
            if let Some(items) = node.as_array() {
                for (i, item) in items.iter().enumerate() {
                    stack.push((format!("{path}/{i}"), item));
                }
            }
            continue;
        };
        let at = if path.is_empty() { "/" } else { path.as_str() };
        let is_object = obj.get("type").is_some_and(|t| {
            t == "object"
                || t.as_array()
                    .is_some_and(|ts| ts.iter().any(|t| t == "object"))
        }) || obj.contains_key("properties");
        if is_object {
            if obj.get("additionalProperties") != Some(&Value::Bool(false)) {
                problems.push(format!("{at}: additionalProperties is not false"));
            }
            let required: Vec<&str> = obj
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(properties) = obj.get("properties").and_then(Value::as_object) {
                let missing: Vec<&str> = properties
                    .keys()
                    .map(String::as_str)
                    .filter(|k| !required.contains(k))
                    .collect();
                if !missing.is_empty() {
                    problems.push(format!(
                        "{at}: not required (strict mode needs every property required, optional ones nullable): {}",
                        missing.join(", ")
                    ));
                }
            }
        }
        for (key, child) in obj {
            if matches!(key.as_str(), "properties" | "$defs" | "definitions") {
                if let Some(children) = child.as_object() {
                    for (name, schema) in children {
                        stack.push((format!("{path}/{key}/{name}"), schema));
                    }
                }
            } else if matches!(
                key.as_str(),
                "items" | "anyOf" | "oneOf" | "allOf" | "prefixItems" | "not"
            ) {
                stack.push((format!("{path}/{key}"), child));
            }
        }
    }
    problems.sort();
    problems
}

/// The calls in a Responses API `output` (the response, or its `output`
/// array): its `function_call` items, in order; the id is the `call_id`.
pub fn function_calls(response: &Value) -> Vec<Assembled> {
    items_of_type(response, "output", "function_call")
        .map(|item| {
            Assembled::from_json_text(
                text_at(item, "/call_id"),
                text_at(item, "/name"),
                text_at(item, "/arguments"),
            )
        })
        .collect()
}

/// The calls in a Chat Completions assistant message (the message, or a
/// completion's first choice): its `tool_calls`, in order.
pub fn tool_calls(message: &Value) -> Vec<Assembled> {
    let message = message.pointer("/choices/0/message").unwrap_or(message);
    items_of_type(message, "tool_calls", "function")
        .map(|call| {
            Assembled::from_json_text(
                text_at(call, "/id"),
                text_at(call, "/function/name"),
                text_at(call, "/function/arguments"),
            )
        })
        .collect()
}

/// A result as a Responses API input item.
pub fn function_call_output(result: &ToolResult) -> Value {
    json!({
        "type": "function_call_output",
        "call_id": result.id,
        "output": output_text(result),
    })
}

/// A result as a Chat Completions tool message.
pub fn tool_message(result: &ToolResult) -> Value {
    json!({
        "role": "tool",
        "tool_call_id": result.id,
        "content": output_text(result),
    })
}

fn output_text(result: &ToolResult) -> String {
    let text = result_text(result);
    if result.is_error() {
        format!("Error: {text}")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_core::error::CallError;
    use airlock_core::tool::ToolOutput;

    fn names(calls: &[Assembled]) -> Vec<(String, Value)> {
        calls
            .iter()
            .map(|c| match c {
                Assembled::ToolUse(u) => (format!("{}:{}", u.id, u.name), u.input.clone()),
                Assembled::Invalid { id, raw, .. } => (format!("{id}:invalid"), json!(raw)),
            })
            .collect()
    }

    #[test]
    fn a_responses_stream_is_assembled_per_item() {
        let events = [
            json!({"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"msg_1"}}),
            json!({"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"call_a","name":"get_weather","arguments":""}}),
            json!({"type":"response.output_item.added","output_index":2,"item":{"type":"function_call","id":"fc_2","call_id":"call_b","name":"get_weather","arguments":""}}),
            json!({"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":1,"delta":"{\"location\":","sequence_number":3}),
            json!({"type":"response.function_call_arguments.delta","item_id":"fc_2","output_index":2,"delta":"{\"loc","sequence_number":4}),
            json!({"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":1,"delta":"\"Paris\"}","sequence_number":5}),
            json!({"type":"response.function_call_arguments.done","item_id":"fc_1","output_index":1,"name":"get_weather","arguments":"{\"location\":\"Paris\"}","sequence_number":6}),
            json!({"type":"response.function_call_arguments.done","item_id":"fc_2","output_index":2,"sequence_number":7}),
            json!({"type":"response.output_item.done","output_index":1,"item":{}}),
        ];
        let mut stream = ResponsesStream::new();
        let calls: Vec<Assembled> = events.iter().filter_map(|e| stream.push(e)).collect();
        assert_eq!(
            names(&calls),
            [
                (
                    "call_a:get_weather".to_string(),
                    json!({"location": "Paris"})
                ),
                ("call_b:invalid".to_string(), json!("{\"loc")),
            ]
        );

        let mut cut = ResponsesStream::new();
        cut.push(&json!({"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc_9","call_id":"call_9","name":"ls","arguments":""}}));
        cut.push(&json!({"type":"response.function_call_arguments.delta","item_id":"fc_9","output_index":0,"delta":"{\"a\":"}));
        assert_eq!(
            names(&cut.finish()),
            [("call_9:invalid".to_string(), json!("{\"a\":"))]
        );
    }

    #[test]
    fn a_chat_stream_completes_a_call_when_the_next_starts_and_at_the_finish() {
        let chunk = |delta: Value, finish: Value| json!({"choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
        let mut stream = ChatStream::new();
        let mut calls = Vec::new();
        calls.extend(stream.push(&chunk(
            json!({"role":"assistant","content":null}),
            Value::Null,
        )));
        calls.extend(stream.push(&chunk(json!({"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":""}}]}), Value::Null)));
        calls.extend(stream.push(&chunk(
            json!({"tool_calls":[{"index":0,"function":{"arguments":"{\"file_path\":"}}]}),
            Value::Null,
        )));
        calls.extend(stream.push(&chunk(
            json!({"tool_calls":[{"index":0,"id":"call_1","function":{"name":"read","arguments":"\"/a\"}"}}]}),
            Value::Null,
        )));
        assert!(calls.is_empty());
        calls.extend(stream.push(&chunk(json!({"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"ls","arguments":"{}"}}]}), Value::Null)));
        assert_eq!(
            names(&calls),
            [("call_1:read".to_string(), json!({"file_path": "/a"}))],
            "done when the next began"
        );
        let late = json!({"tool_calls":[{"index":0,"function":{"arguments":"x"}}]});
        assert!(
            stream.push(&chunk(late, Value::Null)).is_empty(),
            "call_1 is complete"
        );
        calls.extend(stream.push(&chunk(json!({}), json!("tool_calls"))));
        assert_eq!(names(&calls)[1], ("call_2:ls".to_string(), json!({})));
        assert!(stream.finish().is_empty());

        let mut cut = ChatStream::new();
        cut.push(&chunk(json!({"tool_calls":[{"index":0,"id":"c","function":{"name":"ls","arguments":"{\"pa"}}]}), Value::Null));
        assert_eq!(
            names(&cut.finish()),
            [("c:invalid".to_string(), json!("{\"pa"))]
        );
    }

    /// The strict Responses definition of the conventions reference (§3.1).
    fn weather() -> Descriptor {
        let mut d = Descriptor::new("get_weather", "Get current weather");
        d.input_schema = json!({"type":"object","properties":{"location":{"type":"string"},"unit":{"type":["string","null"],"enum":["c","f",null]}},
            "required":["location","unit"],"additionalProperties":false});
        d
    }

    #[test]
    fn definitions_have_each_apis_shape_and_claim_strict_only_when_it_holds() {
        let d = weather();
        assert_eq!(
            tool_definition(&d, Api::Responses),
            json!({"type":"function","name":"get_weather","description":"Get current weather",
                "parameters": d.input_schema, "strict": true})
        );
        assert_eq!(
            tool_definition(&d, Api::ChatCompletions),
            json!({"type":"function","function":{"name":"get_weather","description":"Get current weather",
                "parameters": d.input_schema, "strict": true}})
        );
        assert!(lint(&d).is_empty());

        let mut loose = weather();
        loose.name = "get.weather".into();
        loose.input_schema = json!({"type":"object","properties":{
            "location":{"type":"string"},
            "unit":{"type":"string"},
            "where":{"type":"object","properties":{"lat":{"type":"number"}}}},
            "required":["location"]});
        assert_eq!(tool_definition(&loose, Api::Responses)["strict"], false);
        assert_eq!(
            tool_definition(&loose, Api::Responses)["parameters"],
            loose.input_schema,
            "never rewritten"
        );
        let problems = lint(&loose);
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(problems[0].contains("get.weather"));
        assert!(
            problems
                .iter()
                .any(|p| p == "not strict: /: additionalProperties is not false")
        );
        assert!(problems.iter().any(|p| p.starts_with("not strict: /: not required")
            && p.ends_with("unit, where")));
        assert!(problems.iter().any(
            |p| p.starts_with("not strict: /properties/where: not required") && p.ends_with("lat")
        ));
        assert!(
            problems
                .iter()
                .any(|p| p == "not strict: /properties/where: additionalProperties is not false")
        );
    }

    #[test]
    fn responses_function_calls_are_parsed_and_answered() {
        let response = json!({"id":"resp_1","output":[
            {"type":"reasoning","id":"rs_1","summary":[]},
            {"type":"function_call","id":"fc_1","call_id":"call_abc123","name":"get_weather","arguments":"{\"location\":\"Paris\"}","status":"completed"},
            {"type":"function_call","id":"fc_2","call_id":"call_bad","name":"get_weather","arguments":"{\"location\":","status":"completed"},
            {"type":"message","id":"msg_1","role":"assistant","content":[]}]});
        let calls = function_calls(&response);
        assert_eq!(calls.len(), 2);
        assert_eq!(
            calls[0],
            Assembled::from_value("call_abc123", "get_weather", json!({"location": "Paris"}))
        );
        assert!(
            matches!(&calls[1], Assembled::Invalid { id, raw, .. } if id == "call_bad" && raw == "{\"location\":")
        );
        assert_eq!(function_calls(&response["output"]), calls);

        let mut ok = ToolResult::failed("call_abc123", "get_weather", CallError::cancelled("x"));
        ok.outcome = Ok(ToolOutput::text("{\"temp_c\":12}"));
        assert_eq!(
            function_call_output(&ok),
            json!({"type":"function_call_output","call_id":"call_abc123","output":"{\"temp_c\":12}"})
        );
        let failed = ToolResult::failed("call_bad", "get_weather", CallError::invalid_input("bad"));
        assert_eq!(function_call_output(&failed)["output"], "Error: bad");
    }

    #[test]
    fn chat_tool_calls_are_parsed_and_answered() {
        let completion = json!({"id":"chatcmpl_1","choices":[{"index":0,"finish_reason":"tool_calls","message":{
            "role":"assistant","content":null,"tool_calls":[
                {"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"file_path\":\"/w/a\"}"}},
                {"id":"call_2","type":"function","function":{"name":"ls","arguments":"[]"}}]}}]});
        let calls = tool_calls(&completion);
        assert_eq!(
            calls[0],
            Assembled::from_value("call_1", "read", json!({"file_path": "/w/a"}))
        );
        assert!(
            matches!(&calls[1], Assembled::Invalid { error, .. } if error.contains("an array"))
        );
        assert_eq!(tool_calls(&completion["choices"][0]["message"]), calls);
        let mut ok = ToolResult::failed("call_1", "read", CallError::cancelled("x"));
        ok.outcome = Ok(ToolOutput::text("1\thello"));
        assert_eq!(
            tool_message(&ok),
            json!({"role":"tool","tool_call_id":"call_1","content":"1\thello"})
        );
    }
}
