//! Skills in OCI registries: `airlock publish SKILL_DIR oci://...` (the
//! folder checked as every load checks a skill, then pushed in
//! `airlock_oci::skill`'s layout) and the skill side of `airlock install`:
//! the folder unpacked into a hidden staging folder of the skills
//! directory, checked, reviewed (its scripts and the programs they are run
//! with, what changed from the folder served now), approved, pinned in
//! `airlock.lock` by its tree digest, and moved into place. `--locked`,
//! `airlock tools` and `airlock remove` for skills are here too. Every load
//! holds an installed skill to its pin (`Skills::hold_to_lock`), so a
//! folder changed afterwards is not served until a change is installed and
//! approved.
//!
//! A skill may carry tools of its own: each `tools/*.wasm` of its folder is
//! checked to load, shown in the review with what it asks for and what it
//! would be granted, and installed with the skill into the tool directory,
//! pinned as a tool whose source is the skill's with `#tools/FILE`; an
//! update of the skill that drops one removes it, and removing the skill
//! removes them.

use crate::approval::{self, Fetched, ask_approval, asks_of, gone, takeover, write_lock};
use crate::author::{Checked, blake3_hex, check, write_tool};
use airlock_host::Config;
use airlock_host::lock::{LockedSkill, LockedTool, Lockfile};
use airlock_host::sanitize::{self, Sink};
use airlock_host::skills::{self, SKILL_MD, Skill};
use airlock_oci::skill::FolderFile;
use airlock_oci::{Artifact, Auth, OciRef, Options};
use std::collections::BTreeMap;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The most a skill's layer may be: the most its files may hold, and room
/// for the tar's headers (512 bytes a file and a folder, and padding).
pub(crate) const MAX_LAYER: u64 = skills::MAX_BYTES + (4 << 20);

