//! `airlock mcp`: every tool in view served over the Model Context
//! Protocol with rmcp's server side, on stdio or Streamable HTTP. It owns
//! the mapping of Airlock's descriptors, results, progress, log lines and
//! permission questions onto MCP, and nothing of a call's policy: each
//! session (the stdio connection, or one HTTP session) has its own agent
//! context and a session [`Executor`], so calls take the same pipeline and
//! scheduling rule as every other front end. Its invariants (one reply per
//! call, calls in the order received, log lines before results, resources
//! limited to the caller's own spilled results, tasks) are in ARCHITECTURE.md.

pub use http_front::HttpOptions;
use http_front::{HttpFront, OrderedSessions, default_caller_sessions};
use mapping::{logging, mcp_result};
pub use server::McpServer;
use server::{identity, narrowed, no_such_tool, tool_view};
use turn::{Acknowledging, Closed, Received, cancelled_by_client, wait_turn, waiting};
use turns::{Answering, Ordered};

use airlock_host::Airlock;
use airlock_host::SourceStamp;
use airlock_host::context_store::Contexts;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServiceExt};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

mod admission;
mod asking;
pub mod auth;
mod callers;
mod http_front;
mod lines;
mod mapping;
mod relay;
mod rounds;
mod server;
mod skills;
mod sse;
mod stateless;
#[cfg(target_os = "linux")]
mod stdio;
mod stdio_transport;
mod tasks;
mod turn;
mod turns;

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
    /// file in its tool directories or a file of its skills is added,
    /// changed or removed, and
    /// listing them anew once the tools [`Airlock::open`] listed before
    /// compiling them are compiled, if one described itself otherwise or
    /// failed ([`Airlock::settled`]). The
    /// airlock's prompter answers permission questions for clients that
    /// cannot be asked (elicitation).
    pub fn new(airlock: Airlock) -> McpHost {
        let config = airlock.config().clone();
        let contexts = Contexts::from_config(&config.contexts);
        let watched = !config.effective_tool_dirs().is_empty() || !config.skill_dirs().is_empty();
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
            if watched {
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
                            tracing::info!(
                                "the tool directories or the skills changed: tools and skills \
                                 reloaded"
                            );
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
        let stdio = stdio_transport::Stdio::new(read, write);
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
    /// a load balancer's or Kubernetes' probes), and 503 while the context
    /// store cannot be reached or the server is stopping. Returns once
    /// [`HttpOptions::shutdown`] is cancelled and the calls in flight
    /// finished (or [`HttpOptions::drain_grace`] passed), or on an error
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
            contexts: self.contexts.clone(),
            shutdown: options.shutdown.clone(),
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
        let shutdown = options.shutdown.clone();
        // Each connection's task holds a sender: all are gone once every
        // connection closed.
        let (open, mut all_closed) = tokio::sync::mpsc::channel::<()>(1);
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = shutdown.cancelled() => break,
            };
            let stream = match accepted {
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
            let (open, shutdown) = (open.clone(), shutdown.clone());
            tokio::spawn(async move {
                let _open = open;
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
                let mut serving = std::pin::pin!(serving);
                let mut stopping = false;
                loop {
                    tokio::select! {
                        served = serving.as_mut() => {
                            if let Err(e) = served {
                                tracing::debug!("an MCP connection ended: {e}");
                            }
                            break;
                        }
                        () = connection.evicted() => break,
                        // The request it is answering is answered, then it
                        // closes.
                        () = shutdown.cancelled(), if !stopping => {
                            stopping = true;
                            serving.as_mut().graceful_shutdown();
                        }
                    }
                }
            });
        }
        drop((listener, open));
        let grace = options.drain_grace;
        tracing::info!(
            "stopping: finishing the calls in flight (at most {} s)",
            grace.as_secs()
        );
        if tokio::time::timeout(grace, all_closed.recv())
            .await
            .is_err()
        {
            tracing::warn!(
                "calls were still in flight after {} s: cut",
                grace.as_secs()
            );
        }
        Ok(())
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
