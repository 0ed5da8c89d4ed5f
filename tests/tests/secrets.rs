//! Secrets at the sandbox's edge: the host adds a configured credential to
//! a tool's request as it leaves, and the tool never holds it. A hostile
//! guest (`exfil`) asks a loopback echo server, which sends back the
//! request it got (headers, query, and their base64 and URL encodings), and
//! then hands what it got to every way out it has: a second granted host,
//! a log line, progress, the context, its output and its error. Each sees
//! only `[secret NAME]`; the echo server saw the real value.

use airlock_host::config::{AuditConfig, AuditSink, SecretConfig, ToolConfig};
use airlock_host::tool::ProgressSink;
use airlock_host::{CallControl, Config, ToolUse};
use airlock_tests::{LogCapture, config, err, guests, ok_text, with_component};
use base64::Engine as _;
use serde_json::json;
use std::sync::{Arc, Mutex};

/// Has ` `, `/`, `+` and `=`: its URL and base64 forms differ from it.
const SECRET: &str = "s3cr3t/t0ken+with=odd chars";

/// A loopback server that answers each request with what it received: the
/// `Authorization` header as `x-echo-authorization`, and in the body the
/// request's head and body as they are, in base64, and percent-encoded.
/// Every request it received is kept, in order. The path asks for tricks:
/// `/gzip` claims a compressed body, `/two-codings` a second
/// `Content-Encoding` header, `/te-gzip` a compressed transfer coding;
/// `/json` and `/html` escape the body as JSON or HTML; `/name` echoes
/// the `Authorization` header's value, percent-encoded, in a header's name.
async fn echo_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                let head_end = loop {
                    if let Some(i) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&request[..head_end]).into_owned();
                let header = |name: &str| {
                    head.lines().find_map(|line| {
                        let (n, v) = line.split_once(':')?;
                        n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
                    })
                };
                let length: usize = header("content-length").map_or(0, |v| v.parse().unwrap());
                while request.len() < head_end + length {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request).into_owned();
                log.lock().unwrap().push(text.clone());
                let encoded: String = head
                    .bytes()
                    .map(|b| {
                        if b.is_ascii_alphanumeric() {
                            (b as char).to_string()
                        } else {
                            format!("%{b:02X}")
                        }
                    })
                    .collect();
                let body = format!(
                    "{text}\nbase64: {}\nurl: {encoded}\n",
                    base64::engine::general_purpose::STANDARD.encode(&head)
                );
                let auth = header("authorization").unwrap_or_default();
                let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                let body = if path.starts_with("/json") {
                    serde_json::to_string(&body).unwrap()
                } else if path.starts_with("/html") {
                    body.replace('&', "&amp;")
                        .replace('<', "&lt;")
                        .replace('>', "&gt;")
                        .replace('"', "&quot;")
                        .replace('\'', "&#x27;")
                } else {
                    body
                };
                let mut extra = match path.as_str() {
                    "/gzip" => "content-encoding: gzip\r\n".to_string(),
                    "/two-codings" => {
                        "content-encoding: identity\r\ncontent-encoding: gzip\r\n".into()
                    }
                    "/name" => {
                        let name: String = auth
                            .bytes()
                            .map(|b| match b {
                                b if b.is_ascii_alphanumeric() => (b as char).to_string(),
                                b => format!("%{b:02X}"),
                            })
                            .collect();
                        format!("x-{name}: 1\r\n")
                    }
                    _ => String::new(),
                };
                let body = if path == "/te-gzip" {
                    extra.push_str("transfer-encoding: gzip, chunked\r\n");
                    format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len())
                } else {
                    extra.push_str(&format!("content-length: {}\r\n", body.len()));
                    body
                };
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-echo-authorization: \
                     {auth}\r\n{extra}connection: close\r\n\r\n{body}"
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, seen)
}

/// Every form of [`SECRET`] the echo server sends back.
fn forms() -> Vec<String> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    vec![
        SECRET.to_string(),
        b64(SECRET),
        b64(&format!("Bearer {SECRET}")),
        "s3cr3t%2Ft0ken%2Bwith%3Dodd%20chars".into(),
        "s3cr3t%2Ft0ken%2Bwith%3Dodd".into(),
    ]
}

fn assert_clean(what: &str, text: &str) {
    for form in forms() {
        assert!(!text.contains(&form), "{what} holds {form:?}:\n{text}");
    }
}

