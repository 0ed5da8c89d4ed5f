//! How far a call is from what wasmtime allows: one `sleep {"ms": 0}`
//! (the bundled `sleep` component parses its input and returns a line)
//! measured in one run, each row adding a layer to the one before:
//!
//! - `floor/wasmtime_defaults`: the component pre-instantiated on an
//!   engine with wasmtime's defaults (instances allocated on demand); per
//!   call a fresh store with an empty WASI context and the host imports
//!   stubbed, instantiated and called. Shown for what Airlock's engine
//!   configuration is worth; not the floor.
//! - `floor/wasmtime`: the same on Airlock's engine
//!   (`airlock_engine::Engine`: its pooling allocator, epoch interruption,
//!   Cranelift settings), the store given a far epoch deadline: **the
//!   floor**, wasmtime alone as Airlock configures it.
//! - `floor/wasm_tool`: `WasmTool::call` on that engine: Airlock's store
//!   (limits, the call's WASI context from its grants, the epoch deadline
//!   and the wall clock, the host state) and its result handling.
//! - `floor/airlock_call`: `Airlock::call`, the whole pipeline (schema,
//!   preflight, permissions, scheduling, result processing, telemetry).
//!
//! After criterion's rows, the four are timed again interleaved (rounds of
//! 2,000 calls each, medians of 15 rounds) and printed as `RESULT floor …`
//! with each one's ratio to the floor: issue 54's target is
//! `airlock_call` ≤ 1.25× `wasmtime`.
//!
//! Run with `cargo bench -p airlock-engine --bench floor`.

mod stub;

use airlock_core::config::Limits;
use airlock_core::grants::CallGrants;
use airlock_core::tool::{CallContext, Invocation, ReadFiles, Tool, ToolOrigin};
use airlock_engine::{Bytes, Engine, WasmTool};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use std::future::Future;
use std::time::{Duration, Instant};
use stub::{State, ToolComponentPre, airlock};
use wasmtime::Store;
use wasmtime::component::{Component, ResourceTable};
use wasmtime_wasi::WasiCtx;

const ROUNDS: usize = 15;
const PER_ROUND: u32 = 2_000;

fn sleep_bytes() -> &'static [u8] {
    airlock_bundled::BUNDLED
        .iter()
        .find(|(name, _)| *name == "airlock-tool-sleep")
        .map(|(_, bytes)| *bytes)
        .expect("sleep is bundled")
}

