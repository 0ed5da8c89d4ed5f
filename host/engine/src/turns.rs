//! CPU turns: how many guests run wasm at once, handed out fairly among
//! agent contexts ([`FairShare`]). A guest takes a turn before its code
//! first runs, gives it back when it waits for anything but a turn (a host
//! future: a sleep, I/O; [`crate::repoll`] sees it) or ends, and at every
//! epoch tick gives it back and waits for the next in its context's turn.
//! So a context's thousand spinning guests keep at most
//! [`turns`]`()` workers' worth of guests runnable, not a thousand, and
//! another context's call waits at most about a tick for the CPU.

use crate::fair::{FairPermit, FairShare, Tenant};
use std::sync::{Arc, Mutex};

/// How many guests run wasm at once: twice the threads the machine runs
/// at once, so a guest waiting on the OS does not leave a core idle.
pub(crate) fn turns() -> usize {
    std::thread::available_parallelism().map_or(2, |n| 2 * n.get())
}

/// One guest phase's claim on the CPU turns.
pub(crate) struct Turn {
    share: Arc<FairShare>,
    tenant: Tenant,
    held: Mutex<Option<FairPermit>>,
}

impl Turn {
    pub(crate) fn new(share: Arc<FairShare>, tenant: Tenant) -> Arc<Turn> {
        Arc::new(Turn {
            share,
            tenant,
            held: Mutex::new(None),
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Option<FairPermit>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives back the turn held, if any, and waits for the next one.
    pub(crate) async fn take(&self) {
        self.give_back();
        let permit = self.share.acquire(self.tenant).await;
        *self.held() = Some(permit);
    }

    /// Gives back the turn held, if any.
    pub(crate) fn give_back(&self) {
        let permit = self.held().take();
        drop(permit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_turn_given_back_goes_to_another_context_first() {
        let share = FairShare::with_share(1, 1);
        let (a, b) = (Turn::new(share.clone(), 1), Turn::new(share.clone(), 2));
        a.take().await;
        let b_waits = {
            let b = b.clone();
            tokio::spawn(async move { b.take().await })
        };
        tokio::task::yield_now().await;
        // `a` gives its turn back and asks again: `b` has it first.
        let a_again = {
            let a = a.clone();
            tokio::spawn(async move { a.take().await })
        };
        tokio::time::timeout(std::time::Duration::from_secs(1), b_waits)
            .await
            .expect("b got the turn")
            .unwrap();
        tokio::task::yield_now().await;
        assert!(!a_again.is_finished(), "a waits while b holds the turn");
        b.give_back();
        tokio::time::timeout(std::time::Duration::from_secs(1), a_again)
            .await
            .expect("a got it back")
            .unwrap();
    }
}
