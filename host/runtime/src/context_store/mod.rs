//! Agent contexts kept between requests: what a [`ToolContext`] carries
//! from one call to the next (the cwd, the environment tools set, each
//! tool's state, the read-file stamps `edit` checks), saved under an opaque
//! context id in a [`ContextStore`]: in this process ([`Memory`], the
//! default), in Redis ([`Redis`], shared by replicas), or in files
//! ([`Files`], for `airlock call`, whose calls are separate processes).
//!
//! A context is a set of fields. A call loads them, runs against the
//! restored [`ToolContext`], and writes back only the fields it changed, in
//! one atomic step per context: two replicas changing the cwd and recording
//! a read of the same context at once lose neither. A context lives
//! `ttl` after its last use. An id the store does not hold (expired, or
//! never handed out) is an error, never a fresh empty context, and so is a
//! store that cannot be reached: an `edit` never passes its read check
//! because the store forgot the read. The default context
//! ([`Contexts::load_default`]), shared by the calls that name none, has no
//! id, and until a call changes it, it is a fresh context.
//!
//! A context this process saw the store hold that the store no longer
//! holds was lost (evicted, expired, or gone with a restart that kept
//! nothing): [`ContextError::Lost`] says so, and a default context is
//! never silently replaced by a fresh one: the call that finds it gone
//! fails, saying so, and the next one starts fresh. A context only other
//! replicas used is, to this one, unknown (the message says a store may
//! have lost it).
//!
//! A context created by an authenticated caller is that caller's
//! ([`Contexts::load_as`]): its id names it for its owner alone, and for
//! anyone else, anonymous callers too, it is an id the store does not
//! hold. An id that leaks (a log, a shared transcript) gives no one else
//! the context. A context created without an owner is used without one.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use airlock_host::context_store::Contexts;
//! use airlock_host::{Airlock, Config};
//!
//! let airlock = Airlock::new(Config { bundled_tools: false, ..Config::default() }).await.unwrap();
//! let contexts = Contexts::from_config(&airlock.config().contexts);
//! // A first call names no context: it runs in a fresh one…
//! let mut cx = airlock.context();
//! let loaded = contexts.load(None, &mut cx).await.unwrap();
//! // …(here it would run, and change `cx`)…
//! // and nothing changed, so none is created.
//! assert_eq!(contexts.save(loaded, &cx).await.unwrap(), None);
//! # });
//! ```

mod files;
mod memory;
mod redis;

pub use files::Files;
pub use memory::Memory;
pub use redis::Redis;

use crate::context::ToolContext;
use airlock_core::config::{ContextStoreUrl, ContextsConfig};
use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A context's fields, by name.
pub type Fields = BTreeMap<String, String>;

/// Where contexts are kept. Every method renews the context's lifetime to
/// `ttl`; each is one atomic step.
#[async_trait]
pub trait ContextStore: Send + Sync + 'static {
    /// The fields of context `id`, or `None` when the store holds no such
    /// context (never created, or expired).
    async fn load(&self, id: &str, ttl: Duration) -> Result<Option<Fields>, StoreError>;

    /// Creates context `id` with `fields`.
    async fn create(&self, id: &str, fields: &Fields, ttl: Duration) -> Result<(), StoreError>;

    /// Sets `set` and removes `remove` in context `id`, all at once;
    /// `false` (and nothing written) when the store holds no such context.
    async fn update(
        &self,
        id: &str,
        set: &Fields,
        remove: &[String],
        ttl: Duration,
    ) -> Result<bool, StoreError>;

    /// Sets `set` and removes `remove` in context `id`, all at once,
    /// creating it when the store holds none (a default context, which
    /// always exists: a field it lacks has its fresh value).
    async fn merge(
        &self,
        id: &str,
        set: &Fields,
        remove: &[String],
        ttl: Duration,
    ) -> Result<(), StoreError>;

    /// Forgets context `id` (nothing happens when the store holds none).
    async fn remove(&self, id: &str) -> Result<(), StoreError>;

    /// Whether the store answers (a remote one is asked; one in this
    /// process always does).
    async fn check(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Sets `set` and removes `remove` in `fields`: one write of a context, as
/// every store applies it.
pub(crate) fn apply(fields: &mut Fields, set: &Fields, remove: &[String]) {
    fields.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
    for key in remove {
        fields.remove(key);
    }
}

/// A store that failed (down, unreachable, refused the command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a context could not be loaded or saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextError {
    /// The store holds no context by that id.
    Unknown {
        /// The id the client sent (shown cleaned and capped).
        id: String,
        /// How long an unused context lives.
        ttl: Duration,
    },
    /// The store no longer holds a context this process saw it hold:
    /// evicted, expired, or gone with a restart that kept nothing.
    Lost {
        /// The context's id (shown cleaned and capped); `None` for a
        /// default context, which the next call finds fresh.
        id: Option<String>,
        /// How long before this process last used it.
        ago: Duration,
        /// How long an unused context lives.
        ttl: Duration,
    },
    /// The store failed.
    Store {
        /// The store (a URL without its password).
        store: String,
        /// What went wrong.
        message: String,
    },
}

