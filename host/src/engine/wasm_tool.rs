//! [`WasmTool`]: a component behind the [`Tool`] trait.
//!
//! Loading compiles the component, checks its imports against the linker's
//! allowlist, pre-instantiates it (bindgen's `ToolComponentPre`) and asks it
//! to describe itself in a store with nothing granted. Each tool use then
//! gets at most two fresh stores: one for the preflight exports (`classify`,
//! `validate`, `check-permissions`; nothing granted, kept in the
//! invocation's scratch slot between them), and one for `call`, built from
//! the call's grants. Every guest call runs under an epoch deadline, a
//! wall-clock timeout and, for cancel-behaviour tools, the cancellation
//! token; a failure is classified from what the store saw.

use super::Engine;
use super::bindings::{self, ToolComponent, ToolComponentPre};
use super::linker::Needs;
use super::run::{arm, guard, new_store, settle, write_limit};
use super::state::{CallIo, HostState};
use crate::descriptor::{Descriptor, InterruptBehavior, SafetyFlags};
use crate::error::{CallError, LoadError};
use crate::grants::CallGrants;
use crate::json;
use crate::sanitize::{self, Sink};
use crate::tool::{Invocation, PermissionDecision, ProgressSink, Tool, ToolOrigin, ToolOutput};
use async_trait::async_trait;
use serde_json::Value;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use wasmtime::Store;

/// A tool implemented by a WASI component.
pub struct WasmTool {
    descriptor: Descriptor,
    origin: ToolOrigin,
    name: Arc<str>,
    pre: ToolComponentPre<HostState>,
    engine: Engine,
    imports: Vec<(String, Needs)>,
}

impl std::fmt::Debug for WasmTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmTool")
            .field("name", &self.name)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// The preflight store of one tool use.
struct Preflight {
    store: Store<HostState>,
    instance: ToolComponent,
}

impl WasmTool {
    /// Loads a component: compile (on a blocking thread), check its
    /// imports, pre-instantiate, describe, and check the descriptor.
    pub async fn load(
        engine: &Engine,
        bytes: Arc<[u8]>,
        origin: ToolOrigin,
    ) -> Result<WasmTool, LoadError> {
        let (component, imports) = engine.load_component(bytes).await?;
        let instance_pre = engine
            .linker()
            .instantiate_pre(&component)
            .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        let pre = ToolComponentPre::new(instance_pre).map_err(|e| {
            LoadError::Compile(format!("it does not export the airlock:tool world: {e:#}"))
        })?;

        let limits = engine.limits();
        let budget = Duration::from_millis(limits.preflight_timeout_ms);
        let grants = CallGrants::nothing(budget, limits.memory_mib << 20);
        let unnamed: Arc<str> = Arc::from("(describing)");
        let io = CallIo::new(
            unnamed.clone(),
            String::new(),
            ProgressSink::none(),
            CancellationToken::new(),
            None,
        );
        let (mut store, instance) = instantiate(engine, &pre, unnamed, io, &grants, None)
            .await
            .map_err(|e| LoadError::Describe(e.message))?;
        let deadline = arm(&mut store, budget, None);
        let described = guard(
            deadline,
            None,
            instance.airlock_tool_tool().call_describe(&mut store),
        )
        .await;
        let wit_descriptor =
            settle(&store, described, budget).map_err(|e| LoadError::Describe(e.message))?;
        let descriptor = bindings::descriptor_from_wit(wit_descriptor, engine.output_bounds())
            .map_err(LoadError::Describe)?;
        let problems = descriptor.problems();
        if !problems.is_empty() {
            return Err(LoadError::InvalidDescriptor {
                tool: sanitize::clean_capped(&descriptor.name, Sink::Line, 80),
                problems,
            });
        }
        Ok(WasmTool {
            name: Arc::from(descriptor.name.as_str()),
            descriptor,
            origin,
            pre,
            engine: engine.clone(),
            imports,
        })
    }

    /// The component's imports that need a network grant.
    pub fn network_imports(&self) -> impl Iterator<Item = &str> {
        self.imports
            .iter()
            .filter(|(_, needs)| *needs == Needs::Network)
            .map(|(name, _)| name.as_str())
    }

    /// Every import of the component.
    pub fn imports(&self) -> impl Iterator<Item = &str> {
        self.imports.iter().map(|(name, _)| name.as_str())
    }

    /// The preflight store of this use, created on first need.
    async fn preflight<'a>(&self, inv: &'a mut Invocation) -> Result<&'a mut Preflight, CallError> {
        if inv.scratch::<Preflight>().is_none() {
            let limits = self.engine.limits();
            let budget = Duration::from_millis(limits.preflight_timeout_ms).min(inv.grants.timeout);
            let nothing = CallGrants::nothing(budget, inv.grants.memory_bytes);
            let io = self.io(inv);
            let (store, instance) = instantiate(
                &self.engine,
                &self.pre,
                self.name.clone(),
                io,
                &nothing,
                None,
            )
            .await?;
            inv.set_scratch(Preflight { store, instance });
        }
        inv.scratch::<Preflight>()
            .ok_or_else(|| CallError::internal("the preflight store vanished"))
    }

    fn io(&self, inv: &Invocation) -> CallIo {
        CallIo::new(
            self.name.clone(),
            inv.tool_use_id.clone(),
            inv.progress.clone(),
            inv.cancel.clone(),
            Some(inv.read_files.clone()),
        )
    }

    fn input_text(&self, input: &Value) -> Result<String, CallError> {
        json::to_text(input, self.engine.input_bounds()).map_err(CallError::invalid_input)
    }

    fn preflight_budget(&self, inv: &Invocation) -> Duration {
        Duration::from_millis(self.engine.limits().preflight_timeout_ms).min(inv.grants.timeout)
    }
}

