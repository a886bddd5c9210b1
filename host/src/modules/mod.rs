//! Modules on a target cluster: what the ModuleSet controller and `tessera modules apply`
//! share. Data flow: [`source`] (which plugin version runs a module) → [`engine`] (the
//! requirements loop with [`observe`], then [`apply`], readiness from [`readiness`], prune
//! through the [`inventory`]) → [`set`] (dependency order, downgrade guard, aggregation).
//! [`target`] is the cluster: client, discovery cache and facts.

pub mod apply;
pub mod engine;
pub mod error;
pub mod inventory;
pub mod observe;
pub mod readiness;
pub mod set;
pub mod source;
pub mod target;

pub use error::ModuleError;
pub use inventory::{Entry, Inventory, ModuleRecord, ObjectKey};
pub use set::{ModuleReport, SetOutcome, SetRequest, State};
pub use source::{Candidate, DirectorySource, ModuleSource};
pub use target::Target;

/// Labels and annotations on every object a module applies.
pub mod labels {
    /// Which module applied the object (label, so watches can select managed objects).
    pub const MODULE: &str = "modules.tessera.dev/module";
    /// `<namespace>/<name>` of the ModuleSet (annotation: it may be longer than a label).
    pub const SET: &str = "modules.tessera.dev/set";
}

pub mod ownership;
