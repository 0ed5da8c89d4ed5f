//! The streaming executor (Claude Code's `StreamingToolExecutor`): owns
//! the scheduling of many tool uses over one context, their events and
//! their order. It runs them through the pipeline under [`Calls`] and never
//! names the facade. The scheduler is a task that shares the
//! [`ToolContext`] and the start decisions with the feeding handles under
//! one lock; a use runs in it (an exclusive use in a batch), in a task of
//! its own that reports back, or (a session's submitted use that may start
//! at once) in the task that reads its events. Its invariants are in
//! ARCHITECTURE.md.

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

/// The feeding side of an [`Executor`]: cheap to clone, so one task can
/// feed tool uses while another reads the events.
#[derive(Clone)]
pub struct ExecutorHandle {
    commands: mpsc::UnboundedSender<Command>,
    abort: CancellationToken,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ExecutorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorHandle")
            .field("mode", &self.inner.mode)
            .finish_non_exhaustive()
    }
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

impl ExecutorHandle {
    /// Adds a tool use, as soon as its block is complete in the stream.
    pub fn add(&self, tool_use: ToolUse) {
        self.add_use(tool_use, Reader::Executor);
    }

    /// Adds a tool use whose progress, log lines and result come on a
    /// channel of its own ([`UseEvents`]), in that order, instead of
    /// [`Executor::next`]'s (which still reports it queued, started and
    /// finished). For front ends that answer each use apart, such as MCP.
    ///
    /// In a session, a concurrency-safe use that may start at once (no
    /// exclusive use runs and none waits) runs in the task that reads its
    /// [`UseEvents`], with no hand-off between tasks: read them as soon as
    /// it is submitted. Dropped before its result, it finishes in a task of
    /// its own, as any other use does.
    ///
    /// ```
    /// # async fn example(airlock: airlock_host::Airlock) {
    /// use airlock_host::{Executor, ExecutorEvent, ToolUse};
    /// use serde_json::json;
    ///
    /// let executor = Executor::session(airlock.clone(), airlock.context());
    /// let mut events = executor
    ///     .handle()
    ///     .submit(ToolUse::new("call-1", "sleep", json!({"ms": 0})));
    /// while let Some(event) = events.next().await {
    ///     if let ExecutorEvent::Result(result) = event {
    ///         println!("{}", result.text());
    ///     }
    /// }
    /// # }
    /// ```
    pub fn submit(&self, tool_use: ToolUse) -> UseEvents {
        self.submit_with(tool_use, Submit::default())
    }

    /// As [`ExecutorHandle::submit`], run and held as `how` says.
    ///
    /// ```
    /// # async fn example(airlock: airlock_host::Airlock) {
    /// use airlock_host::{Executor, ExecutorEvent, Submit, ToolUse};
    /// use serde_json::json;
    ///
    /// let executor = Executor::session(airlock.clone(), airlock.context());
    /// let how = Submit::default().scheduled().held();
    /// let mut events = executor
    ///     .handle()
    ///     .submit_with(ToolUse::new("call-1", "sleep", json!({"ms": 0})), how);
    /// while let Some(event) = events.next().await {
    ///     if let ExecutorEvent::Result(result) = event {
    ///         println!("{}", result.text());
    ///         break;
    ///     }
    /// }
    /// // The result is written out: uses that waited for this one may start.
    /// drop(events);
    /// # }
    /// ```
    pub fn submit_with(&self, tool_use: ToolUse, how: Submit) -> UseEvents {
        let (tx, rx) = mpsc::unbounded_channel();
        let reply = Reply { tx, held: how.held };
        let reader = Reader::Own {
            reply,
            may_run_here: !how.scheduled,
        };
        let events = match self.add_use(tool_use, reader) {
            Some(direct) => Events::Direct(direct),
            None => Events::Scheduled { rx, place: None },
        };
        UseEvents { events }
    }

