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

#[test]
fn execute_tool_spans_are_exported_over_otlp() {
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
