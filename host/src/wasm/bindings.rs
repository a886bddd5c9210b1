//! Host-side bindings generated from `wit/`.

pub mod shoot {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "shoot-extension",
    });
}

pub use shoot::exports::tessera::plugin::shoot_extension_api as shoot_api;
pub use shoot::tessera::plugin::types::{ErrorKind, LogLevel};
