//! The MCP conformance suite (`@modelcontextprotocol/conformance`, pinned
//! in `tests/conformance/`) run against Airlock's Streamable HTTP server,
//! the server `airlock mcp --http` runs, with the bundled tools and the
//! suite's fixture tools built as components (`tests/guests/conformance-*`),
//! so its tool scenarios go through the real sandbox, pipeline and executor.
//! Every scenario, active and pending, must pass except those listed,
//! with reasons, in
//! `tests/conformance/expected-failures.yml`; the suite also fails when a
//! listed one passes. The summary is written to
//! `target/tmp/mcp-conformance/summary.txt` (CI prints it), each scenario's
//! checks under `results/` beside it. The TypeScript SDK's v2 client,
//! installed beside the suite, is asked for permission through MCP
//! 2026-07-28's `input_required` (`tests/mcp/mrtr.mjs`).

use airlock_mcp::{HttpOptions, McpHost};
use airlock_tests::*;
use std::path::Path;
use std::process::Command;

#[path = "../support/python.rs"]
mod python;

#[path = "../support/node.rs"]
mod node;

#[path = "../support/suite.rs"]
mod suite;

/// The fixture tools, as built by `tests/build.rs`.
const FIXTURES: [&str; 6] = [
    guests::CONFORMANCE_SIMPLE_TEXT,
    guests::CONFORMANCE_JSON_SCHEMA,
    guests::CONFORMANCE_IMAGE,
    guests::CONFORMANCE_ERROR,
    guests::CONFORMANCE_PROGRESS,
    guests::CONFORMANCE_LOGGING,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_passes_every_scenario_for_what_airlock_declares() {
    let suite = suite::suite();
    let tools = tempfile::tempdir().expect("a temp dir");
    for wasm in FIXTURES {
        let name = Path::new(wasm).file_name().expect("a file name");
        std::fs::copy(wasm, tools.path().join(name)).expect("copy a fixture");
    }
    let ws = workspace(&[]);
    let config = airlock_host::Config {
        tool_dirs: Some(vec![tools.path().to_path_buf()]),
        ..workspace_config(ws.path())
    };
    let airlock = airlock(config).await;
    for name in [
        "test_simple_text",
        "test_image_content",
        "test_error_handling",
        "test_tool_with_progress",
        "test_tool_with_logging",
        "json_schema_2020_12_tool",
    ] {
        assert!(
            airlock.registry().get(name).is_some(),
            "the fixture {name} did not load: {:?}",
            airlock.registry().failures()
        );
    }

    let (port, server) = serve(airlock).await;

    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-conformance");
    let results = out_dir.join("results");
    let _ = std::fs::remove_dir_all(&results);
    let expected = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/conformance/expected-failures.yml"
    );
    let mut command = Command::new(&suite.node);
    command
        .arg(&suite.cli)
        .args(["server", "--url", &format!("http://127.0.0.1:{port}/mcp")])
        .args(["--suite", "all", "--expected-failures", expected])
        .arg("-o")
        .arg(&results);
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("the suite's thread")
        .expect("the suite runs");
    server.abort();

    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout
        .find("=== SUMMARY ===")
        .map_or(stdout.as_ref(), |at| &stdout[at..]);
    std::fs::write(out_dir.join("summary.txt"), summary).expect("write the summary");
    assert!(
        out.status.success(),
        "the conformance suite failed ({}):\n{summary}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// MCP 2026-07-28 clients are asked for permission: the TypeScript SDK's v2
/// client (`@modelcontextprotocol/client`, `auto` negotiation) gets
/// `input_required`, asks its handler and sends the call again (accept,
/// decline, "always").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_client_in_auto_mode_is_asked_for_permission() {
    let suite = suite::suite();
    let ws = workspace(&[]);
    // The default mode: every write asks.
    let airlock = airlock(workspace_config(ws.path())).await;
    let (port, server) = serve(airlock).await;
    // Beside the suite's node_modules, where the client is installed.
    let installed = suite.cli.ancestors().nth(4).expect("the suite's directory");
    let script = installed.join("mrtr.mjs");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/mcp/mrtr.mjs"),
        &script,
    )
    .expect("copy the client's script");
    let mut command = Command::new(&suite.node);
    command
        .arg(&script)
        .arg(format!("http://127.0.0.1:{port}/mcp"))
        .arg(ws.path());
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("the client's thread")
        .expect("the client runs");
    server.abort();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("3 questions asked"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `airlock` served over Streamable HTTP on a free port of 127.0.0.1: the
/// port, and the server's task.
async fn serve(airlock: airlock_host::Airlock) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let port = listener.local_addr().expect("an address").port();
    let host = McpHost::new(airlock);
    let server = tokio::spawn(async move {
        if let Err(e) = host.serve_http(listener, &HttpOptions::default()).await {
            panic!("the server failed: {e:#}");
        }
    });
    (port, server)
}
