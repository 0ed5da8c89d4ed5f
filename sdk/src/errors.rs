//! Turning `std::io::Error`s into [`ToolError`]s a model can act on, named
//! by their WASI errno.

use crate::{IoError, ToolError};
use std::io::ErrorKind;

/// Converts an I/O error on `path` into a [`ToolError`]: an `io` error
/// carrying its errno name (`ENOENT` for a missing file, `EPERM`,
/// `EISDIR`, ...), as the Python and JavaScript SDKs report them. The
/// message names the path as the model gave it. (`not-found` is for what
/// a tool looks up that is not there: a record, a name.)
pub fn io_error(err: &std::io::Error, path: &str) -> ToolError {
    if err.kind() == ErrorKind::NotFound {
        return ToolError::Io(IoError {
            code: "ENOENT".into(),
            message: format!("{path} does not exist"),
        });
    }
    let code = err
        .raw_os_error()
        .and_then(wasi_errno_name)
        .unwrap_or_else(|| kind_errno_name(err.kind()));
    ToolError::Io(IoError {
        code: code.into(),
        message: format!("{path}: {}", describe(err)),
    })
}

/// The OS error text without the " (os error N)" suffix, which means
/// nothing to a model.
fn describe(err: &std::io::Error) -> String {
    let text = err.to_string();
    match text.rfind(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// WASI errno numbers as wasi-libc defines them.
fn wasi_errno_name(code: i32) -> Option<&'static str> {
    const NAMES: [&str; 77] = [
        "ESUCCESS",
        "E2BIG",
        "EACCES",
        "EADDRINUSE",
        "EADDRNOTAVAIL",
        "EAFNOSUPPORT",
        "EAGAIN",
        "EALREADY",
        "EBADF",
        "EBADMSG",
        "EBUSY",
        "ECANCELED",
        "ECHILD",
        "ECONNABORTED",
        "ECONNREFUSED",
        "ECONNRESET",
        "EDEADLK",
        "EDESTADDRREQ",
        "EDOM",
        "EDQUOT",
        "EEXIST",
        "EFAULT",
        "EFBIG",
        "EHOSTUNREACH",
        "EIDRM",
        "EILSEQ",
        "EINPROGRESS",
        "EINTR",
        "EINVAL",
        "EIO",
        "EISCONN",
        "EISDIR",
        "ELOOP",
        "EMFILE",
        "EMLINK",
        "EMSGSIZE",
        "EMULTIHOP",
        "ENAMETOOLONG",
        "ENETDOWN",
        "ENETRESET",
        "ENETUNREACH",
        "ENFILE",
        "ENOBUFS",
        "ENODEV",
        "ENOENT",
        "ENOEXEC",
        "ENOLCK",
        "ENOLINK",
        "ENOMEM",
        "ENOMSG",
        "ENOPROTOOPT",
        "ENOSPC",
        "ENOSYS",
        "ENOTCONN",
        "ENOTDIR",
        "ENOTEMPTY",
        "ENOTRECOVERABLE",
        "ENOTSOCK",
        "ENOTSUP",
        "ENOTTY",
        "ENXIO",
        "EOVERFLOW",
        "EOWNERDEAD",
        "EPERM",
        "EPIPE",
        "EPROTO",
        "EPROTONOSUPPORT",
        "EPROTOTYPE",
        "ERANGE",
        "EROFS",
        "ESPIPE",
        "ESRCH",
        "ESTALE",
        "ETIMEDOUT",
        "ETXTBSY",
        "EXDEV",
        "ENOTCAPABLE",
    ];
    if cfg!(target_os = "wasi") {
        usize::try_from(code)
            .ok()
            .filter(|&c| c > 0)
            .and_then(|c| NAMES.get(c))
            .copied()
    } else {
        None
    }
}

fn kind_errno_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::PermissionDenied => "EACCES",
        ErrorKind::AlreadyExists => "EEXIST",
        ErrorKind::IsADirectory => "EISDIR",
        ErrorKind::NotADirectory => "ENOTDIR",
        ErrorKind::DirectoryNotEmpty => "ENOTEMPTY",
        ErrorKind::InvalidInput | ErrorKind::InvalidData => "EINVAL",
        ErrorKind::ReadOnlyFilesystem => "EROFS",
        ErrorKind::StorageFull => "ENOSPC",
        ErrorKind::TimedOut => "ETIMEDOUT",
        ErrorKind::Interrupted => "EINTR",
        _ => "EIO",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_files_are_enoent() {
        let err = std::io::Error::from(ErrorKind::NotFound);
        assert!(matches!(
            io_error(&err, "/w/a"),
            ToolError::Io(e) if e.code == "ENOENT" && e.message == "/w/a does not exist"
        ));
    }

    #[test]
    fn other_errors_carry_an_errno_name_and_the_path() {
        let err = std::io::Error::new(ErrorKind::IsADirectory, "Is a directory");
        match io_error(&err, "/w/d") {
            ToolError::Io(e) => {
                assert_eq!(e.code, "EISDIR");
                assert_eq!(e.message, "/w/d: Is a directory");
            }
            other => panic!("{other:?}"),
        }
    }
}
