//! What a shared context store costs a call: the round trip of an MCP
//! 2026-07-28 call's context, loaded before the call and one changed field
//! saved after it, in process and in a real Redis server on loopback
//! (started here from `redis-server` on PATH).
//!
//! - `contexts/memory`: load + save in the in-process store.
//! - `contexts/redis`: the same in Redis (two scripts, two round trips).
//! - `contexts/redis_ping`: one `PING`, the floor of a round trip.
//!
//! The store's cost per call is `redis` − `memory` at p50, printed as a
//! `RESULT` line beside the p50 of one `PING` (the machine's round trip to
//! the server, measured the same way). Run with
//! `cargo bench -p airlock-host --bench contexts`.

use airlock_host::config::ContextStoreUrl;
use airlock_host::context_store::{ContextStore, Contexts, Memory, Redis};
use airlock_host::{Airlock, Config};
use airlock_host::{ContextChange, Descriptor, SafetyFlags};
use criterion::{Criterion, criterion_group, criterion_main};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One call's context round trip: load `id`, change one field, save.
async fn round_trip(airlock: &Airlock, contexts: &Contexts, id: &str, n: u64) {
    let mut cx = airlock.context();
    let loaded = contexts.load(Some(id), &mut cx).await.expect("loaded");
    let d = Descriptor::new("t", "t");
    let call = airlock.grants().for_tool("t").expect("grants").for_call(
        &d,
        SafetyFlags::empty(),
        &BTreeMap::new(),
    );
    let change = ContextChange::SetEnv {
        name: "N".into(),
        value: n.to_string(),
    };
    assert!(cx.apply("t", &[change], &call, true).is_empty());
    contexts.save(loaded, &cx).await.expect("saved");
}

/// A context with a few fields, as after a read or two.
async fn created(airlock: &Airlock, contexts: &Contexts) -> String {
    let mut cx = airlock.context();
    let loaded = contexts.load(None, &mut cx).await.expect("fresh");
    let d = Descriptor::new("t", "t");
    let call = airlock.grants().for_tool("t").expect("grants").for_call(
        &d,
        SafetyFlags::empty(),
        &BTreeMap::new(),
    );
    let changes: Vec<ContextChange> = (0..4)
        .map(|i| ContextChange::SetEnv {
            name: format!("V{i}"),
            value: "x".repeat(40),
        })
        .collect();
    assert!(cx.apply("t", &changes, &call, true).is_empty());
    contexts
        .save(loaded, &cx)
        .await
        .expect("saved")
        .expect("created")
}

fn contexts(c: &mut Criterion) {
    // One thread that drives its own I/O, as a server's worker does when it
    // awaits the store: with a worker pool, each reply would also cost a
    // wake-up of the thread blocked in `block_on` by the thread that got
    // it, which no server call pays.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let data = tempfile::tempdir().expect("a temp dir");
    let Ok(mut server) = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--dir"])
        .arg(data.path())
        .stdout(Stdio::null())
        .spawn()
    else {
        eprintln!("contexts: redis-server is not on PATH (apt-get install redis-server); skipped");
        return;
    };
    let url = ContextStoreUrl::try_from(format!("redis://127.0.0.1:{port}")).expect("a URL");
    let redis = Arc::new(Redis::new(url.clone()));
    let started = Instant::now();
    while runtime.block_on(redis.ping()).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "redis-server never answered"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let airlock = runtime
        .block_on(Airlock::new(Config {
            bundled_tools: false,
            ..Config::default()
        }))
        .expect("a host");
    let ttl = Duration::from_secs(3600);
    let stores: [(&str, Arc<dyn ContextStore>); 2] = [
        ("memory", Arc::new(Memory::default())),
        ("redis", redis.clone()),
    ];
    let mut medians = Vec::new();
    let mut group = c.benchmark_group("contexts");
    for (name, store) in stores {
        let contexts = Contexts::new(store, ttl, name);
        let id = runtime.block_on(created(&airlock, &contexts));
        let mut n = 0;
        group.bench_function(name, |b| {
            b.iter(|| {
                n += 1;
                runtime.block_on(round_trip(&airlock, &contexts, &id, n));
            });
        });
        // A median of its own, for the RESULT line (criterion keeps its
        // estimates to itself).
        let mut samples: Vec<Duration> = (0..2000)
            .map(|i| {
                let t = Instant::now();
                runtime.block_on(round_trip(&airlock, &contexts, &id, i));
                t.elapsed()
            })
            .collect();
        samples.sort();
        medians.push(samples[samples.len() / 2]);
    }
    group.bench_function("redis_ping", |b| {
        b.iter(|| runtime.block_on(redis.ping()).expect("PONG"));
    });
    group.finish();
    // The floor, measured the same way: one round trip to the same server.
    let mut pings: Vec<Duration> = (0..2000)
        .map(|_| {
            let t = Instant::now();
            runtime.block_on(redis.ping()).expect("PONG");
            t.elapsed()
        })
        .collect();
    pings.sort();
    let ping = pings[pings.len() / 2].as_secs_f64() * 1e6;
    let added = (medians[1].as_secs_f64() - medians[0].as_secs_f64()) * 1e6;
    println!(
        "RESULT contexts: the Redis store adds {added:.1} µs per call at p50 (in process {:.1} µs, \
         Redis {:.1} µs); one PING at p50 {ping:.1} µs, so {:.2} round trips",
        medians[0].as_secs_f64() * 1e6,
        medians[1].as_secs_f64() * 1e6,
        added / ping,
    );
    let _ = server.kill();
    let _ = server.wait();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3));
    targets = contexts
}
criterion_main!(benches);
