//! Airlock inside an agent loop: a recorded Anthropic stream (one model
//! turn) is replayed through the streaming executor, a custom
//! `PermissionPrompter` answers the permission questions, and the
//! `tool_result` blocks the agent would send back are printed. Then a
//! sub-agent with a read-only view of the tools runs a turn of its own.
//!
//! Run with `cargo run -p airlock-host --example embed`.

use airlock_host::adapters::anthropic::{self, StreamAssembler};
use airlock_host::{
    Airlock, Config, ExecutorEvent, PermissionAnswer, PermissionPrompter, PermissionRequest,
    SafetyFlags,
};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;

/// The embedder's policy: edits under `src/` are allowed once, anything
/// else that needs asking is refused with a reason the model can act on.
struct SrcOnly;

#[async_trait]
impl PermissionPrompter for SrcOnly {
    async fn ask(&self, request: &PermissionRequest) -> PermissionAnswer {
        let path = request.input["file_path"].as_str().unwrap_or_default();
        println!("  [asked] {} {path}: {}", request.tool_name, request.reason);
        if path.contains("/src/") {
            PermissionAnswer::Allow
        } else {
            PermissionAnswer::Deny(Some("only files under src/ may be changed".into()))
        }
    }
}

/// A model turn as the Messages API streams it: each tool use's input
/// arrives in fragments and is complete only at its block's stop.
fn recorded_turn(uses: &[(&str, &str, Value)]) -> Vec<Value> {
    let mut events = vec![json!({"type": "message_start", "message": {"role": "assistant"}})];
    for (index, (id, name, input)) in uses.iter().enumerate() {
        events.push(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
        let text = input.to_string();
        let (head, tail) = text.split_at(text.len() / 2);
        for fragment in [head, tail] {
            events.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": fragment}}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}}));
    events.push(json!({"type": "message_stop"}));
    events
}

/// Replays `events` through an executor over `cx` and returns the user
/// message the agent would send back: one `tool_result` per tool use, in
/// order.
async fn turn(
    airlock: &Airlock,
    cx: airlock_host::ToolContext,
    events: &[Value],
) -> anyhow::Result<(Value, airlock_host::ToolContext)> {
    let mut executor = airlock.executor(cx);
    let handle = executor.handle();
    let mut assembler = StreamAssembler::new();
    for event in events {
        if let Some(call) = assembler.push(event) {
            call.feed(&handle);
        }
    }
    executor.close();
    let mut results = Vec::new();
    while let Some(event) = executor.next().await {
        match event {
            ExecutorEvent::Progress(p) => println!("  [progress] {}: {}", p.tool_use_id, p.message),
            // A tool's `log` lines (sanitised), each before its use's result.
            ExecutorEvent::Log(l) => println!("  [log {:?}] {}: {}", l.level, l.tool, l.message),
            ExecutorEvent::Result(r) => results.push(anthropic::tool_result(&r)),
            _ => {}
        }
    }
    let cx = executor.into_context().await;
    Ok((json!({"role": "user", "content": results}), cx))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let project = tempfile::tempdir()?;
    std::fs::create_dir(project.path().join("src"))?;
    std::fs::write(
        project.path().join("src/lib.rs"),
        "pub fn answer() -> u32 { 41 }\n",
    )?;
    std::fs::write(project.path().join("README.md"), "# demo\n")?;
    let root = project.path().canonicalize()?;
    let lib = root.join("src/lib.rs").display().to_string();
    let readme = root.join("README.md").display().to_string();

    let config = Config {
        workspace: Some(root.clone()),
        tool_dirs: Some(Vec::new()),
        ..Config::default()
    };
    let airlock = Airlock::new(config).await?.with_prompter(Arc::new(SrcOnly));

    println!("turn 1: read, then two edits (one allowed, one refused)");
    let events = recorded_turn(&[
        ("toolu_1", "read", json!({"file_path": lib})),
        (
            "toolu_2",
            "edit",
            json!({"file_path": lib, "old_string": "41", "new_string": "42"}),
        ),
        (
            "toolu_3",
            "write",
            json!({"file_path": readme, "content": "# changed\n"}),
        ),
    ]);
    let (reply, cx) = turn(&airlock, airlock.context(), &events).await?;
    println!("{}", serde_json::to_string_pretty(&reply)?);
    assert_eq!(
        reply["content"][1]["is_error"], false,
        "the edit under src/ ran"
    );
    assert_eq!(
        reply["content"][2]["is_error"], true,
        "the write outside src/ was refused"
    );
    assert_eq!(
        std::fs::read_to_string(&lib)?,
        "pub fn answer() -> u32 { 42 }\n"
    );

    println!("\nturn 2: a read-only sub-agent");
    let explorer = cx.sub_agent("explorer", |d| d.flags.contains(SafetyFlags::READ_ONLY));
    let events = recorded_turn(&[
        (
            "toolu_4",
            "grep",
            json!({"pattern": "answer", "path": root.display().to_string()}),
        ),
        ("toolu_5", "write", json!({"file_path": lib, "content": ""})),
    ]);
    let (reply, _) = turn(&airlock, explorer, &events).await?;
    println!("{}", serde_json::to_string_pretty(&reply)?);
    assert_eq!(
        reply["content"][0]["is_error"], false,
        "grep is in its view"
    );
    assert_eq!(reply["content"][1]["is_error"], true, "write is not");
    Ok(())
}