/// Pushes the skill in the folder `dir` to `reference`: what `airlock
/// publish` says of it, and where it went.
pub(crate) async fn publish(
    dir: &Path,
    reference: &OciRef,
    auth: &Auth,
    options: &Options,
) -> Result<(String, Artifact), String> {
    let skill = Skill::read(dir).map_err(|e| format!("{} is not a skill: {e}", dir.display()))?;
    let files = skill
        .files
        .iter()
        .map(|f| {
            let mode = std::fs::symlink_metadata(dir.join(&f.path))
                .map_err(|e| format!("{}: {e}", f.path))?
                .permissions()
                .mode();
            Ok(FolderFile {
                path: f.path.clone(),
                bytes: f.bytes.to_vec(),
                executable: mode & 0o111 != 0,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let artifact = airlock_oci::publish_skill(
        reference,
        &skill.name,
        &skill.description,
        &files,
        auth,
        options,
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok((
        format!("{}\n  tree {}", headline(&skill), skill.tree_digest()),
        artifact,
    ))
}

/// `skill NAME: DESCRIPTION (N files, B bytes)`, cleaned for a terminal.
fn headline(skill: &Skill) -> String {
    let bytes: usize = skill.files.iter().map(|f| f.bytes.len()).sum();
    sanitize::clean_capped(
        &format!(
            "skill {}: {} ({} files, {bytes} bytes)",
            skill.name,
            skill.description,
            skill.files.len()
        ),
        Sink::Line,
        400,
    )
}

/// A skill unpacked into a hidden staging folder of the skills directory
/// (which no load reads), and checked; dropped, it is removed.
struct Staged {
    /// The staging folder.
    dir: tempfile::TempDir,
    /// The skill, read from `dir/NAME`.
    skill: Skill,
}

impl Staged {
    /// Unpacks the skill's tar `layer` under `skills_dir` and reads it as a
    /// load would.
    fn unpack(layer: &[u8], skills_dir: &Path) -> Result<Staged, String> {
        let files = airlock_oci::skill::unpack(layer, skills::MAX_FILES, skills::MAX_BYTES)?;
        let manifest = files
            .iter()
            .find(|f| f.path == SKILL_MD)
            .ok_or("its folder has no SKILL.md")?;
        let name = skills::manifest_name(&manifest.bytes)?;
        std::fs::create_dir_all(skills_dir)
            .map_err(|e| format!("cannot make {}: {e}", skills_dir.display()))?;
        let dir = tempfile::Builder::new()
            .prefix(".installing-")
            .tempdir_in(skills_dir)
            .map_err(|e| format!("cannot make a folder in {}: {e}", skills_dir.display()))?;
        let root = dir.path().join(&name);
        for file in &files {
            let path = root.join(&file.path);
            let written = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(if file.executable { 0o755 } else { 0o644 })
                        .open(&path)
                })
                .and_then(|mut out| std::io::Write::write_all(&mut out, &file.bytes));
            written.map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        let skill = Skill::read(&root)?;
        Ok(Staged { dir, skill })
    }

    /// Moves the skill to `target`, in place of what is there (which is
    /// removed with the staging folder).
    fn put_in_place(self, target: &Path) -> Result<(), String> {
        let replaced = self.dir.path().join(".replaced");
        let there = target.symlink_metadata().is_ok();
        if there {
            std::fs::rename(target, &replaced)
                .map_err(|e| format!("cannot move {} aside: {e}", target.display()))?;
        }
        if let Err(e) = std::fs::rename(&self.skill.dir, target) {
            if there {
                let _ = std::fs::rename(&replaced, target);
            }
            return Err(format!(
                "cannot move the skill to {}: {e}",
                target.display()
            ));
        }
        Ok(())
    }
}

/// The skills directory `airlock install` uses.
fn skills_dir() -> Result<PathBuf, String> {
    airlock_host::config::default_skills_dir()
        .ok_or_else(|| "there is no data directory (set HOME or XDG_DATA_HOME) for skills".into())
}

/// The programs `skill`'s scripts are run with, beside `bash`'s own shell,
/// as `airlock.lock` records them.
fn script_asks(skill: &Skill) -> Vec<String> {
    let mut asks: Vec<String> = skill
        .scripts()
        .into_iter()
        .filter_map(|(_, program)| program)
        .filter(|p| !is_shell(p))
        .map(|p| format!("program {p}"))
        .collect();
    asks.sort();
    asks.dedup();
    asks
}

/// Whether `program` is a shell `bash`'s own interpreter runs.
fn is_shell(program: &str) -> bool {
    matches!(program, "sh" | "bash")
}

/// The review `airlock install` shows: the skill, its scripts and how
/// each would run under this configuration.
fn review(skill: &Skill, config: &Config) -> String {
    let granted: Vec<&str> = config
        .tools
        .get("bash")
        .map(|t| t.programs.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let is_granted = |program: &str| {
        granted
            .iter()
            .any(|g| *g == program || Path::new(g).file_name().is_some_and(|n| n == program))
    };
    let mut text = format!("{}\n", headline(skill));
    let scripts = skill.scripts();
    if scripts.is_empty() {
        text.push_str("  it has no scripts\n");
        return text;
    }
    text.push_str("  its scripts run in the sandbox, under each call's grants:\n");
    for (path, program) in &scripts {
        let how = match program.as_deref() {
            None => "with no program it names".to_string(),
            Some(p) if is_shell(p) => format!("with {p}: bash's own shell"),
            Some(p) if is_granted(p) => format!("with {p}: granted to bash"),
            Some(p) => format!(
                "with {p}: not granted to bash, so it will not run (add it to [tools.bash] \
                 programs)"
            ),
        };
        text.push_str(&sanitize::clean_capped(
            &format!("    {path}  {how}\n"),
            Sink::Model,
            400,
        ));
    }
    text
}

/// What changed from `old` (the folder served now) to `new`: a line a
/// file, `+` added, `-` removed, `~` changed, at most 40.
fn changes(old: &Skill, new: &Skill) -> String {
    let digests = |s: &Skill| -> BTreeMap<String, String> {
        s.files
            .iter()
            .map(|f| (f.path.clone(), f.digest.clone()))
            .collect()
    };
    let (old, new) = (digests(old), digests(new));
    let mut lines: Vec<String> = Vec::new();
    for (path, digest) in &new {
        match old.get(path) {
            None => lines.push(format!("    + {path}")),
            Some(d) if d != digest => lines.push(format!("    ~ {path}")),
            Some(_) => {}
        }
    }
    lines.extend(
        old.keys()
            .filter(|p| !new.contains_key(*p))
            .map(|p| format!("    - {p}")),
    );
    let more = lines.len().saturating_sub(40);
    lines.truncate(40);
    if more > 0 {
        lines.push(format!("    and {more} more"));
    }
    sanitize::clean_capped(&lines.join("\n"), Sink::Model, 8000)
}

/// The tools a skill carries (`tools/*.wasm` in its folder), each checked
/// to load, and the lock entry it gets.
async fn carried_tools(
    staged: &Staged,
    entry: &LockedSkill,
    config: &Config,
) -> Result<Vec<(Checked, LockedTool, Vec<u8>)>, String> {
    let tools_dir = airlock_host::config::default_tool_dir()
        .ok_or("there is no data directory (set HOME or XDG_DATA_HOME) to install tools in")?;
    let mut carried = Vec::new();
    for file in &staged.skill.files {
        let Some(name) = file
            .path
            .strip_prefix("tools/")
            .filter(|n| n.ends_with(".wasm") && !n.contains('/'))
        else {
            continue;
        };
        let path = staged.skill.dir.join(&file.path);
        let checked = check(&path, config.clone())
            .await
            .map_err(|e| format!("the tool it carries, {}, does not load: {e}", file.path))?;
        let locked = LockedTool {
            name: checked.name.clone(),
            source: format!("{}#tools/{name}", entry.source),
            pinned: format!("{}#tools/{name}", entry.pinned),
            manifest_digest: entry.manifest_digest.clone(),
            layer_digest: entry.layer_digest.clone(),
            blake3: blake3_hex(&file.bytes),
            descriptor_blake3: checked
                .descriptor_json
                .as_deref()
                .map(|d| blake3_hex(d.as_bytes())),
            file: tools_dir.join(format!("{}.wasm", checked.name)),
            signed_by: entry.signed_by.clone(),
            asks: checked.descriptor.as_ref().map(asks_of).unwrap_or_default(),
        };
        carried.push((checked, locked, file.bytes.to_vec()));
    }
    Ok(carried)
}

/// The tools airlock.lock pins as carried by the skill from `source`.
pub(crate) fn carried_by<'l>(lock: &'l Lockfile, source: &str) -> Vec<&'l LockedTool> {
    let prefix = format!("{source}#tools/");
    lock.tools
        .iter()
        .filter(|t| t.source.starts_with(&prefix))
        .collect()
}

/// Installs the skill `fetched`: unpacked, checked, reviewed, approved
/// when it is new or changed, pinned, put in place, with the tools it
/// carries.
pub(crate) async fn install(
    fetched: Fetched,
    mut lock: Lockfile,
    lock_path: &Path,
    yes: bool,
    config: &Config,
) -> Result<String, String> {
    let dir = skills_dir()?;
    let artifact = &fetched.pulled.artifact;
    let pinned = artifact.pinned.to_string();
    let staged = Staged::unpack(&fetched.pulled.bytes, &dir)
        .map_err(|e| format!("{pinned} is not a skill airlock serves: {e}"))?;
    let skill = &staged.skill;
    let target = dir.join(&skill.name);
    let tree = skill.tree_digest();
    let source = fetched.reference.to_string();
    let previous = lock
        .skill(&skill.name)
        .or_else(|| lock.skills.iter().find(|s| s.source == source))
        .cloned();
    let served = Skill::read(&target).ok();
    if let Some(p) = &previous
        && p.name == skill.name
        && p.manifest_digest == artifact.manifest_digest
        && served.as_ref().is_some_and(|s| s.tree_digest() == p.tree)
    {
        return Ok(format!(
            "skill {} is installed as pinned ({pinned}); nothing to do",
            skill.name
        ));
    }
    let entry = LockedSkill {
        name: skill.name.clone(),
        source: source.clone(),
        pinned: pinned.clone(),
        manifest_digest: artifact.manifest_digest.clone(),
        layer_digest: artifact.layer_digest.clone(),
        tree: tree.clone(),
        signed_by: fetched.signed_by.clone(),
        asks: script_asks(skill),
    };
    let mut shown = review(skill, config);
    let changed = previous.as_ref().is_none_or(|p| p.tree != tree);
    match (&previous, &served) {
        (Some(p), Some(old)) if p.tree != tree => shown.push_str(&format!(
            "  it changes the skill airlock.lock pins ({}):\n{}\n",
            p.pinned,
            changes(old, skill)
        )),
        (None, Some(old)) => shown.push_str(&format!(
            "  it replaces the folder {}, which airlock.lock does not pin:\n{}\n",
            target.display(),
            changes(old, skill)
        )),
        _ => {}
    }
    // The reference installed a skill of another name before: this one
    // takes its place, so that one source never pins two skills.
    let replaced: Vec<LockedSkill> = lock
        .skills
        .iter()
        .filter(|s| s.source == source && s.name != skill.name)
        .cloned()
        .collect();
    for old in &replaced {
        shown.push_str(&format!(
            "  it replaces the skill {} ({}), which {source} named before\n",
            old.name, old.pinned
        ));
    }
    let taken_over = previous.as_ref().and_then(|p| {
        takeover(
            (&p.source, p.signed_by.as_deref()),
            (&entry.source, entry.signed_by.as_deref()),
        )
    });
    if let Some(change) = &taken_over {
        shown.push_str(&format!(
            "  it replaces {} as airlock.lock pins it, {change}\n",
            skill.name
        ));
    }
    let carried = carried_tools(&staged, &entry, config).await?;
    for (checked, locked, _) in &carried {
        shown.push_str(&format!("  it carries the tool {}:\n", locked.name));
        for line in approval::review(checked).lines() {
            shown.push_str(&format!("  {line}\n"));
        }
    }
    // A tool of the same name pinned from elsewhere is taken over: shown,
    // and approved as a new tool would be.
    let mut takes_tools = false;
    for (_, locked, _) in &carried {
        if let Some(other) = lock
            .get(&locked.name)
            .filter(|t| !t.source.starts_with(&format!("{source}#tools/")))
        {
            takes_tools = true;
            shown.push_str(&format!(
                "  its tool {} replaces the one airlock.lock pins from {}\n",
                locked.name, other.source
            ));
        }
    }
    let dropped_tools: Vec<LockedTool> = previous
        .iter()
        .flat_map(|p| carried_by(&lock, &p.source))
        .filter(|t| !carried.iter().any(|(_, c, _)| c.name == t.name))
        .cloned()
        .collect();
    let approve = changed || !replaced.is_empty() || taken_over.is_some() || takes_tools;
    if approve && !yes {
        ask_approval(&shown, &format!("skill {}", skill.name))?;
    }
    let before = lock.clone();
    for old in &replaced {
        lock.remove_skill(&old.name);
    }
    lock.insert_skill(entry);
    for old in &dropped_tools {
        lock.remove(&old.name);
    }
    for (_, locked, _) in &carried {
        lock.insert(locked.clone());
    }
    // The tools it carries first (as `install` writes a tool before its
    // pin), then the lock, so that a load that sees the new folder finds
    // it pinned, then the folder; a step that fails undoes those before it:
    // a tool file that was there (an update's) gets its old bytes back,
    // which the old lock pins, and a new one is removed.
    let was: Vec<Option<Vec<u8>>> = (carried.iter())
        .map(|(_, locked, _)| std::fs::read(&locked.file).ok())
        .collect();
    let undo_tools = |upto: usize| {
        for ((_, written, _), was) in carried[..upto].iter().zip(&was) {
            let _ = match was {
                Some(bytes) => write_tool(&written.file, bytes),
                None => std::fs::remove_file(&written.file),
            };
        }
    };
    for (at, (_, locked, bytes)) in carried.iter().enumerate() {
        if let Err(e) = write_tool(&locked.file, bytes) {
            undo_tools(at);
            return Err(format!("cannot write {}: {e}", locked.file.display()));
        }
    }
    if let Err(e) = write_lock(&lock, lock_path) {
        undo_tools(carried.len());
        return Err(format!("cannot write {}: {e}", lock_path.display()));
    }
    let name = skill.name.clone();
    if let Err(e) = staged.put_in_place(&target) {
        let _ = write_lock(&before, lock_path);
        undo_tools(carried.len());
        return Err(e);
    }
    let mut text = if approve && yes { shown } else { String::new() };
    for (_, locked, _) in &carried {
        text.push_str(&format!(
            "installed the tool {} it carries as {}\n",
            locked.name,
            locked.file.display()
        ));
    }
    for old in &dropped_tools {
        text.push_str(&format!(
            "the tool {} the skill no longer carries: {}\n",
            old.name,
            gone(&old.file, std::fs::remove_file(&old.file))
        ));
    }
    for old in &replaced {
        let gone = remove_folder(&dir.join(&old.name));
        text.push_str(&format!(
            "replaced skill {} ({}), which {} named before: {gone}\n",
            old.name, old.pinned, old.source
        ));
    }
    text.push_str(&format!(
        "installed skill {name}\n  in {}\n  from {pinned}\n  manifest {}\n  tree {tree}\n  {}\n  \
         pinned in {}",
        target.display(),
        artifact.manifest_digest,
        fetched.signed_by.map_or_else(
            || format!(
                "unsigned (accepted: [[trust]] {} has unsigned = true)",
                fetched.trusted_as
            ),
            |s| format!("signed by {s}")
        ),
        lock_path.display(),
    ));
    if !config.skill_dirs().contains(&dir) {
        text.push_str(&format!(
            "\n  note: [skills] dirs does not name {}, so it is not served until it does",
            dir.display()
        ));
    }
    Ok(text)
}

/// Removes the folder `dir`, saying what happened.
fn remove_folder(dir: &Path) -> String {
    gone(dir, std::fs::remove_dir_all(dir))
}

/// `airlock install --locked`'s skills: each of `entries` whose folder is
/// not as pinned, pulled by digest and put in place when its layer and
/// tree are the pinned ones.
pub(crate) async fn install_locked(
    entries: &[&LockedSkill],
    options: &Options,
) -> Result<Vec<String>, String> {
    let dir = skills_dir()?;
    let mut said = Vec::new();
    for entry in entries {
        let target = dir.join(&entry.name);
        if Skill::read(&target).is_ok_and(|s| s.tree_digest() == entry.tree) {
            said.push(format!("skill {}: as pinned already", entry.name));
            continue;
        }
        let pinned = OciRef::parse(&entry.pinned).map_err(|e| e.to_string())?;
        let auth = Auth::for_registry(pinned.registry());
        let pulled = airlock_oci::pull_any(&pinned, &auth, |_| MAX_LAYER, options)
            .await
            .map_err(|e| e.to_string())?;
        if pulled.artifact.layer_digest != entry.layer_digest {
            return Err(format!(
                "{}: the registry gave a layer {}, but airlock.lock pins {}; not installed",
                entry.pinned, pulled.artifact.layer_digest, entry.layer_digest
            ));
        }
        let staged = Staged::unpack(&pulled.bytes, &dir)
            .map_err(|e| format!("{} is not a skill airlock serves: {e}", entry.pinned))?;
        let tree = staged.skill.tree_digest();
        if staged.skill.name != entry.name || tree != entry.tree {
            return Err(format!(
                "{}: the registry gave the skill {} with the tree {tree}, but airlock.lock pins \
                 {} with {}; not installed",
                entry.pinned, staged.skill.name, entry.name, entry.tree
            ));
        }
        staged.put_in_place(&target)?;
        said.push(format!(
            "skill {}: installed {} from {}",
            entry.name,
            target.display(),
            entry.pinned
        ));
    }
    Ok(said)
}

/// `airlock install --locked` of a tool a skill carries: its bytes from the
/// skill's folder (installed first), when they are the pinned ones.
pub(crate) fn install_carried(tool: &LockedTool, lock: &Lockfile) -> Result<String, String> {
    let skill = lock
        .skills
        .iter()
        .find(|s| tool.source.starts_with(&format!("{}#tools/", s.source)))
        .ok_or_else(|| {
            format!(
                "{}: no skill airlock.lock pins carries it ({})",
                tool.name, tool.source
            )
        })?;
    let file = tool
        .source
        .rsplit_once("#tools/")
        .map(|(_, f)| f)
        .unwrap_or_default();
    let from = skills_dir()?.join(&skill.name).join("tools").join(file);
    let bytes = std::fs::read(&from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
    if blake3_hex(&bytes) != tool.blake3 {
        return Err(format!(
            "{}: the skill {} holds {} with BLAKE3 {}, but airlock.lock pins {}; not installed",
            tool.name,
            skill.name,
            from.display(),
            blake3_hex(&bytes),
            tool.blake3
        ));
    }
    write_tool(&tool.file, &bytes)
        .map_err(|e| format!("cannot write {}: {e}", tool.file.display()))?;
    Ok(format!(
        "{}: installed {} from the skill {}",
        tool.name,
        tool.file.display(),
        skill.name
    ))
}

/// What `airlock tools` shows of a pinned skill.
pub(crate) fn describe(entry: &LockedSkill) -> String {
    let folder = skills_dir().map(|d| d.join(&entry.name));
    let state = match folder.clone().and_then(|f| Skill::read(&f)) {
        Ok(s) if s.tree_digest() == entry.tree => "as pinned".to_string(),
        Ok(_) => "CHANGED since it was installed: it is not served".to_string(),
        Err(e) => format!("not served ({e})"),
    };
    format!(
        "skill {}\n  from     {}\n  pinned   {}\n  layer    {}\n  tree     {}\n  signer   {}\n  asks     \
         {}\n  folder   {} ({state})",
        entry.name,
        entry.source,
        entry.pinned,
        entry.layer_digest,
        entry.tree,
        entry.signed_by.as_deref().unwrap_or("none (unsigned)"),
        if entry.asks.is_empty() {
            "nothing".to_string()
        } else {
            entry.asks.join(", ")
        },
        folder.map_or_else(|e| e, |f| f.display().to_string()),
    )
}

/// `airlock remove NAME` of a pinned skill: its folder and its entry.
pub(crate) fn remove(name: &str, mut lock: Lockfile, lock_path: &Path) -> Result<String, String> {
    let dir = skills_dir()?;
    let carried: Vec<LockedTool> = lock
        .remove_skill(name)
        .map(|s| carried_by(&lock, &s.source).into_iter().cloned().collect())
        .unwrap_or_default();
    for tool in &carried {
        lock.remove(&tool.name);
    }
    write_lock(&lock, lock_path)
        .map_err(|e| format!("cannot write {}: {e}", lock_path.display()))?;
    let mut text = format!("removed skill {name}: {}", remove_folder(&dir.join(name)));
    for tool in &carried {
        text.push_str(&format!(
            "\nthe tool {} it carried: {}",
            tool.name,
            gone(&tool.file, std::fs::remove_file(&tool.file))
        ));
    }
    Ok(text)
}
