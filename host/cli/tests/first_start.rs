//! `airlock mcp` on a first start (an empty artifact cache): it answers
//! `initialize` and `tools/list` before the bundled tools are compiled,
//! listing them as they describe themselves, and a call sent at once waits
//! for its tool's compile and succeeds; over HTTP, `/health` answers at
//! once and `/ready` only once every tool is compiled. The ordering is read
//! off the artifact cache: a reply that waited for the compiles would find
//! every bundled tool's artifact there.

#![cfg(feature = "mcp")]

use airlock_host::bundled::BUNDLED;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

/// `airlock ARGS` with `home` as HOME, its artifact cache under it, and
/// no user configuration.
fn airlock(home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_airlock"));
    command
        .args(args)
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("AIRLOCK_CONFIG");
    command
}

fn artifact_dir(home: &Path) -> PathBuf {
    home.join("cache/airlock/artifacts")
}

/// The compiled components in the artifact cache whose names start with
/// `prefix`.
fn artifacts(home: &Path, prefix: &str) -> usize {
    std::fs::read_dir(artifact_dir(home)).map_or(0, |dir| {
        dir.filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(prefix) && name.ends_with(".cwasm"))
            .count()
    })
}

/// Starts `airlock mcp` and writes `messages` to it at once.
fn serve(home: &Path, args: &[&str], messages: &[Value]) -> (Child, BufReader<ChildStdout>) {
    let mut child = airlock(home, args)
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for message in messages {
        writeln!(stdin, "{message}").unwrap();
    }
    // Kept open (the server ends when stdin closes) until it is stopped.
    child.stdin = Some(stdin);
    let stdout = BufReader::new(child.stdout.take().unwrap());
    (child, stdout)
}

/// The next message with `id`.
fn reply(stdout: &mut BufReader<ChildStdout>, id: u64) -> Value {
    loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the server ended");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == id {
            return message;
        }
    }
}

fn initialize() -> [Value; 2] {
    [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
}

fn stop(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

/// What `tools/list` answers, and how many bundled tools were compiled
/// (in the cache) when it did.
fn first_list(home: &Path, args: &[&str]) -> (Value, usize) {
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let [init, initialized] = initialize();
    let (child, mut stdout) = serve(home, args, &[init, initialized, list]);
    let listed = reply(&mut stdout, 2);
    let compiled = artifacts(home, "");
    stop(child);
    (listed["result"]["tools"].clone(), compiled)
}

#[test]
fn the_first_start_lists_the_bundled_tools_before_compiling_them() {
    let home = tempfile::tempdir().unwrap();
    let (listed, compiled) = first_list(home.path(), &[]);
    assert!(
        compiled < BUNDLED.len(),
        "tools/list waited until all {} bundled tools were compiled (is \
         host/bundled-descriptors.json stale? `cargo test -p airlock-host --lib \
         engine::snapshot` says)",
        BUNDLED.len()
    );

    // Compiled ahead of time, as an image's build does, into a directory
    // of their own.
    let ahead = home.path().join("ahead");
    let out = airlock(home.path(), &["precompile", ahead.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with(&format!(
            "{} compiled tools in {}",
            BUNDLED.len(),
            ahead.display()
        )),
        "{said}"
    );

    // A host with an empty cache of its own and that directory as its
    // precompiled_dir lists the tools from the records of what each said
    // when it was compiled (the same list), and calls one, compiling
    // nothing: its own cache stays empty.
    let second = tempfile::tempdir().unwrap();
    let config = second.path().join("airlock.toml");
    std::fs::write(&config, format!("precompiled_dir = {:?}\n", ahead)).unwrap();
    let config = ["--config", config.to_str().unwrap()];
    let (described, compiled) = first_list(second.path(), &config);
    assert_eq!(compiled, 0, "compiled though every tool was precompiled");
    let names = |tools: &Value| -> Vec<String> {
        let tools = tools.as_array().unwrap();
        tools.iter().map(|t| t["name"].to_string()).collect()
    };
    assert!(names(&listed).len() >= 8, "{:?}", names(&listed));
    assert_eq!(names(&listed), names(&described));
    assert_eq!(listed, described, "listed as the tools describe themselves");

    let ws = second.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "compiled ahead\n").unwrap();
    let out = airlock(second.path(), &config)
        .args(["--workspace", ws.to_str().unwrap()])
        .args(["call", "read", r#"{"file_path": "a.txt"}"#])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("compiled ahead"),
        "{out:?}"
    );
    assert_eq!(artifacts(second.path(), ""), 0, "{out:?}");
}

#[test]
fn a_call_sent_before_its_tool_is_compiled_waits_for_it_and_succeeds() {
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "hello first start\n").unwrap();
    let ws = ws.canonicalize().unwrap();
    let file = ws.join("a.txt");
    let (_, read) = BUNDLED
        .iter()
        .find(|(package, _)| *package == "airlock-tool-read")
        .unwrap();
    let read_digest = blake3::hash(read).to_hex().to_string();

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "read", "arguments": {"file_path": file}}});
    let [init, initialized] = initialize();
    let workspace = ws.to_str().unwrap();
    let (child, mut stdout) = serve(
        home.path(),
        &["--workspace", workspace],
        &[init, initialized, call],
    );
    reply(&mut stdout, 1);
    assert_eq!(
        artifacts(home.path(), &read_digest),
        0,
        "the server answered only once `read` was compiled (is \
         host/bundled-descriptors.json stale? `cargo test -p airlock-host --lib \
         engine::snapshot` says)"
    );
    let result = reply(&mut stdout, 2);
    stop(child);
    assert_eq!(result["result"]["isError"], false, "{result}");
    assert!(result.to_string().contains("hello first start"), "{result}");
}

