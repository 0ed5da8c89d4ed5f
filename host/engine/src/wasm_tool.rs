//! [`WasmTool`]: a component behind the [`Tool`] trait.
//!
//! Loading compiles the component, checks its imports against the linker's
//! allowlist, pre-instantiates it (bindgen's `ToolComponentPre`, and where
//! the exports a use calls are: `bindings::Exports`) and asks it
//! to describe itself in a store with nothing granted; what it learns goes
//! into the artifact cache. A tool the cache already knows is listed from
//! the cache's record and loaded on its first use. A tool the bundled
//! snapshot knows (`snapshot.rs`) can be listed from it before it is
//! compiled ([`WasmTool::list_from`]): it is then compiled and described before
//! its first use, and a use that comes first waits; if it describes itself
//! otherwise than it was listed, or fails, its uses fail with the reason
//! and [`WasmTool::settle`] says so. Each tool use then
//! gets at most two fresh stores: one for the preflight exports (`classify`,
//! `validate`, `check-permissions`, those the descriptor declares; nothing
//! granted, kept in the invocation's scratch slot between them; none for a
//! tool that declares none), and one for `call`, built from the call's
//! grants. Every guest call runs under an epoch deadline, a
//! wall-clock timeout and, for cancel-behaviour tools, the cancellation
//! token; a failure is classified from what the store saw.

use super::bindings::{self, Exports, ToolComponentPre};
use super::linker::{self, Needs};
use super::run::{GuestCall, StoreSpec, arm, guard, instantiate, settle, write_limit};
use super::snapshot::Snapshot;
use super::state::{CallIo, HostState};
use super::{Engine, SlotKind};
use airlock_core::descriptor::{Descriptor, InterruptBehavior, SafetyFlags};
use airlock_core::error::{CallError, LoadError};
use airlock_core::grants::CallGrants;
use airlock_core::json;
use airlock_core::sanitize::{self, Sink};
use airlock_core::tool::{
    Invocation, PermissionDecision, ProgressSink, Tool, ToolOrigin, ToolOutput,
};
use async_trait::async_trait;
use bytes::Bytes;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;
use wasmtime::Store;
use wasmtime::component::{Component, Instance};

/// A tool implemented by a WASI component.
pub struct WasmTool {
    descriptor: Descriptor,
    origin: ToolOrigin,
    name: Arc<str>,
    engine: Engine,
    imports: Vec<(String, Needs)>,
    bytes: Bytes,
    /// The BLAKE3 hash of the component's bytes, as hex.
    digest: String,
    /// The component's key in the artifact cache, when it was listed from
    /// there (so the first use does not hash the bytes again).
    cache_key: Option<String>,
    /// Whether the descriptor and imports came from the bundled snapshot
    /// and have yet to be confirmed by the component itself.
    listed: bool,
    /// The pre-instantiated component: set at load when the tool was
    /// compiled then, else on first use (from the artifact cache), or in
    /// the background for a tool listed from the snapshot.
    pre: OnceCell<Ready>,
}

/// A component pre-instantiated as the `airlock:tool` world.
struct PreInstantiated {
    pre: ToolComponentPre<HostState>,
    /// Where the exports a use calls are (a use instantiates the component
    /// without bindgen's check of every export: see [`Exports`]).
    exports: Exports,
}

/// What compiling a tool listed from the snapshot showed
/// ([`WasmTool::settle`]).
pub(crate) enum Confirmed {
    /// It describes itself as it was listed.
    AsListed,
    /// It describes itself otherwise: the tool as it describes itself.
    Differs(Box<WasmTool>),
    /// It failed to load, and why.
    Failed(LoadError),
}

/// What loading a component that was not loaded when it was listed gave.
enum Ready {
    /// Pre-instantiated, as listed.
    Pre(Arc<PreInstantiated>),
    /// Pre-instantiated, but it describes itself otherwise than the
    /// snapshot it was listed from: the tool as it describes itself.
    Differs(Box<WasmTool>),
    /// It could not be loaded, or its `describe` failed.
    Failed(LoadError),
}

impl std::fmt::Debug for WasmTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmTool")
            .field("name", &self.name)
            .field("origin", &self.origin)
            .field("ready", &self.is_ready())
            .finish_non_exhaustive()
    }
}

