//! The input path: arbitrary bytes as a tool input, through JSON parsing
//! within bounds, schema validation, the tool's own validation, the
//! permission stage and the call, on real components (read, grep, glob,
//! ls) over a small workspace. The host must answer every input with a
//! result, never panic, and never let a call touch anything outside.

#![no_main]

use airlock_host::json::{JsonBounds, parse};
use airlock_host::{Airlock, Config, ToolUse};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const TOOLS: [&str; 4] = ["read", "grep", "glob", "ls"];

struct Harness {
    runtime: tokio::runtime::Runtime,
    airlock: Airlock,
    _workspace: PathBufGuard,
}

struct PathBufGuard(std::path::PathBuf);

impl Drop for PathBufGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let workspace = std::env::temp_dir().join(format!("airlock-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(workspace.join("src")).unwrap();
        std::fs::write(workspace.join("src/lib.rs"), "pub fn a() {}\n// TODO: b\n").unwrap();
        std::fs::write(workspace.join("README.md"), "# fuzz\nline two\n").unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
        let tools = tempdir_with_tools();
        let mut config = Config {
            bundled_tools: false,
            tool_dirs: Some(vec![tools]),
            workspace: Some(workspace.clone()),
            ..Config::default()
        };
        config.limits.timeout_ms = 2_000;
        let airlock = runtime.block_on(Airlock::new(config)).expect("the tools load");
        assert_eq!(airlock.registry().len(), TOOLS.len(), "{:?}", airlock.registry().failures());
        Harness {
            runtime,
            airlock,
            _workspace: PathBufGuard(workspace),
        }
    })
}

/// A directory with just the read-only tools the target calls.
fn tempdir_with_tools() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("airlock-fuzz-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for tool in TOOLS {
        let name = format!("airlock_tool_{tool}.wasm");
        std::fs::copy(tool_dir().join(&name), dir.join(&name))
            .unwrap_or_else(|e| panic!("{name}: {e}; build the guests first (cargo test, or just build-guests)"));
    }
    dir
}

/// The directory holding `airlock_tool_*.wasm`: `$AIRLOCK_FUZZ_TOOLS`, or
/// the workspace's guest build (made by `cargo test` or `just build-guests`).
fn tool_dir() -> std::path::PathBuf {
    std::env::var_os("AIRLOCK_FUZZ_TOOLS").map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/guests/wasm32-wasip2/guest")
    })
}

fuzz_target!(
    init: {
        // Compiling the tools takes a while; not as part of the first input.
        harness();
    },
    |data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let h = harness();
    let limits = h.airlock.grants().limits();
    let bounds = JsonBounds {
        max_bytes: limits.input_bytes,
        max_depth: limits.json_depth,
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let Ok(input) = parse(text, bounds) else {
        return;
    };
    let tool = TOOLS[usize::from(selector) % TOOLS.len()];
    let result = h.runtime.block_on(async {
        let mut cx = h.airlock.context();
        h.airlock.call(&mut cx, ToolUse::new("fuzz", tool, input)).await
    });
    // Every use gets a result; a success must have content.
    if let Ok(output) = &result.outcome {
        assert!(!output.content.is_empty() || output.structured.is_some());
    }
    }
);
