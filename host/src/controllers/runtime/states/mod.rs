//! One file per state of the Runtime state machine (KIM's flow, watching instead of polling).
//!
//! Provisioning: initialise → create_shoot | select_processing → patch_shoot →
//! (shadow_render) → wait_for_shoot → handle_kubeconfig → create_namespaces → configure_oidc →
//! apply_admin_bindings → provisioning_info → ready.
//! Deletion: initialise → delete_kubeconfig → delete_shoot → remove_finalizer.

mod apply_admin_bindings;
mod configure_oidc;
mod create_namespaces;
mod create_shoot;
mod delete_kubeconfig;
mod delete_shoot;
mod handle_kubeconfig;
mod initialise;
mod patch_shoot;
mod provisioning_info;
mod ready;
mod remove_finalizer;
mod render;
mod select_processing;
mod shadow_render;
mod structured_auth;
mod wait_for_shoot;

pub(crate) use create_namespaces::up_to_date as namespaces_up_to_date;
pub(crate) use render::channel_choice;

use super::machine::{Machine, Step, Transition};
use crate::controllers::ReconcileError;

/// Run one step.
pub(crate) async fn run(step: Step, m: &mut Machine) -> Result<Transition, ReconcileError> {
    match step {
        Step::Initialise => initialise::run(m).await,
        Step::CreateShoot => create_shoot::run(m).await,
        Step::SelectProcessing => select_processing::run(m).await,
        Step::PatchShoot => patch_shoot::run(m).await,
        Step::ShadowRender => shadow_render::run(m).await,
        Step::WaitForShoot => wait_for_shoot::run(m).await,
        Step::HandleKubeconfig => handle_kubeconfig::run(m).await,
        Step::CreateNamespaces => create_namespaces::run(m).await,
        Step::ConfigureOidc => configure_oidc::run(m).await,
        Step::ApplyAdminBindings => apply_admin_bindings::run(m).await,
        Step::ProvisioningInfo => provisioning_info::run(m).await,
        Step::Ready => ready::run(m).await,
        Step::DeleteKubeconfig => delete_kubeconfig::run(m).await,
        Step::DeleteShoot => delete_shoot::run(m).await,
        Step::RemoveFinalizer => remove_finalizer::run(m).await,
    }
}
