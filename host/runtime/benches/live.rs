//! Figures criterion cannot take: tail latency and memory.
//!
//! - **Cancellation latency**: the bundled `grep` searches a generated
//!   64 MB workspace (CPU-bound: a case-insensitive regex over every
//!   line); the call is cancelled 5 to 35 ms after it starts, and the time
//!   from `cancel()` to its result is taken, 200 times. Reported as p50
//!   and p99; samples where grep finished first are dropped and counted.
//! - **Live calls**: 1,000 `sleep` calls of 5 s at once, each in a store of
//!   its own; once every one has reported progress (all are running), the
//!   process's resident memory is read from `/proc/self/status`, against
//!   the same process with the tools loaded and no call running.
//!
//! - **Fairness**: one agent context keeps 2,000 `sleep` calls of 50 ms in
//!   flight (twice the pool's 1,000 slots, so about a thousand wait for
//!   one at any time); another context makes 200 `sleep {"ms": 0}` calls
//!   one after another meanwhile. Their latency (p50, p99) against the same
//!   calls with no flood.
//! - **Held slots**: one agent context starts 1,000 `sleep` calls of 20 s
//!   (as many as the pool has slots, none ending while the canaries run);
//!   another context's 200 `sleep {"ms": 0}` calls meanwhile, as above.
//!   The first context holds three quarters of the pool at most, so the
//!   canaries find a slot free rather than wait for a sleep to end.
//! - **Spinning**: one agent context keeps 200 `bash` calls spinning
//!   (`while true; do :; done`: CPU-bound in wasm until cancelled);
//!   another context's 200 `sleep {"ms": 0}` calls meanwhile, as above.
//!   A spinner yields to the runtime at every epoch tick, so the canaries
//!   wait behind the spinners' slices, not for the spinners to end.
//!
//! - **Cold load**: 300 distinct components (the bundled `sleep`, each with
//!   a custom section of its own, so each is compiled) loaded from a tool
//!   directory with an empty artifact cache: the time, and the process's
//!   peak resident memory against its memory before the load. Run it alone
//!   (`-- cold_load`), so the peak is the load's.
//!
//! Prints one `RESULT {json}` line per figure (what `just bench` reads).
//! Run with `cargo bench -p airlock-host --bench live`.

mod support;

#[path = "support/live_calls.rs"]
mod live_calls;

use airlock_host::PermissionMode;
use airlock_host::tool::ProgressSink;
use airlock_host::{Airlock, CallControl, Config, ErrorClass, ToolUse};
use serde_json::json;
use std::collections::HashSet;
use std::io::Write;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const SAMPLES: usize = 200;
const LIVE_CALLS: usize = 1000;

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects a figure.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    if wanted("cold_load") {
        runtime.block_on(cold_load());
    }
    if wanted("cancel_latency") {
        runtime.block_on(cancel_latency());
    }
    if wanted("live_calls_rss") {
        runtime.block_on(live_calls_rss());
    }
    if wanted("fairness") {
        runtime.block_on(fairness());
    }
    if wanted("held_slots") {
        runtime.block_on(held_slots());
    }
    if wanted("spinning") {
        runtime.block_on(spinning());
    }
}

const COLD_COMPONENTS: usize = 300;

async fn cold_load() {
    let sleep = airlock_host::bundled::BUNDLED
        .iter()
        .find(|(name, _)| *name == "airlock-tool-sleep")
        .map(|(_, bytes)| bytes.to_vec())
        .expect("sleep is bundled");
    let tools = tempfile::tempdir().expect("a temp dir");
    let cache = tempfile::tempdir().expect("a temp dir");
    for i in 0..COLD_COMPONENTS {
        // A custom section makes each one other bytes, so each is compiled;
        // they all describe themselves as `sleep`, so all but one are
        // refused after loading (which is what is measured).
        let tag = format!("cold-{i}");
        let mut section = vec![4u8];
        section.extend_from_slice(b"cold");
        section.extend_from_slice(tag.as_bytes());
        let mut bytes = sleep.clone();
        bytes.push(0);
        bytes.push(section.len() as u8);
        bytes.extend_from_slice(&section);
        std::fs::write(tools.path().join(format!("t{i}.wasm")), bytes).expect("write");
    }
    let mut config = host_config(tools.path());
    config.workspace = None;
    config.bundled_tools = false;
    config.tool_dirs = Some(vec![tools.path().to_path_buf()]);
    config.cache_dir = Some(cache.path().join("artifacts"));
    let (before, _) = rss_mib();
    let started = Instant::now();
    let airlock = Airlock::new(config).await.expect("the host starts");
    let took = started.elapsed();
    let (_, peak) = rss_mib();
    assert!(airlock.registry().get("sleep").is_some());
    report(json!({
        "figure": "cold_load",
        "components": COLD_COMPONENTS,
        "seconds": took.as_secs_f64(),
        "rss_before_mib": before,
        "peak_rss_mib": peak,
    }));
}

const FLOOD: usize = 2000;
const CANARIES: usize = 200;