/// The preflight store of one tool use.
struct PreflightStore {
    store: Store<HostState>,
    instance: Instance,
}

impl WasmTool {
    /// Loads a component. When the artifact cache has it, the descriptor
    /// comes from the cache and the component is loaded on first use;
    /// otherwise it is compiled (on a blocking thread), its imports
    /// checked, pre-instantiated and asked to describe itself, its
    /// descriptor checked, and the result cached.
    pub async fn load(
        engine: &Engine,
        bytes: impl Into<Bytes>,
        origin: ToolOrigin,
    ) -> Result<WasmTool, LoadError> {
        let bytes = bytes.into();
        let digest = digest(&bytes).await;
        let key = engine.cache().map(|c| c.key_for(&digest));
        let known = WasmTool::known(engine, &bytes, &digest, &key, &origin, None).await;
        if let Some(known) = known {
            return known;
        }
        let loaded = WasmTool::compile(engine, bytes, digest, key.clone(), origin).await;
        if let (Err(error), Some(key)) = (&loaded, key) {
            remember_failure(engine, key, error.clone()).await;
        }
        loaded
    }

    /// Lists a component without compiling it: as the artifact cache
    /// records it, else as `snapshot` does (by the digest of its bytes;
    /// compiled, pre-instantiated and asked to describe itself on first
    /// need, in the background when the registry lists it, or at its first
    /// use, which waits; see [`WasmTool::settle`]). `None` when neither
    /// knows it: [`WasmTool::load`] compiles it. Without an artifact cache
    /// such a component is compiled now, as by [`WasmTool::load`] (a compile
    /// later would have nowhere to leave its result).
    pub(crate) async fn list_from(
        engine: &Engine,
        bytes: Bytes,
        origin: ToolOrigin,
        snapshot: &Snapshot,
    ) -> Result<Option<WasmTool>, LoadError> {
        if engine.cache().is_none() {
            return WasmTool::load(engine, bytes, origin).await.map(Some);
        }
        let digest = digest(&bytes).await;
        let key = engine.cache().map(|c| c.key_for(&digest));
        WasmTool::known(engine, &bytes, &digest, &key, &origin, Some(snapshot))
            .await
            .transpose()
    }

    /// The tool as the artifact cache records it (or the failure it
    /// remembers), else as `snapshot` describes it; `None` when neither
    /// knows the component.
    async fn known(
        engine: &Engine,
        bytes: &Bytes,
        digest: &str,
        key: &Option<String>,
        origin: &ToolOrigin,
        snapshot: Option<&Snapshot>,
    ) -> Option<Result<WasmTool, LoadError>> {
        if let Some(key) = key {
            if let Some(tool) = WasmTool::from_cache(engine, bytes, digest, key, origin).await {
                return Some(Ok(tool));
            }
            if let Some(error) = remembered_failure(engine, key).await {
                return Some(Err(error));
            }
        }
        WasmTool::from_snapshot(engine, bytes, digest, key, origin, snapshot?).map(Ok)
    }

    /// The tool as `snapshot` describes it, not yet compiled; `None` unless
    /// the snapshot has the component's digest and the entry still checks
    /// out (imports the linker allows, a valid descriptor).
    fn from_snapshot(
        engine: &Engine,
        bytes: &Bytes,
        digest: &str,
        key: &Option<String>,
        origin: &ToolOrigin,
        snapshot: &Snapshot,
    ) -> Option<WasmTool> {
        let described = snapshot.get(digest)?;
        let record = Recorded {
            descriptor: described.descriptor.clone(),
            imports: described.imports.clone(),
            listed: true,
        };
        record.into_tool(engine, bytes, digest, key.clone(), origin)
    }

    /// Compiles, checks, pre-instantiates and describes a component, and
    /// caches the result.
    async fn compile(
        engine: &Engine,
        bytes: Bytes,
        digest: String,
        key: Option<String>,
        origin: ToolOrigin,
    ) -> Result<WasmTool, LoadError> {
        let mut loaded = engine
            .load_component(bytes.clone(), key, origin.to_string())
            .await?;
        let pre = pre_instantiate(engine, &loaded.component)?;
        let descriptor = describe(engine, &pre.pre).await?;
        engine.cache_component(&mut loaded, Some(&descriptor)).await;
        Ok(WasmTool {
            name: Arc::from(descriptor.name.as_str()),
            descriptor,
            origin,
            engine: engine.clone(),
            imports: loaded.imports,
            bytes,
            digest,
            cache_key: loaded.key,
            listed: false,
            pre: OnceCell::new_with(Some(Ready::Pre(pre))),
        })
    }

