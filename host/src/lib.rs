//! # tessera
//!
//! The Tessera host library: the sandboxed Wasm runtime ([`wasm`]), plugin chains
//! ([`plugins`]), rendering a Runtime into a Shoot ([`render`]) and the plugin author
//! harness ([`harness`]).

pub mod harness;
pub mod plugins;
pub mod render;
pub mod wasm;