/// The replies with `ids` (in whatever order they come) and the
/// notifications read meanwhile.
fn replies(stdout: &mut BufReader<ChildStdout>, ids: &[u64]) -> (Vec<Value>, Vec<Value>) {
    let (mut replies, mut notifications) = (vec![Value::Null; ids.len()], Vec::new());
    while replies.iter().any(Value::is_null) {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the server ended");
        let message: Value = serde_json::from_str(&line).unwrap();
        match ids.iter().position(|id| message["id"] == *id) {
            Some(i) => replies[i] = message,
            None if message.get("id").is_none() => notifications.push(message),
            None => {}
        }
    }
    (replies, notifications)
}

#[test]
fn a_component_not_compiled_before_is_listed_once_compiled_and_a_call_waits_for_it() {
    // A tool directory's component that neither the artifact cache nor
    // this build's record of the bundled tools knows: compiling it (seconds
    // for a stock Python tool) once held up `initialize`.
    let home = tempfile::tempdir().unwrap();
    let tools = home.path().join(".local/share/airlock/tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::copy(
        airlock_tests::guests::CONFORMANCE_SIMPLE_TEXT,
        tools.join("simple.wasm"),
    )
    .unwrap();
    let names = |reply: &Value| -> Vec<String> {
        let tools = reply["result"]["tools"].as_array().unwrap();
        tools
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };

    let list = |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "test_simple_text", "arguments": {}}});
    let [init, initialized] = initialize();
    let (mut child, mut stdout) = serve(home.path(), &[], &[init, initialized, list(2), call]);
    let (answered, mut notified) = replies(&mut stdout, &[2, 3]);
    let first = names(&answered[0]);
    assert!(first.contains(&"read".to_string()), "{first:?}");
    assert!(
        !first.contains(&"test_simple_text".to_string()),
        "tools/list waited for the component's compile: {first:?}"
    );
    // The call sent at once waited for the compile.
    assert_eq!(answered[1]["result"]["isError"], false, "{}", answered[1]);

    if notified.is_empty() {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the server ended");
        notified.push(serde_json::from_str(&line).unwrap());
    }
    assert_eq!(notified[0]["method"], "notifications/tools/list_changed");
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", list(4)).unwrap();
    child.stdin = Some(stdin);
    let listed = names(&reply(&mut stdout, 4));
    assert!(
        listed.contains(&"test_simple_text".to_string()),
        "{listed:?}"
    );
    assert!(listed.contains(&"read".to_string()), "{listed:?}");
    stop(child);
}

/// `GET path` on `addr`: the status code and the body.
fn get(addr: &str, path: &str) -> (u16, String) {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
    let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    (status, body.to_string())
}

#[test]
fn over_http_health_answers_at_once_and_ready_once_every_tool_is_compiled() {
    let home = tempfile::tempdir().unwrap();
    let mut child = airlock(home.path(), &["mcp", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let addr = loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "the server ended");
        if let Some(url) = line.trim().strip_prefix("airlock: serving MCP on http://") {
            break url.trim_end_matches("/mcp").to_string();
        }
    };
    // Drained, so the server never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));

    assert_eq!(get(&addr, "/health"), (200, "ok".into()));
    let (status, body) = get(&addr, "/ready");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("still being compiled"), "{body}");
    assert!(artifacts(home.path(), "") < BUNDLED.len());

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while get(&addr, "/ready").0 != 200 {
        assert!(std::time::Instant::now() < deadline, "never ready");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(
        artifacts(home.path(), ""),
        BUNDLED.len(),
        "ready before every bundled tool was compiled"
    );
    assert_eq!(get(&addr, "/health").0, 200);
    assert_eq!(get(&addr, "/nowhere").0, 404);
    stop(child);
}
