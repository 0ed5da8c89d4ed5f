//! `airlock mcp` over stdio, driven by a minimal raw JSON-RPC client (one
//! line out, one line back; no SDK, whose own overhead would dominate).
//!
//! - `mcp_call/stdio_sleep_0`: one `tools/call` of the bundled `sleep` tool
//!   with `{"ms": 0}` against a running, initialized server: the request is
//!   written, its reply read and checked.
//! - `mcp_call/stdio_sleep_0_pipelined`: 64 such calls written at once,
//!   then their 64 replies read (time per call): what a client that keeps
//!   several calls in flight pays per call.
//! - `mcp_call/stdio_sleep_0_1000_in_flight`: the same with 1,000 calls in
//!   flight, where anything the server does per call for each call in
//!   flight shows.
//! - `mcp_call/stdio_sleep_0_audited`, `..._pipelined_audited`: the two
//!   rows above against a server with `[audit]` on (each call recorded in
//!   a trail file, checkpoints signed), in the same run: what auditing
//!   adds over MCP.
//!   A `RESULT` line gives each one's p50 and p99 of 20,000 calls with 64
//!   kept in flight (a call sent as each reply comes).
//! - `mcp_call/stdio_ping`: one `ping`, the transport and rmcp alone.
//! - `mcp_call/cat_echo`: the same request line through `cat`: the floor
//!   of a round trip through two pipes and two process wake-ups on this
//!   machine, measured in the same run.
//! - `mcp_call/in_process_sleep_0`: the same call through
//!   [`Airlock::call`] in this process, measured in the same run: the
//!   difference is what MCP (transport, JSON-RPC, rmcp, the session
//!   executor) adds.
//! - `mcp_call/in_process_session_executor_sleep_0`: the same call through
//!   a session [`airlock_host::Executor`] in this process, its result read
//!   from the executor's events; `..._submit_sleep_0`: submitted, its
//!   result read from its own channel (what the MCP server does).
//! - `mcp_start/tools_list`: from spawning `airlock mcp` to reading its
//!   `tools/list` reply (initialize, initialized, tools/list), with a warm
//!   artifact cache.
//! - `mcp_start/tools_list_empty_cache`: the same with an empty artifact
//!   cache (a first start): the bundled tools are listed from this build's
//!   record of them while they compile in the background.
//! - `mcp_start/spawn_bin_true`: spawning `/bin/true` and waiting for it.
//! - `mcp_peers/*`: Airlock and its peers side by side through the same
//!   client, each measurement next to Airlock's: one call at a time
//!   (`airlock_sleep_0`, `PEER_echo`), 64 in flight (`..._pipelined`, time
//!   per call), and process start to a `tools/list` reply that lists the
//!   echo tool (`..._tools_list`). The peers, each measured when provided
//!   (otherwise a line says how):
//!   - Wassette: `AIRLOCK_PEER_WASSETTE` names its binary and
//!     `AIRLOCK_PEER_WASSETTE_PLUGINS` a directory holding an echo
//!     component (exporting `echo: func(message: string) -> string`);
//!   - hyper-mcp: `AIRLOCK_PEER_HYPER_MCP` names its binary (`cargo install
//!     hyper-mcp`); its echo plugin is `benches/peers/hyper-mcp-echo.wat`,
//!     assembled here (an Extism plugin needs a core wasm target, which the
//!     pinned toolchain does not have).
//!
//! Run with `cargo bench -p airlock-cli --bench mcp_stdio`.

