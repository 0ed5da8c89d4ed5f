//! Validation against a tool's JSON Schema, with errors a model can act
//! on: each names where in the input it is (a JSON pointer, or "the input"
//! for the root) and what was wrong.

use airlock_core::error::CallError;
use serde_json::Value;

/// How many schema errors one message lists.
const MAX_ERRORS: usize = 10;

/// Checks `input` against `validator`.
pub fn check_schema(
    tool: &str,
    validator: &jsonschema::Validator,
    input: &Value,
) -> Result<(), CallError> {
    let errors: Vec<String> = validator
        .iter_errors(input)
        .take(MAX_ERRORS + 1)
        .map(|e| {
            let at = e.instance_path().as_str();
            let at = if at.is_empty() {
                "the input".to_string()
            } else {
                format!("`{at}`")
            };
            format!("- at {at}: {e}")
        })
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    let more = if errors.len() > MAX_ERRORS {
        "\n- (more errors not shown)"
    } else {
        ""
    };
    let listed = errors[..errors.len().min(MAX_ERRORS)].join("\n");
    Err(CallError::invalid_input(format!(
        "The input to {tool} does not match its schema:\n{listed}{more}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_name_the_place_and_the_problem() {
        let schema = json!({
            "type": "object",
            "properties": {"file_path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
            "required": ["file_path"],
            "additionalProperties": false
        });
        let v = jsonschema::validator_for(&schema).unwrap();
        assert!(check_schema("read", &v, &json!({"file_path": "/a"})).is_ok());
        let err = check_schema("read", &v, &json!({"limit": 0, "extra": 1})).unwrap_err();
        let m = &err.message;
        assert!(
            m.starts_with("The input to read does not match its schema"),
            "{m}"
        );
        assert!(
            m.contains("at the input: \"file_path\" is a required property"),
            "{m}"
        );
        assert!(
            m.contains("at `/limit`: 0 is less than the minimum of 1"),
            "{m}"
        );
        assert!(m.contains("extra"), "{m}");
        let err = check_schema("read", &v, &json!("just a string")).unwrap_err();
        assert!(
            err.message.contains("is not of type \"object\""),
            "{}",
            err.message
        );
    }
}
