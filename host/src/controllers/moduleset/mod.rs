//! The ModuleSet controller: installs, upgrades, repairs and removes the modules of each
//! ModuleSet on its target cluster through `crate::modules`.
//!
//! - `controller.rs`: watches ModuleSets; wakes on catalog changes and on drift.
//! - `decide.rs`: what a pass decides — whether to look at the set, the status and Events
//!   after each outcome, when to look again — as pure functions.
//! - `reconcile.rs`: one pass — finalizer, target, `modules::set::reconcile_set`, then the
//!   status write and Events `decide.rs` chose.
//! - `targets.rs`: clients for target clusters from kubeconfig Secrets (or the local one).
//! - `turns.rs`: at most so many passes per target cluster at once.
//! - `drift.rs`: watches of managed objects on targets; a change by someone else
//!   re-queues the owning ModuleSet.

mod controller;
mod decide;
pub(crate) mod drift;
mod reconcile;
pub(crate) mod targets;
mod turns;

pub(crate) use controller::run;
