//! bashkit's filesystem over the call's own WASI handles: every path the
//! shell touches is opened with `std::fs` inside the sandbox, where only the
//! directories the host granted exist (mounted at their own paths), with
//! the access the call got (read-only handles for a read-only call). So the
//! host's grants, not this adapter, decide what a command may reach; this
//! file only translates.

use airlock_sdk::{Context, ToolError};
use bashkit::{DirEntry, FileType, FsBackend, Metadata, Result, async_trait};
use std::io::{Error, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The sandbox's filesystem, as bashkit's backend, for one call.
pub(crate) struct WasiFs {
    cx: Context,
}

impl WasiFs {
    pub(crate) fn new(cx: &Context) -> Self {
        WasiFs { cx: cx.clone() }
    }

    /// The error for `path` when the sandbox refused it: outside every
    /// grant, or read-only in this call, it says so in the file tools'
    /// words; otherwise the system's error as it is.
    fn explain(&self, path: &Path, err: Error, writing: bool) -> bashkit::Error {
        let text = path.to_string_lossy();
        let refusal = match self.cx.resolve(&text) {
            Err(refusal) => Some(refusal),
            Ok(_)
                if writing
                    && matches!(
                        err.kind(),
                        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
                    ) =>
            {
                self.cx.resolve_writable(&text).err()
            }
            Ok(_) => None,
        };
        match refusal {
            Some(ToolError::PermissionDenied(message) | ToolError::InvalidInput(message)) => {
                Error::new(ErrorKind::PermissionDenied, message).into()
            }
            Some(other) => Error::new(ErrorKind::PermissionDenied, format!("{other:?}")).into(),
            None => err.into(),
        }
    }

    /// The next path component from `path` toward each mount below it:
    /// the directories outside the grants that lead to them, which a shell
    /// must be able to stat and list (`cd /`, resolving `..`).
    fn toward_mounts(&self, path: &Path) -> Vec<String> {
        let mut names: Vec<String> = self
            .cx
            .mounts()
            .iter()
            .filter_map(|m| Path::new(&m.path).strip_prefix(path).ok())
            .filter_map(|rest| rest.components().next())
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// bashkit's metadata of a file in the sandbox.
fn metadata(meta: &std::fs::Metadata) -> Metadata {
    let file_type = if meta.file_type().is_symlink() {
        FileType::Symlink
    } else if meta.is_dir() {
        FileType::Directory
    } else {
        FileType::File
    };
    let mode = match (file_type, meta.permissions().readonly()) {
        (FileType::Directory, false) => 0o755,
        (FileType::Directory, true) => 0o555,
        (_, false) => 0o644,
        (_, true) => 0o444,
    };
    Metadata {
        file_type,
        size: meta.len(),
        mode,
        modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        created: meta.created().unwrap_or(SystemTime::UNIX_EPOCH),
    }
}

/// A directory outside the grants on the way to one.
fn passage() -> Metadata {
    Metadata {
        file_type: FileType::Directory,
        size: 0,
        mode: 0o555,
        modified: SystemTime::UNIX_EPOCH,
        created: SystemTime::UNIX_EPOCH,
    }
}

#[async_trait]
impl FsBackend for WasiFs {
    async fn read(&self, path: &Path) -> Result<Vec<u8>> {
        std::fs::read(path).map_err(|e| self.explain(path, e, false))
    }

    async fn write(&self, path: &Path, content: &[u8]) -> Result<()> {
        std::fs::write(path, content).map_err(|e| self.explain(path, e, true))
    }

    async fn append(&self, path: &Path, content: &[u8]) -> Result<()> {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| file.write_all(content))
            .map_err(|e| self.explain(path, e, true))
    }

    async fn mkdir(&self, path: &Path, recursive: bool) -> Result<()> {
        if recursive {
            std::fs::create_dir_all(path)
        } else {
            std::fs::create_dir(path)
        }
        .map_err(|e| self.explain(path, e, true))
    }

    async fn remove(&self, path: &Path, recursive: bool) -> Result<()> {
        let meta = std::fs::symlink_metadata(path).map_err(|e| self.explain(path, e, true))?;
        if meta.is_dir() {
            if recursive {
                std::fs::remove_dir_all(path)
            } else {
                std::fs::remove_dir(path)
            }
        } else {
            std::fs::remove_file(path)
        }
        .map_err(|e| self.explain(path, e, true))
    }

    async fn stat(&self, path: &Path) -> Result<Metadata> {
        match std::fs::symlink_metadata(path) {
            Ok(meta) => Ok(metadata(&meta)),
            Err(_) if !self.toward_mounts(path).is_empty() => Ok(passage()),
            Err(e) => Err(self.explain(path, e, false)),
        }
    }

    async fn read_dir(&self, path: &Path) -> Result<Vec<DirEntry>> {
        let listing = match std::fs::read_dir(path) {
            Ok(listing) => listing,
            Err(e) => {
                let names = self.toward_mounts(path);
                if names.is_empty() {
                    return Err(self.explain(path, e, false));
                }
                return Ok(names
                    .into_iter()
                    .map(|name| DirEntry {
                        name,
                        metadata: passage(),
                    })
                    .collect());
            }
        };
        let mut entries = Vec::new();
        for entry in listing {
            let entry = entry?;
            let meta = entry.metadata()?;
            entries.push(DirEntry {
                name: entry.file_name().to_string_lossy().into_owned(),
                metadata: metadata(&meta),
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    async fn exists(&self, path: &Path) -> Result<bool> {
        Ok(std::fs::symlink_metadata(path).is_ok() || !self.toward_mounts(path).is_empty())
    }

    async fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| self.explain(to, e, true))
    }

    async fn copy(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::copy(from, to)
            .map(drop)
            .map_err(|e| self.explain(to, e, true))
    }

    async fn symlink(&self, _target: &Path, _link: &Path) -> Result<()> {
        Err(Error::new(
            ErrorKind::Unsupported,
            "Airlock's bash does not create symbolic links",
        )
        .into())
    }

    async fn read_link(&self, path: &Path) -> Result<PathBuf> {
        std::fs::read_link(path).map_err(|e| self.explain(path, e, false))
    }

    async fn chmod(&self, path: &Path, mode: u32) -> Result<()> {
        let mut permissions = std::fs::metadata(path)
            .map_err(|e| self.explain(path, e, true))?
            .permissions();
        permissions.set_readonly(mode & 0o222 == 0);
        std::fs::set_permissions(path, permissions).map_err(|e| self.explain(path, e, true))
    }
}
