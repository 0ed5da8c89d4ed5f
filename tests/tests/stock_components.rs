//! Components from the languages' own toolchains, built in the test run
//! (componentize-py; jco with StarlingMonkey and with QuickJS, whose
//! default build uses the component model's async builtins), through the
//! full pipeline. Stock ones (no SDK): each loads unmodified, with the
//! imports it brings and cannot use linked deny-all, answers, is stopped by
//! the epoch deadline, and is held by the same sandbox as a Rust tool. Then
//! the SDKs' walk-throughs, and the first-party `python` and `json_query`
//! tools.

use airlock_host::config::ToolConfig;
use airlock_host::{Airlock, ErrorClass, InterruptBehavior, SafetyFlags, WorkspaceAccess};
use airlock_tests::*;
use serde_json::json;
use std::path::Path;

#[path = "../support/python.rs"]
mod python;

#[path = "../support/node.rs"]
mod node;

#[path = "../support/componentize_py.rs"]
mod componentize_py;

#[path = "../support/stock.rs"]
mod stock;

/// `component` loaded alone as `tool`, allowed without prompts, with a
/// 3 s call deadline, over a workspace holding `victim.txt`.
async fn load(component: &Path, tool: &str) -> (Airlock, tempfile::TempDir, tempfile::TempDir) {
    let ws = workspace(&[("victim.txt", "untouched")]);
    let mut config = grant(
        workspace_config(ws.path()),
        tool,
        ToolConfig {
            timeout_ms: Some(3_000),
            ..ToolConfig::default()
        },
    );
    config.permissions.allow = vec![tool.into()];
    let (airlock, dir) = with_component(component.to_str().unwrap(), config).await;
    let failures: Vec<String> = airlock
        .registry()
        .failures()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(failures.is_empty(), "{failures:?}");
    (airlock, dir, ws)
}

/// `tool` answers, a call that spins is stopped at the deadline, and the
/// next call is answered.
async fn answers_then_is_stopped(airlock: &Airlock, tool: &str) {
    let mut cx = airlock.context();
    let upper = |text: &str| json!({"mode": "upper", "text": text});
    let r = call(airlock, &mut cx, tool, upper("hi")).await;
    assert_eq!(ok_text(&r), "HI");
    let started = std::time::Instant::now();
    let r = call(airlock, &mut cx, tool, json!({"mode": "spin"})).await;
    assert_eq!(err(&r).class, ErrorClass::Timeout, "{r:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(6));
    let r = call(airlock, &mut cx, tool, upper("after")).await;
    assert_eq!(ok_text(&r), "AFTER", "the host keeps serving");
}

#[tokio::test]
async fn a_stock_python_component_runs_and_is_held_by_the_sandbox() {
    let (airlock, _dir, ws) = load(stock::python_tool(), "pystock").await;
    let entry = airlock.registry().get("pystock").unwrap();
    let denied = entry.tool.deny_all_imports();
    assert!(
        denied.iter().any(|i| i.starts_with("wasi:sockets/")),
        "componentize-py links wasi:sockets into every component: {denied:?}"
    );
    answers_then_is_stopped(&airlock, "pystock").await;
    let mut cx = airlock.context();

    // It claims read-only, so its handles are read-only.
    let input = json!({"mode": "write", "path": "victim.txt"});
    let r = call(&airlock, &mut cx, "pystock", input).await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::Errno("EPERM".into()), "{e}");
    assert!(e.message.contains("not permitted"), "{}", e.message);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("victim.txt")).unwrap(),
        "untouched"
    );

    // Python's own socket module reaches nothing, not even loopback.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let input = json!({"mode": "socket", "port": port});
    let r = call(&airlock, &mut cx, "pystock", input).await;
    assert!(matches!(err(&r).class, ErrorClass::Errno(_)), "{r:?}");
    let refused = listener.accept().map(|_| ()).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::WouldBlock);
}

