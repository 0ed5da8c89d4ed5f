//! `airlock mcp` driven by a real third-party client: the official Python
//! `mcp` SDK (pinned, in a virtual environment the tests create on first
//! use: `support/python.rs`), over stdio and Streamable HTTP. The scripts
//! in `tests/mcp/` hold the assertions; these tests prepare their
//! workspaces and tool directories and run them. Raw newline-delimited
//! JSON-RPC and hand-written HTTP/1.1 clients check what an SDK hides:
//! the order of pipelined calls, socket options, status codes, limits.

#![cfg(feature = "mcp")]

#[path = "../../../tests/support/python.rs"]
mod support;

#[path = "../../../tests/support/guests.rs"]
mod guests;
/// The auth tests' MCP 2026-07-28 client (the rest of it is the stateless
/// suite's).
#[path = "../../../tests/support/modern.rs"]
#[allow(dead_code)]
mod modern;

use airlock_host::bundled::BUNDLED;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::Command;
use support::python;

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
        .env("XDG_CACHE_HOME", airlock_tests::cache_home())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_STATE_HOME")
        .env_remove("AIRLOCK_CONFIG");
    command
}

/// Runs `tests/mcp/SCRIPT BINARY ARGS..` in an empty HOME (with an
/// artifact cache shared by the tests, so only the first compiles), and
/// returns its stdout.
fn python_client(script: &str, args: &[&Path]) -> String {
    let home = tempfile::tempdir().unwrap();
    let script = format!("{}/../../tests/mcp/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = isolated(Command::new(python()), home.path())
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .output()
        .expect("the tests' Python runs");
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

/// MCP 2026-07-28 clients are asked for permission: the Python SDK in its
/// default `auto` mode gets `input_required`, asks its user and sends the
/// call again (tests/mcp/mrtr.py: accept, decline, not allowed, always).
#[test]
fn the_python_sdk_in_auto_mode_is_asked_for_permission_over_stdio_and_http() {
    let workspace = tempfile::tempdir().unwrap();
    let out = python_client("mrtr.py", &[&workspace.path().canonicalize().unwrap()]);
    println!("{out}");
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
    let python = python().display().to_string();
    let script = format!(
        "{}/../../tests/mcp/echo_server.py",
        env!("CARGO_MANIFEST_DIR")
    );
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
                 sandbox = false\n\
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

/// MCP servers run confined by default: a server that tries what a
/// hostile one would (`tests/mcp/probe_server.py`) answers, reads the
/// workspace but writes it only with `workspace = "read-write"`, sees
/// nothing outside its grants (HOME is its private `/tmp`), has no
/// network, and what it starts, `setsid` or not, goes when Airlock stops.
/// Each refusal is the error the server itself saw.
#[cfg(all(feature = "mcp-client", target_os = "linux"))]
#[test]
fn mcp_servers_run_confined_by_their_grants() {
    use std::time::{Duration, Instant};
    let python = python();
    let venv = python.parent().and_then(Path::parent).unwrap();
    let real = python.canonicalize().unwrap();
    let base = real.parent().and_then(Path::parent).unwrap();
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp");
    let scripts = scripts.canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let secret = home.path().join("secret.txt");
    std::fs::write(&secret, "s3cret").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let web = hello_server();
    let alive = |pattern: &str| {
        Command::new("pgrep")
            .args(["-f", pattern])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    for (access, writes) in [("read-only", false), ("read-write", true)] {
        let workspace = tempfile::tempdir().unwrap();
        let ws = workspace.path().canonicalize().unwrap();
        std::fs::write(ws.join("a.txt"), "in the workspace").unwrap();
        let config = home.path().join("airlock.toml");
        std::fs::write(
            &config,
            format!(
                "bundled_tools = false\n\
                 [permissions]\ndefault_mode = \"bypassPermissions\"\n\
                 [mcp_servers.probe]\n\
                 command = {:?}\n\
                 args = [{:?}]\n\
                 workspace = {access:?}\n\
                 read = [{:?}, {:?}, {:?}]\n\
                 hosts = {:?}\n",
                python.display().to_string(),
                scripts.join("probe_server.py").display().to_string(),
                venv.display().to_string(),
                base.display().to_string(),
                scripts.display().to_string(),
                // The writing server is granted the web server's host.
                if writes {
                    vec![format!("127.0.0.1:{web}")]
                } else {
                    vec![]
                },
            ),
        )
        .unwrap();
        let args = [
            "--workspace",
            ws.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ];
        let mut server = RawStdio::start(home.path(), &args, "{}");
        let mut call = |id: u64, tool: &str, arguments: serde_json::Value| {
            server.send(&call_line(id, &format!("mcp__probe__{tool}"), arguments));
            call_text(&server.reply())
        };
        let (text, _) = call(2, "where", serde_json::json!({}));
        assert!(
            text.starts_with(&format!("{} /tmp ", ws.display())),
            "{text}"
        );
        let a = ws.join("a.txt").display().to_string();
        assert_eq!(
            call(3, "read", serde_json::json!({"path": a})),
            ("in the workspace".into(), false)
        );
        let secret = secret.display().to_string();
        let (text, error) = call(4, "read", serde_json::json!({"path": secret}));
        assert!(
            error && text.contains("No such file or directory"),
            "{text}"
        );
        let (text, error) = call(5, "write", serde_json::json!({"path": secret, "text": "x"}));
        assert!(
            error && text.contains("No such file or directory"),
            "{text}"
        );
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "s3cret");
        let b = ws.join("b.txt");
        let written = call(
            6,
            "write",
            serde_json::json!({"path": b.display().to_string(), "text": "x"}),
        );
        if writes {
            assert_eq!(written, ("wrote".into(), false));
            assert_eq!(std::fs::read_to_string(&b).unwrap(), "x");
        } else {
            assert!(
                written.1 && written.0.contains("Read-only file system"),
                "{written:?}"
            );
            assert!(!b.exists());
        }
        let (text, error) = call(7, "connect", serde_json::json!({"port": port}));
        assert!(error && text.contains("Permission denied"), "{text}");
        // The network: granted hosts through the proxy, nothing else.
        let url = |port: u16| serde_json::json!({"url": format!("http://127.0.0.1:{port}/")});
        let (text, error) = call(9, "fetch", url(web));
        if writes {
            assert_eq!((text.as_str(), error), ("hello", false));
            let (text, error) = call(10, "fetch", url(port));
            assert!(
                error
                    && text.contains(&format!(
                        "HTTP 403: airlock: 127.0.0.1:{port} is not among the hosts granted \
                         to the MCP server probe"
                    )),
                "{text}"
            );
        } else {
            assert!(error && text.contains("Permission denied"), "{text}");
        }
        let seconds = format!("{}.{}", 3000 + std::process::id() % 1000, u8::from(writes));
        assert_eq!(
            call(8, "detach", serde_json::json!({"seconds": seconds})),
            ("started".into(), false)
        );
        let pattern = format!("sleep {seconds}");
        let started = Instant::now();
        while !alive(&pattern) {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the detached sleep never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Command::new("kill")
            .args(["-TERM", &server.child.id().to_string()])
            .status()
            .unwrap();
        exit_of(&mut server.child, "after SIGTERM");
        let stopped = Instant::now();
        while alive(&pattern) {
            assert!(
                stopped.elapsed() < Duration::from_secs(10),
                "{pattern} outlived airlock"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// An HTTP server on loopback answering `hello` to every request; its port.
fn hello_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                use std::io::{BufRead, Write};
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    line.clear();
                }
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
            });
        }
    });
    port
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
        let mut command = isolated(Command::new(env!("CARGO_BIN_EXE_airlock")), home);
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            // SIGINT and SIGHUP as a terminal leaves them: a test run in
            // the background (`cmd &` in a script, `nohup`) starts with
            // them ignored, and airlock keeps a signal ignored that was
            // ignored when it started.
            // SAFETY: signal() is async-signal-safe and touches no memory
            // of the parent's.
            unsafe {
                command.pre_exec(|| {
                    libc::signal(libc::SIGINT, libc::SIG_DFL);
                    libc::signal(libc::SIGHUP, libc::SIG_DFL);
                    Ok(())
                });
            }
        }
        let mut child = command
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

/// Claude Code shows the model only `structuredContent` when a result has
/// one: every bundled tool that sends it lists an `outputSchema`, and what
/// it sends validates against that schema and holds the lines, paths and
/// entries the text shows (`tests/mcp/structured.py`).
#[test]
fn structured_content_matches_the_listed_output_schema_and_holds_the_whole_result() {
    run_client("structured.py");
}

/// `airlock ARGS mcp` driven by raw JSON-RPC lines over its stdin and
/// stdout, past the handshake (with `capabilities` as the client's).
struct RawStdio {
    child: std::process::Child,
    stdin: Option<Box<dyn std::io::Write + Send>>,
    stdout: std::io::BufReader<Box<dyn std::io::Read + Send>>,
    /// The reply to `initialize`.
    initialized: serde_json::Value,
}

/// What the server's stdin and stdout are.
#[derive(Clone, Copy, Debug)]
enum Over {
    /// Pipes, as Python's `subprocess` and most clients give them.
    Pipes,
    /// Stream sockets, as Node's `child_process` gives them (Claude Code,
    /// the Inspector, the TypeScript SDK).
    Sockets,
}

impl RawStdio {
    fn start(home: &Path, args: &[&str], capabilities: &str) -> RawStdio {
        RawStdio::start_over(Over::Pipes, home, args, capabilities)
    }

    fn start_over(over: Over, home: &Path, args: &[&str], capabilities: &str) -> RawStdio {
        use std::os::unix::net::UnixStream;
        use std::process::Stdio;
        let mut command = isolated(Command::new(env!("CARGO_BIN_EXE_airlock")), home);
        command.args(args).arg("mcp").stderr(Stdio::null());
        let mut server = match over {
            Over::Pipes => {
                let mut child = command
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap();
                let stdin = child.stdin.take().unwrap();
                let stdout = child.stdout.take().unwrap();
                RawStdio::new(child, Box::new(stdin), Box::new(stdout))
            }
            Over::Sockets => {
                let (stdin, its_stdin) = UnixStream::pair().unwrap();
                let (stdout, its_stdout) = UnixStream::pair().unwrap();
                // A send buffer far smaller than a long reply: writing one
                // takes many writes, each waiting for the client to read.
                let small: libc::c_int = 4096;
                // SAFETY: a valid socket, and the option's value and size.
                let set = unsafe {
                    libc::setsockopt(
                        std::os::fd::AsRawFd::as_raw_fd(&its_stdout),
                        libc::SOL_SOCKET,
                        libc::SO_SNDBUF,
                        (&raw const small).cast(),
                        size_of::<libc::c_int>() as libc::socklen_t,
                    )
                };
                assert_eq!(set, 0, "{}", std::io::Error::last_os_error());
                // A server that stops writing fails the test, not hangs it.
                stdout
                    .set_read_timeout(Some(std::time::Duration::from_secs(60)))
                    .unwrap();
                let child = command
                    .stdin(std::os::fd::OwnedFd::from(its_stdin))
                    .stdout(std::os::fd::OwnedFd::from(its_stdout))
                    .spawn()
                    .unwrap();
                RawStdio::new(child, Box::new(stdin), Box::new(stdout))
            }
        };
        server.send(&format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{capabilities},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
        ));
        let reply = server.next();
        assert_eq!(reply["id"], 0, "{reply}");
        server.initialized = reply;
        server.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        server
    }

    fn new(
        child: std::process::Child,
        stdin: Box<dyn std::io::Write + Send>,
        stdout: Box<dyn std::io::Read + Send>,
    ) -> RawStdio {
        RawStdio {
            child,
            stdin: Some(stdin),
            stdout: std::io::BufReader::new(stdout),
            initialized: serde_json::Value::Null,
        }
    }

    /// Writes `lines` (each one message) in one go.
    fn send(&mut self, lines: &str) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{lines}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message from the server.
    fn next(&mut self) -> serde_json::Value {
        use std::io::BufRead;
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "the server closed stdout");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    /// The next reply (a message with an id and no method).
    fn reply(&mut self) -> serde_json::Value {
        loop {
            let message = self.next();
            if message.get("method").is_none() {
                return message;
            }
        }
    }
}

