//! [`Memory`]: contexts in this process (the default store).

use super::{ContextStore, Fields, StoreError, apply};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many writes between sweeps of expired contexts.
const SWEEP_EVERY: u64 = 1024;

/// Contexts in this process: lost when it ends, not seen by replicas.
#[derive(Default)]
pub struct Memory {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    contexts: HashMap<String, (Fields, Instant)>,
    writes: u64,
}

impl Inner {
    /// Context `id` if it has not expired (an expired one is dropped).
    fn live(&mut self, id: &str, now: Instant) -> Option<&mut (Fields, Instant)> {
        if self
            .contexts
            .get(id)
            .is_some_and(|(_, until)| *until <= now)
        {
            self.contexts.remove(id);
        }
        self.contexts.get_mut(id)
    }

    fn wrote(&mut self, now: Instant) {
        self.writes += 1;
        if self.writes.is_multiple_of(SWEEP_EVERY) {
            self.contexts.retain(|_, (_, until)| *until > now);
        }
    }
}

impl Memory {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets `set` and removes `remove` in context `id`, creating it if
    /// `create` (an expired one starts anew); `false`, and nothing
    /// written, when it does not exist and is not to be created.
    fn write(
        &self,
        id: &str,
        create: bool,
        set: &Fields,
        remove: &[String],
        ttl: Duration,
    ) -> bool {
        let now = Instant::now();
        let mut inner = self.lock();
        // An expired context is dropped here: a merge starts it anew.
        if inner.live(id, now).is_none() && !create {
            return false;
        }
        let (fields, until) = inner
            .contexts
            .entry(id.to_string())
            .or_insert_with(|| (Fields::new(), now));
        apply(fields, set, remove);
        *until = now + ttl;
        inner.wrote(now);
        true
    }
}

#[async_trait]
impl ContextStore for Memory {
    async fn load(&self, id: &str, ttl: Duration) -> Result<Option<Fields>, StoreError> {
        let now = Instant::now();
        Ok(self.lock().live(id, now).map(|(fields, until)| {
            *until = now + ttl;
            fields.clone()
        }))
    }

    async fn create(&self, id: &str, fields: &Fields, ttl: Duration) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut inner = self.lock();
        inner
            .contexts
            .insert(id.to_string(), (fields.clone(), now + ttl));
        inner.wrote(now);
        Ok(())
    }

    async fn update(
        &self,
        id: &str,
        set: &Fields,
        remove: &[String],
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        Ok(self.write(id, false, set, remove, ttl))
    }

    async fn merge(
        &self,
        id: &str,
        set: &Fields,
        remove: &[String],
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.write(id, true, set, remove, ttl);
        Ok(())
    }

    async fn remove(&self, id: &str) -> Result<(), StoreError> {
        self.lock().contexts.remove(id);
        Ok(())
    }
}
