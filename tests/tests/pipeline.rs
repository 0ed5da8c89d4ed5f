//! The pipeline's stages on real tools: hooks (a shell script and a wasm
//! component), permission rules, modes and prompts, denial tracking,
//! oversized results, and the telemetry span.

use airlock_host::Config;
use airlock_host::PermissionMode;
use airlock_host::config::hooks::{HookMatcher, HookSpec};
use airlock_host::policy::DecisionSource;
use airlock_host::{ErrorClass, PermissionAnswer, ToolUse};
use airlock_tests::*;
use serde_json::json;

fn with_mode(mut config: Config, mode: PermissionMode) -> Config {
    config.permissions.default_mode = mode;
    config
}

#[tokio::test]
async fn a_shell_hook_blocks_one_call_with_exit_2_and_rewrites_anothers_input() {
    let ws = workspace(&[("keep.txt", "original")]);
    let script = ws.path().join("hook.sh");
    std::fs::write(
        &script,
        r#"#!/bin/sh
event=$(cat)
case "$event" in
  *'"tool_name":"write"'*)
    echo "writes are frozen during the release" >&2
    exit 2 ;;
  *'"tool_name":"sleep"'*)
    echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"ms":1},"additionalContext":"the hook shortened the sleep"}}' ;;
esac
exit 0
"#,
    )
    .unwrap();
    let mut config = with_mode(workspace_config(ws.path()), PermissionMode::AcceptEdits);
    config.hooks.pre_tool_use = vec![HookMatcher {
        matcher: Some("Write|sleep".into()),
        hooks: vec![HookSpec::Command {
            command: format!("sh {}", script.display()),
            timeout: Some(10),
        }],
    }];
    let airlock = airlock(config).await;
    let mut cx = airlock.context();

    let r = call(
        &airlock,
        &mut cx,
        "write",
        json!({"file_path": "keep.txt", "content": "changed"}),
    )
    .await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::PermissionDenied);
    assert_eq!(e.message, "writes are frozen during the release");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("keep.txt")).unwrap(),
        "original"
    );
    assert_eq!(cx.denials().len(), 1);
    assert_eq!(cx.denials()[0].source, DecisionSource::Hook);

    let started = std::time::Instant::now();
    let r = call(&airlock, &mut cx, "sleep", json!({"ms": 60000})).await;
    assert_eq!(ok_text(&r), "Slept 1 ms.", "the hook rewrote the input");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(r.additional_context, ["the hook shortened the sleep"]);
    assert_eq!(r.permission.as_ref().unwrap().source, DecisionSource::Hook);

    let r = call(&airlock, &mut cx, "read", json!({"file_path": "keep.txt"})).await;
    assert!(
        ok_text(&r).contains("original"),
        "the matcher leaves other tools alone"
    );
}

#[tokio::test]
async fn a_wasm_hook_blocks_rewrites_and_adds_context() {
    let ws = workspace(&[]);
    let mut config = with_mode(workspace_config(ws.path()), PermissionMode::AcceptEdits);
    let hook = HookSpec::Wasm {
        component: guests::HOOK.into(),
        timeout: Some(5),
    };
    config.hooks.pre_tool_use = vec![HookMatcher {
        matcher: None,
        hooks: vec![hook.clone()],
    }];
    config.hooks.post_tool_use = vec![HookMatcher {
        matcher: Some("ls".into()),
        hooks: vec![hook],
    }];
    let airlock = airlock(config).await;
    let mut cx = airlock.context();
    let r = call(
        &airlock,
        &mut cx,
        "write",
        json!({"file_path": "secret.txt", "content": "x"}),
    )
    .await;
    assert_eq!(
        err(&r).message,
        "the wasm hook blocks writes to secret files"
    );
    assert!(!ws.path().join("secret.txt").exists());
    ok_text(
        &call(
            &airlock,
            &mut cx,
            "write",
            json!({"file_path": "public.txt", "content": "x"}),
        )
        .await,
    );
    let r = call(&airlock, &mut cx, "sleep", json!({"ms": 60000})).await;
    assert_eq!(ok_text(&r), "Slept 1 ms.");
    let r = call(&airlock, &mut cx, "ls", json!({})).await;
    assert_eq!(r.additional_context, ["listed by ls"]);
}

