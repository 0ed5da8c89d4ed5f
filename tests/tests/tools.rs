//! Every first-party tool, called through the host on real temporary
//! workspaces, with its failure cases.

use airlock_host::config::ToolConfig;
use airlock_host::{ContentBlock, ErrorClass, Preflight, SafetyFlags, WorkspaceAccess};
use airlock_tests::*;
use serde_json::json;

/// The tools under test get the workspace, in acceptEdits mode: these
/// tests are about what tools do, not about asking for permission.
fn edits_config(workspace: &std::path::Path) -> airlock_host::Config {
    let mut config = workspace_config(workspace);
    config.permissions.default_mode = airlock_host::PermissionMode::AcceptEdits;
    config
}

#[tokio::test]
async fn read_numbers_lines_and_records_the_read() {
    let ws = workspace(&[("a.txt", "one\ntwo\r\nthree\n")]);
    let airlock = airlock(edits_config(ws.path())).await;
    let mut cx = airlock.context();
    let r = call(&airlock, &mut cx, "read", json!({"file_path": "a.txt"})).await;
    assert_eq!(ok_text(&r), "     1\tone\n     2\ttwo\n     3\tthree");
    assert!(r.flags.unwrap().contains(SafetyFlags::READ_ONLY));
    let stamp = cx
        .file_stamp(&path_in(ws.path(), "a.txt"))
        .expect("the read is recorded");
    assert_eq!(stamp.size, 15);
}

#[tokio::test]
async fn read_pages_with_offset_and_limit() {
    let text: String = (1..=3000).map(|i| format!("line {i}\n")).collect();
    let ws = workspace(&[("long.txt", &text)]);
    let airlock = airlock(edits_config(ws.path())).await;
    let mut cx = airlock.context();
    let all = ok_text(&call(&airlock, &mut cx, "read", json!({"file_path": "long.txt"})).await);
    assert_eq!(
        all.lines().filter(|l| l.contains("\tline ")).count(),
        2000,
        "2000 lines by default"
    );
    assert!(
        all.contains("PARTIAL view: lines 1 to 2000 of 3000"),
        "{}",
        &all[all.len() - 200..]
    );
    let page = ok_text(
        &call(
            &airlock,
            &mut cx,
            "read",
            json!({"file_path": "long.txt", "offset": 2999, "limit": 5}),
        )
        .await,
    );
    assert!(
        page.starts_with("  2999\tline 2999\n  3000\tline 3000"),
        "{page}"
    );
    let past = ok_text(
        &call(
            &airlock,
            &mut cx,
            "read",
            json!({"file_path": "long.txt", "offset": 4000}),
        )
        .await,
    );
    assert!(past.contains("offset 4000 is past its end"), "{past}");
}

#[tokio::test]
async fn read_handles_long_lines_empty_binary_images_and_directories() {
    let long = "x".repeat(2500);
    let ws = workspace(&[
        ("long.txt", &long),
        ("empty.txt", ""),
        ("bin.dat", "ab\0cd"),
        ("d/f", ""),
    ]);
    std::fs::write(ws.path().join("pic.png"), [0x89, b'P', b'N', b'G', 0, 1, 2]).unwrap();
    let airlock = airlock(edits_config(ws.path())).await;
    let mut cx = airlock.context();
    let t = ok_text(&call(&airlock, &mut cx, "read", json!({"file_path": "long.txt"})).await);
    assert!(
        t.contains("… [line truncated]") && t.contains("1 lines longer than 2000"),
        "{t}"
    );
    let t = ok_text(&call(&airlock, &mut cx, "read", json!({"file_path": "empty.txt"})).await);
    assert!(t.contains("exists but is empty"), "{t}");
    let e = call(&airlock, &mut cx, "read", json!({"file_path": "bin.dat"})).await;
    assert!(
        err(&e).message.contains("binary file"),
        "{}",
        err(&e).message
    );
    let e = call(&airlock, &mut cx, "read", json!({"file_path": "d"})).await;
    assert!(err(&e).message.contains("is a directory"));
    let r = call(&airlock, &mut cx, "read", json!({"file_path": "pic.png"})).await;
    let output = r.outcome.unwrap();
    assert!(
        matches!(&output.content[1], ContentBlock::Image { mime_type, data } if mime_type == "image/png" && data.len() == 7)
    );
}

