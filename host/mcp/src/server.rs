//! One MCP session: [`McpServer`], rmcp's handler over its own agent
//! context and session executor (tools, calls, progress, log lines,
//! permission questions, resources), and the mapping of descriptors and
//! results onto MCP.

use crate::lock;
use crate::mapping::{logging, mcp_result, mcp_tool, page, path_of_file_uri, result_link};
use crate::relay::{Abandon, Event, Relay, Relayed};
use crate::skills;
use crate::turn::{Received, wait_turn};
use crate::{
    APPROVAL_WAIT, ELICITATION_TIMEOUT, McpHost, SPILLED_MIME, asking, auth, stateless, tasks,
};
use airlock_host::Airlock;
use airlock_host::ContentBlock;
use airlock_host::LoadError;
use airlock_host::pipeline::results::Owner;
use airlock_host::sanitize::{self, Sink};
use airlock_host::{Entry, Registry};
use airlock_host::{Executor, ExecutorEvent, ExecutorHandle, Submit};
use airlock_host::{PermissionAnswer, PermissionPrompter, PermissionRequest};
use airlock_host::{ToolResult, ToolUse};
use async_trait::async_trait;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, GetSkillRequestParams,
    GetSkillResult, Implementation, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ServerCapabilities, ServerConfig,
    SubscriptionFilter,
};
use rmcp::service::{ElicitationMode, NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;

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
pub(crate) fn tool_view(context: &RequestContext<RoleServer>) -> Option<&auth::ToolView> {
    context
        .extensions
        .get::<http::request::Parts>()?
        .extensions
        .get::<auth::ToolView>()
}

/// `airlock` with only the tools `view` gives (all of them without one):
/// `tool_search` in it names and finds only those.
pub(crate) fn narrowed(airlock: Airlock, view: Option<&auth::ToolView>) -> Airlock {
    match view {
        Some(view) => airlock.view(|d| view.allows(d)),
        None => airlock,
    }
}

/// One MCP session: an rmcp server handler over its own agent context.
#[derive(Clone)]
pub struct McpServer {
    pub(crate) session: Arc<Session>,
}

pub(crate) struct Session {
    pub(crate) host: McpHost,
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
    pub(crate) tasks: tasks::Tasks,
}

/// The resources a session was given: the links in the order given, and
/// each one's file and the name of the context it was saved in
/// (`ToolContext::results_key`), by URI.
#[derive(Default)]
pub(crate) struct Given {
    links: Vec<Resource>,
    paths: HashMap<String, (String, String)>,
}

impl McpServer {
    pub(crate) fn new(host: McpHost) -> McpServer {
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

    pub(crate) fn tools(&self) -> Arc<Registry> {
        self.session
            .tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The change of `tool`'s code held for approval, if any: the code
    /// approved before runs until the new code is approved.
    pub(crate) fn held_change(&self, tool: &str) -> Option<HeldChange> {
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
    pub(crate) async fn approve(&self, change: &HeldChange) {
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
        let mut fields = serde_json::Map::new();
        fields.insert("tool".into(), name.clone().into());
        fields.insert("digest".into(), change.now.clone().into());
        fields.insert("was".into(), change.was.clone().into());
        fields.insert("decided_by".into(), "user (elicitation)".into());
        if let Err(e) = self.host_now().audit("approval", fields) {
            tracing::error!(tool = %name, "the approval is not in the audit trail: {e:#}");
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
pub(crate) struct HeldChange {
    pub(crate) name: String,
    /// The BLAKE3 of the code approved before, which runs meanwhile.
    pub(crate) was: String,
    /// The BLAKE3 of the new code.
    pub(crate) now: String,
    /// Where approvals are recorded.
    file: std::path::PathBuf,
}

impl Session {
    /// A new tool-use id, unique to this session.
    pub(crate) fn next_use_id(&self) -> String {
        format!(
            "{}-{}",
            self.id_prefix,
            self.next_id.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// The link to a spilled result's file, saved in the context
    /// `results_key` names, recorded as given to this session (so
    /// `resources/read` serves it).
    pub(crate) fn give(&self, path: &str, results_key: &str) -> Resource {
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
    pub(crate) fn narrow(&self, view: Option<&auth::ToolView>) {
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
pub(crate) fn listed<'r>(tools: &'r Registry, found: &HashSet<String>) -> Vec<&'r Arc<Entry>> {
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

/// Asks the MCP client's user through form elicitation when the client
/// supports it; otherwise the host's own prompter answers.
pub(crate) struct McpPrompter {
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
                .enable_skills_with_directory_read()
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

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        Ok(skills::list(&self.host_now()))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        skills::get(&self.host_now(), &request.uri)
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        skills::directory(&self.host_now(), &request.uri)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        // A skill's file is anyone's to read: skills are served to every
        // caller alike.
        if uri.starts_with(skills::SCHEME) {
            let read = skills::read(&self.host_now(), &uri);
            return match read {
                Some(result) => Ok(result.into()),
                None => Err(ErrorData::invalid_params(
                    format!(
                        "no skill has a file {:?}",
                        sanitize::clean_capped(&uri, Sink::Line, 300)
                    ),
                    Some(serde_json::json!({ "uri": uri })),
                )),
            };
        }
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
    /// The host as it is now, not holding the watch channel while it is
    /// used (a skill's file is encoded from it, up to 16 MiB).
    fn host_now(&self) -> Airlock {
        self.session.host.tools.borrow().clone()
    }

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
        // The call's progress and log lines come before its result.
        let relayed = Relay::new(&context, &closed)
            .until_result(
                futures::stream::unfold(&mut events, |events| async move {
                    loop {
                        let event = match events.next().await? {
                            ExecutorEvent::Result(result) => Event::Result(result),
                            ExecutorEvent::Progress(event) => Event::Progress(event),
                            ExecutorEvent::Log(event) => Event::Log(event),
                            _ => continue,
                        };
                        return Some((event, events));
                    }
                }),
                || Some(session.log_level.load(Ordering::Relaxed)),
                std::future::pending(),
                || session.executor().cancel(id.clone()),
                Abandon::Return,
            )
            .await;
        let result = match relayed {
            Relayed::Result { result, .. } => result,
            Relayed::Abandoned(error) => return Err(error),
            Relayed::NoResult => {
                return Err(ErrorData::internal_error(
                    "the session's executor stopped",
                    None,
                ));
            }
        };
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
        Ok(reply)
    }
}

/// `mcp-` and 32 hex digits (128 random bits), different for every session
/// of every server: the names of a session's saved results start with it,
/// and its context's results are kept under it (whose they are is checked
/// by the results store, not by the name being hard to guess).
pub(crate) fn unique_prefix() -> String {
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

/// The error of a call of a tool this server does not have.
pub(crate) fn no_such_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("there is no tool named {name:?}"), None)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
