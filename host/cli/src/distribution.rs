//! Tools from OCI registries: `airlock keygen`, `airlock publish FILE
//! oci://... [--sign KEY]`, `airlock install oci://...` (signature checked
//! against `[[trust]]`, pulled by digest, loaded to check it, what it asks
//! for reviewed, installed and pinned in `airlock.lock`), `airlock install
//! --locked`, `airlock tools` and `airlock remove NAME`. The registry
//! protocol and signatures are `airlock_oci`'s; every load checks the
//! pinned files (`airlock_host`'s registry); this module only joins them.

use crate::approval::{
    Fetched, ask_approval, asks_of, gone, read_lock, review, takeover, write_lock,
};
use crate::audit_cmd;
use crate::author::{blake3_hex, check, fail, write_tool};
use airlock_host::Config;
use airlock_host::config::TrustRule;
use airlock_host::lock::{LockedSkill, LockedTool, Lockfile};
use airlock_oci::{Auth, Kind, OciRef, Options, PublicKey, SigningKey, Verdict};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How `airlock install` was asked to install.
pub(crate) struct InstallArgs<'a> {
    /// The reference; none with `--locked` installs every pinned tool.
    pub(crate) reference: Option<&'a str>,
    /// `--yes`: what the tool asks for is approved.
    pub(crate) yes: bool,
    /// `--locked`: change nothing in `airlock.lock`.
    pub(crate) locked: bool,
    /// How to reach the registry.
    pub(crate) options: Options,
}

