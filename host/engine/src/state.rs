//! [`HostState`]: the data of one store (one phase of one tool use): its
//! WASI context built from the call's grants, its resource table, network
//! hooks, resource limiter, captured stdout and stderr, and the per-call
//! services behind the `airlock:tool/host` imports.
//!
//! Every host import here is cheap and bounded: progress is dropped when
//! the receiver lags, logs stop after a budget (each line goes to the
//! host's log and, as a [`LogEvent`], to the call's sink), text is
//! sanitised and capped.

use super::Slot;
use super::bindings::airlock::tool::{host, types};
use super::budget::{BudgetedFs, WriteBudget};
use super::net::NetHooks;
use super::pipe::CappedPipe;
use airlock_core::config::Limits;
use airlock_core::grants::{CallMount, normalize_guest, stamp_in};
use airlock_core::programs::ProgramGrants;
use airlock_core::sanitize::Sink;
use airlock_core::tool::{LogEvent, LogLevel, ProgressEvent, ProgressSink, ReadFiles};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// How many log lines one call may write before the rest are dropped.
const LOG_BUDGET: u32 = 1000;

/// Why the epoch callback stopped a guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The call's deadline passed.
    Deadline,
    /// The call was cancelled.
    Cancelled,
}

/// The per-call services behind the host imports.
#[derive(Clone)]
pub(crate) struct CallIo {
    pub(crate) tool: Arc<str>,
    pub(crate) tool_use_id: String,
    pub(crate) progress: ProgressSink,
    pub(crate) cancel: CancellationToken,
    pub(crate) read_files: Option<ReadFiles>,
    /// Whose turn the call waits in for a pool slot (its agent context).
    pub(crate) tenant: usize,
    logs_left: u32,
}

impl CallIo {
    pub(crate) fn new(
        tool: Arc<str>,
        tool_use_id: String,
        progress: ProgressSink,
        cancel: CancellationToken,
        read_files: Option<ReadFiles>,
        tenant: usize,
    ) -> Self {
        CallIo {
            tenant,
            tool,
            tool_use_id,
            progress,
            cancel,
            read_files,
            logs_left: LOG_BUDGET,
        }
    }
}

/// The data of one store.
pub(crate) struct HostState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) http: WasiHttpCtx,
    pub(crate) net: NetHooks,
    pub(crate) limiter: Limiter,
    pub(crate) io: CallIo,
    pub(crate) stopped: Option<Stop>,
    pub(crate) stdout: CappedPipe,
    pub(crate) stderr: CappedPipe,
    pub(crate) budget: Arc<WriteBudget>,
    /// The call's directories, for the host's own look at a file.
    pub(crate) mounts: Vec<CallMount>,
    /// The native programs the call may run (`bash` only) and their helper.
    pub(crate) programs: Arc<ProgramGrants>,
    /// The store's claim on the instance pool, given back with the store.
    pub(crate) _slot: Option<Slot>,
    /// Interrupts the guest the moment its call is cancelled; unregistered
    /// with the store.
    pub(crate) cancel_watch: Option<CancelWatch>,
}

/// Advances the engine's epoch the moment a token is cancelled, on the
/// cancelling thread: the token's waiter is registered with a waker that
/// bumps the epoch, rather than with a task that would have to be woken
/// (and a worker with it) for every call.
pub(crate) struct CancelWatch {
    _waiter: std::pin::Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
}

impl CancelWatch {
    /// Watches `cancel` for a store of `engine`.
    pub(crate) fn new(
        cancel: &tokio_util::sync::CancellationToken,
        engine: &wasmtime::Engine,
    ) -> Self {
        struct BumpEpoch(wasmtime::Engine);
        impl std::task::Wake for BumpEpoch {
            fn wake(self: Arc<Self>) {
                self.0.increment_epoch();
            }
        }
        let waker = std::task::Waker::from(Arc::new(BumpEpoch(engine.clone())));
        let mut waiter = Box::pin(cancel.clone().cancelled_owned());
        if waiter
            .as_mut()
            .poll(&mut std::task::Context::from_waker(&waker))
            .is_ready()
        {
            engine.increment_epoch();
        }
        CancelWatch { _waiter: waiter }
    }
}

