//! What the benches' stores hold: WASI, and nothing behind the
//! `airlock:tool/host` imports (a guest's progress and logs go nowhere, it
//! is never cancelled and knows no file's read state).

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// The `airlock:tool` world's bindings (the benches' own, not documented).
pub mod wit {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "tool-component",
        imports: { default: trappable },
        exports: { default: async },
    });
}
pub use wit::*;

/// What a store holds: WASI, and nothing behind the host imports.
pub struct State {
    pub wasi: WasiCtx,
    pub table: ResourceTable,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl airlock::tool::types::Host for State {}

impl airlock::tool::host::Host for State {
    fn progress(&mut self, _: String, _: Option<f32>) -> wasmtime::Result<()> {
        Ok(())
    }
    fn log(&mut self, _: airlock::tool::host::LogLevel, _: String) -> wasmtime::Result<()> {
        Ok(())
    }
    fn cancelled(&mut self) -> wasmtime::Result<bool> {
        Ok(false)
    }
    fn file_read_state(
        &mut self,
        _: String,
    ) -> wasmtime::Result<Option<airlock::tool::types::FileStamp>> {
        Ok(None)
    }
    fn file_unchanged_since_read(&mut self, _: String) -> wasmtime::Result<Option<bool>> {
        Ok(None)
    }
}

/// `component` linked to WASI and the stubs, ready to instantiate.
pub fn pre(engine: &wasmtime::Engine, component: &Component) -> ToolComponentPre<State> {
    let mut linker = Linker::<State>::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).expect("WASI links");
    ToolComponent::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).expect("host links");
    ToolComponentPre::new(linker.instantiate_pre(component).expect("the tool links"))
        .expect("the component is a tool")
}
