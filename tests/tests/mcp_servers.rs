//! External MCP servers mounted as tools: `tests/mcp/echo_server.py` (the
//! official Python `mcp` SDK, pinned in the tests' own environment) started
//! by the host, its tools listed as `mcp__echo__*`, and called through the
//! pipeline and the executor: asked about (a native program), validated,
//! cancelled at the server, timed out, with progress, and with only the
//! environment granted.

use airlock_host::config::{McpServerConfig, ToolConfig};
use airlock_host::tool::ProgressSink;
use airlock_host::{
    Airlock, CallControl, Config, ErrorClass, PermissionAnswer, PermissionMode, SafetyFlags,
    ToolOrigin, ToolUse,
};
use airlock_tests::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

#[path = "../support/python.rs"]
mod support;

/// The tests' Python interpreter, with the pinned `mcp` SDK (a virtual
/// environment, created on first use): the interpreter itself, not a
/// wrapper script such as pyenv's that adds variables of its own.
fn python() -> String {
    support::python().display().to_string()
}

fn server(args: &[&str]) -> McpServerConfig {
    let script = format!("{}/mcp/echo_server.py", env!("CARGO_MANIFEST_DIR"));
    let args = std::iter::once(script)
        .chain(args.iter().map(|a| a.to_string()))
        .collect();
    McpServerConfig {
        env: BTreeMap::from([("ECHO_KEY".to_string(), "1".to_string())]),
        // The test binary cannot be the sandbox helper (the `airlock`
        // binary is; host/cli/tests/mcp.rs runs servers confined).
        sandbox: false,
        ..McpServerConfig::new(python(), args)
    }
}

/// What failed to load from the MCP servers, as reported.
fn server_failures(airlock: &Airlock) -> Vec<String> {
    let failures = airlock.registry().failures().iter();
    failures
        .filter(|f| matches!(f.origin, ToolOrigin::Mcp(_)))
        .map(|f| f.to_string())
        .collect()
}

fn config_with(ws: &Path, servers: &[(&str, McpServerConfig)]) -> Config {
    let mut config = workspace_config(ws);
    for (name, server) in servers {
        config.mcp_servers.insert(name.to_string(), server.clone());
    }
    config
}

#[tokio::test]
async fn a_servers_tools_are_mounted_and_ask_before_they_run() {
    let ws = workspace(&[]);
    let prompter = ScriptedPrompter::new(vec![PermissionAnswer::Allow, PermissionAnswer::Allow]);
    let airlock = airlock(config_with(ws.path(), &[("echo", server(&[]))]))
        .await
        .with_prompter(prompter.clone());
    assert!(
        server_failures(&airlock).is_empty(),
        "{:?}",
        server_failures(&airlock)
    );
    let names: Vec<String> = airlock
        .registry()
        .entries()
        .iter()
        .map(|e| e.descriptor().name.clone())
        .filter(|n| n.starts_with("mcp__"))
        .collect();
    assert_eq!(
        names,
        [
            "mcp__echo__add",
            "mcp__echo__echo",
            "mcp__echo__env",
            "mcp__echo__fail",
            "mcp__echo__slow",
            "mcp__echo__where"
        ]
    );
    let echo = airlock.registry().get("mcp__echo__echo").unwrap();
    assert_eq!(echo.tool.origin(), &ToolOrigin::Mcp("echo".into()));
    assert!(echo.descriptor().flags.contains(SafetyFlags::READ_ONLY));
    assert!(
        airlock
            .registry()
            .get("mcp__echo__slow")
            .unwrap()
            .descriptor()
            .flags
            .contains(SafetyFlags::DESTRUCTIVE),
        "no annotations: destructive by MCP's default"
    );

    let mut cx = airlock.context();
    let r = call(&airlock, &mut cx, "mcp__echo__echo", json!({"text": "hi"})).await;
    assert_eq!(ok_text(&r), "echo: hi");
    let asked = prompter.asked.lock().unwrap().clone();
    assert_eq!(
        asked.len(),
        1,
        "a read-only tool outside the sandbox still asks"
    );
    assert!(
        asked[0].reason.contains("outside the sandbox"),
        "{}",
        asked[0].reason
    );

    let r = call(&airlock, &mut cx, "mcp__echo__echo", json!({"text": 7})).await;
    assert_eq!(
        err(&r).class,
        ErrorClass::InvalidInput,
        "the server's schema is checked first"
    );
    assert_eq!(prompter.asked.lock().unwrap().len(), 1);

    let r = call(
        &airlock,
        &mut cx,
        "mcp__echo__fail",
        json!({"reason": "out of cheese"}),
    )
    .await;
    assert_eq!(err(&r).class, ErrorClass::ToolError);
    assert!(
        err(&r).message.contains("out of cheese"),
        "{}",
        err(&r).message
    );

    let r = call(&airlock, &mut cx, "mcp__echo__env", json!({})).await;
    assert_eq!(
        err(&r).class,
        ErrorClass::PermissionDenied,
        "the scripted answers ran out: denied"
    );
}

