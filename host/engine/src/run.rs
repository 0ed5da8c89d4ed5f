//! Running guest code: a fresh store per phase, admitted to the instance
//! pool and instantiated ([`instantiate`]) or just created ([`new_store`]),
//! armed with an epoch deadline and cancellation ([`arm`]), every guest
//! call raced against the wall clock and cancellation ([`guard`]), and
//! every failure classified from what the store saw ([`settle`]). Shared
//! by tools and hooks.

use super::budget::WriteBudget;
use super::net::NetHooks;
use super::offload;
use super::pipe::CappedPipe;
use super::repoll::{Repolled, repoll};
use super::state::{CallIo, CancelWatch, HostState, Limiter, Stop};
use super::{Engine, Slot, SlotKind};
use airlock_core::error::{CallError, ErrorClass};
use airlock_core::grants::CallGrants;
use airlock_core::sanitize::{self, Sink};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use wasmtime::component::ResourceTable;
use wasmtime::{Store, Trap, UpdateDeadline};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi_http::WasiHttpCtx;

/// How much of a guest's stderr a crash report quotes.
const STDERR_TAIL: usize = 2048;

/// A guest export (or instantiation) called on a store.
pub(crate) type GuestCall<'a, T> =
    std::pin::Pin<Box<dyn Future<Output = wasmtime::Result<T>> + Send + 'a>>;

/// What a store is made from.
pub(crate) struct StoreSpec<'a> {
    pub(crate) kind: SlotKind,
    pub(crate) name: Arc<str>,
    pub(crate) io: CallIo,
    pub(crate) grants: &'a CallGrants,
    pub(crate) cwd: Option<&'a str>,
}

/// A fresh store admitted to the pool, with the component instantiated in
/// it by `instantiate` from `pre` (under the grants' time limit). Waits for
/// a slot when the pool is full, including when it is short of memories,
/// tables or core instances rather than instance slots.
pub(crate) async fn instantiate<P, I>(
    engine: &Engine,
    spec: StoreSpec<'_>,
    pre: &P,
    instantiate: impl for<'a> Fn(&'a P, &'a mut Store<HostState>) -> GuestCall<'a, I>
    + Clone
    + Send
    + Sync
    + 'static,
) -> Result<(Store<HostState>, I), CallError>
where
    P: Clone + Send + Sync + 'static,
    I: Send + 'static,
{
    let timeout = spec.grants.timeout;
    loop {
        let slot = engine
            .admit(spec.kind, spec.io.tenant, &spec.io.cancel)
            .await?;
        let mut store = new_store(
            engine,
            slot,
            spec.name.clone(),
            spec.io.clone(),
            spec.grants,
            spec.cwd,
        )?;
        let armed = arm(&mut store, timeout, None);
        let (pre, instantiate) = (pre.clone(), instantiate.clone());
        let outcome = guard(&armed, None, store, move |s| {
            Box::pin(async move { instantiate(&pre, s).await })
        })
        .await;
        if let Guarded::Done(_, Err(e)) = &outcome
            && e.is::<wasmtime::PoolConcurrencyLimitError>()
        {
            drop(outcome);
            tokio::select! {
                () = spec.io.cancel.cancelled() => return Err(CallError::cancelled("the call was cancelled while it waited for an instance slot")),
                () = engine.slot_freed() => continue,
            }
        }
        return settle(outcome, timeout);
    }
}

/// A fresh store for one phase of a call: WASI built from `grants`
/// (preopens, env, no stdio, capped output), the network hooks, the
/// limiter and hostcall fuel. `name` labels the store's logs; `slot` is its
/// claim on the pool.
pub(crate) fn new_store(
    engine: &Engine,
    slot: Option<Slot>,
    name: Arc<str>,
    io: CallIo,
    grants: &CallGrants,
    cwd: Option<&str>,
) -> Result<Store<HostState>, CallError> {
    let limits = engine.limits();
    let stdout = CappedPipe::new(limits.stdout_bytes);
    let stderr = CappedPipe::new(limits.stderr_bytes);
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdout(stdout.clone())
        .stderr(stderr.clone())
        .max_random_size(limits.random_bytes)
        // Raw sockets reach nothing, granted hosts or not: no TCP, no UDP,
        // no name lookup (the network is `wasi:http`'s, under the call's
        // policy); the builder's own address check already refuses every
        // address, and replacing it would allocate on every call.
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    for (name, value) in &grants.env {
        wasi.env(name, value);
    }
    if let Some(cwd) = cwd {
        wasi.initial_cwd(cwd);
    }
    let mut wasi = wasi.build();
    *wasi.filesystem() = engine
        .preopens()
        .get(&grants.mounts)
        .map_err(|e| CallError::internal(e.to_string()))?;
    let mut table = ResourceTable::new();
    table.set_max_capacity(limits.resource_handles);
    let state = HostState {
        wasi,
        table,
        http: WasiHttpCtx::new(),
        net: NetHooks::new(
            grants.network.clone(),
            Duration::from_millis(limits.http_timeout_ms),
            name,
            grants.secrets.clone(),
        ),
        limiter: Limiter::new(grants.memory_bytes, limits),
        io,
        stopped: None,
        stdout,
        stderr,
        budget: WriteBudget::new(grants.write_bytes),
        mounts: grants.mounts.clone(),
        programs: grants.programs.clone(),
        _slot: slot,
        cancel_watch: None,
    };
    let mut store = Store::new(engine.wasmtime(), state);
    store.limiter(|s| &mut s.limiter);
    store.set_hostcall_fuel(limits.hostcall_bytes);
    Ok(store)
}

