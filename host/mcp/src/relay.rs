//! A `tools/call`'s events relayed to its client while it runs: progress
//! notifications and log lines, each handed to the transport before the
//! next event is read, until the result. Both eras of a call go through
//! [`Relay::until_result`]: a session's, whose events its executor sends,
//! and a 2026-07-28 call, run in the context it loaded. It knows nothing of
//! sessions, contexts or permission rounds.

use crate::mapping::logging;
use crate::turn::{cancelled_by_client, connection_closed};
use airlock_host::tool::{LogEvent, ProgressEvent};
use futures::{Stream, StreamExt};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer};
use tokio_util::sync::CancellationToken;

/// One event of a running call.
pub(crate) enum Event<R> {
    Progress(ProgressEvent),
    Log(LogEvent),
    /// The call's result, which ends it.
    Result(R),
}

/// What to do once the client cancels the call or its connection ends.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Abandon {
    /// Stop the call and answer at once.
    Return,
    /// Stop the call and wait for its result, so that what it changed
    /// can be kept.
    Wait,
}

/// How a relayed call ended.
pub(crate) enum Relayed<R> {
    /// Its result. `abandoned`: why no one reads a reply (with
    /// [`Abandon::Wait`]); `stopped`: the call stopped at a question.
    Result {
        result: R,
        abandoned: Option<ErrorData>,
        stopped: bool,
    },
    /// The client cancelled or went away, and (with [`Abandon::Return`])
    /// the result was not waited for.
    Abandoned(ErrorData),
    /// The events ended without a result.
    NoResult,
}

/// Where one call's events go, and what ends it early.
pub(crate) struct Relay<'a> {
    peer: &'a Peer<RoleServer>,
    cancelled: &'a CancellationToken,
    closed: &'a CancellationToken,
    progress: Option<Progress>,
}

impl<'a> Relay<'a> {
    /// The relay of the call `context` requested, which ends early when
    /// the client cancels it or `closed` (its connection's end) fires.
    pub(crate) fn new(
        context: &'a RequestContext<RoleServer>,
        closed: &'a CancellationToken,
    ) -> Self {
        Relay {
            peer: &context.peer,
            cancelled: &context.ct,
            closed,
            progress: context.meta.get_progress_token().map(|token| Progress {
                token,
                last: 0.0,
                count: 0.0,
            }),
        }
    }

    /// Relays `events` until the result. Log lines go out at `log_level`
    /// or above (asked at each line: a session's can change meanwhile;
    /// `None`, not at all). The client's cancel, its connection's end and
    /// `stop` each call `cancel` once; after the first two, `abandon`
    /// says whether the result is still waited for.
    pub(crate) async fn until_result<R>(
        mut self,
        events: impl Stream<Item = Event<R>>,
        log_level: impl Fn() -> Option<u8>,
        stop: impl Future<Output = ()>,
        mut cancel: impl FnMut(),
        abandon: Abandon,
    ) -> Relayed<R> {
        let mut abandoned = None;
        let mut stopped = false;
        tokio::pin!(events, stop);
        loop {
            let gone = tokio::select! {
                event = events.next() => match event {
                    Some(Event::Result(result)) => {
                        return Relayed::Result { result, abandoned, stopped };
                    }
                    Some(Event::Progress(event)) => {
                        if let Some(param) = self.progress.as_mut().and_then(|p| p.next(&event)) {
                            let _ = self.peer.notify_progress(param).await;
                        }
                        continue;
                    }
                    Some(Event::Log(event)) => {
                        if let Some(level) = log_level() {
                            logging::send(self.peer, &event, level).await;
                        }
                        continue;
                    }
                    None => return abandoned.map_or(Relayed::NoResult, Relayed::Abandoned),
                },
                () = self.cancelled.cancelled(), if abandoned.is_none() => cancelled_by_client(),
                () = self.closed.cancelled(), if abandoned.is_none() => connection_closed(),
                () = &mut stop, if !stopped => {
                    cancel();
                    stopped = true;
                    continue;
                }
            };
            cancel();
            if abandon == Abandon::Return {
                return Relayed::Abandoned(gone);
            }
            abandoned = Some(gone);
        }
    }
}

/// A call's progress notifications: its token and what was sent.
struct Progress {
    token: ProgressToken,
    last: f64,
    count: f64,
}

impl Progress {
    /// The notification for `event`: the fraction done (of 1) when the
    /// tool says it, else a count of updates; none when the value would go
    /// backwards.
    fn next(&mut self, event: &ProgressEvent) -> Option<ProgressNotificationParam> {
        self.count += 1.0;
        let (value, total) = match event.fraction {
            Some(f) => (f64::from(f.clamp(0.0, 1.0)), Some(1.0)),
            None => (self.last.max(self.count), None),
        };
        if value < self.last || (value == self.last && self.count > 1.0) {
            return None;
        }
        self.last = value;
        let mut param = ProgressNotificationParam::new(self.token.clone(), value)
            .with_message(event.message.clone());
        if let Some(total) = total {
            param = param.with_total(total);
        }
        Some(param)
    }
}
