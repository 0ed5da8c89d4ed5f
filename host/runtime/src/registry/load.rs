//! Loading: the bundled tools, a tool directory's components and the MCP
//! servers' tools gathered into a registry; a reload that holds back code
//! not yet approved; the settling of tools listed from the snapshot.

use super::{LoadFailure, Loaded, Registry, Servers, load_entry};
use crate::approvals::Approvals;
use airlock_core::config::Config;
use airlock_core::error::LoadError;
use airlock_core::grants::Grants;
use airlock_core::lock::Lockfile;
use airlock_core::tool::{Tool, ToolOrigin};
use airlock_engine::{
    Bytes, ComponentBytes, DirBounds, Engine, LoadedTool, Loading, Settled, Snapshot,
    component_sources,
};
use std::sync::{Arc, OnceLock};

impl Registry {
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

    /// Loads like [`Registry::load`], but returns without compiling
    /// anything. The components the bundled snapshot describes (the
    /// bundled tools, unless the artifact cache already lists them) are
    /// listed as the snapshot says and compiled in the background, a few
    /// at a time; a use of one that comes first waits for its compile.
    /// When one describes itself otherwise than listed, or fails, its uses
    /// fail with the reason, and [`Registry::settled`] gives the registry
    /// to use instead. Components neither the snapshot nor the cache knows
    /// (another build's, a tool directory's not yet compiled) are not
    /// listed: they compile in the background too ([`Registry::unlisted`]),
    /// and a load after that lists them from the cache. Without an
    /// artifact cache those are compiled before this returns.
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

    /// Waits until every tool listed from the bundled snapshot is compiled,
    /// and every unlisted component (see [`Registry::list`]); `None` when
    /// each tool described itself as listed, else the same registry under
    /// `grants` with each that described itself otherwise listed as it did,
    /// and each that failed moved to [`Registry::failures`]. The unlisted
    /// components' tools are not in it: a load lists them, from the
    /// artifact cache ([`crate::Airlock::settled`] does).
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
                    match load_entry(relisted.tool, relisted.network_imports) {
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
                    Ok(Bytes::from_static(bytes)),
                ));
            }
        }
        let mut load_failures = Vec::new();
        let written = config
            .lock_path()
            .map(|path| Lockfile::read_as_written(&path).map(|lock| (path, lock)));
        for dir in config.effective_tool_dirs() {
            // An entry names its file relative to the tool directory it
            // was installed in, which may be another HOME's: resolved
            // against each directory, the lock checks that name in every one.
            let lock = written.as_ref().map(|read| match read {
                Ok((path, lock)) => lock.resolved(path, Some(&dir)),
                Err(e) => Err(e.clone()),
            });
            match component_sources(&dir, DirBounds::of(engine.limits())) {
                Ok(read) => {
                    sources.extend(read.files.into_iter().map(|(origin, bytes)| {
                        (origin.clone(), as_locked(lock.as_ref(), &origin, bytes))
                    }));
                    if let Some(error) = read.past_bounds {
                        load_failures.push(LoadFailure {
                            origin: ToolOrigin::File(dir.clone()),
                            tool: None,
                            error,
                        });
                    }
                }
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
        let Loading {
            results,
            unlisted,
            bounds,
        } = engine.load_all(sources, snapshot).await;

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
                let mut l = load_entry(loaded.tool, loaded.network_imports)?;
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
            unlisted: unlisted.iter().map(|u| u.origin().clone()).collect(),
            compiling: bounds.compile_in_background(engine, listed, unlisted),
            ..Registry::default()
        };
        registry.grant(config, grants);
        registry
    }
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

/// The bytes of `origin`, unless `airlock.lock` pins its file to other
/// bytes. A lock that cannot be read refuses every file of the tool
/// directory `airlock install` writes to, since none of them can be
/// checked.
fn as_locked(
    lock: Option<&Result<Lockfile, String>>,
    origin: &ToolOrigin,
    bytes: ComponentBytes,
) -> ComponentBytes {
    let ToolOrigin::File(file) = origin else {
        return bytes;
    };
    match lock {
        None => bytes,
        Some(Err(why)) => {
            let installed = airlock_core::config::default_tool_dir()
                .is_some_and(|dir| file.parent() == Some(dir.as_path()));
            if installed {
                Err(LoadError::Io(format!(
                    "{why}; the tools `airlock install` put in this directory are not loaded \
                     until the lock file is fixed"
                )))
            } else {
                bytes
            }
        }
        Some(Ok(lock)) => match lock.for_file(file) {
            None => bytes,
            Some(entry) => {
                let bytes = bytes?;
                let found = blake3::hash(&bytes).to_hex().to_string();
                if found == entry.blake3 {
                    Ok(bytes)
                } else {
                    Err(LoadError::NotAsLocked {
                        name: entry.name.clone(),
                        reference: entry.source.clone(),
                        expected: entry.blake3.clone(),
                        found,
                    })
                }
            }
        },
    }
}
