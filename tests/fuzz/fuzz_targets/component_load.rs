//! Component loading: arbitrary bytes (seeded with real components, which
//! the fuzzer mutates) through the size cap, the precompiled-artifact
//! check, compilation, the import allowlist, pre-instantiation, `describe`
//! in an empty store, and the descriptor checks. Every input must load or
//! fail with a `LoadError`; nothing may panic or hang.

#![no_main]

use airlock_host::{Engine, Limits, Tool, ToolOrigin, WasmTool};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn harness() -> &'static (tokio::runtime::Runtime, Engine) {
    static HARNESS: OnceLock<(tokio::runtime::Runtime, Engine)> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let limits = Limits {
            preflight_timeout_ms: 1_000,
            compile_timeout_ms: 20_000,
            ..Limits::default()
        };
        (
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime"),
            Engine::new(&limits).expect("an engine"),
        )
    })
}

fuzz_target!(
    init: {
        harness();
    },
    |data: &[u8]| {
    let (runtime, engine) = harness();
    let loaded = runtime.block_on(WasmTool::load(engine, data.to_vec(), ToolOrigin::File("fuzz.wasm".into())));
    if let Ok(tool) = loaded {
        assert!(tool.descriptor().problems().is_empty());
    }
    }
);
