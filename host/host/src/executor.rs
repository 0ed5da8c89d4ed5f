//! The streaming executor (Claude Code's `StreamingToolExecutor`): owns
//! the scheduling of many tool uses over one context, their events and
//! their order. It runs them through the pipeline under [`Calls`] and never
//! names the facade. The scheduler is one task that owns the
//! [`ToolContext`]; a use runs in it (an exclusive use in a batch) or in a
//! task of its own that reports back. Its invariants are in
//! ARCHITECTURE.md.

use crate::call::{CallControl, ToolResult, ToolUse};
use crate::context::Completed;
use crate::context::ToolContext;
use crate::pipeline::{self, CallPolicy, Prepared};
use crate::registry::Registry;
use airlock_core::descriptor::SafetyFlags;
use airlock_core::error::{CallError, ErrorClass};
use airlock_core::tool::{CancellationToken, LogEvent, ProgressEvent, ProgressSink};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

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

enum Command {
    Add(ToolUse, Option<mpsc::UnboundedSender<ExecutorEvent>>),
    AddFailed(ToolUse, CallError),
    Cancel(String),
    Refresh(Box<Calls>),
    Close,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Add(u, _) => f.debug_tuple("Add").field(&u.id).finish(),
            Command::AddFailed(u, _) => f.debug_tuple("AddFailed").field(&u.id).finish(),
            Command::Cancel(id) => f.debug_tuple("Cancel").field(id).finish(),
            Command::Refresh(_) => f.write_str("Refresh"),
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
#[derive(Clone, Debug)]
pub struct ExecutorHandle {
    commands: mpsc::UnboundedSender<Command>,
    abort: CancellationToken,
    running: Running,
}

/// The uses running now, by number: their ids and cancellation tokens,
/// shared with the handles so a cancel reaches a running use at once, even
/// while the scheduler's task is busy running one itself.
type Running = Arc<Mutex<HashMap<usize, (String, CancellationToken)>>>;

impl ExecutorHandle {
    /// Adds a tool use, as soon as its block is complete in the stream.
    pub fn add(&self, tool_use: ToolUse) {
        let _ = self.commands.send(Command::Add(tool_use, None));
    }

    /// Adds a tool use whose progress, log lines and result come on a
    /// channel of its own ([`UseEvents`]), in that order, instead of
    /// [`Executor::next`]'s (which still reports it queued, started and
    /// finished). For front ends that answer each use apart, such as MCP.
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
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = self.commands.send(Command::Add(tool_use, Some(tx)));
        UseEvents { rx }
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
        let running = lock(&self.running)
            .iter()
            .filter(|(_, (running, _))| *running == id)
            .max_by_key(|(i, _)| **i)
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
        let _ = self.commands.send(Command::Refresh(Box::new(calls.into())));
    }

