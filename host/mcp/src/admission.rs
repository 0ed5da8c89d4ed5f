//! Which HTTP connections are served. A connection is *pending* from its
//! accept until it sends a request the server takes (a whole head, with a
//! valid access token when tokens are required), and *established* after.
//! Pending connections have a bound of their own: a newcomer past it
//! closes the oldest pending one, so sockets that send nothing, send
//! slowly, or send no valid token cannot keep a caller out. Established
//! connections hold one of `max_connections` slots; one that is
//! established when none is free waits for a slot. How long a request's
//! head may take (which also ends a keep-alive connection idle that long)
//! is hyper's header timeout, set by the server.
//!
//! Knows nothing of MCP or tokens: the front says when a connection made
//! progress ([`Connection::establish`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The most pending connections kept at once, whatever the cap on
/// established ones.
pub(crate) const MAX_PENDING: usize = 256;

/// The connections of one server.
pub(crate) struct Admission {
    /// Pending connections, oldest first.
    pending: Mutex<VecDeque<(u64, CancellationToken)>>,
    max_pending: usize,
    established: Arc<Semaphore>,
    next: AtomicU64,
}

/// One accepted connection.
pub(crate) struct Connection {
    admission: Arc<Admission>,
    id: u64,
    evicted: CancellationToken,
    slot: tokio::sync::OnceCell<OwnedSemaphorePermit>,
}

impl Admission {
    /// `max_connections` established connections at once, and as many
    /// pending (at most [`MAX_PENDING`]).
    pub(crate) fn new(max_connections: usize) -> Arc<Admission> {
        let max = max_connections.max(1);
        Arc::new(Admission {
            pending: Mutex::default(),
            max_pending: max.min(MAX_PENDING),
            established: Arc::new(Semaphore::new(max)),
            next: AtomicU64::new(0),
        })
    }

    /// A new pending connection; the oldest pending one is closed when
    /// there are too many.
    pub(crate) fn admit(self: &Arc<Admission>) -> Connection {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let evicted = CancellationToken::new();
        let mut pending = self.pending();
        if pending.len() >= self.max_pending
            && let Some((_, oldest)) = pending.pop_front()
        {
            tracing::debug!("closing the oldest HTTP connection that sent no request yet");
            oldest.cancel();
        }
        pending.push_back((id, evicted.clone()));
        Connection {
            admission: self.clone(),
            id,
            evicted,
            slot: tokio::sync::OnceCell::new(),
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, VecDeque<(u64, CancellationToken)>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn forget(&self, id: u64) {
        self.pending().retain(|(pending, _)| *pending != id);
    }
}

impl Connection {
    /// Resolves when the connection is closed to make room for a newer
    /// one (only ever while it is pending).
    pub(crate) async fn evicted(&self) {
        self.evicted.cancelled().await
    }

    /// The connection sent a request the server takes: it is pending no
    /// more, and holds an established slot (waiting for one to free).
    pub(crate) async fn establish(&self) {
        self.slot
            .get_or_init(|| async {
                self.admission.forget(self.id);
                self.admission
                    .established
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed")
            })
            .await;
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if self.slot.get().is_none() {
            self.admission.forget(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_oldest_pending_connection_makes_room_and_established_ones_stay() {
        let admission = Admission::new(2);
        let first = admission.admit();
        first.establish().await;
        let second = admission.admit();
        let third = admission.admit();
        // Two pending at most: a fourth closes the oldest pending (the
        // second), never the established first.
        let fourth = admission.admit();
        assert!(second.evicted.is_cancelled());
        assert!(!first.evicted.is_cancelled() && !third.evicted.is_cancelled());
        // One established slot is left; a third established waits.
        third.establish().await;
        let waiting =
            tokio::time::timeout(std::time::Duration::from_millis(50), fourth.establish()).await;
        assert!(waiting.is_err(), "no slot was free");
        drop(first);
        tokio::time::timeout(std::time::Duration::from_secs(1), fourth.establish())
            .await
            .expect("a closed connection frees its slot");
        drop(second);
        assert!(admission.pending().is_empty());
    }
}
