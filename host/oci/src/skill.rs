//! Skills in OCI registries. A skill is one artifact: an OCI image
//! manifest with one layer of type [`SKILL_LAYER`], the skill's folder as
//! a tar, under a config of type [`SKILL_CONFIG`]: JSON with the skill's
//! `name` and `description` and each file's `path`, `size` and `digest`,
//! for a person browsing the registry. An installer reads the layer and
//! checks the folder it holds; it does not rely on the config.
//!
//! [`pack`] makes the same tar from the same files: entries sorted by
//! path, each folder before what it holds, owner 0, time 0, mode 0755 for
//! folders and executable files and 0644 for the others, so one folder
//! published twice is one digest. [`unpack`] reads a tar a registry sent,
//! held to what a skill may be: files and folders only (a link, device or
//! FIFO is refused), relative UTF-8 paths without `..`, no path twice and
//! none under a file, at most `max_files` files and `max_bytes` bytes, each
//! size checked before its bytes are read.

use crate::{Artifact, Auth, Error, Kind, OciRef, Options, created, push, sha256};
use std::collections::BTreeSet;
use std::io::Read;
use std::path::Component;

/// The media type of a skill artifact's config.
pub const SKILL_CONFIG: &str = "application/vnd.airlock.skill.config.v1+json";

/// The media type of the layer that holds a skill's folder: an
/// uncompressed tar, as OCI image layers are.
pub const SKILL_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";

/// A file of a skill's folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FolderFile {
    /// Its path in the folder, `/`-separated.
    pub path: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Whether it may be run as a program (mode 0755 rather than 0644).
    pub executable: bool,
}

/// The skill's folder, `files`, as a tar (see the module's header).
///
/// ```
/// use airlock_oci::skill::{FolderFile, pack, unpack};
/// let files = vec![
///     FolderFile { path: "SKILL.md".into(), bytes: b"---\nname: x\n---\n".to_vec(), executable: false },
///     FolderFile { path: "scripts/run.sh".into(), bytes: b"echo hi\n".to_vec(), executable: true },
/// ];
/// let tar = pack(&files).unwrap();
/// assert_eq!(pack(&files).unwrap(), tar);
/// assert_eq!(unpack(&tar, 512, 1 << 20).unwrap(), files);
/// ```
pub fn pack(files: &[FolderFile]) -> Result<Vec<u8>, String> {
    let mut folders = BTreeSet::new();
    for file in files {
        let mut at = file.path.as_str();
        while let Some((parent, _)) = at.rsplit_once('/') {
            folders.insert(parent.to_string());
            at = parent;
        }
    }
    let mut entries: Vec<(String, Option<&FolderFile>)> = folders
        .into_iter()
        .map(|f| (format!("{f}/"), None))
        .chain(files.iter().map(|f| (f.path.clone(), Some(f))))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut tar = tar::Builder::new(Vec::new());
    for (path, file) in entries {
        let mut header = tar::Header::new_ustar();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        let (kind, mode, bytes) = match file {
            None => (tar::EntryType::Directory, 0o755, &[][..]),
            Some(f) => (
                tar::EntryType::Regular,
                if f.executable { 0o755 } else { 0o644 },
                f.bytes.as_slice(),
            ),
        };
        header.set_entry_type(kind);
        header.set_mode(mode);
        header.set_size(bytes.len() as u64);
        tar.append_data(&mut header, &path, bytes)
            .map_err(|e| format!("{path} cannot be put in a tar: {e}"))?;
    }
    tar.into_inner()
        .map_err(|e| format!("the tar cannot be finished: {e}"))
}

/// The files of the skill's folder in `tar`, checked (see the module's
/// header), in the tar's order.
pub fn unpack(tar: &[u8], max_files: usize, max_bytes: u64) -> Result<Vec<FolderFile>, String> {
    let mut archive = tar::Archive::new(tar);
    let unreadable = |e: std::io::Error| format!("the skill's tar does not read: {e}");
    let mut files: Vec<FolderFile> = Vec::new();
    let mut paths = BTreeSet::new();
    let mut total = 0u64;
    for entry in archive.entries().map_err(unreadable)? {
        let mut entry = entry.map_err(unreadable)?;
        let raw = entry.path().map_err(unreadable)?.into_owned();
        let shown = raw.to_string_lossy().into_owned();
        let mut parts = Vec::new();
        for part in raw.components() {
            match part {
                Component::Normal(name) => parts.push(
                    name.to_str()
                        .ok_or_else(|| format!("{shown} is not named in UTF-8"))?,
                ),
                Component::CurDir => {}
                _ => {
                    return Err(format!(
                        "{shown} is not a path inside the skill's folder (absolute, or with ..)"
                    ));
                }
            }
        }
        if parts.is_empty() {
            continue;
        }
        let path = parts.join("/");
        match entry.header().entry_type() {
            tar::EntryType::Directory => continue,
            tar::EntryType::Regular => {}
            other => {
                return Err(format!(
                    "{path} is a {other:?} entry: a skill holds only files and folders"
                ));
            }
        }
        if files.len() == max_files {
            return Err(format!("it holds more than {max_files} files"));
        }
        let size = entry.header().size().map_err(unreadable)?;
        total = total.saturating_add(size);
        if total > max_bytes {
            return Err(format!("it holds more than {max_bytes} bytes"));
        }
        let mut bytes = Vec::with_capacity(size as usize);
        (&mut entry)
            .take(size)
            .read_to_end(&mut bytes)
            .map_err(unreadable)?;
        if bytes.len() as u64 != size {
            return Err(format!("{path} is cut short in the tar"));
        }
        if !paths.insert(path.clone()) {
            return Err(format!("{path} is in the tar twice"));
        }
        let executable = entry.header().mode().map_err(unreadable)? & 0o111 != 0;
        files.push(FolderFile {
            path,
            bytes,
            executable,
        });
    }
    for file in &files {
        let mut at = file.path.as_str();
        while let Some((parent, _)) = at.rsplit_once('/') {
            if paths.contains(parent) {
                return Err(format!("{} is under {parent}, which is a file", file.path));
            }
            at = parent;
        }
    }
    Ok(files)
}

