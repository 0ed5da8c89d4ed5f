//! A Claude Code settings file, with rules and hooks in the shapes of the
//! conventions reference (§4.1, §4.4, §4.5), merged into airlock.toml and
//! applied to real calls of the bundled tools.

use airlock_host::{Config, ErrorClass, PermissionAnswer, PermissionMode};
use airlock_tests::*;
use serde_json::json;
use std::path::Path;

/// The settings file: rules, a mode, a blocking PreToolUse command hook and
/// a PostToolUse hook that adds context, plus keys that are not about
/// tools.
fn settings(dir: &Path) -> std::path::PathBuf {
    let check = dir.join("check.sh");
    std::fs::write(
        &check,
        "#!/bin/sh\nif grep -q frozen; then echo 'frozen files stay as they are' >&2; exit 2; fi\nexit 0\n",
    )
    .unwrap();
    let lint = dir.join("lint.sh");
    std::fs::write(
        &lint,
        "#!/bin/sh\ncat >/dev/null\necho '{\"hookSpecificOutput\":{\"hookEventName\":\"PostToolUse\",\"additionalContext\":\"lint: clean\"}}'\n",
    )
    .unwrap();
    let path = dir.join("settings.json");
    let settings = json!({
        "$schema": "https://json.schemastore.org/claude-code-settings.json",
        "model": "opus",
        "permissions": {
            "allow": ["Edit(./out/**)"],
            "ask": ["Edit(/src/**/*.ts)", "Read(./notes.txt)"],
            "deny": ["Read(./.env)", "WebFetch(domain:*.example.com)"],
            "defaultMode": "default"
        },
        "hooks": {
            "PreToolUse": [{"matcher": "Edit|Write", "hooks": [
                {"type": "command", "command": format!("sh {}", check.display()), "timeout": 60}]}],
            "PostToolUse": [{"matcher": "Edit|Write", "hooks": [
                {"type": "command", "command": format!("sh {}", lint.display())}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "true"}]}]
        }
    });
    std::fs::write(&path, settings.to_string()).unwrap();
    path
}

