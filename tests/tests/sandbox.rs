//! The sandbox holds against hostile guests: flags are enforced, time and
//! memory are bounded, output is capped, ungranted imports never load, and
//! the host keeps working after every attack.

use airlock_host::config::ToolConfig;
use airlock_host::{Config, ErrorClass, SafetyFlags};
use airlock_tests::*;
use serde_json::json;
use std::time::{Duration, Instant};

/// Every write `tool` (in `component`, the `liar` guest's actions) tries
/// in a call its flags called read-only fails as not permitted, and leaves
/// the workspace as it was.
async fn a_read_only_call_cannot_write(component: &str, tool: &str) {
    let ws = workspace(&[("victim.txt", "untouched")]);
    let (airlock, _dir) = with_component(component, workspace_config(ws.path())).await;
    let mut cx = airlock.context();
    let victim = path_in(ws.path(), "victim.txt");
    for action in ["write", "append", "truncate", "create", "remove", "rename"] {
        let r = call(
            &airlock,
            &mut cx,
            tool,
            json!({"file_path": victim, "action": action}),
        )
        .await;
        assert!(
            r.flags.unwrap().contains(SafetyFlags::READ_ONLY),
            "{action}: the call was read-only"
        );
        let e = err(&r);
        assert_eq!(e.class, ErrorClass::Errno("EPERM".into()), "{action}: {e}");
        assert!(
            e.message.contains("not permitted"),
            "{action}: {}",
            e.message
        );
    }
    assert_eq!(
        std::fs::read_to_string(ws.path().join("victim.txt")).unwrap(),
        "untouched"
    );
    let names: Vec<_> = std::fs::read_dir(ws.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["victim.txt"], "nothing was created or renamed");
}

#[tokio::test]
async fn a_guest_that_claims_read_only_cannot_write() {
    a_read_only_call_cannot_write(guests::LIAR, "liar").await;
}

/// A classifier that calls a writing call read-only (a classifier bug, as
/// a shell's that took `echo x > file` for a read): the host gives the call
/// read-only handles.
#[tokio::test]
async fn a_call_misclassified_as_reading_still_cannot_write() {
    a_read_only_call_cannot_write(guests::MISCLASSIFIER, "misclassifier").await;
}

fn hostile_config(timeout_ms: u64) -> Config {
    grant(
        config(),
        "hostile",
        ToolConfig {
            timeout_ms: Some(timeout_ms),
            ..ToolConfig::default()
        },
    )
}

#[tokio::test]
async fn an_infinite_loop_is_stopped_by_the_epoch_deadline() {
    let (airlock, _dir) = with_component(guests::HOSTILE, hostile_config(300)).await;
    let mut cx = airlock.context();
    let started = Instant::now();
    let r = call(&airlock, &mut cx, "hostile", json!({"attack": "loop"})).await;
    let elapsed = started.elapsed();
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::Timeout, "{e}");
    assert!(e.message.contains("longer than 300 ms"), "{}", e.message);
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
    assert_eq!(
        ok_text(&call(&airlock, &mut cx, "hostile", json!({"attack": "ok"})).await),
        "fine"
    );
}

#[tokio::test]
async fn a_guest_blocked_in_a_host_call_is_stopped_by_the_wall_clock() {
    let (airlock, _dir) = with_component(guests::HOSTILE, hostile_config(300)).await;
    let mut cx = airlock.context();
    let started = Instant::now();
    let r = call(&airlock, &mut cx, "hostile", json!({"attack": "block"})).await;
    assert_eq!(err(&r).class, ErrorClass::Timeout);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        ok_text(&call(&airlock, &mut cx, "hostile", json!({"attack": "ok"})).await),
        "fine"
    );
}

