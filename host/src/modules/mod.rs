//! Modules on a target cluster: what the ModuleSet controller and `tessera modules apply`
//! share. Data flow: [`source`] (which plugin version runs a module) → [`engine`] (the
//! requirements loop with [`observe`], then [`apply`], readiness from [`readiness`], prune
//! through the [`inventory`]) → [`set`] (dependency order, downgrade guard, aggregation).
//! [`target`] is the cluster: client, discovery cache and facts.

pub(crate) mod apply;
pub(crate) mod engine;
pub(crate) mod error;
#[cfg(test)]
pub(crate) mod fixtures;
pub(crate) mod inventory;
pub(crate) mod observe;
pub(crate) mod readiness;
pub(crate) mod release;
pub mod set;
pub(crate) mod sharing;
pub(crate) mod source;
pub mod target;
pub(crate) mod types;
pub mod windows;

pub use error::ModuleError;
pub use set::{ModuleReport, SetOutcome, State};
pub use source::{Candidate, DirectorySource, ModuleSource};
pub use target::Target;

/// The labels and annotations on the objects modules apply are Tessera's
/// ([`crate::crd::labels`]).
pub(crate) use crate::crd::labels;

pub(crate) mod ownership;
