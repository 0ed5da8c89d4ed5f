//! Who opened each HTTP session, and how many sessions each caller (an
//! [`crate::auth::Identity::key`]) has open, for the per-caller share of
//! the session cap: one token holder's sessions cannot fill the server.
//!
//! A place is reserved before a session is opened ([`Callers::reserve`]),
//! bound to the session once it is ([`Callers::bind`]) or given back when
//! it is not ([`Callers::unreserve`]), and freed when the session ends
//! ([`Callers::end`], exactly once whichever of its end or its binding
//! comes first).

use std::collections::HashMap;
use std::sync::Mutex;

/// The sessions' openers.
#[derive(Debug, Default)]
pub(crate) struct Callers {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Each open session's opener.
    of: HashMap<String, String>,
    /// Sessions open or being opened, per caller (callers with none are
    /// absent).
    open: HashMap<String, usize>,
}

impl Inner {
    fn drop_one(&mut self, caller: &str) {
        if let Some(n) = self.open.get_mut(caller) {
            *n -= 1;
            if *n == 0 {
                self.open.remove(caller);
            }
        }
    }
}

impl Callers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a place for one more session of `caller`, unless it has `max`.
    pub(crate) fn reserve(&self, caller: &str, max: usize) -> bool {
        let mut inner = self.lock();
        let n = inner.open.entry(caller.to_owned()).or_default();
        if *n >= max {
            if *n == 0 {
                inner.open.remove(caller);
            }
            return false;
        }
        *n += 1;
        true
    }

    /// Gives back a place no session was opened in.
    pub(crate) fn unreserve(&self, caller: &str) {
        self.lock().drop_one(caller);
    }

    /// The session `id`, opened in a place `caller` reserved.
    pub(crate) fn bind(&self, id: &str, caller: &str) {
        self.lock().of.insert(id.to_owned(), caller.to_owned());
    }

    /// The session `id` ended: its place is free again.
    pub(crate) fn end(&self, id: &str) {
        let mut inner = self.lock();
        if let Some(caller) = inner.of.remove(id) {
            inner.drop_one(&caller);
        }
    }

    /// Whether `caller` opened the session `id` (and it has not ended).
    pub(crate) fn opened(&self, id: &str, caller: &str) -> bool {
        self.lock().of.get(id).is_some_and(|c| c == caller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_caller_has_its_share_and_an_ended_session_frees_its_place_once() {
        let callers = Callers::default();
        assert!(callers.reserve("alice", 2));
        assert!(callers.reserve("alice", 2));
        assert!(!callers.reserve("alice", 2), "alice has her two");
        assert!(callers.reserve("bob", 2), "bob is not held back by alice");
        callers.bind("s1", "alice");
        callers.unreserve("alice");
        assert!(callers.opened("s1", "alice") && !callers.opened("s1", "bob"));
        callers.end("s1");
        callers.end("s1");
        assert!(!callers.opened("s1", "alice"));
        assert!(callers.reserve("alice", 2));
        assert!(callers.reserve("alice", 2));
        assert!(!callers.reserve("alice", 2), "one end freed one place");
        assert!(!callers.reserve("carol", 0));
        assert!(!callers.lock().open.contains_key("carol"));
    }
}
