//! [`ToolContext`]: the agent's world as tools see it (Claude Code's
//! ToolUseContext): the tools in view, the working directory, environment,
//! each tool's own state, the read-file-state cache, the abort handle (the
//! user's interrupt), the agent's id, its permission mode and rules, and
//! the denials so far; plus the rules for applying the context changes a
//! call returns.
//!
//! A context is cheap to clone: a clone is a snapshot of the values (cwd,
//! env, state, mode) that shares the caches and records (read files,
//! denials, "always allow" rules, the abort handle). The pipeline runs a
//! call against a snapshot and the owner applies its changes with
//! [`ToolContext::finish`].
//!
//! Invariants: the cwd is always a directory some grant reaches (a change
//! to anything else is refused); a recorded file read carries the host's
//! own stamp, taken through the call's directory handles; only exclusive
//! calls change the cwd, env or state, while any call may record a read
//! (a fact, which commutes with other facts).

use crate::call::ToolResult;
use crate::policy::{DecisionSource, PermissionRules};
use crate::registry::Registry;
use airlock_core::descriptor::{Descriptor, is_env_name};
use airlock_core::grants::{CallGrants, FileStamp, Grants, normalize_guest};
use airlock_core::permissions::{PermissionMode, Rule, RuleKind};
use airlock_core::tool::{CallContext, CancellationToken, ContextChange, ReadFiles};
use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

/// How many file reads the cache remembers.
pub const READ_FILE_CACHE: usize = 1000;
const MAX_ENV_VARS: usize = 256;
const MAX_ENV_VALUE: usize = 32 << 10;
const MAX_STATE_KEYS: usize = 256;
const MAX_STATE_KEY: usize = 256;
const MAX_STATE_VALUE: usize = 64 << 10;

/// A call that was not allowed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Denial {
    /// The tool use's id.
    pub tool_use_id: String,
    /// The tool.
    pub tool: String,
    /// Who denied it.
    pub source: DecisionSource,
    /// Why.
    pub reason: String,
}

/// A use that ran: its result, and the context changes still to apply.
pub struct Completed {
    pub(crate) result: ToolResult,
    pub(crate) changes: Vec<ContextChange>,
    pub(crate) grants: CallGrants,
}

impl Completed {
    /// The result, before context changes are applied.
    pub fn result(&self) -> &ToolResult {
        &self.result
    }
}

/// The agent's context.
#[derive(Clone, Debug)]
pub struct ToolContext {
    tools: Arc<Registry>,
    cwd: String,
    env: BTreeMap<String, String>,
    state: BTreeMap<String, BTreeMap<String, String>>,
    mode: PermissionMode,
    session_id: String,
    agent_id: Option<String>,
    read_files: ReadFiles,
    /// Whose turn this context's calls wait in for an instance slot, when
    /// it is not the read-file cache's address (see [`Self::set_tenant`]).
    tenant: Option<usize>,
    /// What this context's saved results are kept under, when it is not
    /// its session id (see [`Self::set_results_key`]).
    results_key: Option<Arc<str>>,
    rules: Arc<RwLock<PermissionRules>>,
    /// The tools an "always allow" answer allowed, with the code it was
    /// given for: the rules that are this context's own, kept with it.
    always: Arc<Mutex<BTreeMap<String, Option<String>>>>,
    denials: Arc<Mutex<Vec<Denial>>>,
    abort: CancellationToken,
}

fn new_read_files() -> ReadFiles {
    Arc::new(Mutex::new(lru::LruCache::new(
        NonZeroUsize::new(READ_FILE_CACHE).expect("the cache size is not zero"),
    )))
}

/// A session id: the time and process, enough to tell sessions apart in
/// hook logs (it is not a secret).
fn new_session_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "airlock-{:x}-{:x}-{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

impl ToolContext {
    /// A fresh context over `tools`: the cwd is the workspace (or `/`
    /// without one), in permission `mode` under `rules`.
    pub fn new(
        grants: &Grants,
        tools: Arc<Registry>,
        rules: PermissionRules,
        mode: PermissionMode,
    ) -> Self {
        let cwd = grants
            .workspace()
            .map_or_else(|| "/".to_string(), |w| w.guest.clone());
        ToolContext {
            tools,
            cwd,
            env: BTreeMap::new(),
            state: BTreeMap::new(),
            mode,
            session_id: new_session_id(),
            agent_id: None,
            read_files: new_read_files(),
            tenant: None,
            results_key: None,
            rules: Arc::new(RwLock::new(rules)),
            always: Arc::default(),
            denials: Arc::default(),
            abort: CancellationToken::new(),
        }
    }