/// A store armed by [`arm`]: when, its deadline, and how many times its
/// epoch callback has asked the guest to yield.
pub(crate) struct Armed {
    at: Instant,
    deadline: Instant,
    yields: Arc<AtomicU64>,
}

/// Arms the store's epoch callback: the guest yields to the runtime every
/// tick, and is interrupted once `budget` has passed or, when `cancel` is
/// given, once it is cancelled.
///
/// A cancellation also advances the engine's epoch at once (from the
/// thread that cancels), so a guest spinning in wasm stops within
/// microseconds rather than at the next tick; other running guests just
/// yield once more.
pub(crate) fn arm(
    store: &mut Store<HostState>,
    budget: Duration,
    cancel: Option<CancellationToken>,
) -> Armed {
    let at = Instant::now();
    let deadline = at + budget;
    let yields = Arc::new(AtomicU64::new(0));
    let asked = yields.clone();
    let watch = cancel.as_ref().map(|c| CancelWatch::new(c, store.engine()));
    store.data_mut().cancel_watch = watch;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |mut cx| {
        if cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
            cx.data_mut().stopped = Some(Stop::Cancelled);
            return Ok(UpdateDeadline::Interrupt);
        }
        if Instant::now() >= deadline {
            cx.data_mut().stopped = Some(Stop::Deadline);
            return Ok(UpdateDeadline::Interrupt);
        }
        asked.fetch_add(1, Ordering::SeqCst);
        Ok(UpdateDeadline::Yield(1))
    });
    Armed {
        at,
        deadline,
        yields,
    }
}

/// How a guarded guest call ended; the store comes back with its result.
pub(crate) enum Guarded<T> {
    Done(Store<HostState>, wasmtime::Result<T>),
    TimedOut,
    Cancelled,
}