/// Pushes the skill `name` (what it is for: `description`), its folder
/// `files`, to `reference` (which names a tag), and returns where it is,
/// by digest.
pub async fn publish_skill(
    reference: &OciRef,
    name: &str,
    description: &str,
    files: &[FolderFile],
    auth: &Auth,
    options: &Options,
) -> Result<Artifact, Error> {
    let tar = pack(files).map_err(Error::Reference)?;
    let listed: Vec<serde_json::Value> = files
        .iter()
        .map(|f| {
            serde_json::json!({
                "path": f.path,
                "size": f.bytes.len(),
                "digest": sha256(&f.bytes),
            })
        })
        .collect();
    let config = serde_json::json!({
        "created": created(),
        "name": name,
        "description": description,
        "files": listed,
    });
    push(reference, Kind::Skill, &tar, config, auth, options).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, bytes: &[u8]) -> FolderFile {
        FolderFile {
            path: path.into(),
            bytes: bytes.to_vec(),
            executable: false,
        }
    }

    /// A tar with one entry of `kind` at `path` holding `bytes`, written
    /// as a hostile registry may write it.
    fn raw_tar(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        for (path, kind, bytes) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(*kind);
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            let name = &mut header.as_old_mut().name;
            name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_cksum();
            tar.append(&header, *bytes).unwrap();
        }
        tar.into_inner().unwrap()
    }

    #[test]
    fn a_folder_packs_the_same_and_unpacks_as_it_was() {
        let long = format!("{}/deep.txt", "nested".repeat(30));
        let files = vec![
            file("SKILL.md", b"x"),
            file(&long, b"deep"),
            FolderFile {
                executable: true,
                ..file("scripts/run.sh", b"echo\n")
            },
        ];
        let tar = pack(&files).unwrap();
        assert_eq!(tar, pack(&files).unwrap());
        let mut back = unpack(&tar, 512, 1 << 20).unwrap();
        back.sort_by(|a, b| a.path.cmp(&b.path));
        let mut want = files.clone();
        want.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(back, want);
    }

    #[test]
    fn a_tar_that_is_not_a_plain_folder_is_refused() {
        let refused = |tar: Vec<u8>, why: &str| {
            let error = unpack(&tar, 512, 1 << 20).unwrap_err();
            assert!(error.contains(why), "{error}");
        };
        use tar::EntryType as T;
        refused(raw_tar(&[("../up", T::Regular, b"x")]), "not a path inside");
        refused(
            raw_tar(&[("/etc/passwd", T::Regular, b"x")]),
            "not a path inside",
        );
        refused(raw_tar(&[("key", T::Symlink, b"")]), "Symlink");
        refused(raw_tar(&[("key", T::Link, b"")]), "Link");
        refused(raw_tar(&[("fifo", T::Fifo, b"")]), "Fifo");
        refused(
            raw_tar(&[("a", T::Regular, b"1"), ("a", T::Regular, b"2")]),
            "twice",
        );
        refused(
            raw_tar(&[("a", T::Regular, b"1"), ("a/b", T::Regular, b"2")]),
            "which is a file",
        );
        let many: Vec<(String, T, &[u8])> = (0..3)
            .map(|i| (format!("f{i}"), T::Regular, &b"x"[..]))
            .collect();
        let many: Vec<(&str, T, &[u8])> =
            many.iter().map(|(p, k, b)| (p.as_str(), *k, *b)).collect();
        assert!(
            unpack(&raw_tar(&many), 2, 1 << 20)
                .unwrap_err()
                .contains("more than 2 files")
        );
        let big = vec![0u8; 2048];
        assert!(
            unpack(&raw_tar(&[("big", T::Regular, &big)]), 512, 1024)
                .unwrap_err()
                .contains("more than 1024 bytes")
        );
    }
}
