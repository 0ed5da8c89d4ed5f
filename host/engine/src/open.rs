//! `open-at` in one step that cannot block: the guest's path opened with
//! `openat2` beneath its directory, non-blocking, then checked.
//!
//! Filesystem calls run on the calling thread (see `preopens.rs`), where
//! opening a FIFO would wait for a writer. Checking the path's type first
//! and then letting wasmtime-wasi open it left a window: a file replaced
//! by a FIFO between the two (by another process that can write to the
//! directory) blocked the thread. Here the object is opened with
//! `O_NONBLOCK` (a FIFO then opens at once, or fails with `ENXIO`), and the
//! open descriptor itself is what is checked: anything but a regular file
//! or a directory is closed again and refused (`not-permitted`). The path
//! is walked once, where the check walked it a second time.
//!
//! The open mirrors wasmtime-wasi 48's `Dir::open_at` (the same access
//! modes, creation flags, permission checks and `RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS` lookup, so a path cannot leave its directory),
//! and its descriptors are wasmtime-wasi's own. Where `openat2` cannot be
//! used (a kernel before 5.6, a seccomp filter, renames racing the lookup),
//! [`open_at`] answers `None` and the caller checks, then opens, as before.

use wasmtime_wasi::filesystem::{Descriptor, Dir};
use wasmtime_wasi::p2::FsError;
use wasmtime_wasi::p2::bindings::filesystem::types::{DescriptorFlags, OpenFlags};
#[cfg(target_os = "linux")]
use {
    wasmtime_wasi::OpenMode, wasmtime_wasi::filesystem::File,
    wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode,
};

/// What `open-at` gives: the descriptor or the error to return, or `None`
/// when the open must be done the other way.
#[cfg(target_os = "linux")]
pub(crate) fn open_at(
    dir: &Dir,
    follow: bool,
    path: &str,
    oflags: OpenFlags,
    flags: DescriptorFlags,
) -> Option<Result<Descriptor, FsError>> {
    use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
    use rustix::io::Errno;

    let how = match Open::of(dir, oflags, flags) {
        Ok(how) => how,
        Err(code) => return Some(Err(code.into())),
    };
    let mut o = OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    o |= match (how.read, how.write) {
        (true, false) => OFlags::RDONLY,
        (false, true) => OFlags::WRONLY,
        _ => OFlags::RDWR,
    };
    o |= match (how.create, how.truncate, how.exclusive) {
        (_, _, true) => OFlags::CREATE | OFlags::EXCL,
        (true, true, false) => OFlags::CREATE | OFlags::TRUNC,
        (true, false, false) => OFlags::CREATE,
        (false, true, false) => OFlags::TRUNC,
        (false, false, false) => OFlags::empty(),
    };
    if !follow {
        o |= OFlags::NOFOLLOW;
    }
    let mode = if how.create {
        Mode::from_bits_truncate(0o666)
    } else {
        Mode::empty()
    };
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    // `EAGAIN`: a rename somewhere on the host raced the lookup; as
    // wasmtime-wasi does, try a few times, then leave it to the other way.
    let mut opened = None;
    for _ in 0..4 {
        match rustix::fs::openat2(&*dir.dir, path, o, mode, resolve) {
            Ok(fd) => {
                opened = Some(fd);
                break;
            }
            Err(Errno::AGAIN) => continue,
            // No `openat2` here, or a seccomp filter that says so.
            Err(Errno::NOSYS | Errno::PERM) => return None,
            // The path led out of the directory.
            Err(Errno::XDEV) => return Some(Err(ErrorCode::NotPermitted.into())),
            // A FIFO with no reader opened for writing, or a socket.
            Err(Errno::NXIO) => return Some(Err(ErrorCode::NotPermitted.into())),
            Err(e) => return Some(Err(std::io::Error::from(e).into())),
        }
    }
    let fd = opened?;
    let checked = rustix::fs::fstat(&fd).and_then(|stat| {
        let kind = FileType::from_raw_mode(stat.st_mode);
        if matches!(kind, FileType::RegularFile | FileType::Directory) {
            // Regular files and directories ignore `O_NONBLOCK`; it is
            // cleared so the descriptor is as wasmtime-wasi opens it. Of
            // the flags `F_SETFL` sets, it is the only one opened with.
            rustix::fs::fcntl_setfl(&fd, OFlags::empty())?;
        }
        Ok(kind)
    });
    let kind = match checked {
        Ok(kind) => kind,
        Err(e) => return Some(Err(std::io::Error::from(e).into())),
    };
    let file = std::fs::File::from(fd);
    Some(match kind {
        FileType::Directory => Ok(Descriptor::Dir(Dir::new(
            file,
            dir.perms,
            how.mode(),
            crate::preopens::BLOCKING_CURRENT_THREAD,
        ))),
        FileType::RegularFile if oflags.contains(OpenFlags::DIRECTORY) => {
            Err(ErrorCode::NotDirectory.into())
        }
        FileType::RegularFile => Ok(Descriptor::File(File::new(
            file,
            dir.perms,
            how.mode(),
            crate::preopens::BLOCKING_CURRENT_THREAD,
        ))),
        _ => Err(ErrorCode::NotPermitted.into()),
    })
}

