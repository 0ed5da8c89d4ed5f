//! The host's own state, attacked from inside a grant: Airlock's
//! configuration, tool directories, artifact cache, results directory and
//! settings files are out of every tool's reach; configured paths cannot be
//! re-pointed through a link a tool could plant, and a granted directory is
//! pinned across reloads; the host reads its own files with a cap and
//! without blocking. (SECURITY.md, "The host's own state".)

use airlock_host::config::{MountConfig, ToolConfig};
use airlock_host::{Airlock, Config, Grants, WorkspaceAccess};
use airlock_tests::{config, workspace};
use std::path::{Path, PathBuf};

fn refused(config: &Config) -> String {
    match Grants::from_config(config) {
        Ok(_) => panic!("the grants were accepted"),
        Err(e) => e.to_string(),
    }
}

fn with_workspace(ws: &Path, access: WorkspaceAccess) -> Config {
    Config {
        workspace: Some(ws.to_path_buf()),
        workspace_access: access,
        ..config()
    }
}

fn real(path: &Path) -> String {
    path.canonicalize().unwrap().display().to_string()
}

#[test]
fn hs01_a_writable_grant_may_not_hold_airlocks_own_state() {
    let ws = workspace(&[("airlock.toml", ""), ("settings.json", "{}")]);
    let inner = ws.path().join("state");
    std::fs::create_dir_all(&inner).unwrap();
    type Set<'a> = Box<dyn Fn(&mut Config) + 'a>;
    let cases: Vec<(&str, Set)> = vec![
        (
            "a tool directory",
            Box::new(|c| c.tool_dirs = Some(vec![inner.join("tools")])),
        ),
        (
            "the artifact cache",
            Box::new(|c| c.cache_dir = Some(inner.join("cache"))),
        ),
        (
            "the results directory",
            Box::new(|c| c.results_dir = Some(inner.join("results"))),
        ),
        (
            "the configuration file",
            Box::new(|c| c.source = Some(ws.path().join("airlock.toml"))),
        ),
        (
            "a settings file",
            Box::new(|c| c.merged_settings = vec![ws.path().join("settings.json")]),
        ),
    ];
    for (what, set) in &cases {
        let mut c = with_workspace(ws.path(), WorkspaceAccess::ReadWrite);
        set(&mut c);
        let e = refused(&c);
        assert!(
            e.contains(what) && e.contains(&real(ws.path())),
            "{what}: {e}"
        );
    }

    // Only the cache and the results directory (another caller's saved
    // results) may not be read either: the rest may be granted read-only.
    for (what, set) in &cases {
        let mut c = with_workspace(ws.path(), WorkspaceAccess::Read);
        set(&mut c);
        let result = Grants::from_config(&c);
        let unreadable = ["the artifact cache", "the results directory"].contains(what);
        assert_eq!(result.is_err(), unreadable, "{what}");
    }
}

#[test]
fn hs02_a_grant_inside_airlocks_state_or_reaching_it_through_a_link_is_refused() {
    let state = workspace(&[("tools/ws/a.txt", "")]);
    let mut c = with_workspace(&state.path().join("tools/ws"), WorkspaceAccess::ReadWrite);
    c.tool_dirs = Some(vec![state.path().join("tools")]);
    let e = refused(&c);
    assert!(e.contains("lies inside a tool directory"), "{e}");

    // The workspace named through a link still contains the cache.
    let outer = workspace(&[]);
    let link = outer.path().join("ws-link");
    std::os::unix::fs::symlink(state.path(), &link).unwrap();
    let mut c = with_workspace(&link, WorkspaceAccess::ReadWrite);
    c.cache_dir = Some(state.path().join("cache"));
    let e = refused(&c);
    assert!(e.contains("the artifact cache"), "{e}");
}

#[test]
fn hs03_a_grant_through_a_link_inside_a_writable_grant_is_refused() {
    let ws = workspace(&[("data/a.txt", "")]);
    let secret = workspace(&[("key", "secret")]);
    std::os::unix::fs::symlink(secret.path(), ws.path().join("link")).unwrap();
    let mut c = with_workspace(ws.path(), WorkspaceAccess::ReadWrite);
    c.tools.insert(
        "read".into(),
        ToolConfig {
            mounts: vec![MountConfig {
                host: ws.path().join("link"),
                path: Some("/data".into()),
                access: WorkspaceAccess::Read,
            }],
            ..ToolConfig::default()
        },
    );
    let e = refused(&c);
    assert!(
        e.contains("symbolic link") && e.contains(&ws.path().join("link").display().to_string()),
        "{e}"
    );

    // Airlock's own paths too: a tool directory reached through the
    // workspace.
    let mut c = with_workspace(ws.path(), WorkspaceAccess::ReadWrite);
    c.tool_dirs = Some(vec![ws.path().join("link")]);
    let e = refused(&c);
    assert!(e.contains("symbolic link"), "{e}");
}