#[tokio::test]
async fn a_post_hook_can_block_or_replace_a_result() {
    let ws = workspace(&[("a.txt", "TOP SECRET")]);
    let mut config = workspace_config(ws.path());
    config.hooks.post_tool_use = vec![
        HookMatcher {
            matcher: Some("read".into()),
            hooks: vec![HookSpec::Command {
                command: r#"grep -q 'TOP SECRET' && echo '{"decision":"block","reason":"the result holds a secret"}'; exit 0"#.into(),
                timeout: None,
            }],
        },
        HookMatcher {
            matcher: Some("ls".into()),
            hooks: vec![HookSpec::Command {
                command: r#"echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","updatedToolOutput":"[listing redacted]"}}'"#.into(),
                timeout: None,
            }],
        },
    ];
    let airlock = airlock(config).await;
    let mut cx = airlock.context();
    let r = call(&airlock, &mut cx, "read", json!({"file_path": "a.txt"})).await;
    assert_eq!(
        err(&r).message,
        "A PostToolUse hook blocked this result: the result holds a secret"
    );
    assert!(
        cx.file_stamp(&path_in(ws.path(), "a.txt")).is_some(),
        "the read happened, and is recorded"
    );
    let r = call(&airlock, &mut cx, "ls", json!({})).await;
    assert_eq!(ok_text(&r), "[listing redacted]");
}

#[tokio::test]
async fn asks_go_to_the_prompter_and_answers_are_honoured() {
    let ws = workspace(&[]);
    let prompter = ScriptedPrompter::new(vec![
        PermissionAnswer::Allow,
        PermissionAnswer::Deny(Some("not that file".into())),
        PermissionAnswer::AllowAlways,
    ]);
    let airlock = airlock(workspace_config(ws.path()))
        .await
        .with_prompter(prompter.clone());
    let mut cx = airlock.context();
    let w = |name: &str| json!({"file_path": name, "content": "x"});

    // The question names who asked for the call, when a front end says.
    let alice = airlock_host::Caller {
        subject: "alice".into(),
        client_id: Some("cli-1".into()),
    };
    let r = airlock
        .call(
            &mut cx,
            ToolUse::new("w1", "write", w("yes.txt")).with_caller(Some(alice.clone())),
        )
        .await;
    ok_text(&r);
    assert_eq!(r.permission.as_ref().unwrap().source, DecisionSource::User);
    let r = call(&airlock, &mut cx, "write", w("no.txt")).await;
    assert_eq!(
        err(&r).message,
        "The user denied permission to use write: not that file"
    );
    assert!(!ws.path().join("no.txt").exists());
    ok_text(&call(&airlock, &mut cx, "write", w("always.txt")).await);
    ok_text(&call(&airlock, &mut cx, "write", w("again.txt")).await);

    let asked = prompter.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 3, "'always' stops the questions");
    assert!(
        asked[0].reason.contains("cannot be undone"),
        "{}",
        asked[0].reason
    );
    assert_eq!(asked[0].input["file_path"], "yes.txt");
    assert_eq!(asked[0].caller, Some(alice));
    assert_eq!(asked[1].caller, None);
    let denials = cx.denials();
    assert_eq!(denials.len(), 1);
    assert_eq!(denials[0].tool, "write");
    assert_eq!(denials[0].source, DecisionSource::User);

    let r = call(&airlock, &mut cx, "read", json!({"file_path": "yes.txt"})).await;
    ok_text(&r);
    assert!(
        matches!(
            r.permission.as_ref().unwrap().source,
            DecisionSource::Mode(_)
        ),
        "reads never ask"
    );
}