#[tokio::test]
async fn memory_stack_output_and_panics_are_reported_by_class() {
    let (airlock, _dir) = with_component(guests::HOSTILE, hostile_config(10_000)).await;
    let mut cx = airlock.context();
    let cases = [
        (
            json!({"attack": "alloc", "mib": 1024}),
            ErrorClass::MemoryLimit,
            "memory",
        ),
        (
            json!({"attack": "recurse"}),
            ErrorClass::StackOverflow,
            "stack",
        ),
        (
            json!({"attack": "print"}),
            ErrorClass::OutputLimit,
            "stdout",
        ),
        (
            json!({"attack": "panic"}),
            ErrorClass::Trap,
            "panicked on purpose",
        ),
    ];
    for (input, class, needle) in cases {
        let r = call(&airlock, &mut cx, "hostile", input.clone()).await;
        let e = err(&r);
        assert_eq!(e.class, class, "{input}: {e}");
        assert!(e.message.contains(needle), "{input}: {}", e.message);
        assert_eq!(
            ok_text(&call(&airlock, &mut cx, "hostile", json!({"attack": "ok"})).await),
            "fine",
            "after {input}"
        );
    }
    let r = call(
        &airlock,
        &mut cx,
        "hostile",
        json!({"attack": "alloc", "mib": 16}),
    )
    .await;
    assert_eq!(
        ok_text(&r),
        "allocated 16 MiB",
        "allocations under the limit succeed"
    );
}

/// `wasi:sockets` is linked deny-all, so a component that imports it (as
/// componentize-py links it into every one) loads; so is `wasi:http` for a
/// tool that asks for no hosts (stock JavaScript components import it).
/// Every way out fails, to loopback too, and with hosts granted to the tool
/// (which asked for none):
/// the HTTP request is refused before a connection is made, and the tool's
/// error says which origin Airlock refused and why.
#[tokio::test]
async fn raw_sockets_and_http_load_and_reach_nothing_not_even_loopback() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let datagrams = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    datagrams.set_nonblocking(true).unwrap();
    let tcp_port = listener.local_addr().unwrap().port();
    let input = json!({
        "tcp_port": tcp_port,
        "udp_port": datagrams.local_addr().unwrap().port(),
    });
    let granted = grant(
        config(),
        "sockets",
        ToolConfig {
            network: vec!["127.0.0.1".into(), "localhost".into()],
            ..ToolConfig::default()
        },
    );
    for mut config in [config(), granted] {
        config.permissions.allow = vec!["sockets".into()];
        let (airlock, _dir) = with_component(guests::SOCKETS, config).await;
        assert!(airlock.registry().failures().is_empty());
        let entry = airlock.registry().get("sockets").expect("it loads");
        let denied = entry.tool.deny_all_imports();
        for package in ["wasi:sockets/", "wasi:http/"] {
            assert!(
                denied.iter().any(|i| i.starts_with(package)),
                "{package} in {denied:?}"
            );
        }
        let mut cx = airlock.context();
        let r = call(&airlock, &mut cx, "sockets", input.clone()).await;
        let e = err(&r);
        assert_eq!(e.class, ErrorClass::PermissionDenied);
        let (report, note) = e.message.split_once("\n(").expect(&e.message);
        assert_eq!(
            report,
            "tcp: access-denied\nudp: access-denied\nlookup: permanent-resolver-failure\n\
             http: ErrorCode::HttpRequestDenied"
        );
        assert!(
            note.starts_with(&format!(
                "Airlock refused the tool's GET request to http://127.0.0.1:{tcp_port}: "
            )) && note.contains("this one asks for none or was granted none"),
            "{note}"
        );
        let refused = listener.accept().map(|_| ()).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::WouldBlock);
        let mut buf = [0u8; 16];
        let nothing = datagrams.recv_from(&mut buf).map(|_| ()).unwrap_err();
        assert_eq!(nothing.kind(), std::io::ErrorKind::WouldBlock);
    }
}

#[tokio::test]
async fn cancellation_stops_a_spinning_guest_within_a_tick() {
    use airlock_host::tool::CancellationToken;
    use airlock_host::{CallControl, ToolUse};
    let (airlock, _dir) = with_component(guests::HOSTILE, hostile_config(30_000)).await;
    let mut cx = airlock.context();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let cancelled_at = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
        Instant::now()
    });
    let r = airlock
        .call_with(
            &mut cx,
            ToolUse::new("c1", "hostile", json!({"attack": "loop"})),
            CallControl {
                cancel,
                ..CallControl::default()
            },
        )
        .await;
    let stopped = Instant::now();
    assert_eq!(err(&r).class, ErrorClass::Cancelled);
    let latency = stopped - cancelled_at.await.unwrap();
    assert!(latency < Duration::from_millis(500), "{latency:?}");
}