#[tokio::test]
async fn rules_modes_and_the_environment_apply_to_a_server() {
    let ws = workspace(&[]);
    let mut config = config_with(ws.path(), &[("echo", server(&[]))]);
    config.permissions.allow = vec!["mcp__echo__env".into(), "mcp__echo__where".into()];
    config.permissions.deny = vec!["mcp__echo__fail".into()];
    let airlock = airlock(config.clone()).await;
    let mut cx = airlock.context();
    assert!(
        cx.tools().get("mcp__echo__fail").is_none(),
        "a bare deny hides the tool"
    );

    let r = call(&airlock, &mut cx, "mcp__echo__env", json!({})).await;
    let names: Vec<String> = ok_text(&r).split(',').map(String::from).collect();
    assert!(names.contains(&"ECHO_KEY".to_string()), "{names:?}");
    let allowed = ["ECHO_KEY", "PATH", "HOME", "LC_CTYPE"];
    assert!(
        names.iter().all(|n| allowed.contains(&n.as_str())),
        "only the granted environment reaches the server: {names:?}"
    );
    let r = call(&airlock, &mut cx, "mcp__echo__where", json!({})).await;
    assert_eq!(
        ok_text(&r),
        canonical(ws.path()),
        "it runs in the workspace"
    );

    let plan = Config {
        permissions: airlock_host::permissions::PermissionsConfig {
            default_mode: PermissionMode::Plan,
            ..Default::default()
        },
        ..config.clone()
    };
    let planning = airlock.with_config(plan).await.unwrap();
    let mut cx = planning.context();
    let r = call(&planning, &mut cx, "mcp__echo__echo", json!({"text": "x"})).await;
    assert_eq!(
        err(&r).class,
        ErrorClass::PermissionDenied,
        "plan mode does not take an unsandboxed read-only hint on trust (it asks; nobody answers)"
    );

    let mut off = config.clone();
    off.mcp_servers.get_mut("echo").unwrap().enabled = Some(false);
    let off = airlock.with_config(off).await.unwrap();
    assert!(off.registry().get("mcp__echo__echo").is_none());
    assert!(
        off.registry()
            .failures()
            .iter()
            .all(|f| !matches!(f.origin, ToolOrigin::Mcp(_)))
    );
}

