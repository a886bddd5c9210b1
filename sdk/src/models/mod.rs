//! Typed views of the documents plugins read and write.
//!
//! Every object keeps the fields it does not model in a flattened `extra` map, so a plugin
//! that round-trips a Shoot never drops what another plugin (or Gardener) put there.

mod meta;
mod runtime;
mod shoot;
mod worker;

pub use meta::ObjectMeta;
pub use runtime::*;
pub use shoot::*;
pub use worker::*;

/// Unknown fields, kept verbatim.
pub type Extra = serde_json::Map<String, serde_json::Value>;
