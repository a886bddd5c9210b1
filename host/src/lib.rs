//! # tessera
//!
//! The Tessera host library: the sandboxed Wasm runtime ([`wasm`]), plugin chains
//! ([`plugins`]), rendering a Runtime into a Shoot ([`render`]), the plugin author
//! harness ([`harness`]), and the operator: custom resources ([`crd`]), the Gardener client
//! ([`gardener`]), the controllers ([`controllers`]), [`metrics`] and [`operator`] wiring.

pub(crate) mod api;
pub mod controllers;
pub mod crd;
pub mod devenv;
pub mod fence;
pub mod gardener;
pub mod grants;
pub mod harness;
pub mod history;
pub mod input;
pub mod kubeconfig;
pub mod metrics;
pub mod modules;
pub mod oci;
pub mod operator;
pub(crate) mod packed;
pub mod paths;
pub mod pattern;
pub mod plugins;
pub mod render;
pub mod report;
pub mod time;
pub mod version;
pub mod wasm;