#[tokio::test]
async fn hs04_a_granted_directory_is_pinned_across_reloads() {
    let place = workspace(&[("one/a.txt", "one"), ("two/a.txt", "two")]);
    let link = place.path().join("current");
    std::os::unix::fs::symlink(place.path().join("one"), &link).unwrap();
    let mut c = config();
    c.bundled_tools = false;
    c.tools.insert(
        "read".into(),
        ToolConfig {
            mounts: vec![MountConfig {
                host: link.clone(),
                path: Some("/data".into()),
                access: WorkspaceAccess::Read,
            }],
            ..ToolConfig::default()
        },
    );
    let airlock = Airlock::new(c).await.unwrap();
    assert!(airlock.reload().await.is_ok(), "nothing moved");

    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(place.path().join("two"), &link).unwrap();
    let e = match airlock.reload().await {
        Ok(_) => panic!("a re-pointed grant was accepted on reload"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("no longer the directory that was granted")
            && e.contains(&real(&place.path().join("one"))),
        "{e}"
    );
}

fn failures_loading(dir: &Path, component_bytes: u64) -> Vec<String> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut c = Config {
        bundled_tools: false,
        tool_dirs: Some(vec![dir.to_path_buf()]),
        artifact_cache: false,
        ..config()
    };
    c.limits.component_bytes = component_bytes;
    let airlock = runtime.block_on(Airlock::new(c)).unwrap();
    airlock
        .registry()
        .failures()
        .iter()
        .map(|f| f.error.to_string())
        .collect()
}

#[test]
fn hs05_tool_directory_entries_are_read_with_a_cap_and_never_block() {
    let dir = workspace(&[]);
    // Each would be read without end (or block) if the host trusted the
    // size in its metadata and read the whole file.
    for (name, target) in [
        ("maps.wasm", "/proc/self/maps"),
        ("pagemap.wasm", "/proc/self/pagemap"),
        ("zero.wasm", "/dev/zero"),
        ("fifo.wasm", ""),
    ] {
        let path = dir.path().join(name);
        if target.is_empty() {
            let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
        } else {
            std::os::unix::fs::symlink(target, &path).unwrap();
        }
    }
    let failures = failures_loading(dir.path(), 1024);
    assert_eq!(failures.len(), 4, "{failures:?}");
    let all = failures.join("\n");
    // procfs reports size 0 for files that hold more: the cap is counted
    // while reading.
    assert!(all.contains("larger than 1024"), "{all}");
    assert!(
        all.contains("zero.wasm: it is not a regular file")
            && all.contains("fifo.wasm: it is not a regular file"),
        "{all}"
    );
}

unsafe extern "C" {
    #[link_name = "mkfifo"]
    fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
}