/// Runs `call` on `store` until it finishes, the deadline passes (a guest
/// blocked in a host call does not see epochs, so the wall clock backs
/// them up), or `cancel` fires. Dropping the call unwinds the guest; its
/// store is not given back then. A call that runs long goes on in the
/// long-running guests' runtime ([`offload`]); `call` waking itself as it
/// ends does not make its task yield ([`repoll`]).
pub(crate) async fn guard<T: Send + 'static>(
    armed: &Armed,
    cancel: Option<&CancellationToken>,
    store: Store<HostState>,
    call: impl for<'a> FnOnce(&'a mut Store<HostState>) -> GuestCall<'a, T> + Send + 'static,
) -> Guarded<T> {
    // A little grace, so a guest spinning in wasm is stopped by its epoch
    // deadline, which says more about why than a dropped future does.
    let wall = tokio::time::Instant::from_std(armed.deadline + Duration::from_millis(50));
    let mut fut = Box::pin(async move {
        let mut store = store;
        let result = call(&mut store).await;
        (store, result)
    });
    let long = || armed.at.elapsed() >= offload::LONG;
    let run = async {
        match repoll(fut.as_mut(), &armed.yields, long).await {
            Repolled::Done(out) => Some(out),
            Repolled::Left => offload::finish(fut, armed.yields.clone()).await,
        }
    };
    let cancelled = async {
        match cancel {
            Some(c) => c.cancelled().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        () = cancelled => Guarded::Cancelled,
        r = tokio::time::timeout_at(wall, run) => match r {
            Ok(Some((store, result))) => Guarded::Done(store, result),
            Ok(None) => Guarded::Cancelled,
            Err(_) => Guarded::TimedOut,
        },
    }
}

/// Turns a guarded call's end into a value (with its store) or a
/// classified [`CallError`],
/// from what the store saw: why the epoch callback stopped it, whether an
/// output pipe overflowed, which limit the limiter refused, the trap code.
pub(crate) fn settle<T>(
    outcome: Guarded<T>,
    budget: Duration,
) -> Result<(Store<HostState>, T), CallError> {
    let (store, err) = match outcome {
        Guarded::Done(store, Ok(value)) => {
            // A limit ends the call even when the guest ignored the error
            // its write got and returned normally.
            let state = store.data();
            return match output_limit_hit(state) {
                Some(e) => Err(e),
                None if state.budget.exhausted() => Err(write_limit("the call was stopped")),
                None => Ok((store, value)),
            };
        }
        Guarded::TimedOut => return Err(timeout(budget)),
        Guarded::Cancelled => return Err(CallError::cancelled("the call was cancelled")),
        Guarded::Done(store, Err(err)) => (store, err),
    };
    let state = store.data();
    match state.stopped {
        Some(Stop::Deadline) => return Err(timeout(budget)),
        Some(Stop::Cancelled) => return Err(CallError::cancelled("the call was cancelled")),
        None => {}
    }
    if let Some(e) = output_limit_hit(state) {
        return Err(e);
    }
    if state.limiter.memory_denied {
        return Err(CallError::new(
            ErrorClass::MemoryLimit,
            "the tool needed more memory than its limit (limits.memory_mib); the call was stopped",
        ));
    }
    let text = format!("{err:#}");
    if state.limiter.table_denied || text.contains("resource limit exceeded") {
        return Err(CallError::new(
            ErrorClass::MemoryLimit,
            "the tool created more tables, instances or table elements than allowed; the call was stopped",
        ));
    }
    if state.budget.exhausted() {
        return Err(write_limit("the call was stopped"));
    }
    if let Some(what) = resource_limit_hit(&err, &text) {
        return Err(CallError::new(
            ErrorClass::ResourceLimit,
            format!("the tool {what}; the call was stopped"),
        ));
    }
    let stderr = state.net.clean(
        state.stderr.tail(STDERR_TAIL).trim(),
        Sink::Model,
        STDERR_TAIL,
    );
    let with_stderr = |m: String| {
        if stderr.is_empty() {
            m
        } else {
            format!("{m}; its stderr ends with:\n{stderr}")
        }
    };
    Err(match err.downcast_ref::<Trap>() {
        Some(Trap::StackOverflow) => CallError::new(
            ErrorClass::StackOverflow,
            "the tool overflowed its stack (limits.wasm_stack_kib); the call was stopped",
        ),
        Some(trap) => CallError::new(
            ErrorClass::Trap,
            with_stderr(format!("the tool crashed: {trap}")),
        ),
        None => CallError::new(
            ErrorClass::Trap,
            with_stderr(format!(
                "the tool failed: {}",
                sanitize::clean_capped(&format!("{err:#}"), Sink::Model, 1024)
            )),
        ),
    })
}

/// The error of a call whose stdout or stderr overflowed, if one did.
fn output_limit_hit(state: &HostState) -> Option<CallError> {
    let which = [
        (state.stdout.overflowed(), "stdout"),
        (state.stderr.overflowed(), "stderr"),
    ]
    .into_iter()
    .find_map(|(hit, which)| hit.then_some(which))?;
    Some(CallError::new(
        ErrorClass::OutputLimit,
        format!(
            "the tool wrote more to {which} than the limit allows (limits.{which}_bytes); the call was stopped"
        ),
    ))
}

/// The error of a call that spent its write budget.
pub(crate) fn write_limit(what_happened: &str) -> CallError {
    CallError::new(
        ErrorClass::WriteLimit,
        format!("the tool wrote more than its write budget (limits.write_mib); {what_happened}"),
    )
}

/// Which WASI resource limit a failure hit, if any: the resource table
/// (open handles), hostcall fuel (data passed to the host in one call), or
/// the random-bytes cap.
fn resource_limit_hit(err: &wasmtime::Error, text: &str) -> Option<&'static str> {
    if err.chain().any(|e| {
        matches!(
            e.downcast_ref::<wasmtime::component::ResourceTableError>(),
            Some(wasmtime::component::ResourceTableError::Full)
        )
    }) || text.contains("resource table has no free keys")
    {
        Some("held more open handles than allowed (limits.resource_handles)")
    } else if text.contains("fuel allocated for hostcalls has been exhausted") {
        Some("passed more data to the host in one call than allowed (limits.hostcall_bytes)")
    } else if text.contains("requested len") && text.contains("exceeds limit") {
        Some("asked for more random bytes at once than allowed (limits.random_bytes)")
    } else {
        None
    }
}

fn timeout(budget: Duration) -> CallError {
    CallError::new(
        ErrorClass::Timeout,
        format!(
            "the call took longer than {} ms and was stopped",
            budget.as_millis()
        ),
    )
}
