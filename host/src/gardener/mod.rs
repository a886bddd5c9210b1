//! The Gardener API as Tessera uses it: Shoots (`core.gardener.cloud/v1beta1`), their
//! progress, and admin kubeconfigs. Everything goes through an ordinary Kubernetes client,
//! so the same code talks to real Gardener and to the test simulator.

mod errors;
mod kubeconfig;
mod shoot;

pub use errors::{ErrorClass, classify_codes};
pub use kubeconfig::{AdminKubeconfig, request_admin_kubeconfig};
pub use shoot::{
    CONFIRM_DELETION, FORCE_DELETION, LastOperation, OPERATION_ANNOTATION, ShootClient, ShootError,
    ShootProgress, shoot_resource,
};

pub use crate::crd::FIELD_MANAGER;
