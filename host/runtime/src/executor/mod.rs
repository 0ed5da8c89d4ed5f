//! The streaming executor (Claude Code's `StreamingToolExecutor`): owns
//! the scheduling of many tool uses over one context, their events and
//! their order. It runs them through the pipeline under [`Calls`] and never
//! names the facade. Its invariants are in ARCHITECTURE.md.
//!
//! **Where a use runs**, decided once per use: the scheduler's task and the
//! feeding handles share the [`ToolContext`] and every start decision under
//! one lock ([`Shared`]), so uses start in the order they were added
//! whichever task starts them, and a use runs in one of three places:
//! 1. in the scheduler's task (`scheduler.rs`): an exclusive use of a
//!    batch, run there alone;
//! 2. in a task of its own that reports back to the scheduler: any other
//!    use the scheduler starts;
//! 3. in the task that reads its events (`handle.rs`, `Direct`): a
//!    session's submitted use that may start at once: its classification
//!    runs no guest code and, polled once with a no-op waker, is done; the
//!    use is concurrency-safe; and nothing waits before it or runs
//!    exclusively. Otherwise it goes to the scheduler, as in 1 or 2.
//!
//! `mod.rs` holds what every part shares (the events, the commands, the
//! shared state) and [`Executor`]; `handle.rs` the feeding side;
//! `scheduler.rs` the scheduler's task.

mod handle;
mod scheduler;

pub use handle::{ExecutorHandle, Submit, UseEvents};
use handle::{Place, Reply};
use scheduler::Scheduler;

use crate::call::{CallControl, ToolResult, ToolUse};
use crate::context::Completed;
use crate::context::ToolContext;
use crate::pipeline::{self, CallPolicy, PreparedUse};
use crate::registry::Registry;
use airlock_core::descriptor::SafetyFlags;
use airlock_core::error::{CallError, ErrorClass};
use airlock_core::tool::{CancellationToken, LogEvent, ProgressEvent, ProgressSink, ToolOrigin};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc};

/// How many progress events may wait to be read before new ones are dropped.
const PROGRESS_BUFFER: usize = 1024;
/// How many log lines may wait to be read before new ones are dropped.
const LOG_BUFFER: usize = 1024;

/// What the executor reports.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ExecutorEvent {
    /// A use was added.
    Queued {
        /// Its id.
        tool_use_id: String,
        /// When, since the executor started.
        #[serde(rename = "t_ms", serialize_with = "as_ms")]
        at: Duration,
    },
    /// A use started running.
    Started {
        /// Its id.
        tool_use_id: String,
        /// When.
        #[serde(rename = "t_ms", serialize_with = "as_ms")]
        at: Duration,
    },
    /// A use finished (in completion order; its result follows in order).
    Finished {
        /// Its id.
        tool_use_id: String,
        /// When.
        #[serde(rename = "t_ms", serialize_with = "as_ms")]
        at: Duration,
    },
    /// Progress of a running use.
    Progress(ProgressEvent),
    /// A line a running use logged (a tool's `log`, sanitised; the host's
    /// log has it too), before that use's result.
    Log(LogEvent),
    /// A result, in arrival order.
    Result(Box<ToolResult>),
}

fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0)
}

/// A use's classification, already under way: built where the use is
/// added, over the context as it was then.
type Classify = Pin<Box<dyn Future<Output = PreparedUse> + Send>>;

enum Command {
    Add {
        id: String,
        name: String,
        classify: Classify,
        /// Whether the tool classifies each input: then in a task of its
        /// own, so classifications run in parallel.
        in_task: bool,
        reply: Option<Reply>,
    },
    AddFailed(ToolUse, CallError),
    Cancel(String),
    Close,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Add { id, .. } => f.debug_tuple("Add").field(id).finish(),
            Command::AddFailed(u, _) => f.debug_tuple("AddFailed").field(&u.id).finish(),
            Command::Cancel(id) => f.debug_tuple("Cancel").field(id).finish(),
            Command::Close => f.write_str("Close"),
        }
    }
}

/// How results come out, and whether uses are one batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// One model message: results in arrival order, sibling cancellation.
    Batch,
    /// Independent requests: each result as soon as it is done.
    Session,
}

