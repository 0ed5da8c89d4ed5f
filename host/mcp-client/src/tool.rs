//! One tool of a server behind the `Tool` trait: the call, its progress
//! and cancellation at the server, and the result mapped and bounded.

use crate::SERVER_ERROR_CHARS;
use crate::connection::Connection;
use airlock_core::descriptor::Descriptor;
use airlock_core::error::{CallError, ErrorClass};
use airlock_core::sanitize::{self, Sink};
use airlock_core::tool::{ContentBlock, Invocation, ProgressEvent, Tool, ToolOrigin, ToolOutput};
use async_trait::async_trait;
use futures::StreamExt;
use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, ContentBlock as McpContent, ResourceContents, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Map, Value};
use std::sync::Arc;

/// One tool of an external MCP server.
pub struct McpTool {
    pub(crate) descriptor: Descriptor,
    pub(crate) origin: ToolOrigin,
    /// The tool's name at the server.
    pub(crate) remote: String,
    pub(crate) connection: Arc<Connection>,
    pub(crate) max_output: usize,
}

/// A request the server has not answered: when the call ends without the
/// answer (cancelled, timed out, or its future dropped by the caller), the
/// server is sent `notifications/cancelled`, so it stops the work and the
/// client forgets the request.
pub(crate) struct Pending {
    /// The connection, until the answer arrived.
    pub(crate) peer: Option<rmcp::Peer<RoleClient>>,
    pub(crate) id: rmcp::model::RequestId,
    pub(crate) reason: &'static str,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let (Some(peer), Ok(runtime)) = (self.peer.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let param =
            CancelledNotificationParam::new(Some(self.id.clone()), Some(self.reason.into()));
        runtime.spawn(async move {
            let _ = peer.notify_cancelled(param).await;
        });
    }
}

#[async_trait]
impl Tool for McpTool {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    fn origin(&self) -> &ToolOrigin {
        &self.origin
    }

    async fn call(
        &self,
        invocation: &mut Invocation,
        input: &Value,
    ) -> Result<ToolOutput, CallError> {
        let arguments: Map<String, Value> = input.as_object().cloned().unwrap_or_default();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments),
        ));
        let peer = self.connection.service.peer().clone();
        let server = self.connection.service.service();
        let lost = |e: rmcp::service::ServiceError| match self.connection.stdout.refused() {
            Some(why) => CallError::new(
                ErrorClass::OutputLimit,
                format!(
                    "the MCP server of {} is unavailable: {why}",
                    self.descriptor.name
                ),
            ),
            None => CallError::new(
                ErrorClass::ToolError,
                sanitize::clean_capped(
                    &format!("the MCP server of {} failed: {e}", self.descriptor.name),
                    Sink::Model,
                    SERVER_ERROR_CHARS,
                ),
            ),
        };
        let handle = peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(lost)?;
        let mut pending = Pending {
            peer: Some(peer.clone()),
            id: handle.id.clone(),
            reason: "abandoned by the caller",
        };
        let mut progress = server
            .progress
            .subscribe(handle.progress_token.clone())
            .await;
        let response = handle.await_response();
        tokio::pin!(response);
        let deadline = tokio::time::sleep(invocation.grants.timeout);
        tokio::pin!(deadline);
        let cancel = invocation.cancel.clone();
        let result = loop {
            tokio::select! {
                r = &mut response => {
                    pending.peer = None;
                    break r.map_err(lost)?;
                }
                Some(p) = progress.next() => invocation.progress.send(ProgressEvent {
                    tool_use_id: invocation.tool_use_id.clone(),
                    message: sanitize::clean_capped(p.message.as_deref().unwrap_or("working"), Sink::Line, 200),
                    fraction: p.total.filter(|t| *t > 0.0).map(|t| (p.progress / t).clamp(0.0, 1.0) as f32),
                }),
                () = cancel.cancelled() => {
                    pending.reason = "cancelled by the user";
                    return Err(CallError::cancelled("the call was cancelled"));
                }
                () = &mut deadline => {
                    pending.reason = "timed out";
                    return Err(CallError::new(
                        ErrorClass::Timeout,
                        format!("the MCP server did not answer within {} ms", invocation.grants.timeout.as_millis()),
                    ));
                }
            }
        };
        match result {
            ServerResult::CallToolResult(r) => output(r, self.max_output),
            _ => Err(CallError::new(
                ErrorClass::ToolError,
                "the MCP server answered tools/call with something other than a tool result",
            )),
        }
    }
}

/// embedded resources as their text (or a placeholder for binary ones);
/// `isError` as a tool error; more than `max_output` bytes an output limit.
pub(crate) fn output(result: CallToolResult, max_output: usize) -> Result<ToolOutput, CallError> {
    let size: usize = result
        .content
        .iter()
        .map(|c| match c {
            McpContent::Text(t) => t.text.len(),
            McpContent::Image(i) => i.data.len(),
            McpContent::Audio(a) => a.data.len(),
            McpContent::Resource(r) => match &r.resource {
                ResourceContents::TextResourceContents { text, .. } => text.len(),
                ResourceContents::BlobResourceContents { blob, .. } => blob.len(),
                _ => 0,
            },
            _ => 0,
        })
        .sum::<usize>()
        + result
            .structured_content
            .as_ref()
            .map_or(0, |s| s.to_string().len());
    if size > max_output {
        return Err(CallError::new(
            ErrorClass::OutputLimit,
            format!(
                "the MCP server returned {size} bytes; the limit is {max_output} (limits.output_bytes)"
            ),
        ));
    }
    let text = |t: &str| sanitize::clean(t, Sink::Model).text.into_owned();
    let line = |t: &str| sanitize::clean(t, Sink::Line).text.into_owned();
    let content: Vec<ContentBlock> = result
        .content
        .iter()
        .map(|c| match c {
            McpContent::Text(t) => ContentBlock::Text(text(&t.text)),
            McpContent::Image(i) => {
                use base64::Engine as _;
                match base64::engine::general_purpose::STANDARD.decode(&i.data) {
                    Ok(data) => ContentBlock::Image {
                        mime_type: line(&i.mime_type),
                        data,
                    },
                    Err(_) => ContentBlock::Text("[an image that was not valid base64]".into()),
                }
            }
            McpContent::Audio(a) => ContentBlock::Text(format!("[audio: {}]", line(&a.mime_type))),
            McpContent::Resource(r) => match &r.resource {
                ResourceContents::TextResourceContents { text: t, .. } => {
                    ContentBlock::Text(text(t))
                }
                ResourceContents::BlobResourceContents { uri, blob, .. } => ContentBlock::Text(
                    format!("[resource {}: {} bytes of base64]", line(uri), blob.len()),
                ),
                _ => ContentBlock::Text("[a resource of a kind Airlock does not know]".into()),
            },
            McpContent::ResourceLink(link) => ContentBlock::ResourceLink {
                uri: line(&link.uri),
                name: line(&link.name),
                description: link.description.as_deref().map(text),
                mime_type: link.mime_type.as_deref().map(line),
            },
            _ => ContentBlock::Text("[content of a kind Airlock does not know]".into()),
        })
        .collect();
    if result.is_error == Some(true) {
        let message = content
            .iter()
            .map(ContentBlock::to_text)
            .collect::<Vec<_>>()
            .join("\n");
        return Err(CallError::new(ErrorClass::ToolError, message));
    }
    let mut structured = result.structured_content;
    if let Some(value) = &mut structured {
        sanitize::clean_json(value);
    }
    Ok(ToolOutput {
        content,
        structured,
        ..ToolOutput::default()
    })
}