    /// Says no more tool uses will come (the message ended).
    pub fn close(&self) {
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
    rx: mpsc::UnboundedReceiver<ExecutorEvent>,
}

impl UseEvents {
    /// The next event: [`ExecutorEvent::Progress`], [`ExecutorEvent::Log`],
    /// or last [`ExecutorEvent::Result`]; `None` after the result (or if the
    /// executor stopped without one).
    pub async fn next(&mut self) -> Option<ExecutorEvent> {
        self.rx.recv().await
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
        let running = Running::default();
        let scheduler = Scheduler::new(calls, cx, event_tx, mode, running.clone());
        let task = tokio::spawn(scheduler.run(command_rx));
        Executor {
            handle: ExecutorHandle {
                commands,
                abort,
                running,
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
    Queued(Box<Prepared>),
    Running { cancel: CancellationToken },
    Done(Box<ToolResult>),
    Emitted,
}

struct Tracked {
    id: String,
    name: String,
    state: State,
    /// Where its progress, log lines and result go, when submitted.
    reply: Option<mpsc::UnboundedSender<ExecutorEvent>>,
}

/// Work the scheduler polls itself: the classification of a use whose
/// tool declares no `classify` export, and a batch's exclusive use.
type Work = Pin<Box<dyn Future<Output = Report> + Send>>;

/// What a classification or an execution reports.
enum Report {
    Classified(usize, Box<Prepared>),
    Finished(usize, Box<Completed>, bool),
}

struct Scheduler {
    calls: Calls,
    cx: ToolContext,
    events: mpsc::UnboundedSender<ExecutorEvent>,
    reports_tx: mpsc::UnboundedSender<Report>,
    reports: mpsc::UnboundedReceiver<Report>,
    progress: ProgressSink,
    progress_rx: mpsc::Receiver<ProgressEvent>,
    logs_rx: mpsc::Receiver<LogEvent>,
    work: FuturesUnordered<Work>,
    running: Running,
    mode: Mode,
    /// The uses not yet emitted (and emitted ones behind an earlier
    /// pending use); `uses[0]` is use number `base`.
    uses: VecDeque<Tracked>,
    base: usize,
    /// How many uses run, concurrency-safe and not, and how many are done
    /// and not yet emitted: kept as counts, so deciding what may start and
    /// what may leave costs the same with 10 or 10,000 uses waiting.
    running_safe: usize,
    running_exclusive: usize,
    ready: usize,
    started: Instant,
    batch: CancellationToken,
    interrupted: bool,
    sibling_failed: Option<String>,
}

impl Scheduler {
    fn new(
        calls: Calls,
        cx: ToolContext,
        events: mpsc::UnboundedSender<ExecutorEvent>,
        mode: Mode,
        running: Running,
    ) -> Self {
        let (reports_tx, reports) = mpsc::unbounded_channel();
        let (progress, progress_rx) = ProgressSink::channel(PROGRESS_BUFFER);
        let (progress, logs_rx) = progress.with_logs(LOG_BUFFER);
        let batch = cx.abort_handle().child_token();
        Scheduler {
            calls,
            cx,
            events,
            reports_tx,
            reports,
            progress,
            progress_rx,
            logs_rx,
            work: FuturesUnordered::new(),
            running,
            mode,
            uses: VecDeque::new(),
            base: 0,
            running_safe: 0,
            running_exclusive: 0,
            ready: 0,
            started: Instant::now(),
            batch,
            interrupted: false,
            sibling_failed: None,
        }
    }

    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) -> ToolContext {
        let abort = self.cx.abort_handle().clone();
        let mut closed = false;
        loop {
            if closed && self.uses.is_empty() {
                break;
            }
            tokio::select! {
                command = commands.recv(), if !closed => match command {
                    Some(Command::Add(tool_use, reply)) => self.add(tool_use, reply),
                    Some(Command::AddFailed(tool_use, error)) => self.add_failed(tool_use, error),
                    Some(Command::Cancel(id)) => self.cancel(&id),
                    Some(Command::Refresh(calls)) => {
                        self.cx.set_tools(calls.tools.clone());
                        self.calls = *calls;
                    }
                    Some(Command::Close) | None => closed = true,
                },
                Some(report) = self.work.next(), if !self.work.is_empty() => self.report(report),
                Some(report) = self.reports.recv() => self.report(report),
                Some(progress) = self.progress_rx.recv() => self.forward_progress(progress),
                Some(log) = self.logs_rx.recv() => self.forward_log(log),
                () = abort.cancelled(), if !self.interrupted => self.interrupt(),
            }
            self.start_what_can_start();
            self.emit_ready();
        }
        self.forward_sent();
        self.cx
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
        let to = self.reply_of(&progress.tool_use_id);
        let _ = to.send(ExecutorEvent::Progress(progress));
    }

    fn forward_log(&self, log: LogEvent) {
        let to = self.reply_of(&log.tool_use_id);
        let _ = to.send(ExecutorEvent::Log(log));
    }

    /// Where the events of the latest use with this id go: its own channel
    /// when it was submitted, else the executor's.
    fn reply_of(&self, id: &str) -> &mpsc::UnboundedSender<ExecutorEvent> {
        self.uses
            .iter()
            .rev()
            .find(|u| u.id == id)
            .and_then(|u| u.reply.as_ref())
            .unwrap_or(&self.events)
    }

    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    fn add(&mut self, tool_use: ToolUse, reply: Option<mpsc::UnboundedSender<ExecutorEvent>>) {
        let i = self.track(&tool_use, reply);
        if let Some(message) = self.cancellation_message() {
            let result = self.cancelled(i, message);
            self.set_state(i, State::Done(Box::new(result)));
            return;
        }
        // A tool without a `classify` export is classified from its
        // descriptor alone, at once: in this task, with no hand-off. One
        // that runs guest code to classify does it in a task of its own,
        // so classifications run in parallel.
        let declares_classify = self
            .cx
            .tools()
            .get(&tool_use.name)
            .is_some_and(|entry| entry.descriptor().preflight.classify);
        let policy = self.calls.policy.clone();
        let snapshot = self.cx.clone();
        let classify = async move {
            let prepared = pipeline::prepare(&policy, &snapshot, tool_use).await;
            Report::Classified(i, Box::new(prepared))
        };
        if declares_classify {
            let reports = self.reports_tx.clone();
            tokio::spawn(async move {
                let _ = reports.send(classify.await);
            });
        } else {
            self.work.push(Box::pin(classify));
        }
    }

    fn add_failed(&mut self, tool_use: ToolUse, error: CallError) {
        let i = self.track(&tool_use, None);
        let result = ToolResult::failed(tool_use.id, tool_use.name, error);
        self.set_state(i, State::Done(Box::new(result)));
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
        let Some(tracked) = self.slot(i) else { return };
        let was_done = matches!(tracked.state, State::Done(_));
        tracked.state = state;
        self.ready = self.ready + usize::from(done) - usize::from(was_done);
    }

    fn track(
        &mut self,
        tool_use: &ToolUse,
        reply: Option<mpsc::UnboundedSender<ExecutorEvent>>,
    ) -> usize {
        let _ = self.events.send(ExecutorEvent::Queued {
            tool_use_id: tool_use.id.clone(),
            at: self.now(),
        });
        self.uses.push_back(Tracked {
            id: tool_use.id.clone(),
            name: tool_use.name.clone(),
            state: State::Classifying,
            reply,
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
                lock(&self.running).remove(&i);
                if concurrency_safe {
                    self.running_safe -= 1;
                } else {
                    self.running_exclusive -= 1;
                }
                self.forward_sent();
                let at = self.now();
                let Some(tracked) = self.slot(i) else { return };
                let tool_use_id = tracked.id.clone();
                let _ = self
                    .events
                    .send(ExecutorEvent::Finished { tool_use_id, at });
                let mut result = self.cx.finish(*completed, !concurrency_safe);
                let failed_for_real =
                    matches!(&result.outcome, Err(e) if e.class != ErrorClass::Cancelled);
                let cancels_siblings = result
                    .flags
                    .is_some_and(|f| f.contains(SafetyFlags::CANCELS_SIBLINGS_ON_ERROR));
                if failed_for_real
                    && cancels_siblings
                    && self.mode == Mode::Batch
                    && self.sibling_failed.is_none()
                {
                    self.sibling_failed = Some(format!("{} ({})", result.name, result.id));
                    self.batch.cancel();
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
        if self.interrupted || self.cx.abort_handle().is_cancelled() {
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
            if matches!(self.uses[at].state, State::Classifying | State::Queued(_)) {
                let i = self.base + at;
                let result = self.cancelled(i, message.clone());
                self.set_state(i, State::Done(Box::new(result)));
            }
        }
    }

    /// Starts waiting uses, in arrival order, while the rule allows.
    fn start_what_can_start(&mut self) {
        for at in 0..self.uses.len() {
            let safe = match &self.uses[at].state {
                State::Running { .. } | State::Done(_) | State::Emitted => continue,
                State::Classifying => return,
                State::Queued(prepared) => prepared.concurrency_safe(),
            };
            let allowed = self.running_exclusive == 0 && (safe || self.running_safe == 0);
            if !allowed {
                return;
            }
            self.start(at, safe);
        }
    }

    fn start(&mut self, at: usize, concurrency_safe: bool) {
        let i = self.base + at;
        let cancel = self.batch.child_token();
        let running = State::Running {
            cancel: cancel.clone(),
        };
        let State::Queued(prepared) = std::mem::replace(&mut self.uses[at].state, running) else {
            return;
        };
        if concurrency_safe {
            self.running_safe += 1;
        } else {
            self.running_exclusive += 1;
        }
        let _ = self.events.send(ExecutorEvent::Started {
            tool_use_id: self.uses[at].id.clone(),
            at: self.now(),
        });
        lock(&self.running).insert(i, (self.uses[at].id.clone(), cancel.clone()));
        let policy = self.calls.policy.clone();
        let snapshot = self.cx.clone();
        let control = CallControl {
            progress: self.progress.clone(),
            cancel,
        };
        let run = async move {
            let completed = pipeline::execute(&policy, &snapshot, *prepared, control).await;
            Report::Finished(i, Box::new(completed), concurrency_safe)
        };
        // In a batch, an exclusive use runs in this task: nothing may start
        // beside it, its result leaves in its place whatever task ran it,
        // and a cancel or interrupt reaches its token without this task.
        // Anything else runs in a task of its own (in parallel; and in a
        // session, where results leave as they finish, a use run here
        // could be answered before an earlier result's reader woke).
        if self.mode == Mode::Batch && !concurrency_safe {
            self.work.push(Box::pin(run));
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
                        let _ = match tracked.reply.take() {
                            Some(reply) => reply.send(event),
                            None => self.events.send(event),
                        };
                    }
                }
                State::Emitted => {}
                _ if self.mode == Mode::Batch => break,
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
