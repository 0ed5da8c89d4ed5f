//! MCP 2026-07-28 served natively, and replicas sharing contexts: a raw
//! client (no `initialize`, per-request `_meta`) lists and calls tools over
//! stdio and over HTTP, its context named by the id a result handed out;
//! behind nginx (round-robin, no stickiness) three `airlock mcp --http`
//! replicas share a Redis context store, so a `read` on one replica lets an
//! `edit` on another through, a `cd` on one moves the cwd for the next, a
//! replica killed mid-run loses nothing it acknowledged, and a context a
//! restarted Redis lost is reported lost.

#![cfg(feature = "mcp")]

#[path = "../../../tests/support/debian.rs"]
mod debian;

#[path = "../../../tests/support/balance.rs"]
mod balance;

#[path = "../../../tests/support/modern.rs"]
mod modern;

#[path = "../../../tests/support/replicas.rs"]
mod replicas;

use balance::{Nginx, Redis};
use modern::{Connection, Cx, call, context_of, post, request, text};
use replicas::{Replica, airlock, setup};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

/// A raw client of `airlock mcp` over stdio: one JSON-RPC message a line.
struct Lines {
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Lines {
    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
    }

    /// The next message from the server.
    fn next(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.stdout.read_line(&mut line).unwrap() > 0,
            "the server ended"
        );
        serde_json::from_str(&line).unwrap()
    }

    /// The reply to request `id` (messages before it are skipped).
    fn reply_to(&mut self, id: u64) -> Value {
        loop {
            let reply = self.next();
            if reply["id"] == id {
                return reply;
            }
        }
    }

    fn ask(&mut self, message: Value) -> Value {
        self.send(&message);
        self.reply_to(message["id"].as_u64().unwrap())
    }
}