/// The stock JavaScript tool claims read-only; opening `victim.txt` for
/// writing through `wasi:filesystem` itself is refused.
async fn js_write_is_refused(airlock: &Airlock, ws: &Path) {
    let mut cx = airlock.context();
    let victim = ws.join("victim.txt");
    let input = json!({"mode": "write", "path": canonical(&victim)});
    let r = call(airlock, &mut cx, "jsstock", input).await;
    let e = err(&r);
    assert!(
        e.message.contains("the write was refused: not-permitted"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(victim).unwrap(), "untouched");
}

#[tokio::test]
async fn a_stock_starlingmonkey_component_runs_and_is_stopped_by_the_epoch() {
    let component = stock::js_tool(stock::Engine::StarlingMonkey);
    let (airlock, _dir, ws) = load(component, "jsstock").await;
    let entry = airlock.registry().get("jsstock").unwrap();
    let denied = entry.tool.deny_all_imports();
    assert!(
        denied.iter().any(|i| i.starts_with("wasi:http/")),
        "jco's default build imports wasi:http, and the tool asks for no hosts: {denied:?}"
    );
    answers_then_is_stopped(&airlock, "jsstock").await;
    js_write_is_refused(&airlock, ws.path()).await;
}

#[tokio::test]
async fn a_stock_quickjs_component_with_the_async_abi_runs_and_is_stopped_by_the_epoch() {
    let component = stock::js_tool(stock::Engine::QuickJs);
    let (airlock, _dir, ws) = load(component, "jsstock").await;
    answers_then_is_stopped(&airlock, "jsstock").await;
    js_write_is_refused(&airlock, ws.path()).await;
}

/// The first `lang` code block of the README in `sdk`, as the file `name`
/// of a new project directory.
fn readme_project(sdk: &Path, lang: &str, name: &str) -> tempfile::TempDir {
    let readme = std::fs::read_to_string(sdk.join("README.md")).unwrap();
    let code = readme
        .split(&format!("```{lang}\n"))
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap_or_else(|| panic!("the README has a {lang} block"));
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join(name), code).unwrap();
    project
}

/// The walk-through in `sdk/python/README.md`, built with componentize-py
/// and called, so it stays true.
#[tokio::test]
async fn the_python_sdk_walk_through_builds_and_runs() {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/python");
    let project = readme_project(&sdk, "python", "app.py");
    let wasm = project.path().join("wc.wasm");
    let built = stock::python_sdk_build(project.path(), &wasm)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );

    let ws = workspace(&[("a.txt", "one\ntwo\n")]);
    let (airlock, _dir) = with_component(wasm.to_str().unwrap(), workspace_config(ws.path())).await;
    let entry = airlock.registry().get("wc").expect("it loads");
    let schema = &entry.descriptor().input_schema;
    assert_eq!(schema["required"], json!(["files"]), "{schema}");
    assert_eq!(
        schema["properties"]["files"]["description"],
        "Files to count: absolute, or relative to the cwd."
    );
    let mut cx = airlock.context();
    let r = call(
        &airlock,
        &mut cx,
        "wc",
        json!({"files": ["a.txt"], "total": true}),
    )
    .await;
    assert_eq!(ok_text(&r), "      2 a.txt\n      2 total");
    let r = call(&airlock, &mut cx, "wc", json!({"files": [""]})).await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.message.contains("a file name is empty"), "{}", e.message);
    let r = call(&airlock, &mut cx, "wc", json!({"files": ["/etc/passwd"]})).await;
    assert_eq!(err(&r).class, ErrorClass::PermissionDenied);
    let r = call(&airlock, &mut cx, "wc", json!({"files": ["missing.txt"]})).await;
    let e = err(&r);
    assert!(
        e.message.contains("missing.txt: No such file or directory"),
        "{e}"
    );
}

/// The walk-through in `sdk/js/README.md`, built with jco against the SDK
/// and called, so it stays true.
#[tokio::test]
async fn the_js_sdk_walk_through_builds_and_runs() {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/js");
    let project = readme_project(&sdk, "js", "tool.js");
    let modules = project.path().join("node_modules");
    std::fs::create_dir_all(&modules).unwrap();
    std::os::unix::fs::symlink(&sdk, modules.join("airlock-sdk")).unwrap();
    let wasm = project.path().join("upper.wasm");
    let built = stock::js_sdk_build(project.path(), &wasm)
        .unwrap_or_else(|e| panic!("{e}"))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );

    let (airlock, _dir) = with_component(wasm.to_str().unwrap(), config()).await;
    let entry = airlock.registry().get("upper").expect("it loads");
    assert!(
        entry
            .descriptor()
            .flags
            .contains(airlock_host::SafetyFlags::READ_ONLY)
    );
    let mut cx = airlock.context();
    let r = call(
        &airlock,
        &mut cx,
        "upper",
        json!({"text": "hi", "times": 2}),
    )
    .await;
    assert_eq!(ok_text(&r), "HI HI");
    let r = call(&airlock, &mut cx, "upper", json!({"text": " "})).await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.message.contains("the text is blank"), "{}", e.message);
    let r = call(
        &airlock,
        &mut cx,
        "upper",
        json!({"text": "x", "times": 20000}),
    )
    .await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.message.contains("over 10000 characters"), "{}", e.message);
}

