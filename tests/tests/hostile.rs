//! The hostile-guest suite, by the checklist of
//! `shared/reference/sandbox-threats.md` §6 (IDs in the test names). Each
//! test asserts the specific safe outcome and the host's health afterwards:
//! the next call works, file descriptors and memory are back near the
//! baseline, and (for the long attacks) an unrelated call made during the
//! attack finishes promptly.

use airlock_host::config::{MountConfig, ToolConfig};
use airlock_host::{Airlock, Config, ErrorClass, LoadError, ToolResult, ToolUse, WorkspaceAccess};
use airlock_tests::*;
use serde_json::{Value, json};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn limits_config(tool: &str, grant: ToolConfig) -> Config {
    let mut config = config();
    config.permissions.default_mode = airlock_host::PermissionMode::BypassPermissions;
    config.tools.insert(tool.into(), grant);
    config
}

fn timeout(ms: u64) -> ToolConfig {
    ToolConfig {
        timeout_ms: Some(ms),
        ..ToolConfig::default()
    }
}

async fn attack(airlock: &Airlock, input: Value) -> ToolResult {
    let mut cx = airlock.context();
    airlock
        .call(&mut cx, ToolUse::new("attack", "hostile", input))
        .await
}

async fn still_works(airlock: &Airlock) {
    assert_eq!(
        ok_text(&attack(airlock, json!({"attack": "ok"})).await),
        "fine"
    );
}

/// Runs `input` while a canary call runs beside it; returns the attack's
/// result and the canary's latency.
async fn with_canary(airlock: &Airlock, input: Value) -> (ToolResult, Duration) {
    let canary = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let started = Instant::now();
        let r = attack(airlock, json!({"attack": "ok"})).await;
        assert_eq!(ok_text(&r), "fine");
        started.elapsed()
    };
    tokio::join!(attack(airlock, input), canary)
}

// A. CPU and time

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rx01_infinite_loop_is_interrupted_and_a_canary_is_unaffected() {
    let _serial = measured().await;
    let before = health();
    let airlock = hostile(limits_config("hostile", timeout(500))).await;
    let started = Instant::now();
    let (r, canary) = with_canary(&airlock, json!({"attack": "loop"})).await;
    assert_eq!(err(&r).class, ErrorClass::Timeout);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(
        canary < Duration::from_secs(1),
        "the canary took {canary:?}"
    );
    still_works(&airlock).await;
    assert_recovered(before, 64, "rx01");
}

