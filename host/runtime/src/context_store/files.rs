//! [`Files`]: contexts in a directory, one JSON file each, for a command
//! line whose calls are separate processes (`airlock call`). Each step holds
//! the context's lock file, so two calls at once lose neither's change; a
//! context lives `ttl` after its last use (the file records until when).
//! The steps are small blocking file operations.

use super::{ContextStore, Fields, StoreError, apply};
use async_trait::async_trait;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Contexts kept as files in a directory (made on first write, readable by
/// its owner alone).
pub struct Files {
    dir: PathBuf,
}

impl Files {
    /// Contexts in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Files {
        Files { dir: dir.into() }
    }

    /// Sets `set` and removes `remove` in context `id`, creating it if
    /// `create`; `false`, and nothing written, when it does not exist (or
    /// expired) and is not to be created.
    fn change(
        &self,
        id: &str,
        create: bool,
        set: &Fields,
        remove: &[String],
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        self.locked(id, |path| {
            let Some(mut fields) = read(path)?.or_else(|| create.then(Fields::new)) else {
                return Ok(false);
            };
            apply(&mut fields, set, remove);
            write(path, &fields, ttl).map(|()| true)
        })
    }

    /// Runs `step` on context `id`'s file while holding its lock.
    fn locked<T>(
        &self,
        id: &str,
        step: impl FnOnce(&Path) -> std::io::Result<T>,
    ) -> Result<T, StoreError> {
        let failed = |e: std::io::Error| StoreError(format!("{}: {e}", self.dir.display()));
        let mut dir = std::fs::DirBuilder::new();
        dir.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut dir, 0o700);
        dir.create(&self.dir).map_err(failed)?;
        let name = blake3::hash(id.as_bytes()).to_hex();
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join(format!("{name}.lock")))
            .map_err(failed)?;
        lock.lock().map_err(failed)?;
        step(&self.dir.join(format!("{name}.json"))).map_err(failed)
    }
}

/// A context as its file holds it: its fields, and until when it lives
/// (milliseconds since the Unix epoch).
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    until: u128,
    fields: Fields,
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis()
}

/// The fields in `path`, unless it is missing, expired (then it is
/// removed) or unreadable as a context.
fn read(path: &Path) -> std::io::Result<Option<Fields>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    match serde_json::from_slice::<Stored>(&bytes) {
        Ok(stored) if stored.until > now_ms() => Ok(Some(stored.fields)),
        _ => std::fs::remove_file(path).map(|()| None),
    }
}

/// Writes `fields` to `path` whole (a new file renamed over the old one),
/// living `ttl` from now.
fn write(path: &Path, fields: &Fields, ttl: Duration) -> std::io::Result<()> {
    let stored = Stored {
        until: now_ms() + ttl.as_millis(),
        fields: fields.clone(),
    };
    let fresh = path.with_extension("new");
    let mut options = OpenOptions::new();
    options.create(true).truncate(true).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&fresh)?;
    file.write_all(&serde_json::to_vec(&stored).map_err(std::io::Error::other)?)?;
    file.sync_all()?;
    std::fs::rename(fresh, path)
}

#[async_trait]
impl ContextStore for Files {
    async fn load(&self, id: &str, ttl: Duration) -> Result<Option<Fields>, StoreError> {
        self.locked(id, |path| {
            let fields = read(path)?;
            if let Some(fields) = &fields {
                write(path, fields, ttl)?;
            }
            Ok(fields)
        })
    }

    async fn create(&self, id: &str, fields: &Fields, ttl: Duration) -> Result<(), StoreError> {
        self.locked(id, |path| write(path, fields, ttl))
    }

    async fn update(
        &self,
        id: &str,
        set: &Fields,
        remove: &[String],
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        self.change(id, false, set, remove, ttl)
    }

    async fn merge(
        &self,
        id: &str,
        set: &Fields,
        remove: &[String],
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.change(id, true, set, remove, ttl).map(drop)
    }

    async fn remove(&self, id: &str) -> Result<(), StoreError> {
        self.locked(id, |path| match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        })
    }
}
