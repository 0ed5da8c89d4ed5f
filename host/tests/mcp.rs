//! `airlock mcp` driven by a real third-party client: the official Python
//! `mcp` SDK (`pip install mcp==2.3.0`; `.ci/run` installs it), over stdio
//! and Streamable HTTP. The scripts in `tests/mcp/` hold the assertions;
//! these tests prepare their workspaces and tool directories and run them.

#![cfg(feature = "mcp")]

use airlock_host::bundled::BUNDLED;
use std::path::Path;
use std::process::Command;

/// The component of the bundled tool built from `package`.
fn bundled(package: &str) -> &'static [u8] {
    BUNDLED
        .iter()
        .find(|(p, _)| *p == package)
        .map(|(_, bytes)| *bytes)
        .unwrap_or_else(|| panic!("{package} is bundled"))
}

/// `command` (and the servers it starts) with `home` as HOME, no user
/// configuration, and the artifact cache the MCP tests share.
fn isolated(mut command: Command, home: &Path) -> Command {
    command
        .env("HOME", home)
        .env(
            "XDG_CACHE_HOME",
            std::env::temp_dir().join("airlock-test-mcp-cache"),
        )
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("AIRLOCK_CONFIG");
    command
}

/// Runs `tests/mcp/SCRIPT BINARY ARGS..` in an empty HOME (with an
/// artifact cache shared by the tests, so only the first compiles), and
/// returns its stdout.
fn python_client(script: &str, args: &[&Path]) -> String {
    let home = tempfile::tempdir().unwrap();
    let script = format!("{}/../tests/mcp/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = isolated(Command::new("python3"), home.path())
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .output()
        .expect("python3 runs (install the client with `pip install mcp==2.3.0`)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Runs `SCRIPT BINARY WORKSPACE TOOL_DIR SPARE_TOOL`: the workspace holds
/// `a.txt` and `lines.txt` (line k is "line-k"), the tool directory only
/// the `read` component, and the spare tool is the `sleep` component.
fn run_client(script: &str) {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("a.txt"), "hello mcp\n").unwrap();
    let lines: String = (1..=2000).map(|k| format!("line-{k}\n")).collect();
    std::fs::write(workspace.path().join("lines.txt"), lines).unwrap();
    let tool_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        tool_dir.path().join("read.wasm"),
        bundled("airlock-tool-read"),
    )
    .unwrap();
    let spare = tempfile::tempdir().unwrap();
    let sleep = spare.path().join("sleep.wasm");
    std::fs::write(&sleep, bundled("airlock-tool-sleep")).unwrap();
    let out = python_client(
        script,
        &[
            &workspace.path().canonicalize().unwrap(),
            tool_dir.path(),
            &sleep,
        ],
    );
    println!("{out}");
}

#[test]
fn the_python_sdk_drives_every_feature_over_stdio() {
    run_client("stdio_client.py");
}

#[test]
fn the_python_sdk_drives_every_feature_over_http_and_many_clients_get_their_own_replies() {
    run_client("http_client.py");
}

#[test]
fn the_stdio_server_exits_when_stdin_closes_even_with_a_call_running() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let home = tempfile::tempdir().unwrap();
    let mut child = isolated(Command::new(env!("CARGO_BIN_EXE_airlock")), home.path())
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    )
    .unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains(r#""id":1"#), "{line}");
    assert!(
        line.contains(r#""protocolVersion":"2025-06-18""#),
        "the client's version is echoed: {line}"
    );
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}
{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"sleep","arguments":{{"ms":60000}}}}}}"#
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let closed = Instant::now();
    drop(stdin);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if closed.elapsed() > Duration::from_secs(10) {
            child.kill().unwrap();
            panic!("the server still runs 10 s after stdin closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert!(
        rest.lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "only protocol messages on stdout: {rest:?}"
    );
}