    /// Classifies the use over the context as it is now and hands it to
    /// the scheduler, or, when it is a session's submitted use that may
    /// start at once, starts it here to run where its events are read. The
    /// decision and the hand-off happen under the shared lock, so uses
    /// start in the order they were added.
    fn add_use(&self, tool_use: ToolUse, reader: Reader) -> Option<Box<Direct>> {
        let id = tool_use.id.clone();
        let name = tool_use.name.clone();
        let (in_task, may_start_here, mut classify) = {
            let shared = lock(&self.inner.shared);
            // A tool without a `classify` export is classified from its
            // descriptor alone; one that classifies each input does it in
            // a task of its own, so classifications run in parallel. Only
            // a component's classification runs guest code: host code's
            // is tried here at once, and handed on if it has to wait.
            let (in_task, runs_guest_code) = match shared.cx.tools().get(&tool_use.name) {
                Some(entry) if entry.descriptor().preflight.classify => (
                    true,
                    matches!(
                        entry.tool.origin(),
                        ToolOrigin::Bundled(_) | ToolOrigin::File(_)
                    ),
                ),
                _ => (false, false),
            };
            let may_start_here = matches!(
                reader,
                Reader::Own {
                    may_run_here: true,
                    ..
                }
            ) && self.inner.mode == Mode::Session
                && !runs_guest_code
                && shared.nothing_waits_or_excludes()
                && !self.abort.is_cancelled()
                && tokio::runtime::Handle::try_current().is_ok();
            let policy = shared.calls.policy.clone();
            let snapshot = shared.cx.clone();
            let classify: Classify =
                Box::pin(async move { pipeline::prepare(&policy, &snapshot, tool_use).await });
            (in_task, may_start_here, classify)
        };
        // Tried outside the lock: a tool's classification never holds up
        // the scheduler or other feeders, and may use this handle itself.
        let classified = if may_start_here {
            match classify
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
            {
                Poll::Ready(prepared) => Some(prepared),
                Poll::Pending => None,
            }
        } else {
            None
        };
        let reply = match reader {
            Reader::Executor => None,
            Reader::Own { reply, .. } => Some(reply),
        };
        let mut shared = lock(&self.inner.shared);
        if let Some(prepared) = classified {
            if prepared.concurrency_safe()
                && shared.nothing_waits_or_excludes()
                && !self.abort.is_cancelled()
            {
                let held = reply.as_ref().is_some_and(|r| r.held);
                return Some(self.start_direct(&mut shared, prepared, held));
            }
            classify = Box::pin(std::future::ready(prepared));
        }
        shared.waiting += 1;
        let _ = self.commands.send(Command::Add {
            id,
            name,
            classify,
            in_task,
            reply,
        });
        None
    }

    /// Starts a concurrency-safe use to run in the task that reads its
    /// events.
    fn start_direct(&self, shared: &mut Shared, prepared: PreparedUse, held: bool) -> Box<Direct> {
        let inner = &self.inner;
        shared.running_safe += 1;
        shared.direct += 1;
        let ticket = inner.ticket();
        let cancel = inner.batch.child_token();
        let id = prepared.id().to_string();
        lock(&inner.running).insert(ticket, (id.clone(), cancel.clone()));
        if let Some(events) = &shared.events {
            let at = inner.now();
            let _ = events.send(ExecutorEvent::Queued {
                tool_use_id: id.clone(),
                at,
            });
            let _ = events.send(ExecutorEvent::Started {
                tool_use_id: id.clone(),
                at,
            });
        }
        let (progress, progress_rx) = ProgressSink::channel(PROGRESS_BUFFER);
        let (progress, logs_rx) = progress.with_logs(LOG_BUFFER);
        let policy = shared.calls.policy.clone();
        let snapshot = shared.cx.clone();
        let control = CallControl { progress, cancel };
        Box::new(Direct {
            run: Some(Box::pin(async move {
                pipeline::execute(&policy, &snapshot, prepared, control).await
            })),
            progress_rx,
            logs_rx,
            result: None,
            held,
            place: None,
            running: Unscheduled(Some((inner.clone(), ticket, id))),
        })
    }

    /// Adds a tool use that is already known to fail (a block whose input
    /// did not parse): it gets `error` as its result, in its place.
    pub fn add_failed(&self, tool_use: ToolUse, error: CallError) {
        let _ = self.commands.send(Command::AddFailed(tool_use, error));
    }

