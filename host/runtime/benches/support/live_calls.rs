//! Many calls running at once, for the memory figures of `live.rs` and
//! `languages.rs`.

use airlock_host::tool::ProgressSink;
use airlock_host::{Airlock, CallControl, ErrorClass, ToolUse};
use serde_json::Value;
use std::collections::HashSet;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Starts `calls` uses of `tool` with `input` at once, each in an agent
/// context of its own; once every one has reported progress (all are
/// running), runs `measure`; then cancels them and checks every one was
/// still running. Returns how long until all were running, and what
/// `measure` returned.
pub async fn while_live<T>(
    airlock: &Airlock,
    calls: usize,
    tool: &str,
    input: &Value,
    measure: impl FnOnce() -> T,
) -> (Duration, T) {
    let (progress, mut events) = ProgressSink::channel(4 * calls);
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let mut running_calls = tokio::task::JoinSet::new();
    for i in 0..calls {
        let airlock = airlock.clone();
        let control = CallControl {
            progress: progress.clone(),
            cancel: cancel.clone(),
        };
        let use_ = ToolUse::new(format!("live{i}"), tool, input.clone());
        running_calls.spawn(async move {
            let mut cx = airlock.context();
            airlock.call_with(&mut cx, use_, control).await
        });
    }
    let mut running = HashSet::new();
    while running.len() < calls {
        let event = tokio::time::timeout(Duration::from_secs(50), events.recv())
            .await
            .expect("every call starts within 50 s")
            .expect("the progress channel stays open");
        running.insert(event.tool_use_id);
    }
    let all_running = started.elapsed();
    let measured = measure();
    cancel.cancel();
    let stopped = running_calls
        .join_all()
        .await
        .iter()
        .filter(|r| matches!(&r.outcome, Err(e) if e.class == ErrorClass::Cancelled))
        .count();
    assert_eq!(stopped, calls, "{tool}: every live call was still running");
    (all_running, measured)
}
