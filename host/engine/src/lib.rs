//! The engine: wasmtime configured for untrusted tools, the only crate
//! that names wasmtime. It owns the epoch ticker, the one linker every tool
//! shares, the pool of instance slots and the admission queue in front of
//! it, the artifact cache, the bundled tools' snapshot, the loader, and the
//! [`WasmTool`] and [`WasmHook`] adapters that put components behind the
//! `Tool` trait and the hook interface. It knows nothing about the
//! registry, permissions, the pipeline or MCP. Its invariants (a store
//! only while it holds a slot, one fresh store per phase, every store
//! limited, no grants before `call`) are in ARCHITECTURE.md.

mod bindings;
mod budget;
mod cache;
mod fair;
mod linker;
mod loader;
mod net;
mod offload;
mod open;
mod pipe;
mod preopens;
mod programs;
mod repoll;
mod run;
mod snapshot;
mod state;
mod wasm_hook;
mod wasm_tool;

/// A component's bytes, shared without copying (`Vec<u8>` and `&'static [u8]` convert into it).
pub use bytes::Bytes;
pub use loader::{
    Compiling, ComponentBytes, DirBounds, DirSources, LoadBounds, LoadedTool, Loading, Pending,
    Settled, Unlisted, component_files, component_sources, ungranted_network,
};
pub use snapshot::Snapshot;
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub use snapshot::testing;
pub use wasm_hook::{HookAnswer, WasmHook};
pub use wasm_tool::WasmTool;

use airlock_core::config::{Config, Limits};
use airlock_core::descriptor::Descriptor;
use airlock_core::error::{CallError, LoadError};
use airlock_core::json::JsonBounds;
use cache::ArtifactCache;
use fair::{FairPermit, FairShare, Tenant};
use linker::{Needs, linker};
use state::HostState;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use wasmtime::component::{Component, Linker};
use wasmtime::{InstanceAllocationStrategy, PoolingAllocationConfig};

/// The wasmtime engine, ticker and linker, shared by every tool.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    engine: wasmtime::Engine,
    linker: Linker<HostState>,
    limits: Limits,
    cache: Option<ArtifactCache>,
    admission: Option<Admission>,
    preopens: preopens::Preopens,
}

/// Where compiled components are kept: the cache's own directory, and a
/// read-only one filled ahead of time.
#[derive(Default)]
struct Caches {
    own: Option<std::path::PathBuf>,
    precompiled: Option<std::path::PathBuf>,
}

/// The queue in front of the pool: a permit per live store, handed out
/// fairly among agent contexts.
struct Admission {
    tools: Arc<FairShare>,
    hooks: Arc<FairShare>,
    /// Signalled whenever a store gives its slot back, for a store that
    /// found the pool short of something other than instance slots.
    freed: Arc<Notify>,
}

/// What a store is for, which decides the share of the pool it draws on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotKind {
    /// A tool's preflight or call store.
    Tool,
    /// A hook's store.
    Hook,
}

/// A store's claim on the pool, given back when the store is dropped.
pub(crate) struct Slot {
    _permit: FairPermit,
    freed: Arc<Notify>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.freed.notify_waiters();
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Configures wasmtime for `limits`, with no artifact cache, and starts
    /// the epoch ticker (a thread that stops when the last clone of the
    /// engine is dropped).
    ///
    /// ```
    /// let engine = airlock_engine::Engine::new(&airlock_core::config::Limits::default()).unwrap();
    /// assert_eq!(engine.limits().pool_slots, 1000);
    /// ```
    pub fn new(limits: &Limits) -> anyhow::Result<Engine> {
        Engine::build(limits, Caches::default())
    }

    /// The engine a configuration asks for: its limits, and its artifact
    /// cache ([`Config::effective_cache_dir`], with
    /// [`Config::effective_precompiled_dir`] behind it) when that can be
    /// used safely.
    pub fn from_config(config: &Config) -> anyhow::Result<Engine> {
        let caches = Caches {
            own: config.effective_cache_dir(),
            precompiled: config.effective_precompiled_dir(),
        };
        Engine::build(&config.limits, caches)
    }

