//! What one tool call costs the agent, against spawning a process.
//!
//! - `per_call/airlock_sleep_0`: one use of the bundled `sleep` tool with
//!   `{"ms": 0}` (it parses its input and returns one line) through the
//!   whole pipeline: schema validation, the tool's preflight exports,
//!   permissions, a fresh sandboxed store for the call, result processing
//!   and telemetry. Warm: the component is compiled and pre-instantiated
//!   before the first sample.
//! - `per_call/airlock_sleep_0_audited`: the same with `[audit]` on: each
//!   call recorded in a trail file (its input and output digested, the
//!   grants listed), checkpoints signed every 1,000 records; against the
//!   row above, in the same run, the per-call cost of auditing.
//! - `per_call/airlock_sleep_0_again`: the first row again, on a third
//!   host made after the audited one and measured after it: how much two
//!   identical hosts differ in one run (the noise auditing's cost is read
//!   against).
//! - `per_call/spawn_bin_true`: spawning `/bin/true` and waiting for it, the
//!   floor of any process-per-call sandbox, measured in the same run.
//!
//! Run with `cargo bench -p airlock-host --bench overhead`.

use airlock_host::config::{AuditConfig, AuditSink};
use airlock_host::{Airlock, Config, ToolContext, ToolUse};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use std::time::{Duration, Instant};

fn per_call(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let workspace = tempfile::tempdir().expect("a temp dir");
    let plain = || Config {
        workspace: Some(workspace.path().to_path_buf()),
        tool_dirs: Some(Vec::new()),
        ..Config::default()
    };
    // Each host loaded and warmed by one call.
    let host = |config: Config| {
        let airlock = runtime
            .block_on(Airlock::new(config))
            .expect("the bundled tools load");
        let mut cx = airlock.context();
        runtime.block_on(sleep(&airlock, &mut cx));
        (airlock, cx)
    };
    let (airlock, mut cx) = host(plain());
    let trail = tempfile::tempdir().expect("a temp dir");
    let (audited, mut audited_cx) = host(Config {
        audit: AuditConfig {
            enabled: true,
            path: Some(AuditSink::File(trail.path().join("audit.jsonl"))),
            key: Some(
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../audit/tests/fixtures/operator.pem"
                )
                .into(),
            ),
            ..AuditConfig::default()
        },
        ..plain()
    });
    // A second plain host, made after the audited one and measured after
    // it: what two identical hosts differ by (their engines, their pools,
    // the order they run in), so that auditing is not charged with it.
    let (again, mut again_cx) = host(plain());

    let mut group = c.benchmark_group("per_call");
    group.measurement_time(Duration::from_secs(10));
    for (name, airlock, cx) in [
        ("airlock_sleep_0", &airlock, &mut cx),
        ("airlock_sleep_0_audited", &audited, &mut audited_cx),
        ("airlock_sleep_0_again", &again, &mut again_cx),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        sleep(airlock, cx).await;
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.bench_function("spawn_bin_true", |b| {
        b.iter(|| {
            let status = std::process::Command::new("/bin/true")
                .status()
                .expect("/bin/true runs");
            assert!(status.success());
        })
    });
    group.finish();
}

/// One `sleep {"ms": 0}` through the pipeline; panics if it fails.
async fn sleep(airlock: &Airlock, cx: &mut ToolContext) {
    let tool_use = ToolUse::new("toolu_bench", "sleep", json!({ "ms": 0 }));
    let result = airlock.call(cx, tool_use).await;
    assert!(!result.is_error(), "{}", result.text());
}

criterion_group!(benches, per_call);
criterion_main!(benches);