impl std::fmt::Display for ContextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContextError::Unknown { id, ttl } => write!(
                f,
                "there is no context {id:?}: it was never handed out, it expired after {} s \
                 unused, or the context store lost it; start a new context",
                ttl.as_secs()
            ),
            ContextError::Lost { id, ago, ttl } => {
                let which = match id {
                    Some(id) => format!("context {id:?}"),
                    None => "the default context".to_string(),
                };
                if ago >= ttl {
                    write!(f, "{which} expired after {} s unused", ttl.as_secs())?;
                } else {
                    write!(
                        f,
                        "the context store lost {which}, last used {} s ago (within its {} s \
                         lifetime): it was evicted, or the store restarted without keeping it",
                        ago.as_secs(),
                        ttl.as_secs()
                    )?;
                }
                f.write_str(
                    ". Its working directory, environment and the files it had read are \
                     gone, so this call did not run",
                )?;
                match id {
                    Some(_) => f.write_str("; start a new context"),
                    None => f.write_str("; the next call starts from a fresh default context"),
                }
            }
            ContextError::Store { store, message } => write!(
                f,
                "the context store {store} failed ({message}); the context could not be used, \
                 and calls that need it fail until the store is back"
            ),
        }
    }
}

impl std::error::Error for ContextError {}

/// The contexts of a host: a store and how long a context lives.
#[derive(Clone)]
pub struct Contexts {
    store: Arc<dyn ContextStore>,
    ttl: Duration,
    name: String,
    seen: Arc<Mutex<Seen>>,
}

/// The contexts this process saw the store hold, by store key, with when
/// each was last used here and whose it is: what tells a context the store
/// lost from one it never held. Bounded: past [`SEEN_KEPT`], contexts
/// unused for a lifetime are forgotten, then the older half.
#[derive(Default)]
struct Seen(HashMap<String, (Instant, Option<String>)>);

/// How many contexts [`Seen`] keeps.
const SEEN_KEPT: usize = 1 << 16;

impl Seen {
    fn used(&mut self, key: &str, owner: Option<&str>, ttl: Duration) {
        let now = Instant::now();
        // Every call's load and save come here: a context seen before
        // costs no allocation.
        if let Some((at, _)) = self.0.get_mut(key) {
            *at = now;
            return;
        }
        if self.0.len() >= SEEN_KEPT {
            self.0.retain(|_, (at, _)| now.duration_since(*at) < ttl);
            if self.0.len() >= SEEN_KEPT {
                let mut times: Vec<Instant> = self.0.values().map(|(at, _)| *at).collect();
                times.sort_unstable();
                let median = times[times.len() / 2];
                self.0.retain(|_, (at, _)| *at > median);
            }
        }
        self.0
            .insert(key.to_string(), (now, owner.map(str::to_string)));
    }

    /// How long ago `key` was last used here, forgetting it; `None` also
    /// when it is not `owner`'s (to anyone else, it was never seen).
    fn forget(&mut self, key: &str, owner: Option<&str>) -> Option<Duration> {
        match self.0.get(key) {
            Some((_, seen_owner)) if seen_owner.as_deref() == owner => {
                self.0.remove(key).map(|(at, _)| at.elapsed())
            }
            _ => None,
        }
    }
}

impl std::fmt::Debug for Contexts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Contexts")
            .field("store", &self.name)
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// A context as a call loaded it: which one it is, and its fields then,
/// which [`Contexts::save`] compares the changed context with.
#[derive(Debug)]
pub struct Loaded {
    place: Place,
    /// Whose a context created from this one is.
    owner: Option<String>,
    /// Whether a fresh context is created even if the call changed nothing
    /// in it ([`Loaded::keep`]).
    keep: bool,
    before: Fields,
}

/// Which context was loaded.
#[derive(Debug)]
enum Place {
    /// A default context, by the store's name for it.
    Default(String),
    /// A fresh context, and the id it takes if it is created.
    Fresh(String),
    /// A context the store holds, by its id.
    Stored(String),
}