    fn build(limits: &Limits, caches: Caches) -> anyhow::Result<Engine> {
        let stack = limits.wasm_stack_kib << 10;
        let mut config = wasmtime::Config::new();
        config
            .epoch_interruption(true)
            .max_wasm_stack(stack)
            .async_stack_size(stack + (1 << 20))
            .wasm_memory64(false)
            // The async ABI's builtins (`task.cancel`, `waitable-set.*`,
            // `subtask.*`): componentize-js's QuickJS backend imports them
            // by default. Calls stay what they were (no `run_concurrent`),
            // under the same epoch deadline and limits.
            .wasm_component_model_async(true)
            .cranelift_opt_level(wasmtime::OptLevel::Speed);
        let slots = limits.pool_slots;
        let engine = if slots == 0 {
            wasmtime::Engine::new(&config)?
        } else {
            let total = slots.saturating_add(hook_reserve(slots));
            config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool(limits, total)));
            match wasmtime::Engine::new(&config) {
                Ok(engine) => engine,
                Err(e) => {
                    // Typically a cap on address space (`ulimit -v`): the
                    // pool reserves, but does not use, a few GiB per slot.
                    tracing::warn!(
                        "the instance pool ({total} slots) cannot be reserved: {e:#}; allocating on demand"
                    );
                    config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
                    return Engine::assemble(wasmtime::Engine::new(&config)?, limits, caches, 0);
                }
            }
        };
        Engine::assemble(engine, limits, caches, slots)
    }

    fn assemble(
        engine: wasmtime::Engine,
        limits: &Limits,
        caches: Caches,
        slots: u32,
    ) -> anyhow::Result<Engine> {
        spawn_ticker(&engine, Duration::from_millis(limits.epoch_tick_ms.max(1)))?;
        let linker = linker(&engine)?;
        let cache = ArtifactCache::open(
            caches.own.as_deref(),
            caches.precompiled.as_deref(),
            &engine,
        );
        let admission = (slots > 0).then(|| Admission {
            tools: FairShare::new(slots as usize),
            hooks: FairShare::new(hook_reserve(slots) as usize),
            freed: Arc::new(Notify::new()),
        });
        Ok(Engine {
            inner: Arc::new(Inner {
                engine,
                linker,
                limits: limits.clone(),
                cache,
                admission,
                preopens: preopens::Preopens::default(),
            }),
        })
    }

    /// Each call's preopened directories, by set of mounts.
    pub(crate) fn preopens(&self) -> &preopens::Preopens {
        &self.inner.preopens
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

    /// Whether stores come from a preallocated pool (and queue for it).
    pub fn pooled(&self) -> bool {
        self.inner.admission.is_some()
    }

    /// Where compiled components are cached, if anywhere.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.inner.cache.as_ref()?.dir()
    }

    pub(crate) fn cache(&self) -> Option<&ArtifactCache> {
        self.inner.cache.as_ref()
    }

    /// Waits for a pool slot for a store of `kind`, in `tenant`'s turn
    /// (an agent context: each gets a fair share of the pool); `None` when
    /// stores are allocated on demand. Cancelling `cancel` gives up the wait.
    pub(crate) async fn admit(
        &self,
        kind: SlotKind,
        tenant: Tenant,
        cancel: &CancellationToken,
    ) -> Result<Option<Slot>, CallError> {
        let Some(a) = &self.inner.admission else {
            return Ok(None);
        };
        let share = match kind {
            SlotKind::Tool => &a.tools,
            SlotKind::Hook => &a.hooks,
        };
        let permit = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(CallError::cancelled("the call was cancelled while it waited for an instance slot")),
            p = share.acquire(tenant) => p,
        };
        Ok(Some(Slot {
            _permit: permit,
            freed: a.freed.clone(),
        }))
    }

    /// Waits until some store gives its slot back (or a short while, as a
    /// backstop against a missed signal).
    pub(crate) async fn slot_freed(&self) {
        if let Some(a) = &self.inner.admission {
            let _ = tokio::time::timeout(Duration::from_millis(10), a.freed.notified()).await;
        }
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
        if bytes.len() as u64 > self.inner.limits.component_bytes {
            return Err(LoadError::TooLarge {
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
            .map_err(|e| LoadError::Host(format!("cannot start the compiler thread: {e}")))?;
        match rx.recv_timeout(Duration::from_millis(timeout_ms)) {
            Ok(compiled) => compiled.map_err(|e| LoadError::Compile(format!("{e:#}"))),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                Err(LoadError::CompileTimeout(timeout_ms))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                Err(LoadError::Host("the compiler thread failed".into()))
            }
        }
    }
}

/// A component ready to pre-instantiate, and what is known about it.
pub(crate) struct Loaded {
    pub(crate) component: Component,
    pub(crate) imports: Vec<(String, Needs)>,
    /// The component's key in the artifact cache, if there is a cache.
    pub(crate) key: Option<String>,
    /// Whether it came out of the cache (and so is stored there already).
    pub(crate) cached: bool,
    /// This load's claim on compiling the entry: others that missed it
    /// wait until it is stored ([`Engine::cache_component`]) or the load
    /// is dropped.
    pub(crate) claim: Option<cache::Claim>,
}

impl Engine {
    /// The compiled component of `bytes`: out of the artifact cache when
    /// it is there, else compiled on a blocking thread (and not yet
    /// cached: the caller stores it once it has checked it). A load that
    /// finds another compiling the same component (in this host, or in
    /// another sharing the cache) waits for that one's artifact rather than
    /// compiling it a second time. Either way its
    /// imports are checked against the linker's allowlist. `key` is the
    /// bytes' cache key when the caller already has it; `what` names the
    /// component in the progress a compile logs ([`COMPILE_LOG`]).
    pub(crate) async fn load_component(
        &self,
        bytes: Bytes,
        key: Option<String>,
        what: String,
    ) -> Result<Loaded, LoadError> {
        let engine = self.clone();
        let (component, key, cached, claim) = tokio::task::spawn_blocking(move || {
            let key = key.or_else(|| engine.cache().map(|c| c.key(&bytes)));
            let entry = key.as_deref().zip(engine.cache());
            let hit = || entry.and_then(|(key, cache)| cache.component(key, engine.wasmtime()));
            if let Some(component) = hit() {
                return Ok((component, key, true, None));
            }
            let what = what.as_str();
            let mut waited = None;
            let wait = Duration::from_millis(engine.inner.limits.compile_timeout_ms);
            let claim = entry.and_then(|(key, cache)| {
                cache.claim(key, wait, || {
                    waited = Some(std::time::Instant::now());
                    tracing::info!(target: COMPILE_LOG, "{}", CompileEvent::Waiting { what });
                })
            });
            if claim.is_some()
                && let Some(component) = hit()
            {
                if let Some(since) = waited {
                    let secs = format!("{:.1}", since.elapsed().as_secs_f64());
                    let secs = secs.as_str();
                    tracing::info!(target: COMPILE_LOG, "{}", CompileEvent::Waited { what, secs });
                }
                return Ok((component, key, true, None));
            }
            let started = std::time::Instant::now();
            let kib = bytes.len() >> 10;
            tracing::info!(target: COMPILE_LOG, "{}", CompileEvent::Started { what, kib });
            let compiled = engine.compile(&bytes)?;
            let secs = format!("{:.1}", started.elapsed().as_secs_f64());
            let secs = secs.as_str();
            tracing::info!(target: COMPILE_LOG, "{}", CompileEvent::Finished { what, secs });
            Ok((compiled, key, false, claim))
        })
        .await
        .map_err(|e| LoadError::Host(format!("the compiler thread failed: {e}")))??;
        let imports = linker::check_imports(&component, self.wasmtime())?;
        Ok(Loaded {
            component,
            imports,
            key,
            cached,
            claim,
        })
    }

    /// Stores a freshly compiled component in the artifact cache, with the
    /// tool's descriptor (`None` for a hook), on a blocking thread.
    /// Others waiting on this load's claim go on once it is stored.
    pub(crate) async fn cache_component(
        &self,
        loaded: &mut Loaded,
        descriptor: Option<&Descriptor>,
    ) {
        let (Some(key), false) = (&loaded.key, loaded.cached) else {
            return;
        };
        let claim = loaded.claim.take();
        let engine = self.clone();
        let (key, component, imports) = (
            key.clone(),
            loaded.component.clone(),
            loaded.imports.clone(),
        );
        let descriptor = descriptor.cloned();
        let stored = tokio::task::spawn_blocking(move || {
            if let Some(cache) = engine.cache() {
                cache.store(&key, &component, descriptor.as_ref(), &imports);
            }
            drop(claim);
        })
        .await;
        if let Err(e) = stored {
            tracing::warn!("the artifact cache writer failed: {e}");
        }
    }
}

/// The log target of compile progress: a first start compiles every tool
/// for a minute or more, and a front end shows these lines (the command
/// line does by default) so that the wait is not silent.
pub const COMPILE_LOG: &str = "airlock::compile";

/// What a [`COMPILE_LOG`] event says: its message is this, displayed, so a
/// front end can show it otherwise than as a line (the command line draws a
/// spinner per compile on a terminal).
///
/// ```
/// use airlock_engine::CompileEvent;
/// let started = CompileEvent::Started { what: "bundled (bash)", kib: 8633 };
/// assert_eq!(CompileEvent::parse(&started.to_string()), Some(started));
/// // A path with " in " in it is still one component.
/// let finished = CompileEvent::Finished { what: "/srv/in in/t.wasm", secs: "0.3" };
/// assert_eq!(CompileEvent::parse(&finished.to_string()), Some(finished));
/// assert_eq!(CompileEvent::parse("compiled nothing"), None);
/// // Another Airlock sharing the cache was compiling it: this one waited.
/// let waited = CompileEvent::Waited { what: "bundled (bash)", secs: "4.0" };
/// assert_eq!(CompileEvent::parse(&waited.to_string()), Some(waited));
/// ```
#[derive(Debug, PartialEq, Eq)]
pub enum CompileEvent<'a> {
    /// `what`, of `kib` KiB, is being compiled.
    Started {
        /// The component, as its origin names it.
        what: &'a str,
        /// Its size.
        kib: usize,
    },
    /// `what` was compiled in `secs` seconds (as written, one decimal).
    Finished {
        /// The component, as its origin names it.
        what: &'a str,
        /// How long it took.
        secs: &'a str,
    },
    /// Another load sharing the artifact cache (an Airlock started at the
    /// same time, say) is compiling `what`: this one waits for it.
    Waiting {
        /// The component, as its origin names it.
        what: &'a str,
    },
    /// `what` was compiled by the load waited for, in `secs` seconds of
    /// waiting.
    Waited {
        /// The component, as its origin names it.
        what: &'a str,
        /// How long this load waited.
        secs: &'a str,
    },
}