#[tokio::test]
async fn without_a_prompter_asks_are_denied_with_advice() {
    let ws = workspace(&[]);
    let airlock = airlock(workspace_config(ws.path())).await;
    let mut cx = airlock.context();
    let r = call(
        &airlock,
        &mut cx,
        "edit",
        json!({"file_path": "n.txt", "old_string": "", "new_string": "x"}),
    )
    .await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::PermissionDenied);
    assert!(
        e.message.contains("nobody to ask") && e.message.contains("permissions.allow"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn rules_and_modes_decide_on_real_tools() {
    let ws = workspace(&[(".env", "KEY=1"), ("src/a.rs", "fn a() {}")]);
    let mut config = with_mode(workspace_config(ws.path()), PermissionMode::AcceptEdits);
    config.permissions.deny = vec!["Read(/.env)".into(), "fetch".into()];
    config.permissions.ask = vec!["Edit(/src/**)".into()];
    let prompter = ScriptedPrompter::new(vec![PermissionAnswer::Deny(None)]);
    let airlock = airlock(config).await.with_prompter(prompter.clone());
    let mut cx = airlock.context();

    let r = call(&airlock, &mut cx, "read", json!({"file_path": ".env"})).await;
    assert!(
        err(&r).message.contains("denied by the rule Read(/.env)"),
        "{}",
        err(&r).message
    );
    let r = call(
        &airlock,
        &mut cx,
        "grep",
        json!({"pattern": "KEY", "path": ".env"}),
    )
    .await;
    assert_eq!(
        err(&r).class,
        ErrorClass::PermissionDenied,
        "Read rules cover every reading tool"
    );
    let r = call(
        &airlock,
        &mut cx,
        "write",
        json!({"file_path": ".env", "content": "x"}),
    )
    .await;
    assert_eq!(
        err(&r).class,
        ErrorClass::PermissionDenied,
        "a Read deny also blocks writes"
    );
    let r = call(
        &airlock,
        &mut cx,
        "write",
        json!({"file_path": "src/b.rs", "content": "x"}),
    )
    .await;
    assert_eq!(
        err(&r).message,
        "The user denied permission to use write.",
        "the ask rule asked"
    );
    ok_text(
        &call(
            &airlock,
            &mut cx,
            "write",
            json!({"file_path": "notes.txt", "content": "x"}),
        )
        .await,
    );
    assert!(
        cx.tools().get("fetch").is_none(),
        "a bare deny hides the tool"
    );

    let mut plan = airlock.context();
    plan.set_mode(PermissionMode::Plan);
    let r = call(
        &airlock,
        &mut plan,
        "write",
        json!({"file_path": "p.txt", "content": "x"}),
    )
    .await;
    assert!(err(&r).message.contains("Plan mode"), "{}", err(&r).message);
    ok_text(&call(&airlock, &mut plan, "ls", json!({})).await);
}

/// An oversized result is saved outside the workspace and every grant, as
/// its caller's and context's: no tool reads it, and the host gives it back
/// to that owner alone.
#[tokio::test]
async fn oversized_results_are_spilled_with_a_preview() {
    use airlock_host::pipeline::results::Owner;
    let big: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    let ws = workspace(&[("big.txt", &big)]);
    let results = tempfile::tempdir().unwrap();
    let config = Config {
        results_dir: Some(results.path().to_path_buf()),
        ..workspace_config(ws.path())
    };
    let airlock = airlock(config).await;
    let mut cx = airlock.context();
    let r = call(
        &airlock,
        &mut cx,
        "read",
        json!({"file_path": "big.txt", "limit": 20000}),
    )
    .await;
    let text = ok_text(&r);
    assert!(text.starts_with("<persisted-output>"), "{}", &text[..200]);
    let path = r.spilled_to.clone().unwrap();
    assert!(
        path.starts_with(&results.path().display().to_string()),
        "{path}"
    );
    assert!(text.contains(&path));
    assert!(
        text.contains("No tool can read it there"),
        "{}",
        &text[..400]
    );
    assert!(
        !ws.path().join(".airlock").exists(),
        "nothing in the workspace"
    );
    let store = airlock.results().expect("a results directory");
    let saved = store.read(&path, Owner::of(&cx, None), 1 << 20).unwrap();
    let saved = String::from_utf8(saved).unwrap();
    assert!(
        saved.contains(" 20000\tline 19999"),
        "{}",
        &saved[saved.len() - 100..]
    );
    let r = call(
        &airlock,
        &mut cx,
        "read",
        json!({"file_path": path, "offset": 20000, "limit": 1}),
    )
    .await;
    assert!(err(&r).message.contains("outside"), "{}", err(&r).message);
    // Another context's, or a caller's, is another owner.
    let other = airlock.context();
    let caller = airlock_host::Caller {
        subject: "alice".into(),
        client_id: None,
    };
    for owner in [Owner::of(&other, None), Owner::of(&cx, Some(&caller))] {
        let e = store.read(&path, owner, 1 << 20).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{owner:?}");
    }
}

#[tokio::test]
async fn each_use_runs_in_an_execute_tool_span() {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    use tracing_subscriber::layer::SubscriberExt;

    /// The fields of every `execute_tool` span, by span id.
    type Spans = Mutex<HashMap<tracing::span::Id, Vec<(String, String)>>>;
    struct Capture(&'static Spans);
    struct Visitor<'a>(&'a mut Vec<(String, String)>);
    impl tracing::field::Visit for Visitor<'_> {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            self.0.push((
                field.name().to_string(),
                format!("{value:?}").trim_matches('"').to_string(),
            ));
        }
    }
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
        fn on_new_span(
            &self,
            attrs: &tracing::span::Attributes<'_>,
            id: &tracing::span::Id,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            if attrs.metadata().name() == "execute_tool" {
                let mut spans = self.0.lock().unwrap();
                attrs.record(&mut Visitor(spans.entry(id.clone()).or_default()));
            }
        }
        fn on_record(
            &self,
            id: &tracing::span::Id,
            values: &tracing::span::Record<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            if let Some(fields) = self.0.lock().unwrap().get_mut(id) {
                values.record(&mut Visitor(fields));
            }
        }
    }

    // A global subscriber: a thread-local one races with the other tests
    // of this binary over tracing's per-callsite interest cache.
    static SPANS: OnceLock<Spans> = OnceLock::new();
    let spans = SPANS.get_or_init(Spans::default);
    let subscriber = tracing_subscriber::registry().with(Capture(spans));
    tracing::subscriber::set_global_default(subscriber).expect("no other global subscriber");
    tracing::callsite::rebuild_interest_cache();
    let ws = workspace(&[]);
    let airlock = airlock(workspace_config(ws.path())).await;
    let mut cx = airlock.context();
    let r = airlock
        .call(
            &mut cx,
            ToolUse::new("toolu_9", "read", json!({"file_path": "missing"})).with_caller(Some(
                airlock_host::Caller {
                    subject: "alice".into(),
                    client_id: Some("cli-1".into()),
                },
            )),
        )
        .await;
    assert!(r.is_error());
    let seen = spans
        .lock()
        .unwrap()
        .values()
        .find(|fields| {
            fields
                .iter()
                .any(|(f, v)| f == "gen_ai.tool.call.id" && v == "toolu_9")
        })
        .cloned()
        .expect("the use ran in an execute_tool span");
    let get = |k: &str| seen.iter().find(|(f, _)| f == k).map(|(_, v)| v.clone());
    assert_eq!(get("otel.name").as_deref(), Some("execute_tool read"));
    assert_eq!(
        get("gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(get("gen_ai.tool.name").as_deref(), Some("read"));
    assert_eq!(get("enduser.id").as_deref(), Some("alice"));
    assert_eq!(get("airlock.client_id").as_deref(), Some("cli-1"));
    assert_eq!(get("airlock.permission.decision").as_deref(), Some("allow"));
    assert_eq!(get("error.type").as_deref(), Some("ENOENT"));
    assert!(get("airlock.duration_ms").is_some());
}

/// A use stopped while the user is being asked (as an MCP 2026-07-28
/// round is, when it returns the question to its client) says so: the
/// decision is `ask`, by the user, and the use was cancelled, not denied.
#[tokio::test]
async fn a_use_stopped_while_asking_records_the_question() {
    /// A user who never answers.
    struct Silent;
    #[async_trait::async_trait]
    impl airlock_host::PermissionPrompter for Silent {
        async fn ask(&self, _: &airlock_host::PermissionRequest) -> PermissionAnswer {
            std::future::pending().await
        }
    }
    let ws = workspace(&[]);
    let airlock = airlock(workspace_config(ws.path()))
        .await
        .with_prompter(std::sync::Arc::new(Silent));
    let mut cx = airlock.context();
    let control = airlock_host::CallControl::default();
    let cancel = control.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let r = airlock
        .call_with(
            &mut cx,
            ToolUse::new(
                "u1",
                "write",
                json!({"file_path": "new.txt", "content": "x"}),
            ),
            control,
        )
        .await;
    assert_eq!(err(&r).class, ErrorClass::Cancelled, "{r:?}");
    let asked = r.permission.expect("the question is recorded");
    assert_eq!(
        (asked.decision, asked.source),
        ("ask", DecisionSource::User)
    );
}
