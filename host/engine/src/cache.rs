//! The compiled-artifact cache: a component compiled once is not compiled
//! again, and a tool whose artifact is cached is listed without compiling
//! or even loading it.
//!
//! An entry is keyed by the BLAKE3 hash of the component's bytes, the
//! engine's compatibility hash (wasmtime version and configuration) and
//! Airlock's version. It holds the precompiled artifact (`.cwasm`) and a
//! sidecar (`.json`) with the artifact's own hash, the tool's descriptor and
//! its imports.
//!
//! Loading a precompiled artifact runs native code, so the cache trusts
//! only what this host wrote, and never a file for its mode (a file a
//! guest created can pass any mode check): each sidecar carries a keyed
//! BLAKE3 MAC over the entry's key and the sidecar, with a key in a file
//! only the host's user can read (`mac.key`, 0600, created by the host);
//! the sidecar records the artifact's hash, and an artifact is read into
//! memory and checked against it before it is deserialised from those same
//! bytes. The directory must be the user's own and not writable by anyone
//! else (else the cache is not used), no grant may reach it (see
//! [`airlock_core::grants`]), files are opened without following links, and
//! entries are written atomically (a temporary file, then a rename).
//! Anything that does not check out is a cache miss, logged, and rebuilt.
//!
//! A second, read-only directory of artifacts compiled ahead of time (a
//! container image's build, by `airlock precompile`) may stand behind the
//! cache: it is checked the same way (its owner, its mode, its own key),
//! read after the cache's own directory, and never written.

use super::linker::Needs;
use airlock_core::descriptor::Descriptor;
use airlock_core::error::LoadError;
use airlock_core::host_files::{self, Links};
use serde::{Deserialize, Serialize};
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wasmtime::component::Component;

/// Bumped when the sidecar's shape changes.
const FORMAT: u32 = 2;
/// The file holding the MAC key, in the cache directory.
const KEY_FILE: &str = "mac.key";
/// The most a sidecar may hold (a descriptor is bounded well below this).
const SIDECAR_BYTES: u64 = 16 << 20;
/// The most an artifact may hold.
const ARTIFACT_BYTES: u64 = 1 << 30;

/// What a cache entry records besides the artifact.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Sidecar {
    format: u32,
    artifact_blake3: String,
    artifact_bytes: u64,
    /// The tool's descriptor; `None` for a hook.
    pub(crate) descriptor: Option<Descriptor>,
    pub(crate) imports: Vec<(String, Needs)>,
}

/// A load failure the cache remembers.
#[derive(Serialize, Deserialize)]
struct FailureRecord {
    format: u32,
    /// The fingerprint of the limits it failed under.
    limits: String,
    /// When it failed, in seconds since the Unix epoch.
    at: u64,
    error: LoadError,
}

/// How long a load failure is remembered: a failure that came of a busy
/// machine (a `describe` that ran out of time) is tried again a day later.
const REMEMBER_FAILURE: Duration = Duration::from_secs(24 * 3600);

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The on-disk cache of compiled components.
#[derive(Debug)]
pub(crate) struct ArtifactCache {
    /// The directory this host writes, if it could be used.
    own: Option<Shelf>,
    /// Artifacts compiled ahead of time, read only.
    precompiled: Option<Shelf>,
    engine_key: String,
}

/// A claim on compiling one entry ([`ArtifactCache::claim`]): an exclusive
/// lock on its `.lock` file, released when the claim is dropped.
#[derive(Debug)]
pub(crate) struct Claim {
    _lock: std::fs::File,
}

/// How often a load waiting on another's claim looks again.
const CLAIM_POLL: Duration = Duration::from_millis(25);

/// One directory of entries and the key their MACs are made with.
#[derive(Debug)]
struct Shelf {
    dir: PathBuf,
    mac_key: [u8; 32],
}

