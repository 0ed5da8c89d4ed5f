//! Deferred tools and the built-in `tool_search`: a deferred tool is named
//! only in the search's prompt, a query finds it and returns its full
//! definition, and it is then called like any other tool.

use airlock_host::adapters::anthropic;
use airlock_host::config::{ToolConfig, ToolSearchMode};
use airlock_host::tool_search::NAME;
use airlock_host::{Airlock, Config, ContentBlock, ToolOrigin};
use airlock_tests::*;
use serde_json::json;

fn deferring(config: Config, tools: &[&str]) -> Config {
    tools.iter().fold(config, |config, tool| {
        grant(
            config,
            tool,
            ToolConfig {
                defer_loading: Some(true),
                ..ToolConfig::default()
            },
        )
    })
}

fn found(result: &airlock_host::ToolResult) -> Vec<String> {
    let output = result.outcome.as_ref().expect("the search succeeds");
    output
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolReference { name, definition } => {
                assert_eq!(&definition["name"], name);
                assert_eq!(definition["input_schema"]["type"], "object");
                Some(name.clone())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_deferred_tool_is_found_by_a_query_then_called() {
    let ws = workspace(&[("notes/a.md", "x"), ("b.txt", "y")]);
    let airlock = airlock(deferring(workspace_config(ws.path()), &["glob", "grep"])).await;
    let mut cx = airlock.context();

    let search = cx.tools().get(NAME).expect("tool_search is offered");
    assert_eq!(search.tool.origin(), &ToolOrigin::Builtin);
    let prompt = &search.descriptor().prompt;
    assert!(prompt.contains("glob, grep"), "{prompt}");
    assert!(cx.tools().get("glob").unwrap().descriptor().defer_loading);
    assert!(!cx.tools().get("read").unwrap().descriptor().defer_loading);

    let r = call(
        &airlock,
        &mut cx,
        NAME,
        json!({"query": "find files by glob pattern"}),
    )
    .await;
    assert_eq!(found(&r)[0], "glob", "{}", ok_text(&r));
    let r = call(
        &airlock,
        &mut cx,
        NAME,
        json!({"query": "^gr", "mode": "regex"}),
    )
    .await;
    assert_eq!(found(&r), ["grep"]);
    let r = call(
        &airlock,
        &mut cx,
        NAME,
        json!({"query": "select:read,nope"}),
    )
    .await;
    assert_eq!(found(&r), ["read"], "select names any tool in view");
    let r = call(
        &airlock,
        &mut cx,
        NAME,
        json!({"query": "weather forecast"}),
    )
    .await;
    assert!(found(&r).is_empty());
    assert!(
        ok_text(&r).contains("Deferred tools: glob, grep"),
        "{}",
        ok_text(&r)
    );
    let r = call(
        &airlock,
        &mut cx,
        NAME,
        json!({"query": "(", "mode": "regex"}),
    )
    .await;
    assert_eq!(err(&r).class, airlock_host::ErrorClass::InvalidInput);

    let root = canonical(ws.path());
    let r = call(
        &airlock,
        &mut cx,
        "glob",
        json!({"pattern": "**/*.md", "path": root}),
    )
    .await;
    assert!(ok_text(&r).contains("a.md"), "{}", ok_text(&r));
}

#[tokio::test]
async fn anthropic_gets_deferred_definitions_and_tool_references() {
    let ws = workspace(&[]);
    let airlock = airlock(deferring(workspace_config(ws.path()), &["glob"])).await;
    let mut cx = airlock.context();
    let definitions: Vec<_> = cx
        .tools()
        .entries()
        .iter()
        .map(|e| anthropic::tool_definition(e.descriptor()))
        .collect();
    let deferred: Vec<&str> = definitions
        .iter()
        .filter(|d| d["defer_loading"] == true)
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(deferred, ["glob"], "the search itself is never deferred");
    assert!(definitions.iter().any(|d| d["name"] == NAME));

    let r = call(
        &airlock,
        &mut cx,
        NAME,
        json!({"query": "glob", "limit": 1}),
    )
    .await;
    let block = anthropic::tool_result(&r);
    let content = block["content"].as_array().unwrap();
    assert_eq!(content[0]["type"], "text");
    assert_eq!(
        content[1],
        json!({"type": "tool_reference", "tool_name": "glob"})
    );
    assert_eq!(content.len(), 2);
}

#[tokio::test]
async fn the_search_sees_only_the_callers_view_and_follows_its_gate() {
    let ws = workspace(&[]);
    let config = deferring(workspace_config(ws.path()), &["glob", "write"]);
    let airlock = airlock(config.clone()).await;
    let reader = airlock.view(|d| d.flags.contains(airlock_host::SafetyFlags::READ_ONLY));
    let mut cx = reader.context();
    let r = call(&reader, &mut cx, NAME, json!({"query": "write a file"})).await;
    assert!(!found(&r).contains(&"write".to_string()), "{:?}", found(&r));
    let r = call(&reader, &mut cx, NAME, json!({"query": "select:write"})).await;
    assert!(found(&r).is_empty());

    let off = Config {
        tool_search: ToolSearchMode::Off,
        ..config.clone()
    };
    let off: Airlock = airlock.with_config(off).await.unwrap();
    assert!(off.registry().get(NAME).is_none());
    let cx = off.context();
    let entries = cx.tools().entries();
    assert!(
        entries.iter().all(|e| !e.descriptor().defer_loading),
        "without the search nothing is deferred: it could never be found"
    );
    let nothing_deferred = workspace_config(ws.path());
    let auto = airlock.with_config(nothing_deferred).await.unwrap();
    assert!(
        auto.registry().get(NAME).is_none(),
        "auto: only when a tool is deferred"
    );
    let on = Config {
        tool_search: ToolSearchMode::On,
        ..workspace_config(ws.path())
    };
    let on = airlock.with_config(on).await.unwrap();
    assert!(on.registry().get(NAME).is_some());
    assert_eq!(on.registry().len(), auto.registry().len() + 1);
}

#[tokio::test]
async fn deferring_every_tool_never_defers_the_search_and_a_deny_hides_it_from_the_prompt() {
    let ws = workspace(&[]);
    let config = deferring(workspace_config(ws.path()), &["*"]);
    let mut config = grant(
        config,
        "read",
        ToolConfig {
            defer_loading: Some(false),
            ..ToolConfig::default()
        },
    );
    config.permissions.deny = vec!["grep".into()];
    let airlock = airlock(config).await;
    let cx = airlock.context();
    let search = cx.tools().get(NAME).unwrap().descriptor();
    assert!(!search.defer_loading, "the search itself is never deferred");
    assert!(cx.tools().get("glob").unwrap().descriptor().defer_loading);
    assert!(!cx.tools().get("read").unwrap().descriptor().defer_loading);
    assert!(search.prompt.contains("glob"), "{}", search.prompt);
    assert!(
        !search.prompt.contains("grep"),
        "a tool a bare deny hides is not named: {}",
        search.prompt
    );
}