#[tokio::test]
async fn read_reports_missing_files_and_paths_outside_the_workspace() {
    let ws = workspace(&[]);
    let airlock = airlock(edits_config(ws.path())).await;
    let mut cx = airlock.context();
    let e = call(
        &airlock,
        &mut cx,
        "read",
        json!({"file_path": "missing.txt"}),
    )
    .await;
    let e = err(&e);
    assert_eq!(e.class, ErrorClass::Errno("ENOENT".into()));
    assert!(
        e.message.ends_with("missing.txt does not exist"),
        "{}",
        e.message
    );
    let e = call(
        &airlock,
        &mut cx,
        "read",
        json!({"file_path": "../../etc/passwd"}),
    )
    .await;
    let e = err(&e);
    assert_eq!(e.class, ErrorClass::PermissionDenied);
    assert!(
        e.message
            .contains("outside the directories this tool can reach"),
        "{}",
        e.message
    );
    let e = call(
        &airlock,
        &mut cx,
        "read",
        json!({"file_path": "/etc/hostname"}),
    )
    .await;
    assert_eq!(err(&e).class, ErrorClass::PermissionDenied);
}

#[tokio::test]
async fn schema_errors_say_where_and_what() {
    let ws = workspace(&[]);
    let airlock = airlock(edits_config(ws.path())).await;
    let mut cx = airlock.context();
    let e = call(
        &airlock,
        &mut cx,
        "read",
        json!({"file_path": 5, "extra": true}),
    )
    .await;
    let e = err(&e);
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(
        e.message
            .contains("at `/file_path`: 5 is not of type \"string\""),
        "{}",
        e.message
    );
    assert!(e.message.contains("extra"), "{}", e.message);
    let e = call(&airlock, &mut cx, "nope", json!({})).await;
    assert_eq!(err(&e).class, ErrorClass::UnknownTool);
    assert_eq!(err(&e).message, "No such tool available: nope");
}

#[tokio::test]
async fn write_creates_replaces_and_records() {
    let ws = workspace(&[("old.txt", "old")]);
    let airlock = airlock(edits_config(ws.path())).await;
    let mut cx = airlock.context();
    let t = ok_text(
        &call(
            &airlock,
            &mut cx,
            "write",
            json!({"file_path": "new/dir/n.txt", "content": "fresh"}),
        )
        .await,
    );
    assert!(t.starts_with("Created"), "{t}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("new/dir/n.txt")).unwrap(),
        "fresh"
    );
    let t = ok_text(
        &call(
            &airlock,
            &mut cx,
            "write",
            json!({"file_path": "old.txt", "content": "replaced"}),
        )
        .await,
    );
    assert!(t.starts_with("Updated"), "{t}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("old.txt")).unwrap(),
        "replaced"
    );
    assert!(
        cx.file_stamp(&path_in(ws.path(), "old.txt")).is_some(),
        "a write counts as a read"
    );
    let leftovers = std::fs::read_dir(ws.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains("airlock")
        })
        .count();
    assert_eq!(leftovers, 0, "no temporary files are left");
}

#[tokio::test]
async fn write_into_a_read_only_workspace_is_refused() {
    let ws = workspace(&[("keep.txt", "original")]);
    let mut config = edits_config(ws.path());
    config.workspace_access = WorkspaceAccess::Read;
    let airlock = airlock(config).await;
    let mut cx = airlock.context();
    let e = call(
        &airlock,
        &mut cx,
        "write",
        json!({"file_path": "keep.txt", "content": "changed"}),
    )
    .await;
    let e = err(&e);
    assert_eq!(e.class, ErrorClass::PermissionDenied);
    assert!(e.message.contains("read-only"), "{}", e.message);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("keep.txt")).unwrap(),
        "original"
    );
}