/// `airlock mcp` over stdio, with `home` as HOME and `config`: the process,
/// and a client of its pipes.
fn serve_stdio(home: &std::path::Path, config: &std::path::Path) -> (std::process::Child, Lines) {
    let mut child = airlock(home, config, &["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let client = Lines {
        stdin: child.stdin.take().unwrap(),
        stdout: BufReader::new(child.stdout.take().unwrap()),
    };
    (child, client)
}

#[test]
fn a_2026_client_lists_and_calls_tools_over_stdio_without_initialize() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, config) = setup(dir.path(), "memory");
    let (mut child, mut client) = serve_stdio(dir.path(), &config);
    let discovered = client.ask(request(1, "server/discover", json!({}), Cx::Default));
    let versions = discovered["result"]["supportedVersions"].to_string();
    assert!(versions.contains(modern::VERSION), "{discovered}");
    assert!(versions.contains("2025-11-25"), "{discovered}");

    let listed = client.ask(request(2, "tools/list", json!({}), Cx::Default));
    let names = listed["result"]["tools"].to_string();
    for tool in ["read", "edit", "cd"] {
        assert!(names.contains(&format!("\"{tool}\"")), "{listed}");
    }

    // A call that names no context runs in the default context, shared by
    // every such call: a client that knows nothing of context ids (Claude
    // Code, the SDKs) reads and then edits.
    let c = ws.join("c.txt").display().to_string();
    let read = client.ask(call(3, "read", json!({"file_path": c}), Cx::Default));
    assert!(text(&read).contains("gamma"), "{read}");
    assert_eq!(context_of(&read), None, "the default context has no id");
    let edit = json!({"file_path": c, "old_string": "gamma", "new_string": "GAMMA"});
    let edited = client.ask(call(4, "edit", edit, Cx::Default));
    assert_eq!(edited["result"]["isError"], false, "{edited}");

    // A new context is the client's own: its id comes with the result.
    let a = ws.join("a.txt").display().to_string();
    let read = client.ask(call(5, "read", json!({"file_path": a}), Cx::New));
    assert!(text(&read).contains("alpha"), "{read}");
    let context = context_of(&read).expect("a read hands out a context id");
    // In the default context, the edit is refused: nothing was read there.
    let edit = json!({"file_path": a, "old_string": "alpha", "new_string": "ALPHA"});
    let refused = client.ask(call(6, "edit", edit.clone(), Cx::Default));
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(text(&refused).contains("has not been read"), "{refused}");
    let edited = client.ask(call(7, "edit", edit, Cx::Id(&context)));
    assert_eq!(edited["result"]["isError"], false, "{edited}");
    assert_eq!(context_of(&edited).as_deref(), Some(context.as_str()));
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "ALPHA\n"
    );

    // Calls of one context keep their order: an edit sent right behind the
    // read of its file, before the read's result, waits for it. (The file
    // is large enough for the read to take a while: without the order, the
    // edit ran first and was refused every time.)
    let long = format!("beta\n{}", format!("{}\n", "x".repeat(100)).repeat(40_000));
    std::fs::write(ws.join("long.txt"), &long).unwrap();
    let path = ws.join("long.txt").display().to_string();
    let edit = json!({"file_path": path, "old_string": "beta", "new_string": "BETA"});
    client.send(&call(
        8,
        "read",
        json!({"file_path": path}),
        Cx::Id(&context),
    ));
    client.send(&call(9, "edit", edit, Cx::Id(&context)));
    let (first, second) = (client.next(), client.next());
    let (read, edited) = if first["id"] == 8 {
        (first, second)
    } else {
        (second, first)
    };
    assert_eq!(edited["result"]["isError"], false, "{edited}");
    assert!(
        std::fs::read_to_string(ws.join("long.txt"))
            .unwrap()
            .starts_with("BETA\n")
    );

    // The read was too long for one result: it was saved, and linked, and
    // a 2026 client (no session that was given the link) reads it.
    let link = read["result"]["content"]
        .as_array()
        .and_then(|blocks| blocks.iter().find(|b| b["type"] == "resource_link"))
        .unwrap_or_else(|| panic!("a link to the saved result: {read}"));
    let saved = client.ask(request(
        12,
        "resources/read",
        json!({"uri": link["uri"]}),
        Cx::Default,
    ));
    let contents = saved["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(contents.contains(&"x".repeat(100)), "{saved}");
    let elsewhere = client.ask(request(
        13,
        "resources/read",
        json!({"uri": format!("file://{}", ws.join("a.txt").display())}),
        Cx::Default,
    ));
    assert!(
        elsewhere.get("error").is_some(),
        "only saved results are read: {elsewhere}"
    );

    // A call waiting for its context's lane does not hold up the calls
    // behind it on the connection: while a long read runs and an edit of
    // the same context waits for it, a read in another context is
    // answered first. (It was answered only after the long read, when the
    // edit waiting in the lane held the connection's turn.)
    let longer = format!("{}\n", "y".repeat(100)).repeat(80_000);
    std::fs::write(ws.join("longer.txt"), &longer).unwrap();
    let path = ws.join("longer.txt").display().to_string();
    let edit = json!({"file_path": path, "old_string": "nowhere", "new_string": "x"});
    client.send(&call(
        16,
        "read",
        json!({"file_path": path}),
        Cx::Id(&context),
    ));
    client.send(&call(17, "edit", edit, Cx::Id(&context)));
    client.send(&call(18, "read", json!({"file_path": a}), Cx::New));
    let order: Vec<Value> = (0..3).map(|_| client.next()["id"].clone()).collect();
    assert_eq!(
        order[0], 18,
        "the other context's read comes first: {order:?}"
    );

    let unknown = client.ask(call(
        10,
        "read",
        json!({"file_path": a}),
        Cx::Id("ctx_0123456789abcdef0123456789abcdef"),
    ));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("there is no context"),
        "{unknown}"
    );

    // A listen stream is acknowledged with the notifications accepted.
    client.send(&request(
        11,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
        Cx::Default,
    ));
    let ack = client.next();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["toolsListChanged"], true,
        "{ack}"
    );
    assert!(
        ack["params"]["notifications"]["promptsListChanged"] != true,
        "{ack}"
    );
    // A tool added to the tool directory is announced on it, and listed
    // and called from then on.
    let (_, ls) = airlock_host::bundled::BUNDLED
        .iter()
        .find(|(package, _)| *package == "airlock-tool-ls")
        .unwrap();
    std::fs::write(dir.path().join("tools/ls.wasm"), ls).unwrap();
    let changed = client.next();
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "{changed}"
    );
    let listed = client.ask(request(14, "tools/list", json!({}), Cx::Default));
    assert!(
        listed["result"]["tools"].to_string().contains("\"ls\""),
        "{listed}"
    );
    let ls = client.ask(call(15, "ls", json!({"path": "sub"}), Cx::Default));
    assert!(text(&ls).contains("b.txt"), "{ls}");
    drop(client);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A listen stream stays open when nothing watches the tools (no tool
/// directory): Claude Code gave up re-listening when it closed at once.
#[test]
fn a_listen_stays_open_when_no_tool_directory_is_watched() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("airlock.toml");
    std::fs::write(&config, "tool_dirs = []\n").unwrap();
    // Ready: every tool is compiled, and nothing watches them any more.
    let replica = Replica::start(dir.path(), &config);
    let listen = json!({"notifications": {"toolsListChanged": true}});
    let body = request(1, "subscriptions/listen", listen, Cx::Default).to_string();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", replica.port)).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {}\r\n\
         Mcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
        modern::VERSION,
        body.len()
    )
    .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    // Until the server ends the stream, or 3 s pass without a byte.
    while let Ok(n @ 1..) = stream.read(&mut chunk) {
        seen.extend_from_slice(&chunk[..n]);
    }
    let seen = String::from_utf8_lossy(&seen);
    assert!(
        seen.contains("notifications/subscriptions/acknowledged"),
        "{seen}"
    );
    assert!(!seen.contains("\"result\""), "the listen ended: {seen}");
}

