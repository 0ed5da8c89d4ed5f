//! A guest for the filesystem-confinement suite: each call performs one
//! operation with plain `std::fs`, exactly as given (no SDK path checks),
//! and reports what happened: `ok: ...`, or an error carrying the errno.
//! It asks for read-write access and claims nothing, so the host's grants
//! are the only thing between it and the disk.

use airlock_sdk::{
    Access, Context, Describe, JsonSchema, Output, Tool, ToolError, export_tool, io_error,
};
use serde::Deserialize;
use std::io::{Read, Seek, SeekFrom, Write};

/// One operation.
#[derive(Deserialize, JsonSchema)]
struct Probe {
    /// The operation.
    op: String,
    /// The path it acts on.
    #[serde(default)]
    path: String,
    /// A second path (rename, hard link, symlink target).
    #[serde(default)]
    to: String,
    /// A size or a count.
    #[serde(default)]
    n: u64,
}

struct FsProbe;

impl Tool for FsProbe {
    type Input = Probe;

    fn describe() -> Describe {
        Describe::new("fsprobe", "Performs one filesystem operation.").workspace(Access::ReadWrite)
    }

    fn call(p: Probe, _cx: &Context) -> Result<Output, ToolError> {
        let path = p.path.as_str();
        let err = |e: std::io::Error| io_error(&e, path);
        let ok = |what: String| Ok(Output::text(format!("ok: {what}")));
        match p.op.as_str() {
            "read" => ok(std::fs::read_to_string(path).map_err(err)?),
            "stat" => ok(format!(
                "{} bytes",
                std::fs::metadata(path).map_err(err)?.len()
            )),
            "lstat" => ok(format!(
                "symlink: {}",
                std::fs::symlink_metadata(path).map_err(err)?.is_symlink()
            )),
            "write" => ok(std::fs::write(path, b"written by fsprobe")
                .map(|()| "wrote".into())
                .map_err(err)?),
            "append" => {
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(path)
                    .map_err(err)?;
                f.write_all(b"appended").map_err(err)?;
                ok("appended".into())
            }
            "create_new" => {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(path)
                    .map_err(err)?;
                ok("created".into())
            }
            "truncate" => {
                std::fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(path)
                    .map_err(err)?;
                ok("truncated".into())
            }
            "set_len" => {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(err)?;
                f.set_len(p.n).map_err(err)?;
                ok(format!("set to {}", p.n))
            }
            "sparse" => {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)
                    .map_err(err)?;
                f.seek(SeekFrom::Start(p.n)).map_err(err)?;
                f.write_all(b"x").map_err(err)?;
                ok(format!("wrote at {}", p.n))
            }
            "fill" => {
                let mut f = std::fs::File::create(path).map_err(err)?;
                let chunk = vec![b'z'; 1 << 20];
                let mut written: u64 = 0;
                while written < p.n {
                    if let Err(e) = f.write_all(&chunk) {
                        return Err(io_error(&e, &format!("{path} after {written} bytes")));
                    }
                    written += chunk.len() as u64;
                }
                ok(format!("{written} bytes"))
            }
            "many_files" => {
                std::fs::create_dir_all(path).map_err(err)?;
                for i in 0..p.n {
                    let name = format!("{path}/f{i}");
                    std::fs::write(&name, b"").map_err(|e| io_error(&e, &name))?;
                }
                ok(format!("{} files", p.n))
            }
            "open_many" => {
                let mut held = Vec::new();
                for _ in 0..p.n {
                    held.push(std::fs::File::open(path).map_err(err)?);
                }
                ok(format!("{} handles", held.len()))
            }
            "open_each" => {
                let (mut opened, mut refused) = (0, 0);
                for _ in 0..p.n {
                    match std::fs::File::open(path) {
                        Ok(_) => opened += 1,
                        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => refused += 1,
                        Err(e) => return Err(err(e)),
                    }
                }
                ok(format!("{opened} opened, {refused} refused"))
            }
            "mkdir" => ok(std::fs::create_dir(path)
                .map(|()| "made".into())
                .map_err(err)?),
            "mkdir_all" => ok(std::fs::create_dir_all(path)
                .map(|()| "made".into())
                .map_err(err)?),
            "rmdir" => ok(std::fs::remove_dir(path)
                .map(|()| "removed".into())
                .map_err(err)?),
            "unlink" => ok(std::fs::remove_file(path)
                .map(|()| "removed".into())
                .map_err(err)?),
            "rename" => ok(std::fs::rename(path, &p.to)
                .map(|()| "renamed".into())
                .map_err(err)?),
            "hardlink" => ok(std::fs::hard_link(path, &p.to)
                .map(|()| "linked".into())
                .map_err(err)?),
            "symlink" => symlink(&p.to, path).map(|()| Output::text("ok: linked")),
            "readlink" => ok(std::fs::read_link(path).map_err(err)?.display().to_string()),
            "list" => {
                let mut names: Vec<String> = std::fs::read_dir(path)
                    .map_err(err)?
                    .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                    .collect();
                names.sort();
                ok(names.join(","))
            }
            "read_through" => {
                let mut s = String::new();
                std::fs::File::open(path)
                    .map_err(err)?
                    .read_to_string(&mut s)
                    .map_err(err)?;
                ok(s)
            }
            "env" => {
                let vars: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
                let args: Vec<String> = std::env::args().collect();
                let cwd = std::env::current_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default();
                ok(format!("vars={vars:?} args={args:?} cwd={cwd}"))
            }
            other => Err(ToolError::InvalidInput(format!("unknown op {other}"))),
        }
    }
}

/// Creates `link` pointing at `target` (as written), through the preopen
/// that holds `link`: std has no stable symlink call on WASI.
fn symlink(target: &str, link: &str) -> Result<(), ToolError> {
    use wasip2::filesystem::{preopens, types::ErrorCode};
    for (dir, name) in preopens::get_directories() {
        if let Some(rel) = link.strip_prefix(&name).and_then(|r| r.strip_prefix('/')) {
            return dir.symlink_at(target, rel).map_err(|e| {
                let code = match e {
                    ErrorCode::NotPermitted => "EPERM",
                    ErrorCode::Access => "EACCES",
                    ErrorCode::Exist => "EEXIST",
                    ErrorCode::NoEntry => "ENOENT",
                    ErrorCode::Quota => "EDQUOT",
                    ErrorCode::ReadOnly => "EROFS",
                    _ => "EIO",
                };
                ToolError::Io(airlock_sdk::IoError {
                    code: code.into(),
                    message: format!("{link}: {e:?}"),
                })
            });
        }
    }
    Err(ToolError::NotFound(format!(
        "{link} is in no preopened directory"
    )))
}

export_tool!(FsProbe);
