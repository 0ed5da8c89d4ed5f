//! What deferred discovery and external MCP servers cost.
//!
//! - `tool_search/index_and_search_1000_deferred`: `tool_search::search`
//!   (BM25) over a catalogue of 1,000 deferred tools, the function alone,
//!   which builds the index each time.
//! - `tool_search/call_1000_deferred`: the same search as a `tool_search`
//!   call through the whole pipeline (`Airlock::call`); the tool keeps its
//!   view's index, built on first use.
//! - `tool_search/call_sleep_0`: the bundled `sleep` tool (`{"ms": 0}`)
//!   through the same pipeline in the same run: a wasm call, the baseline.
//! - `mcp_client/airlock_call_echo`: a call of `mcp__echo__echo`, a tool of
//!   `tests/mcp/echo_server.py` (the Python `mcp` SDK) mounted under
//!   `[mcp_servers]`, through the whole pipeline.
//! - `mcp_client/raw_jsonrpc_echo`: the same `tools/call` written as one
//!   JSON-RPC line to the same server started on its own, its reply read:
//!   the server's own cost, measured in the same run. The difference is
//!   what Airlock adds (rmcp's client, the pipeline).
//! - `mcp_reload/keeping_server`: `Airlock::reload` with that server
//!   mounted (and the bundled tools, from the artifact cache): the running
//!   server is kept and its tools listed again.
//! - `mcp_reload/restarting_server`: `Airlock::with_config` with the
//!   server's environment changed, which starts it afresh: the baseline,
//!   what every reload cost before servers were kept.
//!
//! Run with `cargo bench -p airlock-host --bench dynamic` (needs python3;
//! the pinned `mcp` SDK is installed in the tests' virtual environment on
//! first use).

use airlock_host::config::McpServerConfig;
use airlock_host::grants::ToolGrants;
use airlock_host::tool::Invocation;
use airlock_host::{
    Airlock, CallError, Config, Descriptor, Engine, Grants, PermissionMode, Registry, Tool,
    ToolContext, ToolOrigin, ToolOutput, ToolUse,
};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A catalogued tool: a descriptor and a one-line answer.
struct Catalogued(Descriptor, ToolOrigin);

#[async_trait::async_trait]
impl Tool for Catalogued {
    fn descriptor(&self) -> &Descriptor {
        &self.0
    }

    fn origin(&self) -> &ToolOrigin {
        &self.1
    }

    async fn call(&self, _: &mut Invocation, _: &Value) -> Result<ToolOutput, CallError> {
        Ok(ToolOutput::text(self.0.name.clone()))
    }
}

/// 1,000 deferred tools: 50 services × 20 actions, each with a sentence of
/// description and two arguments.
fn catalogue() -> Vec<Descriptor> {
    const SERVICES: [&str; 10] = [
        "github", "gitlab", "jira", "slack", "linear", "notion", "sentry", "stripe", "drive",
        "calendar",
    ];
    const VERBS: [&str; 5] = ["list", "get", "create", "update", "delete"];
    const NOUNS: [&str; 4] = ["issues", "pull_requests", "comments", "users"];
    let mut out = Vec::new();
    for region in 0..5 {
        for service in SERVICES {
            for verb in VERBS {
                for noun in NOUNS {
                    let name = format!("{service}{region}_{verb}_{noun}");
                    let text = noun.replace('_', " ");
                    let mut d = Descriptor::new(
                        &name,
                        &format!("{verb} the {text} of a {service} workspace in region {region}."),
                    );
                    d.input_schema = json!({"type": "object", "properties": {
                        "workspace": {"type": "string", "description": format!("The {service} workspace.")},
                        "limit": {"type": "integer", "description": format!("How many {text}.")}}});
                    d.defer_loading = true;
                    out.push(d);
                }
            }
        }
    }
    out
}

async fn searching_host(workspace: &std::path::Path) -> Airlock {
    let config = Config {
        workspace: Some(workspace.to_path_buf()),
        tool_dirs: Some(Vec::new()),
        ..Config::default()
    };
    let grants = Grants::from_config(&config).expect("the grants resolve");
    let engine = Engine::from_config(&config).expect("the engine starts");
    let mut registry = Registry::load(&engine, &config, &grants).await;
    for d in catalogue() {
        let tool = Arc::new(Catalogued(d, ToolOrigin::Native));
        registry
            .add(tool, ToolGrants::nothing(&config.limits))
            .expect("a catalogued tool registers");
    }
    Airlock::from_parts(config.clone(), engine, Arc::new(grants), registry)
        .await
        .expect("the host assembles")
}

/// How long `iters` runs of `f` take, one after another, on `runtime`.
fn timed(runtime: &tokio::runtime::Runtime, iters: u64, mut f: impl AsyncFnMut()) -> Duration {
    runtime.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            f().await;
        }
        start.elapsed()
    })
}

async fn call(airlock: &Airlock, cx: &mut ToolContext, name: &str, input: Value) -> String {
    let result = airlock
        .call(cx, ToolUse::new("toolu_bench", name, input))
        .await;
    assert!(!result.is_error(), "{}", result.text());
    result.text()
}

