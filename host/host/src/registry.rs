//! The [`Registry`]: every tool the agent may call, by name and alias.
//!
//! It loads the bundled tools, every `*.wasm` in the tool directories and
//! the tools of the configured MCP servers (in parallel), checks each
//! component against its grants (a component importing `wasi:http` without
//! a network grant is refused, naming the import), rejects duplicate names and aliases with a clear error, and
//! compiles each tool's input schema. Native tools join through
//! [`Registry::add`]. A sub-agent gets a restricted [`Registry::view`].
//!
//! A tool that fails to load is not an error for the registry: it is kept
//! in [`Registry::failures`] with the reason, so a front end can show it.
//!
//! [`Registry::list`] does not wait for compiles it can do without: a
//! bundled tool (known by the digest of its bytes to the build's snapshot)
//! is listed from the snapshot and compiled in the background;
//! [`Registry::settled`] waits for those compiles and gives the registry
//! they leave when one described itself otherwise or failed.

use crate::approvals::Approvals;
use crate::tool_search::{self, ToolSearch};
use airlock_core::config::{Config, ToolSearchMode};
use airlock_core::descriptor::Descriptor;
use airlock_core::error::LoadError;
use airlock_core::grants::{Grants, ToolGrants};

use airlock_core::tool::{Catalog, Tool, ToolOrigin};
use airlock_engine::{
    Compiling, ComponentBytes, Engine, LoadedTool, Pending, Settled, Snapshot, component_files,
    component_sources, ungranted_network,
};
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// A tool that loaded: what stays the same whatever it is granted.
struct Loaded {
    tool: Arc<dyn Tool>,
    input_validator: Arc<jsonschema::Validator>,
    output_validator: Option<Arc<jsonschema::Validator>>,
    /// Imports that need a network grant.
    network_imports: Vec<String>,
    /// Set when it was listed from the bundled snapshot and may not be
    /// compiled yet.
    pending: Option<Pending>,
}

/// A registered tool, with what the host keeps about it.
pub struct Entry {
    /// The tool.
    pub tool: Arc<dyn Tool>,
    /// The tool's descriptor with the operator's overrides, when it has any.
    overridden: Option<Arc<Descriptor>>,
    /// What the operator granted it.
    pub grants: ToolGrants,
    pub(crate) input_validator: Arc<jsonschema::Validator>,
    pub(crate) output_validator: Option<Arc<jsonschema::Validator>>,
}

impl Entry {
    /// The tool's descriptor, with the operator's `defer_loading` when
    /// the configuration overrides it.
    pub fn descriptor(&self) -> &Descriptor {
        self.overridden
            .as_deref()
            .unwrap_or_else(|| self.tool.descriptor())
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.descriptor().name)
            .field("origin", self.tool.origin())
            .finish_non_exhaustive()
    }
}

/// A component that did not become a tool.
#[derive(Clone, Debug)]
pub struct LoadFailure {
    /// Where it came from.
    pub origin: ToolOrigin,
    /// Its name, if it got far enough to say.
    pub tool: Option<String>,
    /// Why it failed.
    pub error: LoadError,
}

impl std::fmt::Display for LoadFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.tool {
            Some(name) => write!(f, "{name} ({}): {}", self.origin, self.error),
            None => write!(f, "{}: {}", self.origin, self.error),
        }
    }
}

/// The tools in view.
#[derive(Clone, Default)]
pub struct Registry {
    /// Every tool that loaded, in source order (bundled, then directories).
    loaded: Vec<Arc<Loaded>>,
    /// Components that did not load.
    load_failures: Vec<LoadFailure>,
    entries: Vec<Arc<Entry>>,
    index: HashMap<String, usize>,
    failures: Vec<LoadFailure>,
    /// The MCP servers behind the loaded tools, for the next load to reuse.
    servers: Servers,
    /// The background compiles of the tools listed from the snapshot; done
    /// when all are.
    compiling: Option<Compiling>,
}

/// The MCP servers a load started.
#[cfg(feature = "mcp-client")]
type Servers = airlock_mcp_client::Servers;
/// Without the MCP client, none.
#[cfg(not(feature = "mcp-client"))]
#[derive(Clone, Default)]
struct Servers;

impl Catalog for Registry {
    fn descriptor(&self, name: &str) -> Option<&Descriptor> {
        self.get(name).map(|e| e.descriptor())
    }

