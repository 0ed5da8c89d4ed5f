//! What `airlock.lock` costs a load: the bundled tools, written as files
//! into a tool directory as `airlock install` would put them, loaded with
//! the artifact cache warm.
//!
//! - `lockfile/load_unlocked`: `Airlock::new` over that directory with no
//!   `airlock.lock`.
//! - `lockfile/load_locked`: the same with every file pinned in
//!   `airlock.lock` (read once per load, each file's BLAKE3 checked).
//! - `lockfile/blake3_all`: the check itself, BLAKE3 over every file's
//!   bytes, the floor of what the lock adds.
//!
//! The per-tool cost is (`load_locked` − `load_unlocked`) / the number of
//! tools, printed as a `RESULT` line with the count.
//!
//! Run with `cargo bench -p airlock-host --bench lockfile`.

use airlock_host::lock::{LockedTool, Lockfile};
use airlock_host::{Airlock, Config};
use criterion::{Criterion, criterion_group, criterion_main};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A configuration that loads the tools in `tools` only, with `home`'s
/// `airlock.toml` as its source (so `airlock.lock` is looked for there).
fn config(home: &Path, tools: &Path, cache: &Path) -> Config {
    let mut config = Config {
        tool_dirs: Some(vec![tools.to_path_buf()]),
        bundled_tools: false,
        cache_dir: Some(cache.to_path_buf()),
        source: Some(home.join("airlock.toml")),
        ..Config::default()
    };
    // A host for `fetch`, so that every tool is available.
    config.tools.entry("*".into()).or_default().network = vec!["localhost".into()];
    config
}

fn lockfile(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let root = tempfile::tempdir().expect("a temp dir");
    let tools = root.path().join("tools");
    let cache = root.path().join("cache");
    let (locked_home, unlocked_home) = (root.path().join("locked"), root.path().join("unlocked"));
    for dir in [&tools, &cache, &locked_home, &unlocked_home] {
        std::fs::create_dir_all(dir).expect("a directory");
    }
    let mut lock = Lockfile::default();
    let mut files: Vec<PathBuf> = Vec::new();
    for (package, bytes) in airlock_host::bundled::BUNDLED {
        let name = package
            .trim_start_matches("airlock-tool-")
            .replace('-', "_");
        let file = tools.join(format!("{name}.wasm"));
        std::fs::write(&file, bytes).expect("a tool file");
        lock.insert(LockedTool {
            name: name.clone(),
            source: format!("oci://127.0.0.1:5000/bench/{name}:1"),
            pinned: format!("oci://127.0.0.1:5000/bench/{name}@sha256:00"),
            manifest_digest: "sha256:00".into(),
            layer_digest: "sha256:00".into(),
            blake3: blake3::hash(bytes).to_hex().to_string(),
            descriptor_blake3: None,
            file: file.clone(),
            signed_by: None,
            asks: Vec::new(),
        });
        files.push(file);
    }
    lock.write(&locked_home.join("airlock.lock"), None)
        .expect("the lock is written");
    let count = files.len();
    let load = |home: &Path| {
        let airlock = runtime
            .block_on(Airlock::new(config(home, &tools, &cache)))
            .expect("the tools load");
        assert_eq!(
            airlock.registry().entries().len(),
            count,
            "{:?}",
            airlock.registry().failures()
        );
    };
    // Warms the artifact cache, and checks both load every tool.
    load(&unlocked_home);
    load(&locked_home);

    let mut group = c.benchmark_group("lockfile");
    group.measurement_time(Duration::from_secs(10));
    group.sample_size(30);
    group.bench_function("load_unlocked", |b| b.iter(|| load(&unlocked_home)));
    group.bench_function("load_locked", |b| b.iter(|| load(&locked_home)));
    let bytes: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(f).expect("a tool file"))
        .collect();
    group.bench_function("blake3_all", |b| {
        b.iter(|| bytes.iter().map(|b| blake3::hash(b)).collect::<Vec<_>>())
    });
    group.finish();
    let total: usize = bytes.iter().map(Vec::len).sum();
    println!("RESULT lockfile_tools {count} tools, {total} bytes");
}

criterion_group!(benches, lockfile);
criterion_main!(benches);
