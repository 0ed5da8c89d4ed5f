//! The bundled `grep` tool against ripgrep on one thread, on a real corpus.
//!
//! The corpus is the Rust standard library's sources (`rustup component add
//! rust-src`), or the directory in `AIRLOCK_BENCH_CORPUS`. Both sides count
//! the lines matching the same regex in every file:
//!
//! - `grep_corpus/airlock_grep`: one `grep` call through `Airlock::call`
//!   (the whole pipeline, in a host that is already running);
//! - `grep_corpus/rg_j1`: spawning `rg -j1 --count` and reading its output.
//!
//! Before measuring, the per-file counts of both are compared and must be
//! identical. `rg` is `AIRLOCK_BENCH_RG` if set (a pyenv shim in front of
//! ripgrep costs more than the search), else `rg` on the `PATH`.
//! `just bench` also times both as whole processes (hyperfine).
//! Run with `cargo bench -p airlock-host --bench grep`.

#[path = "support/rust_sources.rs"]
mod rust_sources;

use airlock_host::{Airlock, Config, ToolUse};
use criterion::{Criterion, criterion_group, criterion_main};
use rust_sources::corpus;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const PATTERN: &str = r"fn \w+_unchecked";

/// `path:count` lines as a map from the path relative to `root`.
fn counts(text: &str, root: &Path) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let (path, count) = line.rsplit_once(':')?;
            let count = count.trim().parse().ok()?;
            let path = Path::new(path);
            let rel = path.strip_prefix(root).unwrap_or(path);
            Some((rel.to_string_lossy().into_owned(), count))
        })
        .collect()
}

fn rg_binary() -> std::ffi::OsString {
    std::env::var_os("AIRLOCK_BENCH_RG").unwrap_or_else(|| "rg".into())
}

fn rg(root: &Path) -> String {
    let out = Command::new(rg_binary())
        .args(["-j1", "--count", "-e", PATTERN])
        .arg(root)
        .output()
        .expect("rg runs");
    String::from_utf8(out.stdout).expect("rg prints UTF-8")
}

fn grep_vs_rg(c: &mut Criterion) {
    let Some(root) = corpus() else {
        eprintln!("no corpus: run `rustup component add rust-src` or set AIRLOCK_BENCH_CORPUS");
        return;
    };
    if Command::new(rg_binary()).arg("--version").output().is_err() {
        eprintln!("no ripgrep: install it (`pip install ripgrep`) to run this bench");
        return;
    }
    let root = root.canonicalize().expect("the corpus exists");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let mut config = Config {
        workspace: Some(root.clone()),
        tool_dirs: Some(Vec::new()),
        ..Config::default()
    };
    config.workspace_access = airlock_host::WorkspaceAccess::Read;
    let airlock = runtime
        .block_on(Airlock::new(config))
        .expect("the bundled tools load");
    let input = json!({
        "pattern": PATTERN,
        "path": root,
        "output_mode": "count",
        "head_limit": 0,
    });
    let search = || async {
        let mut cx = airlock.context();
        let result = airlock
            .call(&mut cx, ToolUse::new("toolu_grep", "grep", input.clone()))
            .await;
        assert!(!result.is_error(), "{}", result.text());
        result.text()
    };
    let ours = counts(&runtime.block_on(search()), &root);
    let theirs = counts(&rg(&root), &root);
    assert!(!theirs.is_empty(), "the pattern matches somewhere");
    assert_eq!(ours, theirs, "grep and rg find the same matches");

    let mut group = c.benchmark_group("grep_corpus");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("airlock_grep", |b| b.iter(|| runtime.block_on(search())));
    group.bench_function("rg_j1", |b| b.iter(|| rg(&root)));
    group.finish();
}

criterion_group!(benches, grep_vs_rg);
criterion_main!(benches);