    /// A context for a sub-agent: its own id, only the tools `keep`
    /// accepts, a copy of this context's cwd, env, mode, rules and file
    /// reads, and an abort handle that this context's interrupt also fires.
    pub fn sub_agent(
        &self,
        agent_id: impl Into<String>,
        keep: impl Fn(&Descriptor) -> bool,
    ) -> ToolContext {
        let files = self
            .read_files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let rules = self.rules().clone();
        let always = self
            .always
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        ToolContext {
            tools: Arc::new(self.tools.view(keep)),
            always: Arc::new(Mutex::new(always)),
            agent_id: Some(agent_id.into()),
            read_files: Arc::new(Mutex::new(files)),
            // Its own turn for instance slots, as its own file reads give it.
            tenant: None,
            rules: Arc::new(RwLock::new(rules)),
            denials: Arc::default(),
            abort: self.abort.child_token(),
            ..self.clone()
        }
    }

    /// The tools in view.
    pub fn tools(&self) -> &Arc<Registry> {
        &self.tools
    }

    /// Replaces the tools in view (the tool directories changed).
    pub fn set_tools(&mut self, tools: Arc<Registry>) {
        self.tools = tools;
    }

    /// The permission mode.
    pub fn mode(&self) -> PermissionMode {
        self.mode
    }

    /// Changes the permission mode.
    pub fn set_mode(&mut self, mode: PermissionMode) {
        self.mode = mode;
    }