/// The latencies (ms, sorted) of `CANARIES` `sleep 0` calls in a context
/// of their own, one after another, in a task on the runtime's workers as
/// a front end's calls are (on `block_on`'s own thread, which no flood
/// competes for, they never waited behind a spinning flood).
async fn canaries(airlock: &Airlock) -> Vec<f64> {
    let airlock = airlock.clone();
    tokio::spawn(async move {
        let mut cx = airlock.context();
        let mut latencies = Vec::with_capacity(CANARIES);
        for i in 0..CANARIES {
            let started = Instant::now();
            let r = airlock
                .call(
                    &mut cx,
                    ToolUse::new(format!("canary{i}"), "sleep", json!({"ms": 0})),
                )
                .await;
            assert!(!r.is_error(), "{}", r.text());
            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        latencies.sort_by(f64::total_cmp);
        latencies
    })
    .await
    .expect("the canaries' task")
}

/// A host on the bundled tools in a fresh workspace (kept while the
/// host is), and its canaries' latencies with nothing else running.
async fn quiet_host() -> (Airlock, tempfile::TempDir, Vec<f64>) {
    let workspace = tempfile::tempdir().expect("a temp dir");
    let airlock = Airlock::new(host_config(workspace.path()))
        .await
        .expect("the bundled tools load");
    let quiet = canaries(&airlock).await;
    (airlock, workspace, quiet)
}

/// Reports `figure`: the canaries' p50 and p99 during a flood and without
/// one, beside `about` (the flood's own figures).
fn report_canaries(figure: &str, flooded: &[f64], quiet: &[f64], about: serde_json::Value) {
    let mut value = json!({
        "figure": figure,
        "canaries": CANARIES,
        "p50_ms": percentile(flooded, 50.0),
        "p99_ms": percentile(flooded, 99.0),
        "quiet_p50_ms": percentile(quiet, 50.0),
        "quiet_p99_ms": percentile(quiet, 99.0),
    });
    if let (Some(value), serde_json::Value::Object(about)) = (value.as_object_mut(), about) {
        value.extend(about);
    }
    report(value);
}

async fn fairness() {
    let (airlock, _workspace, quiet) = quiet_host().await;

    let stop = CancellationToken::new();
    let flood_cx = airlock.context();
    let (progress, mut events) = ProgressSink::channel(4 * FLOOD);
    let mut flood = tokio::task::JoinSet::new();
    for i in 0..FLOOD {
        let (airlock, stop, progress) = (airlock.clone(), stop.clone(), progress.clone());
        let mut cx = flood_cx.clone();
        flood.spawn(async move {
            let mut calls = 0usize;
            while !stop.is_cancelled() {
                let control = CallControl {
                    progress: progress.clone(),
                    cancel: CancellationToken::new(),
                };
                let use_ = ToolUse::new(format!("flood{i}"), "sleep", json!({"ms": 50}));
                airlock.call_with(&mut cx, use_, control).await;
                calls += 1;
            }
            calls
        });
    }
    // The flood holds the pool once a thousand of its calls are running.
    let mut running = HashSet::new();
    while running.len() < 1000 {
        let event = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .expect("the flood starts within a minute")
            .expect("the progress channel stays open");
        running.insert(event.tool_use_id);
    }
    let flooded = canaries(&airlock).await;
    stop.cancel();
    let flood_calls: usize = flood.join_all().await.into_iter().sum();
    report_canaries(
        "fairness",
        &flooded,
        &quiet,
        json!({"flood_in_flight": FLOOD, "flood_calls": flood_calls}),
    );
}

const HELD: usize = 1000;

async fn held_slots() {
    let (airlock, _workspace, quiet) = quiet_host().await;
    let stop = CancellationToken::new();
    let flood_cx = airlock.context();
    let (progress, mut events) = ProgressSink::channel(4 * HELD);
    let mut flood = tokio::task::JoinSet::new();
    for i in 0..HELD {
        let (airlock, progress) = (airlock.clone(), progress.clone());
        let mut cx = flood_cx.clone();
        let control = CallControl {
            progress,
            cancel: stop.clone(),
        };
        flood.spawn(async move {
            let use_ = ToolUse::new(format!("held{i}"), "sleep", json!({"ms": 20_000}));
            airlock.call_with(&mut cx, use_, control).await
        });
    }
    // The flood holds every slot it may: its calls stop starting.
    let mut running = HashSet::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(2), events.recv()).await {
            Ok(Some(event)) => {
                running.insert(event.tool_use_id);
            }
            Ok(None) => panic!("the progress channel stays open"),
            Err(_) if !running.is_empty() => break,
            Err(_) => panic!("the flood started no call"),
        }
    }
    let started = Instant::now();
    let flooded = canaries(&airlock).await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(20),
        "the canaries outlasted the flood"
    );
    stop.cancel();
    flood.join_all().await;
    report_canaries(
        "held_slots",
        &flooded,
        &quiet,
        json!({"flood_calls": HELD, "flood_running": running.len()}),
    );
}

const SPINNERS: usize = 200;