    /// Cancels the use with this id: one that has not started is answered
    /// "cancelled by the caller" at once; a running one is stopped (within
    /// an epoch tick, for a cancel-behaviour tool). Unknown or finished ids
    /// are ignored, so a cancel may race the result.
    pub fn cancel(&self, tool_use_id: impl Into<String>) {
        let id = tool_use_id.into();
        let running = lock(&self.inner.running)
            .iter()
            .filter(|(_, (running, _))| *running == id)
            .max_by_key(|(ticket, _)| **ticket)
            .map(|(_, (_, cancel))| cancel.clone());
        if let Some(cancel) = running {
            cancel.cancel();
        }
        let _ = self.commands.send(Command::Cancel(id));
    }

    /// Uses added from now on run against `calls` (a refreshed
    /// [`crate::Airlock`] converts into them): the context's view of the
    /// tools is replaced; uses already added keep the tools they had.
    pub fn refresh(&self, calls: impl Into<Calls>) {
        let calls = calls.into();
        let mut shared = lock(&self.inner.shared);
        shared.cx.set_tools(calls.tools.clone());
        shared.calls = calls;
    }

    /// Says no more tool uses will come (the message ended).
    pub fn close(&self) {
        lock(&self.inner.shared).closed = true;
        let _ = self.commands.send(Command::Close);
    }

    /// The user's interrupt: cancels the context's abort handle.
    pub fn interrupt(&self) {
        self.abort.cancel();
    }
}

/// One submitted use's events ([`ExecutorHandle::submit`]): its progress
/// and log lines as they come, then its result, then the end.
#[derive(Debug)]
pub struct UseEvents {
    events: Events,
}

/// How a use is submitted ([`ExecutorHandle::submit_with`]): by default
/// it runs in the task that reads its events if it may start at once, and
/// gives up its place among the running uses as soon as it is done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Submit {
    scheduled: bool,
    held: bool,
}

impl Submit {
    /// The use never runs in the task that reads its events: the
    /// scheduler starts it in a task of its own. For a use with more
    /// submitted right behind it (a client's burst of calls): 64 `sleep`
    /// calls in flight over MCP stdio, each run in its reader's task, cost
    /// about twice the CPU per call they cost started by the scheduler.
    #[must_use]
    pub fn scheduled(self) -> Submit {
        Submit {
            scheduled: true,
            ..self
        }
    }

    /// The use keeps its place among the running uses (so an exclusive
    /// use added after it waits, and, if it is exclusive, everything
    /// added after it) until its [`UseEvents`] is dropped, not only until
    /// it is done. For a front end that writes results out: it drops the
    /// events once the result is written, so the result of a use that
    /// started after this one ended is never written before this one's.
    /// Events kept after their result hold up those uses for as long.
    #[must_use]
    pub fn held(self) -> Submit {
        Submit { held: true, ..self }
    }
}

/// Who reads an added use's events, and so where it may run.
enum Reader {
    /// [`Executor::next`] ([`ExecutorHandle::add`]): the scheduler runs it.
    Executor,
    /// A task that reads the use's own channel
    /// ([`ExecutorHandle::submit_with`]): the use runs there if it may
    /// start at once and the submitter allows it.
    Own { reply: Reply, may_run_here: bool },
}

/// A submitted use's own channel: its events, and with a held use's
/// result, its place.
struct Reply {
    tx: mpsc::UnboundedSender<(ExecutorEvent, Option<Place>)>,
    held: bool,
}

/// A started use's place among the running uses, given up when dropped:
/// a held use's is kept by its [`UseEvents`] after the use is done.
struct Place {
    inner: Arc<Inner>,
    concurrency_safe: bool,
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Place")
            .field("concurrency_safe", &self.concurrency_safe)
            .finish_non_exhaustive()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.inner.release(self.concurrency_safe);
    }
}