impl Loaded {
    /// The context's id, if it has one yet.
    pub fn id(&self) -> Option<&str> {
        match &self.place {
            Place::Stored(id) => Some(id),
            Place::Default(_) | Place::Fresh(_) => None,
        }
    }

    /// Creates a fresh context when it is saved even if the call changed
    /// nothing in it: a result the call saved is kept under the context's
    /// id ([`ToolContext::results_key`]), so the caller needs the id to
    /// read it back. No effect on a context that already exists.
    pub fn keep(&mut self) {
        self.keep = true;
    }
}

/// The name the saved results of calls in a context are kept under
/// ([`ToolContext::results_key`], which loading the context sets): context
/// `id`'s, or (`None`) the default context of `owner` (an authenticated
/// caller's opaque key). A front end names the owner of a result it is
/// asked for by it, without loading the context.
pub fn results_key(id: Option<&str>, owner: Option<&str>) -> String {
    match id {
        Some(id) => id.to_string(),
        None => default_key(owner),
    }
}

/// The store's name for the default context of `owner`.
fn default_key(owner: Option<&str>) -> String {
    match owner {
        Some(owner) => format!("{DEFAULT_ID}:{owner}"),
        None => DEFAULT_ID.to_string(),
    }
}

/// The prefix of every context id.
const ID_PREFIX: &str = "ctx_";

/// The store's name for the default context (not the shape of an id, so
/// no client can name it); an owner's is this, `:` and the owner.
const DEFAULT_ID: &str = "default";

/// The field that holds a context's owner: not a field of a
/// [`ToolContext`], so no call changes or removes it.
const FIELD_OWNER: &str = "owner";

impl Contexts {
    /// Contexts in `store`, each living `ttl` after its last use; `name`
    /// says which store in errors.
    pub fn new(store: Arc<dyn ContextStore>, ttl: Duration, name: impl Into<String>) -> Contexts {
        Contexts {
            store,
            ttl,
            name: name.into(),
            seen: Arc::default(),
        }
    }

    /// The store `[contexts]` names.
    pub fn from_config(config: &ContextsConfig) -> Contexts {
        let ttl = Duration::from_secs(config.ttl_secs.max(1));
        let store: Arc<dyn ContextStore> = match &config.store {
            ContextStoreUrl::Memory => Arc::new(Memory::default()),
            url @ ContextStoreUrl::Redis { .. } => {
                Arc::new(Redis::new(url.clone()).with_password_file(config.password_file.clone()))
            }
        };
        Contexts::new(store, ttl, config.store.to_string())
    }

    /// How long an unused context lives.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Whether the store answers: a replica that cannot reach it is not
    /// ready (its calls would fail).
    pub async fn check(&self) -> Result<(), ContextError> {
        self.store.check().await.map_err(|e| self.failed(e))
    }

    /// The secret named `name`: 32 random bytes, the same for every
    /// replica sharing this store (in process, this process's own). The
    /// first to ask makes it; each ask keeps it a year longer. Two replicas
    /// asking first at once may each make one and keep the one they wrote
    /// until they ask again: a caller that finds a value sealed with it
    /// does not open asks again before refusing it. No client names it:
    /// its store key is no context id.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use airlock_host::context_store::Contexts;
    /// use airlock_host::Config;
    ///
    /// let contexts = Contexts::from_config(&Config::default().contexts);
    /// let key = contexts.shared_secret("request-state").await.unwrap();
    /// assert_eq!(contexts.shared_secret("request-state").await.unwrap(), key);
    /// assert_ne!(contexts.shared_secret("another").await.unwrap(), key);
    /// # });
    /// ```
    pub async fn shared_secret(&self, name: &str) -> Result<[u8; 32], ContextError> {
        const KEPT: Duration = Duration::from_secs(365 * 24 * 3600);
        const FIELD: &str = "secret";
        let id = format!("secret:{name}");
        let stored = |fields: Option<Fields>| {
            let hex = fields?.remove(FIELD)?;
            let mut bytes = [0u8; 32];
            (hex.len() == 64).then_some(())?;
            for (i, byte) in bytes.iter_mut().enumerate() {
                *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
            }
            Some(bytes)
        };
        let load = || async {
            self.store
                .load(&id, KEPT)
                .await
                .map(stored)
                .map_err(|e| self.failed(e))
        };
        if let Some(secret) = load().await? {
            return Ok(secret);
        }
        let mut fresh = [0u8; 32];
        getrandom::fill(&mut fresh)
            .map_err(|e| self.failed(StoreError(format!("no randomness for a secret: {e}"))))?;
        let hex: String = fresh.iter().map(|b| format!("{b:02x}")).collect();
        let set = Fields::from([(FIELD.to_string(), hex)]);
        self.store
            .merge(&id, &set, &[], KEPT)
            .await
            .map_err(|e| self.failed(e))?;
        // What the store kept, if another replica wrote after this one.
        Ok(load().await?.unwrap_or(fresh))
    }

