//! File helpers that tools keep needing: an atomic write, the stamp the
//! host records for a read, binary detection, and `cat -n` numbering.

use crate::{FileStamp, ToolError, io_error};
use std::hash::{BuildHasher, Hasher};
use std::path::Path;
use std::time::UNIX_EPOCH;

/// Writes `bytes` to `path` atomically: into a temporary file beside it,
/// then renamed over it, so a reader never sees half a file. Creates
/// missing parent directories. Returns whether the file existed before.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<bool, ToolError> {
    let shown = path.display().to_string();
    let existed = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolError::InvalidInput(format!("{shown} is a directory")));
        }
        Ok(_) => true,
        Err(_) => false,
    };
    let parent = path
        .parent()
        .ok_or_else(|| ToolError::InvalidInput(format!("{shown} has no parent directory")))?;
    std::fs::create_dir_all(parent).map_err(|e| io_error(&e, &parent.display().to_string()))?;
    let name = path
        .file_name()
        .ok_or_else(|| ToolError::InvalidInput(format!("{shown} does not name a file")))?;
    let nonce = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let tmp = parent.join(format!(
        ".{}.airlock-{nonce:016x}.tmp",
        name.to_string_lossy()
    ));
    if let Err(e) = std::fs::write(&tmp, bytes) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_error(&e, &shown));
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_error(&e, &shown));
    }
    Ok(existed)
}

/// The stamp of the file at `path` as it is now: what the host records
/// when a read is recorded, to compare with [`crate::Context::file_read_state`].
pub fn stamp(path: &Path) -> std::io::Result<FileStamp> {
    let meta = std::fs::metadata(path)?;
    let modified = meta.modified()?;
    let ns = modified
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    Ok(FileStamp {
        modified_ns: u64::try_from(ns).unwrap_or(u64::MAX),
        size: meta.len(),
    })
}

/// Whether `head` (the start of a file) looks binary: it holds a NUL byte.
pub fn looks_binary(head: &[u8]) -> bool {
    head.contains(&0)
}

/// Formats one line the way `cat -n` does: the number right-aligned in six
/// columns, a tab, the line.
pub fn numbered(number: usize, line: &str) -> String {
    format!("{number:>6}\t{line}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_like_cat_n() {
        assert_eq!(numbered(1, "a"), "     1\ta");
        assert_eq!(numbered(1234567, "b"), "1234567\tb");
    }

    #[test]
    fn detects_binary() {
        assert!(looks_binary(b"ab\0c"));
        assert!(!looks_binary("héllo\n".as_bytes()));
    }

    #[test]
    fn writes_atomically_and_creates_parents() {
        let dir = std::env::temp_dir().join(format!("airlock-sdk-test-{}", std::process::id()));
        let path = dir.join("a/b/c.txt");
        assert!(!write_atomic(&path, b"one").unwrap());
        assert!(write_atomic(&path, b"two").unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
        assert_eq!(stamp(&path).unwrap().size, 3);
        assert!(matches!(
            write_atomic(&dir, b"x"),
            Err(ToolError::InvalidInput(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