#[derive(Debug)]
enum Events {
    /// The scheduler runs the use and sends its events; a held use's
    /// place comes with its result, and is kept here.
    Scheduled {
        rx: mpsc::UnboundedReceiver<(ExecutorEvent, Option<Place>)>,
        place: Option<Place>,
    },
    /// The use runs as its events are read.
    Direct(Box<Direct>),
}

impl UseEvents {
    /// The next event: [`ExecutorEvent::Progress`], [`ExecutorEvent::Log`],
    /// or last [`ExecutorEvent::Result`]; `None` after the result (or if the
    /// executor stopped without one).
    pub async fn next(&mut self) -> Option<ExecutorEvent> {
        match &mut self.events {
            Events::Scheduled { rx, place } => {
                let (event, given) = rx.recv().await?;
                if given.is_some() {
                    *place = given;
                }
                Some(event)
            }
            Events::Direct(direct) => direct.next().await,
        }
    }
}

/// A use running in the task that reads its events.
struct Direct {
    /// The call, until it completes.
    run: Option<Pin<Box<dyn Future<Output = Completed> + Send>>>,
    progress_rx: mpsc::Receiver<ProgressEvent>,
    logs_rx: mpsc::Receiver<LogEvent>,
    /// The result, once the call completed and its context changes applied.
    result: Option<ToolResult>,
    /// Whether it keeps its place once it completed ([`Submit::held`]),
    /// and the place it keeps.
    held: bool,
    place: Option<Place>,
    /// Its place among the running uses, until it ends.
    running: Unscheduled,
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct")
            .field("running", &self.run.is_some())
            .finish_non_exhaustive()
    }
}

/// What one step of a running [`Direct`] use gave.
enum Step {
    Progress(ProgressEvent),
    Log(LogEvent),
    Completed(Box<Completed>),
}

impl Direct {
    /// Runs the call until it sends progress or a log line or completes;
    /// once it completed, hands out what it sent last, then its result.
    /// The call is polled first: one that completes in its first poll
    /// then drops its sink before the channels were ever polled, so
    /// closing them does not wake this task (Tokio takes a task that woke
    /// itself for one that yielded, and wakes another worker to take it).
    async fn next(&mut self) -> Option<ExecutorEvent> {
        if let Some(run) = self.run.as_mut() {
            let step = tokio::select! {
                biased;
                completed = run => Step::Completed(Box::new(completed)),
                Some(progress) = self.progress_rx.recv() => Step::Progress(progress),
                Some(log) = self.logs_rx.recv() => Step::Log(log),
            };
            match step {
                Step::Progress(progress) => return Some(ExecutorEvent::Progress(progress)),
                Step::Log(log) => return Some(ExecutorEvent::Log(log)),
                Step::Completed(completed) => {
                    self.run = None;
                    (self.result, self.place) = self.running.end(*completed, self.held);
                }
            }
        }
        if let Ok(progress) = self.progress_rx.try_recv() {
            return Some(ExecutorEvent::Progress(progress));
        }
        if let Ok(log) = self.logs_rx.try_recv() {
            return Some(ExecutorEvent::Log(log));
        }
        self.result
            .take()
            .map(|result| ExecutorEvent::Result(Box::new(result)))
    }
}

impl Drop for Direct {
    /// A use whose reader went away before its result still runs to its
    /// end (a block-behaviour tool finishes; its context changes apply),
    /// in a task of its own on the executor's runtime, and then gives up
    /// its place. One whose reader is unwinding from a panic (maybe the
    /// tool's own) is forgotten.
    fn drop(&mut self) {
        let Some(run) = self.run.take() else { return };
        if std::thread::panicking() {
            return;
        }
        let mut running = std::mem::take(&mut self.running);
        let Some((inner, ..)) = &running.0 else {
            return;
        };
        inner.runtime.clone().spawn(async move {
            let completed = run.await;
            running.end(completed, false);
        });
    }
}

/// A use that runs outside the scheduler, until it ends: dropped before
/// (a panic, or a runtime shutting down), it is forgotten, so the counts
/// never keep it.
#[derive(Default)]
struct Unscheduled(Option<(Arc<Inner>, u64, String)>);