/// The JavaScript SDK's type declarations check its walk-through, and a
/// use of `airlock-sdk/files`, as strict TypeScript (with the TypeScript
/// jco brings), so they stay true to the SDK.
#[test]
fn the_js_sdks_types_check_its_walk_through() {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/js");
    let project = readme_project(&sdk, "js", "tool.ts");
    let dir = project.path();
    let modules = dir.join("node_modules");
    std::fs::create_dir_all(&modules).unwrap();
    std::os::unix::fs::symlink(&sdk, modules.join("airlock-sdk")).unwrap();
    let files = r#"import { FileError, readBytes, readText, writeText } from "airlock-sdk/files";
const text: string = readText("/w/a.txt");
const bytes: Uint8Array = readBytes("/w/a.txt", 1024);
writeText("/w/b.txt", `${text.length} ${bytes.length}`);
const e = new FileError("ENOENT", "/w/c.txt: No such file or directory");
export const code: string = e.code + e.kind;
"#;
    std::fs::write(dir.join("files.ts"), files).unwrap();
    std::fs::write(dir.join("package.json"), r#"{"type": "module"}"#).unwrap();
    let tsconfig = json!({
        "compilerOptions": {
            "strict": true, "noEmit": true, "target": "es2022",
            "module": "nodenext", "moduleResolution": "nodenext",
        },
        "files": ["tool.ts", "files.ts"],
    });
    std::fs::write(dir.join("tsconfig.json"), tsconfig.to_string()).unwrap();
    let (node, jco) = stock::jco().unwrap_or_else(|e| panic!("{e}"));
    let modules_dir = jco.ancestors().nth(4).unwrap();
    let checked = std::process::Command::new(node)
        .arg(modules_dir.join("typescript/bin/tsc"))
        .args(["-p", "."])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}

/// The first-party `python` tool (Claude Code's REPLTool): CPython runs a
/// snippet in the sandbox, with what it prints captured in order and
/// capped, files through the grants, and the epoch deadline for a loop.
#[tokio::test]
async fn the_python_tool_runs_a_snippet_in_the_sandbox() {
    let (airlock, _dir, ws) = load(stock::python_repl(), "python").await;
    let d = airlock
        .registry()
        .get("python")
        .unwrap()
        .descriptor()
        .clone();
    assert!(!d.flags.contains(SafetyFlags::READ_ONLY));
    assert!(!d.flags.contains(SafetyFlags::CONCURRENCY_SAFE));
    assert_eq!(d.interrupt, InterruptBehavior::Cancel);
    assert!(
        d.prompt.contains("datetime, decimal, difflib"),
        "{}",
        d.prompt
    );
    let mut cx = airlock.context();
    let run = |code: &str| json!({ "code": code });

    // componentize-py keeps only the modules imported before its snapshot;
    // the tool imports the standard library's common ones, and says which.
    let code = "import csv, datetime, hashlib, pathlib, statistics, zipfile\n\
                statistics.mean([1, 2, 3]), datetime.date(2026, 12, 2).isoformat()";
    let r = call(&airlock, &mut cx, "python", run(code)).await;
    assert_eq!(ok_text(&r), "(2, '2026-12-02')\n");

    let code = "import sys\nprint('out')\nprint('err', file=sys.stderr)\n\
                open('made.txt', 'w').write('by python')\nlen(open('victim.txt').read())";
    let r = call(&airlock, &mut cx, "python", run(code)).await;
    assert_eq!(ok_text(&r), "out\nerr\n9\n");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("made.txt")).unwrap(),
        "by python"
    );

    let r = call(&airlock, &mut cx, "python", run("print('before')\n1/0")).await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::ToolError, "{e}");
    assert!(
        e.message
            .contains("before\nTraceback (most recent call last):\n  File \"<input>\", line 2")
            && e.message.contains("ZeroDivisionError: division by zero"),
        "{e}"
    );

    let r = call(
        &airlock,
        &mut cx,
        "python",
        run("open('/etc/passwd').read()"),
    )
    .await;
    let e = err(&r);
    assert!(
        e.message.contains("FileNotFoundError")
            && e.message
                .contains("/etc/passwd is outside the directories this tool can reach"),
        "{e}"
    );

    let r = call(&airlock, &mut cx, "python", run("def f(:")).await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.message.contains("does not parse (line 1"), "{e}");

    let r = call(&airlock, &mut cx, "python", run("print('x' * 100_000)")).await;
    let text = ok_text(&r);
    assert!(
        text.starts_with("xxx") && text.len() < 31_000,
        "{}",
        text.len()
    );
    assert!(text.ends_with("[... 70001 more characters of output not shown]"));

    let started = std::time::Instant::now();
    let r = call(&airlock, &mut cx, "python", run("while True: pass")).await;
    assert_eq!(err(&r).class, ErrorClass::Timeout, "{r:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(6));
    let r = call(&airlock, &mut cx, "python", run("6 * 7")).await;
    assert_eq!(ok_text(&r), "42\n", "the host keeps serving");
}

