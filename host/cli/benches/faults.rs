//! Faults under load, measured for deploy/README.md's fault table: three
//! `airlock mcp --http` replicas behind nginx (round-robin), sharing a
//! Redis kept as `deploy/k8s/redis.yaml` keeps it (an append-only file
//! fsynced every second, `noeviction`), and 4 clients, each in a context
//! of its own, making sequential edits of a file of its own over MCP
//! 2026-07-28: `read` it, then `edit` `count=K` into `count=K+1`.
//!
//! Each fault is injected under that load, and a row says what the
//! clients saw from the fault's start until a second after they were
//! served again: calls made and failed (with what the failures said),
//! edits acknowledged and then not in the file (lost; must be 0), edits
//! applied whose reply never came (a client cannot tell these from edits
//! that never ran), and how long after the fault was over a call was
//! first served. A client whose context is lost starts a new one, as an
//! agent would.
//!
//! Needs `redis-server` and `nginx` (on PATH or unpacked from Debian's
//! packages, as the tests do). Run with `cargo bench -p airlock-cli --bench
//! faults`; it prints the table.

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
use modern::{Connection, Cx, call, context_of, text};
use replicas::{Replica, setup};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CLIENTS: usize = 4;
const REPLICAS: usize = 3;

/// What became of one call.
#[derive(Clone)]
struct Outcome {
    at: Instant,
    /// `None`: it succeeded; else what the failure said.
    failed: Option<String>,
}

/// What the clients recorded, shared with the driver.
#[derive(Default)]
struct Record {
    calls: Vec<Outcome>,
    /// Edits acknowledged, then not found in the file.
    lost: usize,
    /// Edits whose reply never came (an HTTP error, a cut connection) but
    /// that the next read found applied.
    applied_unanswered: usize,
}