impl Drop for RawStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn call_line(id: u64, tool: &str, arguments: serde_json::Value) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    })
    .to_string()
}

/// The text of a `tools/call` reply, and whether it is an error.
fn call_text(reply: &serde_json::Value) -> (String, bool) {
    let result = &reply["result"];
    let text = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    (text, result["isError"] == true)
}

/// rmcp handles each request in a task of its own; calls written back to
/// back must still reach the executor in the order they were written: each
/// `read` sees the file as the `edit` before it left it, and each `edit`
/// finds the file read (issue 14, defect 2). The file is long enough that
/// the replies (about 5 MB in all) fill the output's buffer many times
/// while the client is not yet reading.
#[test]
fn pipelined_calls_over_stdio_run_in_the_order_they_were_written() {
    pipelined_calls_run_in_the_order_they_were_written(Over::Pipes);
}

/// The same over sockets, which the server reads and writes without
/// Tokio's blocking threads (`stdio.rs`).
#[test]
fn pipelined_calls_over_socket_stdio_run_in_the_order_they_were_written() {
    pipelined_calls_run_in_the_order_they_were_written(Over::Sockets);
}

fn pipelined_calls_run_in_the_order_they_were_written(over: Over) {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let workspace = workspace.path().canonicalize().unwrap();
    let file = workspace.join("count.txt");
    let padding = "a line to make each read's reply long\n".repeat(1200);
    std::fs::write(&file, format!("count: 0\n{padding}")).unwrap();
    let ws = workspace.to_str().unwrap();
    let mut server = RawStdio::start_over(
        over,
        home.path(),
        &["--workspace", ws, "--mode", "acceptEdits"],
        "{}",
    );
    const PAIRS: u64 = 100;
    let file = file.to_str().unwrap();
    let lines: Vec<String> = (0..PAIRS)
        .flat_map(|k| {
            [
                call_line(2 * k + 1, "read", serde_json::json!({"file_path": file})),
                call_line(
                    2 * k + 2,
                    "edit",
                    serde_json::json!({
                        "file_path": file,
                        "old_string": format!("count: {k}\n"),
                        "new_string": format!("count: {}\n", k + 1),
                    }),
                ),
            ]
        })
        .collect();
    server.send(&lines.join("\n"));
    let mut replies = HashMap::new();
    for _ in 0..2 * PAIRS {
        let reply = server.reply();
        replies.insert(reply["id"].as_u64().unwrap(), reply);
    }
    for k in 0..PAIRS {
        let (read, failed) = call_text(&replies[&(2 * k + 1)]);
        assert!(
            !failed && read.contains(&format!("count: {k}")),
            "read {k} ran out of order: {read}"
        );
        let (edit, failed) = call_text(&replies[&(2 * k + 2)]);
        assert!(!failed, "edit {k} ran out of order: {edit}");
    }
    assert_eq!(
        std::fs::read_to_string(file).unwrap(),
        format!("count: {PAIRS}\n{padding}")
    );
}

/// An exclusive call written right after a running one waits for it (the
/// executor's rule), so the `sleep` finishes, and replies, first.
#[test]
fn an_exclusive_call_written_after_a_running_one_waits_for_it() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let workspace = workspace.path().canonicalize().unwrap();
    let ws = workspace.to_str().unwrap();
    let mut server = RawStdio::start(
        home.path(),
        &["--workspace", ws, "--mode", "acceptEdits"],
        "{}",
    );
    for round in 0..5u64 {
        let target = format!("{ws}/w{round}.txt");
        server.send(&format!(
            "{}\n{}",
            call_line(1000 + 2 * round, "sleep", serde_json::json!({"ms": 300})),
            call_line(
                1001 + 2 * round,
                "write",
                serde_json::json!({"file_path": target, "content": "x"})
            )
        ));
        let first = server.reply();
        assert_eq!(
            first["id"],
            1000 + 2 * round,
            "the write overtook the sleep: {first}"
        );
        let second = server.reply();
        assert!(!call_text(&second).1, "{second}");
    }
}

/// Closing stdin ends the server at once: the calls in flight are
/// cancelled, not given rmcp's 5 s to finish (issue 14).
#[test]
fn closing_stdin_cancels_the_calls_in_flight_at_once() {
    closing_stdin_cancels_the_calls_in_flight_at_once_over(Over::Pipes);
}

#[test]
fn closing_a_socket_stdin_cancels_the_calls_in_flight_at_once() {
    closing_stdin_cancels_the_calls_in_flight_at_once_over(Over::Sockets);
}

fn closing_stdin_cancels_the_calls_in_flight_at_once_over(over: Over) {
    use std::time::{Duration, Instant};
    let home = tempfile::tempdir().unwrap();
    let mut server = RawStdio::start_over(over, home.path(), &[], "{}");
    server.send(&call_line(1, "sleep", serde_json::json!({"ms": 60000})));
    std::thread::sleep(Duration::from_millis(300));
    drop(server.stdin.take());
    let closed = Instant::now();
    let status = exit_of(&mut server.child, "after stdin closed");
    let took = closed.elapsed();
    assert!(status.success(), "{status}");
    assert!(
        took < Duration::from_millis(2500),
        "the server took {took:?} to exit after stdin closed"
    );
}

/// A permission question the user declines says how to allow the call
/// without asking (issue 14).
#[test]
fn a_declined_elicitation_says_how_to_allow_the_call() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let ws = workspace.path().canonicalize().unwrap();
    let ws = ws.to_str().unwrap();
    let mut server = RawStdio::start(
        home.path(),
        &["--workspace", ws],
        r#"{"elicitation":{"form":{}}}"#,
    );
    let target = format!("{ws}/no.txt");
    server.send(&call_line(
        1,
        "write",
        serde_json::json!({"file_path": target, "content": "no"}),
    ));
    let question = server.next();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    server.send(
        &serde_json::json!({
            "jsonrpc": "2.0",
            "id": question["id"],
            "result": {"action": "decline"},
        })
        .to_string(),
    );
    let (text, failed) = call_text(&server.reply());
    assert!(failed && text.contains("declined"), "{text}");
    for how in ["permissions.allow = [\"write\"]", "--mode", "--yes"] {
        assert!(text.contains(how), "{how:?} is not in: {text}");
    }
    assert!(!Path::new(&target).exists());
}

/// `airlock ARGS mcp --http 127.0.0.1:0 EXTRA`, and where it listens; its
/// stderr is kept.
struct HttpServer {
    child: std::process::Child,
    addr: std::net::SocketAddr,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl HttpServer {
    fn start(home: &Path, extra: &[&str], setup: impl FnOnce(&mut Command)) -> HttpServer {
        use std::io::BufRead;
        use std::process::Stdio;
        let mut command = isolated(Command::new(env!("CARGO_BIN_EXE_airlock")), home);
        command
            .args(["mcp", "--http", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        setup(&mut command);
        let mut child = command.spawn().unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let mut before = String::new();
        let url = loop {
            let line = lines
                .next()
                .and_then(Result::ok)
                .unwrap_or_else(|| panic!("the server did not say where it listens: {before}"));
            match line.split_once("http://") {
                Some((_, url)) => break url.to_string(),
                None => before.push_str(&format!("{line}\n")),
            }
        };
        let addr = url.trim_end_matches("/mcp").parse().unwrap();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(before));
        let kept = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut kept = kept.lock().unwrap();
                kept.push_str(&line);
                kept.push('\n');
            }
        });
        HttpServer {
            child,
            addr,
            stderr,
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One keep-alive HTTP/1.1 connection, spoken by hand.
struct Http {
    reader: std::io::BufReader<std::net::TcpStream>,
    session: Option<String>,
    /// The `Authorization` header's value, sent with every request.
    authorization: Option<String>,
}

/// A response: its status, headers (lower-case names) and body.
struct Reply {
    status: u16,
    headers: HashMap<String, String>,
    body: String,
}

impl Reply {
    /// The JSON-RPC message in the body (JSON, or the SSE event that holds
    /// one).
    fn message(&self) -> serde_json::Value {
        let json = self
            .body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|d| d.starts_with('{'))
            .unwrap_or(&self.body);
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {:?}", self.body))
    }
}

impl Http {
    fn connect(addr: std::net::SocketAddr) -> Http {
        let stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        Http {
            reader: std::io::BufReader::new(stream),
            session: None,
            authorization: None,
        }
    }

    /// Writes a request (with the session's id, once there is one) in one
    /// write.
    fn write(&mut self, method: &str, path: &str, body: &str) {
        use std::io::Write;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             Accept: application/json, text/event-stream\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
        if let Some(session) = &self.session {
            head.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
        }
        if let Some(authorization) = &self.authorization {
            head.push_str(&format!("Authorization: {authorization}\r\n"));
        }
        let request = format!("{head}\r\n{body}");
        self.reader.get_mut().write_all(request.as_bytes()).unwrap();
    }

