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
    use std::io::Write;
    use std::time::Duration;
    let home = tempfile::tempdir().unwrap();
    let mut server = StdioServer::initialized(home.path(), &[]);
    let (stdin, line) = (&mut server.stdin, &server.initialized);
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
    let StdioServer {
        mut child,
        stdin,
        mut stdout,
        ..
    } = server;
    drop(stdin);
    let status = exit_of(&mut child, "after stdin closed");
    assert!(status.success(), "{status}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert!(
        rest.lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "only protocol messages on stdout: {rest:?}"
    );
}

/// `airlock mcp` stopped by a signal, as MCP clients stop a stdio server
/// (SIGTERM), a user does (SIGINT) or a closed terminal does (SIGHUP),
/// exits with 128 + the signal's number and takes the MCP servers it
/// started for tools with it, with what they started (`/proc` tells).
#[cfg(all(feature = "mcp-client", target_os = "linux"))]
#[test]
fn a_signal_stops_the_server_and_the_mcp_servers_it_started() {
    use std::time::{Duration, Instant};
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    let python = String::from_utf8(python.stdout).unwrap().trim().to_string();
    let script = format!("{}/../tests/mcp/echo_server.py", env!("CARGO_MANIFEST_DIR"));
    let alive = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            let state = stat.rsplit(')').next().unwrap_or_default().trim_start();
            !state.starts_with(['Z', 'X'])
        })
    };
    for (signal, code) in [("TERM", 143), ("INT", 130), ("HUP", 129)] {
        let home = tempfile::tempdir().unwrap();
        let pidfile = home.path().join("grandchild");
        let config = home.path().join("airlock.toml");
        std::fs::write(
            &config,
            format!(
                "bundled_tools = false\n\
                 [mcp_servers.echo]\n\
                 command = {python:?}\n\
                 args = [{script:?}]\n\
                 env = {{ ECHO_GRANDCHILD = {:?} }}\n",
                pidfile.display().to_string()
            ),
        )
        .unwrap();
        let mut server =
            StdioServer::initialized(home.path(), &["--config".as_ref(), config.as_ref()]);
        let grandchild = std::fs::read_to_string(&pidfile).expect("the server started its child");
        let grandchild = grandchild.trim();
        assert!(alive(grandchild));

        let sent = Command::new("kill")
            .args([format!("-{signal}"), server.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let stopped = Instant::now();
        let status = exit_of(&mut server.child, &format!("after SIG{signal}"));
        assert_eq!(status.code(), Some(code), "SIG{signal}: {status}");
        while alive(grandchild) {
            assert!(
                stopped.elapsed() < Duration::from_secs(10),
                "SIG{signal}: the MCP server's child {grandchild} outlived airlock"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `airlock ARGS mcp` over piped stdio, past `initialize`.
struct StdioServer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    /// The reply to `initialize`.
    initialized: String,
}

impl StdioServer {
    fn initialized(home: &Path, args: &[&std::ffi::OsStr]) -> StdioServer {
        use std::io::{BufRead, Write};
        use std::process::Stdio;
        let mut child = isolated(Command::new(env!("CARGO_BIN_EXE_airlock")), home)
            .args(args)
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
        )
        .unwrap();
        let mut initialized = String::new();
        stdout.read_line(&mut initialized).unwrap();
        assert!(initialized.contains(r#""id":1"#), "serving: {initialized}");
        StdioServer {
            child,
            stdin,
            stdout,
            initialized,
        }
    }
}

/// Waits up to 10 s for `child` to exit; kills it and fails after.
fn exit_of(child: &mut std::process::Child, when: &str) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > std::time::Duration::from_secs(10) {
            child.kill().unwrap();
            panic!("the server still runs 10 s {when}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
