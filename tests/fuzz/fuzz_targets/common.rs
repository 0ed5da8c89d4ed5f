// Shared by the fuzz targets: where the first-party components are (built
// by `cargo test` or `just build-guests` into target/guests), and a runtime.

use std::path::PathBuf;

/// The directory holding `airlock_tool_*.wasm`: `$AIRLOCK_FUZZ_TOOLS`, or
/// the workspace's guest build.
pub fn tool_dir() -> PathBuf {
    std::env::var_os("AIRLOCK_FUZZ_TOOLS").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/guests/wasm32-wasip2/guest")
    })
}

/// A runtime for the async host API.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}