impl ArtifactCache {
    /// Opens (creating it, private to the user) the cache in `dir` for
    /// `engine`, with the read-only `precompiled` directory behind it.
    /// `None`, with a warning, when neither can be used safely.
    pub(crate) fn open(
        dir: Option<&Path>,
        precompiled: Option<&Path>,
        engine: &wasmtime::Engine,
    ) -> Option<ArtifactCache> {
        let own = dir.and_then(Shelf::open);
        let precompiled = precompiled.and_then(Shelf::open_read_only);
        if own.is_none() && precompiled.is_none() {
            return None;
        }
        let mut hasher = std::hash::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = format!("{:016x}-{}", hasher.finish(), env!("CARGO_PKG_VERSION"));
        Some(ArtifactCache {
            own,
            precompiled,
            engine_key,
        })
    }

    /// The directory this host writes compiled components to, if any.
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.own.as_ref().map(|shelf| shelf.dir.as_path())
    }

    /// The shelves an entry is looked for on, in order.
    fn shelves(&self) -> impl Iterator<Item = &Shelf> {
        self.own.iter().chain(&self.precompiled)
    }

    /// The key of a component with these bytes.
    pub(crate) fn key(&self, bytes: &[u8]) -> String {
        self.key_for(blake3::hash(bytes).to_hex().as_str())
    }

    /// The key of a component whose BLAKE3 hash is `digest` (hex).
    pub(crate) fn key_for(&self, digest: &str) -> String {
        format!("{digest}-{}", self.engine_key)
    }

    /// The sidecar of `key`, if the entry is complete, written by this
    /// host (its MAC checks out) and well formed, on the first shelf that
    /// has it.
    pub(crate) fn sidecar(&self, key: &str) -> Option<Sidecar> {
        self.shelves().find_map(|shelf| shelf.sidecar(key))
    }

    /// Why the component of `key` failed to load before, under limits
    /// whose fingerprint is `limits`, if it did in the last day: a component
    /// whose `describe` spins or traps is not run again at every start.
    pub(crate) fn failure(&self, key: &str, limits: &str) -> Option<LoadError> {
        let own = self.own.as_ref()?;
        let body = own.read_signed(&format!("{key}.failed"))?;
        let record: FailureRecord = serde_json::from_slice(&body).ok()?;
        let fresh = now_secs().saturating_sub(record.at) < REMEMBER_FAILURE.as_secs();
        (record.format == FORMAT && record.limits == limits && fresh).then_some(record.error)
    }

    /// Remembers why the component of `key` failed to load.
    pub(crate) fn store_failure(&self, key: &str, limits: &str, error: &LoadError) {
        let Some(own) = &self.own else { return };
        let record = FailureRecord {
            format: FORMAT,
            limits: limits.to_string(),
            at: now_secs(),
            error: error.clone(),
        };
        let result = serde_json::to_vec(&record)
            .map_err(std::io::Error::other)
            .and_then(|body| own.write_signed(&format!("{key}.failed"), &body));
        if let Err(e) = result {
            tracing::warn!(key, "the artifact cache could not record a failure: {e}");
        }
    }

    /// The compiled component of `key`, verified against its sidecar, from
    /// the first shelf whose entry checks out.
    pub(crate) fn component(&self, key: &str, engine: &wasmtime::Engine) -> Option<Component> {
        self.shelves()
            .find_map(|shelf| shelf.component(key, engine))
    }

    /// Claims the compile of `key` in the cache's own directory: while one
    /// load (in this host or another sharing the directory) holds the
    /// claim, another that missed the same entry waits here, up to `wait`,
    /// and then finds the entry stored rather than compiling it too.
    /// `None` when there is no directory to claim in, the claim cannot be
    /// made, or the wait ran out (the caller compiles anyway: a claim only
    /// saves work). Released when dropped.
    /// `waiting` is called once, when the claim is first found held.
    pub(crate) fn claim(&self, key: &str, wait: Duration, waiting: impl FnOnce()) -> Option<Claim> {
        let own = self.own.as_ref()?;
        let file = host_files::open_lock(&own.dir.join(format!("{key}.lock")))
            .inspect_err(|e| tracing::debug!(key, "no compile claim: {e}"))
            .ok()?;
        let deadline = Instant::now() + wait;
        let mut waiting = Some(waiting);
        loop {
            match file.try_lock() {
                Ok(()) => return Some(Claim { _lock: file }),
                Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    if let Some(waiting) = waiting.take() {
                        waiting();
                    }
                    std::thread::sleep(CLAIM_POLL);
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    tracing::warn!(
                        key,
                        "another compile of this component is still running; compiling it here too"
                    );
                    return None;
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    tracing::debug!(key, "no compile claim: {e}");
                    return None;
                }
            }
        }
    }

    /// Stores a compiled component and what is known about it. Failures are
    /// logged: a cache that cannot be written only costs time.
    pub(crate) fn store(
        &self,
        key: &str,
        component: &Component,
        descriptor: Option<&Descriptor>,
        imports: &[(String, Needs)],
    ) {
        let Some(own) = &self.own else { return };
        let result = (|| -> std::io::Result<()> {
            let artifact = component.serialize().map_err(std::io::Error::other)?;
            let sidecar = Sidecar {
                format: FORMAT,
                artifact_blake3: blake3::hash(&artifact).to_hex().to_string(),
                artifact_bytes: artifact.len() as u64,
                descriptor: descriptor.cloned(),
                imports: imports.to_vec(),
            };
            host_files::write_private(&own.dir.join(format!("{key}.cwasm")), &artifact)?;
            own.write_signed(&format!("{key}.json"), &serde_json::to_vec(&sidecar)?)
        })();
        if let Err(e) = result {
            tracing::warn!(key, "the artifact cache could not be written: {e}");
        }
    }
}

