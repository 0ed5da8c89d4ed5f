//! The feeding side of an executor: [`ExecutorHandle`] adds uses (to the
//! scheduler, or to run in the task that reads their events), cancels and
//! refreshes; [`Submit`] and [`UseEvents`] carry one use's events to its
//! reader; `Direct` runs a use in that reader's task; `Place` and
//! `Unscheduled` give a use's place back however its reader goes away.

use super::*;

/// The feeding side of an [`Executor`]: cheap to clone, so one task can
/// feed tool uses while another reads the events.
#[derive(Clone)]
pub struct ExecutorHandle {
    pub(super) commands: mpsc::UnboundedSender<Command>,
    pub(super) abort: CancellationToken,
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for ExecutorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorHandle")
            .field("mode", &self.inner.mode)
            .finish_non_exhaustive()
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
pub(super) struct Reply {
    pub(super) tx: mpsc::UnboundedSender<(ExecutorEvent, Option<Place>)>,
    pub(super) held: bool,
}

/// A started use's place among the running uses, given up when dropped:
/// a held use's is kept by its [`UseEvents`] after the use is done.
pub(super) struct Place {
    pub(super) inner: Arc<Inner>,
    pub(super) concurrency_safe: bool,
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