#[tokio::test]
async fn edit_replaces_unique_text_after_a_read() {
    let ws = workspace(&[("f.rs", "fn a() {}\nfn b() {}\n")]);
    let airlock = airlock(edits_config(ws.path())).await;
    let mut cx = airlock.context();
    ok_text(&call(&airlock, &mut cx, "read", json!({"file_path": "f.rs"})).await);
    let t = ok_text(
        &call(
            &airlock,
            &mut cx,
            "edit",
            json!({"file_path": "f.rs", "old_string": "fn b()", "new_string": "fn c()"}),
        )
        .await,
    );
    assert!(
        t.contains("1 replacement") && t.contains("     2\tfn c() {}"),
        "{t}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("f.rs")).unwrap(),
        "fn a() {}\nfn c() {}\n"
    );
    // The edit recorded a read, so a second edit needs no new read.
    ok_text(
        &call(
            &airlock,
            &mut cx,
            "edit",
            json!({"file_path": "f.rs", "old_string": "fn a()", "new_string": "fn z()"}),
        )
        .await,
    );
}

#[tokio::test]
async fn edit_refuses_non_unique_and_missing_text() {
    let ws = workspace(&[("f.txt", "x x x")]);
    let airlock = airlock(edits_config(ws.path())).await;
    let mut cx = airlock.context();
    ok_text(&call(&airlock, &mut cx, "read", json!({"file_path": "f.txt"})).await);
    let e = call(
        &airlock,
        &mut cx,
        "edit",
        json!({"file_path": "f.txt", "old_string": "x", "new_string": "y"}),
    )
    .await;
    let e = err(&e);
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(
        e.message.contains("Found 3 matches") && e.message.contains("replace_all"),
        "{}",
        e.message
    );
    let e = call(
        &airlock,
        &mut cx,
        "edit",
        json!({"file_path": "f.txt", "old_string": "nope", "new_string": "y"}),
    )
    .await;
    assert!(err(&e).message.contains("was not found"));
    let e = call(
        &airlock,
        &mut cx,
        "edit",
        json!({"file_path": "f.txt", "old_string": "x", "new_string": "x"}),
    )
    .await;
    assert_eq!(
        err(&e).class,
        ErrorClass::InvalidInput,
        "validation refuses a no-op"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("f.txt")).unwrap(),
        "x x x"
    );
    let t = ok_text(&call(&airlock, &mut cx, "edit", json!({"file_path": "f.txt", "old_string": "x", "new_string": "y", "replace_all": true})).await);
    assert!(t.contains("3 replacements"), "{t}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("f.txt")).unwrap(),
        "y y y"
    );
}

#[tokio::test]
async fn edit_refuses_unread_and_changed_files() {
    let ws = workspace(&[("f.txt", "hello")]);
    let airlock = airlock(edits_config(ws.path())).await;
    let mut cx = airlock.context();
    let e = call(
        &airlock,
        &mut cx,
        "edit",
        json!({"file_path": "f.txt", "old_string": "hello", "new_string": "bye"}),
    )
    .await;
    assert!(
        err(&e).message.contains("has not been read yet"),
        "{}",
        err(&e).message
    );

    ok_text(&call(&airlock, &mut cx, "read", json!({"file_path": "f.txt"})).await);
    std::fs::write(ws.path().join("f.txt"), "hello, changed by someone else").unwrap();
    let e = call(
        &airlock,
        &mut cx,
        "edit",
        json!({"file_path": "f.txt", "old_string": "hello", "new_string": "bye"}),
    )
    .await;
    assert!(
        err(&e).message.contains("has changed since it was read"),
        "{}",
        err(&e).message
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("f.txt")).unwrap(),
        "hello, changed by someone else"
    );

    let e = call(
        &airlock,
        &mut cx,
        "edit",
        json!({"file_path": "gone.txt", "old_string": "a", "new_string": "b"}),
    )
    .await;
    assert_eq!(err(&e).class, ErrorClass::Errno("ENOENT".into()));
}