use airlock_host::{Airlock, Config, ToolUse};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `airlock mcp` and its pipes.
struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    fn spawn(home: &Path, workspace: &Path) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_airlock"));
        command.arg("--workspace").arg(workspace).arg("mcp");
        Server::spawn_command(command, home)
    }

    fn spawn_command(mut command: Command, home: &Path) -> Server {
        let mut child = command
            .env("HOME", home)
            .env("XDG_CACHE_HOME", home.join("cache"))
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("AIRLOCK_CONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("airlock runs");
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Server {
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    /// Writes a request; returns its id.
    fn send(&mut self, method: &str, params: &Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.write_line(&line);
        id
    }

    /// Sends a request and returns its reply's `result`.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, &params);
        self.stdin.flush().expect("the server reads");
        self.reply(id)
    }

    /// The next message the server writes, read into `line`.
    fn message(&mut self, line: &mut String) -> Value {
        line.clear();
        let read = self.stdout.read_line(line).expect("the server writes");
        assert!(read > 0, "the server closed stdout");
        serde_json::from_str(line).expect("one JSON message a line")
    }

    /// Reads until the reply to `id`; returns its `result`.
    fn reply(&mut self, id: u64) -> Value {
        let mut reply = String::new();
        loop {
            let message = self.message(&mut reply);
            if message["id"] == id {
                return message
                    .get("result")
                    .cloned()
                    .unwrap_or_else(|| panic!("an error reply: {reply}"));
            }
        }
    }

    fn notify(&mut self, method: &str) {
        self.write_line(&json!({"jsonrpc": "2.0", "method": method}));
    }

    /// Writes `message` and a newline in one `write`, as a client with a
    /// buffered writer does. (`writeln!` on the raw pipe writes each JSON
    /// token on its own: tens of writes, and as many wake-ups of the
    /// reader, per message. That made the `cat` floor 74 µs instead of
    /// 15.)
    fn write_line(&mut self, message: &Value) {
        let mut bytes = serde_json::to_vec(message).expect("JSON serialises");
        bytes.push(b'\n');
        self.stdin.write_all(&bytes).expect("the server reads");
    }

    /// The handshake, then `tools/list`; returns how many tools it lists.
    fn start(&mut self) -> usize {
        self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-bench", "version": "1"}
            }),
        );
        self.notify("notifications/initialized");
        let listed = self.request("tools/list", json!({}));
        listed["tools"].as_array().map_or(0, Vec::len)
    }

    fn call_sleep_0(&mut self) {
        self.call(&sleep_0(), sleep_ok);
    }

    /// One `tools/call` with `params`; `ok` checks its result.
    fn call(&mut self, params: &Value, ok: fn(&Value) -> bool) {
        let id = self.send("tools/call", params);
        self.stdin.flush().expect("the server reads");
        let result = self.reply(id);
        assert!(ok(&result), "{result}");
    }

    /// `n` calls with `params` in flight at once; the replies may come in
    /// any order.
    fn call_pipelined(&mut self, params: &Value, ok: fn(&Value) -> bool, n: usize) {
        let first = self.next_id;
        for _ in 0..n {
            self.send("tools/call", params);
        }
        self.stdin.flush().expect("the server reads");
        let mut seen = vec![false; n];
        let mut line = String::new();
        for _ in 0..n {
            let message = self.message(&mut line);
            let id = message["id"].as_u64().expect("a reply");
            assert!(ok(&message["result"]), "{line}");
            seen[usize::try_from(id - first).expect("an id of this batch")] = true;
        }
        assert!(seen.iter().all(|&s| s), "every call got its reply");
    }

    /// `total` calls with `params`, `in_flight` kept in flight all along
    /// (one sent as each reply comes), each result checked by `ok`: each
    /// call's latency, sorted.
    fn latencies(
        &mut self,
        params: &Value,
        ok: fn(&Value) -> bool,
        total: usize,
        in_flight: usize,
    ) -> Vec<Duration> {
        let mut sent = std::collections::HashMap::with_capacity(in_flight);
        let mut done = Vec::with_capacity(total);
        let mut line = String::new();
        for _ in 0..in_flight.min(total) {
            sent.insert(self.send("tools/call", params), Instant::now());
        }
        self.stdin.flush().expect("the server reads");
        while done.len() < total {
            let message = self.message(&mut line);
            let id = message["id"].as_u64().expect("a reply");
            assert!(ok(&message["result"]), "{line}");
            done.push(sent.remove(&id).expect("a call in flight").elapsed());
            if done.len() + sent.len() < total {
                sent.insert(self.send("tools/call", params), Instant::now());
                self.stdin.flush().expect("the server reads");
            }
        }
        done.sort();
        done
    }
}

fn sleep_0() -> Value {
    json!({"name": "sleep", "arguments": {"ms": 0}})
}

fn sleep_ok(result: &Value) -> bool {
    result["isError"] == false
}

/// The host loaded in this process over the artifact cache a server
/// started with `home` uses. Loading compiles every bundled tool into that
/// cache, so start it before the servers: a server started on an empty
/// cache answers at once and compiles in the background, and that
/// compilation would be measured with the calls.
fn in_process(home: &Path, workspace: &Path) -> (tokio::runtime::Runtime, Airlock) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let config = Config {
        workspace: Some(workspace.to_path_buf()),
        tool_dirs: Some(Vec::new()),
        cache_dir: Some(home.join("cache/airlock/artifacts")),
        ..Config::default()
    };
    let airlock = runtime
        .block_on(Airlock::new(config))
        .expect("the bundled tools load");
    (runtime, airlock)
}