#[tokio::test]
async fn the_settings_files_rules_mode_and_hooks_apply() {
    let ws = workspace(&[
        (".env", "SECRET=1"),
        ("src/a.ts", "let a = 1;\n"),
        ("notes.txt", "n"),
    ]);
    std::fs::create_dir(ws.path().join("out")).unwrap();
    let claude = ws.path().join(".claude");
    std::fs::create_dir(&claude).unwrap();
    let settings = settings(&claude);
    let dir = tempfile::tempdir().unwrap();
    // The settings file sits in the project, so the workspace is granted
    // read-only (no tool may rewrite the rules it is held to) and `write`
    // gets `out/` read-write.
    let toml = format!(
        "workspace = {:?}\nworkspace_access = \"read\"\nsettings = [{:?}]\n\
         [[tools.write.mounts]]\nhost = {:?}\naccess = \"read-write\"\n\
         [permissions]\ndeny = [\"ls\"]\n",
        ws.path(),
        settings,
        ws.path().join("out"),
    );
    let config = Config::from_toml(&toml, Some(dir.path())).unwrap();
    assert_eq!(
        config.permissions.deny,
        ["ls", "Read(./.env)", "WebFetch(domain:*.example.com)"]
    );
    let root = canonical(ws.path());
    assert_eq!(
        config.permissions.ask[0],
        format!("Edit(/{root}/src/**/*.ts)"),
        "anchored at the project holding .claude/"
    );
    assert_eq!(config.merged_settings, std::slice::from_ref(&settings));
    let prompter = ScriptedPrompter::new(vec![PermissionAnswer::Allow]);
    let airlock = airlock(config).await.with_prompter(prompter.clone());
    let mut cx = airlock.context();
    assert!(
        cx.tools().get("ls").is_none(),
        "airlock.toml's bare deny still hides ls"
    );
    let at = |rel: &str| format!("{root}/{rel}");
    let asked = || prompter.asked.lock().unwrap().len();

    let r = call(&airlock, &mut cx, "read", json!({"file_path": at(".env")})).await;
    assert_eq!(err(&r).class, ErrorClass::PermissionDenied);
    let r = call(
        &airlock,
        &mut cx,
        "read",
        json!({"file_path": at("src/a.ts")}),
    )
    .await;
    assert!(ok_text(&r).contains("let a"));
    assert_eq!(asked(), 0, "a read goes ahead in default mode");
    let r = call(
        &airlock,
        &mut cx,
        "read",
        json!({"file_path": at("notes.txt")}),
    )
    .await;
    ok_text(&r);
    assert_eq!(asked(), 1, "the Read ask rule asked");

    let write = |rel: &str| json!({"file_path": at(rel), "content": "x"});
    let r = call(&airlock, &mut cx, "write", write("out/x.txt")).await;
    ok_text(&r);
    assert_eq!(
        r.additional_context,
        ["lint: clean"],
        "the PostToolUse hook ran"
    );
    assert_eq!(
        asked(),
        1,
        "the allow rule let the write through in default mode"
    );
    let r = call(&airlock, &mut cx, "write", write("out/frozen.txt")).await;
    assert_eq!(err(&r).class, ErrorClass::PermissionDenied);
    assert!(
        err(&r).message.contains("frozen files stay"),
        "{}",
        err(&r).message
    );
    assert!(!ws.path().join("out/frozen.txt").exists());

    // In acceptEdits (airlock.toml's own mode, over the file's `default`),
    // edits go ahead unasked, except where the Edit ask rule says otherwise.
    let toml = format!("{toml}default_mode = \"acceptEdits\"\n");
    let config = Config::from_toml(&toml, Some(dir.path())).unwrap();
    assert_eq!(config.permissions.default_mode, PermissionMode::AcceptEdits);
    let prompter = ScriptedPrompter::new(vec![]);
    let airlock = airlock
        .with_config(config)
        .await
        .unwrap()
        .with_prompter(prompter.clone());
    let mut cx = airlock.context();
    let r = call(&airlock, &mut cx, "write", write("out/notes.txt")).await;
    ok_text(&r);
    assert!(prompter.asked.lock().unwrap().is_empty());
    let r = call(
        &airlock,
        &mut cx,
        "read",
        json!({"file_path": at("src/a.ts")}),
    )
    .await;
    ok_text(&r);
    let edit = json!({"file_path": at("src/a.ts"), "old_string": "1", "new_string": "2"});
    let r = call(&airlock, &mut cx, "edit", edit).await;
    assert_eq!(err(&r).class, ErrorClass::PermissionDenied);
    assert_eq!(
        prompter.asked.lock().unwrap().len(),
        1,
        "the Edit ask rule asked"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("src/a.ts")).unwrap(),
        "let a = 1;\n"
    );
}

#[test]
fn airlock_tomls_own_mode_wins_and_a_bad_settings_file_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.json");
    std::fs::write(&path, r#"{"permissions": {"defaultMode": "plan"}}"#).unwrap();
    let from = |toml: &str| Config::from_toml(toml, Some(dir.path()));
    let mode = |toml: &str| from(toml).unwrap().permissions.default_mode;
    assert_eq!(mode("settings = [\"settings.json\"]"), PermissionMode::Plan);
    assert_eq!(
        mode("settings = [\"settings.json\"]\n[permissions]\ndefault_mode = \"acceptEdits\""),
        PermissionMode::AcceptEdits
    );

    std::fs::write(
        &path,
        r#"{"hooks": {"PreToolUse": [{"matcher": "mcp__memory__.*", "hooks": [{"type": "http", "url": "http://127.0.0.1:8080/hook"}]}]}}"#,
    )
    .unwrap();
    let e = from("settings = [\"settings.json\"]")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with(&path.display().to_string()), "{e}");
    assert!(e.contains("hooks.PreToolUse[0].hooks[0].type"), "{e}");
    let e = from("settings = [\"missing.json\"]")
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.json"), "{e}");
}
