//! How Airlock's values look on MCP: a descriptor as a `Tool`, a result as
//! a `CallToolResult` (structured output, saved-result links), a page of a
//! list, `file://` URIs of saved results, and log lines as
//! `notifications/message` at RFC 5424's levels.

use crate::{PAGE, SPILLED_MIME};
use airlock_host::ContentBlock;
use airlock_host::Descriptor;
use airlock_host::ToolResult;
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock as McpContent, Resource, Tool};

/// The resource link to the saved result at `path`.
pub(crate) fn result_link(path: &str) -> Resource {
    let name = path.rsplit('/').next().unwrap_or(path);
    let mut link = Resource::new(file_uri(path), name);
    link.description = Some(
        "The whole result of this call, saved because it was too large to return; read it \
         with resources/read (no tool can, and no other caller)"
            .into(),
    );
    link.mime_type = Some(SPILLED_MIME.into());
    link
}

/// The page of a list of `len` tools (or resources) that `cursor` asks
/// for: its start, its end and the next page's cursor. A cursor is the
/// index of the page's first item (the registry's order is stable, and a
/// session's resources are only ever added at the end); any other is an
/// error.
pub(crate) fn page(
    len: usize,
    cursor: Option<&str>,
) -> Result<(usize, usize, Option<String>), ErrorData> {
    let start = match cursor {
        None => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .ok()
            .filter(|&i| i <= len)
            .ok_or_else(|| {
                ErrorData::invalid_params("the cursor is not one this server gave", None)
            })?,
    };
    let end = start.saturating_add(PAGE).min(len);
    Ok((start, end, (end < len).then(|| end.to_string())))
}

/// A descriptor as an MCP tool, in the shape `adapters::mcp` defines.
pub(crate) fn mcp_tool(d: &Descriptor) -> Result<Tool, ErrorData> {
    serde_json::from_value(airlock_host::adapters::mcp::tool_definition(d)).map_err(|e| {
        ErrorData::internal_error(format!("the tool {} cannot be listed: {e}", d.name), None)
    })
}

/// A result as MCP content: `isError` for every failure of the call; the
/// structured output also as text, and as `structuredContent` only for a
/// tool that lists an output schema; the link to the spilled result's file,
/// if any, after the output; the hooks' additional context after it.
pub(crate) fn mcp_result(
    result: ToolResult,
    lists_output_schema: bool,
    spilled: Option<Resource>,
) -> CallToolResult {
    let mut r = match result.outcome {
        Ok(output) => {
            let mut content: Vec<McpContent> = output
                .content
                .iter()
                .map(|block| match block {
                    ContentBlock::Text(text) => McpContent::text(text.clone()),
                    ContentBlock::Json(json) => McpContent::text(json.to_string()),
                    ContentBlock::Image { mime_type, data } => {
                        use base64::Engine as _;
                        McpContent::image(
                            base64::engine::general_purpose::STANDARD.encode(data),
                            mime_type.clone(),
                        )
                    }
                    ContentBlock::ResourceLink {
                        uri,
                        name,
                        description,
                        mime_type,
                    } => {
                        let mut link = Resource::new(uri.clone(), name.clone());
                        link.description = description.clone();
                        link.mime_type = mime_type.clone();
                        McpContent::resource_link(link)
                    }
                    ContentBlock::ToolReference { definition, .. } => {
                        McpContent::text(definition.to_string())
                    }
                })
                .collect();
            // A client that reads only the text still gets a result with no
            // content of its own (MCP's compatibility advice); one with
            // content already says it, and the JSON would say it twice.
            if let Some(structured) = &output.structured
                && content.is_empty()
            {
                content.push(McpContent::text(structured.to_string()));
            }
            content.extend(spilled.map(McpContent::resource_link));
            let mut r = CallToolResult::success(content);
            r.structured_content = output.structured.filter(|_| lists_output_schema);
            r
        }
        Err(error) => CallToolResult::error(vec![McpContent::text(error.message)]),
    };
    r.content
        .extend(result.additional_context.into_iter().map(McpContent::text));
    r
}