    /// The tool as the artifact cache records it, not yet loaded; `None`
    /// unless the record is there and still checks out.
    async fn from_cache(
        engine: &Engine,
        bytes: &Bytes,
        digest: &str,
        key: &str,
        origin: &ToolOrigin,
    ) -> Option<WasmTool> {
        let (looker, k) = (engine.clone(), key.to_string());
        let sidecar = tokio::task::spawn_blocking(move || looker.cache()?.sidecar(&k))
            .await
            .ok()??;
        let record = Recorded {
            descriptor: sidecar.descriptor?,
            imports: sidecar.imports,
            listed: false,
        };
        record.into_tool(engine, bytes, digest, Some(key.to_string()), origin)
    }

    /// Whether the component is loaded and pre-instantiated (rather than
    /// waiting for its first use).
    pub fn is_ready(&self) -> bool {
        matches!(self.pre.get(), Some(Ready::Pre(_)))
    }

    /// The component's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether the tool was listed from the bundled snapshot (see
    /// [`WasmTool::list_from`]).
    pub(crate) fn is_listed_from_snapshot(&self) -> bool {
        self.listed
    }

    /// For a tool listed from the bundled snapshot: compiles it now (or
    /// waits for the load already under way), and says whether it
    /// describes itself as listed. Any other tool is as listed.
    pub(crate) async fn settle(&self) -> Confirmed {
        if !self.listed {
            return Confirmed::AsListed;
        }
        match self.ready().await {
            Ready::Pre(_) => Confirmed::AsListed,
            Ready::Differs(tool) => Confirmed::Differs(Box::new(tool.relisted())),
            Ready::Failed(error) => Confirmed::Failed(error.clone()),
        }
    }

    /// The pre-instantiated component, loaded now if this is its first use.
    async fn pre(&self) -> Result<Arc<PreInstantiated>, CallError> {
        match self.ready().await {
            Ready::Pre(pre) => Ok(pre.clone()),
            Ready::Differs(_) => Err(CallError::internal(
                "the tool describes itself otherwise than it was listed (the bundled tools' \
                 list in this build is stale); the tool list was updated: list the tools again",
            )),
            Ready::Failed(e) => Err(CallError::internal(format!(
                "the tool's component could not be loaded: {e}"
            ))),
        }
    }

    /// The component loaded, once: the first caller loads it, the others
    /// wait for that load.
    async fn ready(&self) -> &Ready {
        self.pre.get_or_init(|| self.load_now()).await
    }

    async fn load_now(&self) -> Ready {
        let engine = &self.engine;
        let mut loaded = match engine
            .load_component(
                self.bytes.clone(),
                self.cache_key.clone(),
                format!("{} ({})", self.name, self.origin),
            )
            .await
        {
            Ok(loaded) => loaded,
            Err(error) => return self.failed(error).await,
        };
        let pre = match pre_instantiate(engine, &loaded.component) {
            Ok(pre) => pre,
            Err(error) => return self.failed(error).await,
        };
        if !self.listed {
            engine
                .cache_component(&mut loaded, Some(&self.descriptor))
                .await;
            return Ready::Pre(pre);
        }
        let descriptor = match describe(engine, &pre.pre).await {
            Ok(descriptor) => descriptor,
            Err(error) => return self.failed(error).await,
        };
        engine.cache_component(&mut loaded, Some(&descriptor)).await;
        if descriptor == self.descriptor && loaded.imports == self.imports {
            tracing::debug!(tool = %self.name, "compiled; it describes itself as listed");
            return Ready::Pre(pre);
        }
        tracing::warn!(
            tool = %self.name,
            "it describes itself otherwise than the bundled tools' list in this build says; \
             listing it as it describes itself"
        );
        Ready::Differs(Box::new(WasmTool {
            name: Arc::from(descriptor.name.as_str()),
            descriptor,
            origin: self.origin.clone(),
            engine: engine.clone(),
            imports: loaded.imports,
            bytes: self.bytes.clone(),
            digest: self.digest.clone(),
            cache_key: loaded.key,
            listed: false,
            pre: OnceCell::new_with(Some(Ready::Pre(pre))),
        }))
    }

