//! The [`Registry`]: every tool the agent may call, by name and alias.
//!
//! It loads the bundled tools, every `*.wasm` in the tool directories and
//! the tools of the configured MCP servers (in parallel), checks each
//! component against its grants (a component importing `wasi:http` that
//! asks for hosts and is granted none is refused, naming the import),
//! rejects duplicate names
//! and aliases with a clear error, and compiles each tool's input schema. Native tools join through
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

mod grant;
mod load;
mod stamp;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;

pub use stamp::SourceStamp;

use grant::BUILTIN_NAMES;

use crate::skill_tool::{self, SkillTool};
use crate::tool_search::{self, ToolSearch};
use airlock_core::config::ToolSearchMode;
use airlock_core::descriptor::Descriptor;
use airlock_core::error::LoadError;
use airlock_core::grants::{Grants, ToolGrants};
use airlock_core::skills::Skills;
use airlock_core::tool::{Catalog, Tool, ToolOrigin};
use airlock_engine::{Compiling, Pending};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

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
    /// the configuration overrides it, and the programs granted to `bash`
    /// named at the end of its prompt.
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
    /// The background compiles of the tools listed from the snapshot and
    /// of the unlisted components; done when all are.
    compiling: Option<Compiling>,
    /// Components not listed yet: neither the snapshot nor the artifact
    /// cache knew them, so they compile in the background.
    unlisted: Vec<ToolOrigin>,
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
        let loaded = Arc::new(load_entry(tool, Vec::new())?);
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
        let defer = grants
            .defer_loading
            .filter(|&defer| defer != d.defer_loading);
        let overridden = (defer.is_some() || !grants.programs.is_empty()).then(|| {
            let mut own = d.clone();
            own.defer_loading = defer.unwrap_or(d.defer_loading);
            if !grants.programs.is_empty() {
                let names = grants.programs.names();
                // The programs reach what the operator grants `bash`: they
                // ask for any host, as `fetch` does.
                let network = match grants.network.as_slice() {
                    [] => "no network".to_string(),
                    hosts => {
                        own.capabilities.network_hosts = vec!["*".into()];
                        format!(
                            "the network only to {} (through the proxy HTTP_PROXY and \
                             HTTPS_PROXY name; https only in calls that may write; nothing \
                             else connects)",
                            hosts.join(", ")
                        )
                    }
                };
                own.prompt.push_str(&format!(
                    "\n- Programs the operator granted: {}. Each runs confined to this call's \
                     directories (read-only when the call is), with a private /tmp as HOME and \
                     {network}.",
                    names.join(", ")
                ));
            }
            Arc::new(own)
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

    /// Offers the built-in `skill` tool over `skills` when there is one,
    /// replacing one already registered.
    pub fn offer_skills(&mut self, skills: &Arc<Skills>, grants: &Grants) {
        let is_skill_tool = |tool: &Arc<dyn Tool>| {
            tool.origin() == &ToolOrigin::Builtin && tool.descriptor().name == skill_tool::NAME
        };
        self.loaded.retain(|l| !is_skill_tool(&l.tool));
        self.entries.retain(|e| !is_skill_tool(&e.tool));
        self.reindex();
        if skills.is_empty() {
            return;
        }
        let result = grants.for_tool(skill_tool::NAME).and_then(|g| {
            if !g.enabled {
                return Ok(());
            }
            self.add(Arc::new(SkillTool::new(skills.clone(), grants)), g)
        });
        if let Err(error) = result {
            self.fail(ToolOrigin::Builtin, skill_tool::NAME, error);
        }
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

    /// Every name a `[tools.NAME]` section may mean: the tools loaded
    /// (switched off by the configuration or not), those that failed, and
    /// the built-in ones.
    pub fn known_names(&self) -> std::collections::BTreeSet<String> {
        self.loaded
            .iter()
            .map(|l| l.tool.descriptor().name.clone())
            .chain(self.failures.iter().filter_map(|f| f.tool.clone()))
            .chain(grant::BUILTIN_NAMES.iter().map(|n| n.to_string()))
            .collect()
    }

    /// A tool that loaded but is not offered under `name`: refused for
    /// its grants (a network tool granted no host) or its name, with why.
    /// What it is and asks for can still be shown.
    pub fn refused(&self, name: &str) -> Option<(&Arc<dyn Tool>, &LoadFailure)> {
        if self.get(name).is_some() {
            return None;
        }
        let failure = self
            .failures
            .iter()
            .find(|f| f.tool.as_deref() == Some(name))?;
        let tool = self
            .loaded
            .iter()
            .map(|l| &l.tool)
            .find(|t| t.descriptor().name == name)?;
        Some((tool, failure))
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

    /// The components [`Registry::list`] did not list because neither the
    /// bundled snapshot nor the artifact cache knew them: they compile in
    /// the background, and the next load lists them from the cache (see
    /// [`crate::Airlock::settled`]).
    pub fn unlisted(&self) -> &[ToolOrigin] {
        &self.unlisted
    }

    /// Stops saying that components are left to list (they compiled, and
    /// listing them failed).
    pub(crate) fn forget_unlisted(&mut self) {
        self.unlisted.clear();
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
            unlisted: self.unlisted.clone(),
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

/// Checks a tool's descriptor and compiles its schemas.
fn load_entry(tool: Arc<dyn Tool>, network_imports: Vec<String>) -> Result<Loaded, LoadError> {
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
        async fn a_stale_entry_is_not_used_and_the_tool_is_listed_once_compiled() {
            let described = describe_ls().await;
            let mut stale = described.clone();
            stale.blake3 = blake3::hash(b"an older build").to_hex().to_string();
            stale.descriptor.description = "what an older build said".into();
            let s = setup(&[("ls.wasm", ls_bytes())]);
            let registry = listed(&s, vec![stale]).await;
            assert!(
                registry.get("ls").is_none(),
                "listed before it was compiled"
            );
            let file = s.tmp.path().join("tools/ls.wasm");
            assert_eq!(registry.unlisted(), [ToolOrigin::File(file)]);

            let airlock = s.airlock(registry).await;
            let settled = airlock.settled().await.expect("listed once compiled");
            assert_eq!(artifacts(&s), 1, "compiled in the background, and cached");
            assert!(settled.registry().unlisted().is_empty());
            assert_eq!(
                settled.registry().get("ls").unwrap().descriptor(),
                &described.descriptor
            );
            assert!(ls_in(&settled).await.unwrap().contains("a.txt"));
            assert!(settled.settled().await.is_none(), "nothing left to list");
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