/// Prints `result`'s report, or fails with its error.
fn report(result: Result<String, String>) -> ExitCode {
    match result {
        Ok(text) => {
            say!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// The lock file's path, or why there is none.
fn lock_path(config: &Config) -> Result<PathBuf, String> {
    config.lock_path().ok_or_else(|| {
        "there is no config directory (set HOME or XDG_CONFIG_HOME) for airlock.lock".into()
    })
}

/// Held while `airlock.lock` and the tools it pins change: a second
/// install, update or removal at once is refused, not interleaved.
struct Guard {
    /// The open guard file, locked until it is closed.
    _file: std::fs::File,
}

impl Guard {
    fn take(lock_path: &Path) -> Result<Guard, String> {
        let path = lock_path.with_file_name("airlock.lock.guard");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Guard { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(format!(
                "another airlock is installing or removing tools (it holds {}); try again when \
                 it has finished",
                path.display()
            )),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(format!("cannot lock {}: {e}", path.display()))
            }
        }
    }
}

/// Reads the file `path`, at most `max` bytes, as text.
fn read_small(path: &Path, max: u64) -> Result<String, String> {
    airlock_host::host_files::read_text_capped(path, max, airlock_host::host_files::Links::Follow)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// `airlock keygen PATH`: a new P-256 key pair, PATH (private, readable
/// only by you) and PATH.pub.
pub(crate) fn keygen(path: &Path) -> ExitCode {
    report(keygen_at(path))
}

fn keygen_at(path: &Path) -> Result<String, String> {
    let public_path = PathBuf::from(format!("{}.pub", path.display()));
    for p in [path, public_path.as_path()] {
        if p.exists() {
            return Err(format!("{} exists; choose another name", p.display()));
        }
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    }
    let key = SigningKey::generate()?;
    let private = key.to_pem()?;
    airlock_host::host_files::write_private(path, private.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let public = key.public_key();
    std::fs::write(&public_path, public.to_pem())
        .map_err(|e| format!("cannot write {}: {e}", public_path.display()))?;
    Ok(format!(
        "wrote {} (private: sign with `airlock publish --sign {}`)\n  and {} (public: operators \
         trust it under [[trust]] keys)\n  key {}",
        path.display(),
        path.display(),
        public_path.display(),
        public.fingerprint()
    ))
}

/// Reads a signing key: unencrypted PEM, or a key as `cosign
/// generate-key-pair` writes it, opened with its password as cosign gets
/// it: from `COSIGN_PASSWORD` (it may be empty), or else asked for at the
/// terminal, without echo.
fn signing_key(path: &Path) -> Result<SigningKey, String> {
    let text = read_small(path, 64 << 10)?;
    let key = if SigningKey::is_encrypted(&text) {
        let password = match std::env::var_os("COSIGN_PASSWORD") {
            Some(password) => password.into_encoded_bytes(),
            None if std::io::stdin().is_terminal() => {
                rpassword::prompt_password("Enter password for private key: ")
                    .map_err(|e| {
                        format!("{}: its password could not be read: {e}", path.display())
                    })?
                    .into_bytes()
            }
            None => {
                return Err(format!(
                    "{} is encrypted (as `cosign generate-key-pair` writes it): set \
                     COSIGN_PASSWORD to its password, as for cosign, or run publish at a \
                     terminal to be asked for it",
                    path.display()
                ));
            }
        };
        SigningKey::from_encrypted_pem(&text, &password)
    } else {
        SigningKey::from_pem(&text)
    };
    key.map_err(|e| format!("{}: {e}", path.display()))
}

/// `airlock publish FILE oci://REGISTRY/REPOSITORY:TAG [--sign KEY]`:
/// checks that the component loads (or, for a folder, that it is a
/// skill), pushes it, and signs it.
pub(crate) async fn publish(
    file: &Path,
    reference: &str,
    sign: Option<&Path>,
    options: Options,
    config: Config,
) -> ExitCode {
    report(publish_to(file, reference, sign, &options, config).await)
}

async fn publish_to(
    file: &Path,
    reference: &str,
    sign: Option<&Path>,
    options: &Options,
    config: Config,
) -> Result<String, String> {
    let reference = OciRef::parse(reference).map_err(|e| e.to_string())?;
    let key = match sign {
        Some(path) => Some(signing_key(path)?),
        None => None,
    };
    let auth = Auth::for_registry(reference.registry());
    let (summary, artifact) = if file.is_dir() {
        crate::skill_distribution::publish(file, &reference, &auth, options).await?
    } else {
        let bytes =
            std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let checked = check(file, config)
            .await
            .map_err(|e| format!("{} does not load: {e}", file.display()))?;
        let info =
            airlock_oci::component_info(&bytes).map_err(|e| format!("{}: {e}", file.display()))?;
        let artifact = airlock_oci::publish(&reference, &bytes, &info, &auth, options)
            .await
            .map_err(|e| e.to_string())?;
        (checked.summary, artifact)
    };
    let mut text = format!(
        "published {reference}\n  {summary}\n  manifest {}",
        artifact.manifest_digest
    );
    if let Some(key) = key {
        let at = airlock_oci::sign(&artifact, &key, &auth, options)
            .await
            .map_err(|e| format!("published {}, but not signed: {e}", artifact.pinned))?;
        text.push_str(&format!(
            "\n  signed by {} ({at})",
            key.public_key().fingerprint()
        ));
    }
    // The flag the push needed, the install needs too.
    let insecure = if options.insecure {
        " --insecure-registry"
    } else {
        ""
    };
    text.push_str(&format!(
        "\n  install it with:\n    airlock install {}{insecure}",
        artifact.pinned
    ));
    Ok(text)
}

/// Trusted public keys, with the files they were read from.
type TrustedKeys = Vec<(PublicKey, PathBuf)>;

/// The keys `[[trust]]` names for `reference`, read, and the rule.
fn trust_for<'c>(
    config: &'c Config,
    reference: &OciRef,
) -> Result<(&'c TrustRule, TrustedKeys), String> {
    let name = format!("{}/{}", reference.registry(), reference.repository());
    let rule = TrustRule::for_reference(&config.trust, &name).ok_or_else(|| {
        let file = config
            .source
            .as_ref()
            .map_or("airlock.toml".to_string(), |p| p.display().to_string());
        format!(
            "no [[trust]] rule in {file} covers oci://{name}: airlock installs only from sources \
             you trust. Add one with the publisher's public key:\n  [[trust]]\n  source = \
             \"oci://{name}\"\n  keys = [\"/path/to/publisher.pub\"]\nor `unsigned = true` in \
             place of keys to accept unsigned tools from it"
        )
    })?;
    if let Some(problem) = rule.problem() {
        return Err(problem);
    }
    let keys = rule
        .keys
        .iter()
        .map(|path| {
            let key = PublicKey::from_pem(&read_small(path, 64 << 10)?)
                .map_err(|e| format!("[[trust]] key {}: {e}", path.display()))?;
            Ok((key, path.clone()))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((rule, keys))
}

/// `airlock install oci://...`, or `--locked`; recorded in the audit
/// trail.
pub(crate) async fn install(args: InstallArgs<'_>, config: Config) -> ExitCode {
    let fields = audit_cmd::fields([
        ("reference", args.reference.into()),
        ("locked", args.locked.into()),
    ]);
    let audit = config.clone();
    let done = install_from(args, config).await;
    report(audit_cmd::recorded(&audit, "install", fields, done))
}

async fn install_from(args: InstallArgs<'_>, config: Config) -> Result<String, String> {
    let lock_path = lock_path(&config)?;
    let _guard = Guard::take(&lock_path)?;
    let lock = read_lock(&lock_path)?;
    if args.locked {
        return install_locked(args.reference, &lock, &config, &args.options).await;
    }
    let Some(reference) = args.reference else {
        return Err(
            "name a tool to install (oci://REGISTRY/REPOSITORY:TAG), or give \
                    --locked to install every tool airlock.lock pins"
                .into(),
        );
    };
    install_new(reference, lock, &lock_path, args.yes, &args.options, config).await
}

/// Installs what `reference` names: trusted, checked, reviewed, pinned.
async fn install_new(
    reference: &str,
    lock: Lockfile,
    lock_path: &Path,
    yes: bool,
    options: &Options,
    config: Config,
) -> Result<String, String> {
    let reference = OciRef::parse(reference).map_err(|e| e.to_string())?;
    let (rule, keys) = trust_for(&config, &reference)?;
    let auth = Auth::for_registry(reference.registry());
    let limit = config.limits.component_bytes;
    let pulled = airlock_oci::pull_any(
        &reference,
        &auth,
        |kind| match kind {
            Kind::Component => limit,
            Kind::Skill => crate::skill_distribution::MAX_LAYER,
        },
        options,
    )
    .await
    .map_err(|e| e.to_string())?;
    let pinned = pulled.artifact.pinned.to_string();
    let signed_by = if keys.is_empty() {
        None
    } else {
        let public: Vec<PublicKey> = keys.iter().map(|(k, _)| k.clone()).collect();
        let verdict = airlock_oci::verify(&pulled.artifact, &public, &auth, options)
            .await
            .map_err(|e| e.to_string())?;
        let trusted = || {
            keys.iter()
                .map(|(k, p)| format!("{} ({})", k.fingerprint(), p.display()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match verdict {
            Verdict::Signed { key } => {
                let (key, path) = &keys[key];
                Some(format!("{} ({})", key.fingerprint(), path.display()))
            }
            _ if rule.unsigned => None,
            Verdict::Unsigned => {
                return Err(format!(
                    "{pinned} is not signed, and [[trust]] {} accepts only tools signed by {}; \
                     nothing was installed",
                    rule.source,
                    trusted()
                ));
            }
            Verdict::Untrusted { count } => {
                return Err(format!(
                    "{pinned} has {count} signature(s), none of them by a key [[trust]] {} \
                     names ({}) over this manifest; nothing was installed",
                    rule.source,
                    trusted()
                ));
            }
        }
    };
    let fetched = Fetched {
        reference,
        pulled,
        signed_by,
        trusted_as: rule.source.clone(),
    };
    match fetched.pulled.kind {
        Kind::Skill => {
            crate::skill_distribution::install(fetched, lock, lock_path, yes, &config).await
        }
        Kind::Component => install_component(fetched, lock, lock_path, yes, config).await,
    }
}

/// Installs the component `fetched`: checked, reviewed, pinned.
async fn install_component(
    fetched: Fetched,
    mut lock: Lockfile,
    lock_path: &Path,
    yes: bool,
    config: Config,
) -> Result<String, String> {
    let Fetched {
        reference,
        pulled,
        signed_by,
        trusted_as,
    } = fetched;
    let pinned = pulled.artifact.pinned.to_string();
    let tools = airlock_host::config::default_tool_dir()
        .ok_or("there is no data directory (set HOME or XDG_DATA_HOME) to install tools in")?;
    let staged = tempfile::Builder::new()
        .suffix(".wasm")
        .tempfile()
        .map_err(|e| format!("cannot make a temporary file: {e}"))?;
    std::fs::write(staged.path(), &pulled.bytes)
        .map_err(|e| format!("cannot write {}: {e}", staged.path().display()))?;
    let checked = check(staged.path(), config.clone())
        .await
        .map_err(|e| format!("{pinned} does not load: {e}"))?;
    let target = tools.join(format!("{}.wasm", checked.name));
    let blake3 = blake3_hex(&pulled.bytes);
    let source = reference.to_string();
    let previous = lock
        .get(&checked.name)
        .or_else(|| lock.tools.iter().find(|t| t.source == source))
        .cloned();
    if let Some(p) = &previous
        && p.manifest_digest == pulled.artifact.manifest_digest
        && p.file == target
        && std::fs::read(&target).is_ok_and(|b| blake3_hex(&b) == blake3)
    {
        return Ok(format!(
            "{} is installed as pinned ({pinned}); nothing to do",
            checked.name
        ));
    }
    let asks = checked.descriptor.as_ref().map(asks_of).unwrap_or_default();
    let mut shown = review(&checked);
    // The reference installed a tool of another name before (its tag
    // moved to another component): this one takes its place, so that one
    // source never pins two tools, and it is approved as a new tool.
    let replaced: Vec<LockedTool> = lock
        .tools
        .iter()
        .filter(|t| t.source == source && t.name != checked.name)
        .cloned()
        .collect();
    for old in &replaced {
        shown.push_str(&format!(
            "  it replaces {} ({}), which {source} named before\n",
            old.name, old.pinned
        ));
    }
    let asks_more = match &previous {
        None => true,
        Some(p) => {
            let more: Vec<&String> = asks.iter().filter(|a| !p.asks.contains(a)).collect();
            if more.is_empty() {
                false
            } else {
                shown.push_str(&format!(
                    "  it asks for more than the version airlock.lock pins ({}) did:\n",
                    p.pinned
                ));
                for a in more {
                    shown.push_str(&format!("    + {a}\n"));
                }
                true
            }
        }
    };
    let entry = LockedTool {
        name: checked.name.clone(),
        source,
        pinned: pinned.clone(),
        manifest_digest: pulled.artifact.manifest_digest.clone(),
        layer_digest: pulled.artifact.layer_digest.clone(),
        blake3: blake3.clone(),
        descriptor_blake3: checked
            .descriptor_json
            .as_deref()
            .map(|d| blake3_hex(d.as_bytes())),
        file: target.clone(),
        signed_by: signed_by.clone(),
        asks,
    };
    // Another source or another signer for the tool airlock.lock pins is
    // not an update: both are shown, and it is approved as a new tool is.
    let taken_over = previous.as_ref().and_then(|p| {
        takeover(
            (&p.source, p.signed_by.as_deref()),
            (&entry.source, entry.signed_by.as_deref()),
        )
        .map(|change| (p, change))
    });
    if let Some((p, change)) = &taken_over {
        shown.push_str(&format!(
            "  it replaces {} as airlock.lock pins it, {change}:\n    pinned now\n{}    this one\n{}",
            p.name,
            pin_lines(p),
            pin_lines(&entry)
        ));
    }
    let approve = asks_more || !replaced.is_empty() || taken_over.is_some();
    if approve && !yes {
        ask_approval(&shown, &checked.name)?;
    }
    write_tool(&target, &pulled.bytes)
        .map_err(|e| format!("cannot write {}: {e}", target.display()))?;
    for old in &replaced {
        lock.remove(&old.name);
    }
    lock.insert(entry);
    if let Err(e) = write_lock(&lock, lock_path) {
        let _ = std::fs::remove_file(&target);
        return Err(format!("cannot write {}: {e}", lock_path.display()));
    }
    let mut text = if approve && yes { shown } else { String::new() };
    for old in &replaced {
        let gone = gone(&old.file, std::fs::remove_file(&old.file));
        text.push_str(&format!(
            "replaced {} ({}), which {} named before: {gone}\n",
            old.name, old.pinned, old.source
        ));
    }
    text.push_str(&format!(
        "installed {}\n  from {pinned}\n  manifest {}\n  BLAKE3 {blake3}\n  {}\n  pinned in {}{}",
        target.display(),
        pulled.artifact.manifest_digest,
        signed_by.map_or_else(
            || format!("unsigned (accepted: [[trust]] {trusted_as} has unsigned = true)"),
            |s| format!("signed by {s}")
        ),
        lock_path.display(),
        checked.warning()
    ));
    Ok(text)
}

/// Where a pinned tool comes from, for the review: the lines `airlock
/// tools` shows for it.
fn pin_lines(t: &LockedTool) -> String {
    format!(
        "      from     {}\n      pinned   {}\n      signer   {}\n      asks     {}\n",
        t.source,
        t.pinned,
        t.signed_by.as_deref().unwrap_or("none (unsigned)"),
        if t.asks.is_empty() {
            "nothing".to_string()
        } else {
            t.asks.join(", ")
        }
    )
}

/// `airlock install --locked [REFERENCE]`: installs the tools airlock.lock
/// pins (one, or all), exactly: by digest, with the pinned BLAKE3.
async fn install_locked(
    reference: Option<&str>,
    lock: &Lockfile,
    config: &Config,
    options: &Options,
) -> Result<String, String> {
    let (entries, skills): (Vec<&LockedTool>, Vec<&LockedSkill>) = match reference {
        None => (lock.tools.iter().collect(), lock.skills.iter().collect()),
        Some(text) => {
            let reference = OciRef::parse(text).map_err(|e| e.to_string())?;
            let wanted = reference.to_string();
            let tool = lock
                .tools
                .iter()
                .find(|t| t.source == wanted || t.pinned == wanted);
            let skill = lock
                .skills
                .iter()
                .find(|s| s.source == wanted || s.pinned == wanted);
            let manifest_digest = match (tool, skill) {
                (Some(t), _) => &t.manifest_digest,
                (None, Some(s)) => &s.manifest_digest,
                (None, None) => {
                    return Err(format!(
                        "{wanted} is not in airlock.lock, and --locked changes nothing there \
                         (install it without --locked to add it)"
                    ));
                }
            };
            if reference.digest().is_none() {
                let auth = Auth::for_registry(reference.registry());
                let now = airlock_oci::resolve_digest(&reference, &auth, options)
                    .await
                    .map_err(|e| e.to_string())?;
                if &now != manifest_digest {
                    return Err(format!(
                        "{wanted} now resolves to {now}, but airlock.lock pins \
                         {manifest_digest}; --locked changes nothing (install without --locked \
                         to review the update)"
                    ));
                }
            }
            // A skill comes back with the tools it carries.
            let skill = skill.filter(|_| tool.is_none());
            let carried = skill.map(|s| crate::skill_distribution::carried_by(lock, &s.source));
            (
                tool.into_iter()
                    .chain(carried.into_iter().flatten())
                    .collect(),
                skill.into_iter().collect(),
            )
        }
    };
    if entries.is_empty() && skills.is_empty() {
        return Ok("airlock.lock pins no tools or skills; nothing to install".into());
    }
    let mut text = Vec::new();
    text.extend(crate::skill_distribution::install_locked(&skills, options).await?);
    for entry in entries {
        if std::fs::read(&entry.file).is_ok_and(|b| blake3_hex(&b) == entry.blake3) {
            text.push(format!("{}: as pinned already", entry.name));
            continue;
        }
        if entry.source.contains("#tools/") {
            text.push(crate::skill_distribution::install_carried(entry, lock)?);
            continue;
        }
        let pinned = OciRef::parse(&entry.pinned).map_err(|e| e.to_string())?;
        let auth = Auth::for_registry(pinned.registry());
        let pulled = airlock_oci::pull(&pinned, &auth, config.limits.component_bytes, options)
            .await
            .map_err(|e| e.to_string())?;
        let blake3 = blake3_hex(&pulled.bytes);
        if pulled.artifact.layer_digest != entry.layer_digest || blake3 != entry.blake3 {
            return Err(format!(
                "{}: the registry gave a layer {} with BLAKE3 {blake3}, but airlock.lock pins \
                 {} with BLAKE3 {}; not installed",
                entry.pinned, pulled.artifact.layer_digest, entry.layer_digest, entry.blake3
            ));
        }
        write_tool(&entry.file, &pulled.bytes)
            .map_err(|e| format!("cannot write {}: {e}", entry.file.display()))?;
        text.push(format!(
            "{}: installed {} from {}",
            entry.name,
            entry.file.display(),
            entry.pinned
        ));
    }
    Ok(text.join("\n"))
}

/// `airlock install FILE.wasm`: checks that the component loads and copies
/// it into the user's tool directory as `NAME.wasm`.
pub(crate) async fn install_file(file: &Path, config: Config) -> ExitCode {
    let Some(tools) = airlock_host::config::default_tool_dir() else {
        return fail("there is no data directory (set HOME or XDG_DATA_HOME) to install tools in");
    };
    let lock_config = config.clone();
    let checked = match check(file, config).await {
        Ok(c) => c,
        Err(e) => return fail(format!("{} does not load: {e}", file.display())),
    };
    let target = tools.join(format!("{}.wasm", checked.name));
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => return fail(format!("cannot read {}: {e}", file.display())),
    };
    let before = std::fs::read(&target).ok();
    if before.as_deref() == Some(bytes.as_slice()) {
        say!(
            "{} is already installed as {}",
            checked.name,
            target.display()
        );
        return ExitCode::SUCCESS;
    }
    if let Err(e) = write_tool(&target, &bytes) {
        return fail(format!("cannot write {}: {e}", target.display()));
    }
    // It no longer comes from the registry a lock entry may name.
    if let Err(e) = unpin(&lock_config, &checked.name) {
        return fail(e);
    }
    let blake3 = blake3_hex(&bytes);
    let text = format!(
        "{} {}\n  {}\n  BLAKE3 {blake3}{}",
        if before.is_some() {
            "replaced"
        } else {
            "installed"
        },
        target.display(),
        checked.summary,
        checked.warning()
    );
    let fields = audit_cmd::fields([
        ("file", file.display().to_string().into()),
        ("name", checked.name.clone().into()),
        ("installed_as", target.display().to_string().into()),
        ("blake3", blake3.into()),
    ]);
    report(audit_cmd::recorded(
        &lock_config,
        "install",
        fields,
        Ok(text),
    ))
}

/// After `airlock install FILE` replaced the tool `name`: it no longer
/// comes from the registry its lock entry names.
pub(crate) fn unpin(config: &Config, name: &str) -> Result<(), String> {
    let path = lock_path(config)?;
    let _guard = Guard::take(&path)?;
    let mut lock = read_lock(&path)?;
    if lock.remove(name).is_some() {
        write_lock(&lock, &path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// `airlock tools`: what `airlock install` fetched from registries.
pub(crate) fn tools(config: &Config) -> ExitCode {
    let path = match lock_path(config) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let lock = match read_lock(&path) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    if lock.tools.is_empty() && lock.skills.is_empty() {
        say!(
            "no tools or skills installed from registries ({})",
            path.display()
        );
        return ExitCode::SUCCESS;
    }
    for t in &lock.tools {
        let state = match std::fs::read(&t.file) {
            Ok(bytes) if blake3_hex(&bytes) == t.blake3 => "as pinned".to_string(),
            Ok(_) => "CHANGED since it was installed: it will not load".to_string(),
            Err(e) => format!("missing ({e})"),
        };
        say!(
            "{}\n  from     {}\n  pinned   {}\n  layer    {}\n  BLAKE3   {}\n  signer   {}\n  asks     {}\n  file     {} ({state})",
            t.name,
            t.source,
            t.pinned,
            t.layer_digest,
            t.blake3,
            t.signed_by.as_deref().unwrap_or("none (unsigned)"),
            if t.asks.is_empty() {
                "nothing".to_string()
            } else {
                t.asks.join(", ")
            },
            t.file.display()
        );
    }
    for skill in &lock.skills {
        say!("{}", crate::skill_distribution::describe(skill));
    }
    ExitCode::SUCCESS
}

/// `airlock remove NAME`: deletes a tool `airlock install` put in the
/// user's tool directory, and its lock entry.
pub(crate) fn remove(config: &Config, name: &str) -> ExitCode {
    let fields = audit_cmd::fields([("name", name.into())]);
    report(audit_cmd::recorded(
        config,
        "remove",
        fields,
        remove_tool(config, name),
    ))
}

fn remove_tool(config: &Config, name: &str) -> Result<String, String> {
    let tools = airlock_host::config::default_tool_dir()
        .ok_or("there is no data directory (set HOME or XDG_DATA_HOME)")?;
    let path = lock_path(config)?;
    let _guard = Guard::take(&path)?;
    let mut lock = read_lock(&path)?;
    if lock.get(name).is_none() && lock.skill(name).is_some() {
        return crate::skill_distribution::remove(name, lock, &path);
    }
    let entry = lock.remove(name);
    let file = entry
        .as_ref()
        .map_or_else(|| tools.join(format!("{name}.wasm")), |e| e.file.clone());
    let removed = match std::fs::remove_file(&file) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(format!("cannot remove {}: {e}", file.display())),
    };
    if entry.is_some() {
        write_lock(&lock, &path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if !removed && entry.is_none() {
        return Err(format!(
            "no tool {name} is installed in {} (`airlock tools` lists those from registries)",
            tools.display()
        ));
    }
    Ok(format!("removed {name} ({})", file.display()))
}