impl Unscheduled {
    fn end(&mut self, completed: Completed, held: bool) -> (Option<ToolResult>, Option<Place>) {
        let Some((inner, ticket, id)) = self.0.take() else {
            return (None, None);
        };
        inner.end_direct(ticket, id, Some(completed), held)
    }
}

impl Drop for Unscheduled {
    fn drop(&mut self) {
        if let Some((inner, ticket, id)) = self.0.take() {
            inner.end_direct(ticket, id, None, false);
        }
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
        let task = tokio::spawn(scheduler.run(command_rx));
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

/// Where a use is.
enum State {
    Classifying,
    Queued(Box<PreparedUse>),
    Running { cancel: CancellationToken },
    Done(Box<ToolResult>),
    Emitted,
}

impl State {
    /// Not started and not answered: counted in [`Shared::waiting`].
    fn waiting(&self) -> bool {
        matches!(self, State::Classifying | State::Queued(_))
    }
}

struct Tracked {
    id: String,
    name: String,
    state: State,
    /// Its key among the running uses, once started.
    ticket: u64,
    /// Where its progress, log lines and result go, when submitted.
    reply: Option<Reply>,
    /// A held use's place once it is done, to go out with its result.
    place: Option<Place>,
}

/// Work the scheduler polls itself: the classification of a use whose
/// tool declares no `classify` export, and a batch's exclusive use.
type Work = Pin<Box<dyn Future<Output = Report> + Send>>;

/// What a classification or an execution reports.
enum Report {
    Classified(usize, Box<PreparedUse>),
    Finished(usize, Box<Completed>, bool),
}

struct Scheduler {
    inner: Arc<Inner>,
    events: mpsc::UnboundedSender<ExecutorEvent>,
    abort: CancellationToken,
    reports_tx: mpsc::UnboundedSender<Report>,
    reports: mpsc::UnboundedReceiver<Report>,
    progress: ProgressSink,
    progress_rx: mpsc::Receiver<ProgressEvent>,
    logs_rx: mpsc::Receiver<LogEvent>,
    work: FuturesUnordered<Work>,
    /// The uses not yet emitted (and emitted ones behind an earlier
    /// pending use); `uses[0]` is use number `base`. Uses that run in
    /// their readers' tasks are not here.
    uses: VecDeque<Tracked>,
    base: usize,
    /// The first use that may still wait to start. Uses start in arrival
    /// order and never wait again, so the ones before it need no look:
    /// with thousands running, deciding what starts next stays cheap.
    unstarted: usize,
    /// How many uses are done and not yet emitted: kept as a count (as
    /// the running ones are in [`Shared`]), so deciding what may start and
    /// what may leave costs the same with 10 or 10,000 uses waiting.
    ready: usize,
    interrupted: bool,
    sibling_failed: Option<String>,
}

impl Scheduler {
    fn new(
        inner: Arc<Inner>,
        abort: CancellationToken,
        events: mpsc::UnboundedSender<ExecutorEvent>,
    ) -> Self {
        let (reports_tx, reports) = mpsc::unbounded_channel();
        let (progress, progress_rx) = ProgressSink::channel(PROGRESS_BUFFER);
        let (progress, logs_rx) = progress.with_logs(LOG_BUFFER);
        Scheduler {
            inner,
            events,
            abort,
            reports_tx,
            reports,
            progress,
            progress_rx,
            logs_rx,
            work: FuturesUnordered::new(),
            uses: VecDeque::new(),
            base: 0,
            unstarted: 0,
            ready: 0,
            interrupted: false,
            sibling_failed: None,
        }
    }

    fn shared(&self) -> MutexGuard<'_, Shared> {
        lock(&self.inner.shared)
    }

    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) -> ToolContext {
        let abort = self.abort.clone();
        let inner = self.inner.clone();
        let mut closed = false;
        loop {
            if closed && self.uses.is_empty() && self.shared().direct == 0 {
                break;
            }
            tokio::select! {
                command = commands.recv(), if !closed => match command {
                    Some(Command::Add { id, name, classify, in_task, reply }) => {
                        self.add(id, name, classify, in_task, reply);
                    }
                    Some(Command::AddFailed(tool_use, error)) => self.add_failed(tool_use, error),
                    Some(Command::Cancel(id)) => self.cancel(&id),
                    Some(Command::Close) | None => {
                        // Every handle may be gone: a use running in its
                        // reader's task then wakes this one when it ends.
                        self.shared().closed = true;
                        closed = true;
                    }
                },
                Some(report) = self.work.next(), if !self.work.is_empty() => self.report(report),
                Some(report) = self.reports.recv() => self.report(report),
                Some(progress) = self.progress_rx.recv() => self.forward_progress(progress),
                Some(log) = self.logs_rx.recv() => self.forward_log(log),
                () = inner.wake.notified() => {}
                () = abort.cancelled(), if !self.interrupted => self.interrupt(),
            }
            self.start_what_can_start();
            self.emit_ready();
        }
        self.forward_sent();
        let mut shared = self.shared();
        shared.events = None;
        shared.cx.clone()
    }