/// A streaming executor for one batch of tool uses (one model message):
/// uses are added as the model streams them, start as soon as the
/// scheduling rule allows, and come back in arrival order, each as soon as
/// every earlier one is done.
///
/// The rule: a use starts when nothing is running, or when it and
/// everything running are concurrency-safe; none overtakes a use that is
/// waiting. Every use gets exactly one result; an exclusive use runs alone
/// and its context changes are applied before the next starts; progress
/// and log lines come out before their use's result; an error from a use
/// flagged cancels-siblings-on-error cancels its siblings; the user's
/// interrupt ([`Executor::interrupt`]) stops cancel-behaviour uses, lets
/// block-behaviour uses finish, and answers queued ones "cancelled by
/// user".
///
/// A session executor ([`Executor::session`], for independent requests
/// such as MCP calls) keeps the rule but hands each result out as soon as
/// it is done, never cancels siblings, and runs as long as its feeders.
/// Either kind cancels one use on request ([`ExecutorHandle::cancel`]),
/// takes refreshed tools ([`ExecutorHandle::refresh`]), and gives a use
/// added with [`ExecutorHandle::submit`] its events on a channel of its
/// own.
pub struct Executor {
    handle: ExecutorHandle,
    events: mpsc::UnboundedReceiver<ExecutorEvent>,
    task: tokio::task::JoinHandle<ToolContext>,
}

/// What the scheduler's task and the handles share.
struct Inner {
    shared: Mutex<Shared>,
    /// The uses running now, by ticket: their ids and cancellation tokens,
    /// so a cancel reaches a running use at once, even while the
    /// scheduler's task is busy running one itself.
    running: Mutex<HashMap<u64, (String, CancellationToken)>>,
    tickets: AtomicU64,
    /// Wakes the scheduler when a use that ran in its reader's task ends.
    wake: Notify,
    /// Every use's cancellation is a child of this (a failing sibling in a
    /// batch cancels it).
    batch: CancellationToken,
    started: Instant,
    mode: Mode,
    /// Where a use whose reader went away finishes.
    runtime: tokio::runtime::Handle,
}

/// The state every decision to start a use reads, under one lock, so that
/// uses start in the order they were added whichever task starts them.
struct Shared {
    calls: Calls,
    cx: ToolContext,
    running_safe: usize,
    running_exclusive: usize,
    /// Uses handed to the scheduler that have neither started nor been
    /// answered: while any waits, nothing added later starts before it.
    waiting: usize,
    /// Uses running in the task that reads their events.
    direct: usize,
    closed: bool,
    /// The executor's events, for uses that run in their readers' tasks:
    /// let go when the scheduler ends, so the channel then closes.
    events: Option<mpsc::UnboundedSender<ExecutorEvent>>,
}

impl Shared {
    /// Whether a concurrency-safe use added now may start at once.
    fn nothing_waits_or_excludes(&self) -> bool {
        !self.closed && self.waiting == 0 && self.running_exclusive == 0
    }

    /// A running use gives up its place.
    fn leave(&mut self, concurrency_safe: bool) {
        if concurrency_safe {
            self.running_safe -= 1;
        } else {
            self.running_exclusive -= 1;
        }
    }
}

impl Inner {
    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    fn ticket(&self) -> u64 {
        self.tickets.fetch_add(1, Ordering::Relaxed)
    }

    /// Gives up a held use's place among the running uses, and wakes the
    /// scheduler if a use waits.
    fn release(&self, concurrency_safe: bool) {
        let mut shared = lock(&self.shared);
        shared.leave(concurrency_safe);
        let wake = shared.waiting > 0;
        drop(shared);
        if wake {
            self.wake.notify_one();
        }
    }

    /// Ends a use that ran in its reader's task: applies its context
    /// changes when it completed (`None`: it was dropped unfinished, by a
    /// panic or a runtime shutting down), gives up its place unless it is
    /// held (the place is returned, for its reader to keep), and wakes the
    /// scheduler if a use waits or it is closing.
    fn end_direct(
        self: &Arc<Self>,
        ticket: u64,
        tool_use_id: String,
        completed: Option<Completed>,
        held: bool,
    ) -> (Option<ToolResult>, Option<Place>) {
        lock(&self.running).remove(&ticket);
        let mut shared = lock(&self.shared);
        if let Some(events) = &shared.events {
            let _ = events.send(ExecutorEvent::Finished {
                tool_use_id,
                at: self.now(),
            });
        }
        let mut result = completed.map(|completed| shared.cx.finish(completed, false));
        if !held {
            shared.leave(true);
        }
        shared.direct -= 1;
        let wake = (!held && shared.waiting > 0) || shared.closed;
        drop(shared);
        if let Some(Err(e)) = result.as_mut().map(|r| &mut r.outcome)
            && e.class == ErrorClass::Cancelled
            && self.batch.is_cancelled()
        {
            e.message = "cancelled by user".into();
        }
        if wake {
            self.wake.notify_one();
        }
        let place = held.then(|| Place {
            inner: self.clone(),
            concurrency_safe: true,
        });
        (result, place)
    }
}

