//! The scheduler: the task that classifies the uses handed to it, starts
//! them in order by their flags (concurrency-safe ones together, an
//! exclusive one alone), runs them or takes back the reports of those that
//! run elsewhere, and emits results in order (a batch) or as they finish (a
//! session).

use super::*;

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

pub(super) struct Scheduler {
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
    pub(super) fn new(
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

    pub(super) async fn serve(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
    ) -> ToolContext {
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
