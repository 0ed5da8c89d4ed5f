//! MCP 2026-07-28 requests: no `initialize` and no session. Each request
//! says its version and capabilities in `_meta`, and any replica may
//! answer it, so the agent context a call runs in is kept in the host's
//! [`Contexts`] store (in process, or Redis shared by replicas) and named by
//! the request's `_meta["airlock/context"]`:
//! - absent (or null): the default context, which every call that names
//!   none shares (a client that knows nothing of Airlock, Claude Code for
//!   one, still has its `read` stamps seen by its `edit`, on any replica);
//! - a context id a result handed out: that context;
//! - `"new"`: a new context, private to the client: if the call changes it
//!   (a `read` records a stamp, a `cd` a cwd), the result's
//!   `_meta["airlock/context"]` hands out its id, which later calls send.
//!
//! On one replica, the calls of a named context (and of the default context
//! on stdio) go through its [`Lanes`] lane in the order they arrived: a
//! call of a tool not declared concurrency-safe runs alone in its context
//! (the lane goes by the tool's declared flags, not by its classification
//! of the input, which only the call makes). Permission questions are
//! answered by the host's own prompter (2026-07-28 has no server-to-client
//! requests); log lines go out only when the request set `logLevel`;
//! tool-list changes go to `subscriptions/listen` streams.

use super::{
    McpServer, Progress, Received, cancelled_by_client, connection_closed, logging, mcp_result,
    narrowed, no_such_tool, tool_view, wait_turn, waiting,
};
use airlock_host::adapters::mcp::output_schema;
use airlock_host::contexts::{self, ContextError, Contexts};
use airlock_host::tool::ProgressSink;
use airlock_host::{CallControl, SafetyFlags, ToolUse};
use rmcp::model::{CallToolRequestParams, CallToolResponse, ProtocolVersion, RequestMetaObject};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::task::Poll;
use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};
use tokio_util::sync::CancellationToken;

/// The `_meta` key of the context id, in requests and in results.
pub const CONTEXT_META: &str = "airlock/context";

/// Progress updates and log lines a call may have pending.
const PENDING: usize = 64;

/// What `_meta["airlock/context"]` says to start a new context.
pub const NEW: &str = "new";

/// The lane of the default context.
const DEFAULT_LANE: &str = "default";

/// Which context a request names.
enum Named<'a> {
    Default,
    Fresh,
    Id(&'a str),
}

/// The lanes of the contexts calls are running in on this replica: calls
/// of one context enter its lane in the order they arrive; one whose tool
/// is not declared concurrency-safe runs alone in it (it loads the context
/// once every call before it saved, and the calls after it wait for it),
/// the others side by side. Replicas do not share lanes.
#[derive(Default)]
pub(crate) struct Lanes(Mutex<HashMap<String, Weak<RwLock<()>>>>);

/// A call's place in its lane, held until its context is saved.
enum InLane {
    Shared { _guard: OwnedRwLockReadGuard<()> },
    Alone { _guard: OwnedRwLockWriteGuard<()> },
}

impl Lanes {
    /// Enters the lane of context `key`: alone or beside others.
    async fn enter(&self, key: &str, alone: bool) -> InLane {
        let lane = {
            let mut lanes = super::lock(&self.0);
            match lanes.get(key).and_then(Weak::upgrade) {
                Some(lane) => lane,
                None => {
                    // Lanes no call holds any more go when a new one comes.
                    lanes.retain(|_, lane| lane.strong_count() > 0);
                    let lane = Arc::new(RwLock::new(()));
                    lanes.insert(key.to_string(), Arc::downgrade(&lane));
                    lane
                }
            }
        };
        if alone {
            InLane::Alone {
                _guard: lane.write_owned().await,
            }
        } else {
            InLane::Shared {
                _guard: lane.read_owned().await,
            }
        }
    }
}

