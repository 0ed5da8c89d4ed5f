//! The Streamable HTTP front: [`HttpOptions`], the connection and session
//! caps (`HttpFront`: accept, per-caller shares, timeouts, `/health` and
//! `/ready`), the HTTP answers the server gives itself (refusals, caps,
//! unreadable bodies), and `OrderedSessions`, rmcp's in-memory sessions
//! with each one's transport [`Ordered`](crate::turns::Ordered).

use crate::server::McpServer;
use crate::turns::Ordered;
use crate::{HEALTH_PATH, MCP_PATH, READY_PATH, admission, auth, callers, sse, tasks};
use airlock_host::Airlock;
use airlock_host::context_store::{ContextError, Contexts};
use rmcp::model::{ClientJsonRpcMessage, ErrorCode, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

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
    /// Cancelled to stop serving (on SIGTERM): `/ready` answers 503 at
    /// once, no connection is accepted, each open one closes after the
    /// request it is answering, and [`McpHost::serve_http`](crate::McpHost::serve_http)
    /// returns once they all closed or `drain_grace` passed.
    pub shutdown: CancellationToken,
    /// How long calls in flight get to finish once `shutdown` is
    /// cancelled.
    pub drain_grace: Duration,
}

impl Default for HttpOptions {
    /// 1024 connections, 1024 sessions; a request's head within 30 s;
    /// sessions end after 5 minutes idle; never shut down; 20 s to drain.
    fn default() -> HttpOptions {
        HttpOptions {
            max_connections: 1024,
            header_timeout: Duration::from_secs(30),
            session_idle: Some(Duration::from_secs(300)),
            max_sessions: 1024,
            max_caller_sessions: None,
            allowed_hosts: Vec::new(),
            auth: None,
            shutdown: CancellationToken::new(),
            drain_grace: Duration::from_secs(20),
        }
    }
}

pub(crate) type HttpBody =
    http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>;

/// What stands between a connection and rmcp's Streamable HTTP service:
/// the path, an unknown session's `DELETE`, and a body that is no JSON-RPC
/// message get the answers the protocol asks for, and a request's reply is
/// one JSON object when it can be ([`sse::reply`]).
pub(crate) struct HttpFront {
    pub(crate) service: StreamableHttpService<McpServer, OrderedSessions>,
    pub(crate) sessions: Arc<OrderedSessions>,
    pub(crate) compiled: Arc<AtomicBool>,
    /// The context store, which `/ready` asks.
    pub(crate) contexts: Contexts,
    /// Cancelled when the server stops ([`HttpOptions::shutdown`]).
    pub(crate) shutdown: CancellationToken,
    pub(crate) max_body: usize,
    pub(crate) max_sessions: usize,
    pub(crate) auth: Option<Arc<auth::Authenticator>>,
    /// The host's tools, for the scopes a call needs.
    pub(crate) tools: watch::Receiver<Airlock>,
    /// Sessions one caller may have open at once, with auth.
    pub(crate) max_caller_sessions: usize,
}

impl HttpFront {
    pub(crate) async fn handle(
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
            READY_PATH if self.shutdown.is_cancelled() => {
                return plain(
                    http::StatusCode::SERVICE_UNAVAILABLE,
                    "Service Unavailable: stopping, finishing the calls in flight",
                );
            }
            READY_PATH if !self.compiled.load(Ordering::Acquire) => {
                return plain(
                    http::StatusCode::SERVICE_UNAVAILABLE,
                    "Service Unavailable: the tools are still being compiled",
                );
            }
            READY_PATH => {
                return match self.contexts.check().await {
                    Ok(()) => plain(http::StatusCode::OK, "ready"),
                    Err(ContextError::Store { store, message }) => plain(
                        http::StatusCode::SERVICE_UNAVAILABLE,
                        &format!(
                            "Service Unavailable: the context store {store} does not answer \
                             ({message})"
                        ),
                    ),
                    Err(e) => plain(
                        http::StatusCode::SERVICE_UNAVAILABLE,
                        &format!("Service Unavailable: {e}"),
                    ),
                };
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
            return session_not_found(b"");
        }
        match *request.method() {
            http::Method::POST => self.post(request, caller.as_deref()).await,
            http::Method::DELETE => self.delete(request).await,
            _ => {
                let response = self.service.handle(request).await;
                if response.status() == http::StatusCode::NOT_FOUND && session.is_some() {
                    return session_not_found(b"");
                }
                response
            }
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
                return session_not_found(b"");
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
        let names_session = parts.headers.contains_key("mcp-session-id");
        let opens = !names_session && opens_session(&bytes);
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
        if response.status() == http::StatusCode::NOT_FOUND && names_session {
            return session_not_found(&bytes);
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
pub(crate) struct Place<'a> {
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
pub(crate) fn plain(status: http::StatusCode, text: &str) -> http::Response<HttpBody> {
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

/// `value` as a JSON response.
pub(crate) fn json_response(
    status: http::StatusCode,
    value: &serde_json::Value,
) -> http::Response<HttpBody> {
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
pub(crate) fn refused(
    auth: &auth::Authenticator,
    rejection: &auth::Rejection,
) -> http::Response<HttpBody> {
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
pub(crate) fn challenged(
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
pub(crate) enum SessionCap {
    /// `--max-sessions`: the server's.
    Server(usize),
    /// `--max-sessions-per-caller`: its caller's share.
    Caller(usize),
}

pub(crate) fn too_many_sessions(body: &[u8], cap: SessionCap) -> http::Response<HttpBody> {
    let id = request_id(body);
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
pub(crate) fn opens_session(body: &[u8]) -> bool {
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
pub(crate) fn default_caller_sessions(max_sessions: usize) -> usize {
    (max_sessions / 4).max(1)
}

/// A JSON-RPC error response (status 400 until the caller changes it).
/// The id of the request in `body`, or null.
fn request_id(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .filter(|id| id.is_string() || id.is_number())
        .unwrap_or_default()
}

/// The 404 for a session this server does not hold (MCP clients start a
/// new session on it), as a JSON-RPC error that says why it may be so
/// and what to do; `body` is the request's, for its id.
pub(crate) fn session_not_found(body: &[u8]) -> http::Response<HttpBody> {
    let mut response = json_error(
        request_id(body),
        SESSION_NOT_FOUND,
        "Session not found: this server holds no session by that id. It ended (an idle \
         session ends after `--idle-timeout`), or another replica opened it: a session of MCP \
         2025-11-25 and older lives in the replica that opened it, so each client must reach \
         one replica (session affinity); MCP 2026-07-28 needs none. Start a new session \
         (initialize).",
    );
    *response.status_mut() = http::StatusCode::NOT_FOUND;
    response
}

/// The JSON-RPC error code of [`session_not_found`] (the MCP SDKs' own).
const SESSION_NOT_FOUND: i32 = -32001;

pub(crate) fn json_error(
    id: serde_json::Value,
    code: i32,
    message: &str,
) -> http::Response<HttpBody> {
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
pub(crate) fn unreadable_message(body: &[u8]) -> http::Response<HttpBody> {
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
pub(crate) struct OrderedSessions {
    pub(crate) inner: Arc<LocalSessionManager>,
    /// Sessions open, and places taken by requests that may open one.
    pub(crate) live: Arc<AtomicUsize>,
    /// Who opened each session, with auth.
    pub(crate) callers: Arc<callers::Callers>,
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
