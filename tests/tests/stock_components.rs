//! Stock components from the languages' own toolchains, built in the test
//! run (componentize-py; jco with StarlingMonkey and with QuickJS, whose
//! default build uses the component model's async builtins), through the
//! full pipeline: each loads unmodified, with the imports it brings and
//! cannot use linked deny-all, answers, is stopped by the epoch deadline,
//! and is held by the same sandbox as a Rust tool.

use airlock_host::config::ToolConfig;
use airlock_host::{Airlock, ErrorClass};
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

#[tokio::test]
async fn a_stock_starlingmonkey_component_runs_and_is_stopped_by_the_epoch() {
    let component = stock::js_tool(stock::Engine::StarlingMonkey);
    let (airlock, _dir, _ws) = load(component, "jsstock").await;
    let entry = airlock.registry().get("jsstock").unwrap();
    let denied = entry.tool.deny_all_imports();
    assert!(
        denied.iter().any(|i| i.starts_with("wasi:http/")),
        "jco's default build imports wasi:http, and the tool asks for no hosts: {denied:?}"
    );
    answers_then_is_stopped(&airlock, "jsstock").await;
}

#[tokio::test]
async fn a_stock_quickjs_component_with_the_async_abi_runs_and_is_stopped_by_the_epoch() {
    let component = stock::js_tool(stock::Engine::QuickJs);
    let (airlock, _dir, _ws) = load(component, "jsstock").await;
    answers_then_is_stopped(&airlock, "jsstock").await;
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
    let built = std::process::Command::new(componentize_py::componentize_py())
        .arg("-d")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/wit"))
        .args(["-w", "tool-component", "componentize", "-p"])
        .arg(project.path())
        .arg("-p")
        .arg(&sdk)
        .args(["app", "-o"])
        .arg(&wasm)
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
    let (node, jco) = stock::jco().unwrap_or_else(|e| panic!("{e}"));
    let wasm = project.path().join("upper.wasm");
    let built = std::process::Command::new(node)
        .arg(jco)
        .arg("componentize")
        .arg(project.path().join("tool.js"))
        .arg("-w")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/wit"))
        .args(["-n", "tool-component", "--bundle", "--bundle-config"])
        .arg(sdk.join("bundle.config.js"))
        .arg("-o")
        .arg(&wasm)
        .current_dir(project.path())
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
