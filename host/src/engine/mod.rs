//! The engine: wasmtime configured for untrusted tools, the epoch ticker
//! that bounds their time, the one linker every tool shares, and the
//! [`WasmTool`] adapter that puts a component behind the [`crate::Tool`]
//! trait.
//!
//! Invariants this module keeps:
//! - every store is fresh (one per phase of one tool use) and is dropped
//!   after a trap, a timeout or a cancellation, never re-entered;
//! - every store has a memory/table/instance limiter, an epoch deadline,
//!   hostcall fuel and capped stdout/stderr, and nothing inherited from the
//!   host process (stdio, env, args, network);
//! - the preflight phase (`describe`, `classify`, `validate`,
//!   `check-permissions`) runs with no filesystem, network or environment;
//!   only `call` gets the call's grants.

mod bindings;
mod budget;
mod linker;
mod net;
mod pipe;
mod run;
mod state;
mod wasm_hook;
mod wasm_tool;

pub use wasm_hook::{HookAnswer, WasmHook};
pub use wasm_tool::WasmTool;

use crate::config::Limits;
use crate::error::LoadError;
use crate::json::JsonBounds;
use linker::linker;
use state::HostState;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::{Component, Linker};

/// The wasmtime engine, ticker and linker, shared by every tool.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    engine: wasmtime::Engine,
    linker: Linker<HostState>,
    limits: Limits,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Configures wasmtime for `limits` and starts the epoch ticker (a
    /// thread that stops when the last clone of the engine is dropped).
    pub fn new(limits: &Limits) -> anyhow::Result<Engine> {
        let stack = limits.wasm_stack_kib << 10;
        let mut config = wasmtime::Config::new();
        config
            .epoch_interruption(true)
            .max_wasm_stack(stack)
            .async_stack_size(stack + (1 << 20))
            .wasm_memory64(false)
            .cranelift_opt_level(wasmtime::OptLevel::Speed);
        let engine = wasmtime::Engine::new(&config)?;
        spawn_ticker(&engine, Duration::from_millis(limits.epoch_tick_ms.max(1)))?;
        let linker = linker(&engine)?;
        Ok(Engine {
            inner: Arc::new(Inner {
                engine,
                linker,
                limits: limits.clone(),
            }),
        })
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The underlying wasmtime engine.
    pub fn wasmtime(&self) -> &wasmtime::Engine {
        &self.inner.engine
    }

    pub(crate) fn linker(&self) -> &Linker<HostState> {
        &self.inner.linker
    }

    /// Bounds on JSON going into a guest.
    pub(crate) fn input_bounds(&self) -> JsonBounds {
        JsonBounds {
            max_bytes: self.inner.limits.input_bytes,
            max_depth: self.inner.limits.json_depth,
        }
    }

    /// Bounds on JSON coming out of a guest.
    pub(crate) fn output_bounds(&self) -> JsonBounds {
        JsonBounds {
            max_bytes: self.inner.limits.output_bytes,
            max_depth: self.inner.limits.json_depth,
        }
    }

    /// Compiles component bytes after the checks that need no compiling:
    /// the size cap, and that the bytes are not a precompiled artifact
    /// (Airlock only runs code it compiled itself). CPU-heavy: call it
    /// from a blocking thread.
    pub fn compile(&self, bytes: &[u8]) -> Result<Component, LoadError> {
        let size = bytes.len() as u64;
        if size > self.inner.limits.component_bytes {
            return Err(LoadError::TooLarge {
                size,
                limit: self.inner.limits.component_bytes,
            });
        }
        if wasmtime::Engine::detect_precompiled(bytes).is_some() {
            return Err(LoadError::Precompiled);
        }
        // Compiling is untrusted work: it runs on a thread of its own, and
        // a component that takes longer than the limit is refused (the
        // thread is left to finish; the size cap bounds how long it can).
        let timeout_ms = self.inner.limits.compile_timeout_ms;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let engine = self.inner.engine.clone();
        let bytes = bytes.to_vec();
        std::thread::Builder::new()
            .name("airlock-compile".into())
            .spawn(move || {
                // Binary only: component text is never accepted from outside.
                let _ = tx.send(Component::from_binary(&engine, &bytes));
            })
            .map_err(|e| LoadError::Compile(format!("cannot start the compiler thread: {e}")))?;
        match rx.recv_timeout(Duration::from_millis(timeout_ms)) {
            Ok(compiled) => compiled.map_err(|e| LoadError::Compile(format!("{e:#}"))),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                Err(LoadError::CompileTimeout(timeout_ms))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                Err(LoadError::Compile("the compiler thread failed".into()))
            }
        }
    }
}

impl Engine {
    /// Compiles a component on a blocking thread and checks its imports
    /// against the linker's allowlist.
    pub(crate) async fn load_component(
        &self,
        bytes: std::sync::Arc<[u8]>,
    ) -> Result<(Component, Vec<(String, linker::Needs)>), LoadError> {
        let compiler = self.clone();
        let component = tokio::task::spawn_blocking(move || compiler.compile(&bytes))
            .await
            .map_err(|e| LoadError::Compile(format!("the compiler thread failed: {e}")))??;
        let imports = linker::check_imports(&component, self.wasmtime())?;
        Ok((component, imports))
    }
}

/// Advances the engine's epoch every `tick`, from a thread that holds only
/// a weak reference, so it ends when the engine does.
fn spawn_ticker(engine: &wasmtime::Engine, tick: Duration) -> std::io::Result<()> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("airlock-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(tick);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        })
        .map(drop)
}