    /// The session's id (sent to hooks).
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Whose turn this context's calls wait in for an instance slot: each
    /// context gets a fair share of the pool. A context kept between
    /// requests is rebuilt for each call, so it names itself by `key` (its
    /// id in a store); otherwise calls sharing this context's read-file
    /// cache share one turn.
    pub fn set_tenant(&mut self, key: &str) {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut hasher);
        self.tenant = Some(hasher.finish() as usize);
    }

    /// The name this context's saved (spilled) results are kept under,
    /// with the caller's identity
    /// ([`Owner`](crate::pipeline::results::Owner)): its session id, unless
    /// [`Self::set_results_key`] named it otherwise. A sub-agent's context
    /// keeps its parent's.
    pub fn results_key(&self) -> &str {
        self.results_key.as_deref().unwrap_or(&self.session_id)
    }

    /// Names this context for its saved results: a context kept between
    /// requests is rebuilt for each call, so it names itself by `key` (its
    /// name in a store, which [`crate::context_store::Contexts`] sets), and a
    /// front end's session by an id of its own, which it names again to
    /// read a result back.
    pub fn set_results_key(&mut self, key: &str) {
        self.results_key = Some(key.into());
    }

    /// The turn this context's calls wait in (see [`Self::set_tenant`]).
    pub fn tenant(&self) -> usize {
        self.tenant
            .unwrap_or(Arc::as_ptr(&self.read_files) as usize)
    }

    /// The permission rules in force (the configuration's, plus "always
    /// allow" answers).
    pub fn rules(&self) -> RwLockReadGuard<'_, PermissionRules> {
        self.rules.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a rule for the rest of this context (and its snapshots).
    pub fn add_rule(&self, kind: RuleKind, rule: Rule) {
        self.rules
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .add(kind, rule);
    }

    /// Allows every later call of tool `name` in this context (and its
    /// snapshots) while it runs the code with `digest` (an "always allow"
    /// answer: after a reload with other code under the same name, the
    /// user is asked again). Unlike [`Self::add_rule`], the rule is kept
    /// with the context when it is stored.
    pub fn allow_always(&self, name: &str, digest: Option<&str>) {
        let Ok(rule) = Rule::parse(name) else {
            return;
        };
        self.add_rule(RuleKind::Allow, rule.bound_to(digest));
        self.always
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), digest.map(str::to_string));
    }

    /// The calls denied so far.
    pub fn denials(&self) -> Vec<Denial> {
        self.denials
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records a denial.
    pub fn record_denial(&self, denial: Denial) {
        tracing::info!(tool = %denial.tool, source = %denial.source, "call denied: {}", denial.reason);
        self.denials
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(denial);
    }

    /// The abort handle: cancelling it is the user's interrupt.
    pub fn abort_handle(&self) -> &CancellationToken {
        &self.abort
    }

    /// A fresh abort handle, after an interrupt has been handled.
    pub fn renew_abort(&mut self) {
        self.abort = CancellationToken::new();
    }

    /// Applies a completed call's context changes (see [`ToolContext::apply`])
    /// and returns its result, with any refused changes noted on it.
    pub fn finish(&mut self, completed: Completed, exclusive: bool) -> ToolResult {
        let Completed {
            mut result,
            changes,
            grants,
        } = completed;
        result.refused_changes = self.apply(&result.name, &changes, &grants, exclusive);
        result
    }

    /// The working directory.
    pub fn cwd(&self) -> &str {
        &self.cwd
    }

    /// The environment tools have set.
    pub fn env(&self) -> &BTreeMap<String, String> {
        &self.env
    }

    /// The state `tool` has set.
    pub fn state_of(&self, tool: &str) -> Option<&BTreeMap<String, String>> {
        self.state.get(tool)
    }

    /// The calling agent's id, for a sub-agent's context.
    pub fn agent_id(&self) -> Option<&str> {
        self.agent_id.as_deref()
    }

    /// The read-file-state cache.
    pub fn read_files(&self) -> &ReadFiles {
        &self.read_files
    }

    /// When the agent last read `path`, as the host stamped it.
    pub fn file_stamp(&self, path: &str) -> Option<FileStamp> {
        let path = normalize_guest(path)?;
        self.read_files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .peek(&path)
            .copied()
    }

    /// What a call of `tool` knows about the agent.
    pub fn call_context(&self, tool: &str) -> CallContext {
        CallContext {
            cwd: self.cwd.clone(),
            tools: self.tools.clone(),
            agent_id: self.agent_id.clone(),
            state: self
                .state
                .get(tool)
                .map(|s| s.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default(),
        }
    }

    /// Applies the changes a call of `tool` returned, checking each against
    /// what that call could reach (`grants`). Changes other than recorded
    /// reads apply only when the call ran `exclusive`ly. Returns a sentence
    /// for each change that was refused or dropped (also logged).
    pub fn apply(
        &mut self,
        tool: &str,
        changes: &[ContextChange],
        grants: &CallGrants,
        exclusive: bool,
    ) -> Vec<String> {
        let mut refused = Vec::new();
        for change in changes {
            if let Err(why) = self.apply_one(tool, change, grants, exclusive) {
                tracing::warn!(tool, "context change refused: {why}");
                refused.push(why);
            }
        }
        refused
    }

    fn apply_one(
        &mut self,
        tool: &str,
        change: &ContextChange,
        grants: &CallGrants,
        exclusive: bool,
    ) -> Result<(), String> {
        if let ContextChange::RecordFileRead { path } = change {
            let path = self
                .absolute(path)
                .ok_or_else(|| format!("{path:?} is not a path"))?;
            let stamp = grants.stamp(&path).ok_or_else(|| {
                format!("{path} is not a file this call could reach; its read was not recorded")
            })?;
            self.read_files
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .put(path, stamp);
            return Ok(());
        }
        if !exclusive {
            return Err(format!(
                "{change:?} came from a call that ran concurrently with others, and only exclusive calls may change the context"
            ));
        }
        match change {
            ContextChange::SetCwd { path } => {
                let dir = self
                    .absolute(path)
                    .ok_or_else(|| format!("{path:?} is not a path"))?;
                if !grants.is_dir(&dir) {
                    return Err(format!(
                        "{dir} is not a directory the agent can reach; the cwd stays {}",
                        self.cwd
                    ));
                }
                self.cwd = dir;
            }
            ContextChange::SetEnv { name, value } => {
                if !is_env_name(name) {
                    return Err(format!("{name:?} is not an environment variable name"));
                }
                if value.len() > MAX_ENV_VALUE {
                    return Err(format!(
                        "the value of {name} is longer than {MAX_ENV_VALUE} bytes"
                    ));
                }
                if !self.env.contains_key(name) && self.env.len() >= MAX_ENV_VARS {
                    return Err(format!(
                        "the context already holds {MAX_ENV_VARS} variables"
                    ));
                }
                self.env.insert(name.clone(), value.clone());
            }
            ContextChange::UnsetEnv { name } => {
                self.env.remove(name);
            }
            ContextChange::SetState { key, value } => {
                if key.is_empty() || key.len() > MAX_STATE_KEY {
                    return Err(format!("state keys are 1 to {MAX_STATE_KEY} bytes"));
                }
                if value.len() > MAX_STATE_VALUE {
                    return Err(format!(
                        "the state value of {key:?} is longer than {MAX_STATE_VALUE} bytes"
                    ));
                }
                let own = self.state.entry(tool.to_string()).or_default();
                if !own.contains_key(key) && own.len() >= MAX_STATE_KEYS {
                    return Err(format!("{tool} already holds {MAX_STATE_KEYS} state keys"));
                }
                own.insert(key.clone(), value.clone());
            }
            ContextChange::RecordFileRead { .. } => unreachable!("handled above"),
        }
        Ok(())
    }

    /// What this context carries from one call to the next, as the fields
    /// of a [`crate::context_store::ContextStore`]: `cwd`; `env:NAME`;
    /// `state:` and the JSON of `[tool, key]`; `read:PATH` with the stamp
    /// (`MODIFIED_NS SIZE BLAKE3`).
    pub(crate) fn to_fields(&self) -> BTreeMap<String, String> {
        let mut fields = BTreeMap::new();
        fields.insert(FIELD_CWD.to_string(), self.cwd.clone());
        for (name, value) in &self.env {
            fields.insert(format!("{FIELD_ENV}{name}"), value.clone());
        }
        for (tool, own) in &self.state {
            for (key, value) in own {
                let name = serde_json::to_string(&(tool, key)).expect("strings serialize");
                fields.insert(format!("{FIELD_STATE}{name}"), value.clone());
            }
        }
        let always = self.always.lock().unwrap_or_else(|e| e.into_inner());
        for (tool, digest) in always.iter() {
            let digest = digest.clone().unwrap_or_default();
            fields.insert(format!("{FIELD_ALWAYS}{tool}"), digest);
        }
        let files = self.read_files.lock().unwrap_or_else(|e| e.into_inner());
        for (path, stamp) in files.iter() {
            fields.insert(
                format!("{FIELD_READ}{path}"),
                format!(
                    "{} {} {}",
                    stamp.modified_ns,
                    stamp.size,
                    blake3::Hash::from(stamp.blake3).to_hex()
                ),
            );
        }
        fields
    }

    /// Sets this context's values from stored `fields` (see
    /// [`ToolContext::to_fields`]); a field that does not parse is left
    /// out (and logged), never guessed at.
    pub(crate) fn restore_fields(&mut self, fields: &BTreeMap<String, String>) {
        let mut files = self.read_files.lock().unwrap_or_else(|e| e.into_inner());
        for (name, value) in fields {
            if name == FIELD_CWD {
                if let Some(cwd) = normalize_guest(value) {
                    self.cwd = cwd;
                    continue;
                }
            } else if let Some(env) = name.strip_prefix(FIELD_ENV) {
                if is_env_name(env) {
                    self.env.insert(env.to_string(), value.clone());
                    continue;
                }
            } else if let Some(key) = name.strip_prefix(FIELD_STATE) {
                if let Ok((tool, key)) = serde_json::from_str::<(String, String)>(key) {
                    self.state
                        .entry(tool)
                        .or_default()
                        .insert(key, value.clone());
                    continue;
                }
            } else if let Some(path) = name.strip_prefix(FIELD_READ)
                && let Some(stamp) = parse_stamp(value)
            {
                files.put(path.to_string(), stamp);
                continue;
            } else if let Some(tool) = name.strip_prefix(FIELD_ALWAYS)
                && Rule::parse(tool).is_ok()
            {
                let digest = (!value.is_empty()).then_some(value.as_str());
                self.allow_always(tool, digest);
                continue;
            }
            tracing::warn!(field = %name, "a stored context field is not understood; left out");
        }
    }

    /// `path` made absolute against the cwd and normalised.
    fn absolute(&self, path: &str) -> Option<String> {
        if path.starts_with('/') {
            normalize_guest(path)
        } else {
            normalize_guest(&format!("{}/{path}", self.cwd))
        }
    }
}

const FIELD_CWD: &str = "cwd";
const FIELD_ENV: &str = "env:";
const FIELD_STATE: &str = "state:";
const FIELD_READ: &str = "read:";
const FIELD_ALWAYS: &str = "always:";

/// A stamp as [`ToolContext::to_fields`] writes it.
fn parse_stamp(text: &str) -> Option<FileStamp> {
    let mut parts = text.split(' ');
    let modified_ns = parts.next()?.parse().ok()?;
    let size = parts.next()?.parse().ok()?;
    let hash = blake3::Hash::from_hex(parts.next()?).ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some(FileStamp {
        modified_ns,
        size,
        blake3: *hash.as_bytes(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_core::config::Config;
    use airlock_core::descriptor::SafetyFlags;
    use std::time::Duration;

    fn context(grants: &Grants) -> ToolContext {
        ToolContext::new(
            grants,
            Arc::new(Registry::new()),
            PermissionRules::default(),
            PermissionMode::default(),
        )
    }

    fn setup() -> (tempfile::TempDir, Grants, CallGrants) {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        std::fs::write(tmp.path().join("sub/f.txt"), "abc").unwrap();
        let config = Config {
            workspace: Some(tmp.path().to_path_buf()),
            ..Config::default()
        };
        let grants = Grants::from_config(&config).unwrap();
        let mut d = Descriptor::new("t", "t");
        d.capabilities.workspace = airlock_core::descriptor::WorkspaceAccess::Read;
        let call =
            grants
                .for_tool("t")
                .unwrap()
                .for_call(&d, SafetyFlags::empty(), &BTreeMap::new());
        assert_eq!(call.timeout, Duration::from_secs(60));
        (tmp, grants, call)
    }

    #[test]
    fn applies_checked_changes() {
        let (_tmp, grants, call) = setup();
        let mut cx = context(&grants);
        let root = cx.cwd().to_string();
        let refused = cx.apply(
            "t",
            &[
                ContextChange::SetCwd { path: "sub".into() },
                ContextChange::RecordFileRead {
                    path: "f.txt".into(),
                },
                ContextChange::SetEnv {
                    name: "A".into(),
                    value: "1".into(),
                },
                ContextChange::SetState {
                    key: "k".into(),
                    value: "v".into(),
                },
            ],
            &call,
            true,
        );
        assert!(refused.is_empty(), "{refused:?}");
        assert_eq!(cx.cwd(), format!("{root}/sub"));
        assert_eq!(cx.file_stamp(&format!("{root}/sub/f.txt")).unwrap().size, 3);
        assert_eq!(cx.env()["A"], "1");
        assert_eq!(
            cx.call_context("t").state,
            [("k".to_string(), "v".to_string())]
        );
        assert!(
            cx.call_context("other").state.is_empty(),
            "state is per tool"
        );
    }

    #[test]
    fn refuses_what_the_call_could_not_reach() {
        let (_tmp, grants, call) = setup();
        let mut cx = context(&grants);
        let root = cx.cwd().to_string();
        let refused = cx.apply(
            "t",
            &[
                ContextChange::SetCwd {
                    path: "/etc".into(),
                },
                ContextChange::SetCwd {
                    path: "sub/f.txt".into(),
                },
                ContextChange::RecordFileRead {
                    path: "/etc/passwd".into(),
                },
                ContextChange::SetEnv {
                    name: "1X".into(),
                    value: "v".into(),
                },
            ],
            &call,
            true,
        );
        assert_eq!(refused.len(), 4, "{refused:?}");
        assert_eq!(cx.cwd(), root);
        assert!(cx.file_stamp("/etc/passwd").is_none());
    }

    #[test]
    fn snapshots_share_records_but_not_values() {
        let (_tmp, grants, call) = setup();
        let mut cx = context(&grants);
        let snapshot = cx.clone();
        cx.apply(
            "t",
            &[ContextChange::SetEnv {
                name: "A".into(),
                value: "1".into(),
            }],
            &call,
            true,
        );
        assert!(snapshot.env().is_empty(), "a snapshot keeps its values");
        snapshot.add_rule(RuleKind::Allow, Rule::parse("write").unwrap());
        snapshot.record_denial(Denial {
            tool_use_id: "x".into(),
            tool: "t".into(),
            source: DecisionSource::User,
            reason: "no".into(),
        });
        assert_eq!(cx.denials().len(), 1, "denials are shared");
        let sub = cx.sub_agent("helper", |d| d.name == "read");
        assert_eq!(sub.agent_id(), Some("helper"));
        assert!(sub.denials().is_empty());
        cx.abort_handle().cancel();
        assert!(
            sub.abort_handle().is_cancelled(),
            "the parent's interrupt reaches the sub-agent"
        );
    }

    #[test]
    fn concurrent_calls_only_record_reads() {
        let (_tmp, grants, call) = setup();
        let mut cx = context(&grants);
        let refused = cx.apply(
            "t",
            &[
                ContextChange::SetCwd { path: "sub".into() },
                ContextChange::RecordFileRead {
                    path: "sub/f.txt".into(),
                },
            ],
            &call,
            false,
        );
        assert_eq!(refused.len(), 1);
        assert!(refused[0].contains("exclusive"));
        assert!(cx.file_stamp(&format!("{}/sub/f.txt", cx.cwd())).is_some());
    }
}
