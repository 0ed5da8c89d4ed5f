//! Shared helpers for Airlock's integration and security suites: the paths
//! of the test guests, one host with the bundled tools compiled once per
//! test binary, temporary workspaces, and a loopback HTTP server.

use airlock_host::config::ToolConfig;
use airlock_host::{Airlock, Config, ToolContext, ToolResult, ToolUse};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Paths of the test guests built from `tests/guests/`.
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

/// The configuration every test starts from: the defaults, minus the
/// user's tool directory, so the suites never depend on what is installed.
pub fn config() -> Config {
    Config {
        tool_dirs: Some(Vec::new()),
        ..Config::default()
    }
}

/// The bundled tools, compiled once per test binary (on a runtime of its
/// own, so no test's runtime owns it).
pub fn base() -> &'static Airlock {
    static BASE: OnceLock<Airlock> = OnceLock::new();
    BASE.get_or_init(|| {
        std::thread::spawn(|| {
            tokio::runtime::Runtime::new()
                .expect("a runtime")
                .block_on(Airlock::new(config()))
                .expect("the bundled tools load")
        })
        .join()
        .expect("the loader thread")
    })
}

/// The bundled tools under `config`'s grants, without recompiling.
pub async fn airlock(config: Config) -> Airlock {
    base()
        .with_config(config)
        .await
        .expect("the grants are valid")
}

/// A configuration granting `workspace` read-write.
pub fn workspace_config(workspace: &Path) -> Config {
    Config {
        workspace: Some(workspace.to_path_buf()),
        ..config()
    }
}

/// Adds `grant` for `tool` to `config`.
pub fn grant(mut config: Config, tool: &str, grant: ToolConfig) -> Config {
    config.tools.insert(tool.to_string(), grant);
    config
}

/// A temporary workspace holding `files` (path, content).
pub fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("airlock-test-")
        .tempdir()
        .expect("a temp dir");
    for (path, content) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

/// The canonical form of `path`, as tools see it.
pub fn canonical(path: &Path) -> String {
    path.canonicalize().unwrap().to_str().unwrap().to_string()
}

/// A host that loads only the component at `wasm` (copied into a tool
/// directory of its own), under `config`'s grants.
pub async fn with_component(wasm: &str, config: Config) -> (Airlock, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let name = Path::new(wasm).file_name().unwrap();
    std::fs::copy(wasm, dir.path().join(name)).expect("copy the component");
    let config = Config {
        bundled_tools: false,
        tool_dirs: Some(vec![dir.path().to_path_buf()]),
        ..config
    };
    let airlock = Airlock::new(config)
        .await
        .expect("the configuration is valid");
    (airlock, dir)
}

/// Runs one call and returns its result.
pub async fn call(airlock: &Airlock, cx: &mut ToolContext, tool: &str, input: Value) -> ToolResult {
    airlock.call(cx, ToolUse::new("test-1", tool, input)).await
}

/// The text of a successful result; panics with the error otherwise.
pub fn ok_text(result: &ToolResult) -> String {
    match &result.outcome {
        Ok(output) => output.text_content(),
        Err(e) => panic!("{} failed: {e}", result.name),
    }
}

/// The error of a failed result; panics if it succeeded.
pub fn err(result: &ToolResult) -> &airlock_host::CallError {
    match &result.outcome {
        Ok(output) => panic!("{} succeeded: {}", result.name, output.text_content()),
        Err(e) => e,
    }
}

/// Grants `tool` the network hosts `hosts`.
pub fn network(hosts: &[&str]) -> ToolConfig {
    ToolConfig {
        network: hosts.iter().map(|h| h.to_string()).collect(),
        ..ToolConfig::default()
    }
}

/// A loopback HTTP server answering every request with `body`; returns its
/// port. It runs until the test's runtime ends.
pub async fn http_server(body: &'static str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    port
}

/// The path of `rel` inside `dir`, as a string.
pub fn path_in(dir: &Path, rel: &str) -> String {
    let p: PathBuf = Path::new(&canonical(dir)).join(rel);
    p.to_str().unwrap().to_string()
}
