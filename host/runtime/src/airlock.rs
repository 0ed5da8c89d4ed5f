//! [`Airlock`]: the host as an embedder holds it: the configuration, the
//! engine, the resolved grants, the registry and the policy (permission rules, hooks, the
//! prompter, the results directory), with one method to run a tool use
//! and one to start a streaming executor.

use crate::call::{CallControl, ToolResult, ToolUse};
use crate::context::ToolContext;
use crate::executor::{Calls, Executor};
use crate::pipeline::hooks::Hooks;
use crate::pipeline::prompt::{DenyPrompter, PermissionPrompter};
use crate::pipeline::results::ResultStore;
use crate::pipeline::{self, CallPolicy};
use crate::policy::PermissionRules;
use crate::registry::Registry;
use crate::skill_tool;
use airlock_audit::AuditLog;
use airlock_core::config::{Config, MountConfig};
use airlock_core::descriptor::Descriptor;
use airlock_core::descriptor::WorkspaceAccess;
use airlock_core::grants::Grants;
use airlock_core::lock::Lockfile;
use airlock_core::skills::Skills;
use airlock_engine::Engine;
use std::sync::Arc;

/// A loaded host: tools, grants, limits and policy, ready to run tool uses.
///
/// ```no_run
/// # async fn example() -> anyhow::Result<()> {
/// use airlock_host::{Airlock, Config, ToolUse};
/// use serde_json::json;
///
/// let config = Config { workspace: Some("/path/to/project".into()), ..Config::default() };
/// let airlock = Airlock::new(config).await?;
/// let mut cx = airlock.context();
/// let result = airlock
///     .call(&mut cx, ToolUse::new("toolu_1", "read", json!({"file_path": "README.md"})))
///     .await;
/// println!("{}", result.outcome?.text_content());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Airlock {
    config: Arc<Config>,
    engine: Engine,
    grants: Arc<Grants>,
    registry: Arc<Registry>,
    /// The permission rules a fresh context starts with.
    rules: Arc<PermissionRules>,
    policy: Arc<CallPolicy>,
    /// The skills, read at start and at each reload.
    skills: Arc<Skills>,
}

impl std::fmt::Debug for Airlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Airlock")
            .field("registry", &self.registry)
            .field("hooks", self.policy.hooks())
            .finish_non_exhaustive()
    }
}

impl Airlock {
    /// Resolves the grants in `config`, starts the engine, loads the tools
    /// and the hooks, and parses the permission rules. Fails only when the
    /// configuration itself is unusable; tools that fail to load are listed
    /// in [`Registry::failures`]. Permission prompts are denied until
    /// [`Airlock::with_prompter`] installs a prompter.
    pub async fn new(config: Config) -> anyhow::Result<Airlock> {
        let skills = read_skills(&config).await?;
        let granted = with_skill_mounts(&config, &skills);
        let grants = Arc::new(Grants::from_config(&granted)?);
        let engine = Engine::from_config(&config)?;
        let registry = Registry::load(&engine, &granted, &grants).await;
        let audit = crate::audit::open(&config)?;
        let config = Arc::new(config);
        let parts = (engine, grants, registry, skills);
        Airlock::assemble(config, parts, Arc::new(DenyPrompter), audit).await
    }

    /// Like [`Airlock::new`], but returns before the bundled tools are
    /// compiled: unless the artifact cache already lists them, they are
    /// listed from the descriptors this build recorded for their exact
    /// bytes and compiled in the background (see [`Registry::list`]). A
    /// call that comes first waits for its tool's compile. When a tool
    /// then describes itself otherwise than listed, or fails to load, its
    /// calls fail with the reason and [`Airlock::settled`] gives the host
    /// to use instead. Components the snapshot does not know (another
    /// build's, or a tool directory's not yet in the cache) are not listed
    /// yet ([`Registry::unlisted`]): they compile in the background, and
    /// [`Airlock::settled`] gives the host that lists them.
    pub async fn open(config: Config) -> anyhow::Result<Airlock> {
        let skills = read_skills(&config).await?;
        let granted = with_skill_mounts(&config, &skills);
        let grants = Arc::new(Grants::from_config(&granted)?);
        let engine = Engine::from_config(&config)?;
        let registry = Registry::list(&engine, &granted, &grants).await;
        let audit = crate::audit::open(&config)?;
        let config = Arc::new(config);
        let parts = (engine, grants, registry, skills);
        Airlock::assemble(config, parts, Arc::new(DenyPrompter), audit).await
    }

