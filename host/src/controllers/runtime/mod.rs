//! The Runtime controller: Runtime → Gardener Shoot → kubeconfig → post-provisioning.
//!
//! `machine.rs` runs the steps; each step is one file in `states/` and returns the next
//! step or stops. To add a reconcile step, add a file there and a variant to [`Step`].

mod controller;
mod machine;
mod registry_cache;
pub mod replay;
mod seeds;
mod shoot_doc;
mod shoot_watch;
pub(crate) mod states;
mod takeover;

pub(crate) use controller::{run, tokio_stream_of};
