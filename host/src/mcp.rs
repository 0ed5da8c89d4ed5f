//! `airlock mcp`: every tool in view served over the Model Context
//! Protocol with rmcp, on stdio or Streamable HTTP. This is the only
//! module that knows rmcp's types: Airlock's descriptors, results, progress
//! and permission questions are mapped here and nowhere else.
//!
//! Each MCP session (the stdio connection, or one HTTP session) has its own
//! agent context and a session [`Executor`]: calls go through the same
//! pipeline and scheduling rule as every other front end (concurrency-safe
//! calls run together, an exclusive call runs alone), and each reply goes
//! out as soon as its call is done. A `notifications/cancelled` cancels the
//! call in the executor (epoch interruption stops a running component);
//! rmcp sends no reply for it.
//!
//! Invariants:
//! - every `tools/call` for a tool in view gets exactly one reply (unless
//!   cancelled), carrying its own result: calls are routed by a per-session
//!   id, never by order;
//! - a failure of the call (validation, permission, the tool's own error,
//!   a limit) is a result with `isError`; a JSON-RPC error is only for an
//!   unknown tool or a malformed request;
//! - progress goes out only when the request carried a `progressToken`,
//!   with a value that never decreases;
//! - a permission question becomes an elicitation when the client supports
//!   form elicitation, and otherwise goes to the host's own prompter (which
//!   denies by default, saying how to allow the call);
//! - when the tool directories change, later calls see the reloaded tools
//!   and every session is sent `notifications/tools/list_changed`;
//! - while `tool_search` is offered, deferred tools are listed only after
//!   a search in the session found them (the session is then sent
//!   `list_changed`); they can be called either way;
//! - nothing but protocol messages is written to stdout.

use crate::Airlock;
use crate::context::ToolContext;
use crate::descriptor::Descriptor;
use crate::executor::{Executor, ExecutorEvent, ExecutorHandle};
use crate::pipeline::permissions::{PermissionAnswer, PermissionPrompter, PermissionRequest};
use crate::pipeline::{ToolResult, ToolUse};
use crate::registry::{Entry, Registry, SourceStamp};
use crate::sanitize::{self, Sink};
use crate::tool::{ContentBlock, ProgressEvent};
use async_trait::async_trait;
use rmcp::model::{
    BooleanSchema, CallToolRequestParams, CallToolResponse, CallToolResult,
    ContentBlock as McpContent, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    ErrorCode, Implementation, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ProtocolVersion, Resource, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{ElicitationMode, NotificationContext, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// Tools per `tools/list` page.
const PAGE: usize = 100;

/// How often the tool directories are checked for changes.
const WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// How long a permission question waits for the user.
const ELICITATION_TIMEOUT: Duration = Duration::from_secs(600);

/// The host as the MCP sessions share it: the tools (replaced when the
/// tool directories change) and the policy.
///
/// ```no_run
/// # async fn example() -> anyhow::Result<()> {
/// use airlock_host::mcp::McpHost;
/// use airlock_host::{Airlock, Config};
///
/// let config = Config { workspace: Some("/path/to/project".into()), ..Config::default() };
/// let host = McpHost::new(Airlock::new(config).await?);
/// // Either one client on stdin/stdout…
/// host.serve_stdio().await?;
/// // …or many over Streamable HTTP at http://127.0.0.1:8123/mcp.
/// host.serve_http(tokio::net::TcpListener::bind("127.0.0.1:8123").await?).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct McpHost {
    tools: watch::Receiver<Airlock>,
}

impl McpHost {
    /// A host serving `airlock`'s tools, reloading them when a component
    /// file in its tool directories is added, changed or removed. The
    /// airlock's prompter answers permission questions for clients that
    /// cannot be asked (elicitation).
    pub fn new(airlock: Airlock) -> McpHost {
        let dirs = airlock.grants().config().effective_tool_dirs();
        let mut stamp = SourceStamp::of(&dirs);
        let (tx, rx) = watch::channel(airlock);
        if !dirs.is_empty() {
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(WATCH_INTERVAL).await;
                    let now = SourceStamp::of(&dirs);
                    if now == stamp {
                        continue;
                    }
                    stamp = now;
                    let current = tx.borrow().clone();
                    match current.reload().await {
                        Ok(reloaded) => {
                            tracing::info!("the tool directories changed: tools reloaded");
                            if tx.send(reloaded).is_err() {
                                return;
                            }
                        }
                        Err(e) => tracing::error!("reloading the tools failed: {e:#}"),
                    }
                }
            });
        }
        McpHost { tools: rx }
    }

    /// A new session (one per stdio connection or HTTP session).
    pub fn session(&self) -> McpServer {
        McpServer::new(self.clone())
    }

    /// Serves one session on stdin/stdout until stdin closes.
    pub async fn serve_stdio(&self) -> anyhow::Result<()> {
        let running = self.session().serve(rmcp::transport::stdio_pipes()).await?;
        running.waiting().await?;
        Ok(())
    }

    /// Serves Streamable HTTP on `listener` at `/mcp`, a session (and an
    /// agent context) per client; requests whose `Origin` is not this
    /// server are refused (403).
    pub async fn serve_http(&self, listener: tokio::net::TcpListener) -> anyhow::Result<()> {
        use rmcp::transport::streamable_http_server::{
            StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
        };
        let port = listener.local_addr()?.port();
        let config = StreamableHttpServerConfig::default().with_allowed_origins([
            format!("http://127.0.0.1:{port}"),
            format!("http://localhost:{port}"),
        ]);
        let host = self.clone();
        let service = StreamableHttpService::new(
            move || Ok(host.session()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        loop {
            let (stream, _) = listener.accept().await?;
            let service = hyper_util::service::TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await
                {
                    tracing::debug!("an MCP connection ended: {e}");
                }
            });
        }
    }
}

