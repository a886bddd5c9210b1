//! Deletion, first: the RuntimeKubeconfig (its controller removes the Secret).

use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;

use super::super::machine::{Machine, Step, Transition};
use crate::controllers::ReconcileError;
use crate::crd::{ConditionStatus, RuntimeKubeconfig};
use crate::crd::{ConditionType, Reason};

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let api: Api<RuntimeKubeconfig> = Api::namespaced(m.ctx.client.clone(), &m.namespace());
    let Some(existing) = api.get_opt(&m.id()).await? else {
        return Ok(Transition::Next(Step::DeleteShoot));
    };
    if existing.metadata.deletion_timestamp.is_none() {
        api.delete(&m.id(), &DeleteParams::default()).await?;
    }
    m.condition(
        ConditionType::Deprovisioned,
        ConditionStatus::Unknown,
        Reason::KubeconfigDeletionPending,
        "waiting for the kubeconfig Secret to be removed",
    );
    // Owned object: its disappearance wakes us.
    Ok(Transition::Stop(Action::requeue(
        m.ctx.config.requeue.pending,
    )))
}
