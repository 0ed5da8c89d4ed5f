//! A call's turn on its connection: `Turns` hands the turns out in the
//! order the calls were received, `Received` carries a call's turn (and
//! where its events wait for its reply's write, `Replies`) from the
//! transport to the handler, which waits for it (`wait_turn`). A leaf: it
//! knows nothing of the transport or the session.

use crate::lock;
use airlock_host::UseEvents;
use rmcp::ErrorData;
use rmcp::model::{ErrorCode, RequestId};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Cancelled when the connection a request came on ends.
#[derive(Clone)]
pub(crate) struct Closed(pub(crate) CancellationToken);

/// A `subscriptions/listen` that rmcp has not yet handed to the server.
/// rmcp acknowledges a listen first and waits to learn that the
/// acknowledgement was written, which only its running loop tells: a
/// connection's end seen by that loop first left the listen waiting out
/// rmcp's 5 s drain. [`Ordered`](crate::turns::Ordered) gives rmcp the end
/// only once each listen was handed over ([`Acknowledging::handed_over`])
/// or dropped unanswered.
#[derive(Clone)]
pub(crate) struct Acknowledging(pub(crate) Arc<Mutex<Option<mpsc::Sender<()>>>>);

impl Acknowledging {
    /// The listen reached the server: the connection's end no longer
    /// waits for it.
    pub(crate) fn handed_over(&self) {
        lock(&self.0).take();
    }
}

/// What a `tools/call` request carries from [`Ordered`] to the handler.
#[derive(Clone)]
pub(crate) struct Received {
    pub(crate) turn: Turn,
    /// The request's id, and where its events are held until its reply
    /// is written.
    pub(crate) id: RequestId,
    pub(crate) replies: Replies<UseEvents>,
    /// Cancelled when the connection ends.
    pub(crate) closed: CancellationToken,
}

impl Received {
    /// Keeps the call's `events` (submitted held) until its reply is
    /// written: dropped at once if it already was, or will never be.
    pub(crate) fn hold_until_written(&self, events: UseEvents) {
        self.replies.hold(&self.id, events);
    }
}

/// The calls a connection received whose replies are not yet written,
/// each with what keeps its place in the executor once its handler has
/// its result (its events, submitted held). That is given up once the
/// reply is written, when the client cancels the call (rmcp then drops
/// its reply) or when the connection ends: so a call that could not start
/// beside it starts only then, and its reply never goes out first, however
/// late the task that returns this one's reply to rmcp runs.
pub(crate) struct Replies<H>(pub(crate) Arc<Mutex<HashMap<RequestId, Option<H>>>>);

impl<H> Clone for Replies<H> {
    fn clone(&self) -> Self {
        Replies(self.0.clone())
    }
}

impl<H> Default for Replies<H> {
    fn default() -> Self {
        Replies(Arc::default())
    }
}

impl<H> Replies<H> {
    /// A call with this id was received.
    pub(crate) fn open(&self, id: RequestId) {
        // A call whose id the client reused lets go of what it held.
        let reused = lock(&self.0).insert(id, None);
        drop(reused);
    }

    /// Keeps `held` until call `id`'s reply is written; lets go of it at
    /// once if the call is over.
    pub(crate) fn hold(&self, id: &RequestId, held: H) {
        let over = match lock(&self.0).get_mut(id) {
            Some(slot) => {
                *slot = Some(held);
                None
            }
            None => Some(held),
        };
        drop(over);
    }

    /// Call `id` is over: what it held, to be let go of.
    pub(crate) fn close(&self, id: &RequestId) -> Option<H> {
        lock(&self.0).remove(id).flatten()
    }
}

/// Which turn comes next on a connection; turns given up before their time
/// (a request that never reached the executor) are skipped when it comes.
/// Only the request whose turn comes is woken: with many calls in flight,
/// waking every waiter at each turn cost each call a pass over the others.
#[derive(Default)]
pub(crate) struct Turns {
    /// How many calls the connection received: the next one's number.
    pub(crate) received: u64,
    pub(crate) next: u64,
    pub(crate) given_up: BTreeSet<u64>,
    pub(crate) waiting: HashMap<u64, oneshot::Sender<()>>,
}

