//! The Wasm runtime: one [`Engine`](wasmtime::Engine) per process, components compiled
//! once (with an on-disk cache of precompiled artifacts), and a fresh sandboxed `Store` per
//! call with memory, time and output limits.
//!
//! Data flow: bytes → [`cache`] (compile or deserialize our own artifact) → [`plugin`]
//! (contract and import checks, `InstancePre`) → a call in a fresh [`sandbox`] store.

mod bindings;
pub mod cache;
pub mod engine;
pub mod error;
pub mod inspect;
pub mod limits;
mod loaded;
pub mod module;
pub mod plugin;
pub mod sandbox;
pub mod text;

pub use bindings::module_api;
pub use engine::{EngineOptions, WasmRuntime};
pub use error::{CallError, Failure, Fault, LoadError};
// Declared with the Plugin resource (the bottom layer), used here.
pub use crate::crd::{LimitsOverride, PluginKind};
pub use limits::Limits;
pub use loaded::Loaded;
pub use module::LoadedModule;
pub use plugin::{CallContext, CallSplit, LoadedPlugin};

/// Contract versions this host runs (`tessera:plugin@<version>`), as semver requirements.
pub const SUPPORTED_CONTRACTS: &[&str] = &["0.1"];