    fn descriptors(&self) -> Vec<&Descriptor> {
        self.entries().into_iter().map(|e| e.descriptor()).collect()
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("entries", &self.entries)
            .field("failures", &self.failures)
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Loads the bundled tools (unless configured off), every `*.wasm` in
    /// the configured tool directories and the tools of the configured MCP
    /// servers (started meanwhile), then grants them
    /// (see [`Registry::regrant`]).
    pub async fn load(engine: &Engine, config: &Config, grants: &Grants) -> Registry {
        Registry::new().load_again(engine, config, grants).await
    }

    /// Loads like [`Registry::load`], but a tool whose code changed since
    /// this registry loaded it (another digest under the same name) is not
    /// served until its new digest is approved ([`crate::approvals`]): the
    /// version loaded before stays, and the change is listed in
    /// [`Registry::failures`]. It also keeps the MCP servers this
    /// registry started that still run and whose configuration (and
    /// working directory) `config` leaves unchanged: their tools are listed
    /// again over the same connection, so reloading for a new component
    /// neither restarts a server nor loses its state. Other servers are
    /// started, and the ones no longer configured stop when the last
    /// registry holding their tools is dropped.
    pub async fn load_again(&self, engine: &Engine, config: &Config, grants: &Grants) -> Registry {
        self.gather(engine, config, grants, None).await
    }

    /// Loads like [`Registry::load`], but returns without compiling the
    /// components the bundled snapshot describes (the bundled tools, unless
    /// the artifact cache already lists them): they are listed as the
    /// snapshot says and compiled in the background, a few at a time; a
    /// use of one that comes first waits for its compile. When one
    /// describes itself otherwise than listed, or fails, its uses fail
    /// with the reason, and [`Registry::settled`] gives the registry to
    /// use instead.
    pub async fn list(engine: &Engine, config: &Config, grants: &Grants) -> Registry {
        static BUNDLED: OnceLock<Arc<Snapshot>> = OnceLock::new();
        let snapshot =
            BUNDLED.get_or_init(|| Arc::new(Snapshot::parse(airlock_bundled::DESCRIPTORS)));
        Registry::list_from(engine, config, grants, snapshot.clone()).await
    }

    /// [`Registry::list`] with the descriptors of `snapshot`.
    pub(crate) async fn list_from(
        engine: &Engine,
        config: &Config,
        grants: &Grants,
        snapshot: Arc<Snapshot>,
    ) -> Registry {
        Registry::new()
            .gather(engine, config, grants, Some(snapshot))
            .await
    }

    /// Waits until every tool listed from the bundled snapshot is compiled
    /// (see [`Registry::list`]); `None` when each described itself as
    /// listed, else the same registry under `grants` with each that
    /// described itself otherwise listed as it did, and each that failed
    /// moved to [`Registry::failures`].
    pub async fn settled(&self, config: &Config, grants: &Grants) -> Option<Registry> {
        if let Some(compiling) = &self.compiling {
            compiling.clone().await;
        }
        let mut changed = false;
        let mut loaded = Vec::with_capacity(self.loaded.len());
        let mut load_failures = self.load_failures.clone();
        for l in &self.loaded {
            let Some(pending) = &l.pending else {
                loaded.push(l.clone());
                continue;
            };
            let origin = pending.tool().origin().clone();
            let name = Some(pending.tool().descriptor().name.clone());
            match pending.settle().await {
                Settled::AsListed => loaded.push(l.clone()),
                Settled::Differs(relisted) => {
                    changed = true;
                    match prepare(relisted.tool, relisted.network_imports) {
                        Ok(l) => loaded.push(Arc::new(l)),
                        Err(error) => load_failures.push(LoadFailure {
                            origin,
                            tool: name,
                            error,
                        }),
                    }
                }
                Settled::Failed(error) => {
                    changed = true;
                    load_failures.push(LoadFailure {
                        origin,
                        tool: name,
                        error,
                    });
                }
            }
        }
        if !changed {
            return None;
        }
        let mut registry = Registry {
            loaded,
            load_failures,
            servers: self.servers.clone(),
            ..Registry::default()
        };
        registry.grant(config, grants);
        Some(registry)
    }

    async fn gather(
        &self,
        engine: &Engine,
        config: &Config,
        grants: &Grants,
        snapshot: Option<Arc<Snapshot>>,
    ) -> Registry {
        let mut sources: Vec<(ToolOrigin, ComponentBytes)> = Vec::new();
        if config.bundled_tools {
            for (package, bytes) in airlock_bundled::BUNDLED {
                sources.push((
                    ToolOrigin::Bundled(package.to_string()),
                    Ok(Arc::from(*bytes)),
                ));
            }
        }
        let mut load_failures = Vec::new();
        for dir in config.effective_tool_dirs() {
            match component_sources(&dir, engine.limits().component_bytes) {
                Ok(files) => sources.extend(files),
                Err(error) => load_failures.push(LoadFailure {
                    origin: ToolOrigin::File(dir.clone()),
                    tool: None,
                    error,
                }),
            }
        }

        let servers = tokio::spawn({
            let config = config.clone();
            let previous = self.servers.clone();
            async move { mcp_servers(&config, &previous).await }
        });
        let (results, bounds) = engine.load_all(sources, snapshot).await;

        let mut loaded = Vec::new();
        let (mounted, failed, running) = match servers.await {
            Ok(started) => started,
            Err(e) => {
                tracing::error!("the MCP server loader task failed: {e}");
                (Vec::new(), Vec::new(), Default::default())
            }
        };
        for (origin, error) in failed {
            load_failures.push(LoadFailure {
                origin,
                tool: None,
                error,
            });
        }
        let mut listed = Vec::new();
        let servers = mounted.into_iter().map(|tool| {
            let origin = tool.origin().clone();
            let loaded = LoadedTool {
                tool,
                network_imports: Vec::new(),
                pending: None,
            };
            (origin, Ok(loaded))
        });
        for (origin, tool) in results.into_iter().chain(servers) {
            let prepared = tool.and_then(|loaded| {
                let mut l = prepare(loaded.tool, loaded.network_imports)?;
                if let Some(pending) = loaded.pending {
                    listed.push(pending.clone());
                    l.pending = Some(pending);
                }
                Ok(l)
            });
            match prepared {
                Ok(l) => loaded.push(Arc::new(l)),
                Err(error) => load_failures.push(LoadFailure {
                    origin,
                    tool: None,
                    error,
                }),
            }
        }
        let approvals = config
            .effective_approvals_file()
            .map(|path| Approvals::read(&path))
            .unwrap_or_default();
        let loaded = hold_changed(self, loaded, &approvals, &mut load_failures);
        let mut registry = Registry {
            loaded,
            load_failures,
            servers: running,
            compiling: bounds.compile_in_background(listed),
            ..Registry::default()
        };
        registry.grant(config, grants);
        registry
    }

    /// The same tools under other grants (nothing is recompiled): each tool
    /// gets its grants, is dropped when switched off, and is refused when it
    /// imports `wasi:http` without a network grant it could use. A name
    /// belongs to one tool: of several with the same code, the first is
    /// kept; of others, the one whose file `[tools.NAME] source` names,
    /// else the first loaded (bundled tools, then the directories in
    /// order), and the rest are refused, saying how to choose. A clash of
    /// aliases, or with a built-in's name, is refused.
    pub fn regrant(&self, config: &Config, grants: &Grants) -> Registry {
        let mut registry = Registry {
            loaded: self.loaded.clone(),
            load_failures: self.load_failures.clone(),
            servers: self.servers.clone(),
            compiling: self.compiling.clone(),
            ..Registry::default()
        };
        registry.grant(config, grants);
        registry
    }

    fn grant(&mut self, config: &Config, grants: &Grants) {
        self.entries.clear();
        self.index.clear();
        self.failures = self.load_failures.clone();
        let (kept, refused) = owners(&self.loaded, config);
        for (loaded, error) in refused {
            let d = loaded.tool.descriptor();
            self.fail(loaded.tool.origin().clone(), &d.name, error);
        }
        for loaded in kept {
            let d = loaded.tool.descriptor();
            let origin = loaded.tool.origin().clone();
            let tool_grants = match grants.for_tool(&d.name) {
                Ok(g) => g,
                Err(error) => {
                    self.fail(origin, &d.name, error);
                    continue;
                }
            };
            if !tool_grants.enabled {
                tracing::info!(tool = %d.name, "switched off in the configuration");
                continue;
            }
            if let Some(error) = ungranted_network(d, &loaded.network_imports, &tool_grants) {
                self.fail(origin, &d.name, error);
                continue;
            }
            if let Err(error) = self.register(&loaded, tool_grants) {
                self.fail(origin, &d.name, error);
            }
        }
    }

    fn fail(&mut self, origin: ToolOrigin, name: &str, error: LoadError) {
        self.failures.push(LoadFailure {
            origin,
            tool: Some(name.to_string()),
            error,
        });
    }

    fn reindex(&mut self) {
        self.index.clear();
        for (i, entry) in self.entries.iter().enumerate() {
            let d = entry.descriptor();
            for name in std::iter::once(&d.name).chain(&d.aliases) {
                self.index.insert(name.clone(), i);
            }
        }
    }

    /// Registers a tool that is not a loaded component (a native tool, or
    /// one loaded by hand) under `grants`: checks its descriptor and names,
    /// and compiles its schemas.
    pub fn add(&mut self, tool: Arc<dyn Tool>, grants: ToolGrants) -> Result<(), LoadError> {
        let loaded = Arc::new(prepare(tool, Vec::new())?);
        self.register(&loaded, grants)?;
        self.loaded.push(loaded);
        Ok(())
    }

    fn register(&mut self, loaded: &Loaded, grants: ToolGrants) -> Result<(), LoadError> {
        let d = loaded.tool.descriptor();
        let from_mcp = matches!(loaded.tool.origin(), ToolOrigin::Mcp(_));
        if *loaded.tool.origin() != ToolOrigin::Builtin
            && let Some(name) = std::iter::once(&d.name)
                .chain(&d.aliases)
                .find(|n| BUILTIN_NAMES.contains(&n.as_str()))
        {
            return Err(LoadError::Duplicate {
                name: name.clone(),
                other: "a tool built into Airlock (the name is reserved)".into(),
            });
        }
        if let Some(name) = std::iter::once(&d.name)
            .chain(&d.aliases)
            .find(|n| n.starts_with("mcp__") != from_mcp)
        {
            return Err(LoadError::InvalidDescriptor {
                tool: d.name.clone(),
                problems: vec![format!(
                    "the name {name:?}: names starting with `mcp__` belong to the tools of MCP servers, and theirs only"
                )],
            });
        }
        for name in std::iter::once(&d.name).chain(&d.aliases) {
            if let Some(&i) = self.index.get(name) {
                let other = &self.entries[i];
                return Err(LoadError::Duplicate {
                    name: name.clone(),
                    other: format!("`{}` ({})", other.descriptor().name, other.tool.origin()),
                });
            }
        }
        let i = self.entries.len();
        for name in std::iter::once(&d.name).chain(&d.aliases) {
            self.index.insert(name.clone(), i);
        }
        let overridden = grants
            .defer_loading
            .filter(|&defer| defer != d.defer_loading)
            .map(|defer_loading| {
                Arc::new(Descriptor {
                    defer_loading,
                    ..d.clone()
                })
            });
        self.entries.push(Arc::new(Entry {
            tool: loaded.tool.clone(),
            overridden,
            grants,
            input_validator: loaded.input_validator.clone(),
            output_validator: loaded.output_validator.clone(),
        }));
        Ok(())
    }

    /// Offers the built-in `tool_search` as `mode` says (`auto`: when some
    /// tool is deferred), replacing one already registered, then settles
    /// deferral (see [`Registry::view`]). The search itself is never
    /// deferred, whatever the configuration says.
    pub fn offer_tool_search(&mut self, mode: ToolSearchMode, grants: &Grants) {
        self.loaded.retain(|l| !is_search(&l.tool));
        self.entries.retain(|e| !is_search(&e.tool));
        self.reindex();
        let wanted = match mode {
            ToolSearchMode::On => true,
            ToolSearchMode::Off => false,
            ToolSearchMode::Auto => self.entries.iter().any(|e| e.descriptor().defer_loading),
        };
        if wanted {
            let result = grants.for_tool(tool_search::NAME).and_then(|mut g| {
                if !g.enabled {
                    return Ok(());
                }
                g.defer_loading = None;
                self.add(Arc::new(ToolSearch::new(self)), g)
            });
            if let Err(error) = result {
                self.fail(ToolOrigin::Builtin, tool_search::NAME, error);
            }
        }
        self.settle_search();
    }

    /// Keeps deferral and the search agreeing: with `tool_search` in this
    /// registry, its prompt names the deferred tools here (a view names
    /// only what its agent may call); without it, nothing is deferred, since
    /// a deferred tool could never be found.
    fn settle_search(&mut self) {
        let search = self
            .index
            .get(tool_search::NAME)
            .copied()
            .filter(|&i| is_search(&self.entries[i].tool));
        if let Some(i) = search {
            let fresh: Arc<dyn Tool> = Arc::new(ToolSearch::new(self));
            let old = &self.entries[i];
            self.entries[i] = Arc::new(Entry {
                tool: fresh,
                overridden: None,
                grants: old.grants.clone(),
                input_validator: old.input_validator.clone(),
                output_validator: old.output_validator.clone(),
            });
            return;
        }
        for entry in &mut self.entries {
            let d = entry.descriptor();
            if d.defer_loading {
                let listed = Descriptor {
                    defer_loading: false,
                    ..d.clone()
                };
                *entry = Arc::new(Entry {
                    tool: entry.tool.clone(),
                    overridden: Some(Arc::new(listed)),
                    grants: entry.grants.clone(),
                    input_validator: entry.input_validator.clone(),
                    output_validator: entry.output_validator.clone(),
                });
            }
        }
    }

    /// The tool answering to `name` (a name or an alias).
    pub fn get(&self, name: &str) -> Option<&Arc<Entry>> {
        self.index.get(name).map(|&i| &self.entries[i])
    }

    /// Every tool, sorted by name.
    pub fn entries(&self) -> Vec<&Arc<Entry>> {
        let mut all: Vec<_> = self.entries.iter().collect();
        all.sort_by(|a, b| a.descriptor().name.cmp(&b.descriptor().name));
        all
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The components that did not become tools, and why.
    pub fn failures(&self) -> &[LoadFailure] {
        &self.failures
    }

    /// A registry with only the tools `keep` accepts (for a sub-agent, or
    /// an agent's context without the tools a bare deny rule hides). The
    /// tools themselves are shared, not reloaded; `tool_search`'s prompt
    /// names only the deferred tools in the view, and without the search
    /// in the view nothing in it is deferred.
    ///
    /// ```
    /// # use airlock_host::Registry;
    /// let all = Registry::new();
    /// let readers = all.view(|d| d.flags.contains(airlock_host::SafetyFlags::READ_ONLY));
    /// assert!(readers.is_empty());
    /// ```
    pub fn view(&self, keep: impl Fn(&Descriptor) -> bool) -> Registry {
        let mut view = Registry {
            loaded: self
                .loaded
                .iter()
                .filter(|l| keep(l.tool.descriptor()))
                .cloned()
                .collect(),
            load_failures: self.load_failures.clone(),
            entries: self
                .entries
                .iter()
                .filter(|e| keep(e.descriptor()))
                .cloned()
                .collect(),
            index: HashMap::new(),
            failures: self.failures.clone(),
            servers: self.servers.clone(),
            compiling: self.compiling.clone(),
        };
        view.reindex();
        view.settle_search();
        view
    }
}

/// Whether `tool` is the built-in `tool_search`.
fn is_search(tool: &Arc<dyn Tool>) -> bool {
    tool.origin() == &ToolOrigin::Builtin && tool.descriptor().name == tool_search::NAME
}

/// What mounting the MCP servers gave: their tools, the servers or tools
/// that failed, and the servers.
type Mounted = (Vec<Arc<dyn Tool>>, Vec<(ToolOrigin, LoadError)>, Servers);

/// The tools of the configured MCP servers (reusing `previous` ones where
/// they fit), and the servers or tools that failed.
#[cfg(feature = "mcp-client")]
async fn mcp_servers(config: &Config, previous: &Servers) -> Mounted {
    let (tools, failed, servers) = airlock_mcp_client::mount(config, previous).await;
    let tools = tools
        .into_iter()
        .map(|t| Arc::new(t) as Arc<dyn Tool>)
        .collect();
    (tools, failed, servers)
}

/// Without the `mcp-client` feature, each configured server is a failure
/// that says so.
#[cfg(not(feature = "mcp-client"))]
async fn mcp_servers(config: &Config, _previous: &Servers) -> Mounted {
    let failed = config
        .mcp_servers
        .iter()
        .filter(|(_, server)| server.enabled != Some(false))
        .map(|(name, _)| {
            let error = LoadError::McpServer(
                "this build of Airlock has no MCP client (cargo feature `mcp-client`)".into(),
            );
            (ToolOrigin::Mcp(name.clone()), error)
        })
        .collect();
    (Vec::new(), failed, Servers)
}

/// Checks a tool's descriptor and compiles its schemas.
fn prepare(tool: Arc<dyn Tool>, network_imports: Vec<String>) -> Result<Loaded, LoadError> {
    let d = tool.descriptor();
    let problems = d.problems();
    if !problems.is_empty() {
        return Err(LoadError::InvalidDescriptor {
            tool: d.name.clone(),
            problems,
        });
    }
    let schema_problem = |what: &str, e: String| LoadError::InvalidDescriptor {
        tool: d.name.clone(),
        problems: vec![format!("the {what} is not a usable JSON Schema: {e}")],
    };
    let input_validator =
        compile_schema(&d.input_schema).map_err(|e| schema_problem("input schema", e))?;
    let output_validator = d
        .output_schema
        .as_ref()
        .map(compile_schema)
        .transpose()
        .map_err(|e| schema_problem("output schema", e))?;
    Ok(Loaded {
        input_validator: Arc::new(input_validator),
        output_validator: output_validator.map(Arc::new),
        network_imports,
        pending: None,
        tool,
    })
}

/// Compiles a tool's schema. Only local `$ref`s are allowed: a tool must
/// not make the host fetch anything to understand its input.
fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, String> {
    if let Some(r) = find_remote_ref(schema) {
        return Err(format!(
            "it refers to {r:?}; only local references (#...) are allowed"
        ));
    }
    jsonschema::validator_for(schema).map_err(|e| e.to_string())
}

fn find_remote_ref(schema: &Value) -> Option<&str> {
    let mut stack = vec![schema];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                for (key, value) in map {
                    if (key == "$ref" || key == "$dynamicRef")
                        && let Some(r) = value.as_str().filter(|r| !r.starts_with('#'))
                    {
                        return Some(r);
                    }
                    stack.push(value);
                }
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    None
}

/// `fresh`, with each tool whose code differs from the code `previous`
/// served under its name replaced by what it served, unless the new code
/// is approved; each change held back is reported in `failures`.
fn hold_changed(
    previous: &Registry,
    fresh: Vec<Arc<Loaded>>,
    approvals: &Approvals,
    failures: &mut Vec<LoadFailure>,
) -> Vec<Arc<Loaded>> {
    fresh
        .into_iter()
        .map(|new| {
            let name = new.tool.descriptor().name.as_str();
            let Some(now) = new.tool.digest() else {
                return new;
            };
            // By name, wherever the file is now: moving a component to
            // another file or directory does not make it approved.
            let Some(was) = previous
                .get(name)
                .filter(|served| served.descriptor().name == name)
                .and_then(|served| served.tool.digest())
            else {
                return new;
            };
            if was == now || approvals.approves(name, now) {
                return new;
            }
            let Some(old) = previous
                .loaded
                .iter()
                .find(|l| l.tool.descriptor().name == name && l.tool.digest() == Some(was))
            else {
                return new;
            };
            tracing::warn!(
                tool = name,
                "its component changed; the version loaded before is served until \
                 `airlock approve {name}`"
            );
            failures.push(LoadFailure {
                origin: new.tool.origin().clone(),
                tool: Some(name.to_string()),
                error: LoadError::Unapproved {
                    name: name.to_string(),
                    was: was.to_string(),
                    now: now.to_string(),
                },
            });
            old.clone()
        })
        .collect()
}

/// A tool refused its name, and why.
type Refused = (Arc<Loaded>, LoadError);

/// Names no loaded tool may take: the built-in tools'.
const BUILTIN_NAMES: &[&str] = &[tool_search::NAME];

/// Which of `loaded` may take their names: of tools with the same name,
/// one with the same code as an earlier one is dropped (the same tool
/// twice, such as a bundled tool also installed in a tool directory); of
/// the rest, the one from the file `[tools.NAME] source` names, else the
/// first. Returns the tools kept, in order, and the ones refused with why.
fn owners(loaded: &[Arc<Loaded>], config: &Config) -> (Vec<Arc<Loaded>>, Vec<Refused>) {
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, l) in loaded.iter().enumerate() {
        by_name
            .entry(l.tool.descriptor().name.as_str())
            .or_default()
            .push(i);
    }
    let mut dropped = vec![false; loaded.len()];
    let mut refused = Vec::new();
    for (name, claimants) in by_name.into_iter().filter(|(_, c)| c.len() > 1) {
        let mut distinct: Vec<usize> = Vec::new();
        for &i in &claimants {
            let digest = loaded[i].tool.digest();
            if digest.is_some() && distinct.iter().any(|&k| loaded[k].tool.digest() == digest) {
                dropped[i] = true;
            } else {
                distinct.push(i);
            }
        }
        if distinct.len() < 2 {
            continue;
        }
        let source = config
            .tool_config(name)
            .source
            .map(|s| std::fs::canonicalize(&s).unwrap_or(s));
        let is_source = |i: usize| match (loaded[i].tool.origin(), &source) {
            (ToolOrigin::File(file), Some(source)) => {
                std::fs::canonicalize(file).unwrap_or_else(|_| file.clone()) == *source
            }
            _ => false,
        };
        let owner = distinct
            .iter()
            .copied()
            .find(|&i| is_source(i))
            .unwrap_or(distinct[0]);
        if source.is_some() && !is_source(owner) {
            tracing::warn!(
                tool = name,
                "tools.{name}.source names no component that was loaded; keeping the first"
            );
        }
        for &i in distinct.iter().filter(|&&i| i != owner) {
            dropped[i] = true;
            if is_source(owner) {
                tracing::info!(
                    tool = name,
                    "tools.{name}.source chooses {}",
                    loaded[owner].tool.origin()
                );
                continue;
            }
            let hint = match loaded[i].tool.origin() {
                ToolOrigin::File(file) => format!(
                    "; to use this one instead, set `source = \"{}\"` under [tools.{name}]",
                    file.display()
                ),
                _ => String::new(),
            };
            refused.push((
                loaded[i].clone(),
                LoadError::Duplicate {
                    name: name.to_string(),
                    other: format!("{}{hint}", describe_owner(&loaded[owner])),
                },
            ));
        }
    }
    let kept = loaded
        .iter()
        .zip(&dropped)
        .filter(|(_, d)| !**d)
        .map(|(l, _)| l.clone())
        .collect();
    (kept, refused)
}

fn describe_owner(loaded: &Loaded) -> String {
    format!(
        "`{}` ({})",
        loaded.tool.descriptor().name,
        loaded.tool.origin()
    )
}

/// What the tool directories hold, and the approvals file: each file with
/// its size and modification time, in order. Two equal stamps mean nothing
/// to reload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceStamp(Vec<(PathBuf, u64, Option<std::time::SystemTime>)>);

impl SourceStamp {
    /// Stamps the component files in `config`'s tool directories and its
    /// approvals file now (a directory that cannot be listed counts as
    /// empty).
    pub fn of(config: &Config) -> SourceStamp {
        let files = config
            .effective_tool_dirs()
            .iter()
            .flat_map(|dir| component_files(dir).unwrap_or_default())
            .chain(config.effective_approvals_file())
            .map(|file| {
                let meta = std::fs::metadata(&file).ok();
                let len = meta.as_ref().map_or(0, |m| m.len());
                let modified = meta.and_then(|m| m.modified().ok());
                (file, len, modified)
            })
            .collect();
        SourceStamp(files)
    }
}

/// Test helpers for the crates above (feature `test-support`): tools
/// listed from a snapshot under a throwaway configuration.
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod testing {
    use super::*;
    use crate::Airlock;
    use airlock_core::permissions::PermissionMode;
    use airlock_engine::testing::{Described, describe_now};

    /// A workspace holding `a.txt`, a tool directory holding `files`,
    /// and an empty artifact cache.
    pub struct Setup {
        /// The directory holding everything.
        pub tmp: tempfile::TempDir,
        /// The configuration.
        pub config: Config,
        /// Its grants.
        pub grants: Arc<Grants>,
        /// Its engine.
        pub engine: Engine,
    }

    /// [`Setup`] with `files` in its tool directory.
    pub fn setup(files: &[(&str, &[u8])]) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let (ws, tools) = (tmp.path().join("ws"), tmp.path().join("tools"));
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("a.txt"), "hello").unwrap();
        std::fs::create_dir(&tools).unwrap();
        for (name, bytes) in files {
            std::fs::write(tools.join(name), bytes).unwrap();
        }
        let mut config = Config {
            workspace: Some(ws),
            tool_dirs: Some(vec![tools]),
            bundled_tools: false,
            cache_dir: Some(tmp.path().join("cache")),
            approvals: Some(tmp.path().join("approved.json")),
            ..Config::default()
        };
        config.permissions.default_mode = PermissionMode::BypassPermissions;
        let grants = Arc::new(Grants::from_config(&config).unwrap());
        let engine = Engine::from_config(&config).unwrap();
        Setup {
            tmp,
            config,
            grants,
            engine,
        }
    }

    impl Setup {
        /// A host over `registry` under this setup's configuration.
        pub async fn airlock(&self, registry: Registry) -> Airlock {
            Airlock::from_parts(
                self.config.clone(),
                self.engine.clone(),
                self.grants.clone(),
                registry,
            )
            .await
            .unwrap()
        }
    }

    /// The bundled `ls` component (feature `bundled-tools`).
    pub fn ls_bytes() -> &'static [u8] {
        airlock_bundled::BUNDLED
            .iter()
            .find(|(p, _)| *p == "airlock-tool-ls")
            .map(|(_, bytes)| *bytes)
            .unwrap()
    }

    /// `s`'s tools, listed from a snapshot of `entries`.
    pub async fn listed(s: &Setup, entries: Vec<Described>) -> Registry {
        let snapshot = Arc::new(Snapshot::of(entries));
        Registry::list_from(&s.engine, &s.config, &s.grants, snapshot).await
    }

    /// What the bundled `ls` says about itself now.
    pub async fn describe_ls() -> Described {
        describe_now("airlock-tool-ls", ls_bytes()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn remote_refs_are_refused() {
        assert!(compile_schema(&json!({"type": "object", "$defs": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a"}}})).is_ok());
        let err = compile_schema(&json!({"type": "object", "properties": {"x": {"$ref": "https://evil.example/s.json"}}})).unwrap_err();
        assert!(err.contains("evil.example"), "{err}");
    }

    /// Tools listed from a snapshot before they are compiled.
    #[cfg(feature = "bundled-tools")]
    mod listing {
        use super::super::testing::{Setup, describe_ls, listed, ls_bytes, setup};
        use super::*;
        use crate::Airlock;
        use crate::call::ToolUse;

        /// The compiled components in the artifact cache.
        fn artifacts(s: &Setup) -> usize {
            std::fs::read_dir(s.tmp.path().join("cache"))
                .unwrap()
                .filter(|e| {
                    let path = e.as_ref().unwrap().path();
                    path.extension().is_some_and(|x| x == "cwasm")
                })
                .count()
        }

        async fn ls_in(airlock: &Airlock) -> Result<String, String> {
            let mut cx = airlock.context();
            let call = ToolUse::new("toolu_1", "ls", json!({}));
            let result = airlock.call(&mut cx, call).await;
            result
                .outcome
                .map(|out| out.text_content())
                .map_err(|e| e.message)
        }

        #[tokio::test]
        async fn a_tool_in_the_snapshot_is_listed_at_once_and_compiled_in_the_background() {
            let described = describe_ls().await;
            let s = setup(&[("ls.wasm", ls_bytes())]);
            let registry = listed(&s, vec![described.clone()]).await;
            assert_eq!(
                registry.get("ls").unwrap().descriptor(),
                &described.descriptor
            );
            let pending = registry.loaded[0].pending.clone();
            assert!(pending.is_some(), "listed from the snapshot");
            assert!(
                registry.settled(&s.config, &s.grants).await.is_none(),
                "as listed"
            );
            assert!(pending.unwrap().is_ready(), "compiled in the background");
            assert_eq!(artifacts(&s), 1, "and cached");
            let airlock = s.airlock(registry).await;
            assert!(ls_in(&airlock).await.unwrap().contains("a.txt"));
        }

        #[tokio::test]
        async fn a_stale_entry_is_not_used_and_the_tool_is_compiled_first() {
            let described = describe_ls().await;
            let mut stale = described.clone();
            stale.blake3 = blake3::hash(b"an older build").to_hex().to_string();
            stale.descriptor.description = "what an older build said".into();
            let s = setup(&[("ls.wasm", ls_bytes())]);
            let registry = listed(&s, vec![stale]).await;
            assert!(registry.loaded[0].pending.is_none(), "compiled at load");
            assert_eq!(
                artifacts(&s),
                1,
                "compiled before the registry was returned"
            );
            assert_eq!(
                registry.get("ls").unwrap().descriptor(),
                &described.descriptor
            );
            assert!(registry.settled(&s.config, &s.grants).await.is_none());
        }

        #[tokio::test]
        async fn a_tool_that_describes_itself_otherwise_is_listed_as_it_does() {
            let described = describe_ls().await;
            let mut differs = described.clone();
            differs.descriptor.description = "what an older build said".into();
            let s = setup(&[("ls.wasm", ls_bytes())]);
            let registry = listed(&s, vec![differs]).await;
            let listed_as = registry.get("ls").unwrap().descriptor().description.clone();
            assert_eq!(listed_as, "what an older build said");
            let airlock = s.airlock(registry).await;
            let refused = ls_in(&airlock).await.unwrap_err();
            assert!(refused.contains("describes itself otherwise"), "{refused}");
            let settled = airlock.settled().await.expect("listed anew");
            let entry = settled.registry().get("ls").unwrap();
            assert_eq!(entry.descriptor(), &described.descriptor);
            assert!(ls_in(&settled).await.unwrap().contains("a.txt"));
        }

        #[tokio::test]
        async fn a_tool_that_fails_in_the_background_is_dropped_and_its_calls_get_the_error() {
            let garbage = b"\0asm\x0d\0\x01\0 not a component";
            let mut broken = describe_ls().await;
            broken.blake3 = blake3::hash(garbage).to_hex().to_string();
            let s = setup(&[("broken.wasm", garbage)]);
            let registry = listed(&s, vec![broken.clone()]).await;
            assert!(registry.get("ls").is_some(), "listed from the snapshot");
            let airlock = s.airlock(registry).await;
            let error = ls_in(&airlock).await.unwrap_err();
            assert!(error.contains("could not be loaded"), "{error}");
            let settled = airlock.settled().await.expect("listed anew");
            assert!(settled.registry().get("ls").is_none());
            let failure = &settled.registry().failures()[0];
            assert_eq!(failure.tool.as_deref(), Some("ls"));
            assert!(matches!(failure.error, LoadError::Compile(_)), "{failure}");

            // The failure is remembered: the next start does not list it.
            let again = listed(&s, vec![broken]).await;
            assert!(again.get("ls").is_none());
            assert!(matches!(again.failures()[0].error, LoadError::Compile(_)));
        }
    }
}
