//! The streaming executor's schedule, against the ideal one.
//!
//! - `parallel/one_sleep_50ms` and `parallel/sixteen_sleeps_50ms`: sixteen
//!   concurrency-safe calls should take about as long as one.
//! - `mixed/*`: a batch of concurrency-safe calls split by an exclusive
//!   `write` (`sleep 50, sleep 50, read | write | sleep 50, grep, sleep 50`)
//!   against the ideal schedule, computed from the same calls run alone in
//!   the same run: two 50 ms sleeps plus one write.
//! - `many/sleep_0_x1000` and `many/sleep_0_x10000`: a batch of 1,000 and of
//!   10,000 `sleep 0` calls. The second should take ten times the first:
//!   what a use costs the scheduler must not grow with the uses before it.
//!
//! Every iteration adds the whole batch to a fresh executor at once and
//! waits for the last result. Run with
//! `cargo bench -p airlock-host --bench scheduler`.

use airlock_host::PermissionMode;
use airlock_host::{Airlock, Config, ToolUse};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A tool use: the tool's name and its input.
type Use = (&'static str, Value);

fn sleep(ms: u64) -> Use {
    ("sleep", json!({ "ms": ms }))
}

/// Runs `batch` through one executor; returns the time to the last result.
/// `fresh` is removed first (untimed), so `write` creates it every time.
async fn run(airlock: &Airlock, batch: &[Use], fresh: &std::path::Path) -> Duration {
    let _ = std::fs::remove_file(fresh);
    let start = Instant::now();
    let executor = airlock.executor(airlock.context());
    for (i, (name, input)) in batch.iter().enumerate() {
        executor.add(ToolUse::new(format!("toolu_{i}"), *name, input.clone()));
    }
    let (results, _) = executor.finish().await;
    let elapsed = start.elapsed();
    for r in &results {
        assert!(!r.is_error(), "{}", r.text());
    }
    elapsed
}

fn schedules(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let workspace = tempfile::tempdir().expect("a temp dir");
    std::fs::write(workspace.path().join("notes.md"), "# Notes\nscheduler\n").unwrap();
    let mut config = Config {
        workspace: Some(workspace.path().to_path_buf()),
        tool_dirs: Some(Vec::new()),
        ..Config::default()
    };
    config.permissions.default_mode = PermissionMode::AcceptEdits;
    let airlock = runtime
        .block_on(Airlock::new(config))
        .expect("the bundled tools load");
    let notes = workspace.path().join("notes.md");
    let out = workspace.path().join("out.txt");
    let read = ("read", json!({ "file_path": notes }));
    let write = (
        "write",
        json!({ "file_path": out, "content": "written by the scheduler bench\n" }),
    );
    let grep = ("grep", json!({ "pattern": "scheduler" }));

    let sixteen: Vec<_> = (0..16).map(|_| sleep(50)).collect();
    let mixed = vec![
        sleep(50),
        sleep(50),
        read.clone(),
        write.clone(),
        sleep(50),
        grep.clone(),
        sleep(50),
    ];
    let cases: [(&str, &str, Vec<Use>); 7] = [
        ("parallel", "one_sleep_50ms", vec![sleep(50)]),
        ("parallel", "sixteen_sleeps_50ms", sixteen),
        ("mixed", "sleep_50ms_alone", vec![sleep(50)]),
        ("mixed", "write_alone", vec![write]),
        ("mixed", "batch", mixed),
        ("many", "sleep_0_x1000", vec![sleep(0); 1_000]),
        ("many", "sleep_0_x10000", vec![sleep(0); 10_000]),
    ];
    for (group_name, name, batch) in &cases {
        let mut group = c.benchmark_group(*group_name);
        group.sample_size(if *group_name == "many" { 10 } else { 30 });
        group.measurement_time(Duration::from_secs(8));
        group.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += run(&airlock, batch, &out).await;
                    }
                    total
                })
            })
        });
        group.finish();
    }
}

criterion_group!(benches, schedules);
criterion_main!(benches);