/// The context a request's `_meta` names; an error for a value that is no
/// context id, `"new"` or null.
fn named(meta: &RequestMetaObject) -> Result<Named<'_>, ErrorData> {
    match meta.0.get(CONTEXT_META) {
        // Some serialisers write an unset key as null.
        None | Some(serde_json::Value::Null) => Ok(Named::Default),
        Some(serde_json::Value::String(id)) if id == NEW => Ok(Named::Fresh),
        Some(serde_json::Value::String(id)) => Ok(Named::Id(id.as_str())),
        Some(_) => Err(ErrorData::invalid_params(
            format!(
                "_meta[\"{CONTEXT_META}\"] must be a context id an earlier result handed out, \
                 or \"{NEW}\" for a new context (without it, the call runs in the default \
                 context)"
            ),
            None,
        )),
    }
}

/// The name the saved results of the context a 2026-07-28 request names
/// are kept under, for its caller (`ToolContext::results_key`); `None` for
/// a new context (which has none yet) or a malformed name.
pub(crate) fn results_key(context: &RequestContext<RoleServer>) -> Option<String> {
    let owner = crate::identity(context).map(crate::auth::Identity::key);
    match named(&context.meta).ok()? {
        Named::Default => Some(contexts::results_key(None, owner.as_deref())),
        Named::Fresh => None,
        Named::Id(id) => Some(contexts::results_key(Some(id), owner.as_deref())),
    }
}

