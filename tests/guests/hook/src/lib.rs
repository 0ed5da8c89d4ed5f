//! A hook component for the pipeline tests: it blocks writes to paths
//! containing "secret", shortens `sleep` and `patient` to 1 ms (rewriting
//! the input), and adds context after `ls`.

wit_bindgen::generate!({ world: "hook-component", path: "../../../wit" });

use exports::airlock::tool::hook::{Guest, HookResult};
use serde_json::{Value, json};

struct Hook;

impl Guest for Hook {
    fn handle(event: String) -> HookResult {
        let Ok(event) = serde_json::from_str::<Value>(&event) else {
            return HookResult::Block("the hook got an event that is not JSON".into());
        };
        let tool = event["tool_name"].as_str().unwrap_or_default();
        match (event["hook_event_name"].as_str(), tool) {
            (Some("PreToolUse"), "write")
                if event["tool_input"]["file_path"].as_str().is_some_and(|p| p.contains("secret")) =>
            {
                HookResult::Block("the wasm hook blocks writes to secret files".into())
            }
            (Some("PreToolUse"), "sleep" | "patient") => HookResult::Proceed(Some(
                json!({"hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "updatedInput": {"ms": 1},
                    "additionalContext": "the wasm hook shortened the sleep"
                }})
                .to_string(),
            )),
            (Some("PostToolUse"), "ls") => HookResult::Proceed(Some(
                json!({"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "listed by ls"}})
                    .to_string(),
            )),
            _ => HookResult::Proceed(None),
        }
    }
}

export!(Hook);
