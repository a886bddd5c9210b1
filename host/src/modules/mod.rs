//! Modules on a target cluster: what the ModuleSet controller and `tessera modules apply`
//! share, one way from the bottom up (`./x lint` refuses a cycle among these files):
//! [`types`], [`error`] → [`target`] (client, discovery, facts), [`inventory`],
//! [`ownership`], [`readiness`] → [`sharing`], [`observe`] (reads within the read grant),
//! [`source`] (which plugin version runs a module) → [`run`] (one module's run) →
//! [`conversation`] (the requirements loop with the plugin), [`check`] (the answer against
//! the write grant), [`apply`] (planning and writing), [`release`] (letting go) →
//! [`engine`] (one module's pass: install, remove, readiness) → [`set`] (versions,
//! dependency waves, configuration, aggregation).

pub(crate) mod apply;
pub(crate) mod check;
pub(crate) mod conversation;
pub(crate) mod engine;
pub(crate) mod error;
#[cfg(test)]
pub(crate) mod fixtures;
pub(crate) mod inventory;
pub(crate) mod observe;
pub(crate) mod readiness;
pub(crate) mod release;
pub(crate) mod run;
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
