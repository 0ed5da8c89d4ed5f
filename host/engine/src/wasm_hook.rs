//! [`WasmHook`]: a hook written as a component exporting
//! `airlock:tool/hook`. It runs sandboxed like a tool, with nothing
//! granted (no filesystem, network or environment) and a time limit, in a
//! fresh store per event.

use super::bindings::hook::{HookComponentPre, exports::airlock::tool::hook::HookResult};
use super::linker::Needs;
use super::run::{StoreSpec, arm, guard, instantiate, settle};
use super::state::{CallIo, HostState};
use super::{Engine, SlotKind};
use airlock_core::error::{CallError, LoadError};
use airlock_core::grants::CallGrants;
use airlock_core::tool::{CancellationToken, ProgressSink};
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;

/// A hook's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookAnswer {
    /// Carry on, with optional JSON output.
    Proceed(Option<String>),
    /// Block, with the reason.
    Block(String),
}

/// A loaded hook component.
pub struct WasmHook {
    pre: HookComponentPre<HostState>,
    engine: Engine,
}

impl std::fmt::Debug for WasmHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmHook").finish_non_exhaustive()
    }
}

impl WasmHook {
    /// Compiles and checks a hook component. A hook may not import
    /// `wasi:http`: it never gets a network grant.
    pub async fn load(engine: &Engine, bytes: impl Into<Bytes>) -> Result<WasmHook, LoadError> {
        let mut loaded = engine
            .load_component(bytes.into(), None, "a hook component".into())
            .await?;
        if let Some((import, _)) = loaded
            .imports
            .iter()
            .find(|(_, needs)| *needs == Needs::Network)
        {
            return Err(LoadError::UngrantedImport {
                import: import.clone(),
                needs: "a network grant".into(),
                how: "hooks are never granted network access".into(),
            });
        }
        let instance_pre = engine
            .linker()
            .instantiate_pre(&loaded.component)
            .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        let pre = HookComponentPre::new(instance_pre).map_err(|e| {
            LoadError::Compile(format!("it does not export airlock:tool/hook: {e:#}"))
        })?;
        engine.cache_component(&mut loaded, None).await;
        Ok(WasmHook {
            pre,
            engine: engine.clone(),
        })
    }

    /// Handles one event (JSON text) in a fresh store, within `timeout`.
    pub async fn handle(&self, event: &str, timeout: Duration) -> Result<HookAnswer, CallError> {
        let name: Arc<str> = Arc::from("hook");
        let io = CallIo::new(
            name.clone(),
            String::new(),
            ProgressSink::none(),
            CancellationToken::new(),
            None,
            // Hooks share one turn.
            0,
        );
        let grants = CallGrants::nothing(timeout, self.engine.limits().memory_mib << 20);
        let spec = StoreSpec {
            kind: SlotKind::Hook,
            name,
            io,
            grants: &grants,
            cwd: None,
        };
        let (mut store, instance) = instantiate(&self.engine, spec, &self.pre, |pre, store| {
            Box::pin(pre.instantiate_async(store))
        })
        .await?;
        let armed = arm(&mut store, timeout, None);
        let event = event.to_owned();
        let outcome = guard(&armed, None, store, move |s| {
            Box::pin(async move { instance.airlock_tool_hook().call_handle(s, &event).await })
        })
        .await;
        Ok(match settle(outcome, timeout)?.1 {
            HookResult::Proceed(out) => HookAnswer::Proceed(out),
            HookResult::Block(reason) => HookAnswer::Block(reason),
        })
    }
}
