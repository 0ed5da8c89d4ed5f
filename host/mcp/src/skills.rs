//! MCP's Skills extension (SEP-2640, `io.modelcontextprotocol/skills`):
//! the host's skills ([`Airlock::skills`]) as `skills/list`, `skills/get`,
//! `resources/read` of their `skill://NAME/PATH` URIs and
//! `resources/directory/read` of their folders. Every file is served from
//! the bytes read (and hashed) when the skills were loaded, so what a
//! client reads matches the digest it was listed with.

use airlock_host::Airlock;
use airlock_host::sanitize::{self, Sink};
use airlock_host::skill_tool::skill_uri;
use airlock_host::{Skill as HostSkill, Skills};
use base64::Engine as _;
use rmcp::ErrorData;
use rmcp::model::{
    CacheScope, DIRECTORY_MIME_TYPE, GetSkillResult, ListSkillsResult, ReadResourceDirectoryResult,
    ReadResourceResult, Resource, ResourceContents, Skill, SkillFrontmatter, SkillResource,
    SkillResources,
};
use std::collections::BTreeSet;

/// How long a listing may be taken as fresh: the server reads the skills
/// again within a second of a change, and a client asks again after this.
const TTL_MS: u64 = 60_000;

/// The scheme of a skill's files.
pub(crate) const SCHEME: &str = "skill://";

/// `skills/list`: every skill, on one page.
pub(crate) fn list(airlock: &Airlock) -> ListSkillsResult {
    let skills = airlock.skills();
    let mut result =
        ListSkillsResult::with_all_items(skills.skills.iter().map(|s| entry(s)).collect());
    result.ttl_ms = Some(TTL_MS);
    result.cache_scope = Some(CacheScope::Public);
    result
}

/// `skills/get` of the skill whose `SKILL.md` is at `uri`; `-32602` for
/// any other URI.
pub(crate) fn get(airlock: &Airlock, uri: &str) -> Result<GetSkillResult, ErrorData> {
    let found = skill_and_path(airlock.skills(), uri).filter(|(_, path)| *path == "SKILL.md");
    let Some((skill, _)) = found else {
        return Err(ErrorData::invalid_params(
            format!("No skill is served at {}", shown(uri)),
            None,
        ));
    };
    let mut result = GetSkillResult::new(entry(skill));
    result.ttl_ms = Some(TTL_MS);
    result.cache_scope = Some(CacheScope::Public);
    Ok(result)
}

/// `resources/read` of a skill's file: `None` when `uri` names none.
pub(crate) fn read(airlock: &Airlock, uri: &str) -> Option<ReadResourceResult> {
    let (skill, path) = skill_and_path(airlock.skills(), uri)?;
    let file = skill.file(path)?;
    // Text only when the bytes are exactly that text, so what the client
    // hashes is what was listed.
    let contents = match std::str::from_utf8(&file.bytes) {
        Ok(text) if !text.contains('\0') => ResourceContents::text(text, uri),
        _ => ResourceContents::blob(
            base64::engine::general_purpose::STANDARD.encode(&file.bytes),
            uri,
        ),
    };
    let contents = match mime_type(path) {
        Some(mime) => contents.with_mime_type(mime),
        None => contents,
    };
    Some(ReadResourceResult::new(vec![contents]))
}

/// `resources/directory/read`: the files and folders directly in the
/// skill folder `uri` names (`skill://NAME` or `skill://NAME/DIR`);
/// `-32602` when it names no folder of a skill.
pub(crate) fn directory(
    airlock: &Airlock,
    uri: &str,
) -> Result<ReadResourceDirectoryResult, ErrorData> {
    let not_a_directory =
        || ErrorData::invalid_params(format!("{} is not a directory resource", shown(uri)), None);
    let rest = uri.strip_prefix(SCHEME).ok_or_else(not_a_directory)?;
    let (name, dir) = rest.split_once('/').unwrap_or((rest, ""));
    let skill = airlock.skills().get(name).ok_or_else(not_a_directory)?;
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{}/", dir.trim_end_matches('/'))
    };
    let mut folders = BTreeSet::new();
    let mut children = Vec::new();
    for file in &skill.files {
        let Some(inside) = file.path.strip_prefix(&prefix) else {
            continue;
        };
        match inside.split_once('/') {
            Some((folder, _)) => {
                folders.insert(folder.to_string());
            }
            None => {
                let mut child = Resource::new(skill_uri(name, &file.path), inside)
                    .with_size(file.bytes.len() as u64);
                if let Some(mime) = mime_type(&file.path) {
                    child = child.with_mime_type(mime);
                }
                children.push(child);
            }
        }
    }
    if children.is_empty() && folders.is_empty() {
        return Err(not_a_directory());
    }
    for folder in folders {
        let uri = skill_uri(name, &format!("{prefix}{folder}"));
        children.push(Resource::new(uri, folder).with_mime_type(DIRECTORY_MIME_TYPE));
    }
    Ok(ReadResourceDirectoryResult::with_all_items(children))
}

/// The listing of one skill: its front matter as written, and every file
/// with its size and digest.
fn entry(skill: &HostSkill) -> Skill {
    let mut frontmatter = SkillFrontmatter::new(&skill.name, &skill.description);
    for (key, value) in &skill.frontmatter {
        if key != "name" && key != "description" {
            frontmatter = frontmatter.with_field(key.clone(), value.clone());
        }
    }
    let files = skill
        .files
        .iter()
        .map(|f| {
            SkillResource::new(
                skill_uri(&skill.name, &f.path),
                f.digest.clone(),
                f.bytes.len() as u64,
            )
        })
        .collect();
    Skill::new(
        skill_uri(&skill.name, "SKILL.md"),
        frontmatter,
        SkillResources::Files(files),
    )
}

/// The skill and the file path in it that `uri` names.
fn skill_and_path<'s>(skills: &'s Skills, uri: &'s str) -> Option<(&'s HostSkill, &'s str)> {
    let (name, path) = uri.strip_prefix(SCHEME)?.split_once('/')?;
    Some((skills.get(name)?, path))
}

/// A file's media type, by its extension, where it is one a client shows.
fn mime_type(path: &str) -> Option<&'static str> {
    let extension = path.rsplit_once('.').map(|(_, e)| e)?;
    Some(match extension {
        "md" => "text/markdown",
        "txt" => "text/plain",
        "py" => "text/x-python",
        "sh" => "text/x-shellscript",
        "js" | "mjs" => "text/javascript",
        "json" => "application/json",
        "html" => "text/html",
        _ => return None,
    })
}

/// A URI as it may be shown in an error: cleaned, and capped.
fn shown(uri: &str) -> String {
    sanitize::clean_capped(uri, Sink::Line, 300)
}
