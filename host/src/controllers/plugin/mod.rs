//! The Plugin controller: resolves every version of a `Plugin` resource (tag → digest,
//! signature, pull, compile), publishes its channels to the catalog Runtimes render with,
//! and reports what it found in the resource's status.

mod controller;
mod decide;
mod reconcile;
mod spec;
mod versions;

pub(crate) use controller::run;
