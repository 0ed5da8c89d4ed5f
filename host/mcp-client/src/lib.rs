//! External MCP servers mounted as tools (Claude Code's MCP tools), with
//! rmcp's client side. Each `[mcp_servers.NAME]` is started as a child
//! process speaking MCP over stdio; each of its tools becomes an
//! [`McpTool`] named `mcp__NAME__TOOL` behind the same [`Tool`](airlock_core::tool::Tool) trait as a
//! component, with the origin [`ToolOrigin::Mcp`] (a native program, so the
//! default mode asks). The child runs confined by its grants
//! (`airlock_native`) unless its configuration says `sandbox = false`. It
//! owns the child's process group, the connection
//! and the mapping of the server's tools and results; it knows nothing
//! about the host that mounts them. Its invariants (the child's
//! environment and lifetime, reuse across loads, bounded and cancelled
//! calls, what a server sends bounded while it is read, sanitised text)
//! are in ARCHITECTURE.md.

mod bounds;
mod connection;
mod describe;
mod process;
mod tool;

pub use tool::McpTool;

use airlock_core::config::{Config, McpServerConfig, ServerWorkspace};
use airlock_core::descriptor::WorkspaceAccess;
use airlock_core::error::LoadError;
use airlock_core::tool::ToolOrigin;
use bounds::{line_bound, list_tools};
use connection::{Connection, Launch, connect};
use describe::tools_of;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How long a server may take to start and list its tools, by default.
pub(crate) const DEFAULT_STARTUP: Duration = Duration::from_secs(30);
/// How long a running server may take to list its tools again.
pub(crate) const RELIST: Duration = Duration::from_secs(5);
/// Cap, in characters, on a server's error text in a message.
pub(crate) const SERVER_ERROR_CHARS: usize = 4096;

/// The servers one load started or reused, by name. The next load (a
/// reload, or another configuration) reuses those whose configuration and
/// working directory are unchanged and that still run, listing their tools
/// again, so a reload neither restarts a server nor loses its state.
/// Shared: every view of a registry holds its servers.
#[derive(Clone, Default)]
pub struct Servers(Arc<BTreeMap<String, Arc<Connection>>>);

/// What [`mount`] did: the tools, what failed with why, and the servers
/// behind the tools.
pub type Mounted = (Vec<McpTool>, Vec<(ToolOrigin, LoadError)>, Servers);

/// Starts every enabled server in `config` (in parallel), or reuses the
/// one `previous` holds under its name when it was started from the same
/// configuration and still runs, and returns their tools, what failed with
/// why, and the servers. Servers switched off are skipped.
pub async fn mount(config: &Config, previous: &Servers) -> Mounted {
    let mut tasks = tokio::task::JoinSet::new();
    for (i, (name, server)) in config.mcp_servers.iter().enumerate() {
        if server.enabled == Some(false) {
            tracing::info!(server = %name, "switched off in the configuration");
            continue;
        }
        let (name, server) = (name.clone(), server.clone());
        let cwd = server.cwd.clone().or_else(|| config.workspace.clone());
        let may_write = server.workspace == ServerWorkspace::ReadWrite
            && config.workspace_access == WorkspaceAccess::ReadWrite;
        let workspace = (config.workspace.clone())
            .filter(|_| server.workspace != ServerWorkspace::None)
            .filter(|_| config.workspace_access != WorkspaceAccess::None)
            .map(|w| (w, may_write));
        let from = Launch {
            config: server,
            cwd,
            workspace,
            helper: config.sandbox_helper.clone(),
        };
        let running = previous
            .0
            .get(&name)
            .filter(|c| c.started_from == from && c.is_running())
            .cloned();
        let max_output = config.limits.output_bytes;
        let line = line_bound(max_output);
        tasks.spawn(async move {
            let connected = match running {
                Some(connection) => {
                    connection.stdout.set_bound(line);
                    match relist(&connection).await {
                        Ok(listed) => Ok((connection, listed)),
                        Err(e) => {
                            tracing::warn!(server = %name, "{e}; starting it again");
                            connect(&name, from, line).await
                        }
                    }
                }
                None => connect(&name, from, line).await,
            };
            let result = connected.map(|(connection, listed)| {
                let (tools, failed) = tools_of(&name, &connection, listed, max_output);
                (connection, tools, failed)
            });
            (i, name, result)
        });
    }
    let mut started = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(r) => started.push(r),
            Err(e) => tracing::error!("an MCP server task failed: {e}"),
        }
    }
    started.sort_by_key(|(i, _, _)| *i);
    let mut tools = Vec::new();
    let mut failures = Vec::new();
    let mut servers = BTreeMap::new();
    for (_, name, result) in started {
        match result {
            Ok((connection, mounted, failed)) => {
                tools.extend(mounted);
                failures.extend(
                    failed
                        .into_iter()
                        .map(|e| (ToolOrigin::Mcp(name.clone()), e)),
                );
                servers.insert(name, connection);
            }
            Err(e) => failures.push((ToolOrigin::Mcp(name), e)),
        }
    }
    (tools, failures, Servers(Arc::new(servers)))
}

/// How long a server may take to start and list its tools.
fn startup_time(config: &McpServerConfig) -> Duration {
    config
        .startup_timeout_ms
        .map_or(DEFAULT_STARTUP, Duration::from_millis)
}

