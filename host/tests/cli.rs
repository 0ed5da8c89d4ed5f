//! The `airlock` binary, run as a user runs it: exit codes, output, and the
//! demo. Each run gets an empty HOME so no user configuration or tool
//! directory leaks in.

use std::path::Path;
use std::process::{Command, Output};

fn airlock(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_airlock"))
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("AIRLOCK_CONFIG")
        .env_remove("AIRLOCK_LOG")
        .output()
        .expect("the airlock binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn list_shows_the_bundled_tools_and_why_fetch_is_unavailable() {
    let home = tempfile::tempdir().unwrap();
    let out = airlock(home.path(), &["list"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for tool in ["cd", "edit", "glob", "grep", "ls", "read", "sleep", "write"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(tool)),
            "{tool} missing from\n{stdout}"
        );
    }
    assert!(stdout.contains("RC-I-S--"), "{stdout}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("unavailable: fetch") && stderr.contains("wasi:http/"),
        "{stderr}"
    );

    let out = airlock(
        home.path(),
        &["--allow-host", "example.com", "list", "--json"],
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = json["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"fetch"), "{names:?}");
    assert_eq!(json["unavailable"], serde_json::json!([]));
}

#[test]
fn describe_prints_the_prompt_schema_and_grants() {
    let home = tempfile::tempdir().unwrap();
    let out = airlock(home.path(), &["describe", "read"]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("\"file_path\"") && stdout.contains("cat -n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("granted:     workspace none granted"),
        "{stdout}"
    );
    let out = airlock(home.path(), &["describe", "nope"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(text(&out.stderr).contains("no tool is named \"nope\""));
}

#[test]
fn call_runs_a_tool_and_exits_by_outcome() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\nbeta\n").unwrap();
    let dir = ws.path().to_str().unwrap();

    let out = airlock(
        home.path(),
        &[
            "--workspace",
            dir,
            "call",
            "read",
            r#"{"file_path":"a.txt"}"#,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "     1\talpha\n     2\tbeta\n");

    let out = airlock(
        home.path(),
        &[
            "--workspace",
            dir,
            "call",
            "read",
            r#"{"file_path":"missing.txt"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("error (ENOENT):"),
        "{}",
        text(&out.stderr)
    );

    let out = airlock(
        home.path(),
        &[
            "--workspace",
            dir,
            "--read-only",
            "call",
            "write",
            r#"{"file_path":"a.txt","content":"x"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "alpha\nbeta\n"
    );

    let out = airlock(
        home.path(),
        &["--workspace", dir, "call", "read", "{not json"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("not usable JSON"));

    let out = airlock(
        home.path(),
        &["call", "fetch", r#"{"url":"http://127.0.0.1/"}"#],
    );
    assert_eq!(out.status.code(), Some(4));
    assert!(
        text(&out.stderr).contains("fetch is unavailable"),
        "{}",
        text(&out.stderr)
    );

    let out = airlock(
        home.path(),
        &[
            "--workspace",
            dir,
            "call",
            "read",
            r#"{"file_path":"a.txt"}"#,
            "--json",
        ],
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["name"], "read");
    assert_eq!(
        json["flags"],
        serde_json::json!([
            "read-only",
            "concurrency-safe",
            "idempotent",
            "search-or-read"
        ])
    );
}

#[test]
fn a_bad_configuration_exits_with_3() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("airlock.toml");
    std::fs::write(&config, "[limits]\ntimeout = 1\n").unwrap();
    let out = airlock(home.path(), &["--config", config.to_str().unwrap(), "list"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("unknown field `timeout`"),
        "{}",
        text(&out.stderr)
    );
    let out = airlock(home.path(), &["--workspace", "/proc", "list"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("never granted"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_demo_runs_end_to_end() {
    let home = tempfile::tempdir().unwrap();
    let out = airlock(home.path(), &["demo"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("all as expected"), "{stdout}");
    assert!(stdout.contains("[15/15]"), "{stdout}");
}