/// Time per call of `iters` calls made `in_flight` at a time.
fn pipelined(
    server: &mut Server,
    params: &Value,
    ok: fn(&Value) -> bool,
    iters: u64,
    in_flight: usize,
) -> Duration {
    let batches = iters.div_ceil(in_flight as u64);
    let start = Instant::now();
    for _ in 0..batches {
        server.call_pipelined(params, ok, in_flight);
    }
    // Time per call, scaled back to the `iters` calls asked for.
    start
        .elapsed()
        .mul_f64(iters as f64 / (batches * in_flight as u64) as f64)
}

/// How many calls the pipelined bench keeps in flight.
const IN_FLIGHT: usize = 64;

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mcp(c: &mut Criterion) {
    let home = tempfile::tempdir().expect("a temp dir");
    let workspace = tempfile::tempdir().expect("a temp dir");
    let (runtime, airlock) = in_process(home.path(), workspace.path());
    let mut cx = airlock.context();

    let mut server = Server::spawn(home.path(), workspace.path());
    assert!(server.start() > 0);
    server.call_sleep_0();

    // The same server with `[audit]` on (a trail file, checkpoints signed
    // every 1,000 records), sharing the artifact cache.
    let trail = tempfile::tempdir().expect("a temp dir");
    let audit_config = trail.path().join("airlock.toml");
    std::fs::write(
        &audit_config,
        format!(
            "[audit]\nenabled = true\npath = \"{}\"\nkey = \"{}/../audit/tests/fixtures/operator.pem\"\n",
            trail.path().join("audit.jsonl").display(),
            env!("CARGO_MANIFEST_DIR"),
        ),
    )
    .expect("write the audited configuration");
    let mut command = Command::new(env!("CARGO_BIN_EXE_airlock"));
    command
        .arg("--config")
        .arg(&audit_config)
        .arg("--workspace")
        .arg(workspace.path())
        .arg("mcp");
    let mut audited = Server::spawn_command(command, home.path());
    assert!(audited.start() > 0);
    audited.call_sleep_0();

    let mut group = c.benchmark_group("mcp_call");
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("stdio_sleep_0", |b| b.iter(|| server.call_sleep_0()));
    group.bench_function("stdio_sleep_0_audited", |b| {
        b.iter(|| audited.call_sleep_0())
    });
    group.bench_function("stdio_sleep_0_pipelined", |b| {
        b.iter_custom(|iters| pipelined(&mut server, &sleep_0(), sleep_ok, iters, IN_FLIGHT))
    });
    group.bench_function("stdio_sleep_0_pipelined_audited", |b| {
        b.iter_custom(|iters| pipelined(&mut audited, &sleep_0(), sleep_ok, iters, IN_FLIGHT))
    });
    // p50 and p99 of single calls with 64 kept in flight, plain and
    // audited, in one run (criterion reports means; a trail must not
    // show in the tail either).
    for (name, server) in [("plain", &mut server), ("audited", &mut audited)] {
        let latencies = server.latencies(&sleep_0(), sleep_ok, 20_000, IN_FLIGHT);
        let at =
            |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
        println!(
            "RESULT mcp_call/stdio_sleep_0_{IN_FLIGHT}_in_flight_{name}: p50 {:.0} µs, p99 {:.0} µs",
            at(0.50).as_secs_f64() * 1e6,
            at(0.99).as_secs_f64() * 1e6
        );
    }
    group.bench_function("stdio_sleep_0_1000_in_flight", |b| {
        b.iter_custom(|iters| pipelined(&mut server, &sleep_0(), sleep_ok, iters, 1000))
    });
    group.bench_function("stdio_ping", |b| {
        b.iter(|| server.request("ping", json!({})))
    });
    let mut cat = Server::spawn_command(Command::new("cat"), home.path());
    group.bench_function("cat_echo", |b| {
        b.iter(|| {
            let id = cat.send("ping", &json!({}));
            cat.stdin.flush().expect("cat reads");
            let mut line = String::new();
            cat.stdout.read_line(&mut line).expect("cat writes");
            let echoed: Value = serde_json::from_str(&line).expect("the line back");
            assert_eq!(echoed["id"], id);
        })
    });
    drop(cat);
    group.bench_function("in_process_sleep_0", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let tool_use = ToolUse::new("toolu_bench", "sleep", json!({ "ms": 0 }));
                    let result = airlock.call(&mut cx, tool_use).await;
                    assert!(!result.is_error(), "{}", result.text());
                }
                start.elapsed()
            })
        })
    });
    let mut executor = {
        let _in_runtime = runtime.enter();
        airlock_host::Executor::session(airlock.clone(), airlock.context())
    };
    group.bench_function("in_process_session_executor_sleep_0", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    executor.add(ToolUse::new("toolu_bench", "sleep", json!({ "ms": 0 })));
                    loop {
                        match executor.next().await {
                            Some(airlock_host::ExecutorEvent::Result(r)) => {
                                assert!(!r.is_error(), "{}", r.text());
                                break;
                            }
                            Some(_) => {}
                            None => panic!("the executor closed"),
                        }
                    }
                }
                start.elapsed()
            })
        })
    });
    let handle = executor.handle();
    group.bench_function("in_process_session_executor_submit_sleep_0", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let mut events =
                        handle.submit(ToolUse::new("toolu_bench", "sleep", json!({ "ms": 0 })));
                    loop {
                        match events.next().await {
                            Some(airlock_host::ExecutorEvent::Result(r)) => {
                                assert!(!r.is_error(), "{}", r.text());
                                break;
                            }
                            Some(_) => {}
                            None => panic!("the executor closed"),
                        }
                    }
                }
                start.elapsed()
            })
        })
    });
    group.finish();
    drop(server);

    let mut group = c.benchmark_group("mcp_start");
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("tools_list", |b| {
        b.iter(|| {
            let mut server = Server::spawn(home.path(), workspace.path());
            assert!(server.start() > 0);
        })
    });
    group.bench_function("tools_list_empty_cache", |b| {
        b.iter_batched(
            || tempfile::tempdir().expect("a temp dir"),
            |fresh_home| {
                let mut server = Server::spawn(fresh_home.path(), workspace.path());
                assert!(server.start() > 0);
                (server, fresh_home)
            },
            criterion::BatchSize::PerIteration,
        )
    });
    group.bench_function("spawn_bin_true", |b| {
        b.iter(|| {
            let status = Command::new("/bin/true").status().expect("/bin/true runs");
            assert!(status.success());
        })
    });
    group.finish();
}