impl Shelf {
    /// The cache's own directory, created private to the user if need be.
    fn open(dir: &Path) -> Option<Shelf> {
        if let Err(e) = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
        {
            tracing::warn!(
                "the artifact cache {} cannot be created: {e}; compiling every time",
                dir.display()
            );
            return None;
        }
        Shelf::checked(dir, "the artifact cache", mac_key)
    }

    /// A directory of artifacts compiled ahead of time: it must exist, with
    /// its key, and is never written.
    fn open_read_only(dir: &Path) -> Option<Shelf> {
        Shelf::checked(dir, "the precompiled artifacts", existing_mac_key)
    }

    fn checked(
        dir: &Path,
        what: &str,
        key: fn(&Path) -> std::io::Result<[u8; 32]>,
    ) -> Option<Shelf> {
        if let Err(why) = check_private(dir) {
            tracing::warn!("{what} in {} are not used: {why}", dir.display());
            return None;
        }
        match key(dir) {
            Ok(mac_key) => Some(Shelf {
                dir: dir.to_path_buf(),
                mac_key,
            }),
            Err(e) => {
                tracing::warn!(
                    "{what} in {} are not used: its key {KEY_FILE}: {e}",
                    dir.display()
                );
                None
            }
        }
    }

    /// The body of the file `name`, if its MAC says this shelf's key wrote it.
    fn read_signed(&self, name: &str) -> Option<Vec<u8>> {
        let text = read_private(&self.dir.join(name), SIDECAR_BYTES)?;
        let (mac, body) = text.split_at_checked(MAC_HEX)?;
        let body = body.strip_prefix(b"\n")?;
        if !constant_time_eq(mac, self.mac(name, body).as_bytes()) {
            tracing::warn!(
                name,
                "a cache entry was not written by this host (its MAC does not match); \
                 recompiling"
            );
            return None;
        }
        Some(body.to_vec())
    }

    fn sidecar(&self, key: &str) -> Option<Sidecar> {
        let body = self.read_signed(&format!("{key}.json"))?;
        let sidecar: Sidecar = serde_json::from_slice(&body).ok()?;
        (sidecar.format == FORMAT).then_some(sidecar)
    }

    /// Writes `body` under `name`, preceded by its MAC.
    fn write_signed(&self, name: &str, body: &[u8]) -> std::io::Result<()> {
        let mut file = self.mac(name, body).into_bytes();
        file.push(b'\n');
        file.extend_from_slice(body);
        host_files::write_private(&self.dir.join(name), &file)
    }