    /// Reads one response (`Content-Length` or chunked).
    fn read(&mut self) -> std::io::Result<Reply> {
        use std::io::{BufRead, Read};
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not a status line: {line:?}"));
        let mut headers = HashMap::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let Some((name, value)) = line.trim_end().split_once(':') else {
                break;
            };
            headers.insert(name.to_ascii_lowercase(), value.trim().to_string());
        }
        let mut body = Vec::new();
        if headers.get("transfer-encoding").map(String::as_str) == Some("chunked") {
            loop {
                line.clear();
                self.reader.read_line(&mut line)?;
                let size = usize::from_str_radix(line.trim(), 16).unwrap();
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk)?;
                body.extend_from_slice(&chunk[..size]);
                if size == 0 {
                    break;
                }
            }
        } else {
            let length = headers
                .get("content-length")
                .map_or(0, |l| l.parse().unwrap());
            body.resize(length, 0);
            self.reader.read_exact(&mut body)?;
        }
        Ok(Reply {
            status,
            headers,
            body: String::from_utf8(body).unwrap(),
        })
    }

    fn request(&mut self, method: &str, path: &str, body: &str) -> Reply {
        self.write(method, path, body);
        self.read().unwrap()
    }

    /// `initialize`, then `notifications/initialized`: the connection is in
    /// a session from then on. Returns the reply to `initialize`.
    fn initialize(&mut self) -> serde_json::Value {
        let reply = self.open_session(0);
        assert_eq!(reply.status, 200, "{}", reply.body);
        self.session = Some(reply.headers["mcp-session-id"].clone());
        let initialized = reply.message();
        let reply = self.request(
            "POST",
            "/mcp",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        assert_eq!(reply.status, 202, "{}", reply.body);
        initialized
    }

    /// An `initialize` request, which opens a session.
    fn open_session(&mut self, id: u64) -> Reply {
        self.request(
            "POST",
            "/mcp",
            &format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
            ),
        )
    }

    fn ping(&mut self, id: u64) -> Reply {
        self.request(
            "POST",
            "/mcp",
            &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
        )
    }
}

/// Replies on a kept-alive connection go out at once: without
/// `TCP_NODELAY` each one after the first waits about 40 ms for the
/// client's delayed ACK (issue 14, defect 1). The bound is generous; it
/// only catches that stall.
#[test]
fn http_replies_on_a_kept_alive_connection_do_not_wait_for_a_delayed_ack() {
    use std::time::{Duration, Instant};
    let home = tempfile::tempdir().unwrap();
    let server = HttpServer::start(home.path(), &[], |_| {});
    let mut client = Http::connect(server.addr);
    client.initialize();
    let started = Instant::now();
    for id in 1..=20 {
        let reply = client.ping(id);
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.message()["id"], id);
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(400),
        "20 pings on one connection took {took:?}"
    );
}

/// `mcp --server-name NAME` lets clients reach the server by NAME (the
/// `Host` header) and no other name. `--allow-host`, which meant that after
/// `mcp` before, is the tools' network grant wherever it is, and a server
/// given one without a name says which flag names it.
#[test]
fn server_names_are_the_host_headers_let_through() {
    let home = tempfile::tempdir().unwrap();
    let server = HttpServer::start(home.path(), &["--server-name", "airlock.test"], |_| {});
    let named = status_of(&server, "airlock.test:8080");
    assert!(!named.contains(" 403 "), "{named}");
    let other = status_of(&server, "evil.test");
    assert!(other.contains(" 403 "), "{other}");
    drop(server);

    let server = HttpServer::start(home.path(), &["--allow-host", "airlock.test"], |_| {});
    let refused = status_of(&server, "airlock.test");
    assert!(refused.contains(" 403 "), "{refused}");
    let said = server.stderr.lock().unwrap().clone();
    assert!(
        said.contains("--allow-host airlock.test grants the tools the network")
            && said.contains("--server-name NAME"),
        "{said}"
    );
}

/// The status line of a `ping` posted to `server` with `host` as its
/// `Host` header.
fn status_of(server: &HttpServer, host: &str) -> String {
    use std::io::{BufRead, Write};
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(stream)
        .read_line(&mut line)
        .unwrap();
    line
}

/// A request whose first message is its response is answered with that
/// one JSON object, so a client that stops reading at the response keeps
/// its connection (the Python SDK opened a new one for every call); a call
/// whose progress comes first stays an event stream, ended with the
/// response.
#[test]
fn http_replies_are_one_json_object_unless_notifications_come_first() {
    let home = tempfile::tempdir().unwrap();
    let server = HttpServer::start(home.path(), &[], |_| {});
    let mut client = Http::connect(server.addr);
    client.initialize();
    let reply = client.ping(1);
    assert_eq!(
        reply.headers["content-type"], "application/json",
        "{}",
        reply.body
    );
    let message: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(
        message,
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {}})
    );

    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":400},"_meta":{"progressToken":"p"}}}"#;
    let reply = client.request("POST", "/mcp", call);
    assert_eq!(
        reply.headers["content-type"], "text/event-stream",
        "{}",
        reply.body
    );
    let messages: Vec<serde_json::Value> = reply
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(messages.len() >= 2, "{}", reply.body);
    let (last, before) = messages.split_last().unwrap();
    assert!(
        before
            .iter()
            .all(|m| m["method"] == "notifications/progress"),
        "{}",
        reply.body
    );
    assert_eq!(last["id"], 2, "{}", reply.body);
    assert_eq!(call_text(last), ("Slept 400 ms.".to_string(), false));
    assert_eq!(client.ping(3).status, 200, "the connection is still usable");
}

/// Only `/mcp` is served; a body that is not a JSON-RPC message is a
/// JSON-RPC error with status 400; `DELETE` ends a session with 204 (what
/// MCP clients expect) and is 404 for an unknown one (issue 14); a request
/// in a session the server does not hold is 404 with a JSON-RPC error.
#[test]
fn http_answers_what_the_protocol_says() {
    let home = tempfile::tempdir().unwrap();
    let server = HttpServer::start(home.path(), &[], |_| {});
    let mut client = Http::connect(server.addr);
    for path in ["/", "/other", "/mcp/x"] {
        let reply = client.request("POST", path, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert_eq!(reply.status, 404, "{path}: {}", reply.body);
    }
    let reply = client.request("POST", "/mcp", r#"{"jsonrpc":"2.0","id":1,"#);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.message()["error"]["code"], -32700, "{}", reply.body);
    let reply = client.request("POST", "/mcp", r#"{"jsonrpc":"2.0","id":7,"what":1}"#);
    assert_eq!(reply.status, 400, "{}", reply.body);
    let error = reply.message();
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert_eq!(error["id"], 7, "{error}");

    client.session = Some("no-such-session".into());
    let reply = client.request("DELETE", "/mcp", "");
    assert_eq!(reply.status, 404, "{}", reply.body);
    client.session = None;
    client.initialize();
    assert_eq!(client.ping(1).status, 200);
    let reply = client.request("DELETE", "/mcp", "");
    assert_eq!(reply.status, 204, "{}", reply.body);
    // A session this server does not hold (ended, or opened on another
    // replica) is a 404 a client can act on: a JSON-RPC error saying why.
    let reply = client.ping(2);
    assert_eq!(reply.status, 404, "the session ended");
    let error = reply.message();
    assert_eq!(error["error"]["code"], -32001, "{error}");
    assert_eq!(error["id"], 2, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("another replica opened it")),
        "{error}"
    );
    assert_eq!(client.request("DELETE", "/mcp", "").status, 404);
}

/// `--idle-timeout` ends a session that had no request for that long; it
/// is then unknown (404), so the client starts a new one.
#[test]
fn an_idle_http_session_ends_after_the_configured_time() {
    let home = tempfile::tempdir().unwrap();
    let server = HttpServer::start(home.path(), &["--idle-timeout", "1"], |_| {});
    let mut client = Http::connect(server.addr);
    client.initialize();
    assert_eq!(client.ping(1).status, 200);
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let reply = client.ping(2);
    assert_eq!(reply.status, 404, "{}", reply.body);
}

/// A connection over `--max-connections` waits until one closes.
#[test]
fn connections_over_the_cap_wait_for_one_to_close() {
    use std::time::Duration;
    let home = tempfile::tempdir().unwrap();
    let server = HttpServer::start(home.path(), &["--max-connections", "1"], |_| {});
    let mut first = Http::connect(server.addr);
    first.initialize();
    let mut second = Http::connect(server.addr);
    second
        .reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    second.write("POST", "/other", "{}");
    let waited = second.read();
    assert!(
        waited.is_err(),
        "a connection over the cap was served: {}",
        waited.map(|r| r.status).unwrap_or_default()
    );
    drop(first);
    second
        .reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(second.read().unwrap().status, 404);
}

/// Sockets that never send a byte, or send a request's head slowly, hold
/// no slot a caller needs: a newcomer closes the oldest of them, and each
/// is closed once `--header-timeout` passes without a whole head.
#[test]
fn idle_and_slow_connections_do_not_keep_a_caller_out() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    let home = tempfile::tempdir().unwrap();
    let server = HttpServer::start(
        home.path(),
        &["--max-connections", "4", "--header-timeout", "2"],
        |_| {},
    );
    let mut idle: Vec<std::net::TcpStream> = (0..12)
        .map(|_| std::net::TcpStream::connect(server.addr).unwrap())
        .collect();
    for _ in 0..4 {
        let mut slow = std::net::TcpStream::connect(server.addr).unwrap();
        slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .unwrap();
        idle.push(slow);
    }
    let started = Instant::now();
    let mut canary = Http::connect(server.addr);
    canary
        .reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    canary.initialize();
    assert_eq!(canary.ping(1).status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the canary waited {:?}",
        started.elapsed()
    );
    // Every one of them is closed by the server: evicted, or past the
    // header timeout.
    for socket in &mut idle {
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0; 512];
        loop {
            match socket.read(&mut buf) {
                Ok(0) => break,
                // A 408 for the slow head, then the close.
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!(
                    "a silent socket was still open after {:?}: {e}",
                    started.elapsed()
                ),
            }
        }
    }
}

/// With the file descriptor limit reached, `accept` fails (`EMFILE`): the
/// server logs it, backs off and serves again once descriptors are free
/// (issue 14, defect 3).
#[cfg(target_os = "linux")]
#[test]
fn running_out_of_file_descriptors_does_not_end_the_http_server() {
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};
    let home = tempfile::tempdir().unwrap();
    let server = HttpServer::start(home.path(), &[], |command| {
        // SAFETY: setrlimit is async-signal-safe, and the closure touches
        // nothing else between fork and exec.
        unsafe {
            command.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 64,
                    rlim_max: 64,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let mut held = Vec::new();
    let started = Instant::now();
    while !server
        .stderr
        .lock()
        .unwrap()
        .contains("Too many open files")
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "accept never failed with {} connections open",
            held.len()
        );
        if held.len() < 200 {
            held.push(std::net::TcpStream::connect(server.addr).unwrap());
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    drop(held);
    let mut client = Http::connect(server.addr);
    client.initialize();
    assert_eq!(client.ping(1).status, 200);
    let mut server = server;
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server exited"
    );
}

/// A port in use is a configuration error (exit 3), said plainly.
#[test]
fn a_port_in_use_exits_3_saying_so() {
    let home = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = isolated(Command::new(env!("CARGO_BIN_EXE_airlock")), home.path())
        .args(["mcp", "--http", &port])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on 127.0.0.1:{port}"))
            && stderr.contains("another program uses the port"),
        "{stderr}"
    );
}