    /// Waits until the tools [`Airlock::open`] listed before compiling them
    /// are compiled, and the components it did not list yet; `None` when
    /// each tool described itself as listed and none was left to list,
    /// else the same host with the tools as they described themselves (a
    /// tool that failed is left out and listed in [`Registry::failures`])
    /// and the components compiled since listed (loaded again, from the
    /// artifact cache).
    pub async fn settled(&self) -> Option<Airlock> {
        let settled = self.registry.settled(&self.config, &self.grants).await;
        if !self.registry.unlisted().is_empty() {
            match self.reload().await {
                Ok(reloaded) => return Some(reloaded),
                Err(e) => tracing::error!(
                    "listing the tools compiled since the start failed: {e:#}; they are not \
                     listed until the tool directories change"
                ),
            }
        }
        let mut registry = match settled {
            Some(mut registry) => {
                registry.offer_skills(&self.skills, &self.grants);
                registry.offer_tool_search(self.config.tool_search, &self.grants);
                registry
            }
            None if self.registry.unlisted().is_empty() => return None,
            None => self.registry.as_ref().clone(),
        };
        // Nothing is left to wait for.
        registry.forget_unlisted();
        Some(Airlock {
            registry: Arc::new(registry),
            ..self.clone()
        })
    }

    /// An Airlock over an engine, grants and a registry built by hand (for
    /// embedders that register native tools), with the policy of `config`
    /// (the configuration the grants were resolved from).
    pub async fn from_parts(
        config: Config,
        engine: Engine,
        grants: Arc<Grants>,
        registry: Registry,
    ) -> anyhow::Result<Airlock> {
        let skills = read_skills(&config).await?;
        let audit = crate::audit::open(&config)?;
        let config = Arc::new(config);
        let parts = (engine, grants, registry, skills);
        Airlock::assemble(config, parts, Arc::new(DenyPrompter), audit).await
    }

    async fn assemble(
        config: Arc<Config>,
        (engine, grants, mut registry, skills): (Engine, Arc<Grants>, Registry, Arc<Skills>),
        prompter: Arc<dyn PermissionPrompter>,
        audit: Option<Arc<AuditLog>>,
    ) -> anyhow::Result<Airlock> {
        registry.offer_skills(&skills, &grants);
        registry.offer_tool_search(config.tool_search, &grants);
        let rules = PermissionRules::from_config(&config.permissions)
            .map_err(|e| anyhow::anyhow!("permissions: {e}"))?;
        let hooks = Hooks::load(&config.hooks, &engine).await?;
        let policy = Airlock::policy_of(&config, &grants, hooks, prompter, audit);
        Ok(Airlock {
            config,
            engine,
            registry: Arc::new(registry),
            rules: Arc::new(rules),
            policy: Arc::new(policy),
            grants,
            skills,
        })
    }

    fn policy_of(
        config: &Config,
        grants: &Grants,
        hooks: Hooks,
        prompter: Arc<dyn PermissionPrompter>,
        audit: Option<Arc<AuditLog>>,
    ) -> CallPolicy {
        CallPolicy::new(
            hooks,
            prompter,
            config
                .effective_results_dir()
                .map(|dir| ResultStore::new(&dir)),
            config.limits.json_depth,
            grants.workspace().map(|w| w.guest.clone()),
            audit.map(|log| crate::pipeline::Audited {
                log,
                keep_input: config.audit.inputs,
                secrets: grants.secrets().clone(),
            }),
        )
    }

    /// The trail for `config` after this host's: the same one when
    /// `[audit]` did not change, so its chain goes on.
    fn audit_for(&self, config: &Config) -> anyhow::Result<Option<Arc<AuditLog>>> {
        if config.audit == self.config.audit {
            Ok(self.policy.audit().cloned())
        } else {
            crate::audit::open(config)
        }
    }

    /// Records `kind` (a reload, an approval) with `fields` in the audit
    /// trail, when there is one. Fails only when the trail fails closed
    /// and cannot take the record.
    pub fn audit(
        &self,
        kind: &'static str,
        fields: serde_json::Map<String, serde_json::Value>,
    ) -> anyhow::Result<()> {
        match self.policy.audit() {
            Some(log) => log.record(kind, fields).map_err(|e| anyhow::anyhow!(e)),
            None => Ok(()),
        }
    }

