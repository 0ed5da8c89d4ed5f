//! Streaming versus wait-then-execute, on a recorded model turn.
//!
//! The fixture `tests/fixtures/agent-turn.jsonl` is an Anthropic event
//! stream with its timing: the model asks for a slow command (`sleep`,
//! standing in for a test run) early, writes for a second, then asks for a
//! `grep` and a `read`, and ends its message at 1.8 s. Each iteration
//! replays the stream in real time against the bundled tools on a small
//! workspace and measures the time from the first event to the last
//! result:
//!
//! - `streaming`: each tool use goes to the executor as soon as its block
//!   completes (what Airlock does);
//! - `wait_then_execute`: the tool uses go to the executor only after the
//!   message ends (the traditional loop).
//!
//! Run with `cargo bench -p airlock-host --bench streaming`.

use airlock_host::PermissionMode;
use airlock_host::adapters::anthropic::{Assembled, StreamAssembler};
use airlock_host::{Airlock, Config, ToolUse};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::Value;
use std::time::{Duration, Instant};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/agent-turn.jsonl"
);

fn events() -> Vec<(Duration, Value)> {
    std::fs::read_to_string(FIXTURE)
        .expect("the recorded stream")
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line).expect("one JSON event per line");
            let t = Duration::from_secs_f64(event["t_ms"].as_f64().unwrap_or(0.0) / 1000.0);
            (t, event)
        })
        .collect()
}

async fn host(workspace: &std::path::Path) -> Airlock {
    let mut config = Config {
        workspace: Some(workspace.to_path_buf()),
        tool_dirs: Some(Vec::new()),
        ..Config::default()
    };
    config.permissions.default_mode = PermissionMode::AcceptEdits;
    Airlock::new(config).await.expect("the bundled tools load")
}

/// Replays the stream once; returns the time to the last result.
async fn replay(airlock: &Airlock, events: &[(Duration, Value)], streaming: bool) -> Duration {
    let start = Instant::now();
    let executor = airlock.executor(airlock.context());
    let mut assembler = StreamAssembler::new();
    let mut held: Vec<ToolUse> = Vec::new();
    for (at, event) in events {
        tokio::time::sleep_until((start + *at).into()).await;
        if let Some(Assembled::ToolUse(tool_use)) = assembler.push(event) {
            if streaming {
                executor.add(tool_use);
            } else {
                held.push(tool_use);
            }
        }
    }
    for tool_use in held {
        executor.add(tool_use);
    }
    let (results, _) = executor.finish().await;
    let elapsed = start.elapsed();
    assert_eq!(results.len(), 3);
    assert!(
        results.iter().all(|r| !r.is_error()),
        "{:?}",
        results.iter().map(|r| r.text()).collect::<Vec<_>>()
    );
    elapsed
}

fn streaming_vs_waiting(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let workspace = tempfile::tempdir().expect("a temp dir");
    std::fs::create_dir(workspace.path().join("src")).unwrap();
    std::fs::write(
        workspace.path().join("src/lib.rs"),
        "pub fn greet() -> &'static str {\n    \"hi\"\n}\n",
    )
    .unwrap();
    let airlock = runtime.block_on(host(workspace.path()));
    let events = events();

    let mut group = c.benchmark_group("recorded_turn_to_last_result");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));
    for (name, streaming) in [("streaming", true), ("wait_then_execute", false)] {
        group.bench_function(name, |b| {
            b.to_async(&runtime).iter_custom(|iters| {
                let airlock = airlock.clone();
                let events = events.clone();
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += replay(&airlock, &events, streaming).await;
                    }
                    total
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, streaming_vs_waiting);
criterion_main!(benches);