/// What a [`CompileEvent::Waiting`] message starts with.
const WAITING: &str = "waiting for another Airlock compiling ";
/// What a [`CompileEvent::Waited`] message has between the component and
/// the time.
const WAITED: &str = ", compiled by another Airlock (waited ";

impl CompileEvent<'_> {
    /// The event a [`COMPILE_LOG`] message says, if it is one.
    pub fn parse(message: &str) -> Option<CompileEvent<'_>> {
        if let Some(rest) = message.strip_prefix("compiling ") {
            let (what, rest) = rest.rsplit_once(" for this machine (")?;
            let kib = rest.split_once(" KiB")?.0.parse().ok()?;
            return Some(CompileEvent::Started { what, kib });
        }
        if let Some(what) = message.strip_prefix(WAITING) {
            return Some(CompileEvent::Waiting { what });
        }
        if let Some((what, secs)) = message.rsplit_once(WAITED) {
            let secs = secs.strip_suffix(" s)")?;
            return Some(CompileEvent::Waited { what, secs });
        }
        let (what, secs) = message.strip_prefix("compiled ")?.rsplit_once(" in ")?;
        let secs = secs.strip_suffix(" s")?;
        Some(CompileEvent::Finished { what, secs })
    }
}

impl std::fmt::Display for CompileEvent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompileEvent::Started { what, kib } => write!(
                f,
                "compiling {what} for this machine ({kib} KiB; once: then it is cached)"
            ),
            CompileEvent::Finished { what, secs } => write!(f, "compiled {what} in {secs} s"),
            CompileEvent::Waiting { what } => write!(f, "{WAITING}{what}"),
            CompileEvent::Waited { what, secs } => write!(f, "{what}{WAITED}{secs} s)"),
        }
    }
}

