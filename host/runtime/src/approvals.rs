//! Approved tool code: `airlock approve NAME` records the digest of the
//! component now named NAME in `approved.json` (Airlock's configuration
//! directory), and a reload serves a changed component only once its new
//! digest is recorded there. Until then the version already loaded goes on
//! being served (see [`crate::Registry::load_again`]).

use airlock_core::host_files::{self, Links};
use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

/// The approvals: tool name → the digests approved for it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Approvals {
    /// Approved digests (BLAKE3 of the component, hex) by tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, Vec<String>>,
}

impl Approvals {
    /// Reads `path`; an absent file approves nothing. A file that cannot
    /// be read or parsed approves nothing either, with a warning.
    pub fn read(path: &Path) -> Approvals {
        match host_files::read_text_capped(path, host_files::CONFIG_BYTES, Links::Refuse) {
            Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
                tracing::warn!("{} is not an approvals file: {e}", path.display());
                Approvals::default()
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Approvals::default(),
            Err(e) => {
                tracing::warn!("cannot read {}: {e}", path.display());
                Approvals::default()
            }
        }
    }

    /// Whether `digest` is approved for `name`.
    pub fn approves(&self, name: &str, digest: &str) -> bool {
        self.tools
            .get(name)
            .is_some_and(|d| d.iter().any(|x| x == digest))
    }

    /// Records `digest` for `name` in the file at `path` (0600, written
    /// whole: a temporary file, then a rename).
    pub fn record(path: &Path, name: &str, digest: &str) -> std::io::Result<()> {
        let mut approvals = Approvals::read(path);
        let digests = approvals.tools.entry(name.to_string()).or_default();
        if !digests.iter().any(|d| d == digest) {
            digests.push(digest.to_string());
        }
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        host_files::write_private(path, &serde_json::to_vec_pretty(&approvals)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_reads_approvals() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("airlock/approved.json");
        assert_eq!(Approvals::read(&path), Approvals::default());
        Approvals::record(&path, "read", "abc").unwrap();
        Approvals::record(&path, "read", "abc").unwrap();
        Approvals::record(&path, "read", "def").unwrap();
        let approvals = Approvals::read(&path);
        assert!(approvals.approves("read", "abc") && approvals.approves("read", "def"));
        assert!(!approvals.approves("write", "abc"));
        assert_eq!(approvals.tools["read"].len(), 2);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