/// Under a read-only grant the `python` tool's writes are refused by the
/// sandbox, whatever the snippet does.
#[tokio::test]
async fn the_python_tool_cannot_write_under_a_read_only_grant() {
    let ws = workspace(&[("victim.txt", "untouched")]);
    let mut config = grant(
        workspace_config(ws.path()),
        "python",
        ToolConfig {
            workspace: Some(WorkspaceAccess::Read),
            ..ToolConfig::default()
        },
    );
    config.permissions.allow = vec!["python".into()];
    let (airlock, _dir) = with_component(stock::python_repl().to_str().unwrap(), config).await;
    let mut cx = airlock.context();
    let code = "open('victim.txt', 'w').write('changed')";
    let r = call(&airlock, &mut cx, "python", json!({ "code": code })).await;
    let e = err(&r);
    assert!(e.message.contains("PermissionError"), "{e}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("victim.txt")).unwrap(),
        "untouched"
    );
}

/// The first-party `json_query` tool: a JMESPath query over a JSON or JSON
/// Lines file, read through `airlock-sdk/files` within the grants.
#[tokio::test]
async fn the_json_query_tool_queries_files_in_the_workspace() {
    let ws = workspace(&[
        (
            "runs.json",
            r#"{"items": [{"name": "a", "status": "failed"}, {"name": "b", "status": "ok"}]}"#,
        ),
        ("log.jsonl", "{\"x\": 1}\n{\"x\": 2}\n"),
        ("notes.txt", "not json"),
    ]);
    let (airlock, _dir) = with_component(
        stock::json_query().to_str().unwrap(),
        workspace_config(ws.path()),
    )
    .await;
    let d = airlock
        .registry()
        .get("json_query")
        .expect("it loads")
        .descriptor()
        .clone();
    assert!(
        d.flags
            .contains(SafetyFlags::READ_ONLY | SafetyFlags::CONCURRENCY_SAFE)
    );
    let mut cx = airlock.context();
    let query = |file: &str, query: &str| json!({"file_path": file, "query": query});

    let r = call(
        &airlock,
        &mut cx,
        "json_query",
        query("runs.json", "items[?status=='failed'].name"),
    )
    .await;
    assert_eq!(ok_text(&r), "[\n  \"a\"\n]");
    let r = call(
        &airlock,
        &mut cx,
        "json_query",
        query("log.jsonl", "sum([].x)"),
    )
    .await;
    assert_eq!(ok_text(&r), "3");

    let r = call(
        &airlock,
        &mut cx,
        "json_query",
        query("runs.json", "items[?"),
    )
    .await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.message.contains("the query does not parse"), "{e}");
    let r = call(&airlock, &mut cx, "json_query", query("notes.txt", "@")).await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.message.contains("notes.txt is not JSON"), "{e}");
    let r = call(&airlock, &mut cx, "json_query", query("missing.json", "@")).await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::Errno("ENOENT".into()), "{e}");
    assert!(
        e.message
            .contains("missing.json: No such file or directory"),
        "{e}"
    );
    let r = call(&airlock, &mut cx, "json_query", query("/etc/passwd", "@")).await;
    assert_eq!(err(&r).class, ErrorClass::PermissionDenied);
}