/// Clients that name no context but name their conversation (the
/// `Airlock-Conversation` header, which a Claude Code configuration can
/// send) each have a default context of their own: one's `cd` does not
/// move the other, and one's `read` does not let the other's `edit`
/// through. Clients that name neither share the server's default context.
#[test]
fn each_conversation_has_a_default_context_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, config) = setup(dir.path(), "memory");
    let replica = Replica::start(dir.path(), &config);
    let addr = format!("127.0.0.1:{}", replica.port);
    let conversation = |name: &str| {
        let mut connection = Connection::open(&addr);
        connection.headers = vec![("Airlock-Conversation".into(), name.into())];
        connection
    };
    let (mut one, mut two) = (conversation("one"), conversation("two"));
    let moved = one.post(&call(1, "cd", json!({"path": "sub"}), Cx::Default));
    assert_eq!(
        moved.message["result"]["isError"], false,
        "{}",
        moved.message
    );
    let read = |c: &mut Connection, id| {
        c.post(&call(
            id,
            "read",
            json!({"file_path": "b.txt"}),
            Cx::Default,
        ))
    };
    assert!(text(&read(&mut one, 2).message).contains("beta"));
    let elsewhere = read(&mut two, 3);
    assert!(
        !text(&elsewhere.message).contains("beta"),
        "{}",
        elsewhere.message
    );

    let c = ws.join("c.txt").display().to_string();
    let read = one.post(&call(4, "read", json!({"file_path": c}), Cx::Default));
    assert!(text(&read.message).contains("gamma"), "{}", read.message);
    let edit = json!({"file_path": c, "old_string": "gamma", "new_string": "GAMMA"});
    let refused = two.post(&call(5, "edit", edit.clone(), Cx::Default));
    assert!(
        text(&refused.message).contains("has not been read"),
        "{}",
        refused.message
    );
    // With no conversation named, the server's default context: not one's.
    let shared = post(&addr, &call(6, "edit", edit.clone(), Cx::Default));
    assert!(
        text(&shared.message).contains("has not been read"),
        "{}",
        shared.message
    );
    let edited = one.post(&call(7, "edit", edit, Cx::Default));
    assert_eq!(
        edited.message["result"]["isError"], false,
        "{}",
        edited.message
    );

    // A name that is not printable ASCII, or too long, is refused.
    let long =
        conversation(&"x".repeat(129)).post(&call(8, "read", json!({"file_path": c}), Cx::Default));
    assert_eq!(long.message["error"]["code"], -32602, "{}", long.message);
}

/// A 2026-07-28 client over stdio that closes stdin with a listen open
/// ends the server at once and cleanly: the listen ends with the
/// connection (it held the exit for rmcp's 5 s wait for replies in
/// flight), and a connection that never began a session is no error (it
/// exited with 1, "connection closed: initialize request").
#[test]
fn closing_stdin_with_a_listen_open_ends_the_server_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("airlock.toml");
    std::fs::write(&config, "tool_dirs = []\n").unwrap();
    let (mut child, mut client) = serve_stdio(dir.path(), &config);
    let listen = json!({"notifications": {"toolsListChanged": true}});
    client.send(&request(1, "subscriptions/listen", listen, Cx::Default));
    let ack = client.next();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    // Only stdin: a client that also closes stdout can catch rmcp
    // between writing the acknowledgement and learning it was written,
    // which holds the exit for rmcp's wait.
    let Lines {
        stdin,
        stdout: _open,
    } = client;
    let closed = std::time::Instant::now();
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(
        closed.elapsed() < Duration::from_secs(3),
        "the server took {:?} to end",
        closed.elapsed()
    );

    // A client that only asked what the server serves.
    let (mut child, mut client) = serve_stdio(dir.path(), &config);
    let discovered = client.ask(request(1, "server/discover", json!({}), Cx::Default));
    assert!(discovered.get("result").is_some(), "{discovered}");
    drop(client);
    let status = child.wait().unwrap();
    assert!(status.success(), "after a discover alone: {status}");
}

/// A call of `edit` from a client that can be asked (it declares form
/// elicitation), with `extra` params (the retry's answer and state).
fn asking_edit(id: u64, edit: &Value, extra: Value) -> Value {
    let mut message = call(id, "edit", edit.clone(), Cx::Default);
    message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {"form": {}}});
    for (key, value) in extra.as_object().unwrap() {
        message["params"][key] = value.clone();
    }
    message
}