/// Whether a request says, in its own `_meta`, that it is 2026-07-28 or
/// later (no session: its context comes from the store).
pub(crate) fn is_stateless(meta: &RequestMetaObject) -> bool {
    meta.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// A context error as the client gets it: an id the store does not hold is
/// the client's to fix (invalid params), a store that failed is ours.
fn context_error(e: &ContextError) -> ErrorData {
    match e {
        ContextError::Unknown { id, .. } => ErrorData::invalid_params(
            format!(
                "{e} (send _meta[\"{CONTEXT_META}\"] = \"{NEW}\"), or leave the id out to use \
                 the default context"
            ),
            Some(serde_json::json!({ "context": id })),
        ),
        ContextError::Store { .. } => ErrorData::internal_error(e.to_string(), None),
    }
}

impl McpServer {
    /// Runs a 2026-07-28 `tools/call` in the context its `_meta` names.
    pub(crate) async fn call_stateless(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        received: Option<Received>,
    ) -> Result<CallToolResponse, ErrorData> {
        let session = &self.session;
        let contexts: &Contexts = &session.host.contexts;
        let named = named(&context.meta)?;
        // The host's own prompter answers permission questions.
        let host = session.host.listing(&request.name, &context.ct).await?;
        let airlock = narrowed(host, tool_view(&context));
        let mut cx = airlock.context();
        // The host's tools as they are now: no session refreshes a list.
        let Some(entry) = cx.tools().get(&request.name) else {
            return Err(no_such_tool(&request.name));
        };
        let lists_output_schema = output_schema(entry.descriptor()).is_some();
        let alone = !entry
            .descriptor()
            .flags
            .contains(SafetyFlags::CONCURRENCY_SAFE);
        let closed = wait_turn(received.as_ref(), &context.ct).await?;
        // An authenticated caller's contexts are its own: its default
        // context, and the ones it created, which no one else can name.
        let owner = crate::identity(&context).map(crate::auth::Identity::key);
        let owner = owner.as_deref();
        // Calls of one context keep their order: a call joins its lane's
        // queue before the next request on the connection may go, then
        // waits there. The default context has a lane only on a connection
        // (stdio: one client). Over HTTP every client that names no context
        // shares it, and one client's long call would hold up the others'.
        // A lane is its caller's too: one who names another's context never
        // waits in, or holds up, that context's lane.
        let lane = match named {
            Named::Fresh => None,
            Named::Default => received.is_some().then(|| DEFAULT_LANE.to_string()),
            Named::Id(id) => Some(match owner {
                Some(owner) => format!("{id}:{owner}"),
                None => id.to_string(),
            }),
        };
        let mut entering = std::pin::pin!(async {
            match &lane {
                None => None,
                Some(key) => Some(session.host.lanes.enter(key, alone).await),
            }
        });
        // One poll puts the call in its lane, or in the lane's queue.
        let entered = std::future::poll_fn(|task| {
            Poll::Ready(match entering.as_mut().poll(task) {
                Poll::Ready(in_lane) => Some(in_lane),
                Poll::Pending => None,
            })
        })
        .await;
        if let Some(received) = received {
            received.turn.take();
        }
        let _in_lane = match entered {
            Some(in_lane) => in_lane,
            None => waiting(entering, &context.ct, &closed).await?,
        };
        let mut loaded = match named {
            Named::Default => contexts.load_default(&mut cx, owner).await,
            Named::Fresh => contexts.load_as(None, owner, &mut cx).await,
            Named::Id(id) => contexts.load_as(Some(id), owner, &mut cx).await,
        }
        .map_err(|e| context_error(&e))?;
        let use_id = session.next_use_id();
        let mut progress = context.meta.get_progress_token().map(|token| Progress {
            token,
            last: 0.0,
            count: 0.0,
        });
        let log_level = context.meta.log_level().map(logging::rank);
        let (sink, mut progress_rx) = ProgressSink::channel(PENDING);
        let (sink, mut log_rx) = sink.with_logs(PENDING);
        let cancel = CancellationToken::new();
        let control = CallControl {
            progress: sink,
            cancel: cancel.clone(),
        };
        let input = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let tool_use = ToolUse::new(use_id, request.name.as_ref(), input)
            .with_caller(crate::identity(&context).map(crate::auth::Identity::caller));
        let mut abandoned = None;
        let result = {
            let call = airlock.call_with(&mut cx, tool_use, control);
            tokio::pin!(call);
            loop {
                tokio::select! {
                    result = &mut call => break result,
                    Some(event) = progress_rx.recv() => {
                        if let Some(param) = progress.as_mut().and_then(|p| p.next(&event)) {
                            let _ = context.peer.notify_progress(param).await;
                        }
                    }
                    Some(event) = log_rx.recv() => {
                        if let Some(level) = log_level {
                            logging::send(&context.peer, &event, level).await;
                        }
                    }
                    () = context.ct.cancelled(), if abandoned.is_none() => {
                        cancel.cancel();
                        abandoned = Some(cancelled_by_client());
                    }
                    () = closed.cancelled(), if abandoned.is_none() => {
                        cancel.cancel();
                        abandoned = Some(connection_closed());
                    }
                }
            }
        };
        // A result the call saved is kept under the context's id: a new
        // context that saved one is created (its id handed out), so that
        // the result can be read back.
        if result.spilled_to.is_some() {
            loaded.keep();
        }
        // What the call changed is kept even when its client went away.
        let saved = contexts.save(loaded, &cx).await;
        if let Some(error) = abandoned {
            return Err(error);
        }
        let saved = saved.map_err(|e| {
            ErrorData::internal_error(
                format!(
                    "{} ran, but what it changed in the agent's context was not saved: {e}",
                    request.name
                ),
                None,
            )
        })?;
        let spilled = result
            .spilled_to
            .as_deref()
            .map(|path| session.give(path, cx.results_key()));
        let mut reply = mcp_result(result, lists_output_schema, spilled);
        if let Some(id) = saved {
            reply
                .meta
                .get_or_insert_with(Default::default)
                .insert(CONTEXT_META.into(), serde_json::Value::String(id));
        }
        Ok(reply.into())
    }

    /// A `subscriptions/listen` stream: `notifications/tools/list_changed`
    /// each time the tools change, until the client ends it.
    pub(crate) async fn listen_for_changes(
        &self,
        subscription: SubscriptionContext,
    ) -> Result<(), ErrorData> {
        let mut tools = self.session.host.tools.clone();
        tools.borrow_and_update();
        if !subscription.accepted().tools_list_changed.unwrap_or(false) {
            subscription.cancelled().await;
            return Ok(());
        }
        loop {
            tokio::select! {
                changed = tools.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    tools.borrow_and_update();
                    if subscription.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
                () = subscription.cancelled() => return Ok(()),
            }
        }
    }
}