impl HostState {
    /// The filesystem, charging this call's write budget.
    pub(crate) fn budgeted_fs(&mut self) -> BudgetedFs<'_> {
        BudgetedFs {
            inner: wasmtime_wasi::filesystem::WasiFilesystemCtxView {
                ctx: self.wasi.filesystem(),
                table: &mut self.table,
            },
            budget: &self.budget,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.net,
        }
    }
}

impl wasmtime_wasi_io::IoView for HostState {
    fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }
}

impl types::Host for HostState {}

impl host::Host for HostState {
    fn progress(&mut self, message: String, fraction: Option<f32>) -> wasmtime::Result<()> {
        let fraction = fraction
            .filter(|f| f.is_finite())
            .map(|f| f.clamp(0.0, 1.0));
        self.io.progress.send(ProgressEvent {
            tool_use_id: self.io.tool_use_id.clone(),
            message: self.net.clean(&message, Sink::Line, 512),
            fraction,
        });
        Ok(())
    }

    fn log(&mut self, level: host::LogLevel, message: String) -> wasmtime::Result<()> {
        if self.io.logs_left == 0 {
            return Ok(());
        }
        self.io.logs_left -= 1;
        let tool = &*self.io.tool;
        if self.io.logs_left == 0 {
            tracing::warn!(
                tool,
                "the tool wrote {LOG_BUDGET} log lines; dropping the rest of this call's"
            );
            return Ok(());
        }
        let message = self.net.clean(&message, Sink::Log, 4096);
        let level = match level {
            host::LogLevel::Trace => {
                tracing::trace!(tool, "{message}");
                LogLevel::Trace
            }
            host::LogLevel::Debug => {
                tracing::debug!(tool, "{message}");
                LogLevel::Debug
            }
            host::LogLevel::Info => {
                tracing::info!(tool, "{message}");
                LogLevel::Info
            }
            host::LogLevel::Warn => {
                tracing::warn!(tool, "{message}");
                LogLevel::Warn
            }
            host::LogLevel::Error => {
                tracing::error!(tool, "{message}");
                LogLevel::Error
            }
        };
        self.io.progress.log(LogEvent {
            tool_use_id: self.io.tool_use_id.clone(),
            tool: tool.to_owned(),
            level,
            message,
        });
        Ok(())
    }

    fn cancelled(&mut self) -> wasmtime::Result<bool> {
        Ok(self.io.cancel.is_cancelled())
    }

    fn file_read_state(&mut self, path: String) -> wasmtime::Result<Option<types::FileStamp>> {
        let (Some(files), Some(path)) = (&self.io.read_files, normalize_guest(&path)) else {
            return Ok(None);
        };
        let files = files.lock().unwrap_or_else(|e| e.into_inner());
        Ok(files.peek(&path).map(|s| types::FileStamp {
            modified_ns: s.modified_ns,
            size: s.size,
        }))
    }

    fn file_unchanged_since_read(&mut self, path: String) -> wasmtime::Result<Option<bool>> {
        let (Some(files), Some(path)) = (&self.io.read_files, normalize_guest(&path)) else {
            return Ok(None);
        };
        let Some(seen) = files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .peek(&path)
            .copied()
        else {
            return Ok(None);
        };
        Ok(Some(stamp_in(&self.mounts, &path) == Some(seen)))
    }
}

/// Limits memory, tables and instances of one store, and remembers which
/// limit a guest hit so the failure can be reported by its class.
pub(crate) struct Limiter {
    memory_max: usize,
    memory_used: usize,
    table_elements: usize,
    instances: usize,
    tables: usize,
    memories: usize,
    pub(crate) memory_denied: bool,
    pub(crate) table_denied: bool,
}

impl Limiter {
    pub(crate) fn new(memory_bytes: u64, limits: &Limits) -> Self {
        Limiter {
            memory_max: usize::try_from(memory_bytes).unwrap_or(usize::MAX),
            memory_used: 0,
            table_elements: limits.table_elements as usize,
            instances: limits.instances as usize,
            tables: limits.tables as usize,
            memories: limits.memories as usize,
            memory_denied: false,
            table_denied: false,
        }
    }
}

impl wasmtime::ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self
            .memory_used
            .saturating_sub(current)
            .saturating_add(desired);
        if total > self.memory_max {
            self.memory_denied = true;
            return Ok(false);
        }
        self.memory_used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            self.table_denied = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        self.tables
    }

    fn memories(&self) -> usize {
        self.memories
    }
}