    /// Records that the tools (and skills) were loaded again, with what
    /// came of it.
    fn audit_reload(&self, what: &str) {
        let Some(log) = self.policy.audit() else {
            return;
        };
        let mut fields = serde_json::Map::new();
        fields.insert("what".into(), what.into());
        let tools: Vec<serde_json::Value> = self
            .registry
            .entries()
            .into_iter()
            .map(|e| {
                serde_json::json!({
                    "name": e.descriptor().name,
                    "digest": e.tool.digest(),
                })
            })
            .collect();
        fields.insert("tools".into(), tools.into());
        fields.insert("failures".into(), self.registry.failures().len().into());
        let skills: Vec<String> = self.skills.skills.iter().map(|s| s.name.clone()).collect();
        fields.insert("skills".into(), skills.into());
        if let Err(e) = log.record("reload", fields) {
            tracing::error!("the reload could not be recorded in the audit trail: {e}");
        }
    }

    /// The same host, asking `prompter` when a call needs the user's
    /// permission.
    pub fn with_prompter(&self, prompter: Arc<dyn PermissionPrompter>) -> Airlock {
        Airlock {
            policy: Arc::new(self.policy.with_prompter(prompter)),
            ..self.clone()
        }
    }

    /// The same tools under `config`'s grants and policy, without
    /// recompiling them. When `config` names other tool sources (bundled
    /// tools, tool directories, MCP servers) or other limits, the tools are
    /// loaded afresh instead.
    pub async fn with_config(&self, config: Config) -> anyhow::Result<Airlock> {
        let old = &self.config;
        let same_sources = config.bundled_tools == old.bundled_tools
            && config.effective_tool_dirs() == old.effective_tool_dirs()
            && config.mcp_servers == old.mcp_servers
            && (config.mcp_servers.is_empty() || config.workspace == old.workspace)
            && config.skill_dirs() == old.skill_dirs();
        if !same_sources || &config.limits != self.engine.limits() {
            return self.loaded_under(config).await;
        }
        let granted = with_skill_mounts(&config, &self.skills);
        let grants = Arc::new(Grants::reopen(&granted, &self.grants)?);
        let registry = self.registry.regrant(&granted, &grants);
        let parts = (self.engine.clone(), grants, registry, self.skills.clone());
        self.succeeded_by(config, parts, "configuration").await
    }

    /// The host that takes this one's place, from `config` and `parts`,
    /// asking the same prompter, on the same trail (when `[audit]` did not
    /// change), which records the reload (`what` was loaded again).
    async fn succeeded_by(
        &self,
        config: Config,
        parts: (Engine, Arc<Grants>, Registry, Arc<Skills>),
        what: &str,
    ) -> anyhow::Result<Airlock> {
        let audit = self.audit_for(&config)?;
        let prompter = self.policy.prompter().clone();
        let airlock = Airlock::assemble(Arc::new(config), parts, prompter, audit).await?;
        airlock.audit_reload(what);
        Ok(airlock)
    }

    /// The same configuration with its tools (and skills) loaded afresh
    /// from their sources (the tool directories or the skills changed).
    /// Components already in the
    /// artifact cache are not recompiled, and MCP servers that still run
    /// are kept (see [`Registry::load_again`]).
    pub async fn reload(&self) -> anyhow::Result<Airlock> {
        self.loaded_under(self.config.as_ref().clone()).await
    }

    async fn loaded_under(&self, config: Config) -> anyhow::Result<Airlock> {
        let skills = read_skills(&config).await?;
        let granted = with_skill_mounts(&config, &skills);
        let grants = Arc::new(Grants::reopen(&granted, &self.grants)?);
        let engine = Engine::from_config(&config)?;
        let registry = self.registry.load_again(&engine, &granted, &grants).await;
        let parts = (engine, grants, registry, skills);
        self.succeeded_by(config, parts, "tools").await
    }

    /// The skills read at start or at the last reload (from
    /// [`Config::skill_dirs`]), and the
    /// folders that are not usable skills, with why.
    pub fn skills(&self) -> &Arc<Skills> {
        &self.skills
    }

    /// The tools.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The configuration this host was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The grants.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The hooks.
    pub fn hooks(&self) -> &Hooks {
        self.policy.hooks()
    }

    /// Who is asked when a call needs permission.
    pub fn prompter(&self) -> &dyn PermissionPrompter {
        self.policy.prompter().as_ref()
    }

    /// Where oversized results are saved, if anywhere: outside every grant,
    /// so an embedder hands a saved result to the caller that made the call
    /// with [`ResultStore::read`] and its
    /// [`Owner`](crate::pipeline::results::Owner) (the call's context and
    /// caller), or shows [`ToolResult::spilled_to`](crate::ToolResult) itself.
    pub fn results(&self) -> Option<&ResultStore> {
        self.policy.results()
    }

