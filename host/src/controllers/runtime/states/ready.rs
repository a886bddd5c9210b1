//! The Shoot is reconciled and the cluster prepared.

use kube::runtime::controller::Action;

use super::super::machine::{Machine, Transition};
use super::super::registry_cache;
use crate::controllers::{ReconcileError, runtime_cluster};
use crate::crd::{ConditionStatus, RuntimeState};
use crate::crd::{ConditionType, Reason};

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let name = m
        .status
        .shoot
        .as_ref()
        .map(|s| s.name.clone())
        .unwrap_or_default();
    m.set_state(RuntimeState::Ready);
    m.condition(
        ConditionType::Provisioned,
        ConditionStatus::True,
        Reason::ShootReady,
        format!("Shoot {name} is reconciled"),
    );
    m.status.observed_generation = Some(m.generation());
    // Kept by a Runtime whose reconciles copy registry credentials from its cluster.
    if !m.caches_waiting && !registry_cache::reads_cluster(m) {
        runtime_cluster::release(&m.ctx, &m.namespace(), &m.id());
    }
    // A registry cache whose credentials wait for this (new) cluster: copy them soon.
    if m.caches_waiting {
        return Ok(Transition::Stop(Action::requeue(
            m.ctx.config.requeue.pending,
        )));
    }
    Ok(Transition::Stop(match m.ctx.config.requeue.ready {
        Some(every) => Action::requeue(every),
        None => Action::await_change(),
    }))
}