/// One MCP session: an rmcp server handler over its own agent context.
#[derive(Clone)]
pub struct McpServer {
    session: Arc<Session>,
}

struct Session {
    host: McpHost,
    prompter: Arc<McpPrompter>,
    tools: RwLock<Arc<Registry>>,
    executor: ExecutorHandle,
    routes: Arc<Mutex<HashMap<String, Route>>>,
    next_id: AtomicU64,
    /// Deferred tools that `tool_search` found in this session: listed
    /// from then on.
    found: Mutex<HashSet<String>>,
}

/// Where a call's result and progress go.
struct Route {
    result: oneshot::Sender<ToolResult>,
    progress: Option<Progress>,
}

struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    last: f64,
    count: f64,
}

impl McpServer {
    fn new(host: McpHost) -> McpServer {
        let base = host.tools.borrow().clone();
        let prompter = Arc::new(McpPrompter {
            peer: OnceLock::new(),
            fallback: base.clone(),
        });
        let airlock = base.with_prompter(prompter.clone());
        let cx: ToolContext = airlock.context();
        let tools = cx.tools().clone();
        let executor = Executor::session(airlock, cx);
        let routes: Arc<Mutex<HashMap<String, Route>>> = Arc::default();
        let handle = executor.handle();
        tokio::spawn(route_events(executor, routes.clone()));
        McpServer {
            session: Arc::new(Session {
                host,
                prompter,
                tools: RwLock::new(tools),
                executor: handle,
                routes,
                next_id: AtomicU64::new(1),
                found: Mutex::default(),
            }),
        }
    }

    fn tools(&self) -> Arc<Registry> {
        self.session
            .tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Session {
    /// Later calls see `airlock`'s tools.
    fn refresh(&self, airlock: Airlock) {
        let airlock = airlock.with_prompter(self.prompter.clone());
        *self.tools.write().unwrap_or_else(|e| e.into_inner()) = airlock.context().tools().clone();
        self.executor.refresh(airlock);
    }

    /// Records the deferred tools a `tool_search` result found; whether
    /// any is new (the listing changed).
    fn found_tools(&self, result: &ToolResult) -> bool {
        let Ok(output) = &result.outcome else {
            return false;
        };
        let mut found = lock(&self.found);
        let mut new = false;
        for block in &output.content {
            if let ContentBlock::ToolReference { name, .. } = block {
                new |= found.insert(name.clone());
            }
        }
        new
    }
}

/// What `tools/list` shows: every tool, except that a deferred tool is left
/// out until a search finds it (`tool_search`'s prompt names it; without
/// the search in view, the registry defers nothing).
fn listed<'r>(tools: &'r Registry, found: &HashSet<String>) -> Vec<&'r Arc<Entry>> {
    tools
        .entries()
        .into_iter()
        .filter(|e| {
            let d = e.descriptor();
            !d.defer_loading || found.contains(&d.name)
        })
        .collect()
}

impl Drop for Session {
    fn drop(&mut self) {
        self.executor.close();
    }
}

