//! Guests that run long leave the caller's runtime.
//!
//! A guest call starts on the runtime of whoever called it (an MCP
//! connection's reader and writer, its other callers' calls), so a short
//! call costs no hand-off between threads. A guest in wasm yields at every
//! epoch tick (10 ms); one that has run for [`LONG`] by a tick goes on in
//! a runtime of its own, shared by all such guests ([`finish`]). Without
//! this, a flood of spinning guests kept the caller's workers busy in
//! 10 ms slices, and every message of every other caller (a stdio read, a
//! reply's write, a short call) waited behind them: another caller's
//! `read` over stdio took seconds beside 200 spinners.

use crate::repoll::{Repolled, repoll};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::runtime::{Handle, Runtime};

/// How long a guest runs, by one of its epoch ticks, before it leaves the
/// caller's runtime. A short call that merely saw a tick stays.
pub(crate) const LONG: Duration = Duration::from_millis(2);

/// The long-running guests' runtime: as many workers as the machine runs
/// threads at once, started the first time a guest runs long; `None` if
/// it could not be started (the guests then stay where they are).
fn runtime() -> Option<&'static Handle> {
    static RUNTIME: OnceLock<Option<Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .thread_name("airlock-guest")
                .enable_all()
                .build()
                .inspect_err(|e| {
                    tracing::warn!("cannot start the runtime for long-running guests: {e}")
                })
                .ok()
        })
        .as_ref()
        .map(Runtime::handle)
}

/// A guest future that left the caller's runtime at a yield: run on to
/// its end on the long-running guests' runtime. Dropping what this returns
/// drops the guest future there (at its next yield, within a tick). Run
/// here when that runtime could not be started; `None` if it is gone.
pub(crate) async fn finish<F>(mut fut: Pin<Box<F>>, yields: Arc<AtomicU64>) -> Option<F::Output>
where
    F: Future + Send + ?Sized + 'static,
    F::Output: Send + 'static,
{
    let run = async move {
        loop {
            if let Repolled::Done(out) = repoll(fut.as_mut(), &yields, || false).await {
                return out;
            }
        }
    };
    let task = match runtime() {
        Some(handle) => handle.spawn(run),
        None => return Some(run.await),
    };
    let mut task = AbortOnDrop(task);
    match (&mut task.0).await {
        Ok(out) => Some(out),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => None,
    }
}

/// A task aborted when its handle is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
