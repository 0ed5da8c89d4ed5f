//! What epoch interruption costs a CPU-bound guest.
//!
//! Two guests, each run on two engines configured like Airlock's
//! (Cranelift at `speed`, async calls):
//!
//! - `epoch_grep/*`: the bundled `grep` component searching 16 MB of
//!   generated text with a case-insensitive regex (a real CPU-bound tool:
//!   ripgrep's engine, reading through WASI), in a store with WASI and the
//!   `airlock:tool/host` imports stubbed;
//! - `epoch_tight_loop/*`: the worst case, a hand-written loop that calls a
//!   two-instruction function for every byte of a page, 4,000 times, so
//!   the epoch checks (at every loop header and function entry) are a large
//!   share of all instructions.
//!
//! `interrupted` has epoch interruption on, a ticker thread advancing the
//! epoch every 10 ms (`limits.epoch_tick_ms`), and a deadline callback that
//! yields to the runtime at every tick, as `engine::run::arm` sets up every
//! guest call; `uninterrupted` has no epoch interruption at all (nothing
//! could stop the guest).
//!
//! Run with `cargo bench -p airlock-engine --bench epoch`.

mod stub;
#[path = "../../runtime/benches/support/mod.rs"]
mod support;

use criterion::{Criterion, criterion_group, criterion_main};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use stub::{State, airlock, pre};
use wasmtime::component::{Component, ResourceTable};
use wasmtime::{Config, Engine, Instance, Module, Store, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

const GUEST: &str = r#"
(module
  (memory 1)
  (func $mix (param $h i64) (param $x i64) (result i64)
    local.get $h
    local.get $x
    i64.xor
    i64.const 0x100000001b3
    i64.mul)
  (func (export "run") (param $rounds i32) (result i64)
    (local $i i32) (local $j i32) (local $h i64)
    i64.const 0xcbf29ce484222325
    local.set $h
    (loop $round
      i32.const 0
      local.set $j
      (loop $byte
        local.get $j
        local.get $j
        i32.const 31
        i32.mul
        i32.store8
        local.get $h
        local.get $j
        i64.load8_u
        call $mix
        local.set $h
        local.get $j
        i32.const 1
        i32.add
        local.tee $j
        i32.const 4096
        i32.lt_u
        br_if $byte)
      local.get $i
      i32.const 1
      i32.add
      local.tee $i
      local.get $rounds
      i32.lt_u
      br_if $round)
    local.get $h))
"#;

const ROUNDS: i32 = 4_000;

fn engine(interruption: bool) -> Engine {
    let mut config = Config::new();
    config
        .epoch_interruption(interruption)
        .cranelift_opt_level(wasmtime::OptLevel::Speed);
    Engine::new(&config).expect("an engine")
}

/// A store armed like Airlock's when `interruption` is on.
fn store(engine: &Engine, interruption: bool, wasi: WasiCtx) -> Store<State> {
    let mut store = Store::new(
        engine,
        State {
            wasi,
            table: ResourceTable::new(),
        },
    );
    if interruption {
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|_| Ok(UpdateDeadline::Yield(1)));
    }
    store
}

/// Advances `engine`'s epoch every 10 ms until dropped.
struct Ticker {
    ticking: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    fn start(engine: &Engine) -> Ticker {
        let ticking = Arc::new(AtomicBool::new(true));
        let (engine, flag) = (engine.clone(), ticking.clone());
        let thread = std::thread::spawn(move || {
            while flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
                engine.increment_epoch();
            }
        });
        Ticker {
            ticking,
            thread: Some(thread),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.ticking.store(false, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the ticker stops");
        }
    }
}

fn grep(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let workspace = tempfile::tempdir().expect("a temp dir");
    support::corpus(workspace.path(), 8, 2 << 20);
    let root = workspace
        .path()
        .to_str()
        .expect("a UTF-8 temp dir")
        .to_string();
    let bytes = airlock_bundled::BUNDLED
        .iter()
        .find(|(name, _)| *name == "airlock-tool-grep")
        .map(|(_, bytes)| *bytes)
        .expect("grep is bundled");
    let input = serde_json::json!({
        "pattern": "(?i)\\b\\w+ing\\s+\\w+ed\\b",
        "output_mode": "count",
        "head_limit": 0,
    })
    .to_string();
    let cx = airlock::tool::types::CallContext {
        cwd: root.clone(),
        tool_use_id: "toolu_epoch".into(),
        agent_id: None,
        mounts: vec![airlock::tool::types::Mount {
            path: root.clone(),
            writable: false,
        }],
        state: Vec::new(),
    };
    let mut group = c.benchmark_group("epoch_grep");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(15));
    let mut answers = Vec::new();
    for (name, interruption) in [("interrupted", true), ("uninterrupted", false)] {
        let engine = engine(interruption);
        let _ticker = interruption.then(|| Ticker::start(&engine));
        let component = Component::new(&engine, bytes).expect("grep compiles");
        let pre = pre(&engine, &component);
        let search = || async {
            let wasi = WasiCtxBuilder::new()
                .preopened_dir(&root, &root, FsPerms::ReadOnly)
                .expect("the corpus opens")
                .build();
            let mut store = store(&engine, interruption, wasi);
            let tool = pre
                .instantiate_async(&mut store)
                .await
                .expect("grep instantiates");
            let output = tool
                .airlock_tool_tool()
                .call_call(&mut store, &input, &cx)
                .await
                .expect("grep runs")
                .unwrap_or_else(|e| panic!("grep failed: {e:?}"));
            format!("{:?}", output.content)
        };
        answers.push(runtime.block_on(search()));
        group.bench_function(name, |b| b.iter(|| runtime.block_on(search())));
    }
    group.finish();
    assert_eq!(answers[0], answers[1], "both engines find the same matches");
}

fn tight_loop(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let wasm = wat::parse_str(GUEST).expect("the guest assembles");
    let mut group = c.benchmark_group("epoch_tight_loop");
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(10));
    let mut answers = Vec::new();
    for (name, interruption) in [("interrupted", true), ("uninterrupted", false)] {
        let engine = engine(interruption);
        let _ticker = interruption.then(|| Ticker::start(&engine));
        let module = Module::new(&engine, &wasm).expect("the guest compiles");
        let mut store = store(&engine, interruption, WasiCtx::builder().build());
        let instance = runtime
            .block_on(Instance::new_async(&mut store, &module, &[]))
            .expect("the guest instantiates");
        let run = instance
            .get_typed_func::<i32, i64>(&mut store, "run")
            .expect("the guest exports run");
        answers.push(
            runtime
                .block_on(run.call_async(&mut store, ROUNDS))
                .unwrap(),
        );
        group.bench_function(name, |b| {
            b.iter(|| {
                runtime
                    .block_on(run.call_async(&mut store, ROUNDS))
                    .expect("the guest runs")
            })
        });
    }
    group.finish();
    assert_eq!(answers[0], answers[1], "both engines compute the same hash");
}

criterion_group!(benches, grep, tight_loop);
criterion_main!(benches);