/// A flood of guests spinning in wasm leaves the callers' runtime: a guest
/// that runs long goes on in the long-running guests' own runtime, so the
/// workers that read requests and write replies stay free (before, over
/// stdio, another caller's `read` waited seconds beside 200 spinners:
/// every message queued behind their 10 ms slices).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rx01_spinning_guests_leave_the_callers_workers_free() {
    let _serial = measured().await;
    let airlock = Arc::new(hostile(limits_config("hostile", timeout(2000))).await);
    still_works(&airlock).await;
    let metrics = tokio::runtime::Handle::current().metrics();
    let busy = || {
        (0..metrics.num_workers())
            .map(|w| metrics.worker_total_busy_duration(w))
            .sum::<Duration>()
    };
    let (busy_before, started) = (busy(), Instant::now());
    let flood: Vec<_> = (0..64)
        .map(|_| {
            let airlock = airlock.clone();
            tokio::spawn(async move { attack(&airlock, json!({"attack": "loop"})).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let canary = {
        let airlock = airlock.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let r = attack(&airlock, json!({"attack": "ok"})).await;
            (r, started.elapsed())
        })
    };
    let (r, canary) = canary.await.expect("the canary ran");
    assert_eq!(ok_text(&r), "fine");
    for spinner in flood {
        assert_eq!(
            err(&spinner.await.expect("the spinner ran")).class,
            ErrorClass::Timeout
        );
    }
    let (busy, wall) = (busy() - busy_before, started.elapsed());
    let share = busy.as_secs_f64() / (wall.as_secs_f64() * metrics.num_workers() as f64);
    assert!(
        share < 0.4,
        "the callers' workers were busy {:.0}% of the flood ({busy:?} in {wall:?})",
        share * 100.0
    );
    assert!(
        canary < Duration::from_millis(500),
        "the canary took {canary:?}"
    );
    still_works(&airlock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rx02_sleeping_forever_is_stopped_by_the_wall_clock() {
    let airlock = hostile(limits_config("hostile", timeout(300))).await;
    let (r, canary) = with_canary(&airlock, json!({"attack": "block"})).await;
    assert_eq!(err(&r).class, ErrorClass::Timeout);
    assert!(canary < Duration::from_secs(1), "{canary:?}");
    still_works(&airlock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rx03_bulk_memory_operations_are_interrupted() {
    let _serial = measured().await;
    let airlock = hostile(limits_config("hostile", timeout(400))).await;
    let started = Instant::now();
    let r = attack(&airlock, json!({"attack": "bulk"})).await;
    assert_eq!(err(&r).class, ErrorClass::Timeout);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    still_works(&airlock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rx04_a_storm_of_host_calls_is_bounded() {
    let _serial = measured().await;
    let airlock = hostile(limits_config("hostile", timeout(400))).await;
    let (r, canary) = with_canary(&airlock, json!({"attack": "progress_flood"})).await;
    // It finishes or times out; either way it is bounded and harmless.
    if let Err(e) = &r.outcome {
        assert_eq!(e.class, ErrorClass::Timeout);
    }
    assert!(canary < Duration::from_secs(1), "{canary:?}");
    still_works(&airlock).await;
}

// B. Memory and objects

#[tokio::test]
async fn rx06_rx15_rx18_memory_stack_and_huge_results_are_bounded() {
    let _serial = measured().await;
    let before = health();
    let airlock = hostile(limits_config("hostile", timeout(20_000))).await;
    for (input, class) in [
        (
            json!({"attack": "alloc", "mib": 2048}),
            ErrorClass::MemoryLimit,
        ),
        (json!({"attack": "recurse"}), ErrorClass::StackOverflow),
        (json!({"attack": "big_output"}), ErrorClass::OutputLimit),
        (json!({"attack": "deep_json"}), ErrorClass::ToolError),
    ] {
        let r = attack(&airlock, input.clone()).await;
        assert_eq!(err(&r).class, class, "{input}: {}", err(&r));
        still_works(&airlock).await;
    }
    assert_recovered(before, 128, "rx06");
}

#[tokio::test]
async fn rx09_rx14_giant_host_call_data_and_random_requests_are_refused() {
    let _serial = measured().await;
    let airlock = hostile(limits_config("hostile", timeout(20_000))).await;
    let r = attack(&airlock, json!({"attack": "log_bomb"})).await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::ResourceLimit, "{e}");
    assert!(e.message.contains("hostcall_bytes"), "{}", e.message);
    let r = attack(&airlock, json!({"attack": "random"})).await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::ResourceLimit, "{e}");
    assert!(e.message.contains("random_bytes"), "{}", e.message);
    still_works(&airlock).await;
}

fn fs_setup() -> (
    tempfile::TempDir,
    tempfile::TempDir,
    tempfile::TempDir,
    Config,
) {
    let ws = workspace(&[("inside.txt", "inside"), ("dir/nested.txt", "nested")]);
    let ro = workspace(&[("ro.txt", "read only"), ("sub/deep.txt", "deep")]);
    let outside = workspace(&[("secret.txt", "TOP SECRET")]);
    let mut config = limits_config(
        "fsprobe",
        ToolConfig {
            mounts: vec![MountConfig {
                host: ro.path().to_path_buf(),
                path: Some("/ro".into()),
                access: WorkspaceAccess::Read,
            }],
            write_mib: Some(8),
            ..ToolConfig::default()
        },
    );
    config.workspace = Some(ws.path().to_path_buf());
    (ws, ro, outside, config)
}

async fn probe(airlock: &Airlock, op: &str, path: &str, to: &str, n: u64) -> ToolResult {
    let mut cx = airlock.context();
    airlock
        .call(
            &mut cx,
            ToolUse::new(
                "probe",
                "fsprobe",
                json!({"op": op, "path": path, "to": to, "n": n}),
            ),
        )
        .await
}

/// Every file under `dir`, with its contents: a tree to compare.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
            }
            let content = if meta.is_file() {
                std::fs::read(&path).unwrap()
            } else {
                Vec::new()
            };
            out.push((path.display().to_string(), content));
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn rx12_holding_thousands_of_handles_is_refused_and_released() {
    let _serial = measured().await;
    let (ws, _ro, _outside, config) = fs_setup();
    let airlock = hostile(config).await;
    let before = health();
    let r = probe(
        &airlock,
        "open_many",
        &path_in(ws.path(), "inside.txt"),
        "",
        10_000,
    )
    .await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::ResourceLimit, "{e}");
    assert!(e.message.contains("resource_handles"), "{}", e.message);
    assert_recovered(before, 64, "rx12");
    assert!(
        probe(&airlock, "read", &path_in(ws.path(), "inside.txt"), "", 0)
            .await
            .outcome
            .is_ok()
    );
}

// C. I/O exhaustion

#[tokio::test]
async fn io01_flooding_stdout_ends_the_call_cleanly() {
    let _serial = measured().await;
    let airlock = hostile(limits_config("hostile", timeout(20_000))).await;
    let r = attack(&airlock, json!({"attack": "print"})).await;
    assert_eq!(err(&r).class, ErrorClass::OutputLimit);
    still_works(&airlock).await;
}

#[tokio::test]
async fn io02_writing_past_the_output_cap_ends_the_call_even_when_the_error_is_ignored() {
    let _serial = measured().await;
    let airlock = hostile(limits_config("hostile", timeout(20_000))).await;
    let r = attack(&airlock, json!({"attack": "print_quietly"})).await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::OutputLimit, "{e}");
    still_works(&airlock).await;
}

#[tokio::test]
async fn io03_io04_io05_writes_deep_trees_and_long_names_are_held_to_the_budget() {
    let _serial = measured().await;
    let (ws, _ro, _outside, config) = fs_setup();
    let airlock = hostile(config).await;
    let r = probe(
        &airlock,
        "fill",
        &path_in(ws.path(), "big.bin"),
        "",
        1 << 30,
    )
    .await;
    let e = err(&r);
    assert_eq!(e.class, ErrorClass::WriteLimit, "{e}");
    let size = std::fs::metadata(ws.path().join("big.bin")).unwrap().len();
    assert!(
        size <= 8 << 20,
        "the disk got {size} bytes past an 8 MiB budget"
    );

    let r = probe(
        &airlock,
        "sparse",
        &path_in(ws.path(), "sparse.bin"),
        "",
        1 << 40,
    )
    .await;
    assert_eq!(
        err(&r).class,
        ErrorClass::WriteLimit,
        "a sparse file costs its apparent size"
    );
    let r = probe(
        &airlock,
        "set_len",
        &path_in(ws.path(), "inside.txt"),
        "",
        1 << 40,
    )
    .await;
    assert_eq!(err(&r).class, ErrorClass::WriteLimit);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("inside.txt")).unwrap(),
        "inside"
    );

    let r = probe(
        &airlock,
        "many_files",
        &path_in(ws.path(), "bomb"),
        "",
        100_000,
    )
    .await;
    assert_eq!(err(&r).class, ErrorClass::WriteLimit);
    let made = std::fs::read_dir(ws.path().join("bomb")).unwrap().count();
    assert!(made <= 2048, "{made} files on an 8 MiB budget");

    // A tree 1,000 levels deep on a 1 MiB budget (4 KiB a directory, charged
    // before each attempt, failed ones included): the budget stops it
    // within 256 levels.
    let (deep_ws, _deep_ro, _deep_outside, mut deep_config) = fs_setup();
    deep_config.tools.get_mut("fsprobe").unwrap().write_mib = Some(1);
    let deep_host = hostile(deep_config).await;
    let deep = path_in(deep_ws.path(), &vec!["d"; 1000].join("/"));
    let r = probe(&deep_host, "mkdir_all", &deep, "", 0).await;
    assert_eq!(err(&r).class, ErrorClass::WriteLimit);
    let mut depth = 0;
    let mut dir = deep_ws.path().join("d");
    while dir.is_dir() {
        depth += 1;
        dir = dir.join("d");
    }
    assert!(depth <= 256, "{depth} levels on a 1 MiB budget");
    // The longest name a filesystem allows works; one byte more is refused.
    let longest = path_in(ws.path(), &"n".repeat(255));
    ok_text(&probe(&airlock, "write", &longest, "", 0).await);
    let r = probe(&airlock, "write", &format!("{longest}n"), "", 0).await;
    assert_eq!(format!("{:?}", err(&r).class), r#"Errno("ENAMETOOLONG")"#);

    // Every call gets the budget afresh.
    ok_text(&probe(&airlock, "write", &path_in(ws.path(), "small.txt"), "", 0).await);
}

#[tokio::test]
async fn io06_stdin_is_closed() {
    let airlock = hostile(limits_config("hostile", timeout(5_000))).await;
    assert_eq!(
        ok_text(&attack(&airlock, json!({"attack": "stdin"})).await),
        "stdin gave 0 bytes"
    );
}

// D. Filesystem confinement

#[tokio::test]
async fn fs01_fs02_absolute_paths_and_dotdot_do_not_escape() {
    let (ws, _ro, outside, config) = fs_setup();
    let airlock = hostile(config).await;
    let secret = path_in(outside.path(), "secret.txt");
    for path in [
        secret.clone(),
        "/etc/passwd".to_string(),
        format!(
            "{}/../{}/secret.txt",
            canonical(ws.path()),
            outside.path().file_name().unwrap().to_string_lossy()
        ),
        format!("{}/dir/../../../../../../etc/passwd", canonical(ws.path())),
        "/".to_string(),
        "//etc/passwd".to_string(),
    ] {
        let r = probe(&airlock, "read", &path, "", 0).await;
        let e = err(&r);
        assert!(
            !e.message.contains("TOP SECRET") && !e.message.contains("root:"),
            "{path}: {e}"
        );
    }
    let r = probe(&airlock, "write", &secret, "", 0).await;
    assert!(r.is_error());
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "TOP SECRET"
    );
    let inside = format!("{}/dir/../inside.txt", canonical(ws.path()));
    assert_eq!(
        ok_text(&probe(&airlock, "read", &inside, "", 0).await),
        "ok: inside",
        "`..` that stays inside works"
    );
}