#[test]
fn hs06_a_link_in_place_of_the_results_directory_is_not_followed() {
    use airlock_host::ToolOutput;
    use airlock_host::pipeline::results::{Owner, ResultStore, spill};
    let owner = Owner {
        caller: None,
        context: "cx",
    };
    let elsewhere = workspace(&[]);
    let place = workspace(&[]);
    let results: PathBuf = place.path().join("results");
    std::os::unix::fs::symlink(elsewhere.path(), &results).unwrap();
    let mut c = config();
    c.results_dir = Some(results.clone());
    Grants::from_config(&c).unwrap();
    let store = ResultStore::new(&results);
    let mut output = ToolOutput::text("x".repeat(1000));
    let e = spill(&mut output, 10, Some(&store), owner, "use-1").unwrap_err();
    assert!(e.message.contains("saving it failed"), "{e}");
    assert_eq!(
        std::fs::read_dir(elsewhere.path()).unwrap().count(),
        0,
        "the spilled result went through the link"
    );

    // A real directory is created private to the user and used.
    let real_dir = place.path().join("real");
    c.results_dir = Some(real_dir.clone());
    Grants::from_config(&c).unwrap();
    let store = ResultStore::new(&real_dir);
    let mut output = ToolOutput::text("x".repeat(1000));
    let saved = spill(&mut output, 10, Some(&store), owner, "use-1")
        .unwrap()
        .unwrap();
    assert!(Path::new(&saved).starts_with(&real_dir), "{saved}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&real_dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[tokio::test]
async fn hs07_an_edit_sees_content_changed_behind_a_restored_mtime() {
    use airlock_tests::{call, err, ok_text, workspace_config};
    let ws = workspace(&[("f.txt", "alpha\n"), ("g.txt", "gamma\n")]);
    let mut c = workspace_config(ws.path());
    c.permissions.default_mode = airlock_host::PermissionMode::AcceptEdits;
    let airlock = airlock_tests::airlock(c).await;
    let mut cx = airlock.context();
    let root = real(ws.path());
    for f in ["f.txt", "g.txt"] {
        ok_text(
            &call(
                &airlock,
                &mut cx,
                "read",
                serde_json::json!({"file_path": format!("{root}/{f}")}),
            )
            .await,
        );
    }

    // Another writer changes f.txt to the same size and puts its
    // modification time back.
    let path = ws.path().join("f.txt");
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::fs::write(&path, "ALPHA\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(before)
        .unwrap();
    let edit = |f: &str, old: &str| serde_json::json!({"file_path": format!("{root}/{f}"), "old_string": old, "new_string": "__"});
    let r = call(&airlock, &mut cx, "edit", edit("f.txt", "LPH")).await;
    assert!(
        err(&r).message.contains("has changed since it was read"),
        "{}",
        err(&r)
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "ALPHA\n");

    // An unchanged file is edited as before.
    ok_text(&call(&airlock, &mut cx, "edit", edit("g.txt", "mm")).await);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("g.txt")).unwrap(),
        "ga__a\n"
    );
}

/// The bundled component `package`'s bytes.
fn bundled(package: &str) -> Vec<u8> {
    airlock_host::bundled::BUNDLED
        .iter()
        .find(|(name, _)| *name == package)
        .map(|(_, bytes)| bytes.to_vec())
        .expect("bundled")
}

/// `bytes` with a custom section appended: the same tool, other code.
fn recompiled(mut bytes: Vec<u8>, tag: &str) -> Vec<u8> {
    let name = b"airlock-test";
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.extend_from_slice(tag.as_bytes());
    bytes.push(0);
    bytes.push(section.len() as u8);
    bytes.extend_from_slice(&section);
    bytes
}

#[tokio::test]
async fn hs08_a_tool_may_not_take_a_name_in_use_unless_the_operator_chooses_it() {
    let dir = workspace(&[]);
    let file = dir.path().join("read.wasm");
    let load = |source: Option<PathBuf>| {
        let mut c = config();
        c.tool_dirs = Some(vec![dir.path().to_path_buf()]);
        if let Some(source) = source {
            c.tools.insert(
                "read".into(),
                ToolConfig {
                    source: Some(source),
                    ..ToolConfig::default()
                },
            );
        }
        Airlock::new(c)
    };
    let origin = |a: &Airlock| a.registry().get("read").unwrap().tool.origin().to_string();
    let read_failures = |a: &Airlock| -> Vec<String> {
        a.registry()
            .failures()
            .iter()
            .filter(|f| f.tool.as_deref() == Some("read"))
            .map(|f| f.error.to_string())
            .collect()
    };

    // The same bytes as the bundled tool: one tool, no complaint.
    std::fs::write(&file, bundled("airlock-tool-read")).unwrap();
    let a = load(None).await.unwrap();
    assert!(read_failures(&a).is_empty(), "{:?}", read_failures(&a));
    assert!(origin(&a).starts_with("bundled"), "{}", origin(&a));

    // Other code under the name: refused, saying how to choose it.
    std::fs::write(&file, recompiled(bundled("airlock-tool-read"), "other")).unwrap();
    let a = load(None).await.unwrap();
    assert!(origin(&a).starts_with("bundled"), "{}", origin(&a));
    let failures = read_failures(&a);
    assert!(
        failures
            .iter()
            .any(|f| f.contains("`read` is already used by `read` (bundled")
                && f.contains(&format!("source = \"{}\"", file.display()))),
        "{failures:?}"
    );

    // Chosen by the operator: it replaces the bundled tool.
    let a = load(Some(file.clone())).await.unwrap();
    assert!(read_failures(&a).is_empty(), "{:?}", read_failures(&a));
    assert!(origin(&a).contains("read.wasm"), "{}", origin(&a));
}

#[test]
fn hs09_no_tool_may_call_itself_a_built_in() {
    use airlock_host::grants::ToolGrants;
    use airlock_tests::fake::FakeTool;
    let mut registry = airlock_host::Registry::new();
    let impostor = FakeTool::new(
        "tool_search",
        airlock_host::SafetyFlags::empty(),
        airlock_host::InterruptBehavior::Cancel,
        Default::default(),
    );
    let e = registry
        .add(
            std::sync::Arc::new(impostor),
            ToolGrants::nothing(&airlock_host::Limits::default()),
        )
        .unwrap_err();
    assert!(e.to_string().contains("reserved"), "{e}");
}

#[tokio::test]
async fn hs10_changed_code_is_held_until_approved_and_always_allow_binds_to_code() {
    use airlock_host::approvals::Approvals;
    use airlock_host::{LoadError, PermissionAnswer, ToolUse};
    use airlock_tests::ScriptedPrompter;
    let ws = workspace(&[]);
    let tools = workspace(&[]);
    let state = workspace(&[]);
    let approved = state.path().join("approved.json");
    let file = tools.path().join("write.wasm");
    let v1 = bundled("airlock-tool-write");
    let v2 = recompiled(v1.clone(), "swapped");
    std::fs::write(&file, &v1).unwrap();
    let mut c = with_workspace(ws.path(), WorkspaceAccess::ReadWrite);
    c.bundled_tools = false;
    c.tool_dirs = Some(vec![tools.path().to_path_buf()]);
    c.approvals = Some(approved.clone());
    let prompter = ScriptedPrompter::new(vec![PermissionAnswer::AllowAlways]);
    let airlock = Airlock::new(c)
        .await
        .unwrap()
        .with_prompter(prompter.clone());
    let mut cx = airlock.context();
    let write = |n: u32| {
        ToolUse::new(
            format!("w{n}"),
            "write",
            serde_json::json!({"file_path": format!("{}/f{n}.txt", real(ws.path())), "content": "x"}),
        )
    };
    let digest = |a: &Airlock| {
        a.registry()
            .get("write")
            .unwrap()
            .tool
            .digest()
            .unwrap()
            .to_string()
    };
    assert!(airlock.call(&mut cx, write(1)).await.outcome.is_ok());
    assert!(airlock.call(&mut cx, write(2)).await.outcome.is_ok());
    assert_eq!(prompter.asked.lock().unwrap().len(), 1, "allowed always");
    let served = digest(&airlock);

    // Other code under the same name, reloaded under a running session:
    // the version loaded before is still served, and the change is listed.
    std::fs::write(&file, &v2).unwrap();
    let reloaded = airlock
        .reload()
        .await
        .unwrap()
        .with_prompter(prompter.clone());
    assert_eq!(
        digest(&reloaded),
        served,
        "the new code was served unapproved"
    );
    let held: Vec<_> = reloaded
        .registry()
        .failures()
        .iter()
        .filter(|f| matches!(f.error, LoadError::Unapproved { .. }))
        .map(|f| f.error.to_string())
        .collect();
    assert!(
        held.len() == 1 && held[0].contains("airlock approve write"),
        "{held:?}"
    );

    // Approved: served, and the earlier "always allow" does not cover it.
    let now = blake3_hex(&v2);
    Approvals::record(&approved, "write", &now).unwrap();
    let approved_host = reloaded
        .reload()
        .await
        .unwrap()
        .with_prompter(prompter.clone());
    assert_eq!(digest(&approved_host), now);
    cx.set_tools(std::sync::Arc::new(approved_host.registry().clone()));
    let r = approved_host.call(&mut cx, write(3)).await;
    assert_eq!(prompter.asked.lock().unwrap().len(), 2, "asked again");
    assert!(
        r.outcome.is_err(),
        "the scripted prompter denies the second question"
    );
    assert!(!ws.path().join("f3.txt").exists());
}

fn blake3_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

#[test]
fn hs11_a_describe_that_never_returns_is_not_run_again_at_every_start() {
    let tools = workspace(&[]);
    std::fs::copy(
        airlock_tests::guests::STUCK,
        tools.path().join("stuck.wasm"),
    )
    .unwrap();
    let cache = workspace(&[]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let load = || {
        let mut c = config();
        c.bundled_tools = false;
        c.tool_dirs = Some(vec![tools.path().to_path_buf()]);
        c.cache_dir = Some(cache.path().join("artifacts"));
        c.limits.preflight_timeout_ms = 3000;
        let started = std::time::Instant::now();
        let airlock = runtime.block_on(Airlock::new(c)).unwrap();
        let failures: Vec<String> = airlock
            .registry()
            .failures()
            .iter()
            .map(|f| f.error.to_string())
            .collect();
        (failures, started.elapsed())
    };
    let (first, spent) = load();
    assert!(first[0].contains("describing the tool failed"), "{first:?}");
    assert!(spent >= std::time::Duration::from_millis(3000), "{spent:?}");
    // Well under the preflight limit, with room for a busy machine.
    let (again, spent) = load();
    assert_eq!(again, first);
    assert!(
        spent < std::time::Duration::from_millis(2000),
        "the describe ran again: {spent:?}"
    );
}
