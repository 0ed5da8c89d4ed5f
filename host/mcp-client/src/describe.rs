//! A server's tools as descriptors: names, schemas, flags from MCP's
//! annotations, versions, and errors a server caused, cleaned.

use crate::connection::Connection;
use crate::tool::McpTool;
use airlock_core::descriptor::{
    DEFAULT_MAX_RESULT_SIZE, Descriptor, MAX_RESULT_SIZE_CEILING, SafetyFlags,
};
use airlock_core::error::LoadError;
use airlock_core::sanitize::{self, Sink};
use airlock_core::tool::ToolOrigin;
use serde_json::Value;
use std::sync::Arc;

/// A server's listed tools as [`McpTool`]s, and the ones that cannot be.
pub(crate) fn tools_of(
    name: &str,
    connection: &Arc<Connection>,
    listed: Vec<rmcp::model::Tool>,
    max_output: usize,
) -> (Vec<McpTool>, Vec<LoadError>) {
    let defer = connection.started_from.config.defer_loading;
    let mut tools = Vec::new();
    let mut failures = Vec::new();
    for tool in listed {
        match descriptor(name, &tool, &connection.version, defer) {
            Ok(d) => tools.push(McpTool {
                origin: ToolOrigin::Mcp(name.to_string()),
                remote: tool.name.to_string(),
                connection: connection.clone(),
                descriptor: d,
                max_output,
            }),
            Err(e) => failures.push(e),
        }
    }
    (tools, failures)
}

/// A server's tool as a descriptor: `mcp__SERVER__TOOL` (characters a
/// model API refuses become `_`), its description as the prompt (the
/// first line as the description), its schemas, and flags from its
/// annotations as MCP defines their defaults.
pub(crate) fn descriptor(
    server: &str,
    tool: &rmcp::model::Tool,
    version: &str,
    defer: bool,
) -> Result<Descriptor, LoadError> {
    let safe: String = tool
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = format!("mcp__{server}__{safe}");
    let text = |t: &str, max: usize| sanitize::clean_capped(t, Sink::Model, max);
    let prompt = text(tool.description.as_deref().unwrap_or_default(), 10_000);
    let first = prompt
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    let description = if first.is_empty() {
        format!("The tool {} of the MCP server {server}.", tool.name)
    } else {
        text(first, 500)
    };
    let mut d = Descriptor::new(&name, &description);
    d.title = sanitize::clean_capped(
        tool.title
            .as_deref()
            .or(tool.annotations.as_ref().and_then(|a| a.title.as_deref()))
            .unwrap_or(&tool.name),
        Sink::Line,
        200,
    );
    if !prompt.is_empty() {
        d.prompt = prompt;
    }
    d.input_schema = Value::Object((*tool.input_schema).clone());
    d.output_schema = tool
        .output_schema
        .as_ref()
        .map(|s| Value::Object((**s).clone()));
    d.flags = flags(tool);
    let meta = |key: &str| tool.meta.as_ref().and_then(|m| m.get(key));
    d.defer_loading = defer && meta("anthropic/alwaysLoad") != Some(&Value::Bool(true));
    d.max_result_size = meta("anthropic/maxResultSizeChars")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_MAX_RESULT_SIZE, |n| {
            n.clamp(1, u64::from(MAX_RESULT_SIZE_CEILING)) as u32
        });
    d.version = version_of(version);
    sanitize::clean_descriptor(&mut d);
    let problems = d.problems();
    if !problems.is_empty() {
        return Err(LoadError::InvalidDescriptor {
            tool: name,
            problems,
        });
    }
    Ok(d)
}

/// A server's version as a descriptor's: one line, at most 64 bytes
/// (cut at a character boundary), `unknown` when empty.
pub(crate) fn version_of(version: &str) -> String {
    let line = sanitize::clean(version, Sink::Line).text;
    let mut end = line.len().min(64);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    match line[..end].trim() {
        "" => "unknown".into(),
        v => v.to_string(),
    }
}

/// The flags MCP's annotations hint at: `readOnlyHint` (default false)
/// makes a call read-only and concurrency-safe; otherwise
/// `destructiveHint` (default true) and `idempotentHint` (default false);
/// `openWorldHint` (default true); `_meta["anthropic/requiresUserInteraction"]`.
pub(crate) fn flags(tool: &rmcp::model::Tool) -> SafetyFlags {
    let a = tool.annotations.clone().unwrap_or_default();
    let mut flags = SafetyFlags::empty();
    if a.read_only_hint == Some(true) {
        flags |= SafetyFlags::READ_ONLY | SafetyFlags::CONCURRENCY_SAFE;
    } else {
        if a.destructive_hint != Some(false) {
            flags |= SafetyFlags::DESTRUCTIVE;
        }
        if a.idempotent_hint == Some(true) {
            flags |= SafetyFlags::IDEMPOTENT;
        }
    }
    if a.open_world_hint != Some(false) {
        flags |= SafetyFlags::OPEN_WORLD;
    }
    let interactive = tool
        .meta
        .as_ref()
        .and_then(|m| m.get("anthropic/requiresUserInteraction"));
    if interactive == Some(&Value::Bool(true)) {
        flags |= SafetyFlags::REQUIRES_USER_INTERACTION;
    }
    flags
}