/// MCP logging: a tool's log lines as `notifications/message`, filtered by
/// the level the session set. The tool's levels map to RFC 5424's as MCP
/// names them: trace and debug to `debug`, info to `info`, warn to
/// `warning`, error to `error`.
pub(crate) mod logging {
    #![expect(
        deprecated,
        reason = "logging is deprecated from protocol 2026-07-28, which this server does not offer"
    )]

    use airlock_host::tool::{LogEvent, LogLevel};
    use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
    use rmcp::{Peer, RoleServer};

    /// The level of a session that set none: `info` (a tool's debug and
    /// trace lines go out only to a session that asked for `debug`).
    pub(crate) const DEFAULT: u8 = 1;

    /// Where `level` ranks among MCP's levels, least severe (0) first.
    pub(crate) fn rank(level: LoggingLevel) -> u8 {
        match level {
            LoggingLevel::Debug => 0,
            LoggingLevel::Info => 1,
            LoggingLevel::Notice => 2,
            LoggingLevel::Warning => 3,
            LoggingLevel::Error => 4,
            LoggingLevel::Critical => 5,
            LoggingLevel::Alert => 6,
            LoggingLevel::Emergency => 7,
        }
    }

    /// A tool's level as MCP's.
    fn mcp_level(level: LogLevel) -> LoggingLevel {
        match level {
            LogLevel::Trace | LogLevel::Debug => LoggingLevel::Debug,
            LogLevel::Info => LoggingLevel::Info,
            LogLevel::Warn => LoggingLevel::Warning,
            LogLevel::Error => LoggingLevel::Error,
        }
    }

    /// The notification for `event`, unless it ranks below `min`.
    pub(super) fn message(event: &LogEvent, min: u8) -> Option<LoggingMessageNotificationParam> {
        let level = mcp_level(event.level);
        (rank(level) >= min).then(|| {
            LoggingMessageNotificationParam::new(level, event.message.clone().into())
                .with_logger(event.tool.clone())
        })
    }

    /// Sends `event` to `peer` unless it ranks below `min`; returns once
    /// the transport has it.
    pub(crate) async fn send(peer: &Peer<RoleServer>, event: &LogEvent, min: u8) {
        if let Some(param) = message(event, min) {
            let _ = peer.notify_logging_message(param).await;
        }
    }
}

