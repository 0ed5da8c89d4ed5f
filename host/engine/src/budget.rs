//! The per-call write budget on writable mounts.
//!
//! wasmtime-wasi has no disk quota, so a guest with a writable mount could
//! fill the disk, create a sparse file of 2^60 bytes, or a million empty
//! files. Airlock links its own `wasi:filesystem/types` implementation,
//! [`BudgetedFs`], which delegates every function to wasmtime-wasi's and
//! charges the call's [`WriteBudget`] first:
//!
//! - `write` and bytes written through `write-via-stream` /
//!   `append-via-stream` streams cost their length;
//! - writing or opening a stream past the end of a file, and `set-size`
//!   growing it, cost the gap (so a sparse file costs its apparent size);
//! - creating a file, directory, link or symlink costs [`ENTRY_COST`].
//!
//! When the budget runs out the operation fails with `quota` (EDQUOT) and
//! nothing is written; the engine reports a call that then fails as
//! `write_limit`. Reads, stats, renames and removals cost nothing.
//!
//! It also refuses to open anything but regular files and directories
//! (FIFOs, sockets, devices: `not-permitted`), since filesystem calls block
//! the calling thread; `open.rs` opens without a window for a FIFO. And it
//! answers a `stat-at` of the directory itself, or of a name in it that is
//! not a link, without looking the path up (wasi-libc's `stat` asks twice).

use bytes::Bytes;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::{FsError, FsResult};
use wasmtime_wasi_io::poll::Pollable;
use wasmtime_wasi_io::streams::{DynInputStream, DynOutputStream, OutputStream, StreamError};

/// What creating a directory entry costs: a block, so a guest cannot make
/// a million empty files on a small budget.
pub(crate) const ENTRY_COST: u64 = 4096;

/// The bytes one call may still write.
#[derive(Debug)]
pub(crate) struct WriteBudget {
    remaining: AtomicU64,
    exhausted: AtomicBool,
}

/// The error a guest sees when the budget is spent (EDQUOT).
#[derive(Debug)]
struct BudgetExceeded;

impl std::fmt::Display for BudgetExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the call's write budget is spent (limits.write_mib)")
    }
}

impl std::error::Error for BudgetExceeded {}

impl WriteBudget {
    pub(crate) fn new(bytes: u64) -> Arc<Self> {
        Arc::new(WriteBudget {
            remaining: AtomicU64::new(bytes),
            exhausted: AtomicBool::new(false),
        })
    }

    /// Whether a charge was refused.
    pub(crate) fn exhausted(&self) -> bool {
        self.exhausted.load(Ordering::Relaxed)
    }

    /// What is left to write.
    pub(crate) fn remaining(&self) -> u64 {
        self.remaining.load(Ordering::Relaxed)
    }

    /// Takes `cost` from the budget, or refuses (and takes nothing).
    fn charge(&self, cost: u64) -> Result<(), BudgetExceeded> {
        self.remaining
            .try_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(cost)
            })
            .map(drop)
            .map_err(|_| {
                self.exhausted.store(true, Ordering::Relaxed);
                BudgetExceeded
            })
    }

    fn charge_fs(&self, cost: u64) -> FsResult<()> {
        self.charge(cost)
            .map_err(|_| FsError::from(ErrorCode::Quota))
    }
}

/// The `HasData` marker for [`BudgetedFs`].
pub(crate) struct Budgeted;

impl HasData for Budgeted {
    type Data<'a> = BudgetedFs<'a>;
}

/// wasmtime-wasi's filesystem, charging a write budget.
pub(crate) struct BudgetedFs<'a> {
    pub(crate) inner: WasiFilesystemCtxView<'a>,
    pub(crate) budget: &'a Arc<WriteBudget>,
}