/// Bytes of each pooled linear memory kept resident between uses (only
/// the pages a guest touched are).
const KEEP_RESIDENT: usize = 1 << 20;
/// Decommits queued before they are flushed together.
const DECOMMIT_BATCH: usize = 16;

/// Stores kept for hooks, on top of the `slots` for tools: an eighth, at
/// least one and at most 64.
fn hook_reserve(slots: u32) -> u32 {
    (slots / 8).clamp(1, 64)
}

/// The pool for `slots` live stores. Instance slots are what admission
/// counts; the other totals fit typical components (a Rust component has
/// three core instances, one memory and two tables), and a store that finds
/// one of them short waits for a slot to be freed. Per-component maxima
/// match the limiter's, so a component within the limits fits; memories are
/// capped by the limiter, not here, since a tool's grant may raise them.
fn pool(limits: &Limits, slots: u32) -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(slots)
        .total_core_instances(slots.saturating_mul(4).max(limits.instances))
        .total_memories(slots.max(limits.memories))
        .total_tables(slots.saturating_mul(2).max(limits.tables))
        .total_stacks(slots)
        .max_core_instances_per_component(limits.instances)
        .max_memories_per_component(limits.memories)
        .max_tables_per_component(limits.tables)
        .table_elements(limits.table_elements as usize)
        // A freed slot is reset by copying back only the pages the guest
        // touched (found with PAGEMAP_SCAN where the kernel has it) rather
        // than unmapped with madvise: no TLB shootdown across cores, and
        // no page faults when the next call reuses the slot.
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT / 16)
        .pagemap_scan(wasmtime::Enabled::Auto)
        // What does get decommitted is done in batches.
        .decommit_batch_size(DECOMMIT_BATCH);
    pool
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