/// The count in `read`'s result text (`count=K`).
fn count_in(reply: &Value) -> Option<u64> {
    let text = text(reply);
    let at = text.find("count=")? + "count=".len();
    text[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// One call: the reply, or what went wrong on the way (a connection the
/// balancer cut panics the client's reader, which is caught here).
fn post(connection: &mut Connection, addr: &str, message: &Value) -> Result<Value, String> {
    let reply = std::panic::catch_unwind(AssertUnwindSafe(|| connection.post(message)));
    match reply {
        Ok(reply) if reply.status == 200 && reply.message["result"]["isError"] == false => {
            Ok(reply.message)
        }
        Ok(reply) if reply.status == 200 => Err(reply.message["error"]["message"]
            .as_str()
            .map_or_else(|| text(&reply.message), str::to_owned)),
        Ok(reply) => Err(format!("HTTP {}", reply.status)),
        Err(_) => {
            *connection = Connection::open(addr);
            Err("the connection was cut".into())
        }
    }
}

/// A client: reads its file and edits it, over and over, until `stop`.
fn client(addr: String, file: String, stop: Arc<AtomicBool>, record: Arc<Mutex<Record>>) {
    let mut connection = Connection::open(&addr);
    let mut context: Option<String> = None;
    // The highest count an acknowledged edit wrote, and an edit whose
    // outcome is unknown (the count it would have written).
    let (mut acked, mut unknown): (u64, Option<u64>) = (0, None);
    let mut id = 0;
    let note = |failed: Option<String>| {
        record.lock().unwrap().calls.push(Outcome {
            at: Instant::now(),
            failed,
        });
    };
    while !stop.load(Ordering::Relaxed) {
        id += 1;
        let cx = context.as_deref().map_or(Cx::New, Cx::Id);
        let read = post(
            &mut connection,
            &addr,
            &call(id, "read", json!({"file_path": file}), cx),
        );
        let now = match read {
            Ok(reply) => {
                note(None);
                if let Some(id) = context_of(&reply) {
                    context = Some(id);
                }
                count_in(&reply).expect("the file says its count")
            }
            Err(said) => {
                if said.contains("lost") || said.contains("there is no context") {
                    context = None;
                }
                note(Some(said));
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        {
            let mut record = record.lock().unwrap();
            if now < acked {
                record.lost += (acked - now) as usize;
                acked = now;
            }
            if unknown.take() == Some(now) {
                record.applied_unanswered += 1;
                acked = now;
            }
        }
        id += 1;
        let cx = context.as_deref().map_or(Cx::New, Cx::Id);
        let edit = json!({"file_path": file, "old_string": format!("count={now}"),
            "new_string": format!("count={}", now + 1)});
        match post(&mut connection, &addr, &call(id, "edit", edit, cx)) {
            Ok(_) => {
                note(None);
                acked = now + 1;
            }
            Err(said) => {
                if said.starts_with("HTTP") || said.contains("cut") {
                    unknown = Some(now + 1);
                }
                if said.contains("lost") || said.contains("there is no context") {
                    context = None;
                }
                note(Some(said));
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Sends Redis one command (no password here) and returns its reply line.
fn redis_command(port: u16, args: &[&str]) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("redis");
    let mut command = format!("*{}\r\n", args.len());
    for arg in args {
        command.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream.write_all(command.as_bytes()).expect("send");
    let mut reply = [0u8; 256];
    let n = stream.read(&mut reply).unwrap_or(0);
    String::from_utf8_lossy(&reply[..n]).trim().to_string()
}

/// What a fault did to the clients: the row of the table.
fn row(fault: &str, record: &Mutex<Record>, from: Instant, over: Instant) -> String {
    let record = record.lock().unwrap();
    let window: Vec<&Outcome> = record.calls.iter().filter(|o| o.at >= from).collect();
    let failed: Vec<&String> = window.iter().filter_map(|o| o.failed.as_ref()).collect();
    let mut said: BTreeMap<String, usize> = BTreeMap::new();
    for message in &failed {
        let short: String = message.chars().take(90).collect();
        *said.entry(short).or_default() += 1;
    }
    let said: Vec<String> = said
        .into_iter()
        .map(|(message, n)| format!("{n}× \"{message}\""))
        .collect();
    let served_again = window
        .iter()
        .filter(|o| o.at >= over && o.failed.is_none())
        .map(|o| o.at)
        .min()
        .map_or("never".into(), |at| {
            format!("{:.2} s", at.duration_since(over).as_secs_f64())
        });
    format!(
        "| {fault} | {} | {} | {} | {} | {served_again} | {} |",
        window.len(),
        failed.len(),
        record.lost,
        record.applied_unanswered,
        if said.is_empty() {
            "—".into()
        } else {
            said.join("; ")
        }
    )
}

/// Waits until every client has had a call succeed after `since`.
fn served_again(record: &Mutex<Record>, since: Instant) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ok = record
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|o| o.at >= since && o.failed.is_none())
            .count();
        if ok >= CLIENTS * 2 || Instant::now() > deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn main() {
    let mut redis = Redis::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--maxmemory-policy",
        "noeviction",
    ]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let (ws, config) = setup(dir.path(), &redis.url());
    let mut replicas: Vec<Replica> = (0..REPLICAS)
        .map(|_| Replica::start(dir.path(), &config))
        .collect();
    let nginx = Nginx::start(&replicas.iter().map(|r| r.port).collect::<Vec<_>>());
    let addr = format!("127.0.0.1:{}", nginx.port);

    let stop = Arc::new(AtomicBool::new(false));
    let record = Arc::new(Mutex::new(Record::default()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let file = ws.join(format!("client{n}.txt"));
            std::fs::write(&file, "count=0\n").expect("a client's file");
            let (addr, file) = (addr.clone(), file.display().to_string());
            let (stop, record) = (stop.clone(), record.clone());
            std::thread::spawn(move || client(addr, file, stop, record))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));

    println!(
        "| Fault | Calls | Failed | Acknowledged edits lost | Edits applied, unanswered | \
         Served again after | What the failures said |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut fault = |name: &str, inject: &mut dyn FnMut(&mut Redis, &mut Vec<Replica>)| {
        let from = Instant::now();
        inject(&mut redis, &mut replicas);
        let over = Instant::now();
        served_again(&record, over);
        std::thread::sleep(Duration::from_secs(1));
        println!("{}", row(name, &record, from, over));
        let mut record = record.lock().unwrap();
        record.lost = 0;
        record.applied_unanswered = 0;
    };
    fault("none (2 s of load)", &mut |_, _| {
        std::thread::sleep(Duration::from_secs(2))
    });
    fault(
        "Redis killed and restarted, its file kept",
        &mut |redis, _| redis.restart(),
    );
    fault("Redis down for 3 s", &mut |redis, _| {
        redis.stop();
        std::thread::sleep(Duration::from_secs(3));
        redis.restart();
    });
    fault(
        "Redis full for 2 s (maxmemory below its use)",
        &mut |redis, _| {
            redis_command(redis.port, &["CONFIG", "SET", "maxmemory", "1"]);
            std::thread::sleep(Duration::from_secs(2));
            redis_command(redis.port, &["CONFIG", "SET", "maxmemory", "0"]);
        },
    );
    fault("Redis loses its data (FLUSHALL)", &mut |redis, _| {
        redis_command(redis.port, &["FLUSHALL"]);
    });
    let home: &Path = dir.path();
    fault(
        "A replica stopped (SIGTERM: drained), then started again",
        &mut |_, replicas| {
            let port = replicas[0].port;
            replicas[0].terminate();
            replicas[0].exited(Duration::from_secs(30));
            replicas[0] = Replica::start_on(home, &config, port);
        },
    );
    fault(
        "A replica killed (SIGKILL), then started again",
        &mut |_, replicas| {
            let port = replicas[1].port;
            replicas[1].kill();
            replicas[1] = Replica::start_on(home, &config, port);
        },
    );
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().expect("a client");
    }
    drop(nginx);
}