impl BudgetedFs<'_> {
    fn is_dir(&self, fd: &Resource<Descriptor>) -> bool {
        matches!(self.inner.table.get(fd), Ok(Descriptor::Dir(_)))
    }

    async fn size_of(&mut self, fd: &Resource<Descriptor>) -> FsResult<u64> {
        let fd = Resource::new_borrow(fd.rep());
        Ok(HostDescriptor::stat(&mut self.inner, fd).await?.size)
    }

    /// Wraps a stream in the table so its writes are charged.
    fn budget_stream(
        &mut self,
        stream: Resource<DynOutputStream>,
    ) -> FsResult<Resource<DynOutputStream>> {
        let inner = self.inner.table.delete(stream)?;
        let wrapped: DynOutputStream = Box::new(BudgetedStream {
            inner,
            budget: self.budget.clone(),
        });
        Ok(self.inner.table.push(wrapped)?)
    }
}

impl types::Host for BudgetedFs<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<ErrorCode> {
        types::Host::convert_error_code(&mut self.inner, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        if self
            .inner
            .table
            .get(&err)?
            .downcast_ref::<BudgetExceeded>()
            .is_some()
        {
            return Ok(Some(ErrorCode::Quota));
        }
        types::Host::filesystem_error_code(&mut self.inner, err)
    }
}