#[tokio::test]
async fn edit_creates_files_and_keeps_crlf_endings() {
    let ws = workspace(&[("dos.txt", "one\r\ntwo\r\n")]);
    let airlock = airlock(edits_config(ws.path())).await;
    let mut cx = airlock.context();
    ok_text(
        &call(
            &airlock,
            &mut cx,
            "edit",
            json!({"file_path": "brand/new.txt", "old_string": "", "new_string": "hi"}),
        )
        .await,
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("brand/new.txt")).unwrap(),
        "hi"
    );
    ok_text(&call(&airlock, &mut cx, "read", json!({"file_path": "dos.txt"})).await);
    ok_text(
        &call(
            &airlock,
            &mut cx,
            "edit",
            json!({"file_path": "dos.txt", "old_string": "one\ntwo", "new_string": "uno\ndos"}),
        )
        .await,
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("dos.txt")).unwrap(),
        "uno\r\ndos\r\n"
    );
}

#[tokio::test]
async fn glob_lists_newest_first_and_caps() {
    let ws = workspace(&[
        ("old.rs", ""),
        ("src/new.rs", ""),
        ("src/skip.txt", ""),
        (".git/x.rs", ""),
    ]);
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(ws.path().join("old.rs"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let airlock = airlock(edits_config(ws.path())).await;
    let mut cx = airlock.context();
    let t = ok_text(&call(&airlock, &mut cx, "glob", json!({"pattern": "**/*.rs"})).await);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines,
        [
            path_in(ws.path(), "src/new.rs"),
            path_in(ws.path(), "old.rs")
        ]
    );
    let t = ok_text(&call(&airlock, &mut cx, "glob", json!({"pattern": "*.rs"})).await);
    assert_eq!(
        t,
        path_in(ws.path(), "old.rs"),
        "* does not cross directories"
    );
    // Each shape globset matches its own way: a literal path, a literal
    // name in any directory, a prefix, alternatives, an extension.
    let (new, old, skip) = (
        path_in(ws.path(), "src/new.rs"),
        path_in(ws.path(), "old.rs"),
        path_in(ws.path(), "src/skip.txt"),
    );
    for (pattern, found) in [
        ("src/new.rs", vec![&new]),
        ("**/new.rs", vec![&new]),
        ("src/*", vec![&new, &skip]),
        ("src/**", vec![&new, &skip]),
        ("{old,src/new}.rs", vec![&new, &old]),
        ("**/*.{rs,txt}", vec![&new, &skip, &old]),
        ("**/x.rs", vec![]),
        ("?ld.rs", vec![&old]),
        ("[o]ld.rs", vec![&old]),
        ("*", vec![&old]),
        ("*.{rs,txt}", vec![&old]),
        ("**", vec![&new, &skip, &old]),
        ("*/*.rs", vec![&new]),
    ] {
        let t = ok_text(&call(&airlock, &mut cx, "glob", json!({"pattern": pattern})).await);
        let mut lines: Vec<&str> = t.lines().filter(|l| *l != "No files found").collect();
        lines.sort_unstable();
        let mut found: Vec<&str> = found.iter().map(|p| p.as_str()).collect();
        found.sort_unstable();
        assert_eq!(lines, found, "{pattern}");
    }

    let many = workspace(&[]);
    for i in 0..120 {
        std::fs::write(many.path().join(format!("f{i}.txt")), "").unwrap();
    }
    let r = call(
        &airlock,
        &mut cx,
        "glob",
        json!({"pattern": "*.txt", "path": canonical(many.path())}),
    )
    .await;
    assert_eq!(
        err(&r).class,
        ErrorClass::PermissionDenied,
        "outside the workspace"
    );
    let airlock = airlock_tests::airlock(edits_config(many.path())).await;
    let mut cx = airlock.context();
    let r = call(&airlock, &mut cx, "glob", json!({"pattern": "*.txt"})).await;
    let output = r.outcome.unwrap();
    assert!(
        output
            .text_content()
            .contains("Showing the 100 newest of 120")
    );
    assert_eq!(output.structured.unwrap()["truncated"], true);
    let e = call(&airlock, &mut cx, "glob", json!({"pattern": "a[b"})).await;
    assert_eq!(err(&e).class, ErrorClass::InvalidInput);
}

#[tokio::test]
async fn grep_matches_ripgrep_semantics() {
    let ws = workspace(&[
        ("src/a.rs", "fn alpha() {}\nlet x = 1;\nfn beta() {}\n"),
        ("src/b.py", "def alpha():\n    pass\n"),
        ("notes.md", "ALPHA in capitals\n"),
        ("target/gen.rs", "fn alpha_generated() {}\n"),
        (".hidden.rs", "fn alpha_hidden() {}\n"),
        (".gitignore", "target/\n"),
    ]);
    let airlock = airlock(edits_config(ws.path())).await;
    let mut cx = airlock.context();
    let files = |r: &airlock_host::ToolResult| {
        let mut v: Vec<String> =
            r.outcome.as_ref().unwrap().structured.as_ref().unwrap()["filenames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap().to_string())
                .collect();
        v.sort();
        v
    };
    let r = call(&airlock, &mut cx, "grep", json!({"pattern": "alpha"})).await;
    assert_eq!(
        files(&r),
        [
            path_in(ws.path(), "src/a.rs"),
            path_in(ws.path(), "src/b.py")
        ],
        ".gitignore and hidden files are skipped"
    );
    let r = call(
        &airlock,
        &mut cx,
        "grep",
        json!({"pattern": "alpha", "-i": true}),
    )
    .await;
    assert_eq!(files(&r).len(), 3);
    // As in ripgrep (`rg -l -trust alpha`), a type selection whitelists
    // matching files, hidden ones included; .gitignore still applies.
    let r = call(
        &airlock,
        &mut cx,
        "grep",
        json!({"pattern": "alpha", "type": "rust"}),
    )
    .await;
    assert_eq!(
        files(&r),
        [
            path_in(ws.path(), ".hidden.rs"),
            path_in(ws.path(), "src/a.rs")
        ]
    );
    let r = call(
        &airlock,
        &mut cx,
        "grep",
        json!({"pattern": "alpha", "glob": "*.py"}),
    )
    .await;
    assert_eq!(files(&r), [path_in(ws.path(), "src/b.py")]);

    let t = ok_text(
        &call(
            &airlock,
            &mut cx,
            "grep",
            json!({"pattern": "let", "output_mode": "content", "-C": 1}),
        )
        .await,
    );
    let a = path_in(ws.path(), "src/a.rs");
    assert_eq!(
        t,
        format!("{a}-1-fn alpha() {{}}\n{a}:2:let x = 1;\n{a}-3-fn beta() {{}}")
    );
    let t = ok_text(
        &call(
            &airlock,
            &mut cx,
            "grep",
            json!({"pattern": "fn", "output_mode": "count"}),
        )
        .await,
    );
    assert!(
        t.starts_with(&format!("{a}:2")) && t.contains("Found 2 matching lines across 1 files"),
        "{t}"
    );
    let t = ok_text(&call(&airlock, &mut cx, "grep", json!({"pattern": "alpha\\(\\) \\{\\}\\nlet", "multiline": true, "output_mode": "content"})).await);
    assert!(
        t.contains(":1:fn alpha() {}") && t.contains(":2:let x = 1;"),
        "{t}"
    );
    let t = ok_text(
        &call(
            &airlock,
            &mut cx,
            "grep",
            json!({"pattern": "fn", "output_mode": "content", "head_limit": 1, "offset": 1}),
        )
        .await,
    );
    assert!(t.starts_with(&format!("{a}:3:fn beta() {{}}")), "{t}");
    assert!(
        t.contains("more lines than shown") || !t.contains('\n'),
        "{t}"
    );
    let e = call(&airlock, &mut cx, "grep", json!({"pattern": "(open"})).await;
    assert!(err(&e).message.contains("not a valid regular expression"));
    let e = call(
        &airlock,
        &mut cx,
        "grep",
        json!({"pattern": "x", "type": "nonsense"}),
    )
    .await;
    assert!(err(&e).message.contains("unknown file type"));
    let r = call(&airlock, &mut cx, "grep", json!({"pattern": "zzz_nothing"})).await;
    assert_eq!(ok_text(&r), "No files found");
}

#[tokio::test]
async fn ls_and_cd_move_through_the_workspace() {
    let ws = workspace(&[("src/main.rs", "fn main() {}"), ("README.md", "hi")]);
    let airlock = airlock(edits_config(ws.path())).await;
    let mut cx = airlock.context();
    let t = ok_text(&call(&airlock, &mut cx, "ls", json!({})).await);
    assert_eq!(
        t,
        format!("{}/\n  src/\n  README.md (2 bytes)", canonical(ws.path()))
    );
    let r = call(&airlock, &mut cx, "cd", json!({"path": "src"})).await;
    ok_text(&r);
    assert!(
        !r.flags.unwrap().contains(SafetyFlags::CONCURRENCY_SAFE),
        "cd runs exclusively"
    );
    assert_eq!(cx.cwd(), path_in(ws.path(), "src"));
    let t = ok_text(&call(&airlock, &mut cx, "read", json!({"file_path": "main.rs"})).await);
    assert!(t.contains("fn main"), "relative paths follow the new cwd");
    let e = call(&airlock, &mut cx, "cd", json!({"path": "main.rs"})).await;
    assert!(err(&e).message.contains("not a directory"));
    let e = call(&airlock, &mut cx, "cd", json!({"path": "/etc"})).await;
    assert_eq!(err(&e).class, ErrorClass::PermissionDenied);
    let e = call(&airlock, &mut cx, "ls", json!({"path": "/"})).await;
    assert_eq!(err(&e).class, ErrorClass::PermissionDenied);
    assert_eq!(
        cx.cwd(),
        path_in(ws.path(), "src"),
        "failed calls change nothing"
    );
}

/// A tool that asks for hosts still needs them granted: without a grant it
/// is refused at load, naming the import and how to grant it, so a model is
/// never shown a tool that cannot do its job.
#[tokio::test]
async fn fetch_without_a_grant_is_refused_at_load_naming_the_import() {
    let airlock = airlock(config()).await;
    assert!(airlock.registry().get("fetch").is_none());
    let failure = airlock
        .registry()
        .failures()
        .iter()
        .find(|f| f.tool.as_deref() == Some("fetch"))
        .unwrap();
    let message = failure.error.to_string();
    assert!(message.contains("imports `wasi:http/"), "{message}");
    assert!(
        message.contains("network grant") && message.contains("--allow-host"),
        "{message}"
    );
    let mut cx = airlock.context();
    let e = call(
        &airlock,
        &mut cx,
        "fetch",
        json!({"url": "http://127.0.0.1/"}),
    )
    .await;
    assert_eq!(err(&e).class, ErrorClass::UnknownTool);
}

#[tokio::test]
async fn fetch_with_a_grant_reaches_only_the_granted_host() {
    let port = http_server("hello from loopback").await;
    let config = grant(config(), "fetch", network(&["127.0.0.1"]));
    let airlock = airlock(config).await;
    let mut cx = airlock.context();
    let t = ok_text(
        &call(
            &airlock,
            &mut cx,
            "fetch",
            json!({"url": format!("http://127.0.0.1:{port}/x")}),
        )
        .await,
    );
    assert!(
        t.starts_with("HTTP 200") && t.ends_with("hello from loopback"),
        "{t}"
    );
    let e = call(
        &airlock,
        &mut cx,
        "fetch",
        json!({"url": format!("http://localhost:{port}/x")}),
    )
    .await;
    let e = err(&e);
    assert_eq!(e.class, ErrorClass::PermissionDenied);
    assert!(
        e.message
            .contains("not granted network access to localhost")
            && e.message.contains(&format!(
                "(Airlock refused the tool's GET request to http://localhost:{port}: the host \
                 localhost is not in the operator's network grant for this tool (`--allow-host \
                 localhost`"
            )),
        "{}",
        e.message
    );
    let e = call(
        &airlock,
        &mut cx,
        "fetch",
        json!({"url": "ftp://127.0.0.1/"}),
    )
    .await;
    assert_eq!(err(&e).class, ErrorClass::InvalidInput);
}

#[tokio::test]
async fn sleep_reports_progress_and_stops_when_cancelled() {
    use airlock_host::tool::{CancellationToken, ProgressSink};
    use airlock_host::{CallControl, ToolUse};
    let airlock = airlock(config()).await;
    let mut cx = airlock.context();
    let (progress, mut events) = ProgressSink::channel(64);
    let r = airlock
        .call_with(
            &mut cx,
            ToolUse::new("s1", "sleep", json!({"ms": 250})),
            CallControl {
                progress,
                ..CallControl::default()
            },
        )
        .await;
    assert_eq!(ok_text(&r), "Slept 250 ms.");
    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        seen.push(e);
    }
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(seen.iter().all(|e| e.tool_use_id == "s1"));

    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let started = std::time::Instant::now();
    let r = airlock
        .call_with(
            &mut cx,
            ToolUse::new("s2", "sleep", json!({"ms": 30000})),
            CallControl {
                cancel,
                ..CallControl::default()
            },
        )
        .await;
    assert_eq!(err(&r).class, ErrorClass::Cancelled);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let e = call(&airlock, &mut cx, "sleep", json!({"ms": 600001})).await;
    assert_eq!(err(&e).class, ErrorClass::InvalidInput);
}

#[tokio::test]
async fn every_bundled_tool_has_a_sound_descriptor() {
    let airlock = airlock(grant(
        config(),
        "fetch",
        ToolConfig {
            network: vec!["*".into()],
            ..ToolConfig::default()
        },
    ))
    .await;
    let names: Vec<String> = airlock
        .registry()
        .entries()
        .iter()
        .map(|e| e.descriptor().name.clone())
        .collect();
    assert_eq!(
        names,
        [
            "bash", "cd", "edit", "fetch", "glob", "grep", "ls", "read", "sleep", "write"
        ]
    );
    for entry in airlock.registry().entries() {
        let d = entry.descriptor();
        assert!(d.problems().is_empty(), "{}: {:?}", d.name, d.problems());
        assert!(
            d.prompt.len() > d.description.len(),
            "{} has a real prompt",
            d.name
        );
        // Only what a tool implements is called before a call; the rest
        // save a preflight store.
        let validates = ["edit", "fetch", "glob", "grep"].contains(&d.name.as_str());
        assert_eq!(
            d.preflight,
            Preflight {
                classify: d.name == "bash",
                validate: validates,
                check_permissions: false,
            },
            "{}",
            d.name
        );
    }
}

/// What a structured result must be for a client that shows the model only
/// `structuredContent` (Claude Code): declared by an object output schema
/// (the pipeline fails a call whose structured output does not match it, so
/// these calls succeeding is the schema check), and the whole result: the
/// lines, paths and entries the text shows. A document (`read`, `fetch`)
/// comes back as text only.
#[tokio::test]
async fn structured_results_are_declared_and_hold_what_the_text_shows() {
    let ws = workspace(&[
        ("src/a.rs", "fn alpha() {}\nlet x = 1;\nfn beta() {}\n"),
        ("src/b.rs", "fn gamma() {}\n"),
        ("notes.md", "no functions here\n"),
    ]);
    let airlock = airlock(edits_config(ws.path())).await;
    for entry in airlock.registry().entries() {
        let d = entry.descriptor();
        let listed = airlock_host::adapters::mcp::output_schema(d);
        match d.name.as_str() {
            "read" | "fetch" => assert!(d.output_schema.is_none(), "{}", d.name),
            _ => assert!(listed.is_some(), "{} lists an output schema", d.name),
        }
    }
    let mut cx = airlock.context();
    let structured = |r: &airlock_host::ToolResult| {
        let output = r.outcome.as_ref().expect("the call succeeds");
        (
            output.text_content(),
            output.structured.clone().expect("a structured result"),
        )
    };
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .expect("an array")
            .iter()
            .map(|s| s.as_str().expect("a string").to_string())
            .collect()
    };
    let (a, b) = (
        path_in(ws.path(), "src/a.rs"),
        path_in(ws.path(), "src/b.rs"),
    );

    let r = call(
        &airlock,
        &mut cx,
        "grep",
        json!({"pattern": "fn", "output_mode": "content", "head_limit": 2}),
    )
    .await;
    let (text, s) = structured(&r);
    assert_eq!(
        strings(&s["lines"]),
        [
            format!("{a}:1:fn alpha() {{}}"),
            format!("{a}:3:fn beta() {{}}")
        ]
    );
    assert!(text.starts_with(&strings(&s["lines"]).join("\n")), "{text}");
    assert_eq!(
        (&s["truncated"], &s["applied_limit"]),
        (&json!(true), &json!(2))
    );

    let r = call(
        &airlock,
        &mut cx,
        "grep",
        json!({"pattern": "fn", "output_mode": "count"}),
    )
    .await;
    let (text, s) = structured(&r);
    assert_eq!(
        s["counts"],
        json!([{"path": a, "count": 2}, {"path": b, "count": 1}])
    );
    assert!(text.starts_with(&format!("{a}:2\n{b}:1\n")), "{text}");

    let r = call(&airlock, &mut cx, "grep", json!({"pattern": "fn"})).await;
    let (text, s) = structured(&r);
    let mut files = strings(&s["filenames"]);
    assert_eq!(text, format!("Found 2 files\n{}", files.join("\n")));
    files.sort();
    assert_eq!(files, [a.clone(), b.clone()]);

    let r = call(&airlock, &mut cx, "glob", json!({"pattern": "**/*.rs"})).await;
    let (text, s) = structured(&r);
    assert_eq!(text, strings(&s["filenames"]).join("\n"));
    assert_eq!(
        (&s["num_files"], &s["truncated"]),
        (&json!(2), &json!(false))
    );

    let r = call(&airlock, &mut cx, "ls", json!({})).await;
    let (text, s) = structured(&r);
    assert_eq!(
        s["entries"],
        json!([
            {"name": "src", "type": "directory"},
            {"name": "notes.md", "type": "file", "size": 18},
        ])
    );
    assert_eq!(
        text,
        format!("{}/\n  src/\n  notes.md (18 bytes)", canonical(ws.path()))
    );

    let r = call(
        &airlock,
        &mut cx,
        "write",
        json!({"file_path": "new.txt", "content": "four"}),
    )
    .await;
    let (_, s) = structured(&r);
    let new = path_in(ws.path(), "new.txt");
    assert_eq!(s, json!({"file_path": new, "type": "create", "bytes": 4}));
    let r = call(
        &airlock,
        &mut cx,
        "edit",
        json!({"file_path": "new.txt", "old_string": "four", "new_string": "five!"}),
    )
    .await;
    let (text, s) = structured(&r);
    assert_eq!(
        (&s["type"], &s["replacements"], &s["bytes"]),
        (&json!("update"), &json!(1), &json!(5))
    );
    assert!(text.ends_with(s["snippet"].as_str().unwrap()), "{text}");
    assert_eq!(s["snippet"], "     1\tfive!");
    let r = call(
        &airlock,
        &mut cx,
        "edit",
        json!({"file_path": "made.txt", "old_string": "", "new_string": "made"}),
    )
    .await;
    let (_, s) = structured(&r);
    assert_eq!(
        (&s["type"], &s["replacements"]),
        (&json!("create"), &json!(0))
    );

    let r = call(&airlock, &mut cx, "cd", json!({"path": "src"})).await;
    assert_eq!(structured(&r).1, json!({"cwd": path_in(ws.path(), "src")}));
    let r = call(&airlock, &mut cx, "sleep", json!({"ms": 1})).await;
    assert_eq!(structured(&r).1, json!({"slept_ms": 1}));
    let r = call(&airlock, &mut cx, "read", json!({"file_path": "a.rs"})).await;
    assert!(r.outcome.unwrap().structured.is_none());
}
