//! `${VAR}` and `${VAR:-default}` in configured text, expanded as Claude
//! Code expands `.mcp.json`.

/// `text` with `${VAR}` replaced by the variable's value (`lookup`), and
/// `${VAR:-default}` by the default when the variable is unset, as Claude
/// Code expands `.mcp.json`. An unset variable without a default, or a
/// malformed reference (which Claude Code would pass on as it is), is an
/// error that names the reference but never quotes the text (which may
/// hold a secret).
pub fn expand(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err("a `${` is not closed".into());
        };
        let reference = &after[..end];
        let (name, default) = match reference.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (reference, None),
        };
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(format!(
                "`${{{reference}}}` does not name a variable (letters, digits and `_`)"
            ));
        }
        match (lookup(name), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(format!(
                    "the environment variable {name} is not set, or not UTF-8 (`${{{name}}}`); \
                     set it, or give a default: `${{{name}:-...}}`"
                ));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_expand_as_claude_code_expands_them() {
        let env = |name: &str| match name {
            "TOKEN" => Some("s3cret".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        let ok = |text: &str| expand(text, env).unwrap();
        assert_eq!(ok("plain $TOKEN {TOKEN}"), "plain $TOKEN {TOKEN}");
        assert_eq!(ok("${TOKEN}"), "s3cret");
        assert_eq!(ok("Bearer ${TOKEN}!${TOKEN}"), "Bearer s3cret!s3cret");
        assert_eq!(ok("${TOKEN:-other}"), "s3cret");
        assert_eq!(ok("${MISSING:-https://x.test/a}"), "https://x.test/a");
        assert_eq!(ok("${EMPTY:-fallback}"), "", "set, though empty");
        assert_eq!(ok("${EMPTY}"), "");
        assert_eq!(ok("${MISSING:-}"), "");
        let err = |text: &str| expand(text, env).unwrap_err();
        let missing = err("--key=s3cret-${MISSING}");
        assert!(
            missing.contains("MISSING is not set") && missing.contains("${MISSING:-...}"),
            "{missing}"
        );
        assert!(
            !missing.contains("s3cret"),
            "the text is not quoted: {missing}"
        );
        assert!(err("${TOKEN").contains("not closed"));
        assert!(err("${}").contains("does not name a variable"));
        assert!(err("${1X}").contains("does not name a variable"));
        assert!(err("${A-B}").contains("does not name a variable"));
    }
}