/// The path of a `file:` URI as [`file_uri`] writes them.
pub(crate) fn path_of_file_uri(uri: &str) -> Option<String> {
    let encoded = uri.strip_prefix("file://")?.as_bytes();
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut i = 0;
    while i < encoded.len() {
        if encoded[i] == b'%' {
            let hex = std::str::from_utf8(encoded.get(i + 1..i + 3)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            bytes.push(encoded[i]);
            i += 1;
        }
    }
    String::from_utf8(bytes).ok().filter(|p| p.starts_with('/'))
}

/// `path` (absolute) as a `file:` URI, each byte outside the unreserved
/// characters and `/` percent-encoded.
pub(crate) fn file_uri(path: &str) -> String {
    let mut uri = String::from("file://");
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_host::SafetyFlags;
    use rmcp::model::ErrorCode;

    #[test]
    fn log_lines_map_to_rfc_5424_levels_and_are_filtered_by_the_session_level() {
        use airlock_host::tool::{LogEvent, LogLevel};
        let line = |level| LogEvent {
            tool_use_id: "mcp-1".into(),
            tool: "probe".into(),
            level,
            message: "hello".into(),
        };
        let sent = |level, min| {
            logging::message(&line(level), min)
                .map(|m| serde_json::to_value(m).unwrap())
                .map(|v| (v["level"].as_str().unwrap().to_owned(), v["logger"].clone()))
        };
        let debug = 0;
        for (level, name) in [
            (LogLevel::Trace, "debug"),
            (LogLevel::Debug, "debug"),
            (LogLevel::Info, "info"),
            (LogLevel::Warn, "warning"),
            (LogLevel::Error, "error"),
        ] {
            assert_eq!(
                sent(level, debug),
                Some((name.to_owned(), serde_json::json!("probe")))
            );
        }
        assert_eq!(sent(LogLevel::Debug, logging::DEFAULT), None);
        assert_eq!(sent(LogLevel::Trace, logging::DEFAULT), None);
        assert!(sent(LogLevel::Info, logging::DEFAULT).is_some());
        let error = 4;
        assert_eq!(sent(LogLevel::Warn, error), None);
        assert!(sent(LogLevel::Error, error).is_some());
    }

    #[test]
    fn spilled_paths_become_file_uris() {
        assert_eq!(
            file_uri("/w/.airlock/results/mcp-1.txt"),
            "file:///w/.airlock/results/mcp-1.txt"
        );
        assert_eq!(file_uri("/a b/%/é"), "file:///a%20b/%25/%C3%A9");
    }

    #[test]
    fn pages_follow_their_cursors_to_the_end() {
        assert_eq!(page(250, None).unwrap(), (0, 100, Some("100".into())));
        assert_eq!(
            page(250, Some("100")).unwrap(),
            (100, 200, Some("200".into()))
        );
        assert_eq!(page(250, Some("200")).unwrap(), (200, 250, None));
        assert_eq!(page(100, None).unwrap(), (0, 100, None));
        assert_eq!(page(0, None).unwrap(), (0, 0, None));
        for bad in ["251", "-1", "x", ""] {
            let e = page(250, Some(bad)).unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{bad}");
        }
    }

    #[test]
    fn flags_become_hints_and_deferral_is_kept() {
        let mut d = Descriptor::new("probe", "Probes.");
        d.flags = SafetyFlags::READ_ONLY | SafetyFlags::IDEMPOTENT;
        let tool = mcp_tool(&d).unwrap();
        let hints = tool.annotations.clone().unwrap();
        assert_eq!(hints.read_only_hint, Some(true));
        assert_eq!(hints.destructive_hint, Some(false));
        assert_eq!(hints.idempotent_hint, Some(true));
        assert_eq!(hints.open_world_hint, Some(false));
        let meta = tool.meta.clone().unwrap().0;
        assert_eq!(meta["anthropic/alwaysLoad"], true);
        d.defer_loading = true;
        d.flags = SafetyFlags::DESTRUCTIVE | SafetyFlags::REQUIRES_USER_INTERACTION;
        let tool = mcp_tool(&d).unwrap();
        let meta = tool.meta.unwrap().0;
        assert!(!meta.contains_key("anthropic/alwaysLoad"));
        assert_eq!(meta["anthropic/requiresUserInteraction"], true);
        assert_eq!(tool.annotations.unwrap().destructive_hint, Some(true));
    }

    #[test]
    fn structured_output_is_sent_as_text_only_without_other_content_and_failures_are_is_error() {
        let output = airlock_host::ToolOutput {
            structured: Some(serde_json::json!({"n": 1})),
            ..airlock_host::ToolOutput::text("one")
        };
        let mut output = output;
        output.content.push(ContentBlock::ResourceLink {
            uri: "file:///w/a.rs".into(),
            name: "a.rs".into(),
            description: None,
            mime_type: Some("text/x-rust".into()),
        });
        let mut result =
            ToolResult::failed("id", "t", airlock_host::CallError::cancelled("unused"));
        result.outcome = Ok(output);
        result.additional_context = vec!["from a hook".into()];
        let unlisted = mcp_result(result.clone(), false, None);
        assert_eq!(unlisted.structured_content, None, "no output schema listed");
        let ok = mcp_result(result, true, None);
        assert_eq!(ok.is_error, Some(false));
        assert_eq!(ok.structured_content, Some(serde_json::json!({"n": 1})));
        let texts: Vec<String> = ok
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect();
        assert_eq!(texts, ["one", "from a hook"], "the text already says it");
        let link = serde_json::to_value(&ok.content[1]).unwrap();
        assert_eq!(link["type"], "resource_link");
        assert_eq!(link["uri"], "file:///w/a.rs");
        assert_eq!(link["mimeType"], "text/x-rust");
        let mut bare = ToolResult::failed("id", "t", airlock_host::CallError::cancelled("unused"));
        bare.outcome = Ok(airlock_host::ToolOutput {
            structured: Some(serde_json::json!({"n": 2})),
            ..airlock_host::ToolOutput::default()
        });
        let bare = mcp_result(bare, false, None);
        assert_eq!(
            bare.content[0].as_text().map(|t| t.text.as_str()),
            Some(r#"{"n":2}"#),
            "a result with no content of its own is sent as text"
        );
        let failed = mcp_result(
            ToolResult::failed("id", "t", airlock_host::CallError::cancelled("stopped")),
            true,
            None,
        );
        assert_eq!(failed.is_error, Some(true));
    }
}