/// A peer MCP server measured side by side with `airlock mcp`: how to
/// start it, and its echo tool.
struct Peer {
    /// Its name in the bench ids.
    name: &'static str,
    binary: PathBuf,
    args: Vec<std::ffi::OsString>,
    /// Its echo tool, as it lists it.
    tool: &'static str,
    /// Whether a reply to `{"message": "hi"}` is the echo's.
    ok: fn(&Value) -> bool,
    /// What its command line refers to (a configuration), kept while it runs.
    _files: Option<tempfile::TempDir>,
}

impl Peer {
    /// Wassette, from `AIRLOCK_PEER_WASSETTE` (its binary) and
    /// `AIRLOCK_PEER_WASSETTE_PLUGINS` (its plugin directory): `wassette
    /// serve --stdio`, loading every component in that directory.
    fn wassette() -> Option<Peer> {
        let binary = std::env::var_os("AIRLOCK_PEER_WASSETTE")?;
        let plugins = std::env::var_os("AIRLOCK_PEER_WASSETTE_PLUGINS")?;
        Some(Peer {
            name: "wassette",
            binary: binary.into(),
            args: vec![
                "serve".into(),
                "--stdio".into(),
                "--plugin-dir".into(),
                plugins,
            ],
            tool: "echo",
            ok: |result| text_of(result) == "hi",
            _files: None,
        })
    }

    /// hyper-mcp, from `AIRLOCK_PEER_HYPER_MCP` (its binary), with one
    /// plugin: `benches/peers/hyper-mcp-echo.wat`, assembled into a temp
    /// dir, whose tool answers with the request it was given.
    fn hyper_mcp() -> Option<Peer> {
        let binary = std::env::var_os("AIRLOCK_PEER_HYPER_MCP")?;
        let files = tempfile::tempdir().expect("a temp dir");
        let source = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/benches/peers/hyper-mcp-echo.wat"
        );
        let wasm = wat::parse_file(source).expect("the echo plugin assembles");
        let plugin = files.path().join("echo.wasm");
        std::fs::write(&plugin, wasm).expect("the plugin is written");
        let config = files.path().join("config.json");
        let url = format!("file://{}", plugin.display());
        let text = json!({"plugins": {"echo": {"url": url}}}).to_string();
        std::fs::write(&config, text).expect("the configuration is written");
        Some(Peer {
            name: "hyper_mcp",
            binary: binary.into(),
            args: vec!["--config-file".into(), config.into()],
            tool: "echo-echo",
            ok: |result| text_of(result).contains(r#""arguments":{"message":"hi"}"#),
            _files: Some(files),
        })
    }