fn tool_search(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let workspace = tempfile::tempdir().expect("a temp dir");
    let airlock = runtime.block_on(searching_host(workspace.path()));
    let mut cx = airlock.context();
    let query = "create comments on a jira workspace";
    let found =
        airlock_host::tool_search::search(cx.tools(), query, false, 5).expect("it searches");
    assert!(found[0].name.starts_with("jira") && found[0].name.ends_with("create_comments"));
    let search = json!({"query": query});
    let text = runtime.block_on(call(&airlock, &mut cx, "tool_search", search.clone()));
    assert!(text.contains("create_comments"), "{text}");

    let mut group = c.benchmark_group("tool_search");
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("index_and_search_1000_deferred", |b| {
        b.iter(|| {
            airlock_host::tool_search::search(cx.tools(), query, false, 5).expect("it searches")
        })
    });
    group.bench_function("call_1000_deferred", |b| {
        b.iter_custom(|iters| {
            timed(&runtime, iters, async || {
                call(&airlock, &mut cx, "tool_search", search.clone()).await;
            })
        })
    });
    group.bench_function("call_sleep_0", |b| {
        b.iter_custom(|iters| {
            timed(&runtime, iters, async || {
                call(&airlock, &mut cx, "sleep", json!({"ms": 0})).await;
            })
        })
    });
    group.finish();
}

#[path = "../../../tests/support/python.rs"]
mod python_env;

/// The tests' Python, with the pinned `mcp` SDK.
fn python() -> String {
    python_env::python().display().to_string()
}

fn echo_server() -> String {
    format!(
        "{}/../../tests/mcp/echo_server.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The echo server driven by raw JSON-RPC lines.
struct Raw {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next_id: u64,
}

impl Raw {
    fn start() -> Raw {
        let mut child = Command::new(python())
            .arg(echo_server())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the echo server starts");
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut raw = Raw {
            child,
            stdin,
            stdout,
            next_id: 1,
        };
        raw.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}),
        );
        writeln!(
            raw.stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .expect("the server reads");
        raw
    }

    /// Sends a request and returns its result.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        // One write per message (`writeln!` on the raw pipe would write
        // each JSON token on its own).
        let mut bytes = serde_json::to_vec(&line).expect("JSON serialises");
        bytes.push(b'\n');
        self.stdin.write_all(&bytes).expect("the server reads");
        loop {
            let mut reply = String::new();
            self.stdout
                .read_line(&mut reply)
                .expect("the server answers");
            let reply: Value = serde_json::from_str(&reply).expect("a JSON-RPC line");
            if reply["id"] == id {
                return reply["result"].clone();
            }
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mcp_client(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let workspace = tempfile::tempdir().expect("a temp dir");
    let mut config = Config {
        workspace: Some(workspace.path().to_path_buf()),
        tool_dirs: Some(Vec::new()),
        ..Config::default()
    };
    config.permissions.default_mode = PermissionMode::BypassPermissions;
    config.mcp_servers.insert(
        "echo".into(),
        McpServerConfig {
            // This binary cannot be the sandbox helper (the `airlock`
            // binary is; host/cli/tests/mcp.rs runs servers confined).
            sandbox: false,
            ..McpServerConfig::new(python(), vec![echo_server()])
        },
    );
    let airlock = runtime
        .block_on(Airlock::new(config.clone()))
        .expect("the host starts");
    let mut cx = airlock.context();
    let input = json!({"text": "hi"});
    let text = runtime.block_on(call(&airlock, &mut cx, "mcp__echo__echo", input.clone()));
    assert_eq!(text, "echo: hi");
    let mut raw = Raw::start();
    let params = json!({"name": "echo", "arguments": input});
    assert_eq!(
        raw.request("tools/call", params.clone())["content"][0]["text"],
        "echo: hi"
    );

    let mut group = c.benchmark_group("mcp_client");
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("airlock_call_echo", |b| {
        b.iter_custom(|iters| {
            timed(&runtime, iters, async || {
                call(&airlock, &mut cx, "mcp__echo__echo", input.clone()).await;
            })
        })
    });
    group.bench_function("raw_jsonrpc_echo", |b| {
        b.iter(|| raw.request("tools/call", params.clone()))
    });
    group.finish();

    let mut reload = c.benchmark_group("mcp_reload");
    reload.sample_size(10);
    reload.measurement_time(Duration::from_secs(15));
    let mounted = |a: &Airlock| assert!(a.registry().get("mcp__echo__echo").is_some());
    reload.bench_function("keeping_server", |b| {
        b.iter_custom(|iters| {
            timed(&runtime, iters, async || {
                mounted(&airlock.reload().await.expect("it reloads"));
            })
        })
    });
    let mut changed = config;
    if let Some(echo) = changed.mcp_servers.get_mut("echo") {
        echo.env.insert("BENCH".into(), "restart".into());
    }
    reload.bench_function("restarting_server", |b| {
        b.iter_custom(|iters| {
            timed(&runtime, iters, async || {
                let restarted = airlock.with_config(changed.clone()).await;
                mounted(&restarted.expect("it reloads"));
            })
        })
    });
    reload.finish();
}

criterion_group!(benches, tool_search, mcp_client);
criterion_main!(benches);