/// Elsewhere, the open is always done the other way.
#[cfg(not(target_os = "linux"))]
pub(crate) fn open_at(
    _dir: &Dir,
    _follow: bool,
    _path: &str,
    _oflags: OpenFlags,
    _flags: DescriptorFlags,
) -> Option<Result<Descriptor, FsError>> {
    None
}

/// How an `open-at` opens, as wasmtime-wasi 48's `Dir::open_at` decides.
#[cfg(target_os = "linux")]
struct Open {
    read: bool,
    write: bool,
    create: bool,
    exclusive: bool,
    truncate: bool,
}

#[cfg(target_os = "linux")]
impl Open {
    fn of(dir: &Dir, oflags: OpenFlags, flags: DescriptorFlags) -> Result<Open, ErrorCode> {
        let create = oflags.contains(OpenFlags::CREATE);
        let truncate = oflags.contains(OpenFlags::TRUNCATE);
        let write = create || truncate || flags.contains(DescriptorFlags::WRITE);
        let how = Open {
            // Opened for reading unless only for writing, as wasmtime-wasi
            // does: the descriptor's permissions then refuse what it may
            // not do.
            read: flags.contains(DescriptorFlags::READ) || !flags.contains(DescriptorFlags::WRITE),
            write,
            create,
            exclusive: create && oflags.contains(OpenFlags::EXCLUSIVE),
            truncate,
        };
        if flags.intersects(
            DescriptorFlags::FILE_INTEGRITY_SYNC
                | DescriptorFlags::DATA_INTEGRITY_SYNC
                | DescriptorFlags::REQUESTED_WRITE_SYNC,
        ) {
            return Err(ErrorCode::Unsupported);
        }
        if oflags.contains(OpenFlags::DIRECTORY)
            && oflags.intersects(OpenFlags::CREATE | OpenFlags::EXCLUSIVE | OpenFlags::TRUNCATE)
        {
            return Err(ErrorCode::Invalid);
        }
        if dir.perms.write_not_permitted() && how.write {
            return Err(ErrorCode::NotPermitted);
        }
        Ok(how)
    }

    /// What the descriptor reports as its access.
    fn mode(&self) -> OpenMode {
        let mut mode = OpenMode::empty();
        if self.read {
            mode |= OpenMode::READ;
        }
        if self.write {
            mode |= OpenMode::WRITE;
        }
        mode
    }
}

#[cfg(all(test, target_os = "linux"))]
pub(crate) mod tests {
    use super::*;
    use std::path::Path;
    use std::sync::mpsc;
    use std::time::Duration;
    use wasmtime_wasi::FsPerms;

    fn dir(path: &Path, perms: FsPerms) -> Dir {
        let file = std::fs::File::open(path).unwrap();
        Dir::new(file, perms, OpenMode::READ | OpenMode::WRITE, true)
    }