/// Reads the session executor's events: each result goes to the call that
/// waits for it, each progress event to its client when it asked for it.
async fn route_events(mut executor: Executor, routes: Arc<Mutex<HashMap<String, Route>>>) {
    while let Some(event) = executor.next().await {
        match event {
            ExecutorEvent::Result(result) => {
                let route = lock(&routes).remove(&result.id);
                if let Some(route) = route {
                    let _ = route.result.send(*result);
                }
            }
            ExecutorEvent::Progress(event) => {
                let note = lock(&routes)
                    .get_mut(&event.tool_use_id)
                    .and_then(|r| r.progress.as_mut())
                    .and_then(|p| p.next(&event));
                if let Some((peer, param)) = note {
                    let _ = peer.notify_progress(param).await;
                }
            }
            _ => {}
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Progress {
    /// The notification for `event`: the fraction done (of 1) when the
    /// tool says it, else a count of updates; none when the value would go
    /// backwards.
    fn next(
        &mut self,
        event: &ProgressEvent,
    ) -> Option<(Peer<RoleServer>, ProgressNotificationParam)> {
        self.count += 1.0;
        let (value, total) = match event.fraction {
            Some(f) => (f64::from(f.clamp(0.0, 1.0)), Some(1.0)),
            None => (self.last.max(self.count), None),
        };
        if value < self.last || (value == self.last && self.count > 1.0) {
            return None;
        }
        self.last = value;
        let mut param = ProgressNotificationParam::new(self.token.clone(), value)
            .with_message(event.message.clone());
        if let Some(total) = total {
            param = param.with_total(total);
        }
        Some((self.peer.clone(), param))
    }
}

/// Asks the MCP client's user through form elicitation when the client
/// supports it; otherwise the host's own prompter answers.
struct McpPrompter {
    peer: OnceLock<Peer<RoleServer>>,
    fallback: Airlock,
}

#[async_trait]
impl PermissionPrompter for McpPrompter {
    async fn ask(&self, request: &PermissionRequest) -> PermissionAnswer {
        let Some(peer) = self.peer.get().filter(|p| {
            p.supported_elicitation_modes()
                .contains(&ElicitationMode::Form)
        }) else {
            return self.fallback.prompter().ask(request).await;
        };
        let schema = ElicitationSchema::builder()
            .required_bool_property("allow", |b: BooleanSchema| {
                b.title("Allow this call").with_default(false)
            })
            .bool_property("always", |b: BooleanSchema| {
                b.title("Allow every later call of this tool in this session")
                    .with_default(false)
            })
            .build_unchecked();
        let message = format!(
            "airlock: {} wants to run ({}).\nInput: {}",
            request.tool_name,
            sanitize::clean_capped(&request.reason, Sink::Line, 300),
            sanitize::clean_capped(&request.input.to_string(), Sink::Line, 500),
        );
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        };
        let answer = peer
            .create_elicitation_with_timeout(params, Some(ELICITATION_TIMEOUT))
            .await;
        match answer {
            Ok(r) if r.action == ElicitationAction::Accept => {
                let content = r.content.unwrap_or_default();
                let yes = |k: &str| content.get(k).and_then(|v| v.as_bool()) == Some(true);
                match (yes("allow"), yes("always")) {
                    (true, true) => PermissionAnswer::AllowAlways,
                    (true, false) => PermissionAnswer::Allow,
                    _ => PermissionAnswer::Deny(Some("the user did not allow this call".into())),
                }
            }
            Ok(_) => PermissionAnswer::Deny(Some("the user declined this call".into())),
            Err(e) => PermissionAnswer::Deny(Some(format!(
                "asking the user failed ({e}); allow {} with a rule (permissions.allow) instead",
                request.tool_name
            ))),
        }
    }
}

/// The page of a list of `len` tools that `cursor` asks for: its start,
/// its end and the next page's cursor. A cursor is the index of the page's
/// first tool (the registry's order is stable); any other is an error.
fn page(len: usize, cursor: Option<&str>) -> Result<(usize, usize, Option<String>), ErrorData> {
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
fn mcp_tool(d: &Descriptor) -> Result<Tool, ErrorData> {
    serde_json::from_value(crate::adapters::mcp::tool_definition(d)).map_err(|e| {
        ErrorData::internal_error(format!("the tool {} cannot be listed: {e}", d.name), None)
    })
}

/// A result as MCP content: `isError` for every failure of the call; the
/// structured output also as text; the hooks' additional context after it.
fn mcp_result(result: ToolResult) -> CallToolResult {
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
            if let Some(structured) = &output.structured {
                content.push(McpContent::text(structured.to_string()));
            }
            let mut r = CallToolResult::success(content);
            r.structured_content = output.structured;
            r
        }
        Err(error) => CallToolResult::error(vec![McpContent::text(error.message)]),
    };
    r.content
        .extend(result.additional_context.into_iter().map(McpContent::text));
    r
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("airlock", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Airlock runs each tool in a WebAssembly sandbox, confined to the workspace and \
             the capabilities it was granted. Calls that need permission are asked about \
             through elicitation when the client supports it.",
        )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        // 2026-07-28 forbids server-to-client requests (elicitation) and
        // sends list_changed only on a subscription stream.
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let peer = context.peer;
        let _ = self.session.prompter.peer.set(peer.clone());
        let session: Weak<Session> = Arc::downgrade(&self.session);
        let mut tools = self.session.host.tools.clone();
        tools.mark_unchanged();
        tokio::spawn(async move {
            while tools.changed().await.is_ok() {
                let Some(session) = session.upgrade() else {
                    return;
                };
                session.refresh(tools.borrow_and_update().clone());
                drop(session);
                if peer.notify_tool_list_changed().await.is_err() {
                    return;
                }
            }
        });
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.tools();
        let entries = listed(&tools, &lock(&self.session.found));
        let cursor = request.and_then(|r| r.cursor);
        let (start, end, next) = page(entries.len(), cursor.as_deref())?;
        let listed = entries[start..end]
            .iter()
            .map(|e| mcp_tool(e.descriptor()))
            .collect::<Result<_, _>>()?;
        let mut result = ListToolsResult::with_all_items(listed);
        result.next_cursor = next;
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.tools().get(&request.name).is_none() {
            return Err(ErrorData::invalid_params(
                format!("there is no tool named {:?}", request.name),
                None,
            ));
        }
        let session = &self.session;
        let id = format!("mcp-{}", session.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        let progress = context.meta.get_progress_token().map(|token| Progress {
            peer: context.peer.clone(),
            token,
            last: 0.0,
            count: 0.0,
        });
        lock(&session.routes).insert(
            id.clone(),
            Route {
                result: tx,
                progress,
            },
        );
        let input = serde_json::Value::Object(request.arguments.unwrap_or_default());
        session
            .executor
            .add(ToolUse::new(id.clone(), request.name.as_ref(), input));
        tokio::select! {
            result = rx => match result {
                Ok(result) => {
                    if session.found_tools(&result) {
                        let _ = context.peer.notify_tool_list_changed().await;
                    }
                    Ok(mcp_result(result).into())
                }
                Err(_) => Err(ErrorData::internal_error("the session's executor stopped", None)),
            },
            () = context.ct.cancelled() => {
                session.executor.cancel(id);
                Err(ErrorData::new(ErrorCode::INTERNAL_ERROR, "cancelled by the client", None))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::SafetyFlags;

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
    fn structured_output_is_also_sent_as_text_and_failures_are_is_error() {
        let output = crate::tool::ToolOutput {
            structured: Some(serde_json::json!({"n": 1})),
            ..crate::tool::ToolOutput::text("one")
        };
        let mut output = output;
        output.content.push(ContentBlock::ResourceLink {
            uri: "file:///w/a.rs".into(),
            name: "a.rs".into(),
            description: None,
            mime_type: Some("text/x-rust".into()),
        });
        let mut result = ToolResult::failed("id", "t", crate::CallError::cancelled("unused"));
        result.outcome = Ok(output);
        result.additional_context = vec!["from a hook".into()];
        let ok = mcp_result(result);
        assert_eq!(ok.is_error, Some(false));
        assert_eq!(ok.structured_content, Some(serde_json::json!({"n": 1})));
        let texts: Vec<String> = ok
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect();
        assert_eq!(texts, ["one", r#"{"n":1}"#, "from a hook"]);
        let link = serde_json::to_value(&ok.content[1]).unwrap();
        assert_eq!(link["type"], "resource_link");
        assert_eq!(link["uri"], "file:///w/a.rs");
        assert_eq!(link["mimeType"], "text/x-rust");
        let failed = mcp_result(ToolResult::failed(
            "id",
            "t",
            crate::CallError::cancelled("stopped"),
        ));
        assert_eq!(failed.is_error, Some(true));
    }
}