    /// Restores context `id` into `cx` (a fresh context of the host), or
    /// leaves `cx` as it is for `None` (a new context, created by
    /// [`Contexts::save`] if the call changes it, or [`Loaded::keep`] says
    /// so). Either way `cx` is named for its saved results
    /// ([`ToolContext::set_results_key`]) by the context's id (a new one's
    /// is chosen now). For a caller with no identity: [`Contexts::load_as`]
    /// with no owner.
    pub async fn load(
        &self,
        id: Option<&str>,
        cx: &mut ToolContext,
    ) -> Result<Loaded, ContextError> {
        self.load_as(id, None, cx).await
    }

    /// As [`Contexts::load`], for a call by `owner` (an authenticated
    /// caller, as an opaque key; `None` for none): context `id` loads only
    /// if `owner` created it (to anyone else it is unknown), and a new
    /// context is created as `owner`'s.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use airlock_host::context_store::Contexts;
    /// use airlock_host::grants::FileStamp;
    /// use airlock_host::{Airlock, Config};
    ///
    /// let airlock = Airlock::new(Config { bundled_tools: false, ..Config::default() }).await.unwrap();
    /// let contexts = Contexts::from_config(&airlock.config().contexts);
    /// let mut cx = airlock.context();
    /// let loaded = contexts.load_as(None, Some("alice"), &mut cx).await.unwrap();
    /// // The call reads a file (what a `read` records).
    /// let stamp = FileStamp { modified_ns: 1, size: 3, blake3: [0; 32] };
    /// cx.read_files().lock().unwrap().put("/workspace/notes.txt".into(), stamp);
    /// let id = contexts.save(loaded, &cx).await.unwrap().expect("a new context");
    /// // Alice's context is hers: bob, or a caller with no identity, cannot use its id.
    /// assert!(contexts.load_as(Some(&id), Some("bob"), &mut airlock.context()).await.is_err());
    /// assert!(contexts.load(Some(&id), &mut airlock.context()).await.is_err());
    /// assert!(contexts.load_as(Some(&id), Some("alice"), &mut airlock.context()).await.is_ok());
    /// # });
    /// ```
    pub async fn load_as(
        &self,
        id: Option<&str>,
        owner: Option<&str>,
        cx: &mut ToolContext,
    ) -> Result<Loaded, ContextError> {
        let owner = owner.map(str::to_string);
        let Some(id) = id else {
            let id = new_id().map_err(|e| self.failed(e))?;
            cx.set_results_key(&id);
            return Ok(Loaded {
                place: Place::Fresh(id),
                owner,
                keep: false,
                before: cx.to_fields(),
            });
        };
        let unknown = || ContextError::Unknown {
            id: unknown_id(id),
            ttl: self.ttl,
        };
        if !is_context_id(id) {
            return Err(unknown());
        }
        let fields = self
            .store
            .load(id, self.ttl)
            .await
            .map_err(|e| self.failed(e))?;
        let Some(mut fields) = fields else {
            return Err(match self.forget(id, owner.as_deref()) {
                Some(ago) => ContextError::Lost {
                    id: Some(unknown_id(id)),
                    ago,
                    ttl: self.ttl,
                },
                None => unknown(),
            });
        };
        // Someone else's context is, to this caller, one the store does
        // not hold: the answer does not say it exists.
        if fields.remove(FIELD_OWNER) != owner {
            return Err(unknown());
        }
        self.used(id, owner.as_deref());
        cx.restore_fields(&fields);
        cx.set_tenant(id);
        cx.set_results_key(id);
        // What was stored (less its owner, which no save changes) is what
        // a save compares with: a field the restore left out is removed by
        // the next save that writes.
        Ok(Loaded {
            place: Place::Stored(id.to_string()),
            owner,
            keep: false,
            before: fields,
        })
    }