    /// The error an open gave, as the guest sees it.
    fn code(opened: Option<Result<Descriptor, FsError>>) -> ErrorCode {
        match opened.expect("openat2 is used here") {
            Ok(_) => panic!("it opened"),
            Err(e) => e.downcast().expect("an error code"),
        }
    }

    fn read() -> DescriptorFlags {
        DescriptorFlags::READ
    }

    fn mkfifo(path: &Path) {
        use rustix::fs::{CWD, FileType, Mode, mknodat};
        mknodat(
            CWD,
            path,
            FileType::Fifo,
            Mode::from_bits_truncate(0o600),
            0,
        )
        .unwrap();
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer_or_a_reader() {
        let tmp = tempfile::tempdir().unwrap();
        mkfifo(&tmp.path().join("pipe"));
        std::os::unix::fs::symlink("pipe", tmp.path().join("to-pipe")).unwrap();
        let (done, finished) = mpsc::channel();
        let root = tmp.path().to_path_buf();
        std::thread::spawn(move || {
            let d = dir(&root, FsPerms::ReadWrite);
            let mut codes = Vec::new();
            for path in ["pipe", "to-pipe"] {
                for flags in [read(), DescriptorFlags::WRITE] {
                    codes.push(code(open_at(&d, true, path, OpenFlags::empty(), flags)));
                }
            }
            done.send(codes).unwrap();
        });
        let codes = finished
            .recv_timeout(Duration::from_secs(10))
            .expect("the open did not block");
        assert!(
            codes.iter().all(|c| matches!(c, ErrorCode::NotPermitted)),
            "{codes:?}"
        );
    }

    #[test]
    fn a_socket_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let _listener = std::os::unix::net::UnixListener::bind(tmp.path().join("sock")).unwrap();
        let d = dir(tmp.path(), FsPerms::ReadWrite);
        let c = code(open_at(&d, true, "sock", OpenFlags::empty(), read()));
        assert!(matches!(c, ErrorCode::NotPermitted), "{c:?}");
    }