#[tokio::test]
async fn fs03_to_fs09_symlinks_never_lead_out() {
    let (ws, _ro, outside, config) = fs_setup();
    let w = ws.path();
    let out = outside.path();
    let link =
        |target: &Path, name: &str| std::os::unix::fs::symlink(target, w.join(name)).unwrap();
    link(&out.join("secret.txt"), "abs_file");
    link(out, "abs_dir");
    link(Path::new("../.."), "up2");
    std::fs::create_dir_all(w.join("a/b")).unwrap();
    std::os::unix::fs::symlink("../../..", w.join("a/b/c")).unwrap();
    link(Path::new("self_loop"), "self_loop");
    link(Path::new("loop_b"), "loop_a");
    link(Path::new("loop_a"), "loop_b");
    link(&out.join("created_by_guest.txt"), "dangling");
    link(Path::new("dir"), "dir_link");
    let before_out = tree(out);
    let airlock = hostile(config).await;
    let p = |rel: &str| path_in(w, rel);

    for rel in [
        "abs_file",
        "abs_dir/secret.txt",
        "abs_dir/",
        "up2/etc/passwd",
        "a/b/c/etc/passwd",
        "self_loop",
        "loop_a",
        "abs_dir/secret.txt/",
    ] {
        let r = probe(&airlock, "read", &p(rel), "", 0).await;
        let e = err(&r);
        assert!(!e.message.contains("TOP SECRET"), "{rel}: {e}");
        assert!(
            !e.message.contains(&canonical(out)),
            "{rel}: the message names a host path outside: {e}"
        );
    }
    let r = probe(&airlock, "write", &p("dangling"), "", 0).await;
    assert!(r.is_error(), "writing through a dangling link out");
    assert!(!out.join("created_by_guest.txt").exists());
    let r = probe(&airlock, "mkdir_all", &p("abs_dir/new/deeper"), "", 0).await;
    assert!(r.is_error());
    let r = probe(&airlock, "symlink", &p("guest_abs"), "/etc", 0).await;
    assert!(r.is_error(), "a guest cannot create an absolute symlink");
    let r = probe(&airlock, "readlink", &p("abs_file"), "", 0).await;
    assert!(
        r.is_error() && !err(&r).message.contains(&canonical(out)),
        "readlink of an absolute target leaks nothing"
    );
    assert_eq!(
        ok_text(&probe(&airlock, "read", &p("dir_link/nested.txt"), "", 0).await),
        "ok: nested",
        "a link inside stays usable"
    );
    let r = probe(&airlock, "read", &p("inside.txt/"), "", 0).await;
    assert!(r.is_error(), "a trailing slash on a file");
    assert_eq!(tree(out), before_out, "nothing outside changed");
}

