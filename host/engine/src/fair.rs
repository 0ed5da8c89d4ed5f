//! [`FairShare`]: the instance pool's slots handed out fairly. Waiters
//! queue per tenant (an agent context), and a freed slot goes to the next
//! tenant in turn, so one agent with a thousand calls waiting cannot hold
//! back another agent's one call for longer than one turn of the queue.
//! No tenant holds more than its share ([`FairShare::per_tenant`]): the
//! rest is a reserve that another tenant gets at once, even while one
//! tenant's calls hold their slots for long.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Who a waiter belongs to.
pub(crate) type Tenant = usize;

/// A number of slots shared fairly among tenants.
#[derive(Debug)]
pub(crate) struct FairShare {
    /// The most slots one tenant holds at once.
    per_tenant: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    free: usize,
    /// The slots each tenant holds (tenants holding none are absent).
    held: HashMap<Tenant, usize>,
    /// The waiters of each tenant, oldest first.
    waiting: HashMap<Tenant, VecDeque<oneshot::Sender<FairPermit>>>,
    /// Tenants with waiters, in the order they get their next slot.
    turns: VecDeque<Tenant>,
}

impl State {
    fn holds(&self, tenant: Tenant) -> usize {
        self.held.get(&tenant).copied().unwrap_or(0)
    }

    fn take(&mut self, tenant: Tenant) {
        *self.held.entry(tenant).or_default() += 1;
    }

    fn give_back(&mut self, tenant: Tenant) {
        if let Some(n) = self.held.get_mut(&tenant) {
            *n -= 1;
            if *n == 0 {
                self.held.remove(&tenant);
            }
        }
    }
}

/// One slot, given back when dropped.
#[derive(Debug)]
pub(crate) struct FairPermit {
    /// `None` once the slot went back to the pool.
    share: Option<Arc<FairShare>>,
    tenant: Tenant,
}

impl Drop for FairPermit {
    fn drop(&mut self) {
        if let Some(share) = self.share.take() {
            share.release(self.tenant);
        }
    }
}

impl FairShare {
    /// `slots` slots, of which one tenant holds at most
    /// [`FairShare::per_tenant`].
    pub(crate) fn new(slots: usize) -> Arc<FairShare> {
        Arc::new(FairShare {
            per_tenant: FairShare::per_tenant(slots),
            state: Mutex::new(State {
                free: slots,
                ..State::default()
            }),
        })
    }

    /// The most of `slots` one tenant holds at once: all but a reserve of
    /// a quarter (at least one slot, when there are two or more).
    pub(crate) fn per_tenant(slots: usize) -> usize {
        if slots < 2 {
            slots
        } else {
            slots - (slots / 4).max(1)
        }
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
            // A free slot and a waiter coexist only while the waiter's
            // tenant holds its whole share: a freed slot goes to a waiter
            // that may take it first.
            if state.free > 0 && state.holds(tenant) < self.per_tenant {
                state.free -= 1;
                state.take(tenant);
                return FairPermit {
                    share: Some(self.clone()),
                    tenant,
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

    /// Takes `from`'s slot back and hands out what is free.
    fn release(self: &Arc<Self>, from: Tenant) {
        let mut guard = self.lock();
        let state = &mut *guard;
        state.give_back(from);
        state.free += 1;
        self.dispatch(state);
    }

    /// Hands free slots to waiters, a slot a turn, to tenants that hold
    /// less than their share; those holding their whole share keep their
    /// place in the turns.
    fn dispatch(self: &Arc<Self>, state: &mut State) {
        // Tenants looked at in a row without a slot handed to one.
        let mut passed = 0;
        while state.free > 0 && passed < state.turns.len() {
            let Some(tenant) = state.turns.pop_front() else {
                break;
            };
            if state.holds(tenant) >= self.per_tenant {
                state.turns.push_back(tenant);
                passed += 1;
                continue;
            }
            let mut handed = false;
            if let Some(queue) = state.waiting.get_mut(&tenant) {
                while let Some(tx) = queue.pop_front() {
                    let permit = FairPermit {
                        share: Some(self.clone()),
                        tenant,
                    };
                    match tx.send(permit) {
                        Ok(()) => {
                            handed = true;
                            break;
                        }
                        // The waiter gave up: the permit comes back, and
                        // must not release the slot it never held.
                        Err(mut back) => back.share = None,
                    }
                }
            }
            if handed {
                state.free -= 1;
                state.take(tenant);
                passed = 0;
            }
            if state.waiting.get(&tenant).is_some_and(|q| !q.is_empty()) {
                state.turns.push_back(tenant);
            } else {
                state.waiting.remove(&tenant);
            }
        }
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
        assert!(share.lock().held.is_empty());
    }

    /// A tenant whose calls hold their slots for long leaves a reserve:
    /// another tenant gets a slot at once, and the first tenant's waiters
    /// get theirs as its own slots come back.
    #[tokio::test]
    async fn a_tenant_holds_no_more_than_its_share() {
        let share = FairShare::new(8);
        assert_eq!(FairShare::per_tenant(8), 6);
        let mut held: Vec<FairPermit> = Vec::new();
        for _ in 0..6 {
            held.push(share.acquire(1).await);
        }
        let seventh = {
            let share = share.clone();
            tokio::spawn(async move { share.acquire(1).await })
        };
        while !share.lock().waiting.contains_key(&1) {
            tokio::task::yield_now().await;
        }
        assert_eq!(share.lock().free, 2, "the reserve stays free");
        // Another tenant takes from the reserve without waiting.
        let other = tokio::time::timeout(std::time::Duration::from_millis(100), share.acquire(2))
            .await
            .expect("a slot of the reserve");
        // A slot another tenant gives back does not go to tenant 1, at
        // its share; one of its own does.
        drop(other);
        tokio::task::yield_now().await;
        assert!(!seventh.is_finished());
        assert_eq!(share.lock().free, 2);
        held.pop();
        let seventh = seventh.await.unwrap();
        assert_eq!(share.lock().holds(1), 6);
        drop(seventh);
        held.clear();
        assert_eq!(share.lock().free, 8);
        assert!(share.lock().held.is_empty());
    }

    #[test]
    fn shares_leave_a_reserve() {
        assert_eq!(FairShare::per_tenant(0), 0);
        assert_eq!(FairShare::per_tenant(1), 1);
        assert_eq!(FairShare::per_tenant(2), 1);
        assert_eq!(FairShare::per_tenant(1000), 750);
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
        assert!(share.lock().held.is_empty());
    }
}