/// The secret's file, and a configuration granting `exfil` both loopback
/// names, with a secret for `127.0.0.1:{port}`.
fn setup(port: u16, secret: SecretConfig) -> (Config, tempfile::TempDir) {
    setup_value(port, secret, SECRET)
}

/// [`setup`] with the secret `value`.
fn setup_value(port: u16, secret: SecretConfig, value: &str) -> (Config, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("api-token");
    std::fs::write(&file, format!("{value}\n")).unwrap();
    let mut config = config();
    config.tools.insert(
        "exfil".into(),
        ToolConfig {
            network: vec!["127.0.0.1".into(), "localhost".into()],
            ..ToolConfig::default()
        },
    );
    config.permissions.allow = vec!["exfil".into()];
    config.secrets.insert(
        "api".into(),
        SecretConfig {
            file: Some(file),
            hosts: vec![format!("127.0.0.1:{port}")],
            ..secret
        },
    );
    (config, dir)
}

/// Captures every line Airlock's crates log (all levels), for the whole
/// binary.
fn captured_logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: std::sync::OnceLock<Arc<Mutex<Vec<u8>>>> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        use tracing_subscriber::Layer as _;
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        // Airlock's own crates at every level (wasmtime's would bury them).
        let airlock = tracing_subscriber::filter::filter_fn(|m| m.target().starts_with("airlock"));
        tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(move || LogCapture(sink.clone()))
                    .with_filter(airlock),
            )
            .init();
        logs
    })
    .clone()
}