impl HostDescriptor for BudgetedFs<'_> {
    async fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
        len: types::Filesize,
        advice: types::Advice,
    ) -> FsResult<()> {
        self.inner.advise(fd, offset, len, advice).await
    }

    async fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.inner.sync_data(fd).await
    }

    async fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorFlags> {
        self.inner.get_flags(fd).await
    }

    async fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorType> {
        self.inner.get_type(fd).await
    }

    async fn set_size(&mut self, fd: Resource<Descriptor>, size: types::Filesize) -> FsResult<()> {
        let current = self.size_of(&fd).await?;
        self.budget.charge_fs(size.saturating_sub(current))?;
        self.inner.set_size(fd, size).await
    }

    async fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.inner.set_times(fd, atim, mtim).await
    }

    async fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: types::Filesize,
        offset: types::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        self.inner.read(fd, len, offset).await
    }

    async fn write(
        &mut self,
        fd: Resource<Descriptor>,
        buf: Vec<u8>,
        offset: types::Filesize,
    ) -> FsResult<types::Filesize> {
        let current = self.size_of(&fd).await?;
        let gap = offset.saturating_sub(current);
        self.budget
            .charge_fs(gap.saturating_add(buf.len() as u64))?;
        self.inner.write(fd, buf, offset).await
    }

    async fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<types::DirectoryEntryStream>> {
        self.inner.read_directory(fd).await
    }

    async fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.inner.sync(fd).await
    }

    async fn create_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.budget.charge_fs(ENTRY_COST)?;
        self.inner.create_directory_at(fd, path).await
    }

    async fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorStat> {
        self.inner.stat(fd).await
    }

    async fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        // wasi-libc's `stat` asks `metadata-hash-at` and then `stat-at`, each
        // a lookup of the path (`openat2`, `statx`, `close`). The directory
        // itself needs no lookup, and a name in it not a link is the same
        // followed or not (a name alone, looked up without following, is a
        // single `statx`).
        if path == "." && self.is_dir(&fd) {
            return self.inner.stat(fd).await;
        }
        if path_flags.contains(types::PathFlags::SYMLINK_FOLLOW)
            && is_one_name(&path)
            && self.is_dir(&fd)
        {
            let dir = Resource::new_borrow(fd.rep());
            let unfollowed = self
                .inner
                .stat_at(dir, types::PathFlags::empty(), path.clone())
                .await;
            if let Ok(stat) = unfollowed
                && stat.type_ != types::DescriptorType::SymbolicLink
            {
                return Ok(stat);
            }
        }
        self.inner.stat_at(fd, path_flags, path).await
    }

    async fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.inner
            .set_times_at(fd, path_flags, path, atim, mtim)
            .await
    }

    async fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: types::PathFlags,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.budget.charge_fs(ENTRY_COST)?;
        self.inner
            .link_at(fd, old_path_flags, old_path, new_descriptor, new_path)
            .await
    }

    async fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        if oflags.contains(types::OpenFlags::CREATE) {
            self.budget.charge_fs(ENTRY_COST)?;
        }
        // Filesystem calls run on the calling thread (see `preopens::open`),
        // where opening a FIFO would block until a writer came: only
        // regular files and directories are opened, in one step that
        // cannot block (`open.rs`).
        let dir = match self.inner.table.get(&fd)? {
            Descriptor::Dir(dir) => dir,
            Descriptor::File(_) => return Err(ErrorCode::NotDirectory.into()),
        };
        let follow = path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
        if let Some(opened) = crate::open::open_at(dir, follow, &path, oflags, flags) {
            return Ok(self.inner.table.push(opened?)?);
        }
        // Where that open cannot be used, the type is checked first: links
        // pass (refused by the open itself without `symlink-follow`).
        let dir = Resource::new_borrow(fd.rep());
        match HostDescriptor::stat_at(&mut self.inner, dir, path_flags, path.clone()).await {
            Ok(stat) if !openable(stat.type_) => return Err(ErrorCode::NotPermitted.into()),
            _ => {}
        }
        self.inner
            .open_at(fd, path_flags, path, oflags, flags)
            .await
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        HostDescriptor::drop(&mut self.inner, fd)
    }

    async fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        self.inner.readlink_at(fd, path).await
    }

    async fn remove_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.inner.remove_directory_at(fd, path).await
    }

    async fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.inner.rename_at(fd, old_path, new_fd, new_path).await
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        self.budget.charge_fs(ENTRY_COST)?;
        self.inner.symlink_at(fd, src_path, dest_path).await
    }

    async fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        self.inner.unlink_file_at(fd, path).await
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        self.inner.read_via_stream(fd, offset)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        // The gap to the end of the file is charged when the stream opens;
        // the bytes, as they are written.
        let current = match self.inner.table.get(&fd)? {
            Descriptor::File(f) => f.file.metadata().map_or(0, |m| m.len()),
            Descriptor::Dir(_) => 0,
        };
        self.budget.charge_fs(offset.saturating_sub(current))?;
        let stream = self.inner.write_via_stream(fd, offset)?;
        self.budget_stream(stream)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<DynOutputStream>> {
        let stream = self.inner.append_via_stream(fd)?;
        self.budget_stream(stream)
    }

    async fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        self.inner.is_same_object(a, b).await
    }

    async fn metadata_hash(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<types::MetadataHashValue> {
        self.inner.metadata_hash(fd).await
    }

    async fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        // As for `stat-at`: the directory itself needs no lookup.
        if path == "." && self.is_dir(&fd) {
            return self.inner.metadata_hash(fd).await;
        }
        self.inner.metadata_hash_at(fd, path_flags, path).await
    }
}

impl HostDirectoryEntryStream for BudgetedFs<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<types::DirectoryEntryStream>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        self.inner.read_directory_entry(stream).await
    }

    fn drop(&mut self, stream: Resource<types::DirectoryEntryStream>) -> wasmtime::Result<()> {
        HostDirectoryEntryStream::drop(&mut self.inner, stream)
    }
}

/// A file output stream whose writes are charged to a budget.
struct BudgetedStream {
    inner: DynOutputStream,
    budget: Arc<WriteBudget>,
}

impl BudgetedStream {
    fn refused() -> StreamError {
        StreamError::LastOperationFailed(wasmtime::Error::new(BudgetExceeded))
    }
}

#[async_trait::async_trait]
impl OutputStream for BudgetedStream {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.budget
            .charge(bytes.len() as u64)
            .map_err(|_| Self::refused())?;
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        let ready = self.inner.check_write()?;
        match self.budget.remaining() {
            0 => {
                self.budget.exhausted.store(true, Ordering::Relaxed);
                Err(Self::refused())
            }
            left => Ok(ready.min(usize::try_from(left).unwrap_or(usize::MAX))),
        }
    }
}