async fn spinning() {
    let (airlock, _workspace, quiet) = quiet_host().await;
    let stop = CancellationToken::new();
    let flood_cx = airlock.context();
    let mut flood = tokio::task::JoinSet::new();
    for i in 0..SPINNERS {
        let airlock = airlock.clone();
        let mut cx = flood_cx.clone();
        let control = CallControl {
            progress: ProgressSink::none(),
            cancel: stop.clone(),
        };
        flood.spawn(async move {
            let input = json!({"command": "while true; do :; done"});
            let use_ = ToolUse::new(format!("spin{i}"), "bash", input);
            airlock.call_with(&mut cx, use_, control).await
        });
    }
    // Every spinner has started (each has had its first tick).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let flooded = canaries(&airlock).await;
    stop.cancel();
    let ended = flood.join_all().await;
    let cancelled = ended
        .iter()
        .filter(|r| matches!(&r.outcome, Err(e) if e.class == ErrorClass::Cancelled))
        .count();
    report_canaries(
        "spinning",
        &flooded,
        &quiet,
        json!({"spinners": SPINNERS, "spinners_cancelled": cancelled}),
    );
}

fn host_config(workspace: &std::path::Path) -> Config {
    let mut config = Config {
        workspace: Some(workspace.to_path_buf()),
        tool_dirs: Some(Vec::new()),
        ..Config::default()
    };
    config.permissions.default_mode = PermissionMode::BypassPermissions;
    config
}

fn report(value: serde_json::Value) {
    println!("RESULT {value}");
    std::io::stdout().flush().ok();
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

async fn cancel_latency() {
    let workspace = tempfile::tempdir().expect("a temp dir");
    support::corpus(workspace.path(), 32, 2 << 20);
    let airlock = Airlock::new(host_config(workspace.path()))
        .await
        .expect("the bundled tools load");
    let input = json!({
        "pattern": "(?i)\\b\\w+ing\\s+\\w+ed\\b",
        "output_mode": "count",
        "head_limit": 0,
    });
    // Warm up, and check the search takes long enough to be cancelled.
    let mut cx = airlock.context();
    let started = Instant::now();
    let full = airlock
        .call(&mut cx, ToolUse::new("warm", "grep", input.clone()))
        .await;
    assert!(!full.is_error(), "{}", full.text());
    let whole = started.elapsed();

    let mut latencies = Vec::with_capacity(SAMPLES);
    let mut finished_first = 0;
    let mut rng: u64 = 7;
    while latencies.len() < SAMPLES {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let delay = Duration::from_millis(5 + (rng >> 33) % 31);
        let cancel = CancellationToken::new();
        let control = CallControl {
            progress: ProgressSink::none(),
            cancel: cancel.clone(),
        };
        let call = {
            let airlock = airlock.clone();
            let mut cx = airlock.context();
            let input = input.clone();
            tokio::spawn(async move {
                let result = airlock
                    .call_with(&mut cx, ToolUse::new("c", "grep", input), control)
                    .await;
                (result, Instant::now())
            })
        };
        tokio::time::sleep(delay).await;
        let cancelled_at = Instant::now();
        cancel.cancel();
        let (result, done_at) = call.await.expect("the call task");
        match result.outcome.as_ref().err() {
            Some(e) if e.class == ErrorClass::Cancelled => {
                let latency = done_at.saturating_duration_since(cancelled_at);
                latencies.push(latency.as_secs_f64() * 1000.0);
            }
            Some(e) => panic!("the call failed otherwise: {e:?}"),
            None => finished_first += 1,
        }
    }
    latencies.sort_by(f64::total_cmp);
    report(json!({
        "figure": "cancel_latency",
        "samples": latencies.len(),
        "finished_before_cancel": finished_first,
        "p50_ms": percentile(&latencies, 50.0),
        "p99_ms": percentile(&latencies, 99.0),
        "max_ms": latencies[latencies.len() - 1],
        "uncancelled_search_ms": whole.as_secs_f64() * 1000.0,
    }));
}

/// Resident and peak resident memory of this process, in MiB.
fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kib| kib / 1024.0)
            .expect("a memory field")
    };
    (field("VmRSS:"), field("VmHWM:"))
}

async fn live_calls_rss() {
    let workspace = tempfile::tempdir().expect("a temp dir");
    let airlock = Airlock::new(host_config(workspace.path()))
        .await
        .expect("the bundled tools load");
    // Load `sleep` and touch the runtime before the baseline.
    let mut cx = airlock.context();
    let warm = airlock
        .call(&mut cx, ToolUse::new("warm", "sleep", json!({"ms": 0})))
        .await;
    assert!(!warm.is_error(), "{}", warm.text());
    let (idle, _) = rss_mib();

    let (all_running, (live, _)) =
        live_calls::while_live(&airlock, LIVE_CALLS, "sleep", &json!({"ms": 5000}), rss_mib).await;
    let (_, peak) = rss_mib();
    report(json!({
        "figure": "live_calls_rss",
        "calls": LIVE_CALLS,
        "idle_rss_mib": idle,
        "live_rss_mib": live,
        "peak_rss_mib": peak,
        "per_call_kib": (live - idle) * 1024.0 / LIVE_CALLS as f64,
        "all_running_after_ms": all_running.as_secs_f64() * 1000.0,
    }));
}
