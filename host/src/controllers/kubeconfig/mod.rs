//! The RuntimeKubeconfig controller: fetch admin kubeconfigs from Gardener into Secrets,
//! rotate them before they expire, and remove the Secret with its owner.

mod binding;
mod cleanup;
mod controller;
mod decide;
mod reconcile;

pub(crate) use binding::{owns, unbound};
pub(crate) use cleanup::remove_orphaned_secrets;
pub(crate) use controller::run;