#[tokio::test]
async fn fs10_fs11_nul_bytes_and_overlong_paths_are_refused() {
    let (ws, _ro, _outside, config) = fs_setup();
    let airlock = hostile(config).await;
    let started = Instant::now();
    for path in [
        format!("{}/inside.txt\u{0}", canonical(ws.path())),
        format!("{}/{}", canonical(ws.path()), "a/".repeat(5000)),
        format!(
            "{}/{}inside.txt",
            canonical(ws.path()),
            "x/../".repeat(5000)
        ),
    ] {
        assert!(
            probe(&airlock, "read", &path, "", 0).await.is_error(),
            "{}",
            &path[..80]
        );
    }
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn fs21_stat_never_answers_for_the_host() {
    // The root and the parent of a mount are not in the sandbox: a stat of
    // either fails rather than describing the host's directories.
    let (ws, _ro, _outside, config) = fs_setup();
    let airlock = hostile(config).await;
    let root = canonical(ws.path());
    for (op, path) in [
        ("stat", "/".to_string()),
        ("lstat", "/".to_string()),
        ("stat", format!("{root}/..")),
        ("lstat", format!("{root}/dir/../..")),
    ] {
        let r = probe(&airlock, op, &path, "", 0).await;
        assert!(r.is_error(), "{op} {path}: {}", r.text());
    }
    let inside = format!("{root}/dir/..");
    assert!(ok_text(&probe(&airlock, "stat", &inside, "", 0).await).starts_with("ok: "));
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_fifos_are_not_opened() {
    // Filesystem calls run on the calling thread, so opening a FIFO (which
    // blocks until a writer comes) would stall a runtime worker; it is
    // refused before the open, and so is a symlink to one. (Devices and
    // sockets take the same path in `BudgetedFs::open_at`; making a device
    // node needs privileges a test should not assume.)
    let (ws, _ro, _outside, config) = fs_setup();
    mkfifo(&ws.path().join("pipe"));
    std::os::unix::fs::symlink("pipe", ws.path().join("to-pipe")).unwrap();
    let airlock = hostile(config).await;
    let started = Instant::now();
    for name in ["pipe", "to-pipe"] {
        let path = path_in(ws.path(), name);
        for op in ["read", "write"] {
            let r =
                tokio::time::timeout(Duration::from_secs(10), probe(&airlock, op, &path, "", 0))
                    .await
                    .expect("the open does not block");
            let class = format!("{:?}", err(&r).class);
            assert_eq!(class, r#"Errno("EPERM")"#, "{op} {name}: {r:?}");
        }
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    let inside = path_in(ws.path(), "inside.txt");
    assert_eq!(
        ok_text(&probe(&airlock, "read", &inside, "", 0).await),
        "ok: inside"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_a_file_swapped_for_a_fifo_as_it_is_opened_never_blocks() {
    // Another process that can write to a granted directory swaps a
    // regular file and a FIFO under one name while the guest opens it over
    // and over. Checking the type and then opening left a window in which
    // the FIFO was opened, blocking a runtime worker until a writer came.
    let (ws, _ro, outside, config) = fs_setup();
    let swap = ws.path().join("swap");
    std::fs::write(&swap, "file").unwrap();
    let fifo = outside.path().join("fifo");
    mkfifo(&fifo);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, swap, fifo) = (stop.clone(), swap.clone(), fifo.clone());
        let next = ws.path().join(".next");
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if swaps.is_multiple_of(2) {
                    std::fs::hard_link(&fifo, &next).unwrap();
                } else {
                    std::fs::write(&next, "file").unwrap();
                }
                std::fs::rename(&next, &swap).unwrap();
                swaps += 1;
            }
            std::fs::write(&next, "file").unwrap();
            std::fs::rename(&next, &swap).unwrap();
            swaps
        })
    };
    let airlock = std::sync::Arc::new(hostile(config).await);
    let opening = {
        let (airlock, path) = (airlock.clone(), path_in(ws.path(), "swap"));
        tokio::spawn(async move { probe(&airlock, "open_each", &path, "", 3000).await })
    };
    let started = Instant::now();
    while !opening.is_finished() && started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    let blocked = !opening.is_finished();
    // Whatever was left waiting on the FIFO is let go, so the test ends.
    while !opening.is_finished() {
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!blocked, "an open blocked on the FIFO ({swaps} swaps)");
    let r = opening.await.unwrap();
    // Each open either opened the file or was refused (`not-permitted`):
    // any other error fails the guest's call.
    let text = ok_text(&r);
    let counts: Vec<u32> = text
        .strip_prefix("ok: ")
        .and_then(|t| t.strip_suffix(" refused"))
        .map(|t| {
            t.split(" opened, ")
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        matches!(counts[..], [opened, refused] if opened + refused == 3000),
        "{text} ({swaps} swaps)"
    );
    let inside = path_in(ws.path(), "inside.txt");
    assert_eq!(
        ok_text(&probe(&airlock, "read", &inside, "", 0).await),
        "ok: inside"
    );
}

#[tokio::test]
async fn fs13_to_fs16_read_only_mounts_refuse_every_mutation() {
    let (ws, ro, _outside, config) = fs_setup();
    let before = tree(ro.path());
    let airlock = hostile(config).await;
    for (op, path, to) in [
        ("write", "/ro/ro.txt", ""),
        ("append", "/ro/ro.txt", ""),
        ("truncate", "/ro/ro.txt", ""),
        ("set_len", "/ro/ro.txt", ""),
        ("create_new", "/ro/new.txt", ""),
        ("mkdir", "/ro/newdir", ""),
        ("rmdir", "/ro/sub", ""),
        ("unlink", "/ro/ro.txt", ""),
        ("symlink", "/ro/link", "ro.txt"),
        ("rename", "/ro/ro.txt", "/ro/moved.txt"),
    ] {
        let r = probe(&airlock, op, path, to, 0).await;
        assert!(r.is_error(), "{op} {path} succeeded on a read-only mount");
    }
    // Across mounts with different access: a hard link or a rename from the
    // read-only mount into the writable one is refused.
    let dest = path_in(ws.path(), "alias.txt");
    assert!(
        probe(&airlock, "hardlink", "/ro/ro.txt", &dest, 0)
            .await
            .is_error()
    );
    assert!(
        probe(&airlock, "rename", "/ro/ro.txt", &dest, 0)
            .await
            .is_error()
    );
    assert!(
        probe(
            &airlock,
            "rename",
            &path_in(ws.path(), "inside.txt"),
            "/ro/x.txt",
            0
        )
        .await
        .is_error()
    );
    assert_eq!(tree(ro.path()), before, "the read-only tree is unchanged");
    assert_eq!(
        ok_text(&probe(&airlock, "read", "/ro/ro.txt", "", 0).await),
        "ok: read only"
    );
}

/// A grant names the directory that was opened when it was granted, not
/// whatever its path names at call time: moving a granted directory away
/// and putting a symbolic link to elsewhere in its place (a swap from
/// outside, between two calls) reaches nothing new.
#[tokio::test]
async fn grants_stay_bound_to_the_directories_opened_at_load() {
    let (ws, ro, outside, config) = fs_setup();
    let airlock = hostile(config).await;
    let ws_guest = path_in(ws.path(), "");
    let ws_guest = ws_guest.trim_end_matches('/');
    assert_eq!(
        ok_text(&probe(&airlock, "read", "/ro/ro.txt", "", 0).await),
        "ok: read only"
    );
    let moved = tempfile::tempdir().unwrap();
    for granted in [ro.path(), ws.path()] {
        let name = granted.file_name().unwrap();
        std::fs::rename(granted, moved.path().join(name)).unwrap();
        std::os::unix::fs::symlink(outside.path(), granted).unwrap();
    }
    for path in [
        "/ro/secret.txt".to_string(),
        format!("{ws_guest}/secret.txt"),
    ] {
        let r = probe(&airlock, "read", &path, "", 0).await;
        assert!(
            r.is_error() && !r.text().contains("TOP SECRET"),
            "{path} reached the directory swapped in: {}",
            r.text()
        );
    }
    assert_eq!(
        ok_text(&probe(&airlock, "read", "/ro/ro.txt", "", 0).await),
        "ok: read only",
        "the mount is still the directory granted"
    );
    assert_eq!(
        ok_text(&probe(&airlock, "read", &format!("{ws_guest}/inside.txt"), "", 0).await),
        "ok: inside",
        "the workspace is still the directory granted"
    );
    let r = probe(&airlock, "write", &format!("{ws_guest}/planted.txt"), "", 0).await;
    assert_eq!(ok_text(&r), "ok: wrote");
    assert!(!outside.path().join("planted.txt").exists());
    for granted in [ro.path(), ws.path()] {
        std::fs::remove_file(granted).unwrap();
        std::fs::rename(moved.path().join(granted.file_name().unwrap()), granted).unwrap();
    }
}

// E. Interface confinement

#[tokio::test]
async fn if04_if05_nothing_of_the_host_environment_leaks() {
    let (ws, _ro, _outside, config) = fs_setup();
    let airlock = hostile(config).await;
    let text = ok_text(&probe(&airlock, "env", "", "", 0).await);
    assert!(text.starts_with("ok: vars=[] args=[]"), "{text}");
    assert!(!text.contains("HOME") && !text.contains("PATH"), "{text}");
    let listing = probe(&airlock, "list", "/", "", 0).await;
    assert!(listing.is_error(), "the root is not a preopen");
    let listing = ok_text(&probe(&airlock, "list", &canonical(ws.path()), "", 0).await);
    assert_eq!(listing, "ok: dir,inside.txt");
}

#[tokio::test]
async fn if06_nothing_survives_between_calls() {
    let airlock = hostile(limits_config("hostile", timeout(5_000))).await;
    for _ in 0..3 {
        assert_eq!(
            ok_text(&attack(&airlock, json!({"attack": "remember"})).await),
            "call number 1 in this instance"
        );
    }
}

// F. Malformed components and ABI abuse

async fn load_bytes(bytes: &[u8], limits: Option<airlock_host::Limits>) -> Vec<LoadError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.wasm"), bytes).unwrap();
    // Compiled, never taken from the artifact cache: compilation is what
    // these tests exercise.
    let mut config = Config {
        bundled_tools: false,
        tool_dirs: Some(vec![dir.path().to_path_buf()]),
        artifact_cache: false,
        ..Config::default()
    };
    if let Some(limits) = limits {
        config.limits = limits;
    }
    let airlock = Airlock::new(config).await.unwrap();
    assert!(airlock.registry().is_empty());
    airlock
        .registry()
        .failures()
        .iter()
        .map(|f| f.error.clone())
        .collect()
}

#[tokio::test]
async fn mf01_mf03_mf04_mf05_malformed_components_fail_cleanly() {
    let real = std::fs::read(guests::HOSTILE).unwrap();
    let started = Instant::now();
    for bytes in [
        &real[..real.len() / 2],
        b"\0asm\x01\0\0\0garbage".as_slice(),
        b"not wasm at all".as_slice(),
        b"(component)".as_slice(),
        b"\0asm\x01\0\0\0".as_slice(),
    ] {
        let errors = load_bytes(bytes, None).await;
        assert!(matches!(errors[..], [LoadError::Compile(_)]), "{errors:?}");
    }
    assert!(started.elapsed() < Duration::from_secs(10));

    let tiny = airlock_host::Limits {
        component_bytes: 1024,
        ..airlock_host::Limits::default()
    };
    assert!(matches!(
        load_bytes(&real, Some(tiny)).await[..],
        [LoadError::TooLarge { .. }]
    ));

    let hurried = airlock_host::Limits {
        compile_timeout_ms: 1,
        ..airlock_host::Limits::default()
    };
    let grep = airlock_host::bundled::BUNDLED
        .iter()
        .find(|(name, _)| *name == "airlock-tool-grep")
        .map(|(_, bytes)| bytes.to_vec())
        .unwrap();
    assert!(matches!(
        load_bytes(&grep, Some(hurried)).await[..],
        [LoadError::CompileTimeout(1)]
    ));

    let (base, _) = hostile_base();
    let precompiled = base
        .engine()
        .wasmtime()
        .precompile_component(&real)
        .unwrap();
    assert!(matches!(
        load_bytes(&precompiled, None).await[..],
        [LoadError::Precompiled]
    ));
}

#[tokio::test]
async fn cm01_cm02_cm03_lies_in_the_canonical_abi_are_caught() {
    let airlock = hostile(limits_config("abi_liar", ToolConfig::default())).await;
    let lie = |input: Value| {
        let airlock = airlock.clone();
        async move {
            let mut cx = airlock.context();
            airlock
                .call(&mut cx, ToolUse::new("lie", "abi_liar", input))
                .await
        }
    };
    for name in ["bad_utf8", "oob_string", "oob_list"] {
        let r = lie(json!({"lie": name})).await;
        let e = err(&r);
        assert!(
            matches!(e.class, ErrorClass::Trap | ErrorClass::ToolError),
            "{name}: {e}"
        );
    }
    // The host passes the input through the guest's lying allocator.
    for pad in [54_321usize, 54_322] {
        let input = json!({"lie": "truth", "pad": ""});
        let overhead = input.to_string().len();
        let r = lie(json!({"lie": "truth", "pad": "p".repeat(pad - overhead)})).await;
        assert!(
            r.is_error(),
            "an allocation of {pad} bytes lied, and the host noticed"
        );
    }
    let r = lie(json!({"lie": "truth"})).await;
    assert_eq!(ok_text(&r), "the truth", "the host is healthy afterwards");
}

// G. The JSON boundary

#[tokio::test]
async fn js01_to_js03_hostile_json_input_is_refused() {
    let airlock = hostile(limits_config("hostile", timeout(5_000))).await;
    let mut deep = json!("x");
    for _ in 0..1000 {
        deep = json!([deep]);
    }
    let r = attack(&airlock, json!({"attack": "ok", "mib": deep})).await;
    assert!(err(&r).message.contains("levels deep"), "{}", err(&r));
    let r = attack(&airlock, json!({"attack": "x".repeat(2 << 20)})).await;
    assert_eq!(err(&r).class, ErrorClass::InvalidInput);
    for bad in [json!(-1), json!(1e308), json!("12"), json!(1.5)] {
        let r = attack(&airlock, json!({"attack": "alloc", "mib": bad})).await;
        assert_eq!(err(&r).class, ErrorClass::InvalidInput, "{bad}");
    }
}

#[tokio::test]
async fn js06_guest_text_is_cleaned_before_a_model_sees_it() {
    let ws = workspace(&[(
        "evil.txt",
        "safe\u{202E}txt.exe\u{1b}[31m red \u{E0041}hidden",
    )]);
    let mut config = workspace_config(ws.path());
    config.permissions.default_mode = airlock_host::PermissionMode::AcceptEdits;
    let airlock = airlock(config).await;
    let mut cx = airlock.context();
    let text = ok_text(&call(&airlock, &mut cx, "read", json!({"file_path": "evil.txt"})).await);
    assert!(
        !text.contains('\u{202E}') && !text.contains('\u{1b}') && !text.contains('\u{E0041}'),
        "{text:?}"
    );
    assert!(
        text.contains("[airlock removed 7 control or invisible characters"),
        "{text}"
    );
}