/// `--max-sessions` caps the sessions open at once: a client that would
/// open one more gets a 503 with a JSON-RPC error naming the limit, and a
/// place freed by `DELETE` can be taken again (issue 13, fairness).
#[test]
fn sessions_over_the_cap_are_refused_with_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let server = HttpServer::start(home.path(), &["--max-sessions", "2"], |_| {});
    let mut first = Http::connect(server.addr);
    first.initialize();
    let mut second = Http::connect(server.addr);
    second.initialize();
    let mut third = Http::connect(server.addr);
    let refused = third.open_session(7);
    assert_eq!(refused.status, 503, "{}", refused.body);
    let error = &refused.message()["error"];
    assert_eq!(refused.message()["id"], 7);
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("--max-sessions"),
        "{error}"
    );
    // Requests in an open session are not refused.
    assert_eq!(first.ping(1).status, 200);
    assert_eq!(first.request("DELETE", "/mcp", "").status, 204);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let mut retry = Http::connect(server.addr);
        let reply = retry.open_session(8);
        if reply.status == 200 {
            break;
        }
        assert_eq!(reply.status, 503, "{}", reply.body);
        assert!(
            std::time::Instant::now() < deadline,
            "the ended session's place never came back"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A component swapped under a running server is held (the code approved
/// before runs) until approved: the client is asked once per change, by
/// elicitation, and its approval is recorded and served (issue 13).
#[test]
fn changed_code_is_offered_for_approval_over_elicitation() {
    let workspace = tempfile::tempdir().unwrap();
    let tool_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        tool_dir.path().join("write.wasm"),
        bundled("airlock-tool-write"),
    )
    .unwrap();
    let out = python_client(
        "approve.py",
        &[&workspace.path().canonicalize().unwrap(), tool_dir.path()],
    );
    assert!(out.contains("approve ok"), "{out}");
}

/// A tool directory holding the `logger` test guest (it logs the lines it
/// is given), and a workspace with `a.txt` and `big.txt` (20000 lines, too
/// large for `read` to return whole).
fn logger_and_big_workspace() -> (tempfile::TempDir, tempfile::TempDir) {
    let tools = tempfile::tempdir().unwrap();
    std::fs::copy(
        guests::test_guest("airlock-test-logger"),
        tools.path().join("logger.wasm"),
    )
    .unwrap();
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("a.txt"), "hello mcp\n").unwrap();
    let big: String = (1..=20_000).map(|k| format!("line-{k}\n")).collect();
    std::fs::write(workspace.path().join("big.txt"), big).unwrap();
    (tools, workspace)
}

/// Logging and resources through the Python SDK, over stdio and HTTP
/// (`tests/mcp/logging_resources.py`): a tool's log lines filtered by the
/// session's level, a spilled result listed and read back whole, every
/// other URI -32002.
#[test]
fn log_lines_and_spilled_results_reach_the_python_sdk() {
    let (tools, workspace) = logger_and_big_workspace();
    let out = python_client(
        "logging_resources.py",
        &[&workspace.path().canonicalize().unwrap(), tools.path()],
    );
    println!("{out}");
}

