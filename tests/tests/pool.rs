//! The instance pool and the admission queue in front of it: calls beyond
//! the pool's capacity wait for a slot instead of failing, a waiting call
//! can be cancelled, and hooks have slots of their own so tool uses holding
//! preflight stores cannot starve them.

use airlock_host::PermissionMode;
use airlock_host::config::hooks::{HookMatcher, HookSpec};
use airlock_host::{Airlock, CallControl, Config, ErrorClass, ToolUse};
use airlock_tests::*;
use serde_json::json;
use std::time::{Duration, Instant};

/// A host with a pool of `slots` tool stores (and at least one more for
/// hooks), running every tool without asking.
async fn pooled(slots: u32, mut config: Config) -> Airlock {
    config.limits.pool_slots = slots;
    config.permissions.default_mode = PermissionMode::BypassPermissions;
    let airlock = airlock(config).await;
    assert!(airlock.engine().pooled());
    airlock
}

/// Runs `n` sleeps of `ms` at once, each in a context of its own.
async fn sleeps(airlock: &Airlock, n: usize, ms: u64) -> Vec<airlock_host::ToolResult> {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let airlock = airlock.clone();
        tasks.spawn(async move {
            let mut cx = airlock.context();
            let use_ = ToolUse::new(format!("s{i}"), "sleep", json!({ "ms": ms }));
            airlock.call(&mut cx, use_).await
        });
    }
    tasks.join_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_pools_capacity_queue_and_all_succeed() {
    // Three slots for tool stores (and one for hooks). Twelve sleeps of
    // 150 ms can run at most three at a time, so they take four rounds.
    let airlock = pooled(3, config()).await;
    let started = Instant::now();
    let results = sleeps(&airlock, 12, 150).await;
    let took = started.elapsed();
    for r in &results {
        assert_eq!(ok_text(r), "Slept 150 ms.");
    }
    assert!(
        took >= Duration::from_millis(4 * 150),
        "twelve sleeps through three slots took only {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_a_slot_can_be_cancelled() {
    // One slot for tool stores (and one for hooks).
    let airlock = pooled(1, config()).await;
    let holder = {
        let airlock = airlock.clone();
        tokio::spawn(async move {
            let mut cx = airlock.context();
            let use_ = ToolUse::new("holder", "sleep", json!({"ms": 2000}));
            airlock.call(&mut cx, use_).await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let control = CallControl::default();
    let cancel = control.cancel.clone();
    let waiter = {
        let airlock = airlock.clone();
        tokio::spawn(async move {
            let mut cx = airlock.context();
            let use_ = ToolUse::new("waiter", "ls", json!({}));
            airlock.call_with(&mut cx, use_, control).await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cancelled_at = Instant::now();
    cancel.cancel();
    let waited = waiter.await.unwrap();
    assert!(
        cancelled_at.elapsed() < Duration::from_millis(500),
        "the waiting call took {:?} to notice its cancellation",
        cancelled_at.elapsed()
    );
    assert_eq!(err(&waited).class, ErrorClass::Cancelled, "{waited:?}");
    assert_eq!(ok_text(&holder.await.unwrap()), "Slept 2000 ms.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_have_slots_of_their_own() {
    // One tool slot and one hook slot. Each use of `patient` holds its
    // preflight store (it declares every preflight export) while its
    // pre-tool hook runs: were hooks drawing on the same slot, the first use
    // would wait on itself.
    let tools = tempfile::tempdir().unwrap();
    std::fs::copy(guests::PATIENT, tools.path().join("patient.wasm")).unwrap();
    let mut config = config();
    config.tool_dirs = Some(vec![tools.path().to_path_buf()]);
    config.hooks.pre_tool_use = vec![HookMatcher {
        matcher: Some("patient".into()),
        hooks: vec![HookSpec::Wasm {
            component: guests::HOOK.into(),
            timeout: Some(5),
        }],
    }];
    let airlock = pooled(1, config).await;
    let patient = airlock.registry().get("patient").expect("patient loads");
    assert!(patient.descriptor().preflight.validate);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..4 {
        let airlock = airlock.clone();
        tasks.spawn(async move {
            let mut cx = airlock.context();
            let use_ = ToolUse::new(format!("p{i}"), "patient", json!({ "ms": 500 }));
            airlock.call(&mut cx, use_).await
        });
    }
    let results = tokio::time::timeout(Duration::from_secs(30), tasks.join_all())
        .await
        .expect("the uses finish");
    for r in &results {
        assert_eq!(ok_text(r), "finished; cancelled seen: false");
        assert!(
            r.additional_context
                .iter()
                .any(|c| c.contains("shortened the sleep")),
            "{r:?}"
        );
    }
}

#[tokio::test]
async fn no_pool_means_no_queue() {
    let mut config = config();
    config.limits.pool_slots = 0;
    config.permissions.default_mode = PermissionMode::BypassPermissions;
    let airlock = airlock(config).await;
    assert!(!airlock.engine().pooled());
    for r in sleeps(&airlock, 4, 10).await {
        assert_eq!(ok_text(&r), "Slept 10 ms.");
    }
}
