//! `airlock mcp`: every tool in view served over the Model Context
//! Protocol with rmcp's server side, on stdio or Streamable HTTP. It owns
//! the mapping of Airlock's descriptors, results, progress, log lines and
//! permission questions onto MCP, and nothing of a call's policy: each
//! session (the stdio connection, or one HTTP session) has its own agent
//! context and a session [`Executor`], so calls take the same pipeline and
//! scheduling rule as every other front end. Its invariants (one reply per
//! call, calls in the order received, log lines before results, resources
//! limited to the caller's own spilled results, tasks) are in ARCHITECTURE.md.

use airlock_host::Airlock;
use airlock_host::ContentBlock;
use airlock_host::Descriptor;
use airlock_host::LoadError;
use airlock_host::context_store::Contexts;
use airlock_host::pipeline::results::Owner;
use airlock_host::sanitize::{self, Sink};
use airlock_host::tool::ProgressEvent;
use airlock_host::{Entry, Registry, SourceStamp};
use airlock_host::{Executor, ExecutorEvent, ExecutorHandle, Submit, UseEvents};
use airlock_host::{PermissionAnswer, PermissionPrompter, PermissionRequest};
use airlock_host::{ToolResult, ToolUse};
use async_trait::async_trait;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientJsonRpcMessage,
    ClientNotification, ClientRequest, ContentBlock as McpContent, CustomRequest, CustomResult,
    ErrorCode, GetExtensions, GetMeta, Implementation, JsonRpcMessage, JsonRpcNotification,
    JsonRpcRequest, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, RequestId, Resource, ResourceContents,
    ServerCapabilities, ServerConfig, ServerJsonRpcMessage, SubscriptionFilter, Tool,
};
use rmcp::service::{
    ElicitationMode, NotificationContext, RequestContext, RxJsonRpcMessage, SubscriptionContext,
    TxJsonRpcMessage,
};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::transport::{Transport, WorkerTransport};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

mod admission;
mod asking;
pub mod auth;
mod callers;
mod lines;
mod rounds;
mod sse;
mod stateless;
#[cfg(target_os = "linux")]
mod stdio;
mod tasks;

pub use stateless::{CONTEXT_META, CONVERSATION_HEADER};

/// Tools per `tools/list` page, and resources per `resources/list` page.
const PAGE: usize = 100;

/// The MIME type of a spilled result (UTF-8 text).
const SPILLED_MIME: &str = "text/plain";

/// How often the tool directories are checked for changes.
const WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// How long a permission question waits for the user.
const ELICITATION_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a call waits for code the client just approved to be loaded.
const APPROVAL_WAIT: Duration = Duration::from_secs(5);

/// The path Streamable HTTP is served at.
const MCP_PATH: &str = "/mcp";

/// Liveness: 200 while the server answers.
const HEALTH_PATH: &str = "/health";

/// Readiness: 200 once every tool is compiled (a call need not wait for a
/// compile), 503 before.
const READY_PATH: &str = "/ready";

/// The first wait after a failed `accept`, doubled while it keeps failing.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);

/// The longest wait after a failed `accept`.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The host as the MCP sessions share it: the tools (replaced when the
/// tool directories change) and the policy.
///
/// ```no_run
/// # async fn example() -> anyhow::Result<()> {
/// use airlock_mcp::McpHost;
/// use airlock_host::{Airlock, Config};
///
/// let config = Config { workspace: Some("/path/to/project".into()), ..Config::default() };
/// let host = McpHost::new(Airlock::new(config).await?);
/// // Either one client on stdin/stdout…
/// host.serve_stdio().await?;
/// // …or many over Streamable HTTP at http://127.0.0.1:8123/mcp.
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8123").await?;
/// host.serve_http(listener, &airlock_mcp::HttpOptions::default()).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct McpHost {
    tools: watch::Receiver<Airlock>,
    /// The agent contexts of 2026-07-28 clients, by context id.
    contexts: Contexts,
    /// The order of 2026-07-28 calls in each context on this replica.
    lanes: Arc<stateless::Lanes>,
    /// The key 2026-07-28 `requestState` is sealed with.
    state_key: Arc<rounds::StateKey>,
    /// The changed code 2026-07-28 callers were asked about and answered
    /// (by caller and digest): each is asked once per change.
    offered: Arc<Mutex<HashSet<String>>>,
    /// Whether every tool listed before it was compiled is compiled (what
    /// `/ready` answers over HTTP).
    compiled: Arc<AtomicBool>,
}

impl McpHost {
    /// A host serving `airlock`'s tools, reloading them when a component
    /// file in its tool directories is added, changed or removed, and
    /// listing them anew once the tools [`Airlock::open`] listed before
    /// compiling them are compiled, if one described itself otherwise or
    /// failed ([`Airlock::settled`]). The
    /// airlock's prompter answers permission questions for clients that
    /// cannot be asked (elicitation).
    pub fn new(airlock: Airlock) -> McpHost {
        let config = airlock.config().clone();
        let contexts = Contexts::from_config(&config.contexts);
        let dirs = config.effective_tool_dirs();
        let mut stamp = SourceStamp::of(&config);
        let (tx, rx) = watch::channel(airlock.clone());
        let compiled = Arc::new(AtomicBool::new(false));
        let settling = compiled.clone();
        tokio::spawn(async move {
            // Tools listed before they were compiled (`Airlock::open`): one
            // that describes itself otherwise, or fails, is listed anew.
            let settled = airlock.settled().await;
            drop(airlock);
            if let Some(settled) = settled {
                tracing::info!("a tool changed or failed once compiled: tools listed again");
                if tx.send(settled).is_err() {
                    return;
                }
            }
            settling.store(true, Ordering::Release);
            if !dirs.is_empty() {
                loop {
                    tokio::time::sleep(WATCH_INTERVAL).await;
                    let now = SourceStamp::of(&config);
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
            }
        });
        McpHost {
            tools: rx,
            contexts,
            lanes: Arc::default(),
            state_key: Arc::default(),
            offered: Arc::default(),
            compiled,
        }
    }

    /// The tools, once `name` is among them or no component is left to
    /// list ([`Registry::unlisted`]): a call of a tool whose component was
    /// not compiled before waits for that compile, as a call of a tool
    /// listed before it was compiled does. Refused when the client cancels
    /// first.
    async fn listing(
        &self,
        name: &str,
        cancelled: &CancellationToken,
    ) -> Result<Airlock, ErrorData> {
        let mut tools = self.tools.clone();
        let listed = tools.wait_for(|airlock| {
            let registry = airlock.registry();
            registry.get(name).is_some() || registry.unlisted().is_empty()
        });
        tokio::select! {
            listed = listed => Ok(match listed {
                Ok(airlock) => airlock.clone(),
                Err(_) => self.tools.borrow().clone(),
            }),
            () = cancelled.cancelled() => Err(cancelled_by_client()),
        }
    }

    /// A new session (one per stdio connection or HTTP session).
    pub fn session(&self) -> McpServer {
        McpServer::new(self.clone())
    }

    /// Serves one session on stdin/stdout until stdin closes; the calls
    /// still in flight then are cancelled.
    pub async fn serve_stdio(&self) -> anyhow::Result<()> {
        #[cfg(target_os = "linux")]
        let (read, write) = stdio::streams();
        #[cfg(not(target_os = "linux"))]
        let (read, write) = rmcp::transport::stdio_pipes();
        let stdio = tasks::Stdio::new(read, write);
        let answering = Answering::new(stdio.lines());
        let known = answering.session.clone();
        let server = self.session();
        let running = match server
            .clone()
            .serve(Ordered::new(stdio).answering(answering))
            .await
        {
            Ok(running) => running,
            // stdin closed before any session began (a 2026-07-28 client,
            // which sends no `initialize`, that is done): a clean end.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let _ = known.set((server, running.peer().clone()));
        running.waiting().await?;
        Ok(())
    }

    /// Serves Streamable HTTP on `listener` at `/mcp`, a session (and an
    /// agent context) per client; requests whose `Origin` is not this
    /// server are refused (403). `/health` answers 200 while the server
    /// runs, `/ready` 200 once every tool is compiled and 503 before (for
    /// a load balancer's or Kubernetes' probes). Returns only on an error
    /// that is not a failed `accept`: those are logged and retried.
    pub async fn serve_http(
        &self,
        listener: tokio::net::TcpListener,
        options: &HttpOptions,
    ) -> anyhow::Result<()> {
        let port = listener.local_addr()?.port();
        let mut config = StreamableHttpServerConfig::default().with_allowed_origins([
            format!("http://127.0.0.1:{port}"),
            format!("http://localhost:{port}"),
        ]);
        config
            .allowed_hosts
            .extend(options.allowed_hosts.iter().cloned());
        let max_body = config.max_request_body_bytes;
        let mut local = LocalSessionManager::default();
        local.session_config.keep_alive = options.session_idle;
        let sessions = Arc::new(OrderedSessions {
            inner: Arc::new(local),
            live: Arc::default(),
            callers: Arc::default(),
        });
        let host = self.clone();
        let service =
            StreamableHttpService::new(move || Ok(host.session()), sessions.clone(), config);
        let front = Arc::new(HttpFront {
            service,
            sessions,
            compiled: self.compiled.clone(),
            max_body,
            max_sessions: options.max_sessions.max(1),
            auth: options.auth.clone(),
            tools: self.tools.clone(),
            max_caller_sessions: options
                .max_caller_sessions
                .unwrap_or_else(|| default_caller_sessions(options.max_sessions)),
        });
        let admission = admission::Admission::new(options.max_connections);
        let header_timeout = options.header_timeout;
        let mut backoff = ACCEPT_BACKOFF_MIN;
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    stream
                }
                Err(e) => {
                    tracing::warn!(
                        "accepting an MCP connection failed ({e}); retrying in {} ms",
                        backoff.as_millis()
                    );
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    continue;
                }
            };
            // Each reply is written as a few small segments: without this,
            // every one after the first waits for the client's delayed ACK.
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY on an MCP connection: {e}");
            }
            let connection = Arc::new(admission.admit());
            let front = front.clone();
            tokio::spawn(async move {
                let served = connection.clone();
                let service = hyper::service::service_fn(move |request| {
                    let front = front.clone();
                    let connection = served.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(front.handle(request, &connection).await)
                    }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let serving = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(header_timeout)
                    .serve_connection(io, service);
                tokio::select! {
                    served = serving => if let Err(e) = served {
                        tracing::debug!("an MCP connection ended: {e}");
                    },
                    () = connection.evicted() => {}
                }
            });
        }
    }
}

