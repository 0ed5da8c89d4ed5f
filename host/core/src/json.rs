//! Bounded JSON: every JSON document that crosses the sandbox, either way,
//! is checked against a size and a nesting-depth limit before anything else
//! looks at it. Depth is measured without recursion, so a hostile document
//! cannot overflow the host's stack while being checked.

use serde_json::Value;

/// Limits on one JSON document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonBounds {
    /// The most bytes of JSON text.
    pub max_bytes: usize,
    /// The deepest nesting of arrays and objects (a scalar has depth 0).
    pub max_depth: usize,
}

/// Parses `text` within `bounds`. Errors are sentences naming the limit.
pub fn parse(text: &str, bounds: JsonBounds) -> Result<Value, String> {
    if text.len() > bounds.max_bytes {
        return Err(format!(
            "the JSON is {} bytes; the limit is {}",
            text.len(),
            bounds.max_bytes
        ));
    }
    // serde_json refuses nesting deeper than 128 by itself, so parsing
    // cannot recurse without bound; our own limit is checked after.
    let value: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    check_depth(&value, bounds.max_depth)?;
    Ok(value)
}

/// Serialises `value` within `bounds`.
pub fn to_text(value: &Value, bounds: JsonBounds) -> Result<String, String> {
    check_depth(value, bounds.max_depth)?;
    let text = value.to_string();
    if text.len() > bounds.max_bytes {
        return Err(format!(
            "the JSON is {} bytes; the limit is {}",
            text.len(),
            bounds.max_bytes
        ));
    }
    Ok(text)
}

/// Fails when `value` nests deeper than `max_depth`.
pub fn check_depth(value: &Value, max_depth: usize) -> Result<(), String> {
    let depth = depth(value);
    if depth > max_depth {
        Err(format!(
            "the JSON nests {depth} levels deep; the limit is {max_depth}"
        ))
    } else {
        Ok(())
    }
}

/// The nesting depth of `value`, computed iteratively.
pub fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(items) => {
                deepest = deepest.max(d + 1);
                stack.extend(items.iter().map(|i| (i, d + 1)));
            }
            Value::Object(map) => {
                deepest = deepest.max(d + 1);
                stack.extend(map.values().map(|i| (i, d + 1)));
            }
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const BOUNDS: JsonBounds = JsonBounds {
        max_bytes: 100,
        max_depth: 3,
    };

    #[test]
    fn measures_depth() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!([])), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": []}]})), 4);
    }

    #[test]
    fn enforces_both_bounds() {
        assert!(parse(r#"{"a":[1]}"#, BOUNDS).is_ok());
        assert!(parse("[[[[1]]]]", BOUNDS).unwrap_err().contains("4 levels"));
        assert!(
            parse(&format!("\"{}\"", "x".repeat(200)), BOUNDS)
                .unwrap_err()
                .contains("limit is 100")
        );
        assert!(parse("{", BOUNDS).unwrap_err().starts_with("invalid JSON"));
        assert!(to_text(&json!("x".repeat(200)), BOUNDS).is_err());
    }

    #[test]
    fn very_deep_documents_fail_without_overflowing() {
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        let bounds = JsonBounds {
            max_bytes: 1 << 20,
            max_depth: 64,
        };
        assert!(parse(&deep, bounds).is_err());
    }
}
