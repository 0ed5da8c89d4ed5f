//! Tools from OCI registries: `airlock publish FILE oci://...`, `airlock
//! install oci://...` (pulled by digest, loaded to check it, installed and
//! pinned in `airlock.lock`), `airlock tools` and `airlock remove NAME`.
//! The registry protocol is `airlock_oci`'s; every load checks the pinned
//! files (`airlock_host`'s registry); this module only joins them.

use crate::author::{Checked, blake3_hex, check, fail, write_tool};
use airlock_host::Config;
use airlock_host::lock::{LockedTool, Lockfile};
use airlock_oci::{Auth, OciRef};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The lock file's path, or why there is none.
fn lock_path(config: &Config) -> Result<PathBuf, String> {
    config.lock_path().ok_or_else(|| {
        "there is no config directory (set HOME or XDG_CONFIG_HOME) for airlock.lock".into()
    })
}

/// `airlock publish FILE oci://REGISTRY/REPOSITORY:TAG`: checks that the
/// component loads, and pushes it.
pub(crate) async fn publish(file: &Path, reference: &str, config: Config) -> ExitCode {
    let reference = match OciRef::parse(reference) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => return fail(format!("cannot read {}: {e}", file.display())),
    };
    let checked = match check(file, config).await {
        Ok(c) => c,
        Err(e) => return fail(format!("{} does not load: {e}", file.display())),
    };
    let info = match airlock_oci::component_info(&bytes) {
        Ok(info) => info,
        Err(e) => return fail(format!("{}: {e}", file.display())),
    };
    let auth = Auth::for_registry(reference.registry());
    match airlock_oci::publish(&reference, &bytes, &info, &auth).await {
        Ok(artifact) => {
            println!(
                "published {}\n  {}\n  manifest {}\n  install it with:\n    airlock install {}",
                reference, checked.summary, artifact.manifest_digest, artifact.pinned
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `airlock install oci://...`: pulls the component by digest, checks that
/// it loads under the operator's configuration, installs it in the user's
/// tool directory as `NAME.wasm`, and pins it in `airlock.lock`.
pub(crate) async fn install(reference: &str, config: Config) -> ExitCode {
    let reference = match OciRef::parse(reference) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let Some(tools) = airlock_host::config::default_tool_dir() else {
        return fail("there is no data directory (set HOME or XDG_DATA_HOME) to install tools in");
    };
    let lock_path = match lock_path(&config) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let mut lock = match Lockfile::read(&lock_path) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    let auth = Auth::for_registry(reference.registry());
    let limit = config.limits.component_bytes;
    let pulled = match airlock_oci::pull(&reference, &auth, limit).await {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let staged = match tempfile::Builder::new().suffix(".wasm").tempfile() {
        Ok(f) => f,
        Err(e) => return fail(format!("cannot make a temporary file: {e}")),
    };
    if let Err(e) = std::fs::write(staged.path(), &pulled.bytes) {
        return fail(format!("cannot write {}: {e}", staged.path().display()));
    }
    let checked: Checked = match check(staged.path(), config).await {
        Ok(c) => c,
        Err(e) => return fail(format!("{} does not load: {e}", pulled.artifact.pinned)),
    };
    let target = tools.join(format!("{}.wasm", checked.name));
    if let Err(e) = write_tool(&target, &pulled.bytes) {
        return fail(format!("cannot write {}: {e}", target.display()));
    }
    let entry = LockedTool {
        name: checked.name.clone(),
        source: reference.to_string(),
        pinned: pulled.artifact.pinned.to_string(),
        manifest_digest: pulled.artifact.manifest_digest.clone(),
        layer_digest: pulled.artifact.layer_digest.clone(),
        blake3: blake3_hex(&pulled.bytes),
        descriptor_blake3: checked
            .descriptor_json
            .as_deref()
            .map(|d| blake3_hex(d.as_bytes())),
        file: target.clone(),
    };
    let blake3 = entry.blake3.clone();
    lock.insert(entry);
    if let Err(e) = lock.write(&lock_path) {
        let _ = std::fs::remove_file(&target);
        return fail(format!("cannot write {}: {e}", lock_path.display()));
    }
    println!(
        "installed {}\n  from {}\n  {}\n  manifest {}\n  BLAKE3 {blake3}\n  pinned in {}{}",
        target.display(),
        pulled.artifact.pinned,
        checked.summary,
        pulled.artifact.manifest_digest,
        lock_path.display(),
        checked.warning()
    );
    ExitCode::SUCCESS
}

/// After `airlock install FILE` replaced the tool `name`: it no longer
/// comes from the registry its lock entry names.
pub(crate) fn unpin(config: &Config, name: &str) -> Result<(), String> {
    let path = lock_path(config)?;
    let mut lock = Lockfile::read(&path)?;
    if lock.remove(name).is_some() {
        lock.write(&path)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// `airlock tools`: what `airlock install` fetched from registries.
pub(crate) fn tools(config: &Config) -> ExitCode {
    let path = match lock_path(config) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let lock = match Lockfile::read(&path) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    if lock.tools.is_empty() {
        println!("no tools installed from registries ({})", path.display());
        return ExitCode::SUCCESS;
    }
    for t in &lock.tools {
        let state = match std::fs::read(&t.file) {
            Ok(bytes) if blake3_hex(&bytes) == t.blake3 => "as pinned".to_string(),
            Ok(_) => "CHANGED since it was installed: it will not load".to_string(),
            Err(e) => format!("missing ({e})"),
        };
        println!(
            "{}\n  from     {}\n  pinned   {}\n  layer    {}\n  BLAKE3   {}\n  file     {} ({state})",
            t.name,
            t.source,
            t.pinned,
            t.layer_digest,
            t.blake3,
            t.file.display()
        );
    }
    ExitCode::SUCCESS
}

/// `airlock remove NAME`: deletes a tool `airlock install` put in the
/// user's tool directory, and its lock entry.
pub(crate) fn remove(config: &Config, name: &str) -> ExitCode {
    let Some(tools) = airlock_host::config::default_tool_dir() else {
        return fail("there is no data directory (set HOME or XDG_DATA_HOME)");
    };
    let path = match lock_path(config) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let mut lock = match Lockfile::read(&path) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    let entry = lock.remove(name);
    let file = entry
        .as_ref()
        .map_or_else(|| tools.join(format!("{name}.wasm")), |e| e.file.clone());
    let removed = match std::fs::remove_file(&file) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return fail(format!("cannot remove {}: {e}", file.display())),
    };
    if entry.is_some()
        && let Err(e) = lock.write(&path)
    {
        return fail(format!("cannot write {}: {e}", path.display()));
    }
    if !removed && entry.is_none() {
        return fail(format!(
            "no tool {name} is installed in {} (`airlock tools` lists those from registries)",
            tools.display()
        ));
    }
    println!("removed {name} ({})", file.display());
    ExitCode::SUCCESS
}