/// The limits of [`McpHost::serve_http`].
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Connections served at once once they have sent a request the
    /// server takes; a connection that would be one more waits until one
    /// closes. Connections that have not (yet) sent one have a bound of
    /// their own (as many, at most 256), past which the oldest is closed.
    pub max_connections: usize,
    /// How long a request's head may take to arrive, counted from the
    /// connection's start or its previous reply: a connection silent (or
    /// slow) that long is closed.
    pub header_timeout: Duration,
    /// How long a session may go without a request before it ends
    /// (`None`: never).
    pub session_idle: Option<Duration>,
    /// Sessions open at once; a client that would open one more gets a
    /// 503 with a JSON-RPC error saying so (each session holds an agent
    /// context, and an executor once it makes a call).
    pub max_sessions: usize,
    /// Sessions one caller (a token's subject and client) may have open
    /// at once, when access tokens are required; `None`: a quarter of
    /// `max_sessions` (at least one). Without tokens callers are not
    /// told apart.
    pub max_caller_sessions: Option<usize>,
    /// Host names clients may reach the server by (the `Host` header),
    /// beside the loopback names: a load balancer's or a Service's. Any
    /// other gets 403 (a DNS rebinding defence).
    pub allowed_hosts: Vec<String>,
    /// The access tokens `/mcp` requires, when it requires any
    /// ([`auth::Authenticator`]).
    pub auth: Option<Arc<auth::Authenticator>>,
}

impl Default for HttpOptions {
    /// 1024 connections, 1024 sessions; a request's head within 30 s;
    /// sessions end after 5 minutes idle.
    fn default() -> HttpOptions {
        HttpOptions {
            max_connections: 1024,
            header_timeout: Duration::from_secs(30),
            session_idle: Some(Duration::from_secs(300)),
            max_sessions: 1024,
            max_caller_sessions: None,
            allowed_hosts: Vec::new(),
            auth: None,
        }
    }
}

type HttpBody = http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>;

/// What stands between a connection and rmcp's Streamable HTTP service:
/// the path, an unknown session's `DELETE`, and a body that is no JSON-RPC
/// message get the answers the protocol asks for, and a request's reply is
/// one JSON object when it can be ([`sse::reply`]).
struct HttpFront {
    service: StreamableHttpService<McpServer, OrderedSessions>,
    sessions: Arc<OrderedSessions>,
    compiled: Arc<AtomicBool>,
    max_body: usize,
    max_sessions: usize,
    auth: Option<Arc<auth::Authenticator>>,
    /// The host's tools, for the scopes a call needs.
    tools: watch::Receiver<Airlock>,
    /// Sessions one caller may have open at once, with auth.
    max_caller_sessions: usize,
}

impl HttpFront {
    async fn handle(
        &self,
        request: http::Request<hyper::body::Incoming>,
        connection: &admission::Connection,
    ) -> http::Response<HttpBody> {
        if self.auth.is_none() {
            connection.establish().await;
        }
        let path = request.uri().path();
        if let Some(auth) = &self.auth
            && auth.metadata_paths().iter().any(|p| p == path)
        {
            return json_response(http::StatusCode::OK, &auth.metadata());
        }
        match path {
            MCP_PATH => {}
            HEALTH_PATH => return plain(http::StatusCode::OK, "ok"),
            READY_PATH if self.compiled.load(Ordering::Acquire) => {
                return plain(http::StatusCode::OK, "ready");
            }
            READY_PATH => {
                return plain(
                    http::StatusCode::SERVICE_UNAVAILABLE,
                    "Service Unavailable: the tools are still being compiled",
                );
            }
            _ => {
                return plain(
                    http::StatusCode::NOT_FOUND,
                    "Not Found: the MCP endpoint is /mcp (and /health, /ready for probes)",
                );
            }
        }
        let mut request = request;
        let mut caller = None;
        if let Some(auth) = &self.auth {
            let checked = auth
                .check(request.headers().get(http::header::AUTHORIZATION))
                .await;
            match checked {
                Ok(identity) => {
                    connection.establish().await;
                    // The token goes no further than this check.
                    request.headers_mut().remove(http::header::AUTHORIZATION);
                    caller = Some(identity.key());
                    if let Some(view) = auth.view(&identity) {
                        request.extensions_mut().insert(view);
                    }
                    request.extensions_mut().insert(identity);
                }
                Err(rejection) => return refused(auth, &rejection),
            }
        }
        let session = request
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // A session is its opener's: another caller's token does not
        // reach it (nor learns that it exists), and a session whose opener
        // was never recorded (its client left before the reply) is no one's.
        if let (Some(caller), Some(session)) = (&caller, &session)
            && !self.sessions.callers.opened(session, caller)
        {
            return plain(http::StatusCode::NOT_FOUND, "Not Found: Session not found");
        }
        match *request.method() {
            http::Method::POST => self.post(request, caller.as_deref()).await,
            http::Method::DELETE => self.delete(request).await,
            _ => self.service.handle(request).await,
        }
    }

    /// The first `tools/call` in `body` (a message or a batch) of a tool
    /// `view` does not give and a tool scope would: the tool's name and
    /// that scope. A tool no scope gives is left to be answered as one
    /// that does not exist, which to this caller it is.
    fn outside_view(
        &self,
        body: &[u8],
        view: &auth::ToolView,
        auth: &auth::Authenticator,
    ) -> Option<(String, String)> {
        let message: serde_json::Value = serde_json::from_slice(body).ok()?;
        let messages = match &message {
            serde_json::Value::Array(batch) => batch.iter().collect(),
            one => vec![one],
        };
        let airlock = self.tools.borrow();
        messages
            .into_iter()
            .filter(|m| m["method"] == "tools/call")
            .filter_map(|m| airlock.registry().get(m["params"]["name"].as_str()?))
            .filter(|entry| !view.allows(entry.descriptor()))
            .find_map(|entry| {
                let scope = auth.scope_for(entry.descriptor())?;
                Some((entry.descriptor().name.clone(), scope.to_string()))
            })
    }

    /// rmcp answers 202 to a `DELETE` of any session: once rmcp's own
    /// checks (such as the `Origin`) passed, a known one is 204 (what MCP
    /// clients expect) and an unknown one 404.
    async fn delete(
        &self,
        request: http::Request<hyper::body::Incoming>,
    ) -> http::Response<HttpBody> {
        let id = request
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(|id| SessionId::from(id.to_owned()));
        let known = match &id {
            Some(id) => self.sessions.inner.has_session(id).await.unwrap_or(false),
            None => true,
        };
        let mut response = self.service.handle(request).await;
        if response.status() == http::StatusCode::ACCEPTED {
            if !known {
                return plain(http::StatusCode::NOT_FOUND, "Not Found: Session not found");
            }
            *response.status_mut() = http::StatusCode::NO_CONTENT;
        }
        response
    }

