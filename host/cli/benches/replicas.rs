//! Replicas behind a load balancer: MCP 2026-07-28 `read` calls through
//! nginx (round-robin, kept-alive connections to the replicas) to 1, 2 and
//! 3 `airlock mcp --http` replicas sharing a Redis context store, and to
//! one replica with the in-process store; each call names its context, so
//! each loads it from the store (a `read` of an unchanged file saves
//! nothing new).
//!
//! - `replicas/read_direct_memory`: one call at a time straight to one
//!   replica (the baseline without nginx).
//! - `replicas/read_nginx_memory_1`, `replicas/read_nginx_redis_{1,2,3}`:
//!   one call at a time through nginx.
//!
//! Then, for each, 8 clients on kept-alive connections make 300 calls
//! each, and a `RESULT` line gives calls/s and p50/p99. Everything runs on
//! this machine's cores: the clients, nginx, Redis and the replicas share
//! them, so calls/s is a ceiling of the machine, not of Airlock.
//!
//! Needs `redis-server` and `nginx` (on PATH or unpacked from Debian's
//! packages, as the tests do). Run with `cargo bench -p airlock-cli --bench
//! replicas`.

#[path = "../../../tests/support/debian.rs"]
mod debian;

#[path = "../../../tests/support/balance.rs"]
#[allow(dead_code, reason = "shared with the tests, which use all of it")]
mod balance;

#[path = "../../../tests/support/modern.rs"]
#[allow(dead_code, reason = "shared with the tests, which use all of it")]
mod modern;

#[path = "../../../tests/support/replicas.rs"]
#[allow(dead_code, reason = "shared with the tests, which use all of it")]
mod replicas;

use balance::{Nginx, Redis};
use criterion::{Criterion, criterion_group, criterion_main};
use modern::{Connection, Cx, call, context_of};
use replicas::{Replica, setup};
use serde_json::json;
use std::time::{Duration, Instant};

/// Clients at once, and calls each, for the calls/s figure.
const CLIENTS: usize = 8;
const CALLS: usize = 300;

/// One `read` of `file` in `context` on `connection`, checked.
fn read(connection: &mut Connection, file: &str, context: &str, id: u64) {
    let reply = connection.post(&call(
        id,
        "read",
        json!({"file_path": file}),
        Cx::Id(context),
    ));
    assert_eq!(reply.status, 200, "{}", reply.message);
    assert_eq!(
        reply.message["result"]["isError"], false,
        "{}",
        reply.message
    );
}

/// Calls/s, p50 and p99 of `CLIENTS` clients making `CALLS` reads each.
fn load(addr: &str, file: &str, context: &str) -> (f64, Duration, Duration) {
    let started = Instant::now();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (addr, file, context) = (addr.to_owned(), file.to_owned(), context.to_owned());
            std::thread::spawn(move || {
                let mut connection = Connection::open(&addr);
                (0..CALLS)
                    .map(|i| {
                        let t = Instant::now();
                        read(
                            &mut connection,
                            &file,
                            &context,
                            (client * CALLS + i) as u64,
                        );
                        t.elapsed()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut latencies: Vec<Duration> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("a client"))
        .collect();
    let wall = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    (
        latencies.len() as f64 / wall.as_secs_f64(),
        at(0.5),
        at(0.99),
    )
}

fn bench(c: &mut Criterion) {
    let redis = Redis::start();
    let mut group = c.benchmark_group("replicas");
    group.measurement_time(Duration::from_secs(4));
    let mut results = Vec::new();
    let setups: [(&str, usize, bool); 5] = [
        ("read_direct_memory", 1, false),
        ("read_nginx_memory_1", 1, false),
        ("read_nginx_redis_1", 1, true),
        ("read_nginx_redis_2", 2, true),
        ("read_nginx_redis_3", 3, true),
    ];
    for (name, count, shared) in setups {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = if shared { redis.url() } else { "memory".into() };
        let (ws, config) = setup(dir.path(), &store);
        let replicas: Vec<Replica> = (0..count)
            .map(|_| Replica::start(dir.path(), &config))
            .collect();
        let nginx = Nginx::start(&replicas.iter().map(|r| r.port).collect::<Vec<_>>());
        let addr = if name.contains("direct") {
            format!("127.0.0.1:{}", replicas[0].port)
        } else {
            format!("127.0.0.1:{}", nginx.port)
        };
        let file = ws.join("a.txt").display().to_string();
        let mut connection = Connection::open(&addr);
        let first = connection.post(&call(0, "read", json!({"file_path": file}), Cx::New));
        let context = context_of(&first.message).expect("a context id");
        let mut id = 1;
        group.bench_function(name, |b| {
            b.iter(|| {
                id += 1;
                read(&mut connection, &file, &context, id);
            });
        });
        results.push((name, load(&addr, &file, &context)));
        drop(nginx);
    }
    group.finish();
    for (name, (rate, p50, p99)) in results {
        println!(
            "RESULT replicas/{name}: {CLIENTS} clients: {rate:.0} calls/s, p50 {:.2} ms, p99 {:.2} ms",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
