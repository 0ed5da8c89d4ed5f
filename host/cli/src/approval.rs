//! What installing a tool and installing a skill share: `airlock.lock`
//! read and written (its files relative to the tool directory, so it
//! travels), an artifact pulled from a trusted source and its signer, the
//! review of what a tool asks for and would be granted, the approval asked
//! at the terminal, and whether an update is a takeover (another source or
//! signer). `distribution` (tools) and `skill_distribution` (skills) both
//! use it; it knows neither.

use crate::author::Checked;
use airlock_host::lock::Lockfile;
use airlock_host::sanitize::{self, Sink};
use airlock_host::{Descriptor, InterruptBehavior, SafetyFlags, WorkspaceAccess};
use airlock_oci::OciRef;
use std::path::Path;

/// The lock at `path`, its files resolved against this machine's tool
/// directory (the lock names them relative to it, so it travels).
pub(crate) fn read_lock(path: &Path) -> Result<Lockfile, String> {
    Lockfile::read(path, airlock_host::config::default_tool_dir().as_deref())
}

/// Writes `lock` at `path`, its files relative to the tool directory.
pub(crate) fn write_lock(lock: &Lockfile, path: &Path) -> std::io::Result<()> {
    lock.write(path, airlock_host::config::default_tool_dir().as_deref())
}

/// What a tool asks for, one line each, as `airlock.lock` records it.
pub(crate) fn asks_of(d: &Descriptor) -> Vec<String> {
    let mut asks = Vec::new();
    if d.capabilities.workspace != WorkspaceAccess::None {
        asks.push(format!("workspace {}", d.capabilities.workspace));
    }
    for host in &d.capabilities.network_hosts {
        asks.push(format!("network {host}"));
    }
    for var in &d.capabilities.env_vars {
        asks.push(format!("env {var}"));
    }
    asks.iter()
        .map(|a| sanitize::clean_capped(a, Sink::Line, 200))
        .collect()
}

/// The review `airlock install` shows: what the tool asks for and what
/// its calls would get from the configuration's grants.
pub(crate) fn review(checked: &Checked) -> String {
    let mut text = format!(
        "{}\n",
        sanitize::clean_capped(&checked.summary, Sink::Line, 300)
    );
    let Some(d) = &checked.descriptor else {
        text.push_str("  it could not be described, so what it asks for is unknown\n");
        return text;
    };
    let list = |items: &[String]| {
        if items.is_empty() {
            "none".to_string()
        } else {
            sanitize::clean_capped(&items.join(", "), Sink::Line, 500)
        }
    };
    let flags: Vec<String> = SafetyFlags::NAMED
        .iter()
        .filter(|(flag, _)| d.flags.contains(*flag))
        .map(|(_, name)| name.to_string())
        .collect();
    // What its calls get: each grant capped by what it asks for, as
    // `ToolGrants::for_call` caps it.
    let granted = &checked.granted;
    let asked = d.capabilities.workspace;
    let workspace = match &granted.workspace {
        _ if asked == WorkspaceAccess::None => "none".to_string(),
        None => "none (no workspace is configured)".to_string(),
        Some((ws, cap)) => format!("{} ({})", (*cap).min(asked), ws.configured.display()),
    };
    let directories: Vec<String> = granted
        .mounts
        .iter()
        .filter(|(_, access)| (*access).min(asked) != WorkspaceAccess::None)
        .map(|(m, access)| {
            format!(
                "{} ({}, seen as {})",
                (*access).min(asked),
                m.configured.display(),
                m.guest
            )
        })
        .collect();
    let hosts = if d.capabilities.network_hosts.is_empty() {
        "none".to_string()
    } else if granted.network.is_empty() {
        "none (no hosts are granted to it)".to_string()
    } else {
        format!("the patterns {}", list(&granted.network))
    };
    let env: Vec<String> = d
        .capabilities
        .env_vars
        .iter()
        .filter(|v| granted.env.contains(v))
        .cloned()
        .collect();
    text.push_str(&format!(
        "  it asks for:\n    workspace    {}\n    network      {}\n    environment  {}\n    flags        \
         {}\n    interrupt    {}\n  this configuration grants it:\n    workspace    {workspace}\n    \
         directories  {}\n    network      {hosts}\n    environment  {}\n",
        d.capabilities.workspace,
        list(&d.capabilities.network_hosts),
        list(&d.capabilities.env_vars),
        list(&flags),
        match d.interrupt {
            InterruptBehavior::Cancel => "cancel (an interrupt stops it at once)",
            InterruptBehavior::Block => "block (an interrupt lets it finish)",
        },
        list(&directories),
        list(&env),
    ));
    text
}

/// An artifact pulled from a trusted source, its signature checked.
pub(crate) struct Fetched {
    /// The reference as given.
    pub(crate) reference: OciRef,
    /// What was pulled.
    pub(crate) pulled: airlock_oci::Pulled,
    /// The trusted key that signed it, as `airlock.lock` records it (none
    /// when its `[[trust]]` rule lets it be unsigned and it was).
    pub(crate) signed_by: Option<String>,
    /// The `[[trust]]` rule's source that covers it.
    pub(crate) trusted_as: String,
}

/// Shows `shown` and asks at the terminal whether to install `what`;
/// without a terminal, says how to approve it.
pub(crate) fn ask_approval(shown: &str, what: &str) -> Result<(), String> {
    say!("{}", shown.trim_end_matches('\n'));
    match crate::prompt::confirm("install it?") {
        Some(true) => Ok(()),
        Some(false) => Err("not installed".into()),
        None => Err(format!(
            "{what} needs your approval of what is shown above; run again with --yes to approve \
             it. Nothing was installed"
        )),
    }
}

/// How installing `new` in place of the pinned `old` (a tool or skill of
/// the same name, or from the same reference), each a source and the key
/// that signed it (as `airlock.lock` records both), is more than an
/// update: it comes from another repository, or is signed by another key,
/// or by none where `old` was signed. None for an update: the same
/// repository (any tag or digest of it) and the same signing key (read
/// from any file).
pub(crate) fn takeover(old: (&str, Option<&str>), new: (&str, Option<&str>)) -> Option<String> {
    let repository = |source: &str| {
        OciRef::parse(source)
            .ok()
            .map(|r| (r.registry().to_string(), r.repository().to_string()))
    };
    // A signer is `FINGERPRINT (FILE)`, as install writes it.
    let key = |signer: Option<&str>| {
        signer.map(|s| {
            s.split_once(' ')
                .map_or(s, |(fingerprint, _)| fingerprint)
                .to_string()
        })
    };
    let mut changes = Vec::new();
    let old_repository = repository(old.0);
    if old_repository.is_none() || old_repository != repository(new.0) {
        changes.push("from another source");
    }
    let (old_key, new_key) = (key(old.1), key(new.1));
    if old_key != new_key {
        changes.push(match (old_key, new_key) {
            (_, None) => "unsigned",
            (None, Some(_)) => "signed where it was not",
            (Some(_), Some(_)) => "signed by another key",
        });
    }
    (!changes.is_empty()).then(|| changes.join(" and "))
}

/// What removing `path` came to (`removal`), as installs and removals
/// report it.
pub(crate) fn gone(path: &Path, removal: std::io::Result<()>) -> String {
    match removal {
        Ok(()) => format!("{} removed", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            format!("{} was already gone", path.display())
        }
        Err(e) => format!("{} could not be removed: {e}", path.display()),
    }
}