/// One call of `sleep` through wasmtime alone: a fresh store, instantiated
/// from `pre`, called; `far_deadline` for an engine with epoch
/// interruption on.
async fn bare(pre: &ToolComponentPre<State>, far_deadline: bool) {
    let mut store = Store::new(
        pre.engine(),
        State {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
        },
    );
    if far_deadline {
        store.set_epoch_deadline(u64::MAX / 2);
    }
    let cx = airlock::tool::types::CallContext {
        cwd: "/".into(),
        tool_use_id: "toolu_floor".into(),
        agent_id: None,
        mounts: Vec::new(),
        state: Vec::new(),
    };
    let tool = pre
        .instantiate_async(&mut store)
        .await
        .expect("sleep instantiates");
    let output = tool
        .airlock_tool_tool()
        .call_call(&mut store, &r#"{"ms":0}"#.to_string(), &cx)
        .await
        .expect("sleep runs")
        .unwrap_or_else(|e| panic!("sleep failed: {e:?}"));
    assert_eq!(output.content.len(), 1);
}

/// One call of `sleep` through Airlock's `WasmTool`, with `read_files`
/// as its context's cache and the default limits' memory.
async fn wasm_tool(tool: &WasmTool, read_files: &ReadFiles) {
    let mut invocation = Invocation::new(
        "toolu_floor",
        CallContext::default(),
        CallGrants::nothing(Duration::from_secs(10), Limits::default().memory_mib << 20),
        read_files.clone(),
    );
    tool.call(&mut invocation, &json!({"ms": 0}))
        .await
        .expect("sleep runs");
}

/// One call of `sleep` through `Airlock::call`.
async fn airlock_call(host: &airlock_host::Airlock, cx: &mut airlock_host::ToolContext) {
    let tool_use = airlock_host::ToolUse::new("toolu_floor", "sleep", json!({"ms": 0}));
    let result = host.call(cx, tool_use).await;
    assert!(!result.is_error(), "{}", result.text());
}

/// The time of `n` calls of `call`, run one after another.
fn timed<F: Future<Output = ()>>(
    runtime: &tokio::runtime::Runtime,
    n: u32,
    mut call: impl FnMut() -> F,
) -> Duration {
    runtime.block_on(async {
        let started = Instant::now();
        for _ in 0..n {
            call().await;
        }
        started.elapsed()
    })
}

/// [`timed`] for `Airlock::call`, whose calls share the context.
fn pipeline(
    runtime: &tokio::runtime::Runtime,
    n: u32,
    host: &airlock_host::Airlock,
    cx: &mut airlock_host::ToolContext,
) -> Duration {
    runtime.block_on(async {
        let started = Instant::now();
        for _ in 0..n {
            airlock_call(host, cx).await;
        }
        started.elapsed()
    })
}

fn floor(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let bytes = sleep_bytes();

    let plain = wasmtime::Engine::default();
    let plain_pre = stub::pre(
        &plain,
        &Component::new(&plain, bytes).expect("sleep compiles"),
    );
    let limits = Limits::default();
    let engine = Engine::new(&limits).expect("Airlock's engine");
    let airlock_pre = stub::pre(
        engine.wasmtime(),
        &engine.compile(bytes).expect("sleep compiles"),
    );
    let tool = runtime
        .block_on(WasmTool::load(
            &engine,
            Bytes::from_static(bytes),
            ToolOrigin::Bundled("airlock-tool-sleep".into()),
        ))
        .expect("sleep loads");
    let workspace = tempfile::tempdir().expect("a temp dir");
    let host = runtime
        .block_on(airlock_host::Airlock::new(airlock_host::Config {
            workspace: Some(workspace.path().to_path_buf()),
            tool_dirs: Some(Vec::new()),
            ..airlock_host::Config::default()
        }))
        .expect("the bundled tools load");
    let mut cx = host.context();
    let read_files = cx.read_files().clone();
    // Each warmed (and checked) by one call.
    runtime.block_on(async {
        bare(&plain_pre, false).await;
        bare(&airlock_pre, true).await;
        wasm_tool(&tool, &read_files).await;
        airlock_call(&host, &mut cx).await;
    });

    let mut group = c.benchmark_group("floor");
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("wasmtime_defaults", |b| {
        b.iter_custom(|n| timed(&runtime, n as u32, || bare(&plain_pre, false)))
    });
    group.bench_function("wasmtime", |b| {
        b.iter_custom(|n| timed(&runtime, n as u32, || bare(&airlock_pre, true)))
    });
    group.bench_function("wasm_tool", |b| {
        b.iter_custom(|n| timed(&runtime, n as u32, || wasm_tool(&tool, &read_files)))
    });
    group.bench_function("airlock_call", |b| {
        b.iter_custom(|n| pipeline(&runtime, n as u32, &host, &mut cx))
    });
    group.finish();

    // The same four, interleaved round by round, so that the ratios come
    // from one stretch of the machine's time.
    let mut rows: [Vec<Duration>; 4] = Default::default();
    for _ in 0..ROUNDS {
        rows[0].push(timed(&runtime, PER_ROUND, || bare(&plain_pre, false)) / PER_ROUND);
        rows[1].push(timed(&runtime, PER_ROUND, || bare(&airlock_pre, true)) / PER_ROUND);
        rows[2].push(timed(&runtime, PER_ROUND, || wasm_tool(&tool, &read_files)) / PER_ROUND);
        rows[3].push(pipeline(&runtime, PER_ROUND, &host, &mut cx) / PER_ROUND);
    }
    let medians = rows.map(|mut row| {
        row.sort();
        row[row.len() / 2]
    });
    let floor = medians[1].as_secs_f64();
    let names = ["wasmtime_defaults", "wasmtime", "wasm_tool", "airlock_call"];
    for (name, median) in names.iter().zip(medians) {
        println!(
            "RESULT floor {}",
            json!({
                "row": name,
                "median_us": (median.as_secs_f64() * 1e7).round() / 10.0,
                "ratio_to_wasmtime": (median.as_secs_f64() / floor * 100.0).round() / 100.0,
            })
        );
    }
}

criterion_group!(benches, floor);
criterion_main!(benches);