    /// What every use is checked and run against (the pipeline's half of
    /// this host).
    pub fn policy(&self) -> &Arc<CallPolicy> {
        &self.policy
    }

    /// A fresh agent context. Tools that a bare deny rule names (`"fetch"`)
    /// are not in its view at all.
    pub fn context(&self) -> ToolContext {
        ToolContext::new(
            &self.grants,
            self.visible_tools(),
            self.rules.as_ref().clone(),
            self.config.permissions.default_mode,
        )
    }

    /// The tools a fresh context sees: the registry without the tools a
    /// bare deny rule hides.
    pub fn visible_tools(&self) -> Arc<Registry> {
        Arc::new(self.registry.view(|d| !self.rules.hides(d)))
    }

    /// The same host with only the tools `keep` accepts in its registry.
    pub fn view(&self, keep: impl Fn(&Descriptor) -> bool) -> Airlock {
        Airlock {
            registry: Arc::new(self.registry.view(keep)),
            ..self.clone()
        }
    }

    /// Runs one tool use through the pipeline.
    pub async fn call(&self, cx: &mut ToolContext, tool_use: ToolUse) -> ToolResult {
        pipeline::call_alone(&self.policy, cx, tool_use, CallControl::default()).await
    }

    /// Runs one tool use, with progress and cancellation.
    pub async fn call_with(
        &self,
        cx: &mut ToolContext,
        tool_use: ToolUse,
        control: CallControl,
    ) -> ToolResult {
        pipeline::call_alone(&self.policy, cx, tool_use, control).await
    }

    /// Starts a streaming executor over `cx`: add tool uses as they arrive
    /// from the model, read results in order.
    pub fn executor(&self, cx: ToolContext) -> Executor {
        Executor::new(self, cx)
    }
}

impl From<&Airlock> for Calls {
    fn from(airlock: &Airlock) -> Calls {
        Calls {
            policy: airlock.policy.clone(),
            tools: airlock.visible_tools(),
        }
    }
}

impl From<Airlock> for Calls {
    fn from(airlock: Airlock) -> Calls {
        Calls::from(&airlock)
    }
}

/// Reads the skills of `config`'s skill directories, off the async
/// threads, those `airlock install` put in its skills directory held to
/// `airlock.lock`; each folder that is not a usable skill is logged.
async fn read_skills(config: &Config) -> anyhow::Result<Arc<Skills>> {
    let dirs = config.skill_dirs();
    let lock_path = config.lock_path();
    let skills = tokio::task::spawn_blocking(move || {
        let mut skills = Skills::load(&dirs);
        if let Some(installed) = airlock_core::config::default_skills_dir() {
            let lock = match &lock_path {
                Some(path) => Lockfile::read_as_written(path),
                None => Ok(Lockfile::default()),
            };
            skills.hold_to_lock(&installed, lock.as_ref().map_err(String::as_str));
        }
        skills
    })
    .await
    .map_err(|e| anyhow::anyhow!("reading the skills failed: {e}"))?;
    for failure in &skills.failures {
        tracing::warn!("a skill is not served: {failure}");
    }
    Ok(Arc::new(skills))
}

/// What the grants are resolved from: `config` with each skill's folder
/// mounted read-only into the tools that run its scripts
/// ([`skill_tool::RUNNERS`]: the bundled `bash`, and so the programs it
/// runs), at [`skill_tool::mount_path`]. A skill in the workspace is
/// reached there. The host keeps `config` as given, so a reload mounts the
/// skills as they are then (a removed skill's folder is not asked for).
fn with_skill_mounts(config: &Config, skills: &Skills) -> Config {
    let mut config = config.clone();
    if !config.bundled_tools || skills.is_empty() {
        return config;
    }
    let workspace = config
        .workspace
        .as_ref()
        .and_then(|w| w.canonicalize().ok());
    for skill in &skills.skills {
        let Ok(dir) = skill.dir.canonicalize() else {
            continue;
        };
        if workspace
            .as_ref()
            .is_some_and(|w| dir.starts_with(w) || w.starts_with(&dir))
        {
            continue;
        }
        let mount = MountConfig {
            host: dir,
            path: Some(skill_tool::mount_path(&skill.name)),
            access: WorkspaceAccess::Read,
        };
        for tool in skill_tool::RUNNERS {
            let mounts = &mut config.tools.entry(tool.to_string()).or_default().mounts;
            if !mounts.contains(&mount) {
                mounts.push(mount.clone());
            }
        }
    }
    config
}