impl Turns {
    pub(crate) fn done(&mut self, number: u64) {
        self.waiting.remove(&number);
        if number != self.next {
            self.given_up.insert(number);
            return;
        }
        self.next += 1;
        while self.given_up.remove(&self.next) {
            self.next += 1;
        }
        if let Some(waiting) = self.waiting.remove(&self.next) {
            let _ = waiting.send(());
        }
    }
}

/// One request's turn: [`Turn::wait`] returns once every earlier request
/// took or gave up its own; taking it ([`Turn::take`], or dropping the
/// last clone) lets the next one go.
#[derive(Clone)]
pub(crate) struct Turn(pub(crate) Arc<TurnInner>);

pub(crate) struct TurnInner {
    pub(crate) number: u64,
    pub(crate) turns: Arc<Mutex<Turns>>,
    pub(crate) taken: AtomicBool,
}

impl Turn {
    pub(crate) async fn wait(&self) {
        let number = self.0.number;
        let woken = {
            let mut turns = lock(&self.0.turns);
            if turns.next == number {
                return;
            }
            let (wake, woken) = oneshot::channel();
            let earlier = turns.waiting.insert(number, wake);
            debug_assert!(earlier.is_none(), "turn {number} is waited for once");
            woken
        };
        // Sent when this turn comes; dropped unsent only once this turn
        // was taken or given up (through a clone), so it is over either way.
        let _ = woken.await;
    }

    pub(crate) fn take(&self) {
        self.0.take();
    }

    /// Whether the connection received a call after this one.
    pub(crate) fn followed(&self) -> bool {
        lock(&self.0.turns).received > self.0.number + 1
    }
}

impl TurnInner {
    pub(crate) fn take(&self) {
        if !self.taken.swap(true, Ordering::AcqRel) {
            lock(&self.turns).done(self.number);
        }
    }
}

impl Drop for TurnInner {
    fn drop(&mut self) {
        self.take();
    }
}

/// Waits for the turn of a call `received` on a connection (without one,
/// none is waited for); returns the token the connection's end cancels, or
/// the error for a call given up before its turn.
pub(crate) async fn wait_turn(
    received: Option<&Received>,
    cancelled: &CancellationToken,
) -> Result<CancellationToken, ErrorData> {
    let Some(received) = received else {
        return Ok(CancellationToken::new());
    };
    waiting(received.turn.wait(), cancelled, &received.closed).await?;
    Ok(received.closed.clone())
}

/// Waits for `done`, unless the client cancels the call or closes the
/// connection first.
pub(crate) async fn waiting<T>(
    done: impl Future<Output = T>,
    cancelled: &CancellationToken,
    closed: &CancellationToken,
) -> Result<T, ErrorData> {
    tokio::select! {
        done = done => Ok(done),
        () = cancelled.cancelled() => Err(cancelled_by_client()),
        () = closed.cancelled() => Err(connection_closed()),
    }
}

pub(crate) fn cancelled_by_client() -> ErrorData {
    ErrorData::new(ErrorCode::INTERNAL_ERROR, "cancelled by the client", None)
}

pub(crate) fn connection_closed() -> ErrorData {
    ErrorData::new(
        ErrorCode::INTERNAL_ERROR,
        "cancelled: the client closed the connection",
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_comes_after_every_earlier_one_was_taken_or_given_up() {
        let mut turns = Turns::default();
        turns.done(2);
        turns.done(1);
        assert_eq!(turns.next, 0, "0 is still out");
        turns.done(0);
        assert_eq!(turns.next, 3);
        turns.done(4);
        assert_eq!(turns.next, 3);
        turns.done(3);
        assert_eq!((turns.next, turns.given_up.len()), (5, 0));
    }
}
