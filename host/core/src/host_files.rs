//! The host's own files: tool components, the configuration, settings
//! files, hook components, cached artifacts. Each is opened as a regular
//! file only (never a FIFO or a device, so an open cannot block) and read
//! with a byte cap enforced while reading, not taken from metadata (a
//! procfs file reports size 0 and never ends). Where a guest could have
//! planted a link, the last component is not followed either.
//!
//! Files the host writes for itself (cache entries, approvals) are written
//! whole or not at all, private to the user ([`write_private`]).
//!
//! Files inside granted directories are not opened here: those go through
//! the grants' `cap-std` handles (and are read with
//! [`read_opened_capped`] once opened).

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Whether the last component of a path may be a symbolic link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Links {
    /// Follow a link (files the operator names, such as the configuration).
    Follow,
    /// Refuse a link (entries of directories the host lists or writes).
    Refuse,
}

/// Opens `path` for reading: a regular file only, without blocking on a
/// FIFO or a device.
pub fn open_regular(path: &Path, links: Links) -> std::io::Result<File> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) && links == Links::Refuse {
                std::io::Error::other("it is a symbolic link, which is not followed here")
            } else {
                e
            }
        })?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    Ok(file)
}

/// Reads the whole of `path`, refusing it once more than `cap` bytes have
/// been read.
pub fn read_capped(path: &Path, cap: u64, links: Links) -> std::io::Result<Vec<u8>> {
    read_opened_capped(open_regular(path, links)?, cap)
}

/// Reads the whole of a file the host opened itself (through a directory
/// handle, say, without blocking and without following a link): a regular
/// file only, refused once more than `cap` bytes have been read.
pub fn read_opened_capped(file: File, cap: u64) -> std::io::Result<Vec<u8>> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    // Room for what the metadata reports (a file at or under the cap, and
    // the one byte more that would show it grew past it) so the read does
    // not copy the bytes again each time the buffer doubles; a file that
    // reports less than it holds (procfs) still reads to the cap.
    let mut bytes = Vec::with_capacity(meta.len().min(cap).saturating_add(1) as usize);
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("it is larger than {cap} bytes"),
        ));
    }
    Ok(bytes)
}

/// [`read_capped`] as UTF-8 text.
pub fn read_text_capped(path: &Path, cap: u64, links: Links) -> std::io::Result<String> {
    String::from_utf8(read_capped(path, cap, links)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "it is not UTF-8"))
}

/// A temporary name beside `path`, private to this writer (process and
/// counter).
pub fn temp_beside(path: &Path) -> std::path::PathBuf {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    path.with_extension(format!("tmp-{}-{n}", std::process::id()))
}

/// Writes a file only this user may read, whole or not at all: a new
/// temporary file beside it (0600), synced, then renamed into place.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temp_beside(path);
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

/// Opens (creating it, private to the user) a file the host only locks:
/// a regular file, not a link, never blocking on the open.
pub fn open_lock(path: &Path) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    Ok(file)
}

/// The most a configuration or settings file may hold.
pub const CONFIG_BYTES: u64 = 4 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_regular_files_within_the_cap() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("a");
        std::fs::write(&file, "hello").unwrap();
        assert_eq!(read_capped(&file, 5, Links::Refuse).unwrap(), b"hello");
        assert!(read_capped(&file, 4, Links::Refuse).is_err());
    }

    #[test]
    fn a_file_is_read_into_one_buffer_of_its_size() {
        // Components run to tens of megabytes, read at every start: a
        // buffer grown by doubling copied them again at each step.
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("big");
        let written = vec![7u8; 3_000_001];
        std::fs::write(&file, &written).unwrap();
        let read = read_capped(&file, 64 << 20, Links::Refuse).unwrap();
        assert_eq!(read, written);
        assert!(
            read.capacity() <= written.len() + 1,
            "a buffer of {} bytes for {}",
            read.capacity(),
            written.len()
        );
    }

    #[test]
    fn the_cap_holds_for_files_whose_size_lies() {
        let err = read_capped(Path::new("/proc/self/maps"), 16, Links::Follow).unwrap_err();
        assert!(err.to_string().contains("larger than 16"), "{err}");
        let zero = read_capped(Path::new("/dev/zero"), 16, Links::Follow).unwrap_err();
        assert!(zero.to_string().contains("not a regular file"), "{zero}");
    }

    #[test]
    fn links_and_fifos_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("real"), "x").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("real"), tmp.path().join("link")).unwrap();
        let err = read_capped(&tmp.path().join("link"), 16, Links::Refuse).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(
            read_capped(&tmp.path().join("link"), 16, Links::Follow).unwrap(),
            b"x"
        );
        let fifo = tmp.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_capped(&fifo, 16, Links::Follow).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}