    #[test]
    fn files_and_directories_open_as_wasmtime_wasi_opens_them() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), "hello").unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        let d = dir(tmp.path(), FsPerms::ReadWrite);
        match open_at(&d, true, "a.txt", OpenFlags::empty(), read()) {
            Some(Ok(Descriptor::File(f))) => {
                assert_eq!(f.open_mode, OpenMode::READ);
                assert_eq!(f.perms, FsPerms::ReadWrite);
                let status = rustix::fs::fcntl_getfl(&*f.file).unwrap();
                assert!(!status.contains(rustix::fs::OFlags::NONBLOCK));
                assert_eq!(std::io::read_to_string(&*f.file).unwrap(), "hello");
            }
            _ => panic!("a.txt did not open as a file"),
        }
        assert!(matches!(
            open_at(&d, true, "sub", OpenFlags::DIRECTORY, read()),
            Some(Ok(Descriptor::Dir(_)))
        ));
        let c = code(open_at(&d, true, "a.txt", OpenFlags::DIRECTORY, read()));
        assert!(matches!(c, ErrorCode::NotDirectory), "{c:?}");
        let c = code(open_at(&d, true, "missing", OpenFlags::empty(), read()));
        assert!(matches!(c, ErrorCode::NoEntry), "{c:?}");
    }

    #[test]
    fn creating_and_truncating_follow_the_flags() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), "hello").unwrap();
        let d = dir(tmp.path(), FsPerms::ReadWrite);
        let write = DescriptorFlags::WRITE;
        let c = code(open_at(
            &d,
            true,
            "a.txt",
            OpenFlags::CREATE | OpenFlags::EXCLUSIVE,
            write,
        ));
        assert!(matches!(c, ErrorCode::Exist), "{c:?}");
        assert!(matches!(
            open_at(&d, true, "new.txt", OpenFlags::CREATE, write),
            Some(Ok(Descriptor::File(_)))
        ));
        assert!(tmp.path().join("new.txt").is_file());
        assert!(matches!(
            open_at(&d, true, "a.txt", OpenFlags::TRUNCATE, write),
            Some(Ok(Descriptor::File(_)))
        ));
        assert_eq!(std::fs::read(tmp.path().join("a.txt")).unwrap(), b"");
        let c = code(open_at(
            &d,
            true,
            "sub",
            OpenFlags::DIRECTORY | OpenFlags::CREATE,
            read(),
        ));
        assert!(matches!(c, ErrorCode::Invalid), "{c:?}");
    }

    #[test]
    fn a_read_only_directory_opens_nothing_for_writing() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), "hello").unwrap();
        let d = dir(tmp.path(), FsPerms::ReadOnly);
        for (oflags, flags) in [
            (OpenFlags::empty(), DescriptorFlags::WRITE),
            (OpenFlags::CREATE, read()),
            (OpenFlags::TRUNCATE, read()),
        ] {
            let c = code(open_at(&d, true, "a.txt", oflags, flags));
            assert!(matches!(c, ErrorCode::NotPermitted), "{c:?}");
        }
        assert_eq!(std::fs::read(tmp.path().join("a.txt")).unwrap(), b"hello");
        assert!(matches!(
            open_at(&d, true, "a.txt", OpenFlags::empty(), read()),
            Some(Ok(Descriptor::File(f))) if f.perms == FsPerms::ReadOnly
        ));
    }

    #[test]
    fn a_path_cannot_leave_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let inside = tmp.path().join("inside");
        std::fs::create_dir(&inside).unwrap();
        std::fs::write(tmp.path().join("secret.txt"), "secret").unwrap();
        std::os::unix::fs::symlink("../secret.txt", inside.join("out")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", inside.join("abs")).unwrap();
        std::fs::write(inside.join("a.txt"), "a").unwrap();
        std::os::unix::fs::symlink("a.txt", inside.join("in")).unwrap();
        let d = dir(&inside, FsPerms::ReadWrite);
        for path in [
            "../secret.txt",
            "out",
            "abs",
            "/etc/passwd",
            "/proc/self/root",
        ] {
            let c = code(open_at(&d, true, path, OpenFlags::empty(), read()));
            assert!(matches!(c, ErrorCode::NotPermitted), "{path}: {c:?}");
        }
        assert!(matches!(
            open_at(&d, true, "in", OpenFlags::empty(), read()),
            Some(Ok(Descriptor::File(_)))
        ));
        let c = code(open_at(&d, false, "in", OpenFlags::empty(), read()));
        assert!(matches!(c, ErrorCode::Loop), "{c:?}");
    }

    /// A tree to open in: a file, a directory, links to each, a dangling
    /// link, and links out of `root` (to a file beside it and to `/etc`).
    pub(crate) fn tree(at: &Path) -> std::path::PathBuf {
        let root = at.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("a.txt"), "hello").unwrap();
        std::fs::write(at.join("secret.txt"), "secret").unwrap();
        for (link, target) in [
            ("link", "a.txt"),
            ("dir-link", "sub"),
            ("dangling", "missing"),
            ("out", "../secret.txt"),
            ("abs", "/etc/passwd"),
        ] {
            std::os::unix::fs::symlink(target, root.join(link)).unwrap();
        }
        root
    }

    /// Everything under `at`, links not followed: each name's type, mode
    /// and content or target.
    fn contents(at: &Path) -> Vec<String> {
        use std::os::unix::fs::MetadataExt;
        let mut seen = Vec::new();
        let mut names: Vec<_> = std::fs::read_dir(at)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for path in names {
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let what = if meta.is_symlink() {
                format!("-> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                format!("{:?}", contents(&path))
            } else {
                format!("{:?}", std::fs::read_to_string(&path).unwrap())
            };
            seen.push(format!("{name} {:o} {what}", meta.mode()));
        }
        seen
    }

    /// What an open gave: the error, or the descriptor's kind, access,
    /// permissions and the file status flags it was opened with.
    fn opened(result: Result<Descriptor, ErrorCode>) -> String {
        let (kind, fd, mode, perms) = match &result {
            Ok(Descriptor::File(f)) => ("file", &f.file, f.open_mode, f.perms),
            Ok(Descriptor::Dir(d)) => ("dir", &d.dir, d.open_mode, d.perms),
            Err(code) => return format!("{code:?}"),
        };
        let status = rustix::fs::fcntl_getfl(&**fd).unwrap();
        format!("{kind} {mode:?} {perms:?} {status:?}")
    }

    /// The same open through wasmtime-wasi's own `open-at`.
    async fn wasmtime_wasi_open(
        dir: Dir,
        follow: bool,
        path: &str,
        oflags: OpenFlags,
        flags: DescriptorFlags,
    ) -> Result<Descriptor, ErrorCode> {
        use wasmtime::component::ResourceTable;
        use wasmtime_wasi::WasiCtxBuilder;
        use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
        use wasmtime_wasi::p2::bindings::filesystem::types::{HostDescriptor, PathFlags};

        let mut ctx = WasiCtxBuilder::new().build().filesystem().clone();
        let mut table = ResourceTable::new();
        let fd = table.push(Descriptor::Dir(dir)).unwrap();
        let path_flags = if follow {
            PathFlags::SYMLINK_FOLLOW
        } else {
            PathFlags::empty()
        };
        let mut fs = WasiFilesystemCtxView {
            ctx: &mut ctx,
            table: &mut table,
        };
        match fs.open_at(fd, path_flags, path.into(), oflags, flags).await {
            Ok(opened) => Ok(table.delete(opened).unwrap()),
            Err(e) => Err(e.downcast().expect("an error code")),
        }
    }

    /// Every combination of path, link following, open flags, descriptor
    /// flags and directory permissions gives what wasmtime-wasi's own
    /// `open-at` gives, and leaves the files as it leaves them.
    #[tokio::test]
    async fn every_open_answers_as_wasmtime_wasi_does() {
        let tmp = tempfile::tempdir().unwrap();
        // Two copies of the tree, made again after an open that changed it.
        let (ours_at, theirs_at) = (tmp.path().join("ours"), tmp.path().join("theirs"));
        let root = tree(&ours_at);
        tree(&theirs_at);
        let pristine = contents(&ours_at);
        for perms in [FsPerms::ReadWrite, FsPerms::ReadOnly] {
            for path in [
                "a.txt",
                "sub",
                "sub/",
                "link",
                "dir-link",
                "dangling",
                "missing",
                "sub/../a.txt",
                ".",
                "..",
                "",
                "out",
                "abs",
                "/etc/passwd",
                "/proc/self/root",
            ] {
                for follow in [true, false] {
                    for oflags in [
                        OpenFlags::empty(),
                        OpenFlags::CREATE,
                        OpenFlags::CREATE | OpenFlags::EXCLUSIVE,
                        OpenFlags::TRUNCATE,
                        OpenFlags::CREATE | OpenFlags::TRUNCATE,
                        OpenFlags::DIRECTORY,
                        OpenFlags::DIRECTORY | OpenFlags::TRUNCATE,
                    ] {
                        for flags in [
                            DescriptorFlags::empty(),
                            read(),
                            DescriptorFlags::WRITE,
                            read() | DescriptorFlags::WRITE,
                            read() | DescriptorFlags::MUTATE_DIRECTORY,
                            read() | DescriptorFlags::DATA_INTEGRITY_SYNC,
                        ] {
                            let what = format!("{path:?} {follow} {oflags:?} {flags:?} {perms:?}");
                            let ours = open_at(&dir(&root, perms), follow, path, oflags, flags)
                                .expect("openat2 is used here")
                                .map_err(|e| e.downcast().expect("an error code"));
                            let theirs = wasmtime_wasi_open(
                                dir(&theirs_at.join("root"), perms),
                                follow,
                                path,
                                oflags,
                                flags,
                            )
                            .await;
                            assert_eq!(opened(ours), opened(theirs), "{what}");
                            assert_eq!(contents(&ours_at), contents(&theirs_at), "{what}");
                            if contents(&ours_at) != pristine {
                                for at in [&ours_at, &theirs_at] {
                                    std::fs::remove_dir_all(at).unwrap();
                                    tree(at);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