    /// Forwards the progress and log lines already sent. A use sends its
    /// own before it reports that it finished, so forwarding them when the
    /// report comes puts them before its result (the channels are read in
    /// no particular order otherwise).
    fn forward_sent(&mut self) {
        while let Ok(progress) = self.progress_rx.try_recv() {
            self.forward_progress(progress);
        }
        while let Ok(log) = self.logs_rx.try_recv() {
            self.forward_log(log);
        }
    }

    fn forward_progress(&self, progress: ProgressEvent) {
        let to = progress.tool_use_id.clone();
        self.forward(&to, ExecutorEvent::Progress(progress));
    }

    fn forward_log(&self, log: LogEvent) {
        let to = log.tool_use_id.clone();
        self.forward(&to, ExecutorEvent::Log(log));
    }

    /// Sends `event` where the events of the latest use with this id go:
    /// its own channel when it was submitted, else the executor's.
    fn forward(&self, id: &str, event: ExecutorEvent) {
        let reply = self
            .uses
            .iter()
            .rev()
            .find(|u| u.id == id)
            .and_then(|u| u.reply.as_ref());
        let _ = match reply {
            Some(reply) => reply.tx.send((event, None)).map_err(drop),
            None => self.events.send(event).map_err(drop),
        };
    }

    fn add(
        &mut self,
        id: String,
        name: String,
        classify: Classify,
        in_task: bool,
        reply: Option<Reply>,
    ) {
        let i = self.track(id, name, State::Classifying, reply);
        if let Some(message) = self.cancellation_message() {
            let result = self.cancelled(i, message);
            self.set_state(i, State::Done(Box::new(result)));
            return;
        }
        let classify = async move { Report::Classified(i, Box::new(classify.await)) };
        if in_task {
            let reports = self.reports_tx.clone();
            tokio::spawn(async move {
                let _ = reports.send(classify.await);
            });
        } else {
            self.work.push(Box::pin(classify));
        }
    }

    fn add_failed(&mut self, tool_use: ToolUse, error: CallError) {
        let result = ToolResult::failed(tool_use.id.clone(), tool_use.name.clone(), error);
        let done = State::Done(Box::new(result));
        self.ready += 1;
        self.track(tool_use.id, tool_use.name, done, None);
    }

    /// Cancels the latest use with this id, if it is still in flight.
    fn cancel(&mut self, id: &str) {
        let Some(at) = self.uses.iter().rposition(|u| u.id == id) else {
            return;
        };
        let i = self.base + at;
        match &self.uses[at].state {
            State::Classifying | State::Queued(_) => {
                let result = self.cancelled(i, "cancelled by the caller".into());
                self.set_state(i, State::Done(Box::new(result)));
            }
            State::Running { cancel, .. } => cancel.cancel(),
            State::Done(_) | State::Emitted => {}
        }
    }

    /// The use with absolute number `i`, unless it is gone (emitted).
    fn slot(&mut self, i: usize) -> Option<&mut Tracked> {
        i.checked_sub(self.base)
            .and_then(|at| self.uses.get_mut(at))
    }

