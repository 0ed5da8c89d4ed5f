//! Each call's preopened directories, opened once per set of mounts and
//! shared by every store that gets the same set. A store's preopen is then
//! a reference count, not an `open` of the grant's `/proc/self/fd` entry
//! and a `close` per mount per call. The directory handles are those the
//! grants opened (through [`HostMount::handle_path`]), so a directory
//! replaced after it was granted is not followed, as before.

use airlock_core::grants::{CallMount, HostMount};
use std::sync::{Mutex, Weak};
use wasmtime_wasi::filesystem::WasiFilesystemCtx;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

/// Whether filesystem calls run on the calling thread: set on every
/// preopen, and on what `open.rs` opens under one.
pub(crate) const BLOCKING_CURRENT_THREAD: bool = true;

/// How many distinct sets of mounts are kept (a few per configuration:
/// each tool's workspace access and read-only mounts).
const KEPT: usize = 64;

/// Preopened directories by set of mounts.
#[derive(Default)]
pub(crate) struct Preopens {
    kept: Mutex<Vec<Kept>>,
}

struct Kept {
    /// The mounts, held weakly: a mount dropped (a reload) lets its entry
    /// go, and while a `Weak` lives its allocation is not reused, so a
    /// pointer match with a live mount is that very mount.
    mounts: Vec<(Weak<HostMount>, String, bool)>,
    fs: WasiFilesystemCtx,
}

impl Kept {
    fn matches(&self, mounts: &[CallMount]) -> bool {
        self.mounts.len() == mounts.len()
            && self
                .mounts
                .iter()
                .zip(mounts)
                .all(|((kept, guest, writable), m)| {
                    std::ptr::eq(kept.as_ptr(), std::sync::Arc::as_ptr(&m.mount))
                        && *guest == m.mount.guest
                        && *writable == m.writable
                })
    }

    fn live(&self) -> bool {
        self.mounts.iter().all(|(m, _, _)| m.strong_count() > 0)
    }
}

impl Preopens {
    /// The preopens for `mounts`: a clone of the kept ones (handles shared,
    /// nothing opened), or opened now and kept.
    pub(crate) fn get(&self, mounts: &[CallMount]) -> std::io::Result<WasiFilesystemCtx> {
        if let Some(kept) = lock(&self.kept).iter().find(|k| k.matches(mounts)) {
            return Ok(kept.fs.clone());
        }
        let fs = open(mounts)?;
        let mut kept = lock(&self.kept);
        // Another store may have opened the same set meanwhile.
        if let Some(earlier) = kept.iter().find(|k| k.matches(mounts)) {
            return Ok(earlier.fs.clone());
        }
        kept.retain(Kept::live);
        if kept.len() >= KEPT {
            kept.remove(0);
        }
        kept.push(Kept {
            mounts: mounts
                .iter()
                .map(|m| {
                    (
                        std::sync::Arc::downgrade(&m.mount),
                        m.mount.guest.clone(),
                        m.writable,
                    )
                })
                .collect(),
            fs: fs.clone(),
        });
        Ok(fs)
    }
}

/// Opens each mount's directory through its grant's handle, with the
/// call's access.
fn open(mounts: &[CallMount]) -> std::io::Result<WasiFilesystemCtx> {
    let mut wasi = WasiCtxBuilder::new();
    // Filesystem calls run on the calling thread rather than one hop away
    // on tokio's blocking pool, whose hand-offs made a directory walk nine
    // times slower (`BudgetedFs` refuses to open what could block).
    wasi.allow_blocking_current_thread(BLOCKING_CURRENT_THREAD);
    for m in mounts {
        let perms = if m.writable {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        wasi.preopened_dir(&m.mount.handle_path, &m.mount.guest, perms)
            .map_err(|e| std::io::Error::other(format!("cannot open {}: {e}", m.mount.guest)))?;
    }
    let mut ctx = wasi.build();
    Ok(ctx.filesystem().clone())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_core::config::Config;
    use airlock_core::descriptor::WorkspaceAccess;
    use airlock_core::grants::Grants;
    use wasmtime::component::{Resource, ResourceTable};
    use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView};
    use wasmtime_wasi::p2::bindings::filesystem::preopens::Host;

    /// The guest-visible preopens of `fs`: (guest path, writable).
    fn seen(fs: WasiFilesystemCtx) -> Vec<(String, bool)> {
        let mut fs = fs;
        let mut table = ResourceTable::new();
        let mut view = WasiFilesystemCtxView {
            ctx: &mut fs,
            table: &mut table,
        };
        let dirs = view.get_directories().unwrap();
        dirs.into_iter()
            .map(|(fd, guest): (Resource<Descriptor>, String)| {
                let Descriptor::Dir(dir) = table.get(&fd).unwrap() else {
                    panic!("{guest} is not a directory")
                };
                (guest, dir.perms == FsPerms::ReadWrite)
            })
            .collect()
    }

    #[test]
    fn a_set_of_mounts_is_opened_once_and_keeps_each_calls_access() {
        let ws = tempfile::tempdir().unwrap();
        let config = Config {
            workspace: Some(ws.path().to_path_buf()),
            workspace_access: WorkspaceAccess::ReadWrite,
            ..Config::default()
        };
        let grants = Grants::from_config(&config).unwrap();
        let mount = grants.workspace().unwrap().clone();
        let call = |writable| {
            vec![CallMount {
                mount: mount.clone(),
                writable,
            }]
        };
        let preopens = Preopens::default();
        let guest = mount.guest.clone();
        assert_eq!(
            seen(preopens.get(&call(true)).unwrap()),
            [(guest.clone(), true)]
        );
        assert_eq!(
            seen(preopens.get(&call(false)).unwrap()),
            [(guest.clone(), false)]
        );
        assert_eq!(seen(preopens.get(&call(true)).unwrap()), [(guest, true)]);
        assert_eq!(seen(preopens.get(&[]).unwrap()), []);
        assert_eq!(
            lock(&preopens.kept).len(),
            3,
            "one entry per set and access"
        );

        // A reload grants the directory anew: the old entry goes.
        drop(grants);
        drop(mount);
        let grants = Grants::from_config(&config).unwrap();
        let mount = grants.workspace().unwrap().clone();
        let call = [CallMount {
            mount,
            writable: false,
        }];
        assert_eq!(seen(preopens.get(&call).unwrap()).len(), 1);
        assert_eq!(
            lock(&preopens.kept).len(),
            2,
            "the dropped mount's entries went"
        );
    }
}
