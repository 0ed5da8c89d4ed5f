//! The `bash` tool: parity with GNU bash on the scripts agents run
//! (`tests/bash-parity/`), per-command classification, context changes, and
//! what the sandbox must hold (no native processes, no network, no escape
//! from the grants, loops and floods stopped).

use airlock_host::Config;
use airlock_host::config::ToolConfig;
use airlock_host::{
    Airlock, ErrorClass, ExecutorEvent, PermissionMode, SafetyFlags, ToolContext, ToolResult,
    ToolUse,
};
use airlock_tests::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn parity_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bash-parity")
}

/// A copy of the fixture tree, in a directory named `project` (so scripts
/// that print its name print the same under both shells).
struct Fixture {
    _parent: tempfile::TempDir,
    path: PathBuf,
}

impl Fixture {
    fn path(&self) -> &Path {
        &self.path
    }
}

fn fixture() -> Fixture {
    let parent = tempfile::tempdir().unwrap();
    let path = parent.path().join("project");
    std::fs::create_dir(&path).unwrap();
    copy_tree(&parity_dir().join("fixture"), &path);
    Fixture {
        _parent: parent,
        path,
    }
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The scripts of `scripts.txt`, by name.
fn scripts() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(parity_dir().join("scripts.txt")).unwrap();
    text.split("\n### ")
        .skip(1)
        .map(|block| {
            let (name, body) = block.split_once('\n').unwrap_or((block, ""));
            (name.trim().to_string(), body.trim_end().to_string())
        })
        .collect()
}

/// stdout and exit code of `script` under GNU bash in `dir`.
fn gnu_bash(script: &str, dir: &Path) -> (String, i32) {
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env_clear()
        .env("LC_ALL", "C")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .stderr(std::process::Stdio::null())
        .output()
        .expect("bash runs");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// A host with the bundled tools, `dir` as the workspace, no prompts.
async fn host(dir: &Path) -> Airlock {
    let mut config = workspace_config(dir);
    config.permissions.default_mode = PermissionMode::BypassPermissions;
    airlock(config).await
}

/// [`host`], with `git` and `python3` granted to `bash` (confined through
/// this crate's `sandbox_helper`, since a test binary cannot be its own),
/// and 8 MiB to write per call.
async fn host_with_programs(dir: &Path) -> Airlock {
    airlock(programs_config(dir)).await
}

fn programs_config(dir: &Path) -> Config {
    let mut config = workspace_config(dir);
    config.permissions.default_mode = PermissionMode::BypassPermissions;
    config.sandbox_helper = Some(env!("CARGO_BIN_EXE_sandbox_helper").into());
    config.limits.write_mib = 8;
    let shell = config.tools.entry("bash".into()).or_default();
    shell.programs = vec!["git".into(), "/usr/bin/python3".into()];
    config
}

/// stdout and exit code of `script` under Airlock's bash in `dir` (stderr
/// discarded by the script itself, as [`gnu_bash`] discards it).
async fn airlock_bash(script: &str, dir: &Path) -> (String, i32) {
    let airlock = host_with_programs(dir).await;
    let mut cx = airlock.context();
    let r = bash(&airlock, &mut cx, &format!("exec 2>/dev/null\n{script}")).await;
    let text = match &r.outcome {
        Ok(output) => output.text_content(),
        Err(e) => e.message.clone(),
    };
    // The tool ends a non-zero exit's output with a line "[exit code N]".
    let (out, code) = match text.rsplit_once("[exit code ") {
        Some((out, code)) => (
            out.strip_suffix('\n').unwrap_or(out),
            code.trim_end_matches(']').parse().expect("an exit code"),
        ),
        None => (text.as_str(), 0),
    };
    (out.to_string(), code)
}

/// Runs every script under both shells and reports the match rate; every
/// difference is listed.
#[tokio::test]
async fn most_scripts_agents_run_match_gnu_bash() {
    let scripts = scripts();
    assert!(scripts.len() >= 200, "{} scripts", scripts.len());
    let mut differ = Vec::new();
    for (name, script) in &scripts {
        let (gnu_dir, our_dir) = (fixture(), fixture());
        let expected = gnu_bash(script, gnu_dir.path());
        let got = airlock_bash(script, our_dir.path()).await;
        if expected != got {
            differ.push(format!(
                "{name}: GNU bash {:?} (exit {}), Airlock {:?} (exit {})",
                expected.0, expected.1, got.0, got.1
            ));
        }
    }
    let same = scripts.len() - differ.len();
    let rate = same as f64 / scripts.len() as f64;
    println!(
        "bash parity: {same} of {} scripts identical ({:.1}%)\n{}",
        scripts.len(),
        rate * 100.0,
        differ.join("\n")
    );
    assert!(rate >= 0.9, "{:.1}% identical", rate * 100.0);
}

#[tokio::test]
async fn a_reading_line_is_concurrency_safe_and_a_writing_one_is_not() {
    let ws = fixture();
    let airlock = host(ws.path()).await;
    let mut cx = airlock.context();
    let r = bash(&airlock, &mut cx, "grep -c INFO logs/app.log").await;
    assert_eq!(ok_text(&r).trim(), "4");
    let flags = r.flags.unwrap();
    assert!(flags.contains(SafetyFlags::READ_ONLY | SafetyFlags::CONCURRENCY_SAFE));
    let r = bash(&airlock, &mut cx, "grep INFO logs/app.log > info.txt").await;
    ok_text(&r);
    let flags = r.flags.unwrap();
    assert!(
        !flags.contains(SafetyFlags::READ_ONLY) && !flags.contains(SafetyFlags::CONCURRENCY_SAFE)
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("info.txt"))
            .unwrap()
            .lines()
            .count(),
        4
    );
}