    fn set_state(&mut self, i: usize, state: State) {
        let done = matches!(state, State::Done(_));
        let now_waiting = state.waiting();
        let Some(tracked) = self.slot(i) else { return };
        let was_done = matches!(tracked.state, State::Done(_));
        let was_waiting = tracked.state.waiting();
        tracked.state = state;
        self.ready = self.ready + usize::from(done) - usize::from(was_done);
        if was_waiting && !now_waiting {
            self.shared().waiting -= 1;
        }
    }

    fn track(&mut self, id: String, name: String, state: State, reply: Option<Reply>) -> usize {
        let _ = self.events.send(ExecutorEvent::Queued {
            tool_use_id: id.clone(),
            at: self.inner.now(),
        });
        self.uses.push_back(Tracked {
            id,
            name,
            state,
            ticket: 0,
            reply,
            place: None,
        });
        self.base + self.uses.len() - 1
    }

    fn report(&mut self, report: Report) {
        match report {
            Report::Classified(i, prepared) => {
                let message = self.cancellation_message();
                let Some(tracked) = self.slot(i) else { return };
                if !matches!(tracked.state, State::Classifying) {
                    return;
                }
                tracked.name = prepared.name().to_string();
                let state = match message {
                    Some(message) => State::Done(Box::new(self.cancelled(i, message))),
                    None => State::Queued(prepared),
                };
                self.set_state(i, state);
            }
            Report::Finished(i, completed, concurrency_safe) => {
                self.forward_sent();
                let inner = self.inner.clone();
                let Some(tracked) = self.slot(i) else { return };
                let tool_use_id = tracked.id.clone();
                let ticket = tracked.ticket;
                // A held use keeps its place until its reader lets its
                // events go; the place goes out with its result.
                let held = tracked.reply.as_ref().is_some_and(|r| r.held);
                if held {
                    tracked.place = Some(Place {
                        inner,
                        concurrency_safe,
                    });
                }
                lock(&self.inner.running).remove(&ticket);
                let mut result = {
                    let mut shared = self.shared();
                    if !held {
                        shared.leave(concurrency_safe);
                    }
                    let _ = self.events.send(ExecutorEvent::Finished {
                        tool_use_id,
                        at: self.inner.now(),
                    });
                    shared.cx.finish(*completed, !concurrency_safe)
                };
                let failed_for_real =
                    matches!(&result.outcome, Err(e) if e.class != ErrorClass::Cancelled);
                let cancels_siblings = result
                    .flags
                    .is_some_and(|f| f.contains(SafetyFlags::CANCELS_SIBLINGS_ON_ERROR));
                if failed_for_real
                    && cancels_siblings
                    && self.inner.mode == Mode::Batch
                    && self.sibling_failed.is_none()
                {
                    self.sibling_failed = Some(format!("{} ({})", result.name, result.id));
                    self.inner.batch.cancel();
                    self.cancel_waiting();
                }
                if let Err(e) = &mut result.outcome
                    && e.class == ErrorClass::Cancelled
                    && let Some(message) = self.cancellation_message()
                {
                    e.message = message;
                }
                self.set_state(i, State::Done(Box::new(result)));
            }
        }
    }

    /// Why new or waiting uses are cancelled, if they are. The abort handle
    /// is read directly, so a result that races the interrupt is labelled
    /// right.
    fn cancellation_message(&self) -> Option<String> {
        if self.interrupted || self.abort.is_cancelled() {
            Some("cancelled by user".into())
        } else {
            self.sibling_failed
                .as_ref()
                .map(|s| format!("cancelled: a sibling failed ({s})"))
        }
    }

    fn cancelled(&self, i: usize, message: String) -> ToolResult {
        let tracked = &self.uses[i - self.base];
        ToolResult::failed(&tracked.id, &tracked.name, CallError::cancelled(message))
    }

    fn interrupt(&mut self) {
        self.interrupted = true;
        self.cancel_waiting();
    }

    /// Answers every use that has not started with the cancellation message.
    fn cancel_waiting(&mut self) {
        let Some(message) = self.cancellation_message() else {
            return;
        };
        for at in 0..self.uses.len() {
            if self.uses[at].state.waiting() {
                let i = self.base + at;
                let result = self.cancelled(i, message.clone());
                self.set_state(i, State::Done(Box::new(result)));
            }
        }
    }