    fn spawn(&self, home: &Path) -> Server {
        let mut command = Command::new(&self.binary);
        command.args(&self.args);
        Server::spawn_command(command, home)
    }

    /// Spawns it and waits until its `tools/list` lists the echo tool (a
    /// peer may list its plugins only once they are loaded).
    fn start(&self, home: &Path) -> Server {
        let mut server = self.spawn(home);
        server.start();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let listed = server.request("tools/list", json!({}));
            let tools = listed["tools"].as_array();
            if tools.is_some_and(|tools| tools.iter().any(|tool| tool["name"] == self.tool)) {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "{} lists no `{}` tool: {listed}",
                self.name,
                self.tool
            );
        }
    }

    fn echo(&self) -> Value {
        json!({"name": self.tool, "arguments": {"message": "hi"}})
    }
}

fn text_of(result: &Value) -> &str {
    if result["isError"] == true {
        return "";
    }
    result["content"][0]["text"].as_str().unwrap_or_default()
}

fn peers(c: &mut Criterion) {
    let peers: Vec<Peer> = [Peer::wassette(), Peer::hyper_mcp()]
        .into_iter()
        .flatten()
        .collect();
    if peers.iter().all(|p| p.name != "wassette") {
        println!(
            "mcp_peers: Wassette skipped. To measure it side by side, set \
             AIRLOCK_PEER_WASSETTE to a wassette binary built from \
             https://github.com/microsoft/wassette and AIRLOCK_PEER_WASSETTE_PLUGINS to a \
             directory holding an echo component (wasm32-wasip2, exporting \
             `echo: func(message: string) -> string`)."
        );
    }
    if peers.iter().all(|p| p.name != "hyper_mcp") {
        println!(
            "mcp_peers: hyper-mcp skipped. To measure it side by side, set \
             AIRLOCK_PEER_HYPER_MCP to a hyper-mcp binary (`cargo install --locked \
             hyper-mcp@0.8.3`)."
        );
    }
    if peers.is_empty() {
        return;
    }
    let home = tempfile::tempdir().expect("a temp dir");
    let workspace = tempfile::tempdir().expect("a temp dir");
    drop(in_process(home.path(), workspace.path()));
    let mut airlock = Server::spawn(home.path(), workspace.path());
    assert!(airlock.start() > 0);
    airlock.call_sleep_0();
    let mut running: Vec<Server> = peers
        .iter()
        .map(|peer| {
            let mut server = peer.start(home.path());
            server.call(&peer.echo(), peer.ok);
            server
        })
        .collect();

    let mut group = c.benchmark_group("mcp_peers");
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("airlock_sleep_0", |b| {
        b.iter(|| airlock.call(&sleep_0(), sleep_ok))
    });
    for (peer, server) in peers.iter().zip(&mut running) {
        let echo = peer.echo();
        group.bench_function(format!("{}_echo", peer.name), |b| {
            b.iter(|| server.call(&echo, peer.ok))
        });
    }
    group.bench_function("airlock_sleep_0_pipelined", |b| {
        b.iter_custom(|iters| pipelined(&mut airlock, &sleep_0(), sleep_ok, iters, IN_FLIGHT))
    });
    for (peer, server) in peers.iter().zip(&mut running) {
        let echo = peer.echo();
        group.bench_function(format!("{}_echo_pipelined", peer.name), |b| {
            b.iter_custom(|iters| pipelined(server, &echo, peer.ok, iters, IN_FLIGHT))
        });
    }
    drop(airlock);
    drop(running);
    // From spawning the process to reading a `tools/list` reply that lists
    // the tool; the process is ended outside the measurement.
    group.sample_size(30);
    group.bench_function("airlock_tools_list", |b| {
        b.iter_with_large_drop(|| {
            let mut server = Server::spawn(home.path(), workspace.path());
            assert!(server.start() > 0);
            server
        })
    });
    for peer in &peers {
        group.bench_function(format!("{}_tools_list", peer.name), |b| {
            b.iter_with_large_drop(|| peer.start(home.path()))
        });
    }
    group.finish();
}

criterion_group!(benches, mcp, peers);
criterion_main!(benches);
