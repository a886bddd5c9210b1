//! Host-side bindings generated from `wit/`.

pub mod shoot {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "shoot-extension",
    });
}

pub use shoot::exports::tessera::plugin::shoot_extension_api as shoot_api;
pub use shoot::tessera::plugin::types::{ErrorKind, LogLevel};

pub mod module {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "module-reconciler",
        with: {
            "tessera:plugin/types": super::shoot::tessera::plugin::types,
            "tessera:plugin/host": super::shoot::tessera::plugin::host,
        },
    });
}

/// Types of the `module-reconciler-api` interface (inputs and outputs of module calls).
pub use module::exports::tessera::plugin::module_reconciler_api as module_api;
