//! With the `otel` feature, `execute_tool` spans reach an OTLP/HTTP
//! collector: a real exporter, posting to a collector on loopback.

use airlock_host::ToolUse;
use airlock_tests::*;
use serde_json::json;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use tracing_subscriber::layer::SubscriberExt;

/// A minimal OTLP/HTTP collector: keeps every request body.
fn collector() -> (String, Arc<Mutex<Vec<Vec<u8>>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let keep = bodies.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut data = Vec::new();
            let mut buf = [0u8; 8192];
            let (head_end, length) = loop {
                let n = stream.read(&mut buf).unwrap_or(0);
                if n == 0 {
                    break (0, 0);
                }
                data.extend_from_slice(&buf[..n]);
                if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
                    let length = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    break (end + 4, length);
                }
            };
            while data.len() < head_end + length {
                let n = stream.read(&mut buf).unwrap_or(0);
                if n == 0 {
                    break;
                }
                data.extend_from_slice(&buf[..n]);
            }
            keep.lock().unwrap().push(data[head_end..].to_vec());
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n");
        }
    });
    (url, bodies)
}

/// Held by each test: tracing caches per call site whether anyone listens,
/// and a call made on another thread while the first test installs its
/// subscriber can leave the span's call site cached as unheard.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn execute_tool_spans_are_exported_over_otlp() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (url, bodies) = collector();
    let (layer, provider) = airlock_host::pipeline::telemetry::otlp_layer(Some(&url)).unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    tracing::subscriber::with_default(subscriber, || {
        runtime.block_on(async {
            let ws = workspace(&[("a.txt", "hi")]);
            let airlock = airlock(workspace_config(ws.path())).await;
            let mut cx = airlock.context();
            let r = airlock
                .call(
                    &mut cx,
                    ToolUse::new("toolu_otel", "read", json!({"file_path": "a.txt"})),
                )
                .await;
            assert!(!r.is_error());
        });
    });
    provider.shutdown().unwrap();
    let bodies = bodies.lock().unwrap();
    let all: Vec<u8> = bodies.concat();
    let has = |needle: &[u8]| all.windows(needle.len()).any(|w| w == needle);
    assert!(
        has(b"execute_tool read"),
        "the span name reached the collector"
    );
    assert!(has(b"gen_ai.tool.call.id") && has(b"toolu_otel"));
    assert!(has(b"airlock"), "the service name");
}

/// With `[audit] otlp`, each record of the trail is also a log record at
/// the collector (its body the record's line), sent by the time the trail
/// closes.
#[test]
fn audit_records_are_exported_as_otlp_logs() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (url, bodies) = collector();
    let url = url.replace("/v1/traces", "/v1/logs");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let trail = tempfile::tempdir().unwrap();
    runtime.block_on(async {
        let ws = workspace(&[("a.txt", "hi")]);
        let mut config = workspace_config(ws.path());
        config.audit = airlock_host::config::AuditConfig {
            enabled: true,
            path: Some(airlock_host::config::AuditSink::File(
                trail.path().join("audit.jsonl"),
            )),
            otlp: Some(url),
            ..Default::default()
        };
        let airlock = airlock(config).await;
        let mut cx = airlock.context();
        let r = airlock
            .call(
                &mut cx,
                ToolUse::new("toolu_audited", "read", json!({"file_path": "a.txt"})),
            )
            .await;
        assert!(!r.is_error());
    });
    drop(runtime);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let all: Vec<u8> = bodies.lock().unwrap().concat();
        let has = |needle: &[u8]| all.windows(needle.len()).any(|w| w == needle);
        if has(b"airlock.audit") && has(b"toolu_audited") && has(b"\"kind\":\"call\"") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the collector got no audit record: {}",
            String::from_utf8_lossy(&all)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let written = std::fs::read_to_string(trail.path().join("audit.jsonl")).unwrap();
    assert!(written.contains("toolu_audited"), "{written}");
}