/// Every log line a call lets through comes before the call's reply, in
/// the order the tool logged them, filtered by the session's level (`info`
/// until it sets one), its level named as RFC 5424 does and its logger the
/// tool; nothing of the call comes after its reply.
#[test]
fn a_calls_log_lines_come_before_its_reply_in_order_at_the_sessions_level() {
    let home = tempfile::tempdir().unwrap();
    let (tools, _workspace) = logger_and_big_workspace();
    let dir = tools.path().to_str().unwrap();
    let mut server = RawStdio::start(home.path(), &["--no-bundled", "--tools", dir], "{}");
    let lines: Vec<serde_json::Value> = ["trace", "debug", "info", "warn", "error"]
        .iter()
        .cycle()
        .take(40)
        .enumerate()
        .map(|(i, level)| serde_json::json!({"level": level, "message": format!("{level} {i}")}))
        .collect();
    // The messages up to the reply to `id`: (level, text) of each log line.
    let until_reply = |server: &mut RawStdio, id: u64| -> Vec<(String, String)> {
        let mut logged = Vec::new();
        loop {
            let message = server.next();
            if message["id"] == id && message.get("method").is_none() {
                assert!(message.get("error").is_none(), "{message}");
                return logged;
            }
            if message["method"] == "notifications/message" {
                let params = &message["params"];
                assert_eq!(params["logger"], "logger", "{message}");
                logged.push((
                    params["level"].as_str().unwrap().to_owned(),
                    params["data"].as_str().unwrap().to_owned(),
                ));
            }
        }
    };
    let expected = |min: usize| -> Vec<(String, String)> {
        let rfc = ["debug", "debug", "info", "warning", "error"];
        let rank = [0, 0, 1, 3, 4];
        lines
            .iter()
            .enumerate()
            .filter(|(i, _)| rank[i % 5] >= min)
            .map(|(i, l)| {
                (
                    rfc[i % 5].to_owned(),
                    l["message"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let call = serde_json::json!({"lines": lines});
    server.send(&call_line(1, "logger", call.clone()));
    assert_eq!(until_reply(&mut server, 1), expected(1), "info and above");
    server
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}"#);
    assert!(until_reply(&mut server, 2).is_empty());
    for id in 3..23 {
        server.send(&call_line(id, "logger", call.clone()));
        assert_eq!(until_reply(&mut server, id), expected(0), "call {id}");
    }
    server.send(
        r#"{"jsonrpc":"2.0","id":23,"method":"logging/setLevel","params":{"level":"warning"}}"#,
    );
    until_reply(&mut server, 23);
    server.send(&call_line(24, "logger", call));
    assert_eq!(
        until_reply(&mut server, 24),
        expected(3),
        "warning and above"
    );
    server.send(r#"{"jsonrpc":"2.0","id":25,"method":"ping"}"#);
    let next = server.next();
    assert_eq!(
        next["id"], 25,
        "nothing of the call after its reply: {next}"
    );
}

/// A JSON-RPC request line.
fn request_line(id: u64, method: &str, params: serde_json::Value) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// A `tools/call` that asks to run as a task kept `ttl` ms.
fn task_call_line(id: u64, tool: &str, arguments: serde_json::Value, ttl: u64) -> String {
    request_line(
        id,
        "tools/call",
        serde_json::json!({"name": tool, "arguments": arguments, "task": {"ttl": ttl}}),
    )
}

/// The `tasks` capability of MCP 2025-11-25, as Airlock declares it.
fn tasks_capability() -> serde_json::Value {
    serde_json::json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// The task a `CreateTaskResult` reply holds, checked for the fields every
/// task carries; and its id.
fn created_task(reply: &serde_json::Value) -> (serde_json::Value, String) {
    let task = reply["result"]["task"].clone();
    let id = task["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("not a task: {reply}"))
        .to_owned();
    assert_eq!(id.len(), 32, "{task}");
    assert!(task["pollInterval"].as_u64().is_some(), "{task}");
    for time in ["createdAt", "lastUpdatedAt"] {
        let at = task[time].as_str().unwrap_or_default();
        assert!(
            at.len() == 24 && at.as_bytes()[10] == b'T' && at.ends_with('Z'),
            "{time}: {task}"
        );
    }
    (task, id)
}

/// A call asked to run as a task (MCP 2025-11-25) is answered at once with
/// a working task; `tasks/get` and `tasks/list` show it, `tasks/result`
/// waits for it and returns the call's result tied to the task, and then
/// it is completed; every tool says it may run as a task, and a plain call
/// is answered as before (issue 14).
#[test]
fn a_call_run_as_a_task_over_stdio_is_answered_at_once_polled_and_its_result_fetched() {
    use serde_json::json;
    use std::time::{Duration, Instant};
    let home = tempfile::tempdir().unwrap();
    let mut server = RawStdio::start(home.path(), &[], "{}");
    assert_eq!(
        server.initialized["result"]["capabilities"]["tasks"],
        tasks_capability(),
        "{}",
        server.initialized
    );
    server.send(&request_line(1, "tools/list", json!({})));
    let listed = server.reply();
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "sleep"), "{listed}");
    for tool in tools {
        assert_eq!(
            tool["execution"],
            json!({"taskSupport": "optional"}),
            "{tool}"
        );
    }

    server.send(&call_line(2, "sleep", json!({"ms": 0})));
    let plain = server.reply();
    assert!(!call_text(&plain).1, "{plain}");
    assert!(plain["result"].get("task").is_none(), "{plain}");
    assert!(plain["result"].get("_meta").is_none(), "{plain}");

    let started = Instant::now();
    server.send(&task_call_line(3, "sleep", json!({"ms": 300}), 60_000));
    let created = server.reply();
    assert_eq!(created["id"], 3, "{created}");
    let (task, id) = created_task(&created);
    assert_eq!(task["status"], "working", "{created}");
    assert_eq!(task["ttl"], 60_000, "{created}");
    assert!(created["result"].get("content").is_none(), "{created}");

    server.send(&request_line(4, "tasks/get", json!({"taskId": id})));
    let polled = server.reply();
    assert_eq!(polled["result"]["taskId"], id.as_str(), "{polled}");
    assert_eq!(polled["result"]["status"], "working", "{polled}");

    server.send(&request_line(5, "tasks/list", json!({})));
    let listed = server.reply();
    let ids: Vec<&str> = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert_eq!(ids, [id.as_str()], "{listed}");

    // The reply to `id`, and the task status notifications before it.
    let mut statuses = Vec::new();
    let mut until_reply = |server: &mut RawStdio, id: u64| loop {
        let message = server.next();
        if message["method"] == "notifications/tasks/status" {
            statuses.push(message["params"].clone());
        } else if message.get("method").is_none() {
            assert_eq!(message["id"], id, "{message}");
            break message;
        }
    };
    server.send(&request_line(6, "tasks/result", json!({"taskId": id})));
    let result = until_reply(&mut server, 6);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "tasks/result did not wait for the call"
    );
    assert!(!call_text(&result).1, "{result}");
    assert_eq!(
        call_text(&result).0,
        "Slept 300 ms.",
        "the call's own result"
    );
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"],
        json!({"taskId": id}),
        "{result}"
    );
    // The task's end was also sent, once: the task ended before
    // `tasks/result` answered, and this reply comes after that one.
    server.send(&request_line(7, "tasks/get", json!({"taskId": id})));
    let done = until_reply(&mut server, 7);
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(statuses.len(), 1, "{statuses:?}");
    assert_eq!(statuses[0]["taskId"], id.as_str());
    assert_eq!(statuses[0]["status"], "completed");
    server.send(&request_line(8, "tasks/cancel", json!({"taskId": id})));
    let refused = server.reply();
    assert_eq!(refused["error"]["code"], -32602, "an ended task: {refused}");

    let unknown = "0123456789abcdef0123456789abcdef";
    for (n, method) in [(9, "tasks/get"), (10, "tasks/result"), (11, "tasks/cancel")] {
        server.send(&request_line(n, method, json!({"taskId": unknown})));
        let reply = server.reply();
        assert_eq!(reply["error"]["code"], -32602, "{method}: {reply}");
    }
}

/// `tasks/cancel` cancels a working task's call in the executor: the task
/// is `cancelled`, its result is an error, and an exclusive call sent next
/// runs at once instead of waiting for a minute's sleep (issue 14).
#[test]
fn a_cancelled_task_stops_its_call() {
    use serde_json::json;
    use std::time::{Duration, Instant};
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let workspace = workspace.path().canonicalize().unwrap();
    let ws = workspace.to_str().unwrap();
    let mut server = RawStdio::start(
        home.path(),
        &["--workspace", ws, "--mode", "acceptEdits"],
        "{}",
    );
    server.send(&task_call_line(1, "sleep", json!({"ms": 60_000}), 600_000));
    let (_, id) = created_task(&server.reply());
    std::thread::sleep(Duration::from_millis(300));
    server.send(&request_line(2, "tasks/cancel", json!({"taskId": id})));
    let cancelled = server.reply();
    assert_eq!(cancelled["result"]["taskId"], id.as_str(), "{cancelled}");
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");

    let started = Instant::now();
    let target = format!("{ws}/after.txt");
    server.send(&call_line(
        3,
        "write",
        json!({"file_path": target, "content": "x"}),
    ));
    let written = server.reply();
    assert!(!call_text(&written).1, "{written}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the write waited {:?} for the cancelled sleep",
        started.elapsed()
    );

    server.send(&request_line(4, "tasks/get", json!({"taskId": id})));
    assert_eq!(server.reply()["result"]["status"], "cancelled");
    server.send(&request_line(5, "tasks/result", json!({"taskId": id})));
    let result = server.reply();
    let message = result["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("cancelled"), "{result}");
}

/// A call run as a task takes its turn as any call does: a `write` sent as
/// a task and a `read` of its file written right behind it reach the
/// executor in that order, so each read finds what its write wrote
/// (issue 14).
#[test]
fn a_task_takes_its_turn_in_the_order_calls_were_written() {
    use serde_json::json;
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let workspace = workspace.path().canonicalize().unwrap();
    let ws = workspace.to_str().unwrap();
    let mut server = RawStdio::start(
        home.path(),
        &["--workspace", ws, "--mode", "acceptEdits"],
        "{}",
    );
    const ROUNDS: u64 = 100;
    let lines: Vec<String> = (0..ROUNDS)
        .flat_map(|k| {
            let file = format!("{ws}/f{k}.txt");
            [
                task_call_line(
                    2 * k + 1,
                    "write",
                    json!({"file_path": file, "content": format!("v{k}\n")}),
                    60_000,
                ),
                call_line(2 * k + 2, "read", json!({"file_path": file})),
            ]
        })
        .collect();
    server.send(&lines.join("\n"));
    let mut replies = HashMap::new();
    for _ in 0..2 * ROUNDS {
        let reply = server.reply();
        replies.insert(reply["id"].as_u64().unwrap(), reply);
    }
    for k in 0..ROUNDS {
        created_task(&replies[&(2 * k + 1)]);
        let (read, failed) = call_text(&replies[&(2 * k + 2)]);
        assert!(
            !failed && read.contains(&format!("v{k}")),
            "read {k} overtook the task before it: {read}"
        );
    }
}

/// A task is forgotten when its ttl ends, and its call, still running, is
/// cancelled then: an exclusive call sent next runs at once (issue 14).
#[test]
fn a_task_is_forgotten_when_its_ttl_ends_and_its_call_is_stopped() {
    use serde_json::json;
    use std::time::{Duration, Instant};
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let workspace = workspace.path().canonicalize().unwrap();
    let ws = workspace.to_str().unwrap();
    let mut server = RawStdio::start(
        home.path(),
        &["--workspace", ws, "--mode", "acceptEdits"],
        "{}",
    );
    server.send(&task_call_line(1, "sleep", json!({"ms": 60_000}), 1000));
    let (task, id) = created_task(&server.reply());
    assert_eq!(task["ttl"], 1000, "{task}");
    server.send(&request_line(2, "tasks/get", json!({"taskId": id})));
    assert_eq!(server.reply()["result"]["status"], "working");
    std::thread::sleep(Duration::from_millis(1500));
    server.send(&request_line(3, "tasks/get", json!({"taskId": id})));
    let gone = server.reply();
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
    let started = Instant::now();
    let target = format!("{ws}/after.txt");
    server.send(&call_line(
        4,
        "write",
        json!({"file_path": target, "content": "x"}),
    ));
    let written = server.reply();
    assert!(!call_text(&written).1, "{written}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the write waited {:?} for the expired task's sleep",
        started.elapsed()
    );
}

/// Over HTTP, a session's tasks are its own: another session cannot see,
/// list, wait for or cancel them; the session that made one gets its
/// result (issue 14).
#[test]
fn tasks_over_http_belong_to_the_session_that_made_them() {
    use serde_json::json;
    let home = tempfile::tempdir().unwrap();
    let server = HttpServer::start(home.path(), &[], |_| {});
    let mut owner = Http::connect(server.addr);
    let initialized = owner.initialize();
    assert_eq!(
        initialized["result"]["capabilities"]["tasks"],
        tasks_capability(),
        "{initialized}"
    );
    let mut other = Http::connect(server.addr);
    other.initialize();
    let post = |client: &mut Http, line: String| {
        let reply = client.request("POST", "/mcp", &line);
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.message()
    };

    let listed = post(&mut owner, request_line(1, "tools/list", json!({})));
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert!(!tools.is_empty(), "{listed}");
    for tool in tools {
        assert_eq!(tool["execution"]["taskSupport"], "optional", "{tool}");
    }

    let created = post(
        &mut owner,
        task_call_line(2, "sleep", json!({"ms": 300}), 60_000),
    );
    let (task, id) = created_task(&created);
    assert_eq!(task["status"], "working", "{created}");

    for (n, method) in [(3, "tasks/get"), (4, "tasks/result"), (5, "tasks/cancel")] {
        let reply = post(&mut other, request_line(n, method, json!({"taskId": id})));
        assert_eq!(reply["error"]["code"], -32602, "{method}: {reply}");
    }
    let theirs = post(&mut other, request_line(6, "tasks/list", json!({})));
    assert_eq!(theirs["result"]["tasks"], json!([]), "{theirs}");

    let mine = post(&mut owner, request_line(7, "tasks/list", json!({})));
    assert_eq!(mine["result"]["tasks"][0]["taskId"], id.as_str(), "{mine}");
    let result = post(
        &mut owner,
        request_line(8, "tasks/result", json!({"taskId": id})),
    );
    assert!(!call_text(&result).1, "{result}");
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str(),
        "{result}"
    );
    let done = post(
        &mut owner,
        request_line(9, "tasks/get", json!({"taskId": id})),
    );
    assert_eq!(done["result"]["status"], "completed", "{done}");
}

/// Tasks through the Python SDK's own 2025-11-25 types, over stdio and
/// HTTP (`tests/mcp/tasks.py`): every reply reads as the SDK's models; a
/// task answered at once, polled, listed and its result fetched, a long
/// one cancelled (which stops it), another session's task not found.
#[test]
fn tasks_reach_the_python_sdk() {
    let workspace = tempfile::tempdir().unwrap();
    let out = python_client("tasks.py", &[&workspace.path().canonicalize().unwrap()]);
    println!("{out}");
}

/// The audience and issuer of the tests' access tokens.
const RESOURCE: &str = "https://mcp.test/mcp";
const ISSUER: &str = "https://auth.test";

/// A signing key of the tests' authorization server, and its JWK.
struct SigningKey {
    kid: String,
    alg: jsonwebtoken::Algorithm,
    encoding: jsonwebtoken::EncodingKey,
    jwk: serde_json::Value,
}

fn b64url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The RSA key in `tests/fixtures/auth-test-rsa.der` (a test key, PKCS#1:
/// ring cannot make RSA keys), for RS256.
fn rsa_key(kid: &str) -> SigningKey {
    let der = include_bytes!("fixtures/auth-test-rsa.der");
    let pair = ring::signature::RsaKeyPair::from_der(der).unwrap();
    let public: ring::rsa::PublicKeyComponents<Vec<u8>> = pair.public().into();
    SigningKey {
        kid: kid.into(),
        alg: jsonwebtoken::Algorithm::RS256,
        encoding: jsonwebtoken::EncodingKey::from_rsa_der(der),
        jwk: serde_json::json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                                "n": b64url(&public.n), "e": b64url(&public.e)}),
    }
}

/// A fresh P-256 key, for ES256.
fn ec_key(kid: &str) -> SigningKey {
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let point = pair.public_key().as_ref();
    SigningKey {
        kid: kid.into(),
        alg: jsonwebtoken::Algorithm::ES256,
        encoding: jsonwebtoken::EncodingKey::from_ec_der(pkcs8.as_ref()),
        jwk: serde_json::json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
                                "alg": "ES256", "x": b64url(&point[1..33]),
                                "y": b64url(&point[33..65])}),
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A token signed by `key`: for [`RESOURCE`], from [`ISSUER`], for
/// `alice`, with the scope `mcp:tools`, for five minutes, with `changes`
/// on top (a null removes a claim).
fn token(key: &SigningKey, changes: serde_json::Value) -> String {
    token_with_header(key, serde_json::json!({}), changes)
}

/// [`token`] with `extra` added to its JOSE header.
fn token_with_header(
    key: &SigningKey,
    extra: serde_json::Value,
    changes: serde_json::Value,
) -> String {
    let mut claims = serde_json::json!({
        "iss": ISSUER, "aud": RESOURCE, "sub": "alice", "client_id": "test-client",
        "iat": now(), "exp": now() + 300, "scope": "mcp:tools",
    });
    for (name, value) in changes.as_object().unwrap() {
        if value.is_null() {
            claims.as_object_mut().unwrap().remove(name);
        } else {
            claims[name] = value.clone();
        }
    }
    let mut header = jsonwebtoken::Header::new(key.alg);
    header.kid = Some(key.kid.clone());
    let mut header = serde_json::to_value(header).unwrap();
    for (name, value) in extra.as_object().unwrap() {
        header[name] = value.clone();
    }
    use base64::Engine as _;
    let part = |value: &serde_json::Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
    };
    let message = format!("{}.{}", part(&header), part(&claims));
    let signature = jsonwebtoken::crypto::sign(message.as_bytes(), &key.encoding, key.alg).unwrap();
    format!("{message}.{signature}")
}

/// A loopback server answering every request with the JWKS it holds now
/// (or, when `hang`, never answering); counts the requests.
struct JwksServer {
    url: String,
    keys: std::sync::Arc<std::sync::Mutex<serde_json::Value>>,
    fetches: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl JwksServer {
    fn start(keys: &[&SigningKey], hang: bool) -> JwksServer {
        use std::io::{BufRead, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/jwks", listener.local_addr().unwrap());
        let server = JwksServer {
            url,
            keys: std::sync::Arc::default(),
            fetches: std::sync::Arc::default(),
        };
        server.serve(keys);
        let (held, fetches) = (server.keys.clone(), server.fetches.clone());
        std::thread::spawn(move || {
            let mut hung = Vec::new();
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if hang {
                    hung.push(stream);
                    continue;
                }
                let mut reader = std::io::BufReader::new(stream);
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let body = held.lock().unwrap().to_string();
                let _ = reader.get_mut().write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
            }
        });
        server
    }

    /// From now on, the JWKS holds `keys`.
    fn serve(&self, keys: &[&SigningKey]) {
        *self.keys.lock().unwrap() = serde_json::json!({
            "keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()
        });
    }

    fn fetches(&self) -> usize {
        self.fetches.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// `airlock mcp --http` with `[auth]` taking tokens for [`RESOURCE`] from
/// [`ISSUER`] with the scope `mcp:tools`, keys from `jwks`.
fn auth_server(home: &Path, jwks: &str) -> HttpServer {
    auth_server_args(home, jwks, &[])
}

/// [`auth_server`] with `args` after `airlock mcp --http`.
fn auth_server_args(home: &Path, jwks: &str, args: &[&str]) -> HttpServer {
    auth_server_full(home, jwks, "scopes = [\"mcp:tools\"]\n", args)
}

/// [`auth_server`] with `auth` (TOML) in `[auth]` instead of its scope.
fn auth_server_with(home: &Path, jwks: &str, auth: &str) -> HttpServer {
    auth_server_full(home, jwks, auth, &[])
}

fn auth_server_full(home: &Path, jwks: &str, auth: &str, args: &[&str]) -> HttpServer {
    let config = home.join("airlock.toml");
    let workspace = home.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "one\n").unwrap();
    std::fs::write(
        &config,
        format!(
            "workspace = {workspace:?}\n\
             [permissions]\ndefault_mode = \"acceptEdits\"\n\
             [auth]\nresource = \"{RESOURCE}\"\nissuers = [\"{ISSUER}\"]\n\
             jwks_url = \"{jwks}\"\njwks_refresh_secs = 1\n{auth}"
        ),
    )
    .unwrap();
    let mut all = vec!["--config", config.to_str().unwrap()];
    all.extend_from_slice(args);
    HttpServer::start(home, &all, |_| {})
}

/// The challenge every refusal carries.
const CHALLENGE: &str = "Bearer resource_metadata=\"https://mcp.test/.well-known/\
                         oauth-protected-resource/mcp\", scope=\"mcp:tools\"";

/// What an `initialize` with `authorization` gets: the status, and the
/// `WWW-Authenticate` header.
fn initialize_with(server: &HttpServer, authorization: Option<String>) -> (u16, String) {
    let mut http = Http::connect(server.addr);
    http.authorization = authorization;
    let reply = http.open_session(0);
    let challenge = reply
        .headers
        .get("www-authenticate")
        .cloned()
        .unwrap_or_default();
    (reply.status, challenge)
}

fn bearer(token: &str) -> Option<String> {
    Some(format!("Bearer {token}"))
}

/// One token holder's sessions take at most its share of the cap
/// (`--max-sessions-per-caller`, a quarter of `--max-sessions` by
/// default): another caller still opens one, and an ended session's place
/// comes back to its caller.
#[test]
fn one_callers_sessions_leave_room_for_another() {
    let home = tempfile::tempdir().unwrap();
    let rsa = rsa_key("rsa-1");
    let jwks = JwksServer::start(&[&rsa], false);
    let server = auth_server_args(home.path(), &jwks.url, &["--max-sessions", "8"]);
    let alice = bearer(&token(&rsa, serde_json::json!({"sub": "alice"})));
    let mut open = Vec::new();
    for _ in 0..2 {
        let mut http = Http::connect(server.addr);
        http.authorization = alice.clone();
        http.initialize();
        open.push(http);
    }
    let mut third = Http::connect(server.addr);
    third.authorization = alice.clone();
    let refused = third.open_session(5);
    assert_eq!(refused.status, 503, "{}", refused.body);
    let message = refused.message()["error"]["message"].to_string();
    assert!(message.contains("--max-sessions-per-caller"), "{message}");
    // Bob is not held back by Alice's sessions.
    let bob = bearer(&token(&rsa, serde_json::json!({"sub": "bob"})));
    assert_eq!(initialize_with(&server, bob).0, 200);
    // An ended session's place is Alice's again.
    assert_eq!(open[0].request("DELETE", "/mcp", "").status, 204);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while initialize_with(&server, alice.clone()).0 != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "the ended session's place never came back"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// MCP's authorization: the protected resource metadata says where to get
/// a token; a request without a valid one gets 401 with the challenge
/// (and why, for a token that fails), one without the scope 403; RS256
/// and ES256 tokens from the JWKS URL are taken, a rotated key is fetched,
/// and a token of a key rotated out is refused.
#[test]
fn http_with_auth_serves_only_valid_tokens_and_says_where_to_get_one() {
    let home = tempfile::tempdir().unwrap();
    let (rsa, ec, next) = (rsa_key("rsa-1"), ec_key("ec-1"), ec_key("ec-2"));
    let jwks = JwksServer::start(&[&rsa, &ec], false);
    let server = auth_server(home.path(), &jwks.url);

    let mut http = Http::connect(server.addr);
    let reply = http.request("GET", "/.well-known/oauth-protected-resource/mcp", "");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&reply.body).unwrap(),
        serde_json::json!({
            "resource": RESOURCE, "authorization_servers": [ISSUER],
            "bearer_methods_supported": ["header"], "scopes_supported": ["mcp:tools"],
        })
    );
    assert_eq!(initialize_with(&server, None), (401, CHALLENGE.to_string()));
    // Another scheme is no bearer token: the challenge alone; a bearer
    // header without a token is a bad request (RFC 6750 §3.1).
    assert_eq!(
        initialize_with(&server, Some("Basic YWxpY2U6cHc=".into())),
        (401, CHALLENGE.to_string())
    );
    assert_eq!(
        initialize_with(&server, Some("Bearer".into())),
        (
            400,
            format!(
                "{CHALLENGE}, error=\"invalid_request\", error_description=\"the Authorization \
                 header is not `Bearer TOKEN`\""
            )
        )
    );
    // A scope claim as a string (`scp`, as Entra ID sends it) or an array.
    for scopes in [
        serde_json::json!({"scope": null, "scp": "mcp:tools other"}),
        serde_json::json!({"scope": ["mcp:tools"]}),
    ] {
        assert_eq!(
            initialize_with(&server, bearer(&token(&rsa, scopes))).0,
            200
        );
    }
    let invalid = |why: &str| {
        (
            401,
            format!("{CHALLENGE}, error=\"invalid_token\", error_description=\"{why}\""),
        )
    };
    for (authorization, why) in [
        ("Bearer not.a.jwt".to_string(), "the token is not a JWT"),
        (
            format!("Bearer {}", "a".repeat(9000)),
            "the token is too long",
        ),
        (
            format!(
                "Bearer {}",
                token(&rsa, serde_json::json!({"aud": "https://other.test/mcp"}))
            ),
            "the token is for another audience",
        ),
        (
            format!(
                "Bearer {}",
                token(&ec, serde_json::json!({"exp": now() - 120}))
            ),
            "the token has expired",
        ),
        (
            format!(
                "Bearer {}",
                token(&ec, serde_json::json!({"nbf": now() + 120}))
            ),
            "the token is not valid yet",
        ),
        (
            format!(
                "Bearer {}",
                token(&rsa, serde_json::json!({"iss": "https://evil.test"}))
            ),
            "the token is from an issuer this server does not trust",
        ),
        (
            format!("Bearer {}", token(&rsa, serde_json::json!({"sub": null}))),
            "the token lacks a claim (exp, iss, aud and sub are required)",
        ),
        (
            // The same key id, another key.
            format!("Bearer {}", token(&ec_key("ec-1"), serde_json::json!({}))),
            "the token's signature does not verify",
        ),
        (
            // Signed by a trusted key, with an extension the server must
            // understand to accept it (RFC 7515 §4.1.11).
            format!(
                "Bearer {}",
                token_with_header(
                    &rsa,
                    serde_json::json!({"crit": ["urn:example:bound"], "urn:example:bound": true}),
                    serde_json::json!({})
                )
            ),
            "the token's header names critical parameters (crit), which this server does not \
             understand",
        ),
    ] {
        assert_eq!(
            initialize_with(&server, Some(authorization.clone())),
            invalid(why),
            "{authorization:.60}"
        );
    }
    // An HMAC token keyed with the RSA key's public modulus: the classic
    // algorithm confusion.
    let hmac = jsonwebtoken::encode(
        &jsonwebtoken::Header {
            kid: Some("rsa-1".into()),
            ..jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256)
        },
        &serde_json::json!({"iss": ISSUER, "aud": RESOURCE, "sub": "mallory", "exp": now() + 60}),
        &jsonwebtoken::EncodingKey::from_secret(rsa.jwk["n"].as_str().unwrap().as_bytes()),
    )
    .unwrap();
    assert_eq!(
        initialize_with(&server, bearer(&hmac)),
        invalid("the token's algorithm is not taken")
    );
    assert_eq!(
        initialize_with(
            &server,
            bearer(&token(&rsa, serde_json::json!({"scope": "other"})))
        ),
        (403, format!("{CHALLENGE}, error=\"insufficient_scope\""))
    );

    // Valid tokens: a session opens and serves.
    for key in [&rsa, &ec] {
        let mut http = Http::connect(server.addr);
        http.authorization = bearer(&token(key, serde_json::json!({})));
        http.initialize();
        let reply = http.request(
            "POST",
            "/mcp",
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert!(
            !reply.message()["result"]["tools"]
                .as_array()
                .unwrap()
                .is_empty()
        );
        // The session is its opener's: without a token it is not served,
        // and another caller's valid token does not reach it.
        http.authorization = None;
        assert_eq!(http.ping(2).status, 401);
        http.authorization = bearer(&token(key, serde_json::json!({"sub": "bob"})));
        assert_eq!(http.ping(3).status, 404);
        http.authorization = bearer(&token(key, serde_json::json!({})));
        assert_eq!(http.ping(4).status, 200);
    }

    // MCP 2026-07-28 calls that name no context run in their caller's own
    // default context: bob's edit does not pass on alice's read. A context
    // a caller created is its own too.
    let file = home.path().join("workspace/notes.txt");
    let file = file.to_str().unwrap();
    let as_user = |sub: &str| {
        let mut connection = modern::Connection::open(&server.addr.to_string());
        connection.authorization = bearer(&token(&rsa, serde_json::json!({"sub": sub})));
        connection
    };
    let (mut alice, mut bob) = (as_user("alice"), as_user("bob"));
    let edit = serde_json::json!({"file_path": file, "old_string": "one", "new_string": "two"});
    let reply = alice.post(&modern::call(
        1,
        "read",
        serde_json::json!({"file_path": file}),
        modern::Cx::Default,
    ));
    assert!(
        modern::text(&reply.message).contains("one"),
        "{}",
        reply.message
    );
    let reply = bob.post(&modern::call(2, "edit", edit.clone(), modern::Cx::Default));
    assert!(
        modern::text(&reply.message).contains("has not been read"),
        "{}",
        reply.message
    );
    let reply = alice.post(&modern::call(3, "edit", edit, modern::Cx::Default));
    assert_eq!(
        reply.message["result"]["isError"], false,
        "{}",
        reply.message
    );
    // A context alice created is hers: to bob its id names no context.
    let read = serde_json::json!({"file_path": file});
    let reply = alice.post(&modern::call(4, "read", read.clone(), modern::Cx::New));
    let id = modern::context_of(&reply.message).expect("a new context's id");
    let reply = bob.post(&modern::call(5, "read", read.clone(), modern::Cx::Id(&id)));
    refused_as_unknown(&reply.message);
    let reply = alice.post(&modern::call(6, "read", read, modern::Cx::Id(&id)));
    assert_eq!(
        reply.message["result"]["isError"], false,
        "{}",
        reply.message
    );
    // Nor does bob wait in her context's lane: naming it while her call
    // runs there, his `edit` (which would run alone in it) is refused at
    // once, not once her call is over.
    std::thread::scope(|scope| {
        let alice = &mut alice;
        let id = id.as_str();
        let running = scope.spawn(move || {
            let sleep = serde_json::json!({"ms": 1500});
            alice.post(&modern::call(7, "sleep", sleep, modern::Cx::Id(id)))
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        let edit = serde_json::json!({"file_path": file, "old_string": "two", "new_string": "3"});
        let started = std::time::Instant::now();
        let reply = bob.post(&modern::call(8, "edit", edit, modern::Cx::Id(id)));
        let waited = started.elapsed();
        refused_as_unknown(&reply.message);
        assert!(
            waited < std::time::Duration::from_millis(900),
            "bob waited {waited:?} for alice's call"
        );
        let slept = running.join().unwrap();
        assert_eq!(
            slept.message["result"]["isError"], false,
            "{}",
            slept.message
        );
    });

    // The keys rotate: a token of the new key makes the server fetch the
    // JWKS again; one of the key rotated out is refused from then on.
    let old = token(&ec, serde_json::json!({}));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    jwks.serve(&[&next]);
    let fetched = jwks.fetches();
    assert_eq!(
        initialize_with(&server, bearer(&token(&next, serde_json::json!({})))).0,
        200
    );
    assert_eq!(jwks.fetches(), fetched + 1);
    assert_eq!(
        initialize_with(&server, bearer(&old)),
        invalid("the token is signed by no key this server trusts")
    );
    // Tokens naming unknown keys do not make it fetch again and again.
    for _ in 0..5 {
        let ghost = token(&ec_key("ghost"), serde_json::json!({}));
        assert_eq!(initialize_with(&server, bearer(&ghost)).0, 401);
    }
    assert!(jwks.fetches() <= fetched + 2, "{} fetches", jwks.fetches());
    let stderr = server.stderr.lock().unwrap().clone();
    assert!(!stderr.contains(&old), "a token reached the log: {stderr}");
}

/// Asserts `reply` refuses its call as naming no context the caller has.
fn refused_as_unknown(reply: &serde_json::Value) {
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("there is no context")),
        "{reply}"
    );
}

/// A JWKS URL that never answers: tokens are refused (401) once the fetch
/// times out, and the server goes on serving.
#[test]
fn a_hanging_jwks_url_refuses_tokens_and_serves_on() {
    let home = tempfile::tempdir().unwrap();
    let key = ec_key("ec-1");
    let jwks = JwksServer::start(&[&key], true);
    let server = auth_server(home.path(), &jwks.url);
    let started = std::time::Instant::now();
    assert_eq!(
        initialize_with(&server, bearer(&token(&key, serde_json::json!({})))),
        (
            401,
            format!(
                "{CHALLENGE}, error=\"invalid_token\", error_description=\"the token is signed by \
                 no key this server trusts\""
            )
        )
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    let mut http = Http::connect(server.addr);
    assert_eq!(http.request("GET", "/health", "").status, 200);
    assert!(
        server
            .stderr
            .lock()
            .unwrap()
            .contains("fetching the JWKS from"),
        "the failure is logged"
    );
}

/// Serving beyond loopback without `[auth]` is refused unless the operator
/// says so.
#[test]
fn serving_beyond_loopback_needs_auth_or_insecure_no_auth() {
    let home = tempfile::tempdir().unwrap();
    let out = isolated(Command::new(env!("CARGO_BIN_EXE_airlock")), home.path())
        .args(["mcp", "--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "the configuration's exit code");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no [auth] is configured") && stderr.contains("--insecure-no-auth"),
        "{stderr}"
    );
    let mut child = isolated(Command::new(env!("CARGO_BIN_EXE_airlock")), home.path())
        .args(["mcp", "--http", "0.0.0.0:0", "--insecure-no-auth"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(first.contains("--insecure-no-auth is given"), "{first}");
}

/// The Python SDK with a bearer token (an `httpx` client with the header):
/// served; with none, or one for another audience, refused with the
/// challenge, whose metadata URL is served.
#[test]
fn the_python_sdk_calls_with_a_bearer_token_and_is_refused_without() {
    let home = tempfile::tempdir().unwrap();
    let key = rsa_key("rsa-1");
    let jwks = JwksServer::start(&[&key], false);
    let server = auth_server(home.path(), &jwks.url);
    let url = format!("http://{}/mcp", server.addr);
    let good = token(&key, serde_json::json!({}));
    let wrong = token(&key, serde_json::json!({"aud": "https://other.test/mcp"}));
    let file = home.path().join("workspace/notes.txt");
    let out = python_client(
        "auth_client.py",
        &[Path::new(&url), Path::new(&good), Path::new(&wrong), &file],
    );
    assert_eq!(
        out,
        "bearer token: served\nno token: 401\nanother audience: 401\nmetadata: served\n"
    );
}

/// The tools a session's `tools/list` shows.
fn tools_listed(http: &mut Http) -> Vec<serde_json::Value> {
    let reply = http.request(
        "POST",
        "/mcp",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    );
    reply.message()["result"]["tools"]
        .as_array()
        .unwrap()
        .clone()
}

/// `[auth.tool_scopes]`: a token sees and calls only its scopes' tools
/// (a read-only scope: only tools declared read-only); a call outside them
/// is refused with 403 naming the scope that gives it (step-up), and a
/// token with none of the scopes is refused outright.
#[test]
fn scopes_decide_which_tools_a_caller_sees_and_calls() {
    let home = tempfile::tempdir().unwrap();
    let key = ec_key("ec-1");
    let jwks = JwksServer::start(&[&key], false);
    let server = auth_server_with(
        home.path(),
        &jwks.url,
        "[auth.tool_scopes.\"tools:read\"]\nread_only = true\n\
         [auth.tool_scopes.\"tools:write\"]\ntools = [\"edit\", \"write\"]\n",
    );
    let file = home.path().join("workspace/notes.txt");
    let file = file.to_str().unwrap();
    let session = |scope: &str| {
        let mut http = Http::connect(server.addr);
        http.authorization = bearer(&token(&key, serde_json::json!({"scope": scope})));
        http.initialize();
        http
    };
    let names = |http: &mut Http| {
        let mut names: Vec<String> = tools_listed(http)
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    };
    let call = |http: &mut Http, tool: &str, arguments: serde_json::Value| {
        http.request("POST", "/mcp", &call_line(7, tool, arguments))
    };

    let mut reader = session("tools:read");
    let seen = names(&mut reader);
    assert!(
        seen.contains(&"read".to_string()) && seen.contains(&"grep".to_string()),
        "{seen:?}"
    );
    for hidden in ["edit", "write", "bash"] {
        assert!(!seen.contains(&hidden.to_string()), "{hidden} in {seen:?}");
    }
    let reply = call(&mut reader, "read", serde_json::json!({"file_path": file}));
    assert_eq!(reply.status, 200);
    assert!(call_text(&reply.message()).0.contains("one"));
    let edit = serde_json::json!({"file_path": file, "old_string": "one", "new_string": "two"});
    let reply = call(&mut reader, "edit", edit.clone());
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(
        reply.headers["www-authenticate"],
        "Bearer resource_metadata=\"https://mcp.test/.well-known/oauth-protected-resource/mcp\", \
         scope=\"tools:write\", error=\"insufficient_scope\""
    );
    assert_eq!(
        reply.body,
        "Forbidden: calling `edit` needs the scope `tools:write`, which the token lacks"
    );
    assert_eq!(
        std::fs::read_to_string(file).unwrap(),
        "one\n",
        "nothing ran"
    );

    let mut writer = session("tools:read tools:write");
    let seen = names(&mut writer);
    assert!(
        seen.contains(&"edit".to_string()) && !seen.contains(&"bash".to_string()),
        "{seen:?}"
    );
    call(&mut writer, "read", serde_json::json!({"file_path": file}));
    let reply = call(&mut writer, "edit", edit);
    assert!(!call_text(&reply.message()).1, "{}", reply.body);
    assert_eq!(std::fs::read_to_string(file).unwrap(), "two\n");
    // A tool no scope gives is, to every caller, a tool that does not
    // exist: no scope to ask for, and no word that it is there.
    let command = serde_json::json!({"command": "echo hi > bash.txt"});
    let bash = call(&mut writer, "bash", command.clone());
    let made_up = call(&mut writer, "no_such_tool", command);
    assert_eq!(bash.status, 200, "{}", bash.body);
    assert_eq!(
        bash.body.replace("bash", "no_such_tool"),
        made_up.body,
        "answered as a tool that does not exist"
    );

    assert_eq!(
        initialize_with(&server, bearer(&token(&key, serde_json::json!({"scope": "other"})))),
        (
            403,
            "Bearer resource_metadata=\"https://mcp.test/.well-known/oauth-protected-resource/mcp\", \
             scope=\"tools:read tools:write\", error=\"insufficient_scope\""
                .to_string()
        )
    );
}

/// `tool_search` searches only the tools a caller's scopes give: its
/// listed prompt names no deferred tool outside them, and a search by name
/// finds none; in a session that stepped up to a scope that gives the
/// tool, the search finds it.
#[test]
fn a_caller_finds_only_the_deferred_tools_its_scopes_give() {
    let home = tempfile::tempdir().unwrap();
    let key = ec_key("ec-1");
    let jwks = JwksServer::start(&[&key], false);
    let server = auth_server_with(
        home.path(),
        &jwks.url,
        "[auth.tool_scopes.\"tools:read\"]\nread_only = true\n\
         [auth.tool_scopes.\"tools:write\"]\ntools = [\"write\"]\n\
         [tools.write]\ndefer_loading = true\n",
    );
    let search_prompt = |http: &mut Http| {
        tools_listed(http)
            .iter()
            .find(|t| t["name"] == "tool_search")
            .map(|t| t["description"].as_str().unwrap().to_string())
            .expect("tool_search is listed")
    };
    let select_write = |http: &mut Http| {
        let arguments = serde_json::json!({"query": "select:write"});
        let reply = http.request("POST", "/mcp", &call_line(2, "tool_search", arguments));
        call_text(&reply.message()).0
    };

    let mut reader = Http::connect(server.addr);
    let read_only = token(&key, serde_json::json!({"scope": "tools:read"}));
    reader.authorization = bearer(&read_only);
    reader.initialize();
    let prompt = search_prompt(&mut reader);
    assert!(prompt.contains("Deferred tools: none."), "{prompt}");
    let found = select_write(&mut reader);
    assert!(!found.contains("\"write\""), "{found}");
    assert!(found.contains("No deferred tool matches"), "{found}");

    // The same session, stepped up to a token that gives `write`.
    let stepped_up = token(&key, serde_json::json!({"scope": "tools:read tools:write"}));
    reader.authorization = bearer(&stepped_up);
    let prompt = search_prompt(&mut reader);
    assert!(prompt.contains("Deferred tools: write."), "{prompt}");
    let found = select_write(&mut reader);
    assert!(found.contains("Found 1 tool: write."), "{found}");

    // MCP 2026-07-28: no session, the same view on every request.
    let mut modern = modern::Connection::open(&server.addr.to_string());
    modern.authorization = bearer(&read_only);
    let reply = modern.post(&modern::request(
        3,
        "tools/list",
        serde_json::json!({}),
        modern::Cx::Default,
    ));
    let search = reply.message["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "tool_search")
        .map(|t| t["description"].to_string())
        .expect("tool_search is listed");
    assert!(search.contains("Deferred tools: none."), "{search}");
    let arguments = serde_json::json!({"query": "select:write"});
    let reply = modern.post(&modern::call(
        4,
        "tool_search",
        arguments,
        modern::Cx::Default,
    ));
    let found = modern::text(&reply.message);
    assert!(found.contains("No deferred tool matches"), "{found}");
}

/// The `file://` URI of the spilled result a `tools/call` reply links to.
fn spilled_uri(reply: &serde_json::Value) -> String {
    reply["result"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "resource_link")
        .and_then(|c| c["uri"].as_str())
        .unwrap_or_else(|| panic!("no resource link: {reply}"))
        .to_string()
}

/// A spilled result is its caller's (issue 46): alice's `read` of a big
/// file spills, and bob, holding a read-only scope, can neither reach the
/// file through a tool (`read`, `ls`, `grep`, `glob`) nor read it with
/// `resources/read`, in his session, in his session with 2026-07-28
/// `_meta`, or statelessly: each time the same not-found as for a result
/// that does not exist. Alice reads hers, in both eras.
#[test]
fn a_spilled_result_is_its_callers_alone() {
    let home = tempfile::tempdir().unwrap();
    let key = ec_key("ec-1");
    let jwks = JwksServer::start(&[&key], false);
    let server = auth_server_with(
        home.path(),
        &jwks.url,
        "[auth.tool_scopes.\"tools:read\"]\nread_only = true\n",
    );
    let workspace = home.path().join("workspace");
    let big: String = (1..=20_000).map(|k| format!("line-{k}\n")).collect();
    std::fs::write(workspace.join("big.txt"), &big).unwrap();
    let big = workspace.join("big.txt");
    let read_big = serde_json::json!({"file_path": big.to_str().unwrap(), "limit": 20000});
    let token_of = |sub: &str| {
        bearer(&token(
            &key,
            serde_json::json!({"sub": sub, "scope": "tools:read"}),
        ))
    };
    let session = |sub: &str| {
        let mut http = Http::connect(server.addr);
        http.authorization = token_of(sub);
        http.initialize();
        http
    };
    let stateless = |sub: &str| {
        let mut connection = modern::Connection::open(&server.addr.to_string());
        connection.authorization = token_of(sub);
        connection
    };
    let modern_meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": modern::VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-2026", "version": "1"},
    });
    // In a session, a request with 2026-07-28 `_meta` (and the header that
    // version asks for) is served outside the session.
    let read_in_session = |http: &mut Http, uri: &str, meta: Option<&serde_json::Value>| {
        let mut params = serde_json::json!({"uri": uri});
        let Some(meta) = meta else {
            let line = request_line(9, "resources/read", params);
            return http.request("POST", "/mcp", &line).message();
        };
        params["_meta"] = meta.clone();
        let body = request_line(9, "resources/read", params);
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             Accept: application/json, text/event-stream\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\
             Mcp-Session-Id: {}\r\nMCP-Protocol-Version: {}\r\nMcp-Method: resources/read\r\n\
             Mcp-Name: {uri}\r\nAuthorization: {}\r\n\r\n{body}",
            body.len(),
            http.session.as_deref().unwrap(),
            modern::VERSION,
            http.authorization.as_deref().unwrap(),
        );
        use std::io::Write;
        http.reader.get_mut().write_all(request.as_bytes()).unwrap();
        http.read().unwrap().message()
    };
    let read_stateless = |connection: &mut modern::Connection, uri: &str| {
        let request = modern::request(
            9,
            "resources/read",
            serde_json::json!({"uri": uri}),
            modern::Cx::Default,
        );
        connection.post(&request).message
    };
    let whole = |reply: &serde_json::Value| {
        let text = reply["result"]["contents"][0]["text"]
            .as_str()
            .unwrap_or_default();
        text.contains("\tline-1\n") && text.trim_end().ends_with("\tline-20000")
    };

    // Alice's result, spilled in her session and in a stateless call.
    let mut alice = session("alice");
    let reply = alice.request("POST", "/mcp", &call_line(1, "read", read_big.clone()));
    let in_session = spilled_uri(&reply.message());
    let mut alice_2026 = stateless("alice");
    let reply = alice_2026.post(&modern::call(2, "read", read_big, modern::Cx::Default));
    let in_2026 = spilled_uri(&reply.message);
    let path = in_session.strip_prefix("file://").unwrap().to_string();
    let dir = Path::new(&path)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();

    // Bob's tools do not reach it.
    let mut bob = session("bob");
    for (tool, arguments) in [
        ("read", serde_json::json!({"file_path": path})),
        ("ls", serde_json::json!({"path": dir})),
        (
            "grep",
            serde_json::json!({"pattern": "line-19999", "path": dir, "output_mode": "content"}),
        ),
        ("glob", serde_json::json!({"pattern": "*.txt", "path": dir})),
    ] {
        let reply = bob.request("POST", "/mcp", &call_line(3, tool, arguments));
        let (text, failed) = call_text(&reply.message());
        // The path bob named may come back in the error; nothing else of it.
        let told = text.replace(&path, "");
        let name = Path::new(&path).file_name().unwrap().to_str().unwrap();
        assert!(
            failed && !told.contains("line-19999") && !told.contains(name),
            "bob's {tool} reached alice's result: {}",
            &text[..text.len().min(300)]
        );
    }

    // Nor does his `resources/read`, in any era: the error is the one a
    // result that does not exist gets (-32002; in 2026-07-28, -32602).
    let made_up = |uri: &str| uri.replace(".txt", "-404.txt");
    let not_found = |reply: &serde_json::Value, uri: &str, missing: &serde_json::Value| {
        let code = &reply["error"]["code"];
        assert!(*code == -32002 || *code == -32602, "{uri}: {reply}");
        assert_eq!(
            reply["error"].to_string(),
            missing["error"].to_string().replace(&made_up(uri), uri),
            "{uri}: told apart from a result that does not exist"
        );
    };
    let mut bob_2026 = stateless("bob");
    for uri in [&in_session, &in_2026] {
        let missing = read_in_session(&mut bob, &made_up(uri), None);
        not_found(&read_in_session(&mut bob, uri, None), uri, &missing);
        let missing = read_in_session(&mut bob, &made_up(uri), Some(&modern_meta));
        not_found(
            &read_in_session(&mut bob, uri, Some(&modern_meta)),
            uri,
            &missing,
        );
        let missing = read_stateless(&mut bob_2026, &made_up(uri));
        not_found(&read_stateless(&mut bob_2026, uri), uri, &missing);
    }
    // A 2026-07-28 `resources/list` shows each caller what it may read:
    // alice her stateless result, bob nothing.
    let list = |connection: &mut modern::Connection| {
        let request = modern::request(
            10,
            "resources/list",
            serde_json::json!({}),
            modern::Cx::Default,
        );
        connection.post(&request).message["result"]["resources"].clone()
    };
    let listed = list(&mut alice_2026);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["uri"], in_2026.as_str(), "{listed}");
    assert_eq!(list(&mut bob_2026), serde_json::json!([]));

    // Alice reads hers.
    let start = |reply: &serde_json::Value| reply.to_string().chars().take(300).collect::<String>();
    let reply = read_in_session(&mut alice, &in_session, None);
    assert!(whole(&reply), "{}", start(&reply));
    let reply = read_stateless(&mut alice_2026, &in_2026);
    assert!(whole(&reply), "{}", start(&reply));
}

/// Calls pipelined in one write are all answered with nothing more sent: 2
/// to 6 `read` calls written at once, round after round, in the session
/// and with 2026-07-28 `_meta`, over pipes and over sockets. (A reply
/// reported held back until the client sent more was held by the client:
/// replies that finish together leave in one write, and a client that
/// waits on the descriptor with a line still in its own buffer waits for
/// ever.)
#[test]
fn calls_pipelined_in_one_write_are_all_answered() {
    let workspace = tempfile::tempdir().unwrap();
    let workspace = workspace.path().canonicalize().unwrap();
    std::fs::write(workspace.join("a.txt"), "hello pipelined\n").unwrap();
    let arguments = serde_json::json!({"file_path": workspace.join("a.txt")});
    for over in [Over::Pipes, Over::Sockets] {
        let home = tempfile::tempdir().unwrap();
        let ws = workspace.to_str().unwrap();
        let mut server = RawStdio::start_over(over, home.path(), &["--workspace", ws], "{}");
        let mut id = 1;
        for round in 0..30u64 {
            let ids = id..id + 2 + round % 5;
            id = ids.end;
            let lines: Vec<String> =
                ids.clone()
                    .map(|i| match round % 2 {
                        0 => call_line(i, "read", arguments.clone()),
                        _ => modern::call(i, "read", arguments.clone(), modern::Cx::Default)
                            .to_string(),
                    })
                    .collect();
            server.send(&lines.join("\n"));
            let mut missing: HashSet<u64> = ids.collect();
            while !missing.is_empty() {
                let reply = server.reply();
                let answered = reply["id"].as_u64().expect("a numeric id");
                assert!(
                    missing.remove(&answered),
                    "{over:?}, round {round}: {reply}"
                );
                let (text, failed) = call_text(&reply);
                assert!(!failed && text.contains("hello pipelined"), "{reply}");
            }
        }
    }
}
