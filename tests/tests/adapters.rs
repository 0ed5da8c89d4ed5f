//! The model-API adapters end to end: calls in each API's recorded shape
//! (the conventions reference) are parsed, run by the bundled tools through
//! the executor, and answered in the same API's shape: one answer per call,
//! in order, with the call's id, and failures marked as such.

use airlock_host::adapters::{Assembled, anthropic, openai};
use airlock_host::{Airlock, ToolResult};
use airlock_tests::*;
use serde_json::{Value, json};

/// Feeds `calls` to a fresh executor and returns the results in order.
async fn run(airlock: &Airlock, calls: Vec<Assembled>) -> Vec<ToolResult> {
    let executor = airlock.executor(airlock.context());
    let handle = executor.handle();
    for call in calls {
        call.feed(&handle);
    }
    executor.finish().await.0
}

#[tokio::test]
async fn an_anthropic_message_round_trips() {
    let ws = workspace(&[("a.txt", "hello adapters\n")]);
    let airlock = airlock(workspace_config(ws.path())).await;
    let path = format!("{}/a.txt", canonical(ws.path()));
    let message = json!({"role":"assistant","stop_reason":"tool_use","content":[
        {"type":"text","text":"Reading it."},
        {"type":"tool_use","id":"toolu_01","name":"read","input":{"file_path": path}},
        {"type":"tool_use","id":"toolu_02","name":"read","input":{"file_path": 7}},
        {"type":"tool_use","id":"toolu_03","name":"grep","input":"not an object"}]});
    let results = run(&airlock, anthropic::tool_uses(&message)).await;
    let blocks: Vec<Value> = results.iter().map(anthropic::tool_result).collect();
    let ids: Vec<&str> = blocks
        .iter()
        .map(|b| b["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["toolu_01", "toolu_02", "toolu_03"]);
    assert_eq!(blocks[0]["is_error"], false);
    assert!(
        blocks[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hello adapters")
    );
    assert_eq!(blocks[1]["is_error"], true, "a schema error: {}", blocks[1]);
    assert_eq!(blocks[2]["is_error"], true);
    assert!(
        blocks[2]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("INVALID_JSON")
    );
}

#[tokio::test]
async fn openai_responses_and_chat_calls_round_trip() {
    let ws = workspace(&[("a.txt", "hello adapters\n")]);
    let airlock = airlock(workspace_config(ws.path())).await;
    let path = format!("{}/a.txt", canonical(ws.path()));
    let arguments = json!({ "file_path": path }).to_string();
    let response = json!({"output":[
        {"type":"function_call","id":"fc_1","call_id":"call_1","name":"read","arguments": arguments,"status":"completed"},
        {"type":"function_call","id":"fc_2","call_id":"call_2","name":"read","arguments":"{\"file_path\":","status":"completed"}]});
    let results = run(&airlock, openai::function_calls(&response)).await;
    let items: Vec<Value> = results.iter().map(openai::function_call_output).collect();
    assert_eq!(items[0]["type"], "function_call_output");
    assert_eq!(items[0]["call_id"], "call_1");
    assert!(
        items[0]["output"]
            .as_str()
            .unwrap()
            .contains("hello adapters")
    );
    assert_eq!(items[1]["call_id"], "call_2");
    assert!(
        items[1]["output"]
            .as_str()
            .unwrap()
            .starts_with("Error: The tool input is not valid JSON")
    );

    let message = json!({"role":"assistant","content":null,"tool_calls":[
        {"id":"call_a","type":"function","function":{"name":"ls","arguments": json!({"path": canonical(ws.path())}).to_string()}},
        {"id":"call_b","type":"function","function":{"name":"nope","arguments":"{}"}}]});
    let results = run(&airlock, openai::tool_calls(&message)).await;
    let messages: Vec<Value> = results.iter().map(openai::tool_message).collect();
    assert_eq!(messages[0]["role"], "tool");
    assert_eq!(messages[0]["tool_call_id"], "call_a");
    assert!(messages[0]["content"].as_str().unwrap().contains("a.txt"));
    assert_eq!(messages[1]["tool_call_id"], "call_b");
    assert!(
        messages[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: ")
    );
}

#[tokio::test]
async fn openai_streams_round_trip_as_their_calls_complete() {
    let ws = workspace(&[("a.txt", "hello streams\n")]);
    let airlock = airlock(workspace_config(ws.path())).await;
    let arguments = json!({ "file_path": format!("{}/a.txt", canonical(ws.path())) }).to_string();
    let (head, tail) = arguments.split_at(arguments.len() / 2);

    let mut responses = openai::ResponsesStream::new();
    let events = [
        json!({"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"read","arguments":""}}),
        json!({"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":head,"sequence_number":1}),
        json!({"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":tail,"sequence_number":2}),
        json!({"type":"response.function_call_arguments.done","item_id":"fc_1","output_index":0,"sequence_number":3}),
    ];
    let calls: Vec<Assembled> = events.iter().filter_map(|e| responses.push(e)).collect();
    let results = run(&airlock, calls).await;
    let item = openai::function_call_output(&results[0]);
    assert_eq!(item["call_id"], "call_1");
    assert!(
        item["output"].as_str().unwrap().contains("hello streams"),
        "{item}"
    );

    let mut chat = openai::ChatStream::new();
    let chunk = |delta: Value, finish: Value| json!({"choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
    let mut calls = chat.push(&chunk(
        json!({"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read","arguments":head}}]}),
        Value::Null,
    ));
    calls.extend(chat.push(&chunk(
        json!({"tool_calls":[{"index":0,"function":{"arguments":tail}}]}),
        Value::Null,
    )));
    calls.extend(chat.push(&chunk(json!({}), json!("tool_calls"))));
    let results = run(&airlock, calls).await;
    let message = openai::tool_message(&results[0]);
    assert_eq!(message["tool_call_id"], "call_a");
    assert!(
        message["content"]
            .as_str()
            .unwrap()
            .contains("hello streams"),
        "{message}"
    );
}

#[tokio::test]
async fn the_bundled_tools_pass_every_apis_lint_except_openai_strict() {
    let airlock = airlock(config()).await;
    for entry in airlock.registry().entries() {
        let d = entry.descriptor();
        assert!(
            anthropic::lint(d).is_empty(),
            "{}: {:?}",
            d.name,
            anthropic::lint(d)
        );
        assert!(
            airlock_host::adapters::mcp::lint(d).is_empty(),
            "{}",
            d.name
        );
        let openai = openai::lint(d);
        assert!(
            openai.iter().all(|p| p.starts_with("not strict: ")),
            "{}: {openai:?}",
            d.name
        );
        assert_eq!(
            openai::tool_definition(d, openai::Api::Responses)["strict"],
            openai.is_empty(),
            "{}",
            d.name
        );
    }
}