#[test]
fn permission_is_asked_by_input_required_and_answered_on_another_replica() {
    let mut redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let (ws, config) = setup(dir.path(), &redis.url());
    // No rule allows `edit`: every edit asks.
    let text_of = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text_of.replace("allow = [\"edit\"]", "allow = []")).unwrap();
    let (a, b) = (
        Replica::start(dir.path(), &config),
        Replica::start(dir.path(), &config),
    );
    let mut on_a = Connection::open(&format!("127.0.0.1:{}", a.port));
    let mut on_b = Connection::open(&format!("127.0.0.1:{}", b.port));
    let c = ws.join("c.txt").display().to_string();
    let read = on_a.post(&call(1, "read", json!({"file_path": c}), Cx::Default));
    assert!(text(&read.message).contains("gamma"), "{}", read.message);
    let edit = json!({"file_path": c, "old_string": "gamma", "new_string": "GAMMA"});
    let unchanged = || std::fs::read_to_string(ws.join("c.txt")).unwrap() == "gamma\n";

    // A client that cannot be asked is answered by the host: denied.
    let denied = on_a.post(&call(2, "edit", edit.clone(), Cx::Default));
    assert!(
        text(&denied.message).contains("nobody to ask"),
        "{}",
        denied.message
    );

    // One that can is asked, and nothing runs until it answers.
    let asked = on_a.post(&asking_edit(3, &edit, json!({})));
    let result = &asked.message["result"];
    assert_eq!(result["resultType"], "input_required", "{}", asked.message);
    let question = &result["inputRequests"]["airlock/question"];
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let message = question["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("edit wants to run") && message.contains("c.txt"),
        "{message}"
    );
    let state = result["requestState"].as_str().expect("a requestState");
    assert!(unchanged());

    let accept = json!({"action": "accept", "content": {"allow": true}});
    let retry = |id, edit: &Value, state: &str, answer: &Value| {
        asking_edit(
            id,
            edit,
            json!({"requestState": state, "inputResponses": {"airlock/question": answer}}),
        )
    };
    let refused = |reply: &modern::Reply| {
        reply.message["error"]["code"] == -32602
            && reply.message["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("requestState"))
    };
    // A state changed by the client, or given for another call, is refused
    // (on the other replica too).
    let mut tampered = state.to_string();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    let reply = on_b.post(&retry(4, &edit, &tampered, &accept));
    assert!(refused(&reply), "{}", reply.message);
    let other = json!({"file_path": c, "old_string": "gamma", "new_string": "OTHER"});
    let reply = on_b.post(&retry(5, &other, state, &accept));
    assert!(refused(&reply), "{}", reply.message);
    assert!(unchanged());

    // Declined on the other replica: not run, and the model is told.
    let declined = on_b.post(&retry(6, &edit, state, &json!({"action": "decline"})));
    assert_eq!(
        declined.message["result"]["isError"], true,
        "{}",
        declined.message
    );
    assert!(
        text(&declined.message).contains("declined"),
        "{}",
        declined.message
    );
    assert!(unchanged());

    // Accepted on the other replica: the edit lands.
    let edited = on_b.post(&retry(7, &edit, state, &accept));
    assert_eq!(
        edited.message["result"]["isError"], false,
        "{}",
        edited.message
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("c.txt")).unwrap(),
        "GAMMA\n"
    );
    redis.stop();
}