/// What an executor runs uses against: the policy every call is checked
/// under, and the tools a refresh puts in the context's view. An
/// [`crate::Airlock`] converts into them (its tools without those a bare
/// deny rule hides).
#[derive(Clone, Debug)]
pub struct Calls {
    /// Hooks, prompter, results store and limits for every call.
    pub policy: Arc<CallPolicy>,
    /// The tools in view after a refresh.
    pub tools: Arc<Registry>,
}

impl Executor {
    /// Starts an executor for one batch over `cx` (see
    /// [`crate::Airlock::executor`]).
    pub fn new(calls: impl Into<Calls>, cx: ToolContext) -> Executor {
        Executor::start(calls.into(), cx, Mode::Batch)
    }

    /// Starts a session executor over `cx`: uses are independent requests
    /// (an MCP client's calls), each result comes out as soon as it is
    /// done, a failure cancels nothing else, and the executor runs until
    /// it is closed or every handle is dropped.
    pub fn session(calls: impl Into<Calls>, cx: ToolContext) -> Executor {
        Executor::start(calls.into(), cx, Mode::Session)
    }

    fn start(calls: Calls, cx: ToolContext, mode: Mode) -> Executor {
        let (commands, command_rx) = mpsc::unbounded_channel();
        let (event_tx, events) = mpsc::unbounded_channel();
        let abort = cx.abort_handle().clone();
        let inner = Arc::new(Inner {
            batch: abort.child_token(),
            shared: Mutex::new(Shared {
                calls,
                cx,
                running_safe: 0,
                running_exclusive: 0,
                waiting: 0,
                direct: 0,
                closed: false,
                events: Some(event_tx.clone()),
            }),
            running: Mutex::default(),
            tickets: AtomicU64::new(1),
            wake: Notify::new(),
            started: Instant::now(),
            mode,
            runtime: tokio::runtime::Handle::current(),
        });
        let scheduler = Scheduler::new(inner.clone(), abort.clone(), event_tx);
        let task = tokio::spawn(scheduler.serve(command_rx));
        Executor {
            handle: ExecutorHandle {
                commands,
                abort,
                inner,
            },
            events,
            task,
        }
    }

    /// The feeding side, for a task of its own.
    pub fn handle(&self) -> ExecutorHandle {
        self.handle.clone()
    }

    /// Adds a tool use, as soon as its block is complete in the stream.
    pub fn add(&self, tool_use: ToolUse) {
        self.handle.add(tool_use);
    }

    /// Adds a tool use that is already known to fail (see
    /// [`ExecutorHandle::add_failed`]).
    pub fn add_failed(&self, tool_use: ToolUse, error: CallError) {
        self.handle.add_failed(tool_use, error);
    }

    /// Cancels one use (see [`ExecutorHandle::cancel`]).
    pub fn cancel(&self, tool_use_id: impl Into<String>) {
        self.handle.cancel(tool_use_id);
    }

    /// Says no more tool uses will come (the message ended).
    pub fn close(&self) {
        self.handle.close();
    }

    /// The user's interrupt: cancels the context's abort handle.
    pub fn interrupt(&self) {
        self.handle.interrupt();
    }

    /// The next event; `None` once the executor is closed and every result
    /// is out.
    pub async fn next(&mut self) -> Option<ExecutorEvent> {
        self.events.recv().await
    }

    /// Closes the executor, collects the remaining results (dropping other
    /// events) and returns them with the context.
    pub async fn finish(mut self) -> (Vec<ToolResult>, ToolContext) {
        self.close();
        let mut results = Vec::new();
        while let Some(event) = self.events.recv().await {
            if let ExecutorEvent::Result(r) = event {
                results.push(*r);
            }
        }
        let cx = self.task.await.expect("the scheduler does not panic");
        (results, cx)
    }

    /// Waits for the scheduler to end (after [`Executor::close`] and once
    /// every event was read) and returns the context.
    pub async fn into_context(self) -> ToolContext {
        drop(self.events);
        self.task.await.expect("the scheduler does not panic")
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