    /// Starts waiting uses, in arrival order, while the rule allows (the
    /// running uses counted include those running in their readers' tasks).
    fn start_what_can_start(&mut self) {
        let inner = self.inner.clone();
        let mut shared = lock(&inner.shared);
        let mut at = self.unstarted.saturating_sub(self.base);
        while let Some(tracked) = self.uses.get(at) {
            let safe = match &tracked.state {
                State::Running { .. } | State::Done(_) | State::Emitted => {
                    at += 1;
                    continue;
                }
                State::Classifying => break,
                State::Queued(prepared) => prepared.concurrency_safe(),
            };
            let allowed = shared.running_exclusive == 0 && (safe || shared.running_safe == 0);
            if !allowed {
                break;
            }
            self.start(&mut shared, at, safe);
            at += 1;
        }
        self.unstarted = self.base + at;
    }

    fn start(&mut self, shared: &mut Shared, at: usize, concurrency_safe: bool) {
        let i = self.base + at;
        let cancel = self.inner.batch.child_token();
        let running = State::Running {
            cancel: cancel.clone(),
        };
        let State::Queued(prepared) = std::mem::replace(&mut self.uses[at].state, running) else {
            return;
        };
        shared.waiting -= 1;
        if concurrency_safe {
            shared.running_safe += 1;
        } else {
            shared.running_exclusive += 1;
        }
        let _ = self.events.send(ExecutorEvent::Started {
            tool_use_id: self.uses[at].id.clone(),
            at: self.inner.now(),
        });
        let ticket = self.inner.ticket();
        self.uses[at].ticket = ticket;
        lock(&self.inner.running).insert(ticket, (self.uses[at].id.clone(), cancel.clone()));
        let policy = shared.calls.policy.clone();
        let snapshot = shared.cx.clone();
        let control = CallControl {
            progress: self.progress.clone(),
            cancel,
        };
        // Boxed: the call's future is kilobytes, and a spawned task's
        // future is copied whole as the task is made and as it ends.
        let run = Box::pin(async move {
            let completed = pipeline::execute(&policy, &snapshot, *prepared, control).await;
            Report::Finished(i, Box::new(completed), concurrency_safe)
        });
        // In a batch, an exclusive use runs in this task: nothing may start
        // beside it, its result leaves in its place whatever task ran it,
        // and a cancel or interrupt reaches its token without this task.
        // Anything else runs in a task of its own (in parallel; and in a
        // session, where results leave as they finish, a use run here
        // could be answered before an earlier result's reader woke).
        if self.inner.mode == Mode::Batch && !concurrency_safe {
            self.work.push(run);
        } else {
            let reports = self.reports_tx.clone();
            tokio::spawn(async move {
                let _ = reports.send(run.await);
            });
        }
    }

    /// Sends every result whose predecessors are all out (in a batch) or
    /// every result that is done (in a session), then forgets the uses at
    /// the front that are out.
    fn emit_ready(&mut self) {
        let mode = self.inner.mode;
        for tracked in self.uses.iter_mut() {
            if self.ready == 0 {
                break;
            }
            match tracked.state {
                State::Done(_) => {
                    if let State::Done(result) =
                        std::mem::replace(&mut tracked.state, State::Emitted)
                    {
                        self.ready -= 1;
                        let event = ExecutorEvent::Result(result);
                        // A held use's place goes with its result: if its
                        // reader is gone, it is given up at once.
                        let _ = match tracked.reply.take() {
                            Some(reply) => {
                                reply.tx.send((event, tracked.place.take())).map_err(drop)
                            }
                            None => self.events.send(event).map_err(drop),
                        };
                    }
                }
                State::Emitted => {}
                _ if mode == Mode::Batch => break,
                _ => {}
            }
        }
        while self
            .uses
            .front()
            .is_some_and(|u| matches!(u.state, State::Emitted))
        {
            self.uses.pop_front();
            self.base += 1;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
