//! Guest paths: the absolute paths a tool names inside its sandbox, resolved
//! lexically. A leaf: it knows nothing of grants or mounts.

use std::path::{Component, Path};

/// An absolute guest path with `.` and `..` resolved lexically.
pub fn normalize_guest(path: &str) -> Option<String> {
    if !path.starts_with('/') || path.contains('\0') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for c in Path::new(path).components() {
        match c {
            Component::Normal(p) => parts.push(p.to_str()?),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    Some(format!("/{}", parts.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_guest_paths() {
        assert_eq!(normalize_guest("/a/./b/../c").unwrap(), "/a/c");
        assert_eq!(normalize_guest("/../..").unwrap(), "/");
        assert!(normalize_guest("relative").is_none());
    }
}