#[tokio::test]
async fn a_header_secret_reaches_the_host_and_nothing_the_guest_can_hand_on() {
    let logs = captured_logs();
    let (port, seen) = echo_server().await;
    let (second, loot) = echo_server().await;
    let (mut config, secret_dir) = setup(port, SecretConfig::default());
    // Audited, inputs and all: the trail must not hold the secret either.
    let trail = secret_dir.path().join("audit.jsonl");
    config.audit = AuditConfig {
        enabled: true,
        path: Some(AuditSink::File(trail.clone())),
        inputs: true,
        ..AuditConfig::default()
    };
    let (airlock, _dir) = with_component(guests::EXFIL, config).await;
    let mut cx = airlock.context();
    let (progress, mut events) = ProgressSink::channel(64);
    let (progress, mut lines) = progress.with_logs(64);
    let input = json!({"from": format!("127.0.0.1:{port}"), "path": "/echo?x=1",
                       "to": format!("localhost:{second}")});
    let r = airlock
        .call_with(
            &mut cx,
            ToolUse::new("e1", "exfil", input.clone()),
            CallControl {
                progress,
                ..CallControl::default()
            },
        )
        .await;
    let output = ok_text(&r);

    // The host with the secret got it, in the tool's place.
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let lower = requests[0].to_ascii_lowercase();
    assert_eq!(
        lower
            .lines()
            .filter(|l| l.starts_with("authorization:"))
            .collect::<Vec<_>>(),
        [format!("authorization: bearer {}", SECRET.to_ascii_lowercase()).as_str()],
        "{}",
        requests[0]
    );
    assert!(!requests[0].contains("made-by-the-guest"));

    // The tool saw the response only redacted: in the echoed header, the
    // body, and the base64 and URL encodings.
    assert_clean("the output", &output);
    assert!(
        output.contains("x-echo-authorization: Bearer [secret api]"),
        "{output}"
    );
    assert!(
        output.matches("[secret api]").count() >= 4,
        "the raw, base64 and URL forms were each redacted:\n{output}"
    );
    assert!(output.contains("to the second host: sent"), "{output}");
    // What it sent on to the second granted host held only redactions
    // (and no secret was added there: no secret names that host).
    let sent = loot.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    assert_clean("the second host's request", &sent[0]);
    assert!(sent[0].contains("[secret api]"), "{}", sent[0]);
    assert!(sent[0].contains("authorization: Bearer made-by-the-guest"));
    // Its log line, its progress, its context change, the host's own logs.
    let mut logged = Vec::new();
    while let Ok(line) = lines.try_recv() {
        logged.push(line.message);
    }
    assert!(
        logged.iter().any(|l| l.contains("[secret api]")),
        "{logged:?}"
    );
    logged.iter().for_each(|l| assert_clean("a log line", l));
    let mut shown = Vec::new();
    while let Ok(event) = events.try_recv() {
        shown.push(event.message);
    }
    assert!(!shown.is_empty());
    shown
        .iter()
        .for_each(|m| assert_clean("a progress message", m));
    let env = cx.env().get("LOOT").expect("the context change applied");
    assert_clean("the context", env);
    assert!(env.contains("[secret api]"));

    // Asked to fail, its error is redacted too.
    let mut failing = input;
    failing["fail"] = json!(true);
    let r = airlock
        .call(&mut cx, ToolUse::new("e2", "exfil", failing))
        .await;
    let e = err(&r);
    assert_clean("the error", &e.message);
    assert!(e.message.contains("[secret api]"), "{}", e.message);
    let logs = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
    assert!(
        logs.contains("[secret api]"),
        "the guest's log line reached the host's log"
    );
    assert_clean("the host's log", &logs);

    // The secret in an input, as if the model had echoed it: refused by
    // the schema, recorded all the same, and kept out of the trail.
    let echoed = json!({"from": SECRET, "note": SECRET});
    let r = airlock
        .call(&mut cx, ToolUse::new("e3", "exfil", echoed))
        .await;
    assert!(r.outcome.is_err());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let recorded = loop {
        let text = std::fs::read_to_string(&trail).unwrap_or_default();
        if text.matches("\"kind\":\"call\"").count() == 3 {
            break text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the trail holds:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_clean("the audit trail", &recorded);
    assert!(
        recorded.contains("[secret api]") && recorded.contains("\"input\""),
        "the kept input is redacted, not dropped:\n{recorded}"
    );
}

#[tokio::test]
async fn a_query_secret_replaces_the_tools_parameter_and_comes_back_redacted() {
    let (port, seen) = echo_server().await;
    let (second, _) = echo_server().await;
    let (config, _secret_dir) = setup(
        port,
        SecretConfig {
            query: Some("api_key".into()),
            ..SecretConfig::default()
        },
    );
    let (airlock, _dir) = with_component(guests::EXFIL, config).await;
    let mut cx = airlock.context();
    let input = json!({"from": format!("127.0.0.1:{port}"), "path": "/echo?api_key=guess&x=1",
                       "to": format!("localhost:{second}")});
    let output = ok_text(
        &airlock
            .call(&mut cx, ToolUse::new("q", "exfil", input))
            .await,
    );
    let requests = seen.lock().unwrap().clone();
    let line = requests[0].lines().next().unwrap();
    assert_eq!(
        line,
        "GET /echo?x=1&api_key=s3cr3t%2Ft0ken%2Bwith%3Dodd%20chars HTTP/1.1"
    );
    // The tool's own header went through: the secret is a query parameter.
    assert!(requests[0].contains("authorization: Bearer made-by-the-guest"));
    assert_clean("the output", &output);
    assert!(
        output.contains("GET /echo?x=1&api_key=[secret api] HTTP/1.1"),
        "{output}"
    );
}

#[tokio::test]
async fn a_secret_for_other_tools_is_not_sent() {
    let (port, seen) = echo_server().await;
    let (second, _) = echo_server().await;
    let (mut config, _secret_dir) = setup(
        port,
        SecretConfig {
            tools: Some(vec!["fetch".into()]),
            ..SecretConfig::default()
        },
    );
    config.tools.insert(
        "fetch".into(),
        ToolConfig {
            network: vec!["127.0.0.1".into()],
            ..ToolConfig::default()
        },
    );
    let (airlock, _dir) = with_component(guests::EXFIL, config).await;
    let mut cx = airlock.context();
    let input = json!({"from": format!("127.0.0.1:{port}"), "path": "/",
                       "to": format!("localhost:{second}")});
    ok_text(
        &airlock
            .call(&mut cx, ToolUse::new("o", "exfil", input))
            .await,
    );
    let requests = seen.lock().unwrap().clone();
    assert!(
        requests[0].contains("authorization: Bearer made-by-the-guest"),
        "{}",
        requests[0]
    );
    assert_clean("the request", &requests[0]);
}

/// A request carrying a secret asks for the response uncompressed and
/// whole (no ranges); one with any content or transfer coding redaction
/// could not read through (claimed once, in a second header, or as a
/// transfer coding) reaches the guest as an error.
#[tokio::test]
async fn a_response_that_could_hide_the_secret_is_not_handed_to_the_guest() {
    let (port, seen) = echo_server().await;
    let (second, _) = echo_server().await;
    let (config, _secret_dir) = setup(port, SecretConfig::default());
    let (airlock, _dir) = with_component(guests::EXFIL, config).await;
    let mut cx = airlock.context();
    for path in ["/gzip", "/two-codings", "/te-gzip"] {
        let input = json!({"from": format!("127.0.0.1:{port}"), "path": path,
                           "to": format!("localhost:{second}")});
        let output = ok_text(
            &airlock
                .call(&mut cx, ToolUse::new("z", "exfil", input))
                .await,
        );
        assert!(
            output.contains("the request failed") && output.contains("came with the coding"),
            "{path}: {output}"
        );
        assert_clean("the output", &output);
    }
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[0]
            .to_ascii_lowercase()
            .contains("accept-encoding: identity"),
        "{}",
        requests[0]
    );
}

/// A secret with the characters servers escape comes back escaped (as
/// JSON, as HTML) or percent-encoded in a header's name: the guest sees
/// `[secret api]` in its place each time.
#[tokio::test]
async fn a_secret_echoed_escaped_or_in_a_header_name_is_redacted() {
    const AWKWARD: &str = "aw\"k\\wa<r&d>'s3cr3t";
    let (port, _seen) = echo_server().await;
    let (second, loot) = echo_server().await;
    let (config, _secret_dir) = setup_value(port, SecretConfig::default(), AWKWARD);
    let (airlock, _dir) = with_component(guests::EXFIL, config).await;
    let mut cx = airlock.context();
    let json_form = serde_json::to_string(AWKWARD).unwrap();
    let json_form = json_form.trim_matches('"');
    let html_form = "aw&quot;k\\wa&lt;r&amp;d&gt;&#x27;s3cr3t";
    let name_form = "aw%22k%5Cwa%3Cr%26d%3E%27s3cr3t".to_ascii_lowercase();
    for (path, form) in [
        ("/json", json_form),
        ("/html", html_form),
        ("/name", name_form.as_str()),
    ] {
        let input = json!({"from": format!("127.0.0.1:{port}"), "path": path,
                           "to": format!("localhost:{second}")});
        let output = ok_text(
            &airlock
                .call(&mut cx, ToolUse::new("j", "exfil", input))
                .await,
        );
        assert!(output.contains("status 200"), "{path}: {output}");
        for held in [AWKWARD, json_form, html_form, name_form.as_str()] {
            assert!(
                !output.contains(held),
                "{path}: the output holds {held:?}:\n{output}"
            );
        }
        if path == "/name" {
            assert!(!output.contains("x-bearer"), "{output}");
        } else {
            assert!(output.contains("[secret api]"), "{path}: {output}");
        }
        let sent = loot.lock().unwrap().pop().unwrap();
        assert!(!sent.contains(form), "{path}: the second host got {form:?}");
    }
}

/// Misconfigurations are refused when the configuration is loaded, naming
/// the secret and never its value.
#[tokio::test]
async fn misconfigured_secrets_are_refused_at_load() {
    let refused = |config: Config| async move {
        let e = airlock_tests::base()
            .with_config(config)
            .await
            .expect_err("refused");
        let message = format!("{e:#}");
        assert!(!message.contains(SECRET), "{message}");
        message
    };
    // For a host no tool may reach.
    let (mut config, _d1) = setup(1, SecretConfig::default());
    config.secrets.get_mut("api").unwrap().hosts = vec!["api.example.com".into()];
    let message = refused(config).await;
    assert!(
        message.contains("secrets.api: no tool may reach api.example.com"),
        "{message}"
    );
    // From a variable a tool is granted.
    let (mut config, _d2) = setup(1, SecretConfig::default());
    config.tools.get_mut("exfil").unwrap().env = vec!["API_TOKEN".into()];
    let secret = config.secrets.get_mut("api").unwrap();
    secret.file = None;
    secret.env = Some("API_TOKEN".into());
    let message = refused(config).await;
    assert!(
        message.contains("tools.exfil.env grants: the tool could read it"),
        "{message}"
    );
    // In a file a tool could read.
    let (mut config, dir) = setup(1, SecretConfig::default());
    config.workspace = Some(dir.path().to_path_buf());
    let message = refused(config).await;
    assert!(message.contains("a secret's file"), "{message}");
}