    /// Restores the default context into `cx` (a fresh context of the
    /// host): the one calls share when they name no context. Until a call
    /// changes it, it is a fresh context. With an `owner` (an authenticated
    /// caller, as an opaque key), it is that owner's default context,
    /// shared with no other. One this process saw the store hold and the
    /// store lost is [`ContextError::Lost`], never a fresh one in its
    /// place; the store then holds a fresh one (so other replicas do not
    /// report the loss again), which the next call gets.
    pub async fn load_default(
        &self,
        cx: &mut ToolContext,
        owner: Option<&str>,
    ) -> Result<Loaded, ContextError> {
        let key = default_key(owner);
        let fields = self
            .store
            .load(&key, self.ttl)
            .await
            .map_err(|e| self.failed(e))?;
        let before = match fields {
            Some(fields) => {
                self.used(&key, None);
                cx.restore_fields(&fields);
                fields
            }
            None => {
                if let Some(ago) = self.forget(&key, None) {
                    self.store
                        .merge(&key, &Fields::new(), &[], self.ttl)
                        .await
                        .map_err(|e| self.failed(e))?;
                    return Err(ContextError::Lost {
                        id: None,
                        ago,
                        ttl: self.ttl,
                    });
                }
                cx.to_fields()
            }
        };
        cx.set_tenant(&key);
        cx.set_results_key(&key);
        Ok(Loaded {
            place: Place::Default(key),
            owner: None,
            keep: false,
            before,
        })
    }

    /// Forgets the default context (`owner`'s, with one): the next call
    /// that names no context starts from a fresh one.
    pub async fn forget_default(&self, owner: Option<&str>) -> Result<(), ContextError> {
        let key = default_key(owner);
        self.forget(&key, None);
        self.store.remove(&key).await.map_err(|e| self.failed(e))
    }

    /// Writes what the call changed in `cx` since it was loaded: creates a
    /// context (with the id chosen when it was loaded) for a fresh one the
    /// call changed or [`Loaded::keep`] keeps. Returns
    /// the id to hand to the client: the context's, if it has one (the
    /// default context has none).
    pub async fn save(
        &self,
        loaded: Loaded,
        cx: &ToolContext,
    ) -> Result<Option<String>, ContextError> {
        let after = cx.to_fields();
        let set: Fields = after
            .iter()
            .filter(|(k, v)| loaded.before.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let remove: Vec<String> = loaded
            .before
            .keys()
            .filter(|k| !after.contains_key(*k))
            .cloned()
            .collect();
        let unchanged = set.is_empty() && remove.is_empty();
        match loaded.place {
            Place::Default(key) => {
                if !unchanged {
                    self.store
                        .merge(&key, &set, &remove, self.ttl)
                        .await
                        .map_err(|e| self.failed(e))?;
                    self.used(&key, None);
                }
                Ok(None)
            }
            Place::Fresh(_) if unchanged && !loaded.keep => Ok(None),
            Place::Fresh(id) => {
                let mut created = after;
                if let Some(owner) = &loaded.owner {
                    created.insert(FIELD_OWNER.to_string(), owner.clone());
                }
                self.store
                    .create(&id, &created, self.ttl)
                    .await
                    .map_err(|e| self.failed(e))?;
                self.used(&id, loaded.owner.as_deref());
                Ok(Some(id))
            }
            Place::Stored(id) if unchanged => Ok(Some(id)),
            Place::Stored(id) => {
                if self
                    .store
                    .update(&id, &set, &remove, self.ttl)
                    .await
                    .map_err(|e| self.failed(e))?
                {
                    Ok(Some(id))
                } else {
                    // It was loaded for this call: the store lost it since.
                    let ago = self
                        .forget(&id, loaded.owner.as_deref())
                        .unwrap_or_default();
                    Err(ContextError::Lost {
                        id: Some(id),
                        ago,
                        ttl: self.ttl,
                    })
                }
            }
        }
    }

    /// Notes that the store held context `key`, `owner`'s, just now.
    fn used(&self, key: &str, owner: Option<&str>) {
        lock(&self.seen).used(key, owner, self.ttl);
    }

    /// How long ago the store was last seen to hold `key`, if it was and
    /// it is `owner`'s (a default context's key names its owner).
    fn forget(&self, key: &str, owner: Option<&str>) -> Option<Duration> {
        lock(&self.seen).forget(key, owner)
    }

    fn failed(&self, e: StoreError) -> ContextError {
        ContextError::Store {
            store: self.name.clone(),
            message: e.0,
        }
    }
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(|e| e.into_inner())
}

/// An id a client sent, as an error shows it.
fn unknown_id(id: &str) -> String {
    crate::sanitize::clean_capped(id, crate::sanitize::Sink::Line, 80)
}

/// A new context id: 128 random bits.
fn new_id() -> Result<String, StoreError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError(format!("no randomness for a context id: {e}")))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{ID_PREFIX}{hex}"))
}

/// Whether `id` has the shape of an id [`new_id`] makes.
fn is_context_id(id: &str) -> bool {
    id.strip_prefix(ID_PREFIX).is_some_and(|hex| {
        hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests;