#[tokio::test]
async fn a_call_is_cancelled_at_the_server_timed_out_and_reports_progress() {
    let ws = workspace(&[]);
    let marker = ws.path().join("marker");
    let mut config = config_with(ws.path(), &[("echo", server(&[marker.to_str().unwrap()]))]);
    config.permissions.default_mode = PermissionMode::BypassPermissions;
    let airlock = airlock(config.clone()).await;

    let executor = airlock.executor(airlock.context());
    executor.add(ToolUse::new(
        "slow",
        "mcp__echo__slow",
        json!({"seconds": 60}),
    ));
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&marker).unwrap_or_default() != "running" {
        assert!(
            Instant::now() < deadline,
            "the server never started the call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancelled = Instant::now();
    executor.cancel("slow");
    let (results, _) = executor.finish().await;
    assert_eq!(err(&results[0]).class, ErrorClass::Cancelled);
    assert!(cancelled.elapsed() < Duration::from_secs(5));
    while std::fs::read_to_string(&marker).unwrap_or_default() != "cancelled" {
        assert!(
            cancelled.elapsed() < Duration::from_secs(10),
            "the server was not told: {:?}",
            std::fs::read_to_string(&marker)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A call whose future is dropped (an embedder's own timeout) is
    // cancelled at the server too.
    std::fs::write(&marker, "").unwrap();
    let mut cx = airlock.context();
    {
        let slow = ToolUse::new("dropped", "mcp__echo__slow", json!({"seconds": 60}));
        let call = airlock.call(&mut cx, slow);
        tokio::pin!(call);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            tokio::select! {
                r = &mut call => panic!("the call finished: {:?}", r.outcome),
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
            if std::fs::read_to_string(&marker).unwrap_or_default() == "running" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the server never started the call"
            );
        }
    }
    let dropped = Instant::now();
    while std::fs::read_to_string(&marker).unwrap_or_default() != "cancelled" {
        assert!(
            dropped.elapsed() < Duration::from_secs(10),
            "the server was not told of the dropped call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let quick = grant(
        config,
        "mcp__echo__slow",
        ToolConfig {
            timeout_ms: Some(300),
            ..ToolConfig::default()
        },
    );
    let quick = airlock.with_config(quick).await.unwrap();
    let mut cx = quick.context();
    let (progress, mut events) = ProgressSink::channel(8);
    let control = CallControl {
        progress,
        ..CallControl::default()
    };
    let started = Instant::now();
    let r = quick
        .call_with(
            &mut cx,
            ToolUse::new("t", "mcp__echo__slow", json!({"seconds": 30})),
            control,
        )
        .await;
    assert_eq!(err(&r).class, ErrorClass::Timeout);
    assert!(started.elapsed() < Duration::from_secs(10));
    let event = events
        .try_recv()
        .expect("the server's progress came through");
    assert_eq!(
        (event.message.as_str(), event.fraction),
        ("halfway", Some(0.5))
    );
}

#[tokio::test]
async fn a_server_that_cannot_start_is_listed_with_its_reason() {
    let ws = workspace(&[]);
    let missing = McpServerConfig {
        command: "/nonexistent/mcp-server".into(),
        ..server(&[])
    };
    let silent = McpServerConfig {
        command: "sleep".into(),
        args: vec!["30".into()],
        startup_timeout_ms: Some(300),
        // The test binary cannot be the sandbox helper (the `airlock`
        // binary is; host/cli/tests/mcp.rs runs servers confined).
        sandbox: false,
        workspace: Default::default(),
        read: Vec::new(),
        ..server(&[])
    };
    // A server that says why it stops, on stderr, before any MCP.
    let broken = McpServerConfig {
        args: vec![
            "-c".into(),
            "import sys; print('reading config', file=sys.stderr); \
             sys.exit('config.toml: no such file')"
                .into(),
        ],
        ..server(&[])
    };
    let started = Instant::now();
    let servers = [
        ("a__b", server(&[])),
        ("broken", broken),
        ("missing", missing),
        ("silent", silent),
    ];
    let airlock: Airlock = airlock(config_with(ws.path(), &servers)).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    let mut failures = server_failures(&airlock);
    assert_eq!(failures.len(), 4, "{failures:?}");
    let broken = failures.remove(1);
    assert!(
        broken.contains("its stderr ended with: reading config | config.toml: no such file"),
        "{broken}"
    );
    assert!(failures[0].contains("no `__`"), "{failures:?}");
    assert!(
        failures[1].contains("MCP server `missing`") && failures[1].contains("cannot start"),
        "{failures:?}"
    );
    assert!(failures[2].contains("within 300 ms"), "{failures:?}");
    assert!(
        airlock.registry().get("read").is_some(),
        "the other tools still load"
    );
}

#[tokio::test]
async fn a_deferred_servers_tools_are_found_by_tool_search() {
    let ws = workspace(&[]);
    let deferred = McpServerConfig {
        defer_loading: true,
        ..server(&[])
    };
    let mut config = config_with(ws.path(), &[("echo", deferred)]);
    config.permissions.allow = vec!["mcp__echo".into()];
    let airlock = airlock(config).await;
    let mut cx = airlock.context();
    let search = cx
        .tools()
        .get("tool_search")
        .expect("offered: tools are deferred");
    assert!(search.descriptor().prompt.contains("mcp__echo__add"));
    let r = call(
        &airlock,
        &mut cx,
        "tool_search",
        json!({"query": "add two integers"}),
    )
    .await;
    assert!(ok_text(&r).contains("mcp__echo__add"), "{}", ok_text(&r));
    let r = call(&airlock, &mut cx, "mcp__echo__add", json!({"a": 2, "b": 3})).await;
    assert!(ok_text(&r).contains('5'), "{}", ok_text(&r));
}

#[tokio::test]
async fn only_a_servers_tools_may_take_mcp_names() {
    let grants = airlock_host::grants::ToolGrants::nothing(&airlock_host::Limits::default());
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let impostor = airlock_tests::fake::FakeTool::new(
        "mcp__github__merge",
        SafetyFlags::READ_ONLY,
        airlock_host::InterruptBehavior::Cancel,
        log,
    );
    let mut registry = airlock_host::Registry::new();
    let e = registry
        .add(std::sync::Arc::new(impostor), grants)
        .unwrap_err();
    assert!(
        e.to_string().contains("belong to the tools of MCP servers"),
        "{e}"
    );
}

/// What a server started dies with it, and reloads keep running servers
/// (`/proc` tells whether a process lives).
#[cfg(target_os = "linux")]
mod processes {
    use super::*;

    /// Whether a process is alive: it exists and is not a zombie (a killed
    /// grandchild is re-parented, and may wait a while to be reaped).
    fn alive(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => {
                let state = stat.rsplit(')').next().unwrap_or_default().trim_start();
                !state.starts_with(['Z', 'X'])
            }
            Err(_) => false,
        }
    }

    /// Waits for the pid a server's process wrote to `file` (pid 0 is
    /// never a process's).
    async fn pid_in(file: &Path) -> u32 {
        new_pid_in(file, 0).await
    }

    /// What `check` finds, asked every 20 ms for up to `within`.
    async fn polled<T>(within: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(found) = check() {
                return Some(found);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn dies_soon(pid: u32) -> bool {
        let dead = || (!alive(pid)).then_some(());
        polled(Duration::from_secs(10), dead).await.is_some()
    }

    #[tokio::test]
    async fn what_a_server_started_is_killed_with_it() {
        let ws = workspace(&[]);
        let scratch = tempfile::tempdir().unwrap();
        let pidfile = scratch.path().join("grandchild");
        let exited = scratch.path().join("exited");
        let mut spawner = server(&[]);
        spawner
            .env
            .insert("ECHO_GRANDCHILD".into(), pidfile.display().to_string());
        spawner
            .env
            .insert("ECHO_EXITED".into(), exited.display().to_string());
        let mounted = airlock(config_with(ws.path(), &[("echo", spawner)])).await;
        assert!(mounted.registry().get("mcp__echo__echo").is_some());
        let grandchild = pid_in(&pidfile).await;
        assert!(alive(grandchild));
        drop(mounted);
        assert!(
            dies_soon(grandchild).await,
            "the server's own child {grandchild} outlived the Airlock that started the server"
        );
        assert_eq!(
            std::fs::read_to_string(&exited).ok().as_deref(),
            Some("stdin closed"),
            "the server was killed before it could exit on its closed stdin"
        );

        let pidfile = scratch.path().join("failed");
        let failing = McpServerConfig {
            command: "sh".into(),
            args: vec![
                "-c".into(),
                format!("sleep 300 & echo $! > {}; sleep 30", pidfile.display()),
            ],
            startup_timeout_ms: Some(2000),
            // The test binary cannot be the sandbox helper (the `airlock`
            // binary is; host/cli/tests/mcp.rs runs servers confined).
            sandbox: false,
            workspace: Default::default(),
            read: Vec::new(),
            ..server(&[])
        };
        let airlock = airlock(config_with(ws.path(), &[("mute", failing)])).await;
        let grandchild = pid_in(&pidfile).await;
        assert!(
            dies_soon(grandchild).await,
            "a server that failed to start left its child {grandchild} running"
        );
        assert!(
            airlock
                .registry()
                .failures()
                .iter()
                .any(|f| f.to_string().contains("within 2000 ms"))
        );
    }

    /// The parent of a live process.
    fn parent_of(pid: u32) -> u32 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        fields[1].parse().unwrap()
    }

    /// Waits for `file` to hold a pid other than `old`.
    async fn new_pid_in(file: &Path, old: u32) -> u32 {
        let written = || {
            let text = std::fs::read_to_string(file).ok()?;
            text.trim().parse().ok().filter(|&pid| pid != old)
        };
        polled(Duration::from_secs(20), written)
            .await
            .unwrap_or_else(|| panic!("no new pid was written to {}", file.display()))
    }

    #[tokio::test]
    async fn a_reload_keeps_a_running_server_and_starts_a_stopped_or_changed_one() {
        let ws = workspace(&[]);
        let scratch = tempfile::tempdir().unwrap();
        let pidfile = scratch.path().join("grandchild");
        let mut echo = server(&[]);
        echo.env
            .insert("ECHO_GRANDCHILD".into(), pidfile.display().to_string());
        let mut config = config_with(ws.path(), &[("echo", echo)]);
        config.permissions.allow = vec!["mcp__echo".into()];
        let echoes = |a: &Airlock, text: &'static str| {
            let a = a.clone();
            async move {
                let mut cx = a.context();
                let r = call(&a, &mut cx, "mcp__echo__echo", json!({ "text": text })).await;
                assert_eq!(ok_text(&r), format!("echo: {text}"));
            }
        };

        let first = airlock(config.clone()).await;
        let started = pid_in(&pidfile).await;
        let reloaded = first.reload().await.unwrap();
        drop(first);
        echoes(&reloaded, "kept").await;
        assert_eq!(
            pid_in(&pidfile).await,
            started,
            "the server was started again"
        );
        assert!(
            alive(started),
            "dropping the old Airlock stopped the server still in use"
        );

        let server_pid = parent_of(started);
        assert!(
            std::process::Command::new("kill")
                .args(["-KILL", &server_pid.to_string()])
                .status()
                .unwrap()
                .success()
        );
        assert!(dies_soon(server_pid).await);
        let restarted = reloaded.reload().await.unwrap();
        let second = new_pid_in(&pidfile, started).await;
        echoes(&restarted, "restarted").await;
        drop(reloaded);
        assert!(
            dies_soon(started).await,
            "the stopped server's group was not killed with the last tools that used it"
        );

        let mut changed = config.clone();
        let server = changed.mcp_servers.get_mut("echo").unwrap();
        server.env.insert("ECHO_KEY".into(), "2".into());
        let changed = restarted.with_config(changed).await.unwrap();
        let third = new_pid_in(&pidfile, second).await;
        echoes(&changed, "changed").await;
        drop(restarted);
        assert!(dies_soon(second).await);
        assert!(alive(third));
    }
}

#[tokio::test]
async fn variables_in_a_servers_command_and_environment_are_expanded() {
    let ws = workspace(&[]);
    let expanded = McpServerConfig {
        command: format!("${{AIRLOCK_TEST_SURELY_UNSET_PYTHON:-{}}}", python()),
        ..server(&[])
    };
    let mut unset = server(&[]);
    unset
        .env
        .insert("TOKEN".into(), "Bearer ${AIRLOCK_TEST_SURELY_UNSET}".into());
    let servers = [("expanded", expanded), ("unset", unset)];
    let airlock = airlock(config_with(ws.path(), &servers)).await;
    assert!(airlock.registry().get("mcp__expanded__echo").is_some());
    let failures = server_failures(&airlock);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].contains("MCP server `unset`")
            && failures[0].contains("in env.TOKEN")
            && failures[0].contains("AIRLOCK_TEST_SURELY_UNSET is not set"),
        "{failures:?}"
    );
}

/// A tools/call result of 512 MiB on one line (the hostile server of
/// airlock-mcp-client's tests): refused at the line bound while it is read,
/// before rmcp buffers it, so the call ends at once with `output_limit`
/// naming the bound, the server is unavailable, and the peak RSS stays
/// bounded.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_result_past_the_line_bound_ends_the_call_in_bounded_memory() {
    /// A `/proc/self/status` field given in kB, in bytes.
    fn status(field: &str) -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        let kb = line[field.len()..].trim().trim_end_matches(" kB");
        kb.parse::<u64>().unwrap() * 1024
    }
    let ws = workspace(&[]);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../host/mcp-client/tests/hostile_server.py"
    );
    let hostile = McpServerConfig {
        command: "python3".into(),
        args: vec![script.into(), "long-result".into()],
        env: BTreeMap::new(),
        ..server(&[])
    };
    let mut config = config_with(ws.path(), &[("hostile", hostile)]);
    config.permissions.default_mode = PermissionMode::BypassPermissions;
    let quick = ToolConfig {
        timeout_ms: Some(20_000),
        ..ToolConfig::default()
    };
    let airlock = airlock(grant(config, "mcp__hostile__big", quick)).await;
    assert!(
        server_failures(&airlock).is_empty(),
        "{:?}",
        server_failures(&airlock)
    );

    // Linux's clear_refs 5 resets the peak RSS to the RSS now.
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = status("VmRSS:");
    let started = Instant::now();
    let mut cx = airlock.context();
    let r = call(&airlock, &mut cx, "mcp__hostile__big", json!({})).await;
    let growth = status("VmHWM:").saturating_sub(before) >> 20;
    eprintln!("a 512 MiB result: peak RSS grew {growth} MiB");
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::OutputLimit, "{e}");
    assert!(
        e.message.contains(
            "is unavailable: it sent a message (one line on its stdout) of more than 17825792 bytes"
        ),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(growth < 200, "the peak RSS grew {growth} MiB");
    let again = call(&airlock, &mut cx, "mcp__hostile__big", json!({})).await;
    assert_eq!(
        err(&again).message,
        e.message,
        "the server stays unavailable"
    );
}