#[async_trait::async_trait]
impl Pollable for BudgetedStream {
    async fn ready(&mut self) {
        self.inner.ready().await;
    }
}

/// Whether `path` is one name in its directory: no separator, not `.` or
/// `..`, so a lookup of it cannot leave the directory.
fn is_one_name(path: &str) -> bool {
    !path.is_empty() && path != "." && path != ".." && !path.contains('/')
}

/// Whether `open-at` may open an object of this type without blocking.
fn openable(kind: types::DescriptorType) -> bool {
    matches!(
        kind,
        types::DescriptorType::RegularFile
            | types::DescriptorType::Directory
            | types::DescriptorType::SymbolicLink
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::component::ResourceTable;
    use wasmtime_wasi::filesystem::{Dir, File};
    use wasmtime_wasi::{FsPerms, OpenMode, WasiCtxBuilder};

    /// What a `stat-at` gave, to compare.
    fn shown(stat: FsResult<types::DescriptorStat>) -> String {
        match stat {
            Ok(stat) => format!("{stat:?}"),
            Err(e) => format!("{:?}", e.downcast().ok()),
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_stat_without_a_lookup_answers_as_wasmtime_wasi_does() {
        let tmp = tempfile::tempdir().unwrap();
        let root = crate::open::tests::tree(tmp.path());
        let mut table = ResourceTable::new();
        let open = |path: &std::path::Path| std::fs::File::open(path).unwrap();
        let dir = table
            .push(Descriptor::Dir(Dir::new(
                open(&root),
                FsPerms::ReadWrite,
                OpenMode::READ | OpenMode::WRITE,
                true,
            )))
            .unwrap();
        let file = table
            .push(Descriptor::File(File::new(
                open(&root.join("a.txt")),
                FsPerms::ReadWrite,
                OpenMode::READ,
                true,
            )))
            .unwrap();
        let mut ctx = WasiCtxBuilder::new().build().filesystem().clone();
        let budget = WriteBudget::new(0);
        let mut fs = BudgetedFs {
            inner: WasiFilesystemCtxView {
                ctx: &mut ctx,
                table: &mut table,
            },
            budget: &budget,
        };
        let follow = types::PathFlags::SYMLINK_FOLLOW;
        for fd in [&dir, &file] {
            for path in [
                ".", "a.txt", "sub", "link", "dir-link", "dangling", "out", "abs", "missing", "..",
                "sub/..", "",
            ] {
                for flags in [follow, types::PathFlags::empty()] {
                    let borrow = || Resource::<Descriptor>::new_borrow(fd.rep());
                    let ours = fs.stat_at(borrow(), flags, path.into()).await;
                    let theirs = fs.inner.stat_at(borrow(), flags, path.into()).await;
                    assert_eq!(shown(ours), shown(theirs), "stat-at {path:?} {flags:?}");
                    let ours = fs.metadata_hash_at(borrow(), flags, path.into()).await;
                    let theirs = fs
                        .inner
                        .metadata_hash_at(borrow(), flags, path.into())
                        .await;
                    assert_eq!(
                        format!("{:?}", ours.map_err(|e| e.downcast().ok())),
                        format!("{:?}", theirs.map_err(|e| e.downcast().ok())),
                        "metadata-hash-at {path:?} {flags:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn charges_until_the_budget_is_spent() {
        let budget = WriteBudget::new(10);
        assert!(budget.charge(6).is_ok());
        assert!(
            budget.charge(5).is_err(),
            "a charge over what is left takes nothing"
        );
        assert!(budget.exhausted());
        assert!(budget.charge(4).is_ok());
        assert_eq!(budget.remaining(), 0);
    }
}