/// A granted program's reading form is read-only and concurrency-safe, and
/// runs with read-only directories; any other program line is exclusive.
/// A program reaches only the call's directories: HOME is its own `/tmp`,
/// and what lies outside the grants does not exist for it.
#[tokio::test]
async fn granted_programs_are_classified_and_confined_like_any_line() {
    let ws = fixture();
    let airlock = host_with_programs(ws.path()).await;
    let mut cx = airlock.context();
    let r = bash(
        &airlock,
        &mut cx,
        "git init -q && git add -A && git -c user.name=a -c user.email=a@b commit -qm init",
    )
    .await;
    ok_text(&r);
    let flags = r.flags.unwrap();
    assert!(
        !flags.contains(SafetyFlags::READ_ONLY) && !flags.contains(SafetyFlags::CONCURRENCY_SAFE)
    );
    let r = bash(&airlock, &mut cx, "git log --oneline | wc -l").await;
    assert_eq!(ok_text(&r).trim(), "1");
    let flags = r.flags.unwrap();
    assert!(flags.contains(SafetyFlags::READ_ONLY | SafetyFlags::CONCURRENCY_SAFE));
    let secret = tempfile::tempdir().unwrap();
    std::fs::write(secret.path().join("key"), "s3cret").unwrap();
    let read = format!(
        "python3 -c 'import os; print(os.environ[\"HOME\"]); open({:?}).read()'",
        secret.path().join("key").display().to_string()
    );
    let e = err(&bash(&airlock, &mut cx, &read).await).message.clone();
    assert!(
        e.starts_with("/tmp\n") && e.contains("No such file or directory"),
        "{e}"
    );
    assert!(!e.contains("s3cret"), "{e}");
    // No file larger than what the call may still write (`limits.write_mib`).
    let big = "python3 -c 'open(\"big.bin\", \"wb\").write(bytes(16 << 20))'";
    let e = err(&bash(&airlock, &mut cx, big).await).message.clone();
    assert!(e.contains("File too large"), "{e}");
}

/// A granted program reaches the hosts granted to `bash`, through the
/// host's proxy, and no other; without a network grant, none.
#[tokio::test]
async fn granted_programs_reach_only_the_hosts_granted_to_bash() {
    let ws = fixture();
    let (web, other) = (http_server("hello").await, http_server("other").await);
    let fetch = |port: u16| {
        format!(
            "python3 -c 'import urllib.request as u, urllib.error as e\n\
             try: print(u.urlopen(\"http://127.0.0.1:{port}/\", timeout=5).read().decode())\n\
             except e.HTTPError as x: print(x.code, x.read().decode())'"
        )
    };
    let mut config = programs_config(ws.path());
    config.tools.get_mut("bash").unwrap().network = vec![format!("127.0.0.1:{web}")];
    let airlock = airlock(config).await;
    let mut cx = airlock.context();
    let prompt = &cx.tools().get("bash").unwrap().descriptor().prompt;
    assert!(
        prompt.contains(&format!("the network only to 127.0.0.1:{web}")),
        "{prompt}"
    );
    assert_eq!(
        ok_text(&bash(&airlock, &mut cx, &fetch(web)).await).trim(),
        "hello"
    );
    let refused = ok_text(&bash(&airlock, &mut cx, &fetch(other)).await);
    assert!(
        refused
            .starts_with("403 airlock: the host 127.0.0.1 is not in the operator's network grant"),
        "{refused}"
    );
    let airlock = host_with_programs(ws.path()).await;
    let e = err(&bash(&airlock, &mut airlock.context(), &fetch(web)).await)
        .message
        .clone();
    assert!(e.contains("Permission denied"), "{e}");
}