    /// A failed load: remembered in the artifact cache when the tool was
    /// listed from the snapshot (as a failed load at start would be).
    async fn failed(&self, error: LoadError) -> Ready {
        if self.listed
            && let Some(key) = &self.cache_key
        {
            remember_failure(&self.engine, key.clone(), error.clone()).await;
        }
        tracing::warn!(tool = %self.name, "its component could not be loaded: {error}");
        Ready::Failed(error)
    }

    /// A copy of this loaded tool (for a registry listing it anew).
    fn relisted(&self) -> WasmTool {
        let pre = match self.pre.get() {
            Some(Ready::Pre(pre)) => OnceCell::new_with(Some(Ready::Pre(pre.clone()))),
            _ => OnceCell::new(),
        };
        WasmTool {
            name: self.name.clone(),
            descriptor: self.descriptor.clone(),
            origin: self.origin.clone(),
            engine: self.engine.clone(),
            imports: self.imports.clone(),
            bytes: self.bytes.clone(),
            digest: self.digest.clone(),
            cache_key: self.cache_key.clone(),
            listed: false,
            pre,
        }
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

    /// The preflight store of this use, taken out of the use's state
    /// (created on first need); [`WasmTool::preflight_call`] puts it back.
    async fn preflight(&self, inv: &mut Invocation) -> Result<PreflightStore, CallError> {
        if let Some(preflight) = inv.take_scratch::<PreflightStore>() {
            return Ok(preflight);
        }
        let nothing = CallGrants::nothing(self.preflight_budget(inv), inv.grants.memory_bytes);
        let spec = StoreSpec {
            kind: SlotKind::Tool,
            name: self.name.clone(),
            io: self.io(inv),
            grants: &nothing,
            cwd: None,
        };
        let prepared = self.pre().await?;
        let (store, instance) =
            instantiate(&self.engine, spec, prepared.pre.instance_pre(), |pre, s| {
                Box::pin(pre.instantiate_async(s))
            })
            .await?;
        Ok(PreflightStore { store, instance })
    }

    fn io(&self, inv: &Invocation) -> CallIo {
        CallIo::new(
            self.name.clone(),
            inv.tool_use_id.clone(),
            inv.progress.clone(),
            inv.cancel.clone(),
            Some(inv.read_files.clone()),
            inv.tenant,
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

    fn digest(&self) -> Option<&str> {
        Some(&self.digest)
    }

    fn deny_all_imports(&self) -> Vec<String> {
        let network_denied = !self.descriptor.wants_network();
        self.imports
            .iter()
            .filter(|(_, needs)| {
                *needs == Needs::Denied || (network_denied && *needs == Needs::Network)
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    async fn classify(
        &self,
        inv: &mut Invocation,
        input: &Value,
    ) -> Result<Option<SafetyFlags>, CallError> {
        if !self.descriptor.preflight.classify {
            return Ok(None);
        }
        let text = self.input_text(input)?;
        let flags = self
            .preflight_call(inv, move |exports, instance, store| {
                Box::pin(async move { exports.classify(store, instance, &text).await })
            })
            .await?;
        Ok(flags.map(bindings::flags_from_wit))
    }

    async fn validate(&self, inv: &mut Invocation, input: &Value) -> Result<(), CallError> {
        if !self.descriptor.preflight.validate {
            return Ok(());
        }
        let text = self.input_text(input)?;
        let cx = bindings::context_to_wit(&inv.tool_use_id, &inv.context, &inv.grants);
        self.preflight_call(inv, move |exports, instance, store| {
            Box::pin(async move { exports.validate(store, instance, &text, &cx).await })
        })
        .await?
        .map_err(|m| CallError::invalid_input(bindings::validation_message(&m)))
    }

    async fn check_permissions(
        &self,
        inv: &mut Invocation,
        input: &Value,
    ) -> Result<PermissionDecision, CallError> {
        if !self.descriptor.preflight.check_permissions {
            return Ok(PermissionDecision::Passthrough);
        }
        let text = self.input_text(input)?;
        let cx = bindings::context_to_wit(&inv.tool_use_id, &inv.context, &inv.grants);
        let decision = self
            .preflight_call(inv, move |exports, instance, store| {
                Box::pin(
                    async move { exports.check_permissions(store, instance, &text, &cx).await },
                )
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
        let spec = StoreSpec {
            kind: SlotKind::Tool,
            name: self.name.clone(),
            io: self.io(inv),
            grants: &inv.grants,
            cwd: Some(&inv.context.cwd),
        };
        let prepared = self.pre().await?;
        let (mut store, instance) =
            instantiate(&self.engine, spec, prepared.pre.instance_pre(), |pre, s| {
                Box::pin(pre.instantiate_async(s))
            })
            .await?;
        let timeout = inv.grants.timeout;
        let armed = arm(&mut store, timeout, cancel.clone());
        let outcome = guard(&armed, cancel.as_ref(), store, move |s| {
            Box::pin(async move { prepared.exports.call(s, &instance, &text, &cx).await })
        })
        .await;
        let (store, output) = settle(outcome, timeout)?;
        match output {
            Ok(output) => bindings::output_from_wit(output, self.engine.output_bounds()),
            Err(error) if store.data().budget.exhausted() => {
                let error = bindings::error_from_wit(error);
                Err(write_limit(&format!(
                    "the tool then reported: {}",
                    error.message
                )))
            }
            Err(error) => {
                let mut error = bindings::error_from_wit(error);
                if let Some(refused) = store.data().net.refused() {
                    error.message = format!(
                        "{}\n({})",
                        error.message,
                        sanitize::clean_capped(refused, Sink::Model, 1024)
                    );
                }
                Err(error)
            }
        }
    }
}

impl WasmTool {
    /// Calls a preflight export in this use's preflight store, under the
    /// preflight time budget. A store that failed cannot be re-entered, so it
    /// is dropped and the next step of the use gets a fresh one.
    async fn preflight_call<T: Send + 'static>(
        &self,
        inv: &mut Invocation,
        export: impl for<'a> FnOnce(
            &'a Exports,
            &'a Instance,
            &'a mut Store<HostState>,
        ) -> GuestCall<'a, T>
        + Send
        + 'static,
    ) -> Result<T, CallError> {
        let budget = self.preflight_budget(inv);
        let prepared = self.pre().await?;
        let PreflightStore {
            mut store,
            instance,
        } = self.preflight(inv).await?;
        let armed = arm(&mut store, budget, None);
        let outcome = guard(&armed, None, store, move |s| {
            Box::pin(async move { export(&prepared.exports, &instance, s).await })
        })
        .await;
        let (store, value) = settle(outcome, budget)?;
        inv.set_scratch(PreflightStore { store, instance });
        Ok(value)
    }
}

/// What a record (the artifact cache's sidecar, or the bundled tools'
/// snapshot) says about a component that is not yet compiled.
struct Recorded {
    descriptor: Descriptor,
    imports: Vec<(String, Needs)>,
    /// Whether the record is the snapshot's, which must be confirmed by
    /// the component's own `describe()` before its first use.
    listed: bool,
}

impl Recorded {
    /// The tool as recorded; `None` unless the record still checks out:
    /// imports the linker allows and a valid descriptor, cleaned again (a
    /// record may come from a build whose cleaning rules were older;
    /// cleaning is idempotent).
    fn into_tool(
        self,
        engine: &Engine,
        bytes: &Bytes,
        digest: &str,
        cache_key: Option<String>,
        origin: &ToolOrigin,
    ) -> Option<WasmTool> {
        let mut descriptor = self.descriptor;
        sanitize::clean_descriptor(&mut descriptor);
        let allowed = self
            .imports
            .iter()
            .all(|(name, needs)| linker::classify_import(name).ok() == Some(*needs));
        if !allowed || !descriptor.problems().is_empty() {
            return None;
        }
        Some(WasmTool {
            name: Arc::from(descriptor.name.as_str()),
            descriptor,
            origin: origin.clone(),
            engine: engine.clone(),
            imports: self.imports,
            bytes: bytes.clone(),
            digest: digest.to_string(),
            cache_key,
            listed: self.listed,
            pre: OnceCell::new(),
        })
    }
}

/// Remembers in the artifact cache that the component of `key` failed to
/// load under these limits (unless the host failed, not the component).
async fn remember_failure(engine: &Engine, key: String, error: LoadError) {
    // The host's own failure says nothing of the component: the next
    // start tries again.
    if matches!(error, LoadError::Host(_)) {
        return;
    }
    let engine = engine.clone();
    let _ = tokio::task::spawn_blocking(move || {
        if let Some(cache) = engine.cache() {
            cache.store_failure(&key, &failure_fingerprint(&engine), &error);
        }
    })
    .await;
}

/// Why the component of `key` failed to load before under these limits,
/// if the artifact cache remembers that it did.
async fn remembered_failure(engine: &Engine, key: &str) -> Option<LoadError> {
    let (engine, key) = (engine.clone(), key.to_string());
    tokio::task::spawn_blocking(move || {
        let error = engine
            .cache()?
            .failure(&key, &failure_fingerprint(&engine))?;
        tracing::debug!(
            key,
            "not loaded again: it failed before with the same bytes and limits"
        );
        Some(error)
    })
    .await
    .ok()
    .flatten()
}

/// What a load failure depends on besides the bytes: the limits, and the
/// imports the linker allows (a component refused for an import is tried
/// again once a new version of Airlock provides it).
fn failure_fingerprint(engine: &Engine) -> String {
    blake3::hash(format!("{:?} {:?}", engine.limits(), super::linker::ALLOWED).as_bytes())
        .to_hex()
        .to_string()
}

/// The BLAKE3 hash of `bytes` as hex, computed on a blocking thread.
async fn digest(bytes: &Bytes) -> String {
    let bytes = bytes.clone();
    let hash = move || blake3::hash(&bytes).to_hex().to_string();
    match tokio::task::spawn_blocking(hash.clone()).await {
        Ok(digest) => digest,
        Err(_) => hash(),
    }
}

/// Pre-instantiates a component against the shared linker, as the
/// `airlock:tool` world.
fn pre_instantiate(
    engine: &Engine,
    component: &Component,
) -> Result<Arc<PreInstantiated>, LoadError> {
    let instance_pre = engine
        .linker()
        .instantiate_pre(component)
        .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
    let not_a_tool = |e: wasmtime::Error| {
        LoadError::Compile(format!("it does not export the airlock:tool world: {e:#}"))
    };
    let exports = Exports::of(&instance_pre).map_err(not_a_tool)?;
    let pre = ToolComponentPre::new(instance_pre).map_err(not_a_tool)?;
    Ok(Arc::new(PreInstantiated { pre, exports }))
}

/// Asks a component to describe itself, in a store with nothing granted,
/// and checks the descriptor.
async fn describe(
    engine: &Engine,
    pre: &ToolComponentPre<HostState>,
) -> Result<Descriptor, LoadError> {
    let limits = engine.limits();
    let budget = Duration::from_millis(limits.preflight_timeout_ms);
    let grants = CallGrants::nothing(budget, limits.memory_mib << 20);
    let unnamed: Arc<str> = Arc::from("(describing)");
    let spec = StoreSpec {
        kind: SlotKind::Tool,
        name: unnamed.clone(),
        io: CallIo::new(
            unnamed,
            String::new(),
            ProgressSink::none(),
            CancellationToken::new(),
            None,
            0,
        ),
        grants: &grants,
        cwd: None,
    };
    let (mut store, instance) = instantiate(engine, spec, pre, |pre, s| {
        Box::pin(pre.instantiate_async(s))
    })
    .await
    .map_err(|e| LoadError::Describe(e.message))?;
    let armed = arm(&mut store, budget, None);
    let described = guard(&armed, None, store, move |s| {
        Box::pin(async move { instance.airlock_tool_tool().call_describe(s).await })
    })
    .await;
    let (_, wit_descriptor) =
        settle(described, budget).map_err(|e| LoadError::Describe(e.message))?;
    let descriptor = bindings::descriptor_from_wit(wit_descriptor, engine.output_bounds())
        .map_err(LoadError::Describe)?;
    let problems = descriptor.problems();
    if !problems.is_empty() {
        return Err(LoadError::InvalidDescriptor {
            tool: sanitize::clean_capped(&descriptor.name, Sink::Line, 80),
            problems,
        });
    }
    Ok(descriptor)
}
