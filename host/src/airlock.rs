//! [`Airlock`]: the host as an embedder holds it: the engine, the resolved
//! grants and the registry, with one method to run a tool use.

use crate::config::Config;
use crate::context::ToolContext;
use crate::descriptor::Descriptor;
use crate::engine::Engine;
use crate::grants::Grants;
use crate::pipeline::{self, CallControl, ToolResult, ToolUse};
use crate::registry::Registry;
use std::sync::Arc;

/// A loaded host: tools, grants and limits, ready to run tool uses.
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
#[derive(Clone, Debug)]
pub struct Airlock {
    engine: Engine,
    grants: Arc<Grants>,
    registry: Arc<Registry>,
}

impl Airlock {
    /// Resolves the grants in `config`, starts the engine and loads the
    /// tools. Fails only when the configuration itself is unusable; tools
    /// that fail to load are listed in [`Registry::failures`].
    pub async fn new(config: Config) -> anyhow::Result<Airlock> {
        let grants = Arc::new(Grants::from_config(&config)?);
        let engine = Engine::new(&config.limits)?;
        let registry = Arc::new(Registry::load(&engine, &grants).await);
        Ok(Airlock {
            engine,
            grants,
            registry,
        })
    }

    /// An Airlock over an existing engine, grants and registry (for
    /// embedders that add native tools to the registry themselves).
    pub fn from_parts(engine: Engine, grants: Arc<Grants>, registry: Registry) -> Airlock {
        Airlock {
            engine,
            grants,
            registry: Arc::new(registry),
        }
    }

    /// The same tools under the grants of `config`, without recompiling
    /// anything. When `config` names other tool sources or other limits,
    /// the tools are loaded afresh instead.
    pub async fn with_config(&self, config: Config) -> anyhow::Result<Airlock> {
        let old = self.grants.config();
        let same_sources = config.bundled_tools == old.bundled_tools
            && config.effective_tool_dirs() == old.effective_tool_dirs();
        if !same_sources || &config.limits != self.engine.limits() {
            return Airlock::new(config).await;
        }
        let grants = Arc::new(Grants::from_config(&config)?);
        let registry = Arc::new(self.registry.regrant(&grants));
        Ok(Airlock {
            engine: self.engine.clone(),
            grants,
            registry,
        })
    }

    /// The tools.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The grants.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// A fresh agent context.
    pub fn context(&self) -> ToolContext {
        ToolContext::new(&self.grants)
    }

    /// The same host with only the tools `keep` accepts: a sub-agent's view.
    pub fn view(&self, keep: impl Fn(&Descriptor) -> bool) -> Airlock {
        Airlock {
            engine: self.engine.clone(),
            grants: self.grants.clone(),
            registry: Arc::new(self.registry.view(keep)),
        }
    }

    /// Runs one tool use through the pipeline.
    pub async fn call(&self, cx: &mut ToolContext, tool_use: ToolUse) -> ToolResult {
        pipeline::run(self, cx, tool_use, CallControl::default()).await
    }

    /// Runs one tool use, with progress and cancellation.
    pub async fn call_with(
        &self,
        cx: &mut ToolContext,
        tool_use: ToolUse,
        control: CallControl,
    ) -> ToolResult {
        pipeline::run(self, cx, tool_use, control).await
    }
}
