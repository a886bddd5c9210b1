//! The RuntimeAccess controller: least-privilege kubeconfigs for the consumers of a runtime
//! cluster — a ServiceAccount with the roles asked for, a token from the TokenRequest API
//! bound to a Secret of the runtime cluster (deleting it revokes the token), rotated before
//! it expires, and everything removed with the RuntimeAccess.

mod cluster;
mod controller;
mod decide;
mod reach;
mod reconcile;

pub(crate) use controller::run;
