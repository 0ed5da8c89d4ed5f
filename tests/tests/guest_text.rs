//! Guest text that is not cleaned (SECURITY.md, "Misleading text"): the
//! hostile guest `tests/guests/dirty` puts control and invisible characters
//! of every class the host removes into its descriptor (text, schema
//! descriptions, patterns and keys), its output (text and JSON blocks,
//! structured output, metadata, messages, the paths of context changes),
//! its error and its log line.
//! None of them reaches what `Airlock` returns, the MCP `tools/list` entry,
//! the Anthropic and OpenAI shapes, or the log, and the guest's newline
//! cannot forge a log line. A binary of its own: it installs a process-wide
//! log subscriber.

use airlock_host::adapters::{anthropic, mcp, openai};
use airlock_host::{Airlock, PermissionMode, ToolResult};
use airlock_tests::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, OnceLock};

/// Whether `c` is of a class no guest text may keep: a control other than
/// tab and newline, a format character (bidi marks, embeddings, overrides
/// and isolates, zero-width characters, the soft hyphen, the Arabic letter
/// mark, the Mongolian vowel separator, the word joiner and invisible
/// operators, the BOM, tags), a line or paragraph separator, a variation
/// selector (standard, supplement, Mongolian) or a Hangul filler.
fn forbidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c,
            '\u{AD}' | '\u{61C}' | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{E0000}'..='\u{E0FFF}')
}

/// Fails, naming `what` and the character, when any string in `value`
/// (object keys included) holds a forbidden character.
fn assert_clean(what: &str, value: &Value) {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        let check = |s: &str| {
            if let Some(c) = s.chars().find(|&c| forbidden(c)) {
                panic!("{what}: U+{:04X} in {s:?}", c as u32);
            }
        };
        match v {
            Value::String(s) => check(s),
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                for (key, item) in map {
                    check(key);
                    stack.push(item);
                }
            }
            _ => {}
        }
    }
}

/// Everything written to the log, by every thread.
fn log() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .with_writer(move || LogCapture(sink.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        log
    })
}

async fn dirty_host() -> (Airlock, tempfile::TempDir) {
    let mut config = config();
    config.permissions.default_mode = PermissionMode::BypassPermissions;
    with_component(guests::DIRTY, config).await
}

async fn call_dirty(airlock: &Airlock, what: &str) -> ToolResult {
    let mut cx = airlock.context();
    call(airlock, &mut cx, "dirty", json!({ "what": what })).await
}

#[tokio::test]
async fn gt01_a_dirty_descriptor_is_clean_in_every_tool_definition() {
    let (airlock, _dir) = dirty_host().await;
    let entry = airlock
        .registry()
        .get("dirty")
        .expect("the dirty tool loads");
    let d = entry.descriptor();
    assert_clean("the descriptor", &serde_json::to_value(d).unwrap());
    assert_clean("MCP tools/list", &mcp::tool_definition(d));
    assert_clean("Anthropic tools", &anthropic::tool_definition(d));
    for api in [openai::Api::Responses, openai::Api::ChatCompletions] {
        assert_clean("OpenAI tools", &openai::tool_definition(d, api));
    }
    assert_eq!(d.title, "Dirty tool");
    assert_eq!(d.description, "Returns dirty text everywhere.");
    assert_eq!(d.prompt, "Returns dirty text.\nEverywhere.");
    assert_eq!(d.version, "1.0");
    let properties = &d.input_schema["properties"];
    assert_eq!(properties["what"]["description"], "all or error");
    assert_eq!(
        properties["note"]["pattern"], "^[a-z]*$",
        "a cleaned pattern still reads as the guest meant it"
    );
    assert_eq!(
        d.input_schema["$defs"]["unused"]["default"],
        json!({"k": 1})
    );
    let output_schema = d.output_schema.as_ref().expect("an output schema");
    assert_eq!(
        output_schema["properties"]["value"]["description"],
        "A value."
    );
}

#[tokio::test]
async fn gt02_dirty_results_are_clean_in_every_shape() {
    let (airlock, _dir) = dirty_host().await;
    let r = call_dirty(&airlock, "all").await;
    let output = r.outcome.as_ref().expect("the call succeeds");
    assert_clean("the result", &serde_json::to_value(&r).unwrap());
    assert_clean("an Anthropic tool_result", &anthropic::tool_result(&r));
    assert_clean(
        "an OpenAI function_call_output",
        &openai::function_call_output(&r),
    );
    assert_clean("an OpenAI tool message", &openai::tool_message(&r));
    let text = output.text_content();
    assert!(
        text.starts_with("a text block\n[airlock removed "),
        "{text:?}"
    );
    assert!(
        text.contains(r#"{"key":"a JSON value","nested":["deep",{"inner":1}]}"#),
        "{text:?}"
    );
    assert_eq!(output.structured, Some(json!({"value": "structured"})));
    let metadata = output.metadata.clone().map(Value::Object);
    assert_eq!(metadata, Some(json!({"meta": "data"})));
    assert_eq!(output.messages[0].text, "a message for the model");
    assert_eq!(
        r.refused_changes.len(),
        2,
        "the cwd and the read record name no file: {:?}",
        r.refused_changes
    );

    let r = call_dirty(&airlock, "error").await;
    assert_clean("an error", &serde_json::to_value(&r).unwrap());
    assert_eq!(err(&r).message, "a failure");
}

#[tokio::test]
async fn gt03_a_guest_log_line_cannot_forge_another() {
    let log = log();
    let (airlock, _dir) = dirty_host().await;
    call_dirty(&airlock, "all").await;
    let text = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    let line = text
        .lines()
        .find(|l| l.contains("dirty log"))
        .unwrap_or_else(|| panic!("the guest's log line is logged: {text:?}"));
    assert!(
        line.contains(r"dirty log\n2026-01-01T00:00:00.000000Z ERROR forged"),
        "the newline is shown, not obeyed: {line:?}"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("2026-01-01T00:00:00")),
        "a forged line: {text:?}"
    );
    assert!(!line.chars().any(forbidden), "{line:?}");
}