#[test]
fn replicas_behind_nginx_share_contexts_in_redis_and_survive_one_dying() {
    let mut redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let (ws, config) = setup(dir.path(), &redis.url());
    // The first compiles the tools into the shared cache; the others find
    // them there.
    let mut replicas: Vec<Replica> = (0..3)
        .map(|_| Replica::start(dir.path(), &config))
        .collect();
    let nginx = Nginx::start(&replicas.iter().map(|r| r.port).collect::<Vec<_>>());
    let lb = format!("127.0.0.1:{}", nginx.port);

    // A 2025-era session lives in the replica that opened it: on another,
    // its requests get a 404 with a JSON-RPC error saying so.
    let session = legacy_post(replicas[0].port, None, LEGACY_INITIALIZE);
    let id = session
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("mcp-session-id:"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, id)| id.trim().to_owned())
        .unwrap_or_else(|| panic!("a session: {session}"));
    let elsewhere = legacy_post(
        replicas[1].port,
        Some(&id),
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
    );
    assert!(elsewhere.starts_with("HTTP/1.1 404"), "{elsewhere}");
    assert!(
        elsewhere.contains(r#""code":-32001"#) && elsewhere.contains("another replica"),
        "{elsewhere}"
    );
    let mut next = 0u64;
    let mut send = |message: &dyn Fn(u64) -> Value| {
        next += 1;
        let reply = post(&lb, &message(next));
        let upstream = reply.header("x-upstream").unwrap_or_default().to_owned();
        (reply, upstream)
    };

    let (listed, _) = send(&|id| request(id, "tools/list", json!({}), Cx::Default));
    assert_eq!(listed.status, 200);
    assert!(
        listed.message["result"]["tools"]
            .to_string()
            .contains("\"edit\"")
    );

    let a = ws.join("a.txt").display().to_string();
    let (read, on_read) = send(&|id| call(id, "read", json!({"file_path": a}), Cx::New));
    assert!(text(&read.message).contains("alpha"), "{}", read.message);
    let cx = context_of(&read.message).expect("a context id");
    let edit = json!({"file_path": a, "old_string": "alpha", "new_string": "ALPHA"});
    let (edited, on_edit) = send(&|id| call(id, "edit", edit.clone(), Cx::Id(&cx)));
    assert_eq!(
        edited.message["result"]["isError"], false,
        "{}",
        edited.message
    );
    assert_ne!(
        on_read, on_edit,
        "round-robin sends the edit to another replica"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "ALPHA\n"
    );

    let (moved, on_cd) = send(&|id| call(id, "cd", json!({"path": "sub"}), Cx::Id(&cx)));
    assert_eq!(
        moved.message["result"]["isError"], false,
        "{}",
        moved.message
    );
    let (relative, on_relative) =
        send(&|id| call(id, "read", json!({"file_path": "b.txt"}), Cx::Id(&cx)));
    assert!(
        text(&relative.message).contains("beta"),
        "{}",
        relative.message
    );
    assert_ne!(on_cd, on_relative);

    // The replica that recorded the read of b.txt dies; its record does not.
    let port = on_relative
        .rsplit(':')
        .next()
        .unwrap()
        .parse::<u16>()
        .unwrap();
    replicas.iter_mut().find(|r| r.port == port).unwrap().kill();
    let edit_b = json!({"file_path": "b.txt", "old_string": "beta", "new_string": "BETA"});
    for _ in 0..3 {
        let (again, on) = send(&|id| call(id, "read", json!({"file_path": "b.txt"}), Cx::Id(&cx)));
        assert_eq!(again.status, 200, "{}", again.message);
        assert!(text(&again.message).contains("beta"), "{}", again.message);
        assert!(
            !on.ends_with(&format!(":{port}")),
            "served by the dead replica"
        );
    }
    let (edited_b, _) = send(&|id| call(id, "edit", edit_b.clone(), Cx::Id(&cx)));
    assert_eq!(
        edited_b.message["result"]["isError"], false,
        "{}",
        edited_b.message
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("sub/b.txt")).unwrap(),
        "BETA\n"
    );

    // The store is not permissive: a file never read in this context is
    // not edited.
    let c = ws.join("c.txt").display().to_string();
    let edit_c = json!({"file_path": c, "old_string": "gamma", "new_string": "G"});
    let (refused, _) = send(&|id| call(id, "edit", edit_c.clone(), Cx::Id(&cx)));
    assert!(
        text(&refused.message).contains("has not been read"),
        "{}",
        refused.message
    );

    // A client that names no context (Claude Code, the SDKs) shares the
    // default context, kept in the store too: its read on one replica lets
    // its edit through on another.
    let (read_c, on_read_c) = send(&|id| call(id, "read", json!({"file_path": c}), Cx::Default));
    assert!(
        text(&read_c.message).contains("gamma"),
        "{}",
        read_c.message
    );
    assert_eq!(context_of(&read_c.message), None);
    let (edited_c, on_edit_c) = send(&|id| call(id, "edit", edit_c.clone(), Cx::Default));
    assert_eq!(
        edited_c.message["result"]["isError"], false,
        "{}",
        edited_c.message
    );
    assert_ne!(on_read_c, on_edit_c);
    assert_eq!(std::fs::read_to_string(ws.join("c.txt")).unwrap(), "G\n");

    // Redis restarts empty (it keeps nothing here): the default context,
    // moved to sub/, is reported lost by whichever replica gets the next
    // call, never run from the root as if nothing happened; the call after
    // starts fresh. A named context's call says the store lost it too.
    let (moved, _) = send(&|id| call(id, "cd", json!({"path": "sub"}), Cx::Default));
    assert_eq!(
        moved.message["result"]["isError"], false,
        "{}",
        moved.message
    );
    redis.restart();
    let lost_says = |lost: &modern::Reply, what: &str| {
        let said = lost.message["error"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(said.contains(what), "{}", lost.message);
    };
    let (lost, _) = send(&|id| call(id, "read", json!({"file_path": "b.txt"}), Cx::Default));
    lost_says(&lost, "the context store lost the default context");
    let (fresh, _) = send(&|id| call(id, "read", json!({"file_path": "a.txt"}), Cx::Default));
    assert!(text(&fresh.message).contains("ALPHA"), "{}", fresh.message);
    let (lost, _) = send(&|id| call(id, "read", json!({"file_path": "b.txt"}), Cx::Id(&cx)));
    lost_says(&lost, "the context store lost");

    // With the store down, a call in the context fails, saying why.
    redis.stop();
    let (down, _) = send(&|id| call(id, "read", json!({"file_path": "b.txt"}), Cx::Id(&cx)));
    let message = down.message["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("context store redis://127.0.0.1"),
        "{}",
        down.message
    );
    // And a replica that cannot reach its store is not ready.
    let alive = replicas.iter().find(|r| r.port != port).unwrap();
    let ready = alive.get("/ready");
    assert!(
        ready.starts_with("HTTP/1.1 503") && ready.contains("does not answer"),
        "{ready}"
    );
    drop(nginx);
}