    /// The MAC of the file `name` with this body, as hex: the name binds
    /// the body to its entry.
    fn mac(&self, name: &str, body: &[u8]) -> String {
        let mut mac = blake3::Hasher::new_keyed(&self.mac_key);
        mac.update(name.as_bytes());
        mac.update(b"\n");
        mac.update(body);
        mac.finalize().to_hex().to_string()
    }

    fn component(&self, key: &str, engine: &wasmtime::Engine) -> Option<Component> {
        let sidecar = self.sidecar(key)?;
        let bytes = read_private(&self.dir.join(format!("{key}.cwasm")), ARTIFACT_BYTES)?;
        if bytes.len() as u64 != sidecar.artifact_bytes
            || blake3::hash(&bytes).to_hex().as_str() != sidecar.artifact_blake3
        {
            tracing::warn!(
                key,
                "a cached artifact does not match its record; recompiling"
            );
            return None;
        }
        // SAFETY: the bytes are an artifact this host serialised itself:
        // they match the hash in a sidecar whose MAC only a holder of the
        // shelf's key can compute, recorded when they were written. They
        // were read into memory and checked before this call, so they
        // cannot change in between. Artifacts from another wasmtime
        // version or configuration are rejected by `deserialize` with an
        // error (and the key differs).
        match unsafe { Component::deserialize(engine, &bytes) } {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::warn!(
                    key,
                    "a cached artifact could not be loaded: {e}; recompiling"
                );
                None
            }
        }
    }
}

/// The directory belongs to this user and nobody else can write it.
fn check_private(dir: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Err("it is not a directory".into());
    }
    if let Ok(me) = std::fs::metadata("/proc/self")
        && meta.uid() != me.uid()
    {
        return Err("it belongs to another user".into());
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err("others can write to it (chmod go-w)".into());
    }
    Ok(())
}

/// The length of a MAC in hex.
const MAC_HEX: usize = 64;

/// Reads a cache file: a regular file, not a link, at most `cap` bytes.
/// Its mode proves nothing (a guest could have made it); its MAC does.
fn read_private(path: &Path, cap: u64) -> Option<Vec<u8>> {
    airlock_core::host_files::read_capped(path, cap, Links::Refuse).ok()
}

/// The cache's MAC key: read from `mac.key` in `dir`, or created there
/// (32 random bytes, mode 0600) when it does not exist yet.
fn mac_key(dir: &Path) -> std::io::Result<[u8; 32]> {
    let path = dir.join(KEY_FILE);
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
    let tmp = host_files::temp_beside(&path);
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(&key).and_then(|()| f.sync_all()))
        // A hard link fails when the key exists, so two hosts starting at
        // once agree on the first key written.
        .and_then(|()| std::fs::hard_link(&tmp, &path));
    let _ = std::fs::remove_file(&tmp);
    match created {
        Ok(()) => Ok(key),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => existing_mac_key(dir),
        Err(e) => Err(e),
    }
}

/// The MAC key already in `dir`: 32 bytes only the user can read.
fn existing_mac_key(dir: &Path) -> std::io::Result<[u8; 32]> {
    let mut file = airlock_core::host_files::open_regular(&dir.join(KEY_FILE), Links::Refuse)?;
    if file.metadata()?.permissions().mode() & 0o077 != 0 {
        return Err(std::io::Error::other(
            "others can read or write it (chmod 600)",
        ));
    }
    let mut key = [0u8; 32];
    let mut rest = Vec::new();
    file.read_exact(&mut key)?;
    file.read_to_end(&mut rest)?;
    if !rest.is_empty() {
        return Err(std::io::Error::other("it is not 32 bytes"));
    }
    Ok(key)
}

