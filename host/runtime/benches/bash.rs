//! The bundled `bash` tool against the real shell, side by side in one run.
//!
//! - `bash_warm/airlock_bash`: a `bash` call of `ls | wc -l` through
//!   `Airlock::call` (the whole pipeline: classification, permission,
//!   instantiation, the shell, the context changes), in a running host;
//! - `bash_warm/spawn_bash`: spawning `bash -c 'ls | wc -l'` and reading its
//!   output, what a host without a sandboxed shell pays per command;
//! - `bash_grep/airlock_bash` and `bash_grep/native_grep`: `grep -rn
//!   PATTERN .` over the grep benchmark's corpus (the Rust standard
//!   library's sources, or `AIRLOCK_BENCH_CORPUS`), through the tool and as
//!   GNU grep spawned by `bash -c`.
//!
//! Before measuring, both sides' answers are compared (the listing's count;
//! the number of matching lines) and must be equal.
//! Run with `cargo bench -p airlock-host --bench bash`.

#[path = "support/rust_sources.rs"]
mod rust_sources;

use airlock_host::{Airlock, Config, ToolUse, WorkspaceAccess};
use criterion::{Criterion, criterion_group, criterion_main};
use rust_sources::corpus;
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const PATTERN: &str = r"fn [a-z_]*_unchecked";

/// A host with the bundled tools and `dir` as a read-only workspace.
fn host(runtime: &tokio::runtime::Runtime, dir: &Path) -> Airlock {
    let mut config = Config {
        workspace: Some(dir.to_path_buf()),
        tool_dirs: Some(Vec::new()),
        ..Config::default()
    };
    config.workspace_access = WorkspaceAccess::Read;
    runtime
        .block_on(Airlock::new(config))
        .expect("the bundled tools load")
}

/// The output of one `bash` call of `command`.
fn airlock_bash(runtime: &tokio::runtime::Runtime, airlock: &Airlock, command: &str) -> String {
    runtime.block_on(async {
        let mut cx = airlock.context();
        let result = airlock
            .call(
                &mut cx,
                ToolUse::new("toolu_bash", "bash", json!({ "command": command })),
            )
            .await;
        assert!(!result.is_error(), "{}", result.text());
        result.text()
    })
}

/// The stdout of the machine's `bash -c command` in `dir`.
fn spawn_bash(dir: &Path, command: &str) -> String {
    let out = Command::new("bash")
        .args(["-c", command])
        .current_dir(dir)
        .env("LC_ALL", "C")
        .output()
        .expect("bash runs");
    String::from_utf8(out.stdout).expect("bash prints UTF-8")
}

fn warm_call(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temp dir");
    for i in 0..12 {
        std::fs::write(dir.path().join(format!("file{i}.txt")), "x\n").expect("a file");
    }
    let dir = dir.path().canonicalize().expect("the dir exists");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let airlock = host(&runtime, &dir);
    let command = "ls | wc -l";
    assert_eq!(
        airlock_bash(&runtime, &airlock, command).trim(),
        spawn_bash(&dir, command).trim(),
        "both shells count the same files"
    );
    let mut group = c.benchmark_group("bash_warm");
    group.bench_function("airlock_bash", |b| {
        b.iter(|| airlock_bash(&runtime, &airlock, command))
    });
    group.bench_function("spawn_bash", |b| b.iter(|| spawn_bash(&dir, command)));
    group.finish();
}

fn grep_corpus(c: &mut Criterion) {
    let Some(root) = corpus() else {
        eprintln!("no corpus: run `rustup component add rust-src` or set AIRLOCK_BENCH_CORPUS");
        return;
    };
    let root = root.canonicalize().expect("the corpus exists");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let airlock = host(&runtime, &root);
    let command = format!("grep -rn '{PATTERN}' .");
    let count = format!("{command} | wc -l");
    let ours = airlock_bash(&runtime, &airlock, &count);
    let theirs = spawn_bash(&root, &count);
    assert!(theirs.trim() != "0", "the pattern matches somewhere");
    assert_eq!(ours.trim(), theirs.trim(), "both find the same lines");

    let mut group = c.benchmark_group("bash_grep");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("airlock_bash", |b| {
        b.iter(|| airlock_bash(&runtime, &airlock, &command))
    });
    group.bench_function("native_grep", |b| b.iter(|| spawn_bash(&root, &command)));
    group.finish();
}

criterion_group!(benches, warm_call, grep_corpus);
criterion_main!(benches);