/// Lists a running server's tools again, within its startup time but at
/// most [`RELIST`], and within the listing's bounds (a server that hangs
/// or runs past one is started afresh).
async fn relist(connection: &Connection) -> Result<Vec<rmcp::model::Tool>, String> {
    let within = startup_time(&connection.started_from.config).min(RELIST);
    let listing = list_tools(connection.service.peer(), &connection.stdout);
    match tokio::time::timeout(within, listing).await {
        Ok(listed) => listed,
        Err(_) => Err(format!(
            "tools/list got no answer within {} ms",
            within.as_millis()
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::describe::{descriptor, version_of};
    use crate::tool::output;
    use airlock_core::descriptor::{MAX_RESULT_SIZE_CEILING, SafetyFlags};
    use airlock_core::error::{ErrorClass, LoadError};
    use airlock_core::tool::ContentBlock;
    use rmcp::model::CallToolResult;
    use serde_json::{Value, json};

    fn tool(value: Value) -> rmcp::model::Tool {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn names_flags_and_meta_follow_the_mcp_defaults() {
        let t = tool(
            json!({"name": "get.file", "description": "Reads a file.\nMore.",
            "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true, "openWorldHint": false}}),
        );
        let d = descriptor("fs", &t, "1.0", true).unwrap();
        assert_eq!(d.name, "mcp__fs__get_file");
        assert_eq!(d.description, "Reads a file.");
        assert_eq!(d.prompt, "Reads a file.\nMore.");
        assert_eq!(
            d.flags,
            SafetyFlags::READ_ONLY | SafetyFlags::CONCURRENCY_SAFE
        );
        assert!(d.defer_loading);

        let t = tool(json!({"name": "rm", "inputSchema": {"type": "object"},
            "_meta": {"anthropic/alwaysLoad": true, "anthropic/requiresUserInteraction": true,
                      "anthropic/maxResultSizeChars": 9}}));
        let d = descriptor("fs", &t, "1.0", true).unwrap();
        assert_eq!(
            d.flags,
            SafetyFlags::DESTRUCTIVE
                | SafetyFlags::OPEN_WORLD
                | SafetyFlags::REQUIRES_USER_INTERACTION
        );
        assert!(!d.defer_loading, "alwaysLoad keeps it listed");
        assert_eq!(d.max_result_size, 9);
        assert!(d.description.contains("rm"));

        assert_eq!(version_of(&"é".repeat(40)), "é".repeat(32));
        assert_eq!(version_of(" \n"), "unknown");
        let t = tool(json!({"name": "big", "inputSchema": {"type": "object"},
            "_meta": {"anthropic/maxResultSizeChars": 9_000_000}}));
        let d = descriptor("fs", &t, "1", false).unwrap();
        assert_eq!(d.max_result_size, MAX_RESULT_SIZE_CEILING);

        let long = "x".repeat(70);
        let t = tool(json!({"name": long, "inputSchema": {"type": "object"}}));
        assert!(matches!(
            descriptor("fs", &t, "1", false),
            Err(LoadError::InvalidDescriptor { .. })
        ));
    }

    #[test]
    fn results_are_mapped_bounded_and_errors_kept() {
        let r: CallToolResult = serde_json::from_value(json!({"content": [
            {"type": "text", "text": "a\u{1b}[31mb"},
            {"type": "image", "data": "aGk=", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///x", "name": "x"}],
            "structuredContent": {"n": 1}}))
        .unwrap();
        let out = output(r.clone(), 1 << 20).unwrap();
        assert_eq!(
            out.content[0],
            ContentBlock::Text("ab".into()),
            "the escape sequence is gone"
        );
        assert_eq!(
            out.content[1],
            ContentBlock::Image {
                mime_type: "image/png".into(),
                data: b"hi".to_vec()
            }
        );
        assert_eq!(out.structured, Some(json!({"n": 1})));
        assert_eq!(output(r, 8).unwrap_err().class, ErrorClass::OutputLimit);

        let r: CallToolResult = serde_json::from_value(
            json!({"content": [{"type": "text", "text": "no"}], "isError": true}),
        )
        .unwrap();
        let e = output(r, 100).unwrap_err();
        assert_eq!((e.class, e.message.as_str()), (ErrorClass::ToolError, "no"));
    }

    #[test]
    fn server_text_is_cleaned_in_schemas_and_structured_output() {
        let dirt = "\u{1b}[2J\u{7}\u{202E}\u{E0069}\u{2060}\u{AD}\u{2028}\u{FE0F}";
        let d = |t: &str| format!("{t}{dirt}");
        let t = tool(json!({"name": d("look"), "title": d("Look\nnow"),
            "inputSchema": {"type": "object", "properties": {d("path"): {
                "type": "string", "description": d("Where.")}}},
            "outputSchema": {"type": "object", "description": d("What.")}}));
        let desc = descriptor("fs", &t, &d("2"), false).unwrap();
        assert_eq!(
            desc.input_schema,
            json!({"type": "object", "properties": {"path": {"type": "string", "description": "Where."}}})
        );
        assert_eq!(
            desc.output_schema,
            Some(json!({"type": "object", "description": "What."}))
        );
        assert_eq!(desc.title, "Looknow");
        assert_eq!(desc.description, "The tool look of the MCP server fs.");
        assert_eq!(desc.version, "2");

        let r: CallToolResult = serde_json::from_value(json!({"content": [
            {"type": "resource_link", "uri": d("file:///x\n"), "name": d("x")}],
            "structuredContent": {d("n"): [d("one\ntwo")]}}))
        .unwrap();
        let out = output(r, 1 << 20).unwrap();
        assert_eq!(out.structured, Some(json!({"n": ["one\ntwo"]})));
        assert_eq!(
            out.content[0],
            ContentBlock::ResourceLink {
                uri: "file:///x".into(),
                name: "x".into(),
                description: None,
                mime_type: None
            }
        );
    }
}