    /// rmcp answers 415 to a JSON body it cannot read as a message: that is
    /// a JSON-RPC parse error (-32700) or invalid request (-32600), status
    /// 400.
    async fn post(
        &self,
        request: http::Request<hyper::body::Incoming>,
        caller: Option<&str>,
    ) -> http::Response<HttpBody> {
        use http_body_util::BodyExt;
        let (mut parts, body) = request.into_parts();
        let json = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                let essence = v.split_once(';').map_or(v, |(essence, _)| essence);
                essence.trim().eq_ignore_ascii_case("application/json")
            });
        let bytes = match http_body_util::Limited::new(body, self.max_body)
            .collect()
            .await
        {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return plain(
                    http::StatusCode::PAYLOAD_TOO_LARGE,
                    &format!(
                        "Payload Too Large: the body exceeds {} bytes",
                        self.max_body
                    ),
                );
            }
            Err(e) => {
                return plain(
                    http::StatusCode::BAD_REQUEST,
                    &format!("Bad Request: the body could not be read: {e}"),
                );
            }
        };
        // rmcp's types drop a call's `task`: it goes along in the request's
        // extensions, which rmcp hands on with the message.
        if let Some(task) = tasks::requested(&bytes) {
            parts.extensions.insert(task);
        }
        // A call of a tool the caller's scopes do not give, and another
        // scope would, is refused here, naming that scope (step-up
        // authorization).
        if let (Some(auth), Some(view)) = (&self.auth, parts.extensions.get::<auth::ToolView>())
            && let Some((tool, scope)) = self.outside_view(&bytes, view, auth)
        {
            let text = format!(
                "Forbidden: calling `{tool}` needs the scope `{scope}`, which the token lacks"
            );
            let response = plain(http::StatusCode::FORBIDDEN, &text);
            return challenged(auth, &auth.step_up(&scope), response);
        }
        // A request without a session may open one: it takes a place
        // under its caller's share and under the cap first, given back
        // unless a session was opened (then when the session ends), also
        // when the client leaves before the answer.
        let opens = !parts.headers.contains_key("mcp-session-id") && opens_session(&bytes);
        let place = match opens {
            true => match self.take_place(caller) {
                Ok(place) => Some(place),
                Err(cap) => return too_many_sessions(&bytes, cap),
            },
            false => None,
        };
        let request = http::Request::from_parts(parts, http_body_util::Full::new(bytes.clone()));
        let response = self.service.handle(request).await;
        if let Some(mut place) = place
            && let Some(opened) = response.headers().get("mcp-session-id")
        {
            place.kept = true;
            if let (Ok(id), Some(caller)) = (opened.to_str(), caller) {
                self.sessions.bind(id, caller).await;
            }
        }
        if json && response.status() == http::StatusCode::UNSUPPORTED_MEDIA_TYPE {
            return unreadable_message(&bytes);
        }
        let streams = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        match sse::request_id(&bytes) {
            Some(id) if streams && response.status() == http::StatusCode::OK => {
                sse::reply(response, id).await
            }
            _ => response,
        }
    }
}

/// A place under the session caps, taken by a request that may open a
/// session: given back when dropped, unless `kept` (a session opened in it,
/// whose end gives it back).
struct Place<'a> {
    sessions: &'a OrderedSessions,
    caller: Option<&'a str>,
    kept: bool,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if !self.kept {
            self.sessions.live.fetch_sub(1, Ordering::SeqCst);
            if let Some(caller) = self.caller {
                self.sessions.callers.unreserve(caller);
            }
        }
    }
}

impl HttpFront {
    /// A place for a session `caller` may open: under its share (with
    /// auth), then under the server's cap; else the cap it met.
    fn take_place<'a>(&'a self, caller: Option<&'a str>) -> Result<Place<'a>, SessionCap> {
        let callers = &self.sessions.callers;
        if let Some(caller) = caller
            && !callers.reserve(caller, self.max_caller_sessions)
        {
            return Err(SessionCap::Caller(self.max_caller_sessions));
        }
        let max = self.max_sessions;
        if self
            .sessions
            .live
            .try_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .is_err()
        {
            if let Some(caller) = caller {
                callers.unreserve(caller);
            }
            return Err(SessionCap::Server(max));
        }
        Ok(Place {
            sessions: &self.sessions,
            caller,
            kept: false,
        })
    }
}