#[async_trait]
impl Tool for WasmTool {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    fn origin(&self) -> &ToolOrigin {
        &self.origin
    }

    async fn classify(
        &self,
        inv: &mut Invocation,
        input: &Value,
    ) -> Result<Option<SafetyFlags>, CallError> {
        let text = self.input_text(input)?;
        let flags = self
            .preflight_call(inv, move |tool, store| {
                Box::pin(async move { tool.airlock_tool_tool().call_classify(store, &text).await })
            })
            .await?;
        Ok(flags.map(bindings::flags_from_wit))
    }

    async fn validate(&self, inv: &mut Invocation, input: &Value) -> Result<(), CallError> {
        let text = self.input_text(input)?;
        let cx = bindings::context_to_wit(&inv.tool_use_id, &inv.context, &inv.grants);
        self.preflight_call(inv, move |tool, store| {
            Box::pin(async move {
                tool.airlock_tool_tool()
                    .call_validate(store, &text, &cx)
                    .await
            })
        })
        .await?
        .map_err(|m| CallError::invalid_input(bindings::validation_message(&m)))
    }

    async fn check_permissions(
        &self,
        inv: &mut Invocation,
        input: &Value,
    ) -> Result<PermissionDecision, CallError> {
        let text = self.input_text(input)?;
        let cx = bindings::context_to_wit(&inv.tool_use_id, &inv.context, &inv.grants);
        let decision = self
            .preflight_call(inv, move |tool, store| {
                Box::pin(async move {
                    tool.airlock_tool_tool()
                        .call_check_permissions(store, &text, &cx)
                        .await
                })
            })
            .await?;
        bindings::permission_from_wit(decision, self.engine.input_bounds())
    }

    async fn call(&self, inv: &mut Invocation, input: &Value) -> Result<ToolOutput, CallError> {
        inv.clear_scratch();
        let text = self.input_text(input)?;
        let cx = bindings::context_to_wit(&inv.tool_use_id, &inv.context, &inv.grants);
        let cancel =
            (self.descriptor.interrupt == InterruptBehavior::Cancel).then(|| inv.cancel.clone());
        let io = self.io(inv);
        let (mut store, instance) = instantiate(
            &self.engine,
            &self.pre,
            self.name.clone(),
            io,
            &inv.grants,
            Some(&inv.context.cwd),
        )
        .await?;
        let timeout = inv.grants.timeout;
        let deadline = arm(&mut store, timeout, cancel.clone());
        let outcome = guard(
            deadline,
            cancel.as_ref(),
            instance
                .airlock_tool_tool()
                .call_call(&mut store, &text, &cx),
        )
        .await;
        match settle(&store, outcome, timeout)? {
            Ok(output) => bindings::output_from_wit(output, self.engine.output_bounds()),
            Err(error) if store.data().budget.exhausted() => {
                let error = bindings::error_from_wit(error);
                Err(write_limit(&format!(
                    "the tool then reported: {}",
                    error.message
                )))
            }
            Err(error) => Err(bindings::error_from_wit(error)),
        }
    }
}

/// A guest export called on a store.
type GuestCall<'a, T> = Pin<Box<dyn Future<Output = wasmtime::Result<T>> + Send + 'a>>;

impl WasmTool {
    /// Calls a preflight export in this use's preflight store, under the
    /// preflight time budget. A store that failed cannot be re-entered, so it
    /// is dropped and the next step of the use gets a fresh one.
    async fn preflight_call<T>(
        &self,
        inv: &mut Invocation,
        export: impl for<'a> FnOnce(&'a ToolComponent, &'a mut Store<HostState>) -> GuestCall<'a, T>,
    ) -> Result<T, CallError> {
        let budget = self.preflight_budget(inv);
        let p = self.preflight(inv).await?;
        let deadline = arm(&mut p.store, budget, None);
        let outcome = guard(deadline, None, export(&p.instance, &mut p.store)).await;
        let result = settle(&p.store, outcome, budget);
        if result.is_err() {
            inv.clear_scratch();
        }
        result
    }
}

/// A fresh store with `grants`, and the component instantiated in it.
async fn instantiate(
    engine: &Engine,
    pre: &ToolComponentPre<HostState>,
    name: Arc<str>,
    io: CallIo,
    grants: &CallGrants,
    cwd: Option<&str>,
) -> Result<(Store<HostState>, ToolComponent), CallError> {
    let mut store = new_store(engine, name, io, grants, cwd)?;
    let deadline = arm(&mut store, grants.timeout, None);
    let outcome = guard(deadline, None, pre.instantiate_async(&mut store)).await;
    let instance = settle(&store, outcome, grants.timeout)?;
    Ok((store, instance))
}