/// Compares two byte strings in time independent of where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> wasmtime::Engine {
        wasmtime::Engine::new(wasmtime::Config::new().epoch_interruption(true)).unwrap()
    }

    #[test]
    fn refuses_directories_others_can_write() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(ArtifactCache::open(Some(&dir), None, &engine()).is_none());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(ArtifactCache::open(Some(&dir), None, &engine()).is_some());
    }

    #[test]
    fn entries_not_written_with_the_key_are_misses() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        let engine = engine();
        let cache = ArtifactCache::open(Some(&dir), None, &engine).unwrap();
        let key_mode = std::fs::metadata(dir.join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(key_mode & 0o777, 0o600);
        let component = Component::new(&engine, wat::parse_str("(component)").unwrap()).unwrap();
        let key = cache.key(b"component");
        cache.store(&key, &component, None, &[]);
        assert!(cache.sidecar(&key).is_some());
        assert!(cache.component(&key, &engine).is_some());

        // A sidecar changed after it was written (a descriptor swapped, an
        // artifact hash re-pointed) fails its MAC, whatever its mode.
        let sidecar = dir.join(format!("{key}.json"));
        let text = std::fs::read_to_string(&sidecar).unwrap();
        let forged = text.replace("\"imports\":[]", "\"imports\":[ ]");
        assert_ne!(forged, text);
        std::fs::write(&sidecar, &forged).unwrap();
        std::fs::set_permissions(&sidecar, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(cache.sidecar(&key).is_none());
        assert!(cache.component(&key, &engine).is_none());

        // An entry moved to another key fails too: the key is in the MAC.
        std::fs::write(&sidecar, &text).unwrap();
        let other = cache.key(b"other");
        std::fs::copy(&sidecar, dir.join(format!("{other}.json"))).unwrap();
        std::fs::copy(
            dir.join(format!("{key}.cwasm")),
            dir.join(format!("{other}.cwasm")),
        )
        .unwrap();
        assert!(cache.sidecar(&key).is_some());
        assert!(cache.sidecar(&other).is_none());

        // A new key (another host's cache, or one an attacker made) trusts
        // nothing written under the old one.
        std::fs::remove_file(dir.join(KEY_FILE)).unwrap();
        let reopened = ArtifactCache::open(Some(&dir), None, &engine).unwrap();
        assert!(reopened.sidecar(&key).is_none());
    }

    #[test]
    fn failures_are_remembered_for_a_day_under_the_same_limits() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = ArtifactCache::open(Some(&tmp.path().join("c")), None, &engine()).unwrap();
        let key = cache.key(b"stuck");
        let error = LoadError::Describe("it spun".into());
        assert_eq!(cache.failure(&key, "limits"), None);
        cache.store_failure(&key, "limits", &error);
        assert_eq!(cache.failure(&key, "limits"), Some(error.clone()));
        assert_eq!(cache.failure(&key, "other limits"), None);
        assert_eq!(cache.failure(&cache.key(b"other"), "limits"), None);

        let record = FailureRecord {
            format: FORMAT,
            limits: "limits".into(),
            at: now_secs() - REMEMBER_FAILURE.as_secs() - 1,
            error,
        };
        let name = format!("{key}.failed");
        cache
            .own
            .as_ref()
            .unwrap()
            .write_signed(&name, &serde_json::to_vec(&record).unwrap())
            .unwrap();
        assert_eq!(
            cache.failure(&key, "limits"),
            None,
            "a day old: tried again"
        );
    }

    #[test]
    fn a_key_others_can_read_turns_the_cache_off() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        assert!(ArtifactCache::open(Some(&dir), None, &engine()).is_some());
        std::fs::set_permissions(dir.join(KEY_FILE), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        assert!(ArtifactCache::open(Some(&dir), None, &engine()).is_none());
    }

    #[test]
    fn keys_depend_on_the_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = ArtifactCache::open(Some(&tmp.path().join("c")), None, &engine()).unwrap();
        assert_ne!(cache.key(b"a"), cache.key(b"b"));
        assert_eq!(cache.key(b"a"), cache.key(b"a"));
        assert!(cache.sidecar(&cache.key(b"a")).is_none());
    }

    #[test]
    fn a_compile_claimed_by_one_load_is_waited_for_by_another() {
        let tmp = tempfile::tempdir().unwrap();
        let engine = engine();
        let cache = ArtifactCache::open(Some(&tmp.path().join("c")), None, &engine).unwrap();
        let key = cache.key(b"component");
        let mut waited = false;
        let first = cache.claim(&key, Duration::ZERO, || waited = true);
        assert!(
            first.is_some() && !waited,
            "an unclaimed compile is claimed at once"
        );

        // Held: another claim waits, then gives up and says it waited.
        let started = Instant::now();
        let second = cache.claim(&key, Duration::from_millis(200), || waited = true);
        assert!(second.is_none() && waited);
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert!(
            cache
                .claim(&cache.key(b"other"), Duration::ZERO, || ())
                .is_some(),
            "a claim is on one entry only"
        );

        // Released while another waits: that one gets it.
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| cache.claim(&key, Duration::from_secs(30), || ()));
            std::thread::sleep(Duration::from_millis(100));
            drop(first);
            assert!(waiter.join().unwrap().is_some());
        });

        // A read-only cache has nothing to claim in.
        let alone = ArtifactCache::open(None, Some(&tmp.path().join("c")), &engine).unwrap();
        assert!(alone.claim(&key, Duration::ZERO, || ()).is_none());
    }

    #[test]
    fn precompiled_artifacts_are_read_after_the_own_directory_and_never_written() {
        let tmp = tempfile::tempdir().unwrap();
        let (own, ahead) = (tmp.path().join("own"), tmp.path().join("ahead"));
        let engine = engine();
        let component = Component::new(&engine, wat::parse_str("(component)").unwrap()).unwrap();
        // Filled ahead of time, as `airlock precompile` does: a cache of its own.
        let filler = ArtifactCache::open(Some(&ahead), None, &engine).unwrap();
        let key = filler.key(b"bundled");
        filler.store(&key, &component, None, &[]);
        let entries = || std::fs::read_dir(&ahead).unwrap().count();
        let before = entries();

        let cache = ArtifactCache::open(Some(&own), Some(&ahead), &engine).unwrap();
        assert!(cache.sidecar(&key).is_some());
        assert!(cache.component(&key, &engine).is_some());
        assert_eq!(cache.dir(), Some(own.as_path()));
        let other = cache.key(b"installed later");
        cache.store(&other, &component, None, &[]);
        cache.store_failure(&key, "limits", &LoadError::Describe("spun".into()));
        assert_eq!(
            entries(),
            before,
            "the precompiled directory is never written"
        );
        assert!(own.join(format!("{other}.cwasm")).exists());

        // Without a directory of its own (a read-only root), it still serves.
        let alone = ArtifactCache::open(None, Some(&ahead), &engine).unwrap();
        assert!(alone.component(&key, &engine).is_some());
        assert_eq!(alone.dir(), None);
        alone.store(&other, &component, None, &[]);
        assert_eq!(entries(), before);

        // Its entries answer to its own key: one signed with another's is a miss.
        std::fs::copy(own.join(KEY_FILE), ahead.join(KEY_FILE)).unwrap();
        let rekeyed = ArtifactCache::open(None, Some(&ahead), &engine).unwrap();
        assert!(rekeyed.sidecar(&key).is_none());
        assert!(rekeyed.component(&key, &engine).is_none());
    }

    #[test]
    fn a_precompiled_directory_must_exist_with_its_key_and_be_the_users_own() {
        let tmp = tempfile::tempdir().unwrap();
        let ahead = tmp.path().join("ahead");
        let engine = engine();
        assert!(ArtifactCache::open(None, Some(&ahead), &engine).is_none());
        assert!(!ahead.exists(), "it is not created");
        std::fs::create_dir(&ahead).unwrap();
        assert!(
            ArtifactCache::open(None, Some(&ahead), &engine).is_none(),
            "no key: nothing in it can be trusted"
        );
        assert!(!ahead.join(KEY_FILE).exists(), "and none is made");
        ArtifactCache::open(Some(&ahead), None, &engine).unwrap();
        assert!(ArtifactCache::open(None, Some(&ahead), &engine).is_some());
        std::fs::set_permissions(&ahead, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(ArtifactCache::open(None, Some(&ahead), &engine).is_none());
    }
}
