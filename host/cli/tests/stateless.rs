//! MCP 2026-07-28 served natively, and replicas sharing contexts: a raw
//! client (no `initialize`, per-request `_meta`) lists and calls tools over
//! stdio and over HTTP, its context named by the id a result handed out;
//! behind nginx (round-robin, no stickiness) three `airlock mcp --http`
//! replicas share a Redis context store, so a `read` on one replica lets an
//! `edit` on another through, a `cd` on one moves the cwd for the next, and
//! a replica killed mid-run loses nothing it acknowledged.

#![cfg(feature = "mcp")]

#[path = "../../../tests/support/debian.rs"]
mod debian;

#[path = "../../../tests/support/balance.rs"]
mod balance;

#[path = "../../../tests/support/modern.rs"]
mod modern;

#[path = "../../../tests/support/replicas.rs"]
mod replicas;

use balance::{Nginx, Redis};
use modern::{call, context_of, post, request, text};
use replicas::{Replica, airlock, setup};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

#[test]
fn a_2026_client_lists_and_calls_tools_over_stdio_without_initialize() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, config) = setup(dir.path(), "memory");
    let mut child = airlock(dir.path(), &config, &["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |message: Value| -> Value {
        writeln!(stdin, "{message}").unwrap();
        loop {
            let mut line = String::new();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "the server ended");
            let reply: Value = serde_json::from_str(&line).unwrap();
            if reply["id"] == message["id"] {
                return reply;
            }
        }
    };
    let discovered = ask(request(1, "server/discover", json!({}), None));
    let versions = discovered["result"]["supportedVersions"].to_string();
    assert!(versions.contains(modern::VERSION), "{discovered}");
    assert!(versions.contains("2025-11-25"), "{discovered}");

    let listed = ask(request(2, "tools/list", json!({}), None));
    let names = listed["result"]["tools"].to_string();
    for tool in ["read", "edit", "cd"] {
        assert!(names.contains(&format!("\"{tool}\"")), "{listed}");
    }

    let a = ws.join("a.txt").display().to_string();
    let read = ask(call(3, "read", json!({"file_path": a}), None));
    assert!(text(&read).contains("alpha"), "{read}");
    let context = context_of(&read).expect("a read hands out a context id");

    // Without the context, the edit is refused: nothing was read in it.
    let edit = json!({"file_path": a, "old_string": "alpha", "new_string": "ALPHA"});
    let refused = ask(call(4, "edit", edit.clone(), None));
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(text(&refused).contains("has not been read"), "{refused}");
    let edited = ask(call(5, "edit", edit, Some(&context)));
    assert_eq!(edited["result"]["isError"], false, "{edited}");
    assert_eq!(context_of(&edited).as_deref(), Some(context.as_str()));
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "ALPHA\n"
    );

    let unknown = ask(call(
        6,
        "read",
        json!({"file_path": a}),
        Some("ctx_0123456789abcdef0123456789abcdef"),
    ));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("there is no context"),
        "{unknown}"
    );

    // A listen stream is acknowledged with the notifications accepted.
    writeln!(
        stdin,
        "{}",
        request(
            7,
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
            None
        )
    )
    .unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let ack: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["toolsListChanged"], true,
        "{ack}"
    );
    assert!(
        ack["params"]["notifications"]["promptsListChanged"] != true,
        "{ack}"
    );
    // A tool added to the tool directory is announced on it.
    std::fs::copy(
        dir.path().join("tools/cd.wasm"),
        dir.path().join("tools/cd2.wasm"),
    )
    .unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    let changed: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "{changed}"
    );
    drop(stdin);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn replicas_behind_nginx_share_contexts_in_redis_and_survive_one_dying() {
    let mut redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let (ws, config) = setup(dir.path(), &redis.url());
    // The first compiles the tools into the shared cache; the others find
    // them there.
    let mut replicas: Vec<Replica> = (0..3)
        .map(|_| Replica::start(dir.path(), &config))
        .collect();
    let nginx = Nginx::start(&replicas.iter().map(|r| r.port).collect::<Vec<_>>());
    let lb = format!("127.0.0.1:{}", nginx.port);
    let mut next = 0u64;
    let mut send = |message: &dyn Fn(u64) -> Value| {
        next += 1;
        let reply = post(&lb, &message(next));
        let upstream = reply.header("x-upstream").unwrap_or_default().to_owned();
        (reply, upstream)
    };

    let (listed, _) = send(&|id| request(id, "tools/list", json!({}), None));
    assert_eq!(listed.status, 200);
    assert!(
        listed.message["result"]["tools"]
            .to_string()
            .contains("\"edit\"")
    );

    let a = ws.join("a.txt").display().to_string();
    let (read, on_read) = send(&|id| call(id, "read", json!({"file_path": a}), None));
    assert!(text(&read.message).contains("alpha"), "{}", read.message);
    let cx = context_of(&read.message).expect("a context id");
    let edit = json!({"file_path": a, "old_string": "alpha", "new_string": "ALPHA"});
    let (edited, on_edit) = send(&|id| call(id, "edit", edit.clone(), Some(&cx)));
    assert_eq!(
        edited.message["result"]["isError"], false,
        "{}",
        edited.message
    );
    assert_ne!(
        on_read, on_edit,
        "round-robin sends the edit to another replica"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "ALPHA\n"
    );

    let (moved, on_cd) = send(&|id| call(id, "cd", json!({"path": "sub"}), Some(&cx)));
    assert_eq!(
        moved.message["result"]["isError"], false,
        "{}",
        moved.message
    );
    let (relative, on_relative) =
        send(&|id| call(id, "read", json!({"file_path": "b.txt"}), Some(&cx)));
    assert!(
        text(&relative.message).contains("beta"),
        "{}",
        relative.message
    );
    assert_ne!(on_cd, on_relative);

    // The replica that recorded the read of b.txt dies; its record does not.
    let port = on_relative
        .rsplit(':')
        .next()
        .unwrap()
        .parse::<u16>()
        .unwrap();
    replicas.iter_mut().find(|r| r.port == port).unwrap().kill();
    let edit_b = json!({"file_path": "b.txt", "old_string": "beta", "new_string": "BETA"});
    for _ in 0..3 {
        let (again, on) = send(&|id| call(id, "read", json!({"file_path": "b.txt"}), Some(&cx)));
        assert_eq!(again.status, 200, "{}", again.message);
        assert!(text(&again.message).contains("beta"), "{}", again.message);
        assert!(
            !on.ends_with(&format!(":{port}")),
            "served by the dead replica"
        );
    }
    let (edited_b, _) = send(&|id| call(id, "edit", edit_b.clone(), Some(&cx)));
    assert_eq!(
        edited_b.message["result"]["isError"], false,
        "{}",
        edited_b.message
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("sub/b.txt")).unwrap(),
        "BETA\n"
    );

    // The store is not permissive: a file never read in this context is
    // not edited.
    let c = ws.join("c.txt").display().to_string();
    let edit_c = json!({"file_path": c, "old_string": "gamma", "new_string": "G"});
    let (refused, _) = send(&|id| call(id, "edit", edit_c.clone(), Some(&cx)));
    assert!(
        text(&refused.message).contains("has not been read"),
        "{}",
        refused.message
    );

    // With the store down, a call in the context fails, saying why.
    redis.stop();
    let (down, _) = send(&|id| call(id, "read", json!({"file_path": "b.txt"}), Some(&cx)));
    let message = down.message["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("context store redis://127.0.0.1"),
        "{}",
        down.message
    );
    drop(nginx);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_keeps_every_field_written_at_once_and_forgets_an_unused_context() {
    use airlock_host::config::ContextStoreUrl;
    use airlock_host::contexts::{ContextStore, Fields, Redis as RedisStore};
    let redis = Redis::start();
    let store = std::sync::Arc::new(RedisStore::new(
        ContextStoreUrl::try_from(redis.url()).unwrap(),
    ));
    store.ping().await.unwrap();
    let ttl = Duration::from_secs(60);
    let id = "ctx_00000000000000000000000000000001";
    let initial: Fields = [("cwd".to_string(), "/w".to_string())].into();
    store.create(id, &initial, ttl).await.unwrap();
    // 64 writers at once, each setting its own field (and the cwd).
    let writers: Vec<_> = (0..64)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let set: Fields = [
                    (format!("read:/w/{i}"), format!("{i} 1 {}", "0".repeat(64))),
                    ("cwd".to_string(), format!("/w/{i}")),
                ]
                .into();
                assert!(store.update(id, &set, &[], ttl).await.unwrap());
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let fields = store.load(id, ttl).await.unwrap().unwrap();
    assert_eq!(fields.keys().filter(|k| k.starts_with("read:")).count(), 64);
    assert!(fields["cwd"].starts_with("/w/"));
    assert!(
        !fields.contains_key("created"),
        "the store's own field stays its own"
    );
    let removed = store
        .update(id, &Fields::new(), &["read:/w/0".to_string()], ttl)
        .await
        .unwrap();
    assert!(removed);
    assert!(
        !store
            .load(id, ttl)
            .await
            .unwrap()
            .unwrap()
            .contains_key("read:/w/0")
    );

    // An update of a context that expired writes nothing.
    store
        .update(id, &Fields::new(), &[], Duration::from_millis(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(store.load(id, ttl).await.unwrap(), None);
    let set: Fields = [("cwd".to_string(), "/x".to_string())].into();
    assert!(!store.update(id, &set, &[], ttl).await.unwrap());
    assert_eq!(store.load(id, ttl).await.unwrap(), None);
}