/// A granted program named like a builtin is the one that runs.
#[tokio::test]
async fn a_granted_program_named_like_a_builtin_runs_instead_of_it() {
    let ws = fixture();
    let version = "grep --version | head -1";
    let plain = host_with_programs(ws.path()).await;
    let builtin = bash(&plain, &mut plain.context(), version).await;
    let shown = format!("{:?}", builtin.outcome);
    assert!(!shown.contains("GNU grep"), "{shown}");
    let mut config = programs_config(ws.path());
    let shell = config.tools.get_mut("bash").unwrap();
    shell.programs.push("/usr/bin/grep".into());
    let airlock = airlock(config).await;
    let mut cx = airlock.context();
    let r = bash(&airlock, &mut cx, version).await;
    assert!(
        ok_text(&r).starts_with("grep (GNU grep)"),
        "{:?}",
        r.outcome
    );
    let r = bash(&airlock, &mut cx, "printf 'a\\nb\\n' | grep -c .").await;
    assert_eq!(ok_text(&r).trim(), "2");
}

/// The call's time limit stops a granted program and everything it
/// started, `setsid` or not.
#[tokio::test]
async fn a_program_past_the_calls_time_is_stopped_with_what_it_started() {
    let ws = fixture();
    let airlock = host_with_programs(ws.path()).await;
    let marker = format!("{}.5", 4000 + std::process::id() % 1000);
    let line = format!(
        "python3 -c 'import subprocess, time; subprocess.Popen([\"setsid\", \"sleep\", \"{marker}\"]); time.sleep(100)'"
    );
    let r = call(
        &airlock,
        &mut airlock.context(),
        "bash",
        json!({ "command": line, "timeout": 1500 }),
    )
    .await;
    assert_eq!(err(&r).class, ErrorClass::Timeout, "{}", err(&r).message);
    let alive = || {
        std::process::Command::new("pgrep")
            .args(["-f", &format!("sleep {marker}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let stopped = std::time::Instant::now();
    while alive() {
        assert!(
            stopped.elapsed() < std::time::Duration::from_secs(5),
            "the program outlived its call"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[tokio::test]
async fn a_search_that_finds_nothing_answers_and_a_failing_command_fails() {
    let ws = fixture();
    let airlock = host(ws.path()).await;
    let mut cx = airlock.context();
    let r = bash(&airlock, &mut cx, "grep -rn no-such-text src").await;
    assert_eq!(ok_text(&r), "[exit code 1]");
    let r = bash(&airlock, &mut cx, "cat missing.txt").await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::ToolError);
    assert!(
        e.message.contains("missing.txt") && e.message.ends_with("[exit code 1]"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn a_failing_command_cancels_its_siblings() {
    let ws = fixture();
    let airlock = host(ws.path()).await;
    let executor = airlock.executor(airlock.context());
    executor.add(ToolUse::new("slow", "bash", json!({"command": "sleep 20"})));
    executor.add(ToolUse::new(
        "boom",
        "bash",
        json!({"command": "cat missing.txt"}),
    ));
    executor.add(ToolUse::new(
        "queued",
        "bash",
        json!({"command": "echo late > late.txt"}),
    ));
    executor.close();
    let started = Instant::now();
    let (results, _) = executor.finish().await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the sleeping sibling was stopped"
    );
    let classes: Vec<_> = results
        .iter()
        .map(|r| r.outcome.as_ref().err().map(|e| e.class.clone()))
        .collect();
    assert_eq!(
        classes,
        [
            Some(ErrorClass::Cancelled),
            Some(ErrorClass::ToolError),
            Some(ErrorClass::Cancelled)
        ],
        "{results:?}"
    );
    assert!(
        !ws.path().join("late.txt").exists(),
        "the queued write never ran"
    );
}

/// The user's interrupt stops a running command (interrupt `cancel`).
#[tokio::test]
async fn an_interrupt_stops_a_running_command() {
    let ws = fixture();
    let airlock = host(ws.path()).await;
    let mut executor = airlock.executor(airlock.context());
    executor.add(ToolUse::new("long", "bash", json!({"command": "sleep 20"})));
    executor.close();
    let started = Instant::now();
    let mut result = None;
    while let Some(event) = executor.next().await {
        match event {
            ExecutorEvent::Started { .. } => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                executor.interrupt();
            }
            ExecutorEvent::Result(r) => result = Some(r),
            _ => {}
        }
    }
    let result = result.expect("a result");
    assert_eq!(
        err(&result).class,
        ErrorClass::Cancelled,
        "{}",
        err(&result).message
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn cd_and_export_carry_over_to_the_next_call() {
    let ws = fixture();
    let airlock = host(ws.path()).await;
    let mut cx = airlock.context();
    let r = bash(&airlock, &mut cx, "cd src && export STAGE=two").await;
    ok_text(&r);
    let r = bash(&airlock, &mut cx, "ls; echo $STAGE").await;
    assert_eq!(ok_text(&r), "lib.rs\nmain.rs\nutil\ntwo\n");
    let r = bash(&airlock, &mut cx, "unset STAGE; cd ..; pwd").await;
    assert_eq!(ok_text(&r), format!("{}\n", canonical(ws.path())));
    let r = bash(&airlock, &mut cx, "echo \"[$STAGE]\"; pwd").await;
    assert_eq!(ok_text(&r), format!("[]\n{}\n", canonical(ws.path())));
    // A `cd` out of the grants is refused by the host, as the `cd` tool's.
    let r = bash(&airlock, &mut cx, "cd /").await;
    assert_eq!(r.refused_changes.len(), 1, "{:?}", r.refused_changes);
    assert_eq!(cx.cwd(), Path::new(&canonical(ws.path())));
}

/// Runs `command` under `cx`.
async fn bash(airlock: &Airlock, cx: &mut ToolContext, command: &str) -> ToolResult {
    call(airlock, cx, "bash", json!({ "command": command })).await
}

/// Runs `command` under a fresh context of `airlock`.
async fn run(airlock: &Airlock, command: &str) -> ToolResult {
    bash(airlock, &mut airlock.context(), command).await
}

#[tokio::test]
async fn no_programs_of_the_machine_and_no_network() {
    let ws = fixture();
    let airlock = host(ws.path()).await;
    for command in [
        "python3 -c 'print(1)'",
        "git status",
        "curl https://example.com",
        "wget x",
    ] {
        let e = err(&run(&airlock, command).await).message.clone();
        assert!(
            e.contains("command not found") && e.contains("[exit code 127]"),
            "{command}: {e}"
        );
    }
    let e = err(&run(&airlock, "/bin/ls").await).message.clone();
    assert!(e.ends_with("[exit code 127]"), "{e}");
    let e = err(&run(&airlock, "python3 x.py").await).message.clone();
    assert!(
        e.contains("Airlock's bash runs its builtins and no programs from the machine"),
        "{e}"
    );
    let r = run(&airlock, "echo hi > /dev/tcp/127.0.0.1/80").await;
    assert!(err(&r).message.contains("/dev/tcp"), "{}", err(&r).message);
}

#[tokio::test]
async fn paths_outside_the_grants_are_refused_as_the_file_tools_refuse_them() {
    let ws = fixture();
    let airlock = host(ws.path()).await;
    for command in [
        "cat /etc/passwd",
        "cat ../../../../../etc/passwd",
        "echo x > /tmp/outside.txt",
    ] {
        let e = err(&run(&airlock, command).await).message.clone();
        assert!(
            e.contains("is outside the directories this tool can reach"),
            "{command}: {e}"
        );
    }
    // A command that only asks whether a path exists hears that it does not.
    let e = err(&run(&airlock, "ls /usr").await).message.clone();
    assert!(e.contains("No such file or directory"), "{e}");
    // Reaching the workspace from above it works: the path leads there.
    let inside = format!("cat {}/notes/todo.txt | wc -l", canonical(ws.path()));
    assert_eq!(ok_text(&run(&airlock, &inside).await).trim(), "4");
}

#[tokio::test]
async fn floods_are_capped_and_endless_work_is_stopped() {
    let ws = fixture();
    let airlock = host(ws.path()).await;
    let r = run(&airlock, "yes flood | head -n 200000").await;
    let text = ok_text(&r);
    assert!(
        text.ends_with("more characters of output not shown]"),
        "{}",
        &text[text.len() - 200..]
    );
    assert!(text.len() < 31_000);
    // The tool's own limit.
    let r = call(
        &airlock,
        &mut airlock.context(),
        "bash",
        json!({"command": "while true; do :; done", "timeout": 300}),
    )
    .await;
    assert_eq!(err(&r).class, ErrorClass::Timeout, "{}", err(&r).message);
    // The operator's, which the epoch enforces whatever the tool does.
    let mut config = workspace_config(ws.path());
    config.permissions.default_mode = PermissionMode::BypassPermissions;
    let config = grant(
        config,
        "bash",
        ToolConfig {
            timeout_ms: Some(500),
            ..ToolConfig::default()
        },
    );
    let strict = airlock_tests::airlock(config).await;
    for command in ["while true; do :; done", ":(){ :|:& };:"] {
        let started = Instant::now();
        let r = run(&strict, command).await;
        assert!(r.outcome.is_err(), "{command}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{command}: {:?}",
            started.elapsed()
        );
    }
}
