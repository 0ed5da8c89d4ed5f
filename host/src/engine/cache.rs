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
//! only what this host wrote: the directory must be the user's own and not
//! writable by anyone else (else the cache is not used), entries are
//! written atomically (a temporary file, then a rename), and an artifact is
//! read into memory and checked against the hash in its sidecar before it
//! is deserialised from those same bytes. Anything that does not check out
//! is ignored and rebuilt.

use super::linker::Needs;
use crate::descriptor::Descriptor;
use serde::{Deserialize, Serialize};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use wasmtime::component::Component;

/// Bumped when the sidecar's shape changes.
const FORMAT: u32 = 1;

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

/// The on-disk cache of compiled components.
#[derive(Debug)]
pub(crate) struct ArtifactCache {
    dir: PathBuf,
    engine_key: String,
}

impl ArtifactCache {
    /// Opens (creating it, private to the user) the cache in `dir` for
    /// `engine`. `None`, with a warning, when the directory cannot be used
    /// safely.
    pub(crate) fn open(dir: &Path, engine: &wasmtime::Engine) -> Option<ArtifactCache> {
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
        if let Err(why) = check_private(dir) {
            tracing::warn!("the artifact cache {} is not used: {why}", dir.display());
            return None;
        }
        let mut hasher = std::hash::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = format!("{:016x}-{}", hasher.finish(), env!("CARGO_PKG_VERSION"));
        Some(ArtifactCache {
            dir: dir.to_path_buf(),
            engine_key,
        })
    }

    /// The cache's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of a component with these bytes.
    pub(crate) fn key(&self, bytes: &[u8]) -> String {
        format!("{}-{}", blake3::hash(bytes).to_hex(), self.engine_key)
    }

    /// The sidecar of `key`, if the entry is complete and well formed.
    pub(crate) fn sidecar(&self, key: &str) -> Option<Sidecar> {
        let text = read_private(&self.dir.join(format!("{key}.json")))?;
        let sidecar: Sidecar = serde_json::from_slice(&text).ok()?;
        (sidecar.format == FORMAT).then_some(sidecar)
    }

    /// The compiled component of `key`, verified against its sidecar.
    pub(crate) fn component(&self, key: &str, engine: &wasmtime::Engine) -> Option<Component> {
        let sidecar = self.sidecar(key)?;
        let bytes = read_private(&self.dir.join(format!("{key}.cwasm")))?;
        if bytes.len() as u64 != sidecar.artifact_bytes
            || blake3::hash(&bytes).to_hex().as_str() != sidecar.artifact_blake3
        {
            tracing::warn!(
                key,
                "a cached artifact does not match its record; recompiling"
            );
            return None;
        }
        // SAFETY: the bytes are an artifact this host serialised itself: the
        // directory is private to the user, and the bytes match the hash
        // recorded when they were written. They were read into memory and
        // checked before this call, so they cannot change in between.
        // Artifacts from another wasmtime version or configuration are
        // rejected by `deserialize` with an error (and the key differs).
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

    /// Stores a compiled component and what is known about it. Failures are
    /// logged: a cache that cannot be written only costs time.
    pub(crate) fn store(
        &self,
        key: &str,
        component: &Component,
        descriptor: Option<&Descriptor>,
        imports: &[(String, Needs)],
    ) {
        let result = (|| -> std::io::Result<()> {
            let artifact = component.serialize().map_err(std::io::Error::other)?;
            let sidecar = Sidecar {
                format: FORMAT,
                artifact_blake3: blake3::hash(&artifact).to_hex().to_string(),
                artifact_bytes: artifact.len() as u64,
                descriptor: descriptor.cloned(),
                imports: imports.to_vec(),
            };
            write_atomic(&self.dir.join(format!("{key}.cwasm")), &artifact)?;
            write_atomic(
                &self.dir.join(format!("{key}.json")),
                &serde_json::to_vec(&sidecar)?,
            )
        })();
        if let Err(e) = result {
            tracing::warn!(key, "the artifact cache could not be written: {e}");
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

/// Reads a file that must be a regular file (not a link), owned by this
/// user and writable only by them.
fn read_private(path: &Path) -> Option<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.permissions().mode() & 0o022 != 0 {
        return None;
    }
    std::fs::read(path).ok()
}

/// Writes a file whole or not at all: a temporary file private to this
/// writer (process and counter), synced, then renamed into place.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp-{}-{n}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
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
        assert!(ArtifactCache::open(&dir, &engine()).is_none());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(ArtifactCache::open(&dir, &engine()).is_some());
    }

    #[test]
    fn keys_depend_on_the_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = ArtifactCache::open(&tmp.path().join("c"), &engine()).unwrap();
        assert_ne!(cache.key(b"a"), cache.key(b"b"));
        assert_eq!(cache.key(b"a"), cache.key(b"a"));
        assert!(cache.sidecar(&cache.key(b"a")).is_none());
    }
}