/// An MCP 2025-11-25 `initialize`.
const LEGACY_INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"legacy","version":"1"}}}"#;

/// POSTs `body` to `/mcp` on `port` as a 2025-11-25 client, in `session`;
/// the whole response (head and body), read to the connection's end.
fn legacy_post(port: u16, session: Option<&str>, body: &str) -> String {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let session = session.map_or(String::new(), |s| format!("Mcp-Session-Id: {s}\r\n"));
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n\
         {session}Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply
}

/// The context store on `redis`, once it answers.
async fn redis_store(redis: &Redis) -> std::sync::Arc<airlock_host::context_store::Redis> {
    let url = airlock_host::config::ContextStoreUrl::try_from(redis.url()).unwrap();
    let store = std::sync::Arc::new(airlock_host::context_store::Redis::new(url));
    store.ping().await.unwrap();
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_keeps_every_field_written_at_once_and_forgets_an_unused_context() {
    use airlock_host::context_store::{ContextStore, Fields};
    let redis = Redis::start();
    let store = redis_store(&redis).await;
    let ttl = Duration::from_secs(60);
    let id = "ctx_00000000000000000000000000000001";
    let initial: Fields = [("cwd".to_string(), "/w".to_string())].into();
    store.create(id, &initial, ttl).await.unwrap();
    // 64 writers at once, each setting its own field (and the cwd).
    let writers: Vec<_> = (0..64)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let set: Fields = [
                    (format!("read:/w/{i}"), format!("{i} 1 {}", "0".repeat(64))),
                    ("cwd".to_string(), format!("/w/{i}")),
                ]
                .into();
                assert!(store.update(id, &set, &[], ttl).await.unwrap());
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let fields = store.load(id, ttl).await.unwrap().unwrap();
    assert_eq!(fields.keys().filter(|k| k.starts_with("read:")).count(), 64);
    assert!(fields["cwd"].starts_with("/w/"));
    assert!(
        !fields.contains_key("created"),
        "the store's own field stays its own"
    );
    let removed = store
        .update(id, &Fields::new(), &["read:/w/0".to_string()], ttl)
        .await
        .unwrap();
    assert!(removed);
    assert!(
        !store
            .load(id, ttl)
            .await
            .unwrap()
            .unwrap()
            .contains_key("read:/w/0")
    );

    // An update of a context that expired writes nothing.
    store
        .update(id, &Fields::new(), &[], Duration::from_millis(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(store.load(id, ttl).await.unwrap(), None);
    let set: Fields = [("cwd".to_string(), "/x".to_string())].into();
    assert!(!store.update(id, &set, &[], ttl).await.unwrap());
    assert_eq!(store.load(id, ttl).await.unwrap(), None);

    // A merge (the default context's save) creates, sets and removes, and
    // after the context expired it starts anew.
    let default = "default";
    store.merge(default, &set, &[], ttl).await.unwrap();
    assert_eq!(store.load(default, ttl).await.unwrap(), Some(set.clone()));
    let env: Fields = [("env:A".to_string(), "1".to_string())].into();
    store
        .merge(default, &env, &["cwd".to_string()], ttl)
        .await
        .unwrap();
    assert_eq!(store.load(default, ttl).await.unwrap(), Some(env.clone()));
    store
        .merge(default, &Fields::new(), &[], Duration::from_millis(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    store.merge(default, &set, &[], ttl).await.unwrap();
    assert_eq!(store.load(default, ttl).await.unwrap(), Some(set));
}

/// A context a caller created stays that caller's in Redis as in the
/// process: its owner is stored beside its fields, no save removes it, and
/// to anyone else its id is unknown (what `[auth]` replicas rely on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_in_redis_stays_its_creators_through_saves() {
    use airlock_host::context_store::{ContextStore, Contexts};
    use airlock_host::{Airlock, Config, ContextChange, Descriptor, SafetyFlags};
    let redis = Redis::start();
    let store = redis_store(&redis).await;
    let ttl = Duration::from_secs(60);
    let contexts = Contexts::new(store.clone(), ttl, "redis");
    let airlock = Airlock::new(Config {
        bundled_tools: false,
        ..Config::default()
    })
    .await
    .unwrap();
    let set_env = |cx: &mut airlock_host::ToolContext, name: &str| {
        let call = airlock.grants().for_tool("t").unwrap().for_call(
            &Descriptor::new("t", "t"),
            SafetyFlags::empty(),
            &Default::default(),
        );
        let change = ContextChange::SetEnv {
            name: name.into(),
            value: "1".into(),
        };
        assert!(cx.apply("t", &[change], &call, true).is_empty());
    };

    let mut cx = airlock.context();
    let loaded = contexts
        .load_as(None, Some("alice"), &mut cx)
        .await
        .unwrap();
    set_env(&mut cx, "A");
    let id = contexts.save(loaded, &cx).await.unwrap().expect("created");
    for round in ["created", "saved"] {
        for stranger in [Some("bob"), None] {
            let refused = contexts
                .load_as(Some(&id), stranger, &mut airlock.context())
                .await
                .unwrap_err();
            assert!(
                refused.to_string().contains("there is no context"),
                "{round}, {stranger:?}: {refused}"
            );
        }
        let mut cx = airlock.context();
        let loaded = contexts
            .load_as(Some(&id), Some("alice"), &mut cx)
            .await
            .unwrap();
        assert_eq!(cx.env().get("A").map(String::as_str), Some("1"), "{round}");
        set_env(&mut cx, "B");
        assert_eq!(contexts.save(loaded, &cx).await.unwrap(), Some(id.clone()));
        let stored = store.load(&id, ttl).await.unwrap().unwrap();
        assert_eq!(
            stored.get("owner").map(String::as_str),
            Some("alice"),
            "{round}: {stored:?}"
        );
    }
}

/// A Redis that restarted empty (as the recipe's did without persistence)
/// or evicted a context: the first command on each connection the store
/// held is sent again on a new one (no "truncated reply"), the default
/// context's next call is told its context was lost (never run from the
/// workspace root as if nothing happened) and the one after starts fresh,
/// and a named context is "lost by the store", not "never handed out".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_redis_lost_is_reported_never_silently_replaced() {
    use airlock_host::context_store::{ContextError, ContextStore, Contexts};
    use airlock_host::{Airlock, Config, ContextChange, Descriptor, SafetyFlags};
    let mut redis = Redis::start();
    let store = redis_store(&redis).await;
    let contexts = Contexts::new(store.clone(), Duration::from_secs(60), "redis");
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let airlock = Airlock::new(Config {
        bundled_tools: false,
        workspace: Some(ws.path().to_path_buf()),
        ..Config::default()
    })
    .await
    .unwrap();
    let cd = |cx: &mut airlock_host::ToolContext| {
        let mut d = Descriptor::new("t", "t");
        d.capabilities.workspace = airlock_host::WorkspaceAccess::Read;
        let grants = airlock.grants().for_tool("t").unwrap();
        let call = grants.for_call(&d, SafetyFlags::empty(), &Default::default());
        let change = [ContextChange::SetCwd { path: "sub".into() }];
        assert!(cx.apply("t", &change, &call, true).is_empty());
    };
    let root = airlock.context().cwd().to_string();
    let mut cx = airlock.context();
    let loaded = contexts.load_default(&mut cx, None).await.unwrap();
    cd(&mut cx);
    contexts.save(loaded, &cx).await.unwrap();
    let mut cx = airlock.context();
    let loaded = contexts.load(None, &mut cx).await.unwrap();
    cd(&mut cx);
    let named = contexts.save(loaded, &cx).await.unwrap().unwrap();
    let mut cx = airlock.context();
    contexts.load_default(&mut cx, None).await.unwrap();
    assert_ne!(cx.cwd(), root);

    redis.restart();
    let lost = contexts
        .load_default(&mut airlock.context(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(lost, ContextError::Lost { id: None, .. }),
        "{lost}"
    );
    assert!(
        lost.to_string()
            .contains("the context store lost the default context"),
        "{lost}"
    );
    let mut cx = airlock.context();
    contexts.load_default(&mut cx, None).await.unwrap();
    assert_eq!(
        cx.cwd(),
        root,
        "the next call starts fresh, and says nothing"
    );
    let lost = contexts
        .load(Some(&named), &mut airlock.context())
        .await
        .unwrap_err();
    assert!(
        lost.to_string().contains("the context store lost context"),
        "{lost}"
    );
    contexts.check().await.unwrap();

    // An eviction of the default context (what `DEL` does to it).
    let mut cx = airlock.context();
    let loaded = contexts.load_default(&mut cx, None).await.unwrap();
    cd(&mut cx);
    contexts.save(loaded, &cx).await.unwrap();
    store.remove("default").await.unwrap();
    let lost = contexts
        .load_default(&mut airlock.context(), None)
        .await
        .unwrap_err();
    assert!(matches!(lost, ContextError::Lost { .. }), "{lost}");

    redis.stop();
    let down = contexts.check().await.unwrap_err();
    assert!(matches!(down, ContextError::Store { .. }), "{down}");
}

/// A store whose password comes from a file (the recipe's mounted Secret):
/// read when a connection opens, so a wrong or missing one is an error
/// that names the file or the refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_password_comes_from_a_file() {
    use airlock_host::Config;
    use airlock_host::config::ContextStoreUrl;
    use airlock_host::context_store::Contexts;
    let redis = Redis::start_with(&["--requirepass", "s3cret"]);
    let dir = tempfile::tempdir().unwrap();
    let config = |file: &str| {
        let text = format!(
            "[contexts]\nstore = \"{}\"\npassword_file = \"{file}\"\n",
            redis.url()
        );
        Contexts::from_config(&Config::from_toml(&text, Some(dir.path())).unwrap().contexts)
    };
    std::fs::write(dir.path().join("password"), "s3cret\n").unwrap();
    config("password").check().await.unwrap();
    std::fs::write(dir.path().join("wrong"), "nope\n").unwrap();
    let refused = config("wrong").check().await.unwrap_err().to_string();
    assert!(refused.contains("refused the password"), "{refused}");
    let missing = config("missing").check().await.unwrap_err().to_string();
    assert!(
        missing.contains("password file") && missing.contains("missing"),
        "{missing}"
    );
    // Without one, the server's refusal is the error.
    let url = ContextStoreUrl::try_from(redis.url()).unwrap();
    let store = airlock_host::context_store::Redis::new(url);
    assert!(store.ping().await.is_err());
}

/// The recipe's store keeps an append-only file: killed and restarted, it
/// comes back with the contexts it acknowledged, and a replica goes on
/// with them without an error: a call made while it is down for a moment
/// waits for it (within the store's 2 s), and its old connections are
/// resent on new ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_with_its_append_only_file_restarts_without_losing_a_context() {
    use airlock_host::context_store::{ContextStore, Contexts, Fields};
    let mut redis = Redis::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let store = redis_store(&redis).await;
    let ttl = Duration::from_secs(60);
    let contexts = Contexts::new(store.clone(), ttl, "redis");
    let set: Fields = [("env:A".to_string(), "1".to_string())].into();
    store.merge("default", &set, &[], ttl).await.unwrap();
    let airlock = airlock_host::Airlock::new(airlock_host::Config {
        bundled_tools: false,
        ..airlock_host::Config::default()
    })
    .await
    .unwrap();
    contexts
        .load_default(&mut airlock.context(), None)
        .await
        .unwrap();
    redis.stop();
    let back = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        redis.restart();
        redis
    });
    let mut cx = airlock.context();
    contexts.load_default(&mut cx, None).await.unwrap();
    assert_eq!(cx.env().get("A").map(String::as_str), Some("1"));
    drop(back.join().unwrap());
}

