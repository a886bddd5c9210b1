//! The Gardener API as Tessera uses it: Shoots (`core.gardener.cloud/v1beta1`), their
//! progress, and admin kubeconfigs. Everything goes through an ordinary Kubernetes client,
//! so the same code talks to real Gardener and to the test simulator.

mod errors;
mod kubeconfig;
mod shoot;
mod shoot_cache;

pub(crate) use errors::{
    ErrorClass, FORCE_DELETION_CODES, GardenerFailure, classify_codes, gardener_failure,
};
pub(crate) use kubeconfig::request_admin_kubeconfig;
#[cfg(test)]
pub(crate) use shoot::LastOperation;
pub use shoot::shoot_resource;
pub(crate) use shoot::{
    CONFIRM_DELETION, FORCE_DELETION, OPERATION_ANNOTATION, ShootClient, ShootError, ShootProgress,
    Source as ShootSource,
};
pub(crate) use shoot_cache::Freshness as ShootFreshness;

pub(crate) use crate::crd::FIELD_MANAGER;