/// A plain-text response.
fn plain(status: http::StatusCode, text: &str) -> http::Response<HttpBody> {
    use http_body_util::BodyExt;
    let mut response =
        http::Response::new(http_body_util::Full::new(bytes::Bytes::from(text.to_owned())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Who sent the request `context` belongs to, when the server requires
/// access tokens ([`auth::Authenticator`]).
pub(crate) fn identity(context: &RequestContext<RoleServer>) -> Option<&auth::Identity> {
    context
        .extensions
        .get::<http::request::Parts>()?
        .extensions
        .get::<auth::Identity>()
}

/// The tools the request's caller may see and call, when its scopes
/// decide ([`auth::ToolView`]).
fn tool_view(context: &RequestContext<RoleServer>) -> Option<&auth::ToolView> {
    context
        .extensions
        .get::<http::request::Parts>()?
        .extensions
        .get::<auth::ToolView>()
}

/// `airlock` with only the tools `view` gives (all of them without one):
/// `tool_search` in it names and finds only those.
fn narrowed(airlock: Airlock, view: Option<&auth::ToolView>) -> Airlock {
    match view {
        Some(view) => airlock.view(|d| view.allows(d)),
        None => airlock,
    }
}

/// `value` as a JSON response.
fn json_response(status: http::StatusCode, value: &serde_json::Value) -> http::Response<HttpBody> {
    let mut response = plain(status, &value.to_string());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The 401 (no token, or one that does not verify) or 403 (a valid token
/// without the scopes needed) for a request `auth` refused, with the
/// challenge that tells the client where to get a token.
fn refused(auth: &auth::Authenticator, rejection: &auth::Rejection) -> http::Response<HttpBody> {
    let (status, text) = match rejection {
        auth::Rejection::Missing => (
            http::StatusCode::UNAUTHORIZED,
            "Unauthorized: this server needs an OAuth access token (Authorization: Bearer)"
                .to_string(),
        ),
        auth::Rejection::Malformed(why) => {
            (http::StatusCode::BAD_REQUEST, format!("Bad Request: {why}"))
        }
        auth::Rejection::Invalid(why) => (
            http::StatusCode::UNAUTHORIZED,
            format!("Unauthorized: {why}"),
        ),
        auth::Rejection::InsufficientScope(_) => (
            http::StatusCode::FORBIDDEN,
            "Forbidden: the token lacks a scope this server needs".to_string(),
        ),
    };
    challenged(auth, rejection, plain(status, &text))
}

/// `response` with the challenge for `rejection`, which tells the client
/// where to get a token and which scopes to ask for.
fn challenged(
    auth: &auth::Authenticator,
    rejection: &auth::Rejection,
    mut response: http::Response<HttpBody>,
) -> http::Response<HttpBody> {
    if let Ok(challenge) = http::HeaderValue::from_str(&auth.challenge(rejection)) {
        response
            .headers_mut()
            .insert(http::header::WWW_AUTHENTICATE, challenge);
    }
    response
}

/// The JSON-RPC error (status 503) for a request that would open a session
/// over the cap.
/// Which cap on sessions a client that would open one more met.
enum SessionCap {
    /// `--max-sessions`: the server's.
    Server(usize),
    /// `--max-sessions-per-caller`: its caller's share.
    Caller(usize),
}

fn too_many_sessions(body: &[u8], cap: SessionCap) -> http::Response<HttpBody> {
    let id = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .filter(|id| id.is_string() || id.is_number())
        .unwrap_or_default();
    let message = match cap {
        SessionCap::Server(max) => format!(
            "this server has {max} MCP sessions open, its limit (`airlock mcp --max-sessions`): \
             end one (DELETE /mcp), or retry when an idle one has expired"
        ),
        SessionCap::Caller(max) => format!(
            "this caller has {max} MCP sessions open, the most one caller may have \
             (`airlock mcp --max-sessions-per-caller`): end one (DELETE /mcp), or retry when an \
             idle one has expired"
        ),
    };
    let mut response = json_error(id, -32000, &message);
    *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
    response.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("5"),
    );
    response
}

/// Whether `body` may open a session: it holds an `initialize` request
/// (alone or in a batch), or cannot be read (rmcp answers it, and it
/// takes a place meanwhile, as any request that may open one). A
/// 2026-07-28 request, which opens none, takes no place under the caps.
fn opens_session(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Method {
        method: Option<String>,
    }
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Body {
        One(Method),
        Batch(Vec<Method>),
    }
    let initialize = |m: &Method| m.method.as_deref() == Some("initialize");
    match serde_json::from_slice::<Body>(body) {
        Ok(Body::One(m)) => initialize(&m),
        Ok(Body::Batch(batch)) => batch.iter().any(initialize),
        Err(_) => true,
    }
}

/// The sessions one caller may have open when the operator names no
/// number: a quarter of the server's (at least one).
fn default_caller_sessions(max_sessions: usize) -> usize {
    (max_sessions / 4).max(1)
}

/// A JSON-RPC error response (status 400 until the caller changes it).
fn json_error(id: serde_json::Value, code: i32, message: &str) -> http::Response<HttpBody> {
    use http_body_util::BodyExt;
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message},
    });
    let mut response = http::Response::new(
        http_body_util::Full::new(bytes::Bytes::from(body.to_string())).boxed(),
    );
    *response.status_mut() = http::StatusCode::BAD_REQUEST;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The JSON-RPC error (status 400) for a body that is not JSON (-32700) or
/// JSON that is not a message this server reads (-32600).
fn unreadable_message(body: &[u8]) -> http::Response<HttpBody> {
    let (code, message, id) = match serde_json::from_slice::<serde_json::Value>(body) {
        Err(e) => (
            ErrorCode::PARSE_ERROR,
            format!("Parse error: the body is not JSON ({e})"),
            serde_json::Value::Null,
        ),
        Ok(value) => (
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: the body is not a JSON-RPC message this server reads".to_owned(),
            value
                .get("id")
                .filter(|id| id.is_string() || id.is_number())
                .cloned()
                .unwrap_or_default(),
        ),
    };
    json_error(id, code.0, &message)
}

/// rmcp's in-memory sessions, each one's transport [`Ordered`]. A session
/// that ended (idle too long) is forgotten as soon as it ends, so a request
/// for it is 404 at once instead of waiting for rmcp's own shutdown of the
/// session (up to 5 s).
struct OrderedSessions {
    inner: Arc<LocalSessionManager>,
    /// Sessions open, and places taken by requests that may open one.
    live: Arc<AtomicUsize>,
    /// Who opened each session, with auth.
    callers: Arc<callers::Callers>,
}

impl OrderedSessions {
    /// The session `id`, just opened in a place `caller` reserved. A
    /// session that ended before this is freed here (its end found no
    /// opener to free).
    async fn bind(&self, id: &str, caller: &str) {
        self.callers.bind(id, caller);
        let session = SessionId::from(id.to_owned());
        if !self.inner.has_session(&session).await.unwrap_or(false) {
            self.callers.end(id);
        }
    }
}

impl SessionManager for OrderedSessions {
    type Error = LocalSessionManagerError;
    type Transport = Ordered<WorkerTransport<LocalSessionWorker>>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        let transport = Ordered::new(transport);
        let (sessions, ended, forget) = (self.inner.clone(), transport.closed.clone(), id.clone());
        let (live, callers) = (self.live.clone(), self.callers.clone());
        tokio::spawn(async move {
            ended.cancelled().await;
            live.fetch_sub(1, Ordering::SeqCst);
            if let Err(e) = sessions.close_session(&forget).await {
                tracing::debug!("forgetting an ended MCP session failed: {e}");
            }
            // After the close: a binding that comes later sees the
            // session gone and frees its place itself.
            callers.end(forget.as_ref());
        });
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>
    {
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>
    {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl futures::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>
    {
        self.inner.resume(id, last_event_id).await
    }
}

/// A connection's transport that gives each `tools/call` request, as it
/// is received, its turn (and the connection's end, [`Received`]): rmcp
/// handles each request in a task of its own, and those tasks start in no
/// particular order, so the turn is what keeps calls in the client's order.
/// A call keeps its place in the executor until its reply is written
/// ([`Replies`]). When the peer closes the connection, the end is
/// signalled. It is also where MCP tasks meet rmcp: calls run as tasks and
/// `tasks/*` requests are turned into custom requests (`tasks::divert`),
/// and replies get what rmcp's types lack (`tasks::shape`).
struct Ordered<T> {
    inner: T,
    turns: Arc<Mutex<Turns>>,
    replies: Replies<UseEvents>,
    closed: CancellationToken,
    answering: Option<Answering>,
}

impl<T> Ordered<T> {
    fn new(inner: T) -> Ordered<T> {
        Ordered {
            inner,
            turns: Arc::default(),
            replies: Replies::default(),
            closed: CancellationToken::new(),
            answering: None,
        }
    }

    /// Plain calls are answered outside rmcp's serve loop ([`Answering`]).
    fn answering(mut self, answering: Answering) -> Ordered<T> {
        self.answering = Some(answering);
        self
    }
}

impl<T> Drop for Ordered<T> {
    /// However the connection's service ended, its end is signalled (a
    /// session's place under the cap is given back on it).
    fn drop(&mut self) {
        self.closed.cancel();
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Ordered<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        tasks::shape(&mut item);
        let id = match &item {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        let held = id.and_then(|id| self.replies.close(id));
        let sent = self.inner.send(item);
        async move {
            let sent = sent.await;
            drop(held);
            sent
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let message = self.receive_one().await;
            return match (&self.answering, message) {
                (Some(answering), Some(JsonRpcMessage::Request(request))) => {
                    match answering.answer(request, &self.closed, &self.replies) {
                        None => continue,
                        Some(request) => Some(JsonRpcMessage::Request(request)),
                    }
                }
                (_, message) => message,
            };
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

impl<T: Transport<RoleServer>> Ordered<T> {
    /// The next message, a call given its turn.
    async fn receive_one(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let mut message = self.inner.receive().await;
        match &mut message {
            Some(JsonRpcMessage::Request(JsonRpcRequest { request, id, .. })) => {
                if let ClientRequest::CallToolRequest(call) = request {
                    let number = {
                        let mut turns = lock(&self.turns);
                        turns.received += 1;
                        turns.received - 1
                    };
                    let turn = Turn(Arc::new(TurnInner {
                        number,
                        turns: self.turns.clone(),
                        taken: AtomicBool::new(false),
                    }));
                    self.replies.open(id.clone());
                    call.extensions_mut().insert(Received {
                        turn,
                        id: id.clone(),
                        replies: self.replies.clone(),
                        closed: self.closed.clone(),
                    });
                }
                // A listen ends with its connection, not after rmcp's wait
                // for the replies in flight.
                if let ClientRequest::SubscriptionsListenRequest(listen) = request {
                    listen.extensions.insert(Closed(self.closed.clone()));
                }
                tasks::divert(request);
            }
            // rmcp drops the reply of a call the client cancelled.
            Some(JsonRpcMessage::Notification(JsonRpcNotification {
                notification: ClientNotification::CancelledNotification(cancelled),
                ..
            })) => {
                if let Some(id) = &cancelled.params.request_id {
                    drop(self.replies.close(id));
                    if let Some(answering) = &self.answering {
                        answering.cancel(id);
                    }
                }
            }
            Some(_) => {}
            None => self.closed.cancel(),
        }
        message
    }
}

/// Plain `tools/call` requests answered outside rmcp's serve loop (on
/// stdio). rmcp runs a request in a task of its own, sends the handler's
/// reply back to its loop, and spawns a task there to write it: with the
/// writer's, five task hand-offs after the read, more than the three Tokio
/// runs in a row on one worker, so the rest went through its run queue,
/// waking the other worker for them. Here the call's own task runs the same handler (`Service::handle_request`, so the
/// reply is shaped as rmcp shapes it) and queues its reply on the output
/// itself. A call that names its protocol version in `_meta` (2026-07-28,
/// served statelessly) or arrives before the session's peer is known goes
/// through rmcp. Progress, log lines and questions go through the peer as
/// before, each handed to the output before the call goes on, so before
/// its reply.
struct Answering {
    /// The session's server and its peer, once `initialize` was answered.
    session: Arc<OnceLock<(McpServer, Peer<RoleServer>)>>,
    lines: lines::LineSender,
    /// The calls being answered here, by id, and what cancels each.
    calls: Arc<Mutex<HashMap<RequestId, CancellationToken>>>,
}

impl Answering {
    fn new(lines: lines::LineSender) -> Answering {
        Answering {
            session: Arc::default(),
            lines,
            calls: Arc::default(),
        }
    }

    /// Starts answering `request` if it is a plain call and the session is
    /// known; else gives it back, for rmcp. `closed` is the connection's end
    /// (which cancels the call), `replies` where its place is kept until
    /// its reply is written.
    fn answer(
        &self,
        request: JsonRpcRequest<ClientRequest>,
        closed: &CancellationToken,
        replies: &Replies<UseEvents>,
    ) -> Option<JsonRpcRequest<ClientRequest>> {
        let plain = matches!(request.request, ClientRequest::CallToolRequest(_))
            && request.request.get_meta().protocol_version().is_none();
        let Some((server, peer)) = self.session.get().filter(|_| plain) else {
            return Some(request);
        };
        let JsonRpcRequest {
            id,
            request: mut call,
            ..
        } = request;
        let ct = closed.child_token();
        lock(&self.calls).insert(id.clone(), ct.clone());
        let mut context = RequestContext::new(id.clone(), peer.clone());
        context.ct = ct.clone();
        std::mem::swap(&mut context.meta, call.get_meta_mut());
        std::mem::swap(&mut context.extensions, call.extensions_mut());
        let server = server.clone();
        let calls = self.calls.clone();
        let lines = self.lines.clone();
        let replies = replies.clone();
        let closed = closed.clone();
        // Boxed, so making the task and ending it move a pointer, not the
        // whole future (copied four times otherwise).
        tokio::spawn(Box::pin(async move {
            let result = rmcp::Service::handle_request(&server, call, context).await;
            ct.cancel();
            // A call the client cancelled gets no reply (as from rmcp).
            let cancelled = lock(&calls).remove(&id).is_none();
            let held = replies.close(&id);
            if cancelled {
                return;
            }
            let mut reply = match result {
                Ok(result) => ServerJsonRpcMessage::response(result, id),
                Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
            };
            tasks::shape(&mut reply);
            let sent = match tasks::line_of(&reply) {
                Ok(line) => lines.send(line).await,
                Err(e) => Err(e),
            };
            match sent {
                Ok(()) => {}
                // stdin closed: the output may be closed first.
                Err(e) if closed.is_cancelled() => {
                    tracing::debug!("a reply after the connection ended: {e}")
                }
                Err(e) => tracing::error!("writing a reply failed: {e}"),
            }
            drop(held);
        }));
        None
    }

    /// The client cancelled call `id`: if it is answered here, it stops.
    fn cancel(&self, id: &RequestId) {
        if let Some(ct) = lock(&self.calls).remove(id) {
            ct.cancel();
        }
    }
}

/// Cancelled when the connection a request came on ends.
#[derive(Clone)]
struct Closed(CancellationToken);

/// What a `tools/call` request carries from [`Ordered`] to the handler.
#[derive(Clone)]
struct Received {
    turn: Turn,
    /// The request's id, and where its events are held until its reply
    /// is written.
    id: RequestId,
    replies: Replies<UseEvents>,
    /// Cancelled when the connection ends.
    closed: CancellationToken,
}

impl Received {
    /// Keeps the call's `events` (submitted held) until its reply is
    /// written: dropped at once if it already was, or will never be.
    fn hold_until_written(&self, events: UseEvents) {
        self.replies.hold(&self.id, events);
    }
}

/// The calls a connection received whose replies are not yet written,
/// each with what keeps its place in the executor once its handler has
/// its result (its events, submitted held). That is given up once the
/// reply is written, when the client cancels the call (rmcp then drops
/// its reply) or when the connection ends: so a call that could not start
/// beside it starts only then, and its reply never goes out first, however
/// late the task that returns this one's reply to rmcp runs.
struct Replies<H>(Arc<Mutex<HashMap<RequestId, Option<H>>>>);

impl<H> Clone for Replies<H> {
    fn clone(&self) -> Self {
        Replies(self.0.clone())
    }
}

impl<H> Default for Replies<H> {
    fn default() -> Self {
        Replies(Arc::default())
    }
}

impl<H> Replies<H> {
    /// A call with this id was received.
    fn open(&self, id: RequestId) {
        // A call whose id the client reused lets go of what it held.
        let reused = lock(&self.0).insert(id, None);
        drop(reused);
    }

    /// Keeps `held` until call `id`'s reply is written; lets go of it at
    /// once if the call is over.
    fn hold(&self, id: &RequestId, held: H) {
        let over = match lock(&self.0).get_mut(id) {
            Some(slot) => {
                *slot = Some(held);
                None
            }
            None => Some(held),
        };
        drop(over);
    }

    /// Call `id` is over: what it held, to be let go of.
    fn close(&self, id: &RequestId) -> Option<H> {
        lock(&self.0).remove(id).flatten()
    }
}

/// Which turn comes next on a connection; turns given up before their time
/// (a request that never reached the executor) are skipped when it comes.
/// Only the request whose turn comes is woken: with many calls in flight,
/// waking every waiter at each turn cost each call a pass over the others.
#[derive(Default)]
struct Turns {
    /// How many calls the connection received: the next one's number.
    received: u64,
    next: u64,
    given_up: BTreeSet<u64>,
    waiting: HashMap<u64, oneshot::Sender<()>>,
}

impl Turns {
    fn done(&mut self, number: u64) {
        self.waiting.remove(&number);
        if number != self.next {
            self.given_up.insert(number);
            return;
        }
        self.next += 1;
        while self.given_up.remove(&self.next) {
            self.next += 1;
        }
        if let Some(waiting) = self.waiting.remove(&self.next) {
            let _ = waiting.send(());
        }
    }
}

/// One request's turn: [`Turn::wait`] returns once every earlier request
/// took or gave up its own; taking it ([`Turn::take`], or dropping the
/// last clone) lets the next one go.
#[derive(Clone)]
struct Turn(Arc<TurnInner>);

struct TurnInner {
    number: u64,
    turns: Arc<Mutex<Turns>>,
    taken: AtomicBool,
}

impl Turn {
    async fn wait(&self) {
        let number = self.0.number;
        let woken = {
            let mut turns = lock(&self.0.turns);
            if turns.next == number {
                return;
            }
            let (wake, woken) = oneshot::channel();
            let earlier = turns.waiting.insert(number, wake);
            debug_assert!(earlier.is_none(), "turn {number} is waited for once");
            woken
        };
        // Sent when this turn comes; dropped unsent only once this turn
        // was taken or given up (through a clone), so it is over either way.
        let _ = woken.await;
    }

    fn take(&self) {
        self.0.take();
    }

    /// Whether the connection received a call after this one.
    fn followed(&self) -> bool {
        lock(&self.0.turns).received > self.0.number + 1
    }
}

impl TurnInner {
    fn take(&self) {
        if !self.taken.swap(true, Ordering::AcqRel) {
            lock(&self.turns).done(self.number);
        }
    }
}

impl Drop for TurnInner {
    fn drop(&mut self) {
        self.take();
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
    /// The session's executor, started by its first call (a 2026-07-28
    /// request is served by a server of its own and never needs one).
    executor: OnceLock<ExecutorHandle>,
    /// The start of this session's tool-use ids, unique to it (a spilled
    /// result is saved under its call's id); also the name its context's
    /// saved results are kept under (`ToolContext::set_results_key`).
    id_prefix: String,
    next_id: AtomicU64,
    /// Deferred tools that `tool_search` found in this session: listed
    /// from then on.
    found: Mutex<HashSet<String>>,
    /// Changed code (digests) this session was already asked to approve.
    offered: Mutex<HashSet<String>>,
    /// The least severe log line sent to this session (a rank of
    /// [`logging`]), shared with the router.
    log_level: AtomicU8,
    /// The spilled results this session was given as resource links.
    given: Mutex<Given>,
    /// The tools the scopes of the session's latest request give (`None`:
    /// every tool): its list, its executor and so `tool_search` see only
    /// those, and a session that steps up to more scopes sees more.
    view: Mutex<Option<auth::ToolView>>,
    /// The calls this session asked to run as tasks.
    tasks: tasks::Tasks,
}

/// The resources a session was given: the links in the order given, and
/// each one's file and the name of the context it was saved in
/// (`ToolContext::results_key`), by URI.
#[derive(Default)]
struct Given {
    links: Vec<Resource>,
    paths: HashMap<String, (String, String)>,
}

/// A call's progress notifications: its token and what was sent.
struct Progress {
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
        let tools = base.context().tools().clone();
        McpServer {
            session: Arc::new(Session {
                host,
                prompter,
                tools: RwLock::new(tools),
                executor: OnceLock::new(),
                id_prefix: unique_prefix(),
                next_id: AtomicU64::new(1),
                found: Mutex::default(),
                offered: Mutex::default(),
                log_level: AtomicU8::new(logging::DEFAULT),
                given: Mutex::default(),
                view: Mutex::default(),
                tasks: tasks::Tasks::default(),
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

    /// The change of `tool`'s code held for approval, if any: the code
    /// approved before runs until the new code is approved.
    fn held_change(&self, tool: &str) -> Option<HeldChange> {
        // On every call: nothing is allocated or read unless some change
        // is held.
        let airlock = self.session.host.tools.borrow();
        let mut held = airlock
            .registry()
            .failures()
            .iter()
            .filter_map(|f| match &f.error {
                LoadError::Unapproved { name, was, now } => Some((name, was, now)),
                _ => None,
            })
            .peekable();
        held.peek()?;
        let tools = self.tools();
        let entry = tools.get(tool)?;
        let (name, was, now) = held.find(|(name, _, _)| **name == entry.descriptor().name)?;
        Some(HeldChange {
            name: name.clone(),
            was: was.clone(),
            now: now.clone(),
            file: airlock.config().effective_approvals_file()?,
        })
    }

    /// When the component of `tool` changed under the server and its new
    /// code is not approved (the code approved before still runs), asks the
    /// client once per change whether to approve it, showing what changed;
    /// approved, the new code is recorded and served from this call on.
    async fn offer_changed_code(&self, tool: &str) {
        let Some(change) = self.held_change(tool) else {
            return;
        };
        if !lock(&self.session.offered).insert(change.now.clone()) {
            return;
        }
        let Some(peer) = self.session.prompter.peer.get().filter(|p| {
            p.supported_elicitation_modes()
                .contains(&ElicitationMode::Form)
        }) else {
            return;
        };
        let params = asking::approval_form(&change.name, &change.was, &change.now);
        let approved = peer
            .create_elicitation_with_timeout(params, Some(ELICITATION_TIMEOUT))
            .await
            .is_ok_and(|answer| asking::approves(&answer));
        if approved {
            self.approve(&change).await;
        }
    }

    /// Records the approval of `change` and waits, briefly, for the new
    /// code to be served.
    async fn approve(&self, change: &HeldChange) {
        let name = &change.name;
        let recorded = tokio::task::spawn_blocking({
            let (file, name, now) = (change.file.clone(), name.clone(), change.now.clone());
            move || airlock_host::approvals::Approvals::record(&file, &name, &now)
        })
        .await;
        if !matches!(recorded, Ok(Ok(()))) {
            tracing::warn!(tool = %name, "the approval could not be recorded: {recorded:?}");
            return;
        }
        // The watcher sees the approvals file change and reloads; this
        // call waits for the new code, briefly.
        let deadline = tokio::time::Instant::now() + APPROVAL_WAIT;
        while tokio::time::Instant::now() < deadline {
            if self.tools().get(name).and_then(|e| e.tool.digest()) == Some(change.now.as_str()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracing::warn!(tool = %name, "the approved code was not loaded in time; this call runs the code approved before");
    }
}

/// A tool's new code, held until it is approved.
struct HeldChange {
    name: String,
    /// The BLAKE3 of the code approved before, which runs meanwhile.
    was: String,
    /// The BLAKE3 of the new code.
    now: String,
    /// Where approvals are recorded.
    file: std::path::PathBuf,
}

impl Session {
    /// A new tool-use id, unique to this session.
    fn next_use_id(&self) -> String {
        format!(
            "{}-{}",
            self.id_prefix,
            self.next_id.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// The link to a spilled result's file, saved in the context
    /// `results_key` names, recorded as given to this session (so
    /// `resources/read` serves it).
    fn give(&self, path: &str, results_key: &str) -> Resource {
        let link = result_link(path);
        let mut given = lock(&self.given);
        if given
            .paths
            .insert(link.uri.clone(), (path.to_owned(), results_key.to_owned()))
            .is_none()
        {
            given.links.push(link.clone());
        }
        link
    }

    /// Links to the results the caller of a 2026-07-28 request saved in
    /// the context it names, which it may read.
    async fn saved_results(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Vec<Resource>, ErrorData> {
        let Some(results_key) = stateless::results_key(context) else {
            return Ok(Vec::new());
        };
        let caller = identity(context).map(auth::Identity::caller);
        let airlock = self.host.tools.borrow().clone();
        let listed = tokio::task::spawn_blocking(move || match airlock.results() {
            Some(store) => store.list(Owner {
                caller: caller.as_ref(),
                context: &results_key,
            }),
            None => Ok(Vec::new()),
        })
        .await
        .map_err(|e| ErrorData::internal_error(format!("listing the results failed: {e}"), None))?
        .map_err(|e| ErrorData::internal_error(format!("listing the results failed: {e}"), None))?;
        Ok(listed.iter().map(|path| result_link(path)).collect())
    }

    /// Later calls see `airlock`'s tools (those the session's view gives).
    fn refresh(&self, airlock: Airlock) {
        let view = lock(&self.view);
        self.take_up(airlock, view.as_ref());
    }

    /// Narrows the session to the tools `view` gives (the scopes of the
    /// request being served; `None`: every tool), unless it already is.
    fn narrow(&self, view: Option<&auth::ToolView>) {
        let mut current = lock(&self.view);
        if current.as_ref() == view {
            return;
        }
        *current = view.cloned();
        self.take_up(self.host.tools.borrow().clone(), view);
    }

    /// Later calls see the tools of `airlock` that `view` gives; the
    /// caller holds the view's lock, so the session's tools and its
    /// executor's change together.
    fn take_up(&self, airlock: Airlock, view: Option<&auth::ToolView>) {
        let airlock = narrowed(airlock, view).with_prompter(self.prompter.clone());
        *self.tools.write().unwrap_or_else(|e| e.into_inner()) = airlock.visible_tools();
        if let Some(executor) = self.executor.get() {
            executor.refresh(airlock);
        }
    }

    /// The session's executor (started on first use, over the host's
    /// current tools): each call is submitted, and reads its own progress,
    /// log lines and result; the executor's own events (queued, started,
    /// finished) are not read.
    fn executor(&self) -> &ExecutorHandle {
        self.executor.get_or_init(|| {
            let airlock = self.host.tools.borrow().clone();
            let airlock =
                narrowed(airlock, lock(&self.view).as_ref()).with_prompter(self.prompter.clone());
            let mut cx = airlock.context();
            cx.set_results_key(&self.id_prefix);
            Executor::session(airlock, cx).handle()
        })
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
        if let Some(executor) = self.executor.get() {
            executor.close();
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
    fn next(&mut self, event: &ProgressEvent) -> Option<ProgressNotificationParam> {
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
        Some(param)
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
        let answer = peer
            .create_elicitation_with_timeout(
                asking::permission_form(request),
                Some(ELICITATION_TIMEOUT),
            )
            .await
            .map_err(|e| e.to_string());
        asking::permission_answer(&request.tool_name, answer)
    }
}

/// The resource link to the saved result at `path`.
fn result_link(path: &str) -> Resource {
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
    serde_json::from_value(airlock_host::adapters::mcp::tool_definition(d)).map_err(|e| {
        ErrorData::internal_error(format!("the tool {} cannot be listed: {e}", d.name), None)
    })
}

/// A result as MCP content: `isError` for every failure of the call; the
/// structured output also as text, and as `structuredContent` only for a
/// tool that lists an output schema; the link to the spilled result's file,
/// if any, after the output; the hooks' additional context after it.
fn mcp_result(
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

impl ServerHandler for McpServer {
    #[expect(
        deprecated,
        reason = "logging is deprecated from protocol 2026-07-28; sessions of the older versions use it"
    )]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_logging()
                .enable_resources()
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
        // `initialize` negotiates at most 2025-11-25 (a session); requests
        // that say 2026-07-28 in their `_meta` are served without one
        // (`stateless`).
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28))
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        self.listen_for_changes(subscription).await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let peer = context.peer;
        let _ = self.session.prompter.peer.set(peer.clone());
        let session: Weak<Session> = Arc::downgrade(&self.session);
        let mut tools = self.session.host.tools.clone();
        // Tools replaced since this session began (the bundled tools
        // compiled, a reload) are taken up now; later ones are sent.
        let now = tools.borrow_and_update().clone();
        if !std::ptr::eq(now.registry(), self.session.prompter.fallback.registry()) {
            self.session.refresh(now);
        }
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
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // A 2026-07-28 request has no session, and nothing refreshes the
        // session's list: it sees the host's tools as they are now.
        let view = tool_view(&context);
        let tools = if stateless::is_stateless(&context.meta) {
            narrowed(self.session.host.tools.borrow().clone(), view).visible_tools()
        } else {
            self.session.narrow(view);
            self.tools()
        };
        let mut entries = listed(&tools, &lock(&self.session.found));
        // Another request of the session may have narrowed it since.
        if let Some(view) = view {
            entries.retain(|e| view.allows(e.descriptor()));
        }
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

    #[expect(
        deprecated,
        reason = "logging is deprecated from protocol 2026-07-28, which this server does not offer"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.session
            .log_level
            .store(logging::rank(request.level), Ordering::Relaxed);
        Ok(())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let cursor = request.and_then(|r| r.cursor);
        // A 2026-07-28 request has no session that was given links: it is
        // shown the results its caller saved in the context it names.
        if stateless::is_stateless(&context.meta) {
            let links = self.session.saved_results(&context).await?;
            let (start, end, next) = page(links.len(), cursor.as_deref())?;
            let mut result = ListResourcesResult::with_all_items(links[start..end].to_vec());
            result.next_cursor = next;
            return Ok(result);
        }
        let given = lock(&self.session.given);
        let (start, end, next) = page(given.links.len(), cursor.as_deref())?;
        let mut result = ListResourcesResult::with_all_items(given.links[start..end].to_vec());
        result.next_cursor = next;
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let shown = || sanitize::clean_capped(&uri, Sink::Line, 300);
        // One answer for every result the caller does not have (another's,
        // one that never was, any other URI), so it learns nothing.
        let not_found = || {
            ErrorData::resource_not_found(
                format!(
                    "there is no resource {:?} for this caller: only the results this session \
                     was given as resource links (in MCP 2026-07-28, the results of the \
                     caller's own calls in the context the request names) can be read",
                    shown()
                ),
                Some(serde_json::json!({ "uri": uri })),
            )
        };
        // A result is read as its owner's: the caller and the context (the
        // one a link this session was given was saved in; for any other
        // URI in a 2026-07-28 request, which has no session, the context
        // its `_meta` names, as a call's does). The results store serves
        // only the owner's own.
        let given = lock(&self.session.given).paths.get(&uri).cloned();
        let found = match given {
            Some(given) => Some(given),
            None if stateless::is_stateless(&context.meta) => {
                path_of_file_uri(&uri).zip(stateless::results_key(&context))
            }
            None => None,
        };
        let Some((path, results_key)) = found else {
            return Err(not_found());
        };
        let caller = identity(&context).map(auth::Identity::caller);
        let airlock = self.session.host.tools.borrow().clone();
        let cap = u64::try_from(airlock.grants().limits().output_bytes)
            .unwrap_or(u64::MAX)
            .saturating_mul(4);
        let read = tokio::task::spawn_blocking(move || match airlock.results() {
            Some(store) => {
                let owner = Owner {
                    caller: caller.as_ref(),
                    context: &results_key,
                };
                store.read(&path, owner, cap)
            }
            None => Err(std::io::Error::from(std::io::ErrorKind::NotFound)),
        })
        .await
        .map_err(|e| {
            ErrorData::internal_error(format!("reading the resource failed: {e}"), None)
        })?;
        let contents = match read {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => ResourceContents::text(text, uri).with_mime_type(SPILLED_MIME),
                Err(e) => {
                    use base64::Engine as _;
                    let blob = base64::engine::general_purpose::STANDARD.encode(e.into_bytes());
                    ResourceContents::blob(blob, uri).with_mime_type("application/octet-stream")
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_found()),
            Err(e) => {
                return Err(ErrorData::internal_error(
                    format!("the resource {:?} cannot be read: {e}", shown()),
                    None,
                ));
            }
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        self.task_request(request, context).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Boxed: rmcp spawns a task per request, and a task's future is
        // copied whole as the task is made and as it ends; this one is
        // about 7.5 KB.
        Box::pin(self.call_tool_now(request, context)).await
    }
}

impl McpServer {
    /// [`ServerHandler::call_tool`]'s body.
    async fn call_tool_now(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Without a turn (a transport other than this module's), the call
        // goes in as soon as its handler runs.
        let received = context.extensions.remove::<Received>();
        if let Some(view) = tool_view(&context) {
            let given = self
                .session
                .host
                .tools
                .borrow()
                .registry()
                .get(&request.name)
                .is_none_or(|e| view.allows(e.descriptor()));
            if !given {
                return Err(no_such_tool(&request.name));
            }
        }
        if stateless::is_stateless(&context.meta) {
            return self.call_stateless(request, context, received).await;
        }
        self.session.narrow(tool_view(&context));
        let mut tools = self.tools();
        // Nothing unlisted is the usual case: the tool is then looked up once.
        if !tools.unlisted().is_empty() && tools.get(&request.name).is_none() {
            let host = self
                .session
                .host
                .listing(&request.name, &context.ct)
                .await?;
            self.session.refresh(host);
            tools = self.tools();
        }
        let Some(lists_output_schema) = tools
            .get(&request.name)
            .map(|e| airlock_host::adapters::mcp::output_schema(e.descriptor()).is_some())
        else {
            return Err(no_such_tool(&request.name));
        };
        // rmcp runs `notifications/initialized` in a task of its own, so a
        // call sent right after it may be handled first: the peer that
        // permission questions go to is known from the call too.
        let _ = self.session.prompter.peer.set(context.peer.clone());
        self.offer_changed_code(&request.name).await;
        let closed = wait_turn(received.as_ref(), &context.ct).await?;
        let session = &self.session;
        let id = session.next_use_id();
        let mut progress = context.meta.get_progress_token().map(|token| Progress {
            token,
            last: 0.0,
            count: 0.0,
        });
        let input = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let tool_use = ToolUse::new(id.clone(), request.name.as_ref(), input)
            .with_caller(identity(&context).map(auth::Identity::caller));
        // A call with more behind it (a burst) is started by the scheduler
        // with the others; a lone call runs in this task. A call on a
        // connection keeps its place until its reply is written.
        let how = match &received {
            Some(received) if received.turn.followed() => Submit::default().scheduled().held(),
            Some(_) => Submit::default().held(),
            None => Submit::default(),
        };
        let mut events = session.executor().submit_with(tool_use, how);
        if let Some(received) = &received {
            received.turn.take();
        }
        // The call's progress and log lines come before its result, and
        // each is handed to the transport before the next is read.
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(ExecutorEvent::Result(result)) => {
                        if session.found_tools(&result) {
                            let _ = context.peer.notify_tool_list_changed().await;
                        }
                        let spilled = result
                            .spilled_to
                            .as_deref()
                            .map(|path| session.give(path, &session.id_prefix));
                        let reply = mcp_result(*result, lists_output_schema, spilled).into();
                        if let Some(received) = &received {
                            received.hold_until_written(events);
                        }
                        return Ok(reply);
                    }
                    Some(ExecutorEvent::Progress(event)) => {
                        if let Some(param) = progress.as_mut().and_then(|p| p.next(&event)) {
                            let _ = context.peer.notify_progress(param).await;
                        }
                    }
                    Some(ExecutorEvent::Log(event)) => {
                        let level = session.log_level.load(Ordering::Relaxed);
                        logging::send(&context.peer, &event, level).await;
                    }
                    Some(_) => {}
                    None => {
                        return Err(ErrorData::internal_error("the session's executor stopped", None));
                    }
                },
                () = context.ct.cancelled() => {
                    session.executor().cancel(id);
                    return Err(cancelled_by_client());
                }
                () = closed.cancelled() => {
                    session.executor().cancel(id);
                    return Err(connection_closed());
                }
            }
        }
    }
}

/// MCP logging: a tool's log lines as `notifications/message`, filtered by
/// the level the session set. The tool's levels map to RFC 5424's as MCP
/// names them: trace and debug to `debug`, info to `info`, warn to
/// `warning`, error to `error`.
mod logging {
    #![expect(
        deprecated,
        reason = "logging is deprecated from protocol 2026-07-28, which this server does not offer"
    )]

    use airlock_host::tool::{LogEvent, LogLevel};
    use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
    use rmcp::{Peer, RoleServer};

    /// The level of a session that set none: `info` (a tool's debug and
    /// trace lines go out only to a session that asked for `debug`).
    pub(super) const DEFAULT: u8 = 1;

    /// Where `level` ranks among MCP's levels, least severe (0) first.
    pub(super) fn rank(level: LoggingLevel) -> u8 {
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
    pub(super) async fn send(peer: &Peer<RoleServer>, event: &LogEvent, min: u8) {
        if let Some(param) = message(event, min) {
            let _ = peer.notify_logging_message(param).await;
        }
    }
}

/// The path of a `file:` URI as [`file_uri`] writes them.
fn path_of_file_uri(uri: &str) -> Option<String> {
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
fn file_uri(path: &str) -> String {
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

/// `mcp-` and 32 hex digits (128 random bits), different for every session
/// of every server: the names of a session's saved results start with it,
/// and its context's results are kept under it (whose they are is checked
/// by the results store, not by the name being hard to guess).
fn unique_prefix() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No system randomness: a hash of the process, the time and a
        // count still differs per session (but can be guessed).
        static SESSIONS: AtomicU64 = AtomicU64::new(0);
        let mut hasher = blake3::Hasher::new();
        hasher.update(&std::process::id().to_le_bytes());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        hasher.update(&now.as_nanos().to_le_bytes());
        hasher.update(&SESSIONS.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        bytes.copy_from_slice(&hasher.finalize().as_bytes()[..16]);
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("mcp-{hex}")
}

/// Waits for the turn of a call `received` on a connection (without one,
/// none is waited for); returns the token the connection's end cancels, or
/// the error for a call given up before its turn.
async fn wait_turn(
    received: Option<&Received>,
    cancelled: &CancellationToken,
) -> Result<CancellationToken, ErrorData> {
    let Some(received) = received else {
        return Ok(CancellationToken::new());
    };
    waiting(received.turn.wait(), cancelled, &received.closed).await?;
    Ok(received.closed.clone())
}

/// Waits for `done`, unless the client cancels the call or closes the
/// connection first.
async fn waiting<T>(
    done: impl Future<Output = T>,
    cancelled: &CancellationToken,
    closed: &CancellationToken,
) -> Result<T, ErrorData> {
    tokio::select! {
        done = done => Ok(done),
        () = cancelled.cancelled() => Err(cancelled_by_client()),
        () = closed.cancelled() => Err(connection_closed()),
    }
}

/// The error of a call of a tool this server does not have.
fn no_such_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("there is no tool named {name:?}"), None)
}

fn cancelled_by_client() -> ErrorData {
    ErrorData::new(ErrorCode::INTERNAL_ERROR, "cancelled by the client", None)
}

fn connection_closed() -> ErrorData {
    ErrorData::new(
        ErrorCode::INTERNAL_ERROR,
        "cancelled: the client closed the connection",
        None,
    )
}

#[cfg(test)]
mod opens_session_tests {
    use super::opens_session;

    #[test]
    fn only_an_initialize_or_an_unreadable_body_may_open_a_session() {
        assert!(opens_session(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#
        ));
        // An escaped name is the same name to rmcp.
        assert!(opens_session(
            br#"{"jsonrpc":"2.0","id":1,"method":"initiali\u007ae"}"#
        ));
        assert!(opens_session(
            br#"[{"method":"ping"},{"method":"initialize"}]"#
        ));
        assert!(opens_session(br#"{"method":"ping","method":"initialize"}"#));
        assert!(opens_session(b"not json"));
        assert!(!opens_session(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read"}}"#
        ));
        assert!(!opens_session(br#"[{"method":"ping"}]"#));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_host::SafetyFlags;
    use serde_json::Value;

    /// A tool listed before it was compiled (`Airlock::open`) that then
    /// fails to load is taken off the list the sessions serve (each is
    /// then sent `list_changed`).
    #[tokio::test]
    async fn a_tool_that_fails_after_it_was_listed_is_taken_off_the_list() {
        use airlock_host::testing::{describe_ls, listed, setup};
        let garbage = b"\0asm\x0d\0\x01\0 not a component";
        let mut broken = describe_ls().await;
        broken.blake3 = blake3::hash(garbage).to_hex().to_string();
        let s = setup(&[("broken.wasm", garbage)]);
        let registry = listed(&s, vec![broken]).await;
        let airlock = s.airlock(registry).await;
        let host = McpHost::new(airlock);
        // Nothing else has run on this test's runtime yet: this session
        // begins before the list is replaced.
        let early = host.session();
        assert!(early.tools().get("ls").is_some());
        let mut tools = host.tools.clone();
        assert!(tools.borrow_and_update().registry().get("ls").is_some());
        let replaced = tokio::time::timeout(Duration::from_secs(120), tools.changed()).await;
        assert!(matches!(replaced, Ok(Ok(()))), "the list was not replaced");
        assert!(tools.borrow().registry().get("ls").is_none());

        // Initialized after the list was replaced, the early session
        // serves the new list.
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            if let Ok(running) = early.serve(server_io).await {
                let _ = running.waiting().await;
            }
        });
        let client = ().serve(client_io).await.unwrap();
        let names: Vec<String> = (client.list_all_tools().await.unwrap())
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        assert!(!names.contains(&"ls".to_string()), "{names:?}");
    }

    #[test]
    fn a_turn_comes_after_every_earlier_one_was_taken_or_given_up() {
        let mut turns = Turns::default();
        turns.done(2);
        turns.done(1);
        assert_eq!(turns.next, 0, "0 is still out");
        turns.done(0);
        assert_eq!(turns.next, 3);
        turns.done(4);
        assert_eq!(turns.next, 3);
        turns.done(3);
        assert_eq!((turns.next, turns.given_up.len()), (5, 0));
    }

    #[tokio::test]
    async fn a_dropped_turn_lets_the_next_one_go() {
        let ordered = Ordered::new(());
        let turn = |number| {
            Turn(Arc::new(TurnInner {
                number,
                turns: ordered.turns.clone(),
                taken: AtomicBool::new(false),
            }))
        };
        let (first, second, third) = (turn(0), turn(1), turn(2));
        let waiting = tokio::spawn(async move { third.wait().await });
        drop(second);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the first turn is not taken");
        first.wait().await;
        first.take();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the third turn comes")
            .unwrap();
        assert!(lock(&ordered.turns).waiting.is_empty(), "no waiter is left");
    }

    /// A call knows whether the connection received another after it (so
    /// it is one of a burst, and goes to the executor's scheduler).
    #[tokio::test]
    async fn a_call_is_followed_once_a_later_one_was_received() {
        use tokio::io::AsyncWriteExt;
        let (server_in, mut client_out) = tokio::io::duplex(1 << 16);
        let mut ordered = Ordered::new(tasks::Stdio::new(server_in, tokio::io::sink()));
        let call = |id: u32| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sleep","arguments":{{}}}}}}"#
            ) + "\n"
        };
        let mut next_turn = async || match ordered.receive().await {
            Some(JsonRpcMessage::Request(JsonRpcRequest {
                request: ClientRequest::CallToolRequest(call),
                ..
            })) => call.extensions().get::<Received>().unwrap().turn.clone(),
            other => panic!("not a call: {other:?}"),
        };
        client_out.write_all(call(1).as_bytes()).await.unwrap();
        let first = next_turn().await;
        assert!(!first.followed(), "nothing came after the first yet");
        client_out.write_all(call(2).as_bytes()).await.unwrap();
        let second = next_turn().await;
        assert!(first.followed());
        assert!(!second.followed());
    }

    /// A transport whose client is the test: what it sends comes from a
    /// channel, and the reply to request 1 takes 300 ms to be written.
    struct SlowFirstReply {
        from_client: tokio::sync::mpsc::UnboundedReceiver<ClientJsonRpcMessage>,
        /// Each reply's id, when it was handed over and when written.
        written: Arc<Mutex<Vec<(Value, std::time::Instant, std::time::Instant)>>>,
    }

    impl Transport<RoleServer> for SlowFirstReply {
        type Error = std::io::Error;

        fn send(
            &mut self,
            item: ServerJsonRpcMessage,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            let handed = std::time::Instant::now();
            let id = match &item {
                JsonRpcMessage::Response(r) => Some(serde_json::to_value(&r.id).unwrap()),
                JsonRpcMessage::Error(e) => {
                    e.id.as_ref().map(|id| serde_json::to_value(id).unwrap())
                }
                _ => None,
            };
            let written = self.written.clone();
            async move {
                if let Some(id) = id {
                    if id == 1 {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    lock(&written).push((id, handed, std::time::Instant::now()));
                }
                Ok(())
            }
        }

        async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
            self.from_client.recv().await
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    /// An exclusive call sent right after another starts only once that
    /// one's reply is written, however long the writing takes: so its own
    /// reply never goes out first (a `sleep`'s reply took 300 ms to write
    /// here, and the `write` behind it waited for it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_exclusive_call_starts_once_the_reply_before_it_is_written() {
        use airlock_host::testing::setup;
        let s = setup(&[]);
        let mut config = s.config.clone();
        config.bundled_tools = true;
        let ws = config.workspace.clone().unwrap();
        let host = McpHost::new(Airlock::open(config).await.unwrap());
        let (client, from_client) = tokio::sync::mpsc::unbounded_channel();
        let written = Arc::new(Mutex::new(Vec::new()));
        let transport = Ordered::new(SlowFirstReply {
            from_client,
            written: written.clone(),
        });
        let session = host.session();
        tokio::spawn(async move {
            if let Ok(running) = session.serve(transport).await {
                let _ = running.waiting().await;
            }
        });
        let send = |message: Value| {
            client
                .send(serde_json::from_value(message).unwrap())
                .unwrap()
        };
        send(
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
        );
        send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let call = |id: u32, name: &str, arguments: Value| {
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}})
        };
        let target = ws.join("b.txt");
        let write = |id| {
            call(
                id,
                "write",
                serde_json::json!({"file_path": target, "content": "x"}),
            )
        };
        let replies = async |n: usize| {
            tokio::time::timeout(Duration::from_secs(120), async {
                loop {
                    if lock(&written).len() == n {
                        return lock(&written).clone();
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await
            .expect("every reply")
        };
        // Both tools compiled first (their compiles would hide the order).
        send(call(10, "sleep", serde_json::json!({"ms": 0})));
        send(write(11));
        replies(3).await;
        send(call(1, "sleep", serde_json::json!({"ms": 0})));
        send(write(2));
        let replies = replies(5).await;
        let [.., (first, _, sleep_written), (second, write_handed, _)] = &replies[..] else {
            unreachable!()
        };
        assert_eq!(
            (first, second),
            (&serde_json::json!(1), &serde_json::json!(2))
        );
        assert!(
            write_handed >= sleep_written,
            "the write was answered {:?} before the sleep's reply was written",
            *sleep_written - *write_handed
        );
        assert_eq!(std::fs::read_to_string(target).unwrap(), "x");
    }

    /// What a call holds is let go of once the call is over (its reply
    /// written, or the client cancelled it), at once if it already is, and
    /// when the client reuses its id.
    #[tokio::test]
    async fn a_call_holds_its_place_only_until_it_is_over() {
        let replies = Replies::<Arc<()>>::default();
        let held = Arc::new(());
        let id = RequestId::Number(1);
        replies.open(id.clone());
        replies.hold(&id, held.clone());
        assert_eq!(
            Arc::strong_count(&held),
            2,
            "kept until the reply is written"
        );
        drop(replies.close(&id));
        assert_eq!(Arc::strong_count(&held), 1, "let go of once it is");
        replies.hold(&id, held.clone());
        assert_eq!(
            Arc::strong_count(&held),
            1,
            "a call that is over holds nothing"
        );
        replies.open(id.clone());
        replies.hold(&id, held.clone());
        replies.open(id.clone());
        assert_eq!(
            Arc::strong_count(&held),
            1,
            "a reused id lets go of the first"
        );

        let (client, from_client) = tokio::sync::mpsc::unbounded_channel();
        let mut ordered = Ordered::new(SlowFirstReply {
            from_client,
            written: Arc::default(),
        });
        let message = |m| serde_json::from_value::<ClientJsonRpcMessage>(m).unwrap();
        client
            .send(message(serde_json::json!({"jsonrpc": "2.0", "id": 7,
                "method": "tools/call", "params": {"name": "sleep"}})))
            .unwrap();
        client
            .send(message(serde_json::json!({"jsonrpc": "2.0",
                "method": "notifications/cancelled", "params": {"requestId": 7}})))
            .unwrap();
        ordered.receive().await.unwrap();
        let call = RequestId::Number(7);
        assert!(lock(&ordered.replies.0).contains_key(&call), "a call opens");
        ordered.receive().await.unwrap();
        assert!(lock(&ordered.replies.0).is_empty(), "its cancel closes it");
    }

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
    fn every_session_has_its_own_tool_use_ids() {
        let prefixes: HashSet<String> = (0..1000).map(|_| unique_prefix()).collect();
        assert_eq!(prefixes.len(), 1000);
        assert!(
            prefixes
                .iter()
                .all(|p| p.len() == 36 && p.starts_with("mcp-"))
        );
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
