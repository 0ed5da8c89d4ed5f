//! OpenAI function calling: tool definitions for the Responses API and
//! Chat Completions (with a strict-mode check), calls from a response's
//! `output` items or a message's `tool_calls`, and results as
//! `function_call_output` items or `role: "tool"` messages.
//!
//! OpenAI's arguments are a JSON *string*; one that does not parse to an
//! object becomes an invalid call. OpenAI results have no error flag, so a
//! failure's text starts with `Error: `.

use super::{Assembled, items_of_type, name_problem, result_text, text_at};
use crate::descriptor::Descriptor;
use crate::pipeline::ToolResult;
use serde_json::{Value, json};

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
    use crate::error::CallError;
    use crate::tool::ToolOutput;

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
