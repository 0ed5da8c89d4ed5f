//! [`FairShare`]: the instance pool's slots handed out fairly. Waiters
//! queue per tenant (an agent context), and a freed slot goes to the next
//! tenant in turn, so one agent with a thousand calls waiting cannot hold
//! back another agent's one call for longer than one turn of the queue.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Who a waiter belongs to.
pub(crate) type Tenant = usize;

/// A number of slots shared fairly among tenants.
#[derive(Debug)]
pub(crate) struct FairShare {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    free: usize,
    /// The waiters of each tenant, oldest first.
    waiting: HashMap<Tenant, VecDeque<oneshot::Sender<FairPermit>>>,
    /// Tenants with waiters, in the order they get their next slot.
    turns: VecDeque<Tenant>,
}

/// One slot, given back when dropped.
#[derive(Debug)]
pub(crate) struct FairPermit {
    /// `None` once the slot went back to the pool.
    share: Option<Arc<FairShare>>,
}

impl Drop for FairPermit {
    fn drop(&mut self) {
        if let Some(share) = self.share.take() {
            share.release();
        }
    }
}

impl FairShare {
    pub(crate) fn new(slots: usize) -> Arc<FairShare> {
        Arc::new(FairShare {
            state: Mutex::new(State {
                free: slots,
                ..State::default()
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Nothing panics while the lock is held.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a slot for `tenant`. Dropping the future gives up the wait
    /// (a slot handed to it meanwhile passes on).
    pub(crate) async fn acquire(self: &Arc<Self>, tenant: Tenant) -> FairPermit {
        let rx = {
            let mut guard = self.lock();
            let state = &mut *guard;
            // Free slots and waiters never coexist: a freed slot goes to a
            // waiter first.
            if state.free > 0 {
                state.free -= 1;
                return FairPermit {
                    share: Some(self.clone()),
                };
            }
            let (tx, rx) = oneshot::channel();
            let queue = state.waiting.entry(tenant).or_default();
            if queue.is_empty() {
                state.turns.push_back(tenant);
            }
            queue.push_back(tx);
            rx
        };
        match rx.await {
            Ok(permit) => permit,
            // A sender is dropped unsent only once its receiver is gone,
            // so this cannot happen while the receiver waits; wait again
            // rather than hold a slot nobody handed over.
            Err(_) => Box::pin(self.acquire(tenant)).await,
        }
    }

    /// Gives a slot to the next tenant in turn, or back to the pool.
    fn release(self: &Arc<Self>) {
        let mut permit = FairPermit {
            share: Some(self.clone()),
        };
        let mut guard = self.lock();
        let state = &mut *guard;
        while let Some(tenant) = state.turns.pop_front() {
            let Some(queue) = state.waiting.get_mut(&tenant) else {
                continue;
            };
            while let Some(tx) = queue.pop_front() {
                match tx.send(permit) {
                    Ok(()) => {
                        if queue.is_empty() {
                            state.waiting.remove(&tenant);
                        } else {
                            state.turns.push_back(tenant);
                        }
                        return;
                    }
                    // The waiter gave up; try its tenant's next one.
                    Err(back) => permit = back,
                }
            }
            state.waiting.remove(&tenant);
        }
        state.free += 1;
        drop(guard);
        // The slot went back to the pool, not to a waiter: dropping this
        // permit must not release it a second time.
        permit.share = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_tenant_with_many_waiters_does_not_hold_back_another() {
        let share = FairShare::new(1);
        let held = share.acquire(1).await;
        let mut flood = Vec::new();
        let order = Arc::new(Mutex::new(Vec::new()));
        for i in 0..100 {
            let (share, order) = (share.clone(), order.clone());
            flood.push(tokio::spawn(async move {
                let _p = share.acquire(1).await;
                order.lock().unwrap().push(format!("flood-{i}"));
            }));
        }
        tokio::task::yield_now().await;
        while share.lock().waiting.get(&1).map_or(0, VecDeque::len) < 100 {
            tokio::task::yield_now().await;
        }
        let canary = {
            let (share, order) = (share.clone(), order.clone());
            tokio::spawn(async move {
                let _p = share.acquire(2).await;
                order.lock().unwrap().push("canary".to_string());
            })
        };
        while !share.lock().waiting.contains_key(&2) {
            tokio::task::yield_now().await;
        }
        drop(held);
        canary.await.unwrap();
        for f in flood {
            f.await.unwrap();
        }
        let order = order.lock().unwrap();
        let at = order.iter().position(|s| s == "canary").unwrap();
        assert!(at <= 1, "the canary ran at position {at}: {order:?}");
        assert_eq!(order.len(), 101);
        assert_eq!(share.lock().free, 1, "every slot came back");
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_passes_its_slot_on() {
        let share = FairShare::new(1);
        let held = share.acquire(1).await;
        let gave_up = {
            let share = share.clone();
            tokio::spawn(async move {
                let _ = share.acquire(2).await;
            })
        };
        while !share.lock().waiting.contains_key(&2) {
            tokio::task::yield_now().await;
        }
        gave_up.abort();
        let _ = gave_up.await;
        drop(held);
        let again = tokio::time::timeout(std::time::Duration::from_secs(5), share.acquire(3))
            .await
            .expect("the slot came back");
        drop(again);
        assert_eq!(share.lock().free, 1);
    }
}