/// SIGTERM (a pod being stopped) with a call in flight: the replica stops
/// taking connections at once, answers the call in full, then exits 143;
/// before, it closed the connection without an answer.
#[test]
fn sigterm_drains_the_calls_in_flight_before_exiting() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let (_ws, config) = setup(dir.path(), "memory");
    let mut replica = Replica::start(dir.path(), &config);
    let addr = format!("127.0.0.1:{}", replica.port);
    let mut message = call(1, "sleep", json!({"ms": 1500}), Cx::Default);
    message["params"]["_meta"]["progressToken"] = json!("p");
    let body = message.to_string();
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: sleep\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // The call runs: its first progress came.
    let mut reader = BufReader::new(stream);
    let mut reply = String::new();
    while !reply.contains("notifications/progress") {
        let mut line = String::new();
        assert_ne!(reader.read_line(&mut line).unwrap(), 0, "{reply}");
        reply.push_str(&line);
    }
    replica.terminate();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        std::net::TcpStream::connect(&addr).is_err(),
        "no connection is taken once it is stopping"
    );
    let status = replica.exited(Duration::from_secs(15));
    reader.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(
        reply.contains(r#""isError":false"#),
        "the call in flight is answered in full: {reply}"
    );
    assert_eq!(status.and_then(|s| s.code()), Some(143), "{status:?}");
}
